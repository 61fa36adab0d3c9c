// bfloat16 GEMM on AVX512-BF16 (see bf16_gemm.h): packing of B, the 12x32
// register tile, its epilogue and the split into tasks.
#include "ep/cpu/bf16_gemm.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "base/cpu_isa.h"
#include "ir/float_formats.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#include "ep/cpu/bf16_simd.h"
#define NEE_BF16_GEMM_X86 1
#endif

namespace nee::cpu {


namespace {

// One panel row pair, any strides: out[j] = lo[j] | hi[j] << 16 (hi null: 0),
// columns past `cols` zero.
void PackPairScalar(const uint16_t* lo, const uint16_t* hi, int64_t col_stride, int64_t cols, uint32_t* out) {
  for (int64_t j = 0; j < cols; ++j) out[j] = lo[j * col_stride] | (hi ? uint32_t{hi[j * col_stride]} << 16 : 0u);
  for (int64_t j = cols; j < kBf16PanelWidth; ++j) out[j] = 0;
}

#ifdef NEE_BF16_GEMM_X86
// The same for a full panel of a row-major B (col_stride 1, both rows
// there): two 32-column rows interleaved word by word in registers.
__attribute__((target("avx512f,avx512bw"))) void PackPairAvx512(const uint16_t* lo, const uint16_t* hi, uint32_t* out) {
  // Word 2j of the result is lo[j], word 2j + 1 hi[j] (hi's words are 32-63 of the pair of vectors).
  alignas(64) static const uint16_t kFirst[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                  8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i first = _mm512_load_si512(kFirst);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
  const __m512i l = _mm512_loadu_si512(lo), h = _mm512_loadu_si512(hi);
  _mm512_store_si512(out, _mm512_permutex2var_epi16(l, first, h));
  _mm512_store_si512(out + 16, _mm512_permutex2var_epi16(l, second, h));
}
#endif

}  // namespace

Bf16PackedB::Bf16PackedB(int64_t k, int64_t n, const uint16_t* b, int64_t row_stride, int64_t col_stride)
    : k_(k), n_(n) {
  const int64_t words = std::max<int64_t>(1, panels() * pairs() * kBf16PanelWidth);
  data_ = MakeAlignedArray<uint32_t>(static_cast<size_t>(words));
#ifdef NEE_BF16_GEMM_X86
  const bool vector = col_stride == 1 && CpuHasAvx512Bf16();
#else
  const bool vector = false;
#endif
  // Pair by pair, each pair of rows of B read once along its length and
  // dealt out to the panels.
  for (int64_t p = 0; p < pairs(); ++p)
    for (int64_t panel = 0; panel < panels(); ++panel) {
      uint32_t* out = data_.get() + (panel * pairs() + p) * kBf16PanelWidth;
      const int64_t j0 = panel * kBf16PanelWidth;
      const int64_t cols = std::min(kBf16PanelWidth, n - j0);
      const uint16_t* lo = b + 2 * p * row_stride + j0 * col_stride;
      const uint16_t* hi = 2 * p + 1 < k ? lo + row_stride : nullptr;
#ifdef NEE_BF16_GEMM_X86
      if (vector && hi && cols == kBf16PanelWidth) {
        PackPairAvx512(lo, hi, out);
        continue;
      }
#endif
      PackPairScalar(lo, hi, col_stride, cols, out);
    }
}

#ifndef NEE_BF16_GEMM_X86
bool CpuHasAvx512Bf16() { return false; }
void Bf16Gemm(const Bf16GemmArgs&, ThreadPool*) {}
#else

bool CpuHasAvx512Bf16() { return HostHasAvx512Bf16(); }

namespace {

// GCC 12 warns about the self-initialized _mm512_undefined_epi32 inside its
// own intrinsics once they are inlined here; nothing of ours is uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// One row block's share of a task: rows [i0, i0 + R) times one column panel.
struct Tile {
  int64_t i0, panel;
};

// alpha * sum [+ beta * C], rounded, stored for columns [j0, j0 + 16) of row i
// (`mask`: the columns that exist). The float32 operations are the
// reference Gemm's, in its order (a product, then a sum), never fused: the
// _round forms are builtins the compiler does not contract into an FMA.
NEE_BF16_TARGET inline void StoreRow(const Bf16GemmArgs& g, int64_t i, int64_t j0, __mmask16 mask, __m512 sum) {
  constexpr int kCurrent = _MM_FROUND_CUR_DIRECTION;
  if (g.alpha != 1.f) sum = _mm512_mul_round_ps(_mm512_set1_ps(g.alpha), sum, kCurrent);
  if (g.c) {
    const uint16_t* c = g.c + i * g.c_row_stride + j0 * g.c_col_stride;
    const __m512 cv = g.c_col_stride == 0 ? _mm512_set1_ps(BFloat16ToFloat(c[0])) : LoadBf16(c, mask);
    sum = _mm512_add_round_ps(sum, _mm512_mul_round_ps(_mm512_set1_ps(g.beta), cv, kCurrent), kCurrent);
  }
  _mm256_mask_storeu_epi16(g.y + i * g.ldy + j0, mask, RoundToBf16(sum));
}

// R rows of A times one 32-column panel: 2R accumulators, two B vectors and
// a broadcast word in registers (R = 12: 27 of the 32). Every loop over the
// register arrays is fully unrolled so they stay in registers.
template <int R>
NEE_BF16_TARGET void RunTile(const Bf16GemmArgs& g, const Tile& t) {
  const Bf16PackedB& b = *g.b;
  const int64_t k = b.k(), full = k / 2;
  const uint32_t* bp = b.panel(t.panel);
  const uint16_t* a = g.a + t.i0 * g.lda;
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < full; ++p, bp += kBf16PanelWidth) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      uint32_t w;
      std::memcpy(&w, a + r * g.lda + 2 * p, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(w));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  if (k % 2) {  // k odd: the last k alone, its partner zero on both sides
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(a[r * g.lda + k - 1]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const int64_t j0 = t.panel * kBf16PanelWidth;
  const int64_t cols = std::min(kBf16PanelWidth, b.n() - j0);
  const __mmask16 mask0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 mask1 = cols >= 32 ? __mmask16(0xffff) : cols <= 16 ? 0 : __mmask16((1u << (cols - 16)) - 1);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    StoreRow(g, t.i0 + r, j0, mask0, acc[r][0]);
    if (mask1) StoreRow(g, t.i0 + r, j0 + 16, mask1, acc[r][1]);
  }
}

using TileFn = void (*)(const Bf16GemmArgs&, const Tile&);

// The kernel for a block of `rows` rows (1 to 12).
TileFn TileFor(int64_t rows) {
  static const TileFn table[kBf16TileRows] = {RunTile<1>, RunTile<2>, RunTile<3>, RunTile<4>,
                                              RunTile<5>, RunTile<6>, RunTile<7>, RunTile<8>,
                                              RunTile<9>, RunTile<10>, RunTile<11>, RunTile<12>};
  return table[rows - 1];
}

// Rows per task: eight row blocks (96 rows) of A, at most 96 x 2 x k bytes
// (576 KiB at k = 3072), stay in L2 while the task's panel streams past them.
constexpr int64_t kRowsPerTask = 8 * kBf16TileRows;

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void Bf16Gemm(const Bf16GemmArgs& g, ThreadPool* pool) {
  if (g.m <= 0 || g.b->n() <= 0) return;
  const int64_t panels = g.b->panels();
  const int64_t groups = (g.m + kRowsPerTask - 1) / kRowsPerTask;
  // Tasks panel by panel, each a group of row blocks: consecutive tasks read
  // the same panel of B. Which thread runs a task changes nothing it computes.
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t panel = task / groups, group = task % groups;
      const int64_t row_end = std::min(g.m, (group + 1) * kRowsPerTask);
      for (int64_t i0 = group * kRowsPerTask; i0 < row_end; i0 += kBf16TileRows)
        TileFor(std::min(kBf16TileRows, row_end - i0))(g, {i0, panel});
    }
  };
  const int64_t tasks = panels * groups;
  if (pool && pool->num_threads() > 1 && tasks > 1)
    pool->ParallelFor(tasks, 1, run);
  else
    run(0, tasks);
}

#endif  // NEE_BF16_GEMM_X86

}  // namespace nee::cpu
