// The AVX-512 3x3 stride-1 depthwise rows of BlockedConv
// (ep/cpu/depthwise_blocked_avx512.cc), called directly on blocked planes:
//  - against a double-precision direct sum written here (taps outside the
//    image left out), on planes from 1x1 to 30 wide and tall (odd widths: a
//    last pair with one pixel; widths above 14: several tiles a row), pads 0
//    and 1, with and without bias and residual, the activations it finishes
//    (None, Relu, Clip, SiLU) and one it leaves to the caller (HardSwish:
//    sums only);
//  - the same bits whichever way the output rows are cut into strips (how
//    RunDepthwise shares them among threads);
//  - not taken where it does not apply (stride 2, a pad of 2, a grouped conv,
//    below AVX-512).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu/depthwise_blocked_avx512.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using Kind = FusedActivation::Kind;
constexpr int64_t kB = kChannelBlock;

struct Plane {
  int64_t H, W, pad;
};

// One channel block's depthwise conv, every output in double: bias + the
// taps inside the image, then (when `finish`) + z and the activation.
std::vector<float> Expected(const BlockedConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w9,
                            const float* bias8, const float* z, bool finish) {
  std::vector<float> y(static_cast<size_t>(g.OH * g.OW * kB));
  for (int64_t oh = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow)
      for (int64_t l = 0; l < kB; ++l) {
        double sum = bias8[l];
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t ih = oh - g.pt + kh, iw = ow - g.pl + kw;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
            sum += static_cast<double>(x[static_cast<size_t>((ih * g.W + iw) * kB + l)]) * w9[(kh * 3 + kw) * kB + l];
          }
        const size_t at = static_cast<size_t>((oh * g.OW + ow) * kB + l);
        if (finish) {
          if (z) sum += z[at];
          sum = ApplyFusedActivation(g.act, sum);
        }
        y[at] = static_cast<float>(sum);
      }
  return y;
}

BlockedConvGeometry DepthwiseGeometry(const Plane& p, int64_t stride) {
  BlockedConvGeometry g;
  g.N = 1, g.C = g.M = g.group = kB;
  g.H = p.H, g.W = p.W, g.KH = g.KW = 3, g.sh = g.sw = stride, g.pt = g.pl = p.pad;
  g.OH = (p.H + 2 * p.pad - 3) / stride + 1, g.OW = (p.W + 2 * p.pad - 3) / stride + 1;
  return g;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

bool HasAvx512() { return cpu::SgemmActiveIsa() == cpu::SgemmIsa::kAvx512; }

TEST(BlockedDepthwiseAvx512, AgreesWithADirectSumWhateverTheStrips) {
  if (!HasAvx512()) GTEST_SKIP() << "needs AVX-512F (the kernel runs only there)";
  std::mt19937 rng(11);
  const std::vector<Plane> planes = {{1, 1, 1},  {2, 3, 1},  {7, 7, 1},  {14, 14, 1}, {5, 15, 1},
                                     {9, 16, 1}, {6, 29, 1}, {30, 30, 1}, {8, 9, 0},  {3, 4, 0}};
  // Sigmoid: one the rows leave to the finishing pass.
  std::vector<FusedActivation> acts(6);
  acts[1].kind = Kind::kRelu;
  acts[2].kind = Kind::kClip, acts[2].a = 0.f, acts[2].b = 1.5f;
  acts[3].kind = Kind::kSilu;
  acts[4].kind = Kind::kHardSwish;
  acts[5].kind = Kind::kSigmoid;
  for (const Plane& p : planes) {
    BlockedConvGeometry g = DepthwiseGeometry(p, 1);
    const std::vector<float> x = Random(static_cast<size_t>(g.H * g.W * kB), rng);
    const std::vector<float> w9 = Random(9 * kB, rng), bias = Random(kB, rng);
    const std::vector<float> z = Random(static_cast<size_t>(g.OH * g.OW * kB), rng);
    for (const FusedActivation& act : acts)
      for (bool with_z : {false, true})
        for (bool with_bias : {false, true}) {
          g.act = act;
          g.z = with_z ? z.data() : nullptr;
          const std::vector<float> zeros(kB, 0.f);
          const float* b8 = with_bias ? bias.data() : zeros.data();
          const cpu::BlockedDepthwiseRows rows = cpu::BlockedDepthwiseAvx512For(g);
          ASSERT_NE(rows.fn, nullptr);
          const bool finish = act.kind != Kind::kSigmoid;
          EXPECT_EQ(rows.finishes, finish);
          // As RunDepthwise calls it: the residual only to rows that finish.
          const float* zf = finish ? g.z : nullptr;
          const std::vector<float> want = Expected(g, x, w9, b8, zf, finish);
          const std::string what = std::to_string(p.H) + "x" + std::to_string(p.W) + " pad " +
                                   std::to_string(p.pad) + " act " + std::to_string(static_cast<int>(act.kind)) +
                                   (with_z ? " z" : "") + (with_bias ? " bias" : "");
          // All rows at once, then one row a call, then strips of 3 rows.
          std::vector<float> whole(want.size()), single(want.size()), threes(want.size());
          rows.fn(g, x.data(), w9.data(), b8, whole.data(), zf, 0, g.OH);
          for (int64_t oh = 0; oh < g.OH; ++oh) rows.fn(g, x.data(), w9.data(), b8, single.data(), zf, oh, oh + 1);
          for (int64_t oh = 0; oh < g.OH; oh += 3)
            rows.fn(g, x.data(), w9.data(), b8, threes.data(), zf, oh, std::min(g.OH, oh + 3));
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(whole[i], want[i], 2e-5f + 2e-5f * std::fabs(want[i])) << what << " at " << i;
            ASSERT_EQ(single[i], whole[i]) << what << " one row a call, at " << i;
            ASSERT_EQ(threes[i], whole[i]) << what << " strips of 3, at " << i;
          }
        }
  }
}

TEST(BlockedDepthwiseAvx512, LeavesOtherGeometriesAndIsasToTheCaller) {
  // Taken exactly where AVX-512 is active (NEE_MAX_ISA=avx2 or a CPU without it: never).
  EXPECT_EQ(cpu::BlockedDepthwiseAvx512For(DepthwiseGeometry({14, 14, 1}, 1)).fn != nullptr, HasAvx512());
  EXPECT_EQ(cpu::BlockedDepthwiseAvx512For(DepthwiseGeometry({14, 14, 1}, 2)).fn, nullptr);  // stride 2
  EXPECT_EQ(cpu::BlockedDepthwiseAvx512For(DepthwiseGeometry({14, 14, 2}, 1)).fn, nullptr);  // pad 2
  BlockedConvGeometry pointwise = DepthwiseGeometry({14, 14, 1}, 1);
  pointwise.group = 1;
  EXPECT_EQ(cpu::BlockedDepthwiseAvx512For(pointwise).fn, nullptr);
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx2);
  EXPECT_EQ(cpu::BlockedDepthwiseAvx512For(DepthwiseGeometry({14, 14, 1}, 1)).fn, nullptr);
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
}

}  // namespace
}  // namespace nee
