// SGEMM microbenchmark: GFLOP/s of nee's Sgemm (src/ep/cpu/sgemm.h) on square
// sizes and on GEMM shapes from BERT-base and ResNet-50, with the weights
// plain (packed per call) and packed beforehand, at each requested thread
// count, next to this machine's fp32 FMA peak measured by the same binary.
// The weights are B (k x n) for the square and BERT shapes (MatMul/Gemm) and
// A (m x k) for the ResNet convolutions (Conv multiplies weights by im2col).
//
//   nee_gemm_bench [--threads 1,2] [--seconds 0.3] [--isa avx512|avx2|portable] [--cpu-time]
//                  [--cold] [--only SUBSTRING-OF-SHAPE-NAME] [--shape MxNxK[a]]...
//                  [--no-asm] [--ab ROUNDS [--aa]]
//
// --no-asm: the AVX2 kernel's 6x16 packed-panel sub-tile in intrinsics
// instead of inline assembly (sgemm_avx2_asm.h). --ab N: each case N rounds
// alternating assembly and intrinsics in this process, printing the median,
// lowest and highest per-round ratio of median rates (assembly / intrinsics);
// with --aa both sides are the assembly, which measures the A/A spread.
//
// Timing: each case repeats the call for about --seconds and reports the
// median and the best per-call rate (wall clock). On a machine shared with
// other work the best is the closer estimate of what the code can do; with
// --cpu-time, one-thread cases are timed in this thread's CPU time instead,
// which other processes do not inflate. With --cold, each call takes the next
// of several copies of the weights (128 MiB in all), so they come from memory,
// as a model's do, instead of staying in L3 across calls.
//
// Peak: a loop of fused multiply-adds into 12 independent vector
// accumulators (registers only, no memory traffic; 12 chains cover the FMA
// latency on two pipes), in the widest ISA the kernel may use, timed in
// thread CPU time. Reported as GFLOP/s per core = 2 x lanes x FMAs / second.
// With AVX-512 VNNI the int8 multiply-add peak too (vpdpbusd chains alike), in GMAC/s per core, what the
// quantized models' notes compare their convolutions' rates with.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/sgemm_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_BENCH_X86 1
#endif

namespace {

using nee::ThreadPool;
using namespace nee::cpu;

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---- FMA peak ------------------------------------------------------------------

// Best of 7 runs of `loop` (20 M iterations each, thread CPU time): the operations it returns, times `per_op`,
// in G a second. The sink keeps the loop's sums alive.
template <typename Sink>
double BestRate(double (*loop)(int64_t, Sink*), double per_op) {
  double best = 0;
  Sink sink{};
  for (int rep = 0; rep < 7; ++rep) {
    const double t0 = ThreadCpuSeconds();
    const double ops = loop(20'000'000, &sink);
    best = std::max(best, per_op * ops / (ThreadCpuSeconds() - t0) / 1e9);
  }
  return sink == Sink(12345) ? 0 : best;
}

#ifdef NEE_BENCH_X86
// Returns FMAs x lanes performed, so the caller converts time into flops.
__attribute__((target("avx512f"), noinline)) double FmaLoopAvx512(int64_t iters, float* sink) {
  __m512 acc[12];
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1.f + 1e-3f * static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  alignas(64) float out[16];
  __m512 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_store_ps(out, s);
  *sink = out[0];
  return 12.0 * 16.0 * static_cast<double>(iters);
}

__attribute__((target("avx2,fma"), noinline)) double FmaLoopAvx2(int64_t iters, float* sink) {
  __m256 acc[12];
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(1.f + 1e-3f * static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  alignas(32) float out[8];
  __m256 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_store_ps(out, s);
  *sink = out[0];
  return 12.0 * 8.0 * static_cast<double>(iters);
}

// The int8 counterpart, for the quantized kernels' notes (a u8 x s8 conv or GEMM as a share of it): 12
// independent zmm vpdpbusd chains, each instruction 64 multiply-adds (16 lanes of four u8 x s8 products
// summed into int32). The asm barrier keeps the compiler from treating the operands as loop constants.
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) double VnniLoop(int64_t iters, int32_t* sink) {
  __m512i acc[12];
  __m512i x = _mm512_set1_epi8(3);
  const __m512i w = _mm512_set1_epi8(-2);
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], x, w);
    __asm__("" : "+v"(x));
  }
  __m512i s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t out[16];
  _mm512_store_si512(out, s);
  *sink = out[0];
  return 12.0 * 64.0 * static_cast<double>(iters);
}
#endif

// GMAC/s of one core's vpdpbusd (best of 7 runs, thread CPU time); 0 without AVX-512 VNNI.
double MeasureVnniPeak() {
#ifdef NEE_BENCH_X86
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vnni"))
    return 0;
  return BestRate(VnniLoop, 1.0);
#else
  return 0;
#endif
}

