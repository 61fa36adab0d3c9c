// The optimized SGEMM and the MatMul/Gemm kernels built on it, checked
// against plain double-precision loops and against the reference kernels.
#include "ep/cpu/sgemm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  return testing::RandomFloats(static_cast<int64_t>(n), rng);
}

// Runs each test once per micro-kernel: AVX-512, AVX2 and portable (a kernel
// this CPU lacks is skipped).
class SgemmTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override {
    cpu::SgemmLimitIsa(GetParam());
    if (cpu::SgemmActiveIsa() != GetParam()) GTEST_SKIP() << "this CPU lacks the kernel";
  }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

// A matrix stored with a leading dimension wider than its rows, so strides
// are exercised: element (i, j) of the logical rows x cols matrix at
// data[i * ld + j] (or data[j * ld + i] when transposed).
struct Stored {
  std::vector<float> data;
  int64_t ld;
  bool transposed;
  float at(int64_t i, int64_t j) const { return transposed ? data[j * ld + i] : data[i * ld + j]; }
  cpu::MatrixView view() const { return transposed ? cpu::MatrixView{data.data(), 1, ld} : cpu::MatrixView{data.data(), ld, 1}; }
};

Stored RandomStored(int64_t rows, int64_t cols, bool transposed, int64_t pad, std::mt19937& rng) {
  const int64_t ld = (transposed ? rows : cols) + pad;
  return {RandomVector(static_cast<size_t>((transposed ? cols : rows) * ld), rng), ld, transposed};
}

// alpha * A B + beta * C in double, from the stored matrices: the oracle.
std::vector<float> Naive(int64_t m, int64_t n, int64_t k, float alpha, const Stored& a, const Stored& b, float beta,
                         const std::vector<float>& c, int64_t ldc) {
  std::vector<float> out = c;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a.at(i, p)) * b.at(p, j);
      out[i * ldc + j] = static_cast<float>(alpha * s + (beta == 0.f ? 0.0 : double(beta) * c[i * ldc + j]));
    }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, int64_t k, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  // Float sums of k products of values in [-1, 1): error grows with k.
  const double tol = 2e-6 * (4 + static_cast<double>(k));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

