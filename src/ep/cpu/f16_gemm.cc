// float16 GEMM with float16 weights (see f16_gemm.h): packing of B (kept
// float16) and of A (widened), the AVX-512 / AVX2 / portable tiles with their
// epilogues, and the split into tasks.
#include "ep/cpu/f16_gemm.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "base/cpu_isa.h"
#include "ep/cpu/sgemm.h"  // SgemmActiveIsa, SgemmScratch
#include "ir/float_formats.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_F16_GEMM_X86 1
#define NEE_F16_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))
#define NEE_F16_AVX2_FMA __attribute__((target("avx2,fma,f16c")))
// Without "fma": the epilogue's product and sum stay two roundings, as the
// reference computes them (the compiler may contract a * b + c only where
// the target has an FMA instruction).
#define NEE_F16_AVX2_NO_FMA __attribute__((target("avx2,f16c"), noinline))
#endif

namespace nee::cpu {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A's rows are packed by blocks of kF16TileRows: block i0 / 12 holds, for
// each p, the 12 values A(i0 + r, p) widened (rows past m zero).
float* PackedABlock(float* packed, int64_t k, int64_t i0) { return packed + i0 * k; }

}  // namespace

F16PackedB::F16PackedB(int64_t k, int64_t n, const uint16_t* b, int64_t row_stride, int64_t col_stride)
    : k_(k), n_(n) {
  const int64_t values = std::max<int64_t>(1, panels() * k * kF16PanelWidth);
  data_ = MakeAlignedArray<uint16_t>(static_cast<size_t>(values));
  for (int64_t q = 0; q < 2 * panels(); ++q) {  // run q: columns [16q, 16q + 16)
    uint16_t* out = data_.get() + q * k * kF16PanelRun;
    const int64_t j0 = q * kF16PanelRun, cols = std::clamp<int64_t>(n - j0, 0, kF16PanelRun);
    for (int64_t p = 0; p < k; ++p) {
      uint16_t* dst = out + p * kF16PanelRun;
      std::fill(dst + cols, dst + kF16PanelRun, uint16_t{0});
      if (cols == 0) continue;  // a padding run: no column of B to point at
      const uint16_t* row = b + p * row_stride + j0 * col_stride;
      if (col_stride == 1) {
        std::memcpy(dst, row, static_cast<size_t>(cols) * 2);
      } else {
        for (int64_t j = 0; j < cols; ++j) dst[j] = row[j * col_stride];
      }
    }
  }
}

#ifdef NEE_F16_GEMM_X86
namespace {

// n float16 values widened (exact), eight at a time.
NEE_F16_AVX2_FMA void WidenRowF16c(const uint16_t* h, float* f, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = HalfToFloat(h[i]);
}

// Eight sums finished and stored as columns [j0, j0 + cols) of row i, cols <= 8.
NEE_F16_AVX2_NO_FMA void FinishAvx2(const F16GemmArgs& g, int64_t i, int64_t j0, int64_t cols, __m256 sum) {
  if (g.alpha != 1.f) sum = _mm256_mul_ps(_mm256_set1_ps(g.alpha), sum);
  if (g.c) {
    const uint16_t* c = g.c + i * g.c_row_stride + j0 * g.c_col_stride;
    __m256 cv;
    if (g.c_col_stride == 0) {
      cv = _mm256_set1_ps(HalfToFloat(c[0]));
    } else {
      alignas(16) uint16_t part[8] = {};
      std::memcpy(part, c, static_cast<size_t>(cols) * 2);
      cv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
    }
    sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_set1_ps(g.beta), cv));
  }
  uint16_t* y = g.y + i * g.ldy + j0;
  alignas(16) uint16_t out[8];
  if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(sum, sum, _CMP_UNORD_Q)) != 0, 0)) {
    // NaN: the reference's conversion, which keeps numpy's payload.
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, sum);
    for (int64_t j = 0; j < cols; ++j) y[j] = FloatToHalf(lanes[j]);
    return;
  }
  _mm_store_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT));
  if (cols == 8) _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm_load_si128(reinterpret_cast<const __m128i*>(out)));
  else std::memcpy(y, out, static_cast<size_t>(cols) * 2);
}