// Best of several runs of ~0.1 s each; GFLOP/s of one core.
double MeasurePeak(SgemmIsa isa, const char** how) {
#ifdef NEE_BENCH_X86
  double (*loop)(int64_t, float*) = nullptr;
  if (isa == SgemmIsa::kAvx512) {
    loop = FmaLoopAvx512;
    *how = "AVX-512: 12 independent zmm FMA chains";
  } else if (isa == SgemmIsa::kAvx2) {
    loop = FmaLoopAvx2;
    *how = "AVX2: 12 independent ymm FMA chains";
  }
  if (loop) return BestRate(loop, 2.0);  // two flops a multiply-add
#endif
  *how = "portable kernel: no peak measured";
  return 0;
}

// ---- GEMM cases ------------------------------------------------------------------

// `weights_are_a`: the constant operand is A (convolution: weights x im2col),
// else B (MatMul/Gemm: activations x weights). "packed" packs the constant one.
struct Shape {
  const char* name;
  int64_t m, n, k;
  bool weights_are_a = false;
};

struct Rate {
  double median, best;
};

// `cold`: the constant operand is one of several copies, taken in turn, that
// together exceed the last-level cache, so each call reads it from memory as
// a model's weights are read (a model's layers each have their own).
Rate TimeGemm(const Shape& s, bool prepacked, ThreadPool* pool, double seconds, bool cpu_time, bool cold) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int64_t weight_floats = s.weights_are_a ? s.m * s.k : s.k * s.n;
  constexpr int64_t kColdFloats = 32 << 20;  // 128 MiB of copies: four times this machine's L3
  const int64_t copies = cold ? std::max<int64_t>(2, (kColdFloats + weight_floats - 1) / weight_floats) : 1;
  std::vector<float> a(static_cast<size_t>(s.m * s.k * (s.weights_are_a ? copies : 1)));
  std::vector<float> b(static_cast<size_t>(s.k * s.n * (s.weights_are_a ? 1 : copies)));
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  const bool pack_b = prepacked && !s.weights_are_a, pack_a = prepacked && s.weights_are_a;
  std::vector<MatrixView> avs, bvs;
  std::vector<std::unique_ptr<SgemmPackedB>> packed_b;
  std::vector<std::unique_ptr<SgemmPackedA>> packed_a;
  for (int64_t i = 0; i < copies; ++i) {
    avs.push_back({a.data() + (s.weights_are_a ? i * s.m * s.k : 0), s.k, 1});
    bvs.push_back({b.data() + (s.weights_are_a ? 0 : i * s.k * s.n), s.n, 1});
    if (pack_b) packed_b.push_back(std::make_unique<SgemmPackedB>(s.k, s.n, bvs.back()));
    if (pack_a) packed_a.push_back(std::make_unique<SgemmPackedA>(s.m, s.k, 1.f, avs.back()));
  }
  int64_t turn = 0;
  auto call = [&] {
    const int64_t i = turn++ % copies;
    const SgemmA a_operand = pack_a ? SgemmA(*packed_a[i]) : SgemmA(avs[i]);
    const SgemmB b_operand = pack_b ? SgemmB(*packed_b[i]) : SgemmB(bvs[i]);
    Sgemm(s.m, s.n, s.k, a_operand, b_operand, 0.f, c.data(), s.n, pool);
  };
  call();  // warm up caches and per-thread buffers
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  std::vector<double> rates;
  double spent = 0;
  while (spent < seconds || rates.size() < 5) {
    const double t0 = cpu_time ? ThreadCpuSeconds() : WallSeconds();
    call();
    const double dt = (cpu_time ? ThreadCpuSeconds() : WallSeconds()) - t0;
    rates.push_back(flops / dt / 1e9);
    spent += dt;
    if (rates.size() >= 2000) break;
  }
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], rates.back()};
}

