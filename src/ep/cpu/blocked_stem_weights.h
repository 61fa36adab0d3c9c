// The stem kernels' packed weights (blocked_stem_avx512.cc and
// blocked_stem_avx2.cc read the same layout): for each unit of sixteen
// output channels (two blocks: one zmm, or two ymm), input channel and tap,
// the sixteen weights side by side.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "base/huge_pages.h"
#include "ep/cpu/packed_weights.h"
#include "ops/blocked_conv.h"

namespace nee::cpu {

constexpr int64_t kStemUnitLanes = 2 * kChannelBlock;

// w [units][C][KH][KW][16]; bias [units * 16]; channels past M 0.
struct StemWeights {
  HugePageVector<float> w;
  std::vector<float> bias;
};

inline std::shared_ptr<const StemWeights> PackStemWeights(const BlockedConvGeometry& g) {
  auto p = std::make_shared<StemWeights>();
  const int64_t units = (g.Mb() + 1) / 2, taps = g.KH * g.KW;
  p->w.assign(static_cast<size_t>(units * g.C * taps * kStemUnitLanes), 0.f);
  p->bias.assign(static_cast<size_t>(units * kStemUnitLanes), 0.f);
  for (int64_t m = 0; m < g.M; ++m) {
    const int64_t unit = m / kStemUnitLanes, lane = m % kStemUnitLanes;
    if (g.bias) p->bias[static_cast<size_t>(m)] = g.bias[m];
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        p->w[static_cast<size_t>(((unit * g.C + c) * taps + t) * kStemUnitLanes + lane)] =
            g.w[(m * g.C + c) * taps + t];
  }
  return p;
}

// Packed once per session when the weights and bias are constants (one
// layout for both kernels, so one cache entry whichever ISA runs).
inline std::shared_ptr<const StemWeights> StemWeightsFor(KernelContext& ctx, const BlockedConvGeometry& g) {
  return PackedOnce<StemWeights>(ctx, {g.M, g.C, g.KH, g.KW}, {1, 2}, [&] { return PackStemWeights(g); });
}

}  // namespace nee::cpu