// Rows [i0, i0 + R) (R <= 6; `a` their packed block, `first` the first row's
// place in it) times run `half` of panel `panel`: 2R accumulators of 8 lanes.
template <int R>
NEE_F16_AVX2_FMA void TileAvx2(const F16GemmArgs& g, const float* a, int first, int64_t i0, int64_t panel,
                               int64_t half) {
  const int64_t k = g.b->k();
  const uint16_t* bp = g.b->run(panel, half);
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p, bp += kF16PanelRun) {
    const __m256 b0 = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(bp)));
    const __m256 b1 = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(bp + 8)));
    const float* ap = a + p * kF16TileRows + first;
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(ap + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  alignas(32) float sums[R][kF16PanelRun];  // out of the registers before the calls (see TileAvx512)
  for (int r = 0; r < R; ++r) {
    _mm256_store_ps(sums[r], acc[r][0]);
    _mm256_store_ps(sums[r] + 8, acc[r][1]);
  }
  const int64_t j0 = panel * kF16PanelWidth + half * kF16PanelRun;
  const int64_t cols = std::min(kF16PanelRun, g.b->n() - j0);
  for (int r = 0; r < R; ++r) {
    FinishAvx2(g, i0 + r, j0, std::min<int64_t>(cols, 8), _mm256_load_ps(sums[r]));
    if (cols > 8) FinishAvx2(g, i0 + r, j0 + 8, cols - 8, _mm256_load_ps(sums[r] + 8));
  }
}

// Sixteen sums finished and stored (`mask`: the columns that exist). The
// product and sum are the _round forms, builtins the compiler does not
// contract into an FMA: two roundings, as the reference's.
NEE_F16_AVX512 inline void FinishAvx512(const F16GemmArgs& g, int64_t i, int64_t j0, __mmask16 mask, __m512 sum) {
  constexpr int kCurrent = _MM_FROUND_CUR_DIRECTION;
  if (g.alpha != 1.f) sum = _mm512_mul_round_ps(_mm512_set1_ps(g.alpha), sum, kCurrent);
  if (g.c) {
    const uint16_t* c = g.c + i * g.c_row_stride + j0 * g.c_col_stride;
    const __m512 cv = g.c_col_stride == 0 ? _mm512_set1_ps(HalfToFloat(c[0]))
                                          : _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, c));
    sum = _mm512_add_round_ps(sum, _mm512_mul_round_ps(_mm512_set1_ps(g.beta), cv, kCurrent), kCurrent);
  }
  uint16_t* y = g.y + i * g.ldy + j0;
  if (__builtin_expect(_mm512_cmp_ps_mask(sum, sum, _CMP_UNORD_Q) != 0, 0)) {
    alignas(64) float lanes[16];  // NaN: the reference's conversion (numpy's payload)
    _mm512_store_ps(lanes, sum);
    for (int j = 0; j < 16; ++j)
      if (mask & (1u << j)) y[j] = FloatToHalf(lanes[j]);
    return;
  }
  _mm256_mask_storeu_epi16(y, mask, _mm512_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT));
}

