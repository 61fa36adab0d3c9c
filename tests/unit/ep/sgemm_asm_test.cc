// The AVX2 SGEMM's inline-assembly 6x16 packed-panel sub-tile
// (sgemm_avx2_asm.h) against the intrinsic sub-tile it replaces, bit for
// bit, and whole packed-weight GEMMs with the assembly on and off.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/sgemm_avx2_asm.h"
#include "ep/cpu/sgemm_kernels.h"

namespace nee {
namespace {

using cpu::sgemm_internal::Avx2PanelSubTileIntrinsic;
using cpu::sgemm_internal::HaveSubTile6x16PanelAsm;
using cpu::sgemm_internal::SetAvx2PanelAssembly;
using cpu::sgemm_internal::SubTile6x16PanelAsm;

// Floats in [-1, 1), with every 17th an exact zero (and every 34th a
// negative zero): zeros and signed-zero sums are where a changed operation
// order (a multiply in place of the first FMA) would show.
std::vector<float> Values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i % 34 == 0 ? -0.f : i % 17 == 0 ? 0.f : dist(rng);
  return v;
}

// 32-byte aligned storage for a packed B run (the kernel loads it aligned).
struct AlignedFloats {
  explicit AlignedFloats(size_t n) : data(static_cast<float*>(std::aligned_alloc(32, (n * 4 + 31) / 32 * 32))) {}
  ~AlignedFloats() { std::free(data); }
  float* data;
};

bool AvailableHere() {
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx2);
  const bool avx2 = cpu::SgemmActiveIsa() == cpu::SgemmIsa::kAvx2;
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
  return avx2 && HaveSubTile6x16PanelAsm();
}

TEST(SgemmAssembly, SubTileMatchesIntrinsicBitwise) {
  if (!AvailableHere()) GTEST_SKIP() << "no AVX2, or the assembly is not built for this target";
  std::mt19937 rng(21);
  const int64_t ldc = 37;  // C rows wider than the tile, not a multiple of 8
  for (int64_t kc : {1, 2, 3, 4, 5, 7, 8, 9, 63, 255, 256})
    for (int64_t cols : {16, 15, 9})
      for (bool accumulate : {false, true})
        for (int64_t row0 : {0, 6}) {  // the sub-tile's first row in the 12-row A panel
          const std::vector<float> a = Values(static_cast<size_t>(kc * cpu::kSgemmTileRows), rng);
          // Two runs, as in a panel; the kernel reads the first and asks
          // for lines past it (the second) ahead.
          AlignedFloats b(static_cast<size_t>(2 * kc * cpu::kSgemmPanelRun));
          const std::vector<float> bv = Values(static_cast<size_t>(2 * kc * cpu::kSgemmPanelRun), rng);
          std::memcpy(b.data, bv.data(), bv.size() * sizeof(float));
          const std::vector<float> c0 = Values(static_cast<size_t>(6 * ldc), rng);
          std::vector<float> want = c0, got = c0;
          // Lines to fetch ahead (prefetches only: no effect on the bits),
          // whole trips of four steps or not, more than kc or fewer.
          const int64_t fetch_lines = (kc * 3) % 17 + 1;
          Avx2PanelSubTileIntrinsic()(kc, a.data() + row0, b.data, nullptr, want.data() + 3, ldc, cols, accumulate, nullptr, 0);
          SubTile6x16PanelAsm(kc, a.data() + row0, b.data, nullptr, got.data() + 3, ldc, cols, accumulate, b.data,
                              fetch_lines);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
              << "kc " << kc << " cols " << cols << " accumulate " << accumulate << " row0 " << row0;
        }
}

// Whole GEMMs with packed weights (where the 6x16 panel sub-tiles run) and
// plain B (in place / packed while read, then panels), at 1 and 2 threads:
// the same bits with the assembly as with the intrinsic kernel.
TEST(SgemmAssembly, GemmsMatchIntrinsicKernelBitwise) {
  if (!AvailableHere()) GTEST_SKIP() << "no AVX2, or the assembly is not built for this target";
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx2);
  std::mt19937 rng(22);
  ThreadPool pool(2);
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape& s : {Shape{128, 96, 768}, Shape{37, 75, 259}, Shape{13, 48, 1}, Shape{200, 33, 515}})
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool})
      for (float beta : {0.f, 0.5f}) {
        const std::vector<float> a = Values(static_cast<size_t>(s.m * s.k), rng);
        const std::vector<float> b = Values(static_cast<size_t>(s.k * s.n), rng);
        const std::vector<float> c0 = Values(static_cast<size_t>(s.m * s.n), rng);
        const cpu::MatrixView av{a.data(), s.k, 1}, bv{b.data(), s.n, 1};
        const cpu::SgemmPackedB pb(s.k, s.n, bv);
        std::vector<float> out[2][2];  // [assembly][packed B]
        for (int assembly = 0; assembly < 2; ++assembly) {
          ASSERT_EQ(SetAvx2PanelAssembly(assembly == 1), assembly == 1);
          out[assembly][0] = out[assembly][1] = c0;
          cpu::Sgemm(s.m, s.n, s.k, 1.f, av, bv, beta, out[assembly][0].data(), s.n, p);
          cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(av, 1.f), cpu::SgemmB(pb), beta, out[assembly][1].data(), s.n, p);
        }
        SetAvx2PanelAssembly(true);
        const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                                 (p ? " 2 threads" : " 1 thread") + " beta " + std::to_string(beta);
        for (int packed = 0; packed < 2; ++packed)
          EXPECT_EQ(0, std::memcmp(out[0][packed].data(), out[1][packed].data(), c0.size() * sizeof(float)))
              << what << (packed ? " packed B" : " plain B");
      }
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
}

}  // namespace
}  // namespace nee