bool BitwiseEqual(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

struct Case {
  int64_t m, n, k;
};

// Odd sizes on both sides of the 12x32 tile, k across several 256-deep blocks.
const std::vector<Case>& OddCases() {
  static const std::vector<Case> cases = {{1, 1, 1},     {7, 5, 3},     {12, 32, 1},   {13, 33, 17},
                                          {31, 65, 257}, {33, 17, 513}, {65, 129, 7},  {129, 31, 33},
                                          {1, 200, 65},  {200, 1, 129}, {17, 7, 1100}, {150, 70, 300}};
  return cases;
}

TEST_P(SgemmTest, KernelNameMatches) {
  const std::string name = cpu::SgemmKernelName();
  EXPECT_EQ(name, GetParam() == cpu::SgemmIsa::kAvx512 ? "avx512" : GetParam() == cpu::SgemmIsa::kAvx2 ? "avx2-fma" : "portable");
}

TEST_P(SgemmTest, MatchesNaiveOnOddShapesStridesTransposesAlphaBeta) {
  std::mt19937 rng(42);
  ThreadPool pool(3);
  int variant = 0;
  for (const Case& s : OddCases())
    for (int trans = 0; trans < 4; ++trans, ++variant) {
      const bool ta = trans & 1, tb = trans & 2;
      const int64_t pad = variant % 3;  // leading dimensions wider than the matrix
      Stored a = RandomStored(s.m, s.k, ta, pad, rng), b = RandomStored(s.k, s.n, tb, pad, rng);
      const int64_t ldc = s.n + (variant % 2) * 5;
      std::vector<float> c = RandomVector(static_cast<size_t>(s.m * ldc), rng);
      const float alpha = variant % 4 == 0 ? 1.f : 0.75f;
      const float beta = trans == 3 ? 0.f : trans == 2 ? 1.f : -0.5f;
      const auto want = Naive(s.m, s.n, s.k, alpha, a, b, beta, c, ldc);
      std::vector<float> got = c;
      cpu::Sgemm(s.m, s.n, s.k, alpha, a.view(), b.view(), beta, got.data(), ldc, variant % 2 ? &pool : nullptr);
      ExpectNear(got, want, s.k, std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                                     " trans " + std::to_string(trans));
    }
}

// B wider than one per-call packing block (with k this deep, blocks are 256
// columns) and k deeper than one depth range (8192): still the naive result,
// and packing beforehand or more threads change no bit.
TEST_P(SgemmTest, ManyColumnBlocksAndDepthRanges) {
  std::mt19937 rng(9);
  const int64_t m = 5, n = 600, k = 8200;
  Stored a = RandomStored(m, k, false, 0, rng), b = RandomStored(k, n, false, 0, rng);
  std::vector<float> c(m * n, 0.f);
  const auto want = Naive(m, n, k, 1.f, a, b, 0.f, c, n);
  ThreadPool pool(2);
  cpu::Sgemm(m, n, k, 1.f, a.view(), b.view(), 0.f, c.data(), n, &pool);
  ExpectNear(c, want, k, "5x600x8200");
  std::vector<float> packed(m * n, 0.f);
  const cpu::SgemmPackedB pb(k, n, b.view());
  const cpu::SgemmPackedA pa(m, k, 1.f, a.view());
  cpu::Sgemm(m, n, k, cpu::SgemmA(pa), cpu::SgemmB(pb), 0.f, packed.data(), n, nullptr);
  EXPECT_TRUE(BitwiseEqual(c, packed));
}

// B packed over its own bytes holds the same panels as B packed into new
// memory: depths below, at and past one depth block (256), widths of one and
// several panels. The product through it is bitwise the same.
TEST_P(SgemmTest, PackingBInPlaceGivesTheSamePanels) {
  std::mt19937 rng(31);
  for (int64_t k : {1, 7, 256, 300, 513})
    for (int64_t n : {32, 96}) {
      Stored b = RandomStored(k, n, false, 0, rng);
      const cpu::SgemmPackedB fresh(k, n, b.view());
      std::shared_ptr<float> bytes(new (std::align_val_t(64)) float[b.data.size()],
                                   [](float* p) { ::operator delete[](p, std::align_val_t(64)); });
      std::copy(b.data.begin(), b.data.end(), bytes.get());
      ASSERT_TRUE(cpu::SgemmPackedB::PacksInPlace(n, bytes.get()));
      const cpu::SgemmPackedB in_place(k, n, bytes.get(), bytes);
      const std::string what = std::to_string(k) + "x" + std::to_string(n);
      for (int64_t p0 = 0; p0 < k; p0 += cpu::kSgemmDepthBlock) {
        const int64_t floats = std::min(cpu::kSgemmDepthBlock, k - p0) * n;
        EXPECT_EQ(std::memcmp(fresh.block(p0), in_place.block(p0), sizeof(float) * floats), 0) << what << " " << p0;
      }
      EXPECT_EQ(in_place.block(0), bytes.get()) << what;  // no new memory
      const int64_t m = 5;
      Stored a = RandomStored(m, k, false, 0, rng);
      std::vector<float> want(m * n), got(m * n);
      cpu::Sgemm(m, n, k, cpu::SgemmA(a.view()), cpu::SgemmB(fresh), 0.f, want.data(), n, nullptr);
      cpu::Sgemm(m, n, k, cpu::SgemmA(a.view()), cpu::SgemmB(in_place), 0.f, got.data(), n, nullptr);
      EXPECT_TRUE(BitwiseEqual(got, want)) << what;
      ExpectNear(got, Naive(m, n, k, 1.f, a, b, 0.f, std::vector<float>(m * n, 0.f), n), k, what);
    }
  alignas(64) float row[64] = {};
  EXPECT_FALSE(cpu::SgemmPackedB::PacksInPlace(48, row));  // not whole panels
  EXPECT_FALSE(cpu::SgemmPackedB::PacksInPlace(32, row + 4));  // panels not aligned
}

// beta == 0 never reads C (NaN there must not leak); k == 0 or alpha == 0 scale C only.
// Several row blocks, each thread packing its own rows of A, over several
// column blocks of a B packed per call (k = 4100: blocks of 480 columns): a
// thread reuses the rows it packed in one column block in the next, and the
// bits are the one-thread product's.
TEST_P(SgemmTest, PackedRowsOfAReusedAcrossColumnBlocksBitwise) {
  std::mt19937 rng(12);
  const int64_t m = 600, n = 1000, k = 4100;
  Stored a = RandomStored(m, k, false, 0, rng), b = RandomStored(k, n, false, 0, rng);
  std::vector<float> one(m * n, 0.f);
  cpu::Sgemm(m, n, k, 1.f, a.view(), b.view(), 0.f, one.data(), n, nullptr);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> c(m * n, 0.f);
    cpu::Sgemm(m, n, k, 1.f, a.view(), b.view(), 0.f, c.data(), n, &pool);
    EXPECT_TRUE(BitwiseEqual(one, c)) << threads << " threads";
  }
}