std::vector<int> ParseList(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  double seconds = 0.3;
  bool cpu_time = false;
  bool cold = false;
  std::string only;
  std::vector<Shape> extra;  // --shape MxNxK[a]: one more case ("a": the weights are A, as in a convolution)
  std::vector<std::string> extra_names;
  int ab_rounds = 0;
  bool aa = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) thread_counts = ParseList(argv[++i]);
    else if (arg == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (arg == "--cpu-time") cpu_time = true;
    else if (arg == "--cold") cold = true;
    else if (arg == "--no-asm") nee::cpu::sgemm_internal::SetAvx2PanelAssembly(false);
    else if (arg == "--ab" && i + 1 < argc) ab_rounds = std::atoi(argv[++i]);
    else if (arg == "--aa") aa = true;
    else if (arg == "--only" && i + 1 < argc) only = argv[++i];
    else if (arg == "--shape" && i + 1 < argc) {
      const std::string spec = argv[++i];
      long long m = 0, n = 0, k = 0;
      if (std::sscanf(spec.c_str(), "%lldx%lldx%lld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0) {
        std::fprintf(stderr, "--shape wants MxNxK (optionally ending in 'a': weights are A), got '%s'\n", spec.c_str());
        return 2;
      }
      extra_names.push_back(spec);
      extra.push_back({nullptr, m, n, k, spec.back() == 'a'});
    }
    else if (arg == "--isa" && i + 1 < argc) {
      const std::string isa = argv[++i];
      SgemmLimitIsa(isa == "portable" ? SgemmIsa::kPortable : isa == "avx2" ? SgemmIsa::kAvx2 : SgemmIsa::kAvx512);
    } else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--seconds S] [--isa avx512|avx2|portable] [--cpu-time] [--cold] [--only NAME] [--shape MxNxK[a]]... [--no-asm] [--ab N [--aa]]\n",
                   argv[0]);
      return 2;
    }
  }
  const char* how = "";
  const double peak = MeasurePeak(SgemmActiveIsa(), &how);
  std::printf("kernel: %s\nfp32 FMA peak per core: %.1f GFLOP/s (%s, thread CPU time, best of 7)\n",
              SgemmKernelName(), peak, how);
  if (const double vnni = MeasureVnniPeak(); vnni > 0)
    std::printf("int8 peak per core: %.1f GMAC/s (AVX-512 VNNI: 12 independent zmm vpdpbusd chains, 64 u8 x s8 "
                "multiply-adds each, thread CPU time, best of 7)\n", vnni);
  std::printf("timing: %s; GFLOP/s as median / best per call%s\n\n",
              cpu_time ? "thread CPU time at 1 thread, wall clock otherwise" : "wall clock",
              cold ? "; weights cold (copies in turn, 128 MiB)" : "");
  std::vector<Shape> shapes = {
      {"square 256", 256, 256, 256},          {"square 512", 512, 512, 512},
      {"square 1024", 1024, 1024, 1024},      {"square 2048", 2048, 2048, 2048},
      {"bert qkv/out 128x768x768", 128, 768, 768}, {"bert ffn1 128x3072x768", 128, 3072, 768},
      {"bert ffn2 128x768x3072", 128, 768, 3072},  {"bert 1 token 1x768x768", 1, 768, 768},
      {"bert 8 tokens 8x3072x768", 8, 3072, 768},  {"resnet conv2 64x3136x576", 64, 3136, 576, true},
      {"resnet conv5 512x49x4608", 512, 49, 4608, true},  {"resnet conv4 256x196x2304", 256, 196, 2304, true},
  };
  for (size_t i = 0; i < extra.size(); ++i) extra[i].name = extra_names[i].c_str();
  if (!extra.empty()) shapes = extra;  // only the cases asked for
  std::printf("%-28s %-8s %7s %17s %7s\n", "shape (m x n x k)", "weights", "threads", "GFLOP/s", "%peak");
  for (const Shape& s : shapes) {
    if (!only.empty() && std::string(s.name).find(only) == std::string::npos) continue;
    for (bool prepacked : {false, true})
      for (int threads : thread_counts) {
        ThreadPool pool(threads);
        if (ab_rounds > 0) {
          std::vector<double> ratios, on, off;
          for (int round = 0; round < ab_rounds; ++round) {
            for (int side = 0; side < 2; ++side) {
              // Which side goes first alternates, so neither always follows the other.
              const bool assembly_side = (side == 0) == (round % 2 == 0);
              nee::cpu::sgemm_internal::SetAvx2PanelAssembly(assembly_side || aa);
              const double rate = TimeGemm(s, prepacked, &pool, seconds, cpu_time && threads == 1, cold).median;
              (assembly_side ? on : off).push_back(rate);
            }
            ratios.push_back(on.back() / off.back());
          }
          nee::cpu::sgemm_internal::SetAvx2PanelAssembly(true);
          auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
          };
          std::sort(ratios.begin(), ratios.end());
          std::printf("%-28s %-8s %7d %s %6.1f vs %6.1f  ratio median %.4f [%.4f, %.4f] over %d rounds\n", s.name,
                      prepacked ? "packed" : "plain", threads, aa ? "A/A" : "asm/intrinsics", median(on), median(off),
                      median(ratios), ratios.front(), ratios.back(), ab_rounds);
          std::fflush(stdout);
          continue;
        }
        const Rate r = TimeGemm(s, prepacked, &pool, seconds, cpu_time && threads == 1, cold);
        std::printf("%-28s %-8s %7d %8.1f / %6.1f %6.0f%%\n", s.name, prepacked ? "packed" : "plain", threads,
                    r.median, r.best, peak > 0 ? 100.0 * r.median / (peak * threads) : 0.0);
        std::fflush(stdout);
      }
  }
  return 0;
}
