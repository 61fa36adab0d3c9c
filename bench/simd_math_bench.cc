// simd_math.h's sigmoid, SiLU (x times it), tanh and GELU (erf form) on eight and sixteen
// lanes: ns per element over 2048 floats in L1 (inputs spread over [-8, 8],
// where activations live), a loop of one vector at a time as the kernels'
// finish passes run it. Each function is timed in many short rounds,
// interleaved with the others, and the fastest round kept, since the machine
// is shared. A microbenchmark, not a test: built with the project, never run
// by the tests. Build it against an older simd_math.h for "before" numbers
// (-DNEE_BENCH_NO_TANH16 where Tanh16 did not exist yet).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "ep/cpu/simd_math.h"

// GCC 12 warns about the _mm512_undefined_ps() inside its own intrinsics once inlined (a false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#if defined(__x86_64__) || defined(__i386__)
namespace {

using nee::cpu::Sigmoid16;
using nee::cpu::Sigmoid8;
using nee::cpu::Tanh8;

constexpr int kN = 2048;

enum class Fn { kSigmoid, kSilu, kTanh, kGeluErf };

template <Fn F>
__attribute__((target("avx2,fma"))) void Map8(const float* x, float* y) {
  for (int i = 0; i < kN; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 r;
    if constexpr (F == Fn::kSigmoid) r = Sigmoid8(v);
    if constexpr (F == Fn::kSilu) r = _mm256_mul_ps(v, Sigmoid8(v));
    if constexpr (F == Fn::kTanh) r = Tanh8(v);
    if constexpr (F == Fn::kGeluErf) r = nee::cpu::GeluErfOp{}(v);
    _mm256_storeu_ps(y + i, r);
  }
}

template <Fn F>
__attribute__((target("avx512f"))) void Map16(const float* x, float* y) {
  for (int i = 0; i < kN; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    __m512 r = v;
    if constexpr (F == Fn::kSigmoid) r = Sigmoid16(v);
    if constexpr (F == Fn::kSilu) r = _mm512_mul_ps(v, Sigmoid16(v));
#ifndef NEE_BENCH_NO_TANH16
    if constexpr (F == Fn::kTanh) r = nee::cpu::Tanh16(v);
#endif
    if constexpr (F == Fn::kGeluErf) r = nee::cpu::GeluErfOp{}(v);
    _mm512_storeu_ps(y + i, r);
  }
}

struct Case {
  const char* name;
  void (*fn)(const float*, float*);
  bool avx512;
  double best = 1e30;
};

}  // namespace

int main() {
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  if (!has_avx2) {
    std::printf("needs AVX2+FMA\n");
    return 0;
  }
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) x[i] = -8.f + 16.f * static_cast<float>((i * 797) % kN) / kN;
  std::vector<Case> cases = {{"Sigmoid8", Map8<Fn::kSigmoid>, false}, {"SiLU8", Map8<Fn::kSilu>, false},
                             {"Tanh8", Map8<Fn::kTanh>, false},       {"Sigmoid16", Map16<Fn::kSigmoid>, true},
                             {"SiLU16", Map16<Fn::kSilu>, true},      {"GeluErf8", Map8<Fn::kGeluErf>, false},
                             {"GeluErf16", Map16<Fn::kGeluErf>, true}};
#ifndef NEE_BENCH_NO_TANH16
  cases.push_back({"Tanh16", Map16<Fn::kTanh>, true});
#endif
  constexpr int kRounds = 300, kRepeats = 50;
  for (int round = 0; round < kRounds; ++round)
    for (Case& c : cases) {
      if (c.avx512 && !has_avx512) continue;
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < kRepeats; ++r) c.fn(x.data(), y.data());
      const auto t1 = std::chrono::steady_clock::now();
      const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / (kRepeats * double{kN});
      c.best = std::min(c.best, ns);
    }
  for (const Case& c : cases)
    if (!c.avx512 || has_avx512) std::printf("%-10s %.3f ns/element\n", c.name, c.best);
  return 0;
}
#else
int main() { return 0; }
#endif