TEST_P(SgemmTest, BetaZeroIgnoresCAndEmptyKScales) {
  std::mt19937 rng(4);
  Stored a = RandomStored(13, 9, false, 0, rng), b = RandomStored(9, 40, false, 0, rng);
  std::vector<float> c(13 * 40, std::numeric_limits<float>::quiet_NaN());
  cpu::Sgemm(13, 40, 9, 1.f, a.view(), b.view(), 0.f, c.data(), 40, nullptr);
  for (float v : c) ASSERT_FALSE(std::isnan(v));
  std::vector<float> d(13 * 40, 2.f);
  cpu::Sgemm(13, 40, 0, 1.f, a.view(), b.view(), 0.5f, d.data(), 40, nullptr);
  for (float v : d) ASSERT_EQ(v, 1.f);
  cpu::Sgemm(13, 40, 9, 0.f, a.view(), b.view(), 3.f, d.data(), 40, nullptr);
  for (float v : d) ASSERT_EQ(v, 3.f);
}

// Operands packed beforehand give bitwise what packing per call gives.
TEST_P(SgemmTest, PrepackedOperandsMatchBitwise) {
  std::mt19937 rng(8);
  ThreadPool pool(2);
  int variant = 0;
  for (const Case& s : OddCases())
    for (int trans = 0; trans < 4; ++trans, ++variant) {
      const bool ta = trans & 1, tb = trans & 2;
      Stored a = RandomStored(s.m, s.k, ta, variant % 2, rng), b = RandomStored(s.k, s.n, tb, variant % 3, rng);
      std::vector<float> c = RandomVector(static_cast<size_t>(s.m * s.n), rng);
      const float alpha = trans == 1 ? 0.5f : 1.f, beta = trans == 2 ? 0.f : 0.25f;
      ThreadPool* p = variant % 2 ? &pool : nullptr;
      std::vector<float> plain = c, packed_b = c, packed_a = c, packed_both = c;
      cpu::Sgemm(s.m, s.n, s.k, alpha, a.view(), b.view(), beta, plain.data(), s.n, p);
      const cpu::SgemmPackedB pb(s.k, s.n, b.view());
      const cpu::SgemmPackedA pa(s.m, s.k, alpha, a.view());
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view(), alpha), cpu::SgemmB(pb), beta, packed_b.data(), s.n, p);
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(pa), cpu::SgemmB(b.view()), beta, packed_a.data(), s.n, p);
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(pa), cpu::SgemmB(pb), beta, packed_both.data(), s.n, p);
      const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
      EXPECT_TRUE(BitwiseEqual(plain, packed_b)) << what << " packed B";
      EXPECT_TRUE(BitwiseEqual(plain, packed_a)) << what << " packed A";
      EXPECT_TRUE(BitwiseEqual(plain, packed_both)) << what << " both packed";
      ExpectNear(packed_both, Naive(s.m, s.n, s.k, alpha, a, b, beta, c, s.n), s.k, what);
    }
}