// GCC 12 warns about the self-initialized undefined vectors inside its own
// intrinsics once they are inlined here; nothing of ours is uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// Rows [i0, i0 + R) (R <= 12; `a` their packed block) times one 32-column
// panel: 2R accumulators, both runs' rows widened as they are loaded.
template <int R>
NEE_F16_AVX512 void TileAvx512(const F16GemmArgs& g, const float* a, int64_t i0, int64_t panel) {
  const int64_t k = g.b->k();
  const uint16_t* b0p = g.b->run(panel, 0);
  const uint16_t* b1p = g.b->run(panel, 1);
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b0p + p * kF16PanelRun)));
    const __m512 b1 = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b1p + p * kF16PanelRun)));
    const float* ap = a + p * kF16TileRows;
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(ap[r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  // The sums leave the registers before the epilogue, whose rare calls
  // (NaN, a broadcast C) clobber every vector register: kept live across
  // them, GCC spilled four accumulators for the whole k loop (a load and a
  // store per FMA there).
  alignas(64) float sums[R][kF16PanelWidth];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(sums[r], acc[r][0]);
    _mm512_store_ps(sums[r] + 16, acc[r][1]);
  }
  const int64_t j0 = panel * kF16PanelWidth;
  const int64_t cols = std::min(kF16PanelWidth, g.b->n() - j0);
  const __mmask16 mask0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 mask1 = cols >= 32 ? __mmask16(0xffff) : cols <= 16 ? 0 : __mmask16((1u << (cols - 16)) - 1);
  for (int r = 0; r < R; ++r) {
    FinishAvx512(g, i0 + r, j0, mask0, _mm512_load_ps(sums[r]));
    if (mask1) FinishAvx512(g, i0 + r, j0 + 16, mask1, _mm512_load_ps(sums[r] + 16));
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

using Avx512TileFn = void (*)(const F16GemmArgs&, const float*, int64_t, int64_t);
using Avx2TileFn = void (*)(const F16GemmArgs&, const float*, int, int64_t, int64_t, int64_t);

void RowBlockAvx512(const F16GemmArgs& g, const float* a, int64_t i0, int64_t rows, int64_t panel) {
  static const Avx512TileFn table[kF16TileRows] = {
      TileAvx512<1>, TileAvx512<2>, TileAvx512<3>, TileAvx512<4>,  TileAvx512<5>,  TileAvx512<6>,
      TileAvx512<7>, TileAvx512<8>, TileAvx512<9>, TileAvx512<10>, TileAvx512<11>, TileAvx512<12>};
  table[rows - 1](g, a, i0, panel);
}

void RowBlockAvx2(const F16GemmArgs& g, const float* a, int64_t i0, int64_t rows, int64_t panel) {
  static const Avx2TileFn table[6] = {TileAvx2<1>, TileAvx2<2>, TileAvx2<3>, TileAvx2<4>, TileAvx2<5>, TileAvx2<6>};
  for (int64_t half = 0; half < 2; ++half) {
    if (panel * kF16PanelWidth + half * kF16PanelRun >= g.b->n()) break;
    for (int first = 0; first < rows; first += 6)
      table[std::min<int64_t>(6, rows - first) - 1](g, a, first, i0 + first, panel, half);
  }
}

}  // namespace

F16GemmIsa F16GemmActiveIsa() {
  const SgemmIsa isa = SgemmActiveIsa();
  if (isa == SgemmIsa::kPortable || !HostHasF16c()) return F16GemmIsa::kPortable;
  return isa == SgemmIsa::kAvx512 ? F16GemmIsa::kAvx512 : F16GemmIsa::kAvx2;
}
#else
F16GemmIsa F16GemmActiveIsa() { return F16GemmIsa::kPortable; }
#endif  // NEE_F16_GEMM_X86

namespace {

// The portable tile: rows [i0, i0 + rows) times one panel, sums in float32
// over p in order (as the vector tiles), finished as the reference finishes.
void RowBlockPortable(const F16GemmArgs& g, const float* a, int64_t i0, int64_t rows, int64_t panel) {
  float acc[kF16TileRows][kF16PanelWidth] = {};
  float b[kF16PanelWidth];
  const uint16_t* runs[2] = {g.b->run(panel, 0), g.b->run(panel, 1)};
  for (int64_t p = 0; p < g.b->k(); ++p) {
    for (int64_t j = 0; j < kF16PanelWidth; ++j)
      b[j] = HalfToFloat(runs[j / kF16PanelRun][p * kF16PanelRun + j % kF16PanelRun]);
    for (int64_t r = 0; r < rows; ++r) {
      const float av = a[p * kF16TileRows + r];
      for (int64_t j = 0; j < kF16PanelWidth; ++j) acc[r][j] += av * b[j];
    }
  }
  const int64_t j0 = panel * kF16PanelWidth, cols = std::min(kF16PanelWidth, g.b->n() - j0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float v = acc[r][j];
      if (g.alpha != 1.f) v = g.alpha * v;
      if (g.c) {
        const float cv = HalfToFloat(g.c[(i0 + r) * g.c_row_stride + (j0 + j) * g.c_col_stride]);
        const float scaled = g.beta * cv;
        v = v + scaled;
      }
      g.y[(i0 + r) * g.ldy + j0 + j] = FloatToHalf(v);
    }
}

// Rows [i0, i0 + rows) of A widened into their packed block: each row widened
// into `rows_scratch` (12 x k floats), then interleaved p by p, so the block
// is written in order.
void PackABlock(const F16GemmArgs& g, F16GemmIsa isa, int64_t i0, int64_t rows, float* block, float* rows_scratch) {
  const int64_t k = g.b->k();
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* src = g.a + (i0 + r) * g.a_row_stride;
    float* dst = rows_scratch + r * k;
    if (g.a_col_stride == 1 && isa != F16GemmIsa::kPortable) {
#ifdef NEE_F16_GEMM_X86
      WidenRowF16c(src, dst, k);
#endif
    } else {
      for (int64_t p = 0; p < k; ++p) dst[p] = HalfToFloat(src[p * g.a_col_stride]);
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    float* out = block + p * kF16TileRows;
    for (int64_t r = 0; r < rows; ++r) out[r] = rows_scratch[r * k + p];
    for (int64_t r = rows; r < kF16TileRows; ++r) out[r] = 0.f;
  }
}

void RunInParallel(ThreadPool* pool, int64_t tasks, const std::function<void(int64_t, int64_t)>& run) {
  if (pool && pool->num_threads() > 1 && tasks > 1) pool->ParallelFor(tasks, 1, run);
  else run(0, tasks);
}

}  // namespace

void F16Gemm(const F16GemmArgs& g, ThreadPool* pool) {
  const int64_t n = g.b->n(), k = g.b->k();
  if (g.m <= 0 || n <= 0) return;
  const F16GemmIsa isa = F16GemmActiveIsa();
  const int64_t blocks = CeilDiv(g.m, kF16TileRows);
  // A widened once per call into the caller's scratch, by all threads.
  thread_local SgemmScratch scratch;
  scratch.Trim(int64_t{64} << 20);
  float* packed_a = scratch.Get(std::max<int64_t>(1, blocks * kF16TileRows * k));
  RunInParallel(pool, blocks, [&](int64_t begin, int64_t end) {
    std::vector<float> rows(static_cast<size_t>(kF16TileRows * std::max<int64_t>(k, 1)));
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t i0 = blk * kF16TileRows;
      PackABlock(g, isa, i0, std::min(kF16TileRows, g.m - i0), PackedABlock(packed_a, k, i0), rows.data());
    }
  });
  using RowBlockFn = void (*)(const F16GemmArgs&, const float*, int64_t, int64_t, int64_t);
  RowBlockFn row_block = RowBlockPortable;
#ifdef NEE_F16_GEMM_X86
  if (isa == F16GemmIsa::kAvx512) row_block = RowBlockAvx512;
  if (isa == F16GemmIsa::kAvx2) row_block = RowBlockAvx2;
#endif
  // Tasks panel by panel, each a group of row blocks whose widened A (about
  // 256 KiB) stays in L2 while the panel streams past it; consecutive tasks
  // read the same panel. Which thread runs a task changes nothing it computes.
  const int64_t group_blocks = std::clamp<int64_t>((int64_t{256} << 10) / (4 * kF16TileRows * std::max<int64_t>(k, 1)),
                                                   1, 8);
  const int64_t groups = CeilDiv(blocks, group_blocks);
  const int64_t tasks = g.b->panels() * groups;
  RunInParallel(pool, tasks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t panel = task / groups, group = task % groups;
      const int64_t block_end = std::min(blocks, (group + 1) * group_blocks);
      for (int64_t blk = group * group_blocks; blk < block_end; ++blk) {
        const int64_t i0 = blk * kF16TileRows;
        row_block(g, PackedABlock(packed_a, k, i0), i0, std::min(kF16TileRows, g.m - i0), panel);
      }
    }
  });
}

}  // namespace nee::cpu
