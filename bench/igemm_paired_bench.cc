// The paired u8 x s8 GEMM (src/ep/cpu/igemm_u8s8_paired.cc) on BERT-base's
// dynamically quantized shapes (128 x 768 x 768, 128 x 768 x 3072,
// 128 x 3072 x 768), one thread, float epilogue (scale and bias) as
// MatMulIntegerToFloat runs it: GMAC/s from the minimum of this thread's CPU
// time over --reps calls, and that of the tile loop alone (A packed already).
// The weights are read from raw int8 files (w_KxN.bin in --weights DIR, e.g.
// the model's own, dumped with onnx) or else drawn normal with BERT's spread.
//
//   nee_igemm_paired_bench [--weights DIR] [--reps N] [--m M] [--cold]
#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu/igemm.h"

namespace {

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::vector<int8_t> Weights(const std::string& dir, int64_t k, int64_t n, std::mt19937& rng) {
  std::vector<int8_t> w(static_cast<size_t>(k * n));
  if (!dir.empty()) {
    const std::string path = dir + "/w_" + std::to_string(k) + "x" + std::to_string(n) + ".bin";
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      const size_t got = std::fread(w.data(), 1, w.size(), f);
      std::fclose(f);
      if (got == w.size()) return w;
    }
    std::fprintf(stderr, "cannot read %s; normal weights instead\n", path.c_str());
  }
  std::normal_distribution<float> dist(0.0f, 25.0f);
  for (auto& e : w) e = static_cast<int8_t>(std::clamp(std::nearbyint(dist(rng)), -127.0f, 127.0f));
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int reps = 200;
  int64_t m = 128;
  bool cold = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--cold") {
      cold = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (arg == "--weights") dir = argv[i + 1];
    else if (arg == "--reps") reps = std::atoi(argv[i + 1]);
    else if (arg == "--m") m = std::atoll(argv[i + 1]);
    ++i;
  }
  std::mt19937 rng(7);
  std::vector<std::array<int64_t, 2>> shapes = {{768, 768}, {768, 3072}, {3072, 768}};
  if (const char* kn = std::getenv("NEE_BENCH_KN")) {  // e.g. 128x768: one other shape first
    shapes.insert(shapes.begin(), {std::atoll(kn), std::atoll(std::strchr(kn, 'x') + 1)});
  }
  std::vector<double> times;
  for (const auto& s : shapes) {
    const int64_t k = s[0], n = s[1];
    const std::vector<int8_t> w = Weights(dir, k, n, rng);
    // --cold: calls cycle through copies of the packed weights (96 MiB in all), so that B comes from
    // memory as a model's weights do, not from L3.
    const size_t copies = cold ? static_cast<size_t>((96 << 20) / (k * n)) : 1;
    std::vector<nee::cpu::IgemmPackedS8Paired> packs(copies);
    for (auto& pb : packs)
      if (!nee::cpu::IgemmPackS8Paired(k, n, w.data(), n, 1.0, &pb)) return 1;
    const nee::cpu::IgemmPackedS8Paired& pb = packs[0];  // for its remainder count
    // A as DynamicQuantizeLinear leaves a layer-normed activation: centred on its zero point.
    std::normal_distribution<float> adist(128.0f, 30.0f);
    std::vector<uint8_t> a(static_cast<size_t>(m * k));
    for (auto& e : a) e = static_cast<uint8_t>(std::clamp(std::nearbyint(adist(rng)), 0.0f, 255.0f));
    std::vector<float> scale(static_cast<size_t>(n), 0.001f), bias(static_cast<size_t>(n), 0.5f);
    // --cold: the outputs cycle too (as a model's activations, which were last touched long before).
    std::vector<std::vector<float>> outs(copies, std::vector<float>(static_cast<size_t>(m * n)));
    const std::vector<float>& out = outs[0];
    const int32_t za = 131, zb = 0;
    double best = 1e9;
    for (int r = 0; r < reps; ++r) {
      const double t0 = ThreadCpuSeconds();
      const size_t copy = static_cast<size_t>(r) % copies;
      nee::cpu::IgemmFloatOut fout{outs[copy].data(), n, scale.data(), 1, bias.data()};
      nee::cpu::IgemmU8S8Paired(nullptr, a.data(), m, k, packs[copy], &za, 0, &zb, 0, nullptr, 0, &fout);
      best = std::min(best, ThreadCpuSeconds() - t0);
    }
    double check = 0;
    for (float v : out) check += v;
    const double macs = static_cast<double>(m) * k * n;
    times.push_back(best);
    std::printf("%4lld x %4lld x %4lld: %8.1f us  %6.1f GMAC/s  (%zu remainders; check %.6g)\n",
                static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n), best * 1e6,
                macs / best / 1e9, pb.remainders.size(), check);
  }
  // A BERT-base layer: Q, K, V and the attention output (768 x 768), then the two feed-forward products.
  const size_t t0 = times.size() - 3;
  const double layer = 4 * times[t0] + times[t0 + 1] + times[t0 + 2];
  std::printf("BERT-base layer: %.1f us, %.1f GMAC/s; x12 layers %.2f ms\n", layer * 1e6,
              static_cast<double>(m) * 768 * 768 * 12 / layer / 1e9, 12 * layer * 1e3);
  return 0;
}