// B given as a table of row pointers (SgemmB::Rows: rows anywhere, in any
// order, unaligned) gives the bits of the same B as a plain matrix, whether
// the kernel reads the rows in place (few rows of A) or packs them (many),
// across several k-blocks and column blocks, with ragged last panels.
TEST_P(SgemmTest, RowTableMatchesPlainBBitwise) {
  std::mt19937 rng(12);
  ThreadPool pool(2);
  for (const Case& s : std::vector<Case>{{5, 37, 300}, {48, 70, 257}, {49, 33, 40}, {130, 1100, 20}, {12, 16, 1}}) {
    const Stored a = RandomStored(s.m, s.k, false, 3, rng);
    // B's rows live at scattered, unaligned places of one buffer, in reverse order.
    std::vector<float> store = RandomVector(static_cast<size_t>(s.k * (s.n + 7) + 1), rng);
    std::vector<const float*> rows(static_cast<size_t>(s.k));
    Stored b{std::vector<float>(static_cast<size_t>(s.k * s.n)), s.n, false};
    for (int64_t p = 0; p < s.k; ++p) {
      rows[p] = store.data() + 1 + (s.k - 1 - p) * (s.n + 7);
      std::memcpy(b.data.data() + p * s.n, rows[p], sizeof(float) * static_cast<size_t>(s.n));
    }
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      std::vector<float> plain(static_cast<size_t>(s.m * s.n)), table(plain.size());
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), cpu::SgemmB(b.view()), 0.f, plain.data(), s.n, p);
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), cpu::SgemmB::Rows(rows.data()), 0.f, table.data(), s.n, p);
      const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
      EXPECT_TRUE(BitwiseEqual(plain, table)) << what;
      ExpectNear(table, Naive(s.m, s.n, s.k, 1.f, a, b, 0.f, std::vector<float>(plain.size()), s.n), s.k, what);
    }
  }
}

// A plain B that is neither read in place nor packed beforehand: on AVX2 the
// kernel packs it as the first row panel reads it (one row block, a block of
// B up to 1 MiB), the later row panels reading that copy. Same bits as B
// packed beforehand at 1, 2 and 3 threads: rows past 48 of A (not in place;
// past 144, several row blocks, packed by the first at 1 thread),
// rows 4 KiB apart (in place refused for aliasing, so also few rows: 1, 7, 8),
// ragged last panels (1, 8, 9, 16, 17 and 31 columns), several k-blocks, a
// row table, beta and an epilogue; and 25-48 rows of A over a small B, read
// in place before (packed while read from the second row panel on).
TEST_P(SgemmTest, PackedWhileReadMatchesPrepackedBitwise) {
  std::mt19937 rng(21);
  ThreadPool pool1(1), pool2(2), pool3(3);
  ThreadPool* pools[3] = {&pool1, &pool2, &pool3};
  struct Shaped {
    int64_t m, n, k, ld;  // ld: B's row stride
  };
  for (const Shaped& s : std::vector<Shaped>{{60, 97, 300, 97},    {130, 520, 40, 1024}, {7, 65, 600, 1024},
                                             {8, 73, 257, 2048},   {1, 31, 20, 1024},   {144, 264, 513, 264},
                                             {49, 17, 33, 1024},   {100, 41, 256, 41},  {72, 400, 128, 6400},
                                             {200, 70, 300, 1024}, {300, 130, 64, 130},  {30, 100, 200, 100},
                                             {40, 20, 64, 20}}) {
    const Stored a = RandomStored(s.m, s.k, false, 1, rng);
    Stored b{RandomVector(static_cast<size_t>(s.k * s.ld), rng), s.ld, false};
    const std::vector<float> c0 = RandomVector(static_cast<size_t>(s.m * s.n), rng);
    std::vector<const float*> rows(static_cast<size_t>(s.k));
    for (int64_t p = 0; p < s.k; ++p) rows[p] = b.data.data() + p * s.ld;
    const cpu::SgemmPackedB pb(s.k, s.n, b.view());
    // The epilogue squares each element, so that a tile it visited twice or never would show.
    const cpu::SgemmEpilogueFn square = [](int64_t, int64_t, int64_t tile_rows, int64_t cols, float* tile, int64_t ldc) {
      for (int64_t i = 0; i < tile_rows; ++i)
        for (int64_t j = 0; j < cols; ++j) tile[i * ldc + j] *= tile[i * ldc + j];
    };
    const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    for (int t = 0; t < 3; ++t) {
      std::vector<float> want = c0, plain = c0, table = c0;
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), cpu::SgemmB(pb), 0.5f, want.data(), s.n, pools[t], &square);
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), cpu::SgemmB(b.view()), 0.5f, plain.data(), s.n, pools[t],
                 &square);
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), cpu::SgemmB::Rows(rows.data()), 0.5f, table.data(), s.n,
                 pools[t], &square);
      EXPECT_TRUE(BitwiseEqual(want, plain)) << what << " threads " << t + 1;
      EXPECT_TRUE(BitwiseEqual(want, table)) << what << " row table, threads " << t + 1;
      if (t == 0) {
        std::vector<float> naive = Naive(s.m, s.n, s.k, 1.f, a, b, 0.5f, c0, s.n);
        for (float& v : naive) v *= v;
        const double tol = 4e-6 * (4 + static_cast<double>(s.k));
        for (size_t i = 0; i < naive.size(); ++i)
          ASSERT_NEAR(plain[i], naive[i], tol * (1 + std::abs(naive[i]))) << what << " at " << i;
      }
    }
  }
}

// 1, 2 and 3 threads give the same bits, also for few rows (split over columns) and for a few unequal
// row blocks (197 and 200 rows: tasks column group first, A packed once for all threads).
TEST_P(SgemmTest, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(3);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (const Case& s : std::vector<Case>{
           {1, 700, 300}, {8, 3072, 100}, {128, 768, 300}, {200, 300, 260}, {197, 1000, 300}, {197, 2304, 40},
           {257, 45, 600}}) {
    Stored a = RandomStored(s.m, s.k, false, 0, rng), b = RandomStored(s.k, s.n, s.m % 2 == 1, 0, rng);
    const cpu::SgemmPackedB pb(s.k, s.n, b.view());
    std::vector<float> runs[3][2];
    ThreadPool* pools[3] = {&pool1, &pool2, &pool3};
    for (int t = 0; t < 3; ++t) {
      runs[t][0].assign(static_cast<size_t>(s.m * s.n), 0.f);
      runs[t][1].assign(static_cast<size_t>(s.m * s.n), 0.f);
      cpu::Sgemm(s.m, s.n, s.k, 1.f, a.view(), b.view(), 0.f, runs[t][0].data(), s.n, pools[t]);
      cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), cpu::SgemmB(pb), 0.f, runs[t][1].data(), s.n, pools[t]);
    }
    for (int t = 1; t < 3; ++t)
      for (int packed = 0; packed < 2; ++packed)
        EXPECT_TRUE(BitwiseEqual(runs[0][packed], runs[t][packed]))
            << s.m << "x" << s.n << "x" << s.k << " threads " << t + 1 << (packed ? " packed B" : "");
  }
}

// How the driver cuts C into tasks at 2 and 3 threads: one row block up to
// 204 rows (ViT's 197 tokens) and not from 205; row-block major, single
// panels that the pool's chunks gather into ranges, a chunk also crossing
// from one row block into the next (600 rows: 5 blocks at 2 threads, shares
// of 2.5 blocks); column-group major for a few row blocks (600 rows at 3
// threads), groups rounded up to a multiple of the threads and cut into
// widths differing by a panel (72 panels as 10 groups at 2 threads, 12 at 3;
// an odd count of panels like an LM head's), with B packed beforehand and
// plain. Every element is visited by the epilogue exactly once, the bits do
// not depend on the thread count, and the sums agree with the
// double-precision loops.
TEST_P(SgemmTest, TaskSplitsCoverEachElementOnceWhateverTheThreads) {
  std::mt19937 rng(11);
  ThreadPool pool1(1), pool2(2), pool3(3);
  ThreadPool* pools[3] = {&pool1, &pool2, &pool3};
  for (const Case& s : std::vector<Case>{
           {128, 2304, 24}, {197, 2304, 20}, {204, 330, 270}, {205, 330, 270}, {145, 99 * 32 + 7, 9}, {128, 768, 520},
           {600, 700, 40}}) {
    Stored a = RandomStored(s.m, s.k, false, 0, rng), b = RandomStored(s.k, s.n, false, 0, rng);
    const std::vector<float> zero(static_cast<size_t>(s.m * s.n), 0.f);
    const std::vector<float> want = Naive(s.m, s.n, s.k, 1.f, a, b, 0.f, zero, s.n);
    const cpu::SgemmPackedB pb(s.k, s.n, b.view());
    std::vector<float> first[2];
    for (int t = 0; t < 3; ++t)
      for (int packed = 0; packed < 2; ++packed) {
        const std::string what = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
                                 " threads " + std::to_string(t + 1) + (packed ? " packed B" : "");
        std::vector<std::atomic<int>> visits(static_cast<size_t>(s.m * s.n));
        const int64_t n = s.n;
        const cpu::SgemmEpilogueFn count = [&visits, n](int64_t i0, int64_t j0, int64_t rows, int64_t cols, float*,
                                                        int64_t) {
          for (int64_t i = i0; i < i0 + rows; ++i)
            for (int64_t j = j0; j < j0 + cols; ++j) visits[static_cast<size_t>(i * n + j)].fetch_add(1);
        };
        std::vector<float> c(static_cast<size_t>(s.m * s.n), 0.f);
        const cpu::SgemmB b_operand = packed ? cpu::SgemmB(pb) : cpu::SgemmB(b.view());
        cpu::Sgemm(s.m, s.n, s.k, cpu::SgemmA(a.view()), b_operand, 0.f, c.data(), s.n, pools[t], &count);
        for (size_t e = 0; e < visits.size(); ++e) ASSERT_EQ(visits[e].load(), 1) << what << " element " << e;
        if (t == 0) {
          ExpectNear(c, want, s.k, what);
          first[packed] = c;
        } else {
          EXPECT_TRUE(BitwiseEqual(first[packed], c)) << what;
        }
      }
    EXPECT_TRUE(BitwiseEqual(first[0], first[1])) << s.m << "x" << s.n << "x" << s.k << " packed B vs plain";
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, SgemmTest,
                         ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         [](const auto& info) {
                           return info.param == cpu::SgemmIsa::kAvx512 ? "avx512"
                                  : info.param == cpu::SgemmIsa::kAvx2 ? "avx2"
                                                                       : "portable";
                         });

// The optimized MatMul against the reference MatMul kernel, through RunOp's
// machinery (schema rule + reference), on batched and broadcast shapes.
TEST(OptimizedMatMul, AgreesWithReferenceKernel) {
  std::mt19937 rng(5);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 4}, {4, 5}}, {{2, 3, 4}, {4, 6}}, {{2, 1, 3, 4}, {5, 4, 7}}, {{1, 8}, {8, 1}}, {{4, 2, 9}, {4, 9, 3}}};
  for (const auto& [ad, bd] : cases) {
    int64_t an = 1, bn = 1;
    for (auto d : ad) an *= d;
    for (auto d : bd) bn *= d;
    Tensor a = Tensor::FromVector(RandomVector(an, rng), ad);
    Tensor b = Tensor::FromVector(RandomVector(bn, rng), bd);
    Node node = testing::MakeNode("MatMul", 2, 1);
    auto ref = testing::RunOp(node, 13, {Value(a), Value(b)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    std::vector<Value> outputs(1);
    Value va(a), vb(b);
    ThreadPool pool(2);
    KernelContext ctx(node, 13, {&va, &vb}, &outputs, nullptr, &pool, nullptr);
    ASSERT_TRUE(cpu::MatMulFloat(ctx).ok());
    const Tensor& want = ref->outputs[0].tensor();
    const Tensor& got = outputs[0].tensor();
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < want.num_elements(); ++i)
      EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5 * (1 + std::abs(want.data<float>()[i])));
  }
}

TEST(OptimizedGemm, AgreesWithReferenceKernelWithBiasAndTransposes) {
  std::mt19937 rng(6);
  const int64_t m = 5, n = 7, k = 9;
  // Every way C may broadcast to [m, n].
  const std::vector<std::vector<int64_t>> bias_shapes = {{n}, {1, n}, {m, 1}, {m, n}, {1}, {}};
  for (int trial = 0; trial < 4 * static_cast<int>(bias_shapes.size()); ++trial) {
    int trans = trial % 4;
    bool ta = trans & 1, tb = trans & 2;
    const std::vector<int64_t>& c_dims = bias_shapes[trial / 4];
    Tensor a = Tensor::FromVector(RandomVector(m * k, rng), ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
    Tensor b = Tensor::FromVector(RandomVector(k * n, rng), tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
    int64_t c_count = 1;
    for (int64_t d : c_dims) c_count *= d;
    Tensor c = Tensor::FromVector(RandomVector(c_count, rng), c_dims);
    Node node = testing::MakeNode("Gemm", 3, 1,
                                  {testing::IntAttr("transA", ta), testing::IntAttr("transB", tb),
                                   testing::FloatAttr("alpha", 0.5f), testing::FloatAttr("beta", 2.f)});
    auto ref = testing::RunOp(node, 13, {Value(a), Value(b), Value(c)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    std::vector<Value> outputs(1);
    Value va(a), vb(b), vc(c);
    KernelContext ctx(node, 13, {&va, &vb, &vc}, &outputs, nullptr, nullptr, nullptr);
    ASSERT_TRUE(cpu::GemmFloat(ctx).ok());
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_NEAR(outputs[0].tensor().data<float>()[i], ref->outputs[0].tensor().data<float>()[i], 1e-5)
          << "C dims " << DimsToString(c_dims) << ", trans " << trans;
  }
}

// Runs `kernel` as a session would: with a PreparedCache and the given inputs
// marked constant. Returns the first output.
Result<Tensor> RunPrepared(KernelFn kernel, const Node& node, const std::vector<Value>& inputs,
                           const std::vector<bool>& constant, PreparedCache* cache, ThreadPool* pool) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(&v);
  std::vector<Value> outputs(1);
  KernelContext ctx(node, 13, ptrs, &outputs, nullptr, pool, nullptr);
  ctx.SetPrepared(cache, &constant);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs[0].tensor();
}

bool BitwiseEqual(const Tensor& x, const Tensor& y) {
  return x.dims() == y.dims() &&
         std::memcmp(x.data<float>(), y.data<float>(), sizeof(float) * x.num_elements()) == 0;
}

// Batched products (attention heads) are spread over threads one per task;
// the bits are those of one thread.
TEST(OptimizedMatMul, BatchedBitwiseIndependentOfThreadCount) {
  std::mt19937 rng(17);
  std::vector<Value> inputs = {Value(testing::RandomTensor({2, 6, 40, 24}, rng)),
                               Value(testing::RandomTensor({2, 6, 24, 50}, rng))};
  Node node = testing::MakeNode("MatMul", 2, 1);
  auto one = testing::RunKernel(cpu::MatMulFloat, node, 13, inputs, 1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  for (int threads : {2, 3}) {
    auto many = testing::RunKernel(cpu::MatMulFloat, node, 13, inputs, threads);
    ASSERT_TRUE(many.ok());
    EXPECT_TRUE(BitwiseEqual(one.value(), many.value())) << threads << " threads";
  }
  auto ref = testing::RunOp(node, 13, inputs);
  ASSERT_TRUE(ref.ok());
  const Tensor& r = ref->outputs[0].tensor();
  for (int64_t i = 0; i < r.num_elements(); ++i)
    ASSERT_NEAR(one->data<float>()[i], r.data<float>()[i], 1e-4 * (1 + std::abs(r.data<float>()[i])));
}

// A constant B is packed once (one cache entry, reused by the next run) and
// gives the same bits as packing per call; a B that is not constant is not cached.
TEST(OptimizedMatMul, ConstantBPackedOncePerSession) {
  std::mt19937 rng(15);
  ThreadPool pool(2);
  for (const auto& [ad, bd] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{3, 37, 70}, {70, 45}}, {{1, 300}, {300, 129}}, {{128, 64}, {64, 33}}}) {
    std::vector<Value> inputs = {Value(testing::RandomTensor(ad, rng)), Value(testing::RandomTensor(bd, rng))};
    Node node = testing::MakeNode("MatMul", 2, 1);
    auto want = RunPrepared(cpu::MatMulFloat, node, inputs, {false, false}, nullptr, &pool);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto ref = testing::RunOp(node, 13, inputs);
    ASSERT_TRUE(ref.ok());
    PreparedCache cache, unused;
    for (int run = 0; run < 2; ++run) {
      auto got = RunPrepared(cpu::MatMulFloat, node, inputs, {false, true}, &cache, &pool);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(BitwiseEqual(got.value(), want.value())) << DimsToString(ad) << " run " << run;
      const Tensor& r = ref->outputs[0].tensor();
      for (int64_t i = 0; i < r.num_elements(); ++i)
        ASSERT_NEAR(got->data<float>()[i], r.data<float>()[i], 1e-4 * (1 + std::abs(r.data<float>()[i])));
      EXPECT_EQ(cache.size(), 1u);
    }
    ASSERT_TRUE(RunPrepared(cpu::MatMulFloat, node, inputs, {false, false}, &unused, &pool).ok());
    EXPECT_EQ(unused.size(), 0u);
  }
}

TEST(OptimizedGemm, ConstantBPackedOnceForEitherTransB) {
  std::mt19937 rng(16);
  const int64_t m = 9, n = 70, k = 300;
  for (int trans = 0; trans < 4; ++trans) {
    const bool ta = trans & 1, tb = trans & 2;
    std::vector<Value> inputs = {
        Value(testing::RandomTensor(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, rng)),
        Value(testing::RandomTensor(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, rng)),
        Value(testing::RandomTensor({n}, rng))};
    Node node = testing::MakeNode("Gemm", 3, 1,
                                  {testing::IntAttr("transA", ta), testing::IntAttr("transB", tb),
                                   testing::FloatAttr("alpha", 0.5f), testing::FloatAttr("beta", 2.f)});
    auto ref = testing::RunOp(node, 13, inputs);
    ASSERT_TRUE(ref.ok());
    auto want = RunPrepared(cpu::GemmFloat, node, inputs, {false, false, false}, nullptr, nullptr);
    PreparedCache cache;
    auto got = RunPrepared(cpu::GemmFloat, node, inputs, {false, true, true}, &cache, nullptr);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_TRUE(BitwiseEqual(got.value(), want.value())) << "trans " << trans;
    EXPECT_EQ(cache.size(), 1u);
    const Tensor& r = ref->outputs[0].tensor();
    for (int64_t i = 0; i < r.num_elements(); ++i)
      ASSERT_NEAR(got->data<float>()[i], r.data<float>()[i], 1e-4 * (1 + std::abs(r.data<float>()[i])));
  }
}

// One row times a transposed B (a classifier head at batch 1) takes the
// dot-product path: checked against the reference kernel on lengths around the
// vector widths, with and without a bias, and bitwise across thread counts.
TEST(OptimizedGemm, SingleRowTransposedBAgreesAndIsThreadIndependent) {
  std::mt19937 rng(11);
  for (int64_t k : {1, 7, 8, 31, 33, 100, 1280}) {
    for (bool with_c : {false, true}) {
      const int64_t n = 37;
      Tensor a = Tensor::FromVector(RandomVector(k, rng), {1, k});
      Tensor b = Tensor::FromVector(RandomVector(n * k, rng), {n, k});
      Tensor c = Tensor::FromVector(RandomVector(n, rng), {n});
      Node node = testing::MakeNode("Gemm", with_c ? 3 : 2, 1,
                                    {testing::IntAttr("transB", 1), testing::FloatAttr("alpha", 0.75f),
                                     testing::FloatAttr("beta", 1.5f)});
      std::vector<Value> inputs = {Value(a), Value(b)};
      if (with_c) inputs.push_back(Value(c));
      auto ref = testing::RunOp(node, 13, inputs);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      Tensor first;
      for (int threads : {1, 2, 3}) {
        auto got = testing::RunKernel(cpu::GemmFloat, node, 13, inputs, threads);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        for (int64_t j = 0; j < n; ++j)
          EXPECT_NEAR(got->data<float>()[j], ref->outputs[0].tensor().data<float>()[j], 1e-5 * (1 + k / 32.0))
              << "k " << k << ", bias " << with_c;
        if (threads == 1) first = *got;
        else EXPECT_TRUE(BitwiseEqual(first, *got)) << "k " << k << ", threads " << threads;
      }
      // Rows go eight at a time where they can: each output is bitwise the
      // product of its row alone (a one-row B reads one row a pass).
      for (int64_t j = 0; j < n; ++j) {
        const float* row = b.data<float>() + j * k;
        Tensor bj = Tensor::FromVector(std::vector<float>(row, row + k), {1, k});
        Tensor cj = Tensor::FromVector(std::vector<float>{c.data<float>()[j]}, {1});
        std::vector<Value> one = {Value(a), Value(bj)};
        if (with_c) one.push_back(Value(cj));
        auto alone = testing::RunKernel(cpu::GemmFloat, node, 13, one, 1);
        ASSERT_TRUE(alone.ok()) << alone.status().ToString();
        EXPECT_EQ(std::bit_cast<uint32_t>(alone->data<float>()[0]), std::bit_cast<uint32_t>(first.data<float>()[j]))
            << "k " << k << ", row " << j;
      }
    }
  }
}

}  // namespace
}  // namespace nee
