// nee's fused ScaledDotProductAttention (ops/attention_sdpa.h) on float32:
// one task per (batch, head), claimed by threads one at a time. A task
// computes its S x L scores (a causal one in blocks of queries, each over the
// keys its queries see) with one single-threaded SGEMM reading Q in place
// (the scale folded into its packing; q, k and v may lie side by side in one
// packed tensor, read with its row stride) and the head's K^T, written into
// SGEMM's packed panels (see TransposeKey), adds the bias row by row, takes
// the softmax of each row with the AVX2 exponential, and multiplies by V with
// a second SGEMM that writes straight into the head's columns of the
// [B, S, N*Hv] output. Only one head's scores
// exist at a time (per thread), instead of the [B, N, S, L] tensor the
// unfused graph writes three times.
//
// That is the SGEMM path, taken with portable SGEMM (or when a test forces
// it). With an FMA SGEMM (AVX2 or AVX-512) the block path runs instead, with
// the same bits: per block of 12
// queries, the scaled queries copied row-major, their scores against K^T's
// runs of 16 keys, the softmax rows while they are in L1, and P V against V
// copied once per head into runs of 16 columns, both products on this
// file's 6x16 (and 12x8) tiles, which broadcast A where it lies: SGEMM packed
// the queries and, for P V, the probabilities into 12-row panels per call
// (8% of ViT's attention node). The tiles' FMA chains, k-blocks and the
// softmax's operations are SGEMM's and SoftmaxRow8's (tests compare the two
// paths bit for bit).
//
// Each task writes its own output slice and neither path splits k, so the
// result does not depend on the thread count. CPUs without AVX2+FMA, and an
// empty key sequence, go to the reference kernel.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_x86.h"
#include "ops/attention_sdpa.h"

namespace nee::cpu {

namespace {
std::atomic<bool> g_force_sgemm_path{false};
}  // namespace

void AttentionForceSgemmPath(bool on) { g_force_sgemm_path.store(on); }

#if defined(__x86_64__) || defined(__i386__)
namespace {

// Adds one bias row to a scores row: `stride` 1 (a row of L) or 0 (one value).
void AddBiasRow(float* row, const float* bias, int64_t stride, int64_t n) {
  if (stride == 0) {
    const float b = bias[0];
    for (int64_t i = 0; i < n; ++i) row[i] += b;
  } else {
    for (int64_t i = 0; i < n; ++i) row[i] += bias[i];
  }
}

// Per-thread buffers of one head: its scores, K^T and (causal) V.
struct HeadScratch {
  std::vector<float> scores;
  SgemmScratch key, value, query;
};

// Where the head's K^T [H, L] lies for the scores' SGEMM.
struct KeyOperand {
  const float* data;
  bool packed;  // SGEMM's packed panels (SgemmB::Prepacked), else row-major with row stride L
};

// The head's K^T [H, L]: K in place is [L, H] with row stride D, which SGEMM
// would read down its columns (that made the fused attention slower than the
// unfused graph's Transpose + MatMul at ViT's 197 tokens). With H within one
// k-block of SGEMM (H <= 256, every model's head), K^T is written straight
// into SGEMM's packed panels, so no SGEMM call packs it again (a plain K^T
// of L = 128 rows 512 bytes apart was packed by every call: its rows alias
// in L1). In that layout a panel's place does not depend on how many columns
// follow it, so the first `keys` columns are themselves K^T[:, :keys] packed:
// a causal block's SGEMM reads a prefix. Sixteen keys of a panel run are an
// H x 16 block, written by 8x8 AVX2 transposes; ragged keys one by one.
// K^T [H, L] as runs of 16 keys, run q at q * H * 16 (H x 16 floats, keys
// past L zero, whole 32-key panels), which for H <= 256 is SGEMM's packed
// layout of K^T.
__attribute__((target("avx2"))) const float* TransposeKeyRuns(const SdpaGeometry& g, int64_t b, int64_t n,
                                                              SgemmScratch& scratch) {
  const int64_t L = g.kv_len, H = g.head, D = g.k_ld;
  const float* k = g.key + b * L * D + n * H;
  const int64_t l8 = L / 8 * 8, h8 = H / 8 * 8;
  const int64_t padded = (L + kSgemmPanelWidth - 1) / kSgemmPanelWidth * kSgemmPanelWidth;
  float* out = scratch.Get(H * padded);
  for (int64_t l0 = 0; l0 < padded; l0 += kSgemmPanelRun) {
    float* run = out + l0 / kSgemmPanelRun * H * kSgemmPanelRun;
    for (int64_t l = l0; l < std::min(l0 + kSgemmPanelRun, l8); l += 8)
      for (int64_t h = 0; h < h8; h += 8)
        Transpose8x8Avx2(k + l * D + h, D, run + h * kSgemmPanelRun + l - l0, kSgemmPanelRun);
    // Ragged keys one by one, and zeros for the panel's columns past L. Kept
    // apart: as one loop (`l < L ? k[...] : 0`) GCC reads K with masked
    // loads whose addresses run on past the tensor, for the padding columns
    // too, and those took ~9% of ViT's attention run alone (197 keys: 27
    // padding columns of 64 floats a head).
    for (int64_t l = std::max(l0, l8); l < std::min(l0 + kSgemmPanelRun, L); ++l)
      for (int64_t h = 0; h < H; ++h) run[h * kSgemmPanelRun + l - l0] = k[l * D + h];
    for (int64_t l = std::max(l0, L); l < l0 + kSgemmPanelRun; ++l)
      for (int64_t h = 0; h < H; ++h) run[h * kSgemmPanelRun + l - l0] = 0.f;
    if (h8 < H)
      for (int64_t l = l0; l < std::min(l0 + kSgemmPanelRun, l8); ++l)
        for (int64_t h = h8; h < H; ++h) run[h * kSgemmPanelRun + l - l0] = k[l * D + h];
  }
  return out;
}

// The head's K^T [H, L]: K in place is [L, H] with row stride D, which SGEMM
// would read down its columns (that made the fused attention slower than the
// unfused graph's Transpose + MatMul at ViT's 197 tokens). With H within one
// k-block of SGEMM (H <= 256, every model's head), K^T is written straight
// into SGEMM's packed panels (TransposeKeyRuns), so no SGEMM call packs it
// again (a plain K^T of L = 128 rows 512 bytes apart was packed by every
// call: its rows alias in L1). In that layout a panel's place does not
// depend on how many columns follow it, so the first `keys` columns are
// themselves K^T[:, :keys] packed: a causal block's SGEMM reads a prefix.
// Sixteen keys of a panel run are an H x 16 block, written by 8x8 AVX2
// transposes; ragged keys one by one.
__attribute__((target("avx2"))) KeyOperand TransposeKey(const SdpaGeometry& g, int64_t b, int64_t n,
                                                        SgemmScratch& scratch) {
  const int64_t L = g.kv_len, H = g.head, D = g.k_ld;
  if (H <= kSgemmDepthBlock) return {TransposeKeyRuns(g, b, n, scratch), true};
  const float* k = g.key + b * L * D + n * H;
  const int64_t l8 = L / 8 * 8, h8 = H / 8 * 8;
  float* out = scratch.Get(H * L);
  for (int64_t l = 0; l < l8; l += 8)
    for (int64_t h = 0; h < h8; h += 8) Transpose8x8Avx2(k + l * D + h, D, out + h * L + l, L);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = l < l8 ? h8 : 0; h < H; ++h) out[h * L + l] = k[l * D + h];
  return {out, false};
}

// The head's V [L, Hv] copied contiguously, its rows an odd number of 64-byte
// lines apart, so that SGEMM reads it in place for a causal block's few rows
// (rows 3 KiB apart, as in the [B, L, N*Hv] input, alias in L1 and would be
// packed by every block's call). Returns the row stride.
int64_t CopyValue(const SdpaGeometry& g, int64_t b, int64_t n, SgemmScratch& scratch, const float** data) {
  const int64_t L = g.kv_len, ld = (g.v_head + 15) / 16 * 16 | 16;
  float* out = scratch.Get(L * ld);
  const float* v = g.value + b * L * g.v_ld + n * g.v_head;
  for (int64_t l = 0; l < L; ++l)
    std::memcpy(out + l * ld, v + l * g.v_ld, static_cast<size_t>(g.v_head) * sizeof(float));
  *data = out;
  return ld;
}

// Queries per block of a causal head: the block's scores span only the keys
// its last query sees, so the masked triangle is skipped in blocks of this
// many rows (two of SGEMM's 12-row panels). Smaller blocks skip more but run
// more, smaller SGEMMs. GPT-2's head (S = L = 128, H = 64) at 1 thread, against
// the full rows under the mask: 12 rows 0.69x, 24 0.69x, 36 0.71x, 48 0.72x,
// 128 (one block: only the softmax skips) 0.92x; at S = L = 256 0.62x, 0.59x,
// 0.62x for 12, 24, 36.
constexpr int64_t kCausalBlockRows = 24;

// Queries [s0, s1) of one (batch, head): scores = scale * Q K^T (+ bias) over
// the `keys` keys the block's last query sees (all L without causal),
// softmax of each query's visible keys, out = P V (V at `v`, row stride ldv).
// The scores of a visible key, the softmax's lanes and the order of P V's
// sums do not depend on how queries are blocked, and an unseen key's
// probability is exactly 0 either way, so causal blocking gives the bits a
// full row under a -FLT_MAX mask gives (for finite V).
//
// The scores' rows are `keys` rounded up to eight floats apart, and a row's
// visible keys are followed by -inf up to a multiple of eight: SoftmaxRow8
// then runs on whole vectors only. Its ragged tail (ViT's 197 keys: 24
// vectors and 5 floats) went through a padded buffer, scalar stores and
// scalar loops, row by row; the padded lanes give the bits that buffer gave
// (e^-inf = 0 in the sum's last vector, in the same order).
void AttendQueries(const SdpaGeometry& g, int64_t b, int64_t n, int64_t s0, int64_t s1, const KeyOperand& kt,
                   const float* v, int64_t ldv, std::vector<float>& scores, float* out) {
  const int64_t Dv = g.heads * g.v_head;
  const int64_t rows = s1 - s0, keys = g.VisibleKeys(s1 - 1), ld = (keys + 7) / 8 * 8;
  scores.resize(static_cast<size_t>(rows * ld));
  const SgemmA q(MatrixView{g.query + (b * g.q_len + s0) * g.q_ld + n * g.head, g.q_ld, 1}, g.scale);
  const SgemmB key = kt.packed ? SgemmB::Prepacked(kt.data) : SgemmB(MatrixView{kt.data, g.kv_len, 1});
  Sgemm(rows, keys, g.head, q, key, 0.f, scores.data(), ld, nullptr);
  for (int64_t s = s0; s < s1; ++s) {
    float* row = scores.data() + (s - s0) * ld;
    const int64_t visible = g.VisibleKeys(s), lanes = (visible + 7) / 8 * 8;
    if (g.bias) {
      const float* bias = g.bias + b * g.bias_stride[0] + n * g.bias_stride[1] + s * g.bias_stride[2];
      AddBiasRow(row, bias, g.bias_stride[3], visible);
    }
    std::fill(row + visible, row + lanes, -std::numeric_limits<float>::infinity());
    SoftmaxRow8(row, row, lanes);
    std::fill(row + visible, row + keys, 0.f);
  }
  const MatrixView p{scores.data(), ld, 1};
  Sgemm(rows, g.v_head, keys, 1.f, p, MatrixView{v, ldv, 1}, 0.f, out + (b * g.q_len + s0) * Dv + n * g.v_head, Dv,
        nullptr);
}

// One (batch, head): all queries at once, or causal ones in blocks.
void AttendHead(const SdpaGeometry& g, int64_t b, int64_t n, HeadScratch& scratch, float* out) {
  const KeyOperand kt = TransposeKey(g, b, n, scratch.key);
  const int64_t block = g.causal ? kCausalBlockRows : g.q_len;
  const float* v = g.value + b * g.kv_len * g.v_ld + n * g.v_head;
  int64_t ldv = g.v_ld;
  if (block < g.q_len) ldv = CopyValue(g, b, n, scratch.value, &v);
  for (int64_t s0 = 0; s0 < g.q_len; s0 += block)
    AttendQueries(g, b, n, s0, std::min(g.q_len, s0 + block), kt, v, ldv, scratch.scores, out);
}

// ---- The AVX2 path: blocks of queries on a kernel reading A where it lies ----

constexpr int64_t kRunWidth = kSgemmPanelRun;  // columns of B per run
constexpr int64_t kDepthBlock = kSgemmDepthBlock;

// C[0:R, 0:cols] (=, or + with accumulate) A[0:R, 0:k] B[0:k, 0:16], k <= 256:
// row r of A read where it lies (a + r * lda), B a run of 16 columns
// (b[p * 16 + j], 32-byte aligned, zero past the matrix). Each C element is
// one chain of FMAs over p in increasing order from zero, added to C after
// the chain where `accumulate`: what SGEMM's micro-kernels compute for a
// k-block, so the bits are SGEMM's. A read in place saves SGEMM's packing of
// it into 12-row panels: the scaled queries and, for P V, the probabilities
// (8% of ViT's attention node went to packing them).
template <int R>
__attribute__((target("avx2,fma"))) void RowsTimesRun(int64_t k, const float* a, int64_t lda, const float* b,
                                                      float* c, int64_t ldc, int64_t cols, bool accumulate) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_load_ps(b + p * kRunWidth), b1 = _mm256_load_ps(b + p * kRunWidth + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  if (cols == kRunWidth) {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        float* cr = c + r * ldc + 8 * v;
        __m256 sum = acc[r][v];
        if (accumulate) sum = _mm256_add_ps(sum, _mm256_loadu_ps(cr));
        _mm256_storeu_ps(cr, sum);
      }
    return;
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask[2] = {_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols)), lane),
                           _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols) - 8), lane)};
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      float* cr = c + r * ldc + 8 * v;
      __m256 sum = acc[r][v];
      if (accumulate) sum = _mm256_add_ps(sum, _mm256_maskload_ps(cr, mask[v]));
      _mm256_maskstore_ps(cr, mask[v], sum);
    }
}

// RowsTimesRun for a last run of at most 8 columns (cols <= 8), up to 12
// rows at once: one vector of columns, twelve accumulators. Computing the
// run's 16 columns would spend half the FMAs on padding: ViT's 197 keys
// are 12 runs and 5 keys.
template <int R>
__attribute__((target("avx2,fma"))) void RowsTimesHalfRun(int64_t k, const float* a, int64_t lda, const float* b,
                                                          float* c, int64_t ldc, int64_t cols, bool accumulate) {
  __m256 acc[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    const __m256 bv = _mm256_load_ps(b + p * kRunWidth);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * lda + p), bv, acc[r]);
  }
  const __m256i mask =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    __m256 sum = acc[r];
    if (cols == 8) {
      if (accumulate) sum = _mm256_add_ps(sum, _mm256_loadu_ps(cr));
      _mm256_storeu_ps(cr, sum);
    } else {
      if (accumulate) sum = _mm256_add_ps(sum, _mm256_maskload_ps(cr, mask));
      _mm256_maskstore_ps(cr, mask, sum);
    }
  }
}

using RowsTimesRunFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, bool);
constexpr RowsTimesRunFn kRowsTimesRun[6] = {RowsTimesRun<1>, RowsTimesRun<2>, RowsTimesRun<3>,
                                             RowsTimesRun<4>, RowsTimesRun<5>, RowsTimesRun<6>};
constexpr RowsTimesRunFn kRowsTimesHalfRun[12] = {
    RowsTimesHalfRun<1>, RowsTimesHalfRun<2>, RowsTimesHalfRun<3>,  RowsTimesHalfRun<4>,
    RowsTimesHalfRun<5>, RowsTimesHalfRun<6>, RowsTimesHalfRun<7>,  RowsTimesHalfRun<8>,
    RowsTimesHalfRun<9>, RowsTimesHalfRun<10>, RowsTimesHalfRun<11>, RowsTimesHalfRun<12>};

// C[rows, n] = A[rows, k] B[k, n]: A row-major (lda), B as runs of 16
// columns, run q at b + q * run_stride (k x 16 floats, zero past n). Runs
// outermost, so that a run is read from L2 once and from L1 by the other
// rows; rows in groups of six (7 or 8 left as 4 + the rest: two rows have
// too few accumulators to hide the FMA latency), a last run of at most 8
// columns in groups of twelve (RowsTimesHalfRun); k in SGEMM's k-blocks.
void RowsTimesRuns(int64_t rows, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t run_stride, float* c, int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += kRunWidth) {
    const float* run = b + j0 / kRunWidth * run_stride;
    const int64_t cols = std::min(kRunWidth, n - j0);
    if (cols <= 8) {
      for (int64_t r0 = 0; r0 < rows; r0 += 12) {
        const RowsTimesRunFn kernel = kRowsTimesHalfRun[std::min<int64_t>(12, rows - r0) - 1];
        for (int64_t p0 = 0; p0 < k; p0 += kDepthBlock)
          kernel(std::min(kDepthBlock, k - p0), a + r0 * lda + p0, lda, run + p0 * kRunWidth, c + r0 * ldc + j0,
                 ldc, cols, p0 > 0);
      }
      continue;
    }
    for (int64_t r0 = 0, step = 6; r0 < rows; r0 += step) {
      const int64_t left = rows - r0;
      step = left == 7 || left == 8 ? 4 : std::min<int64_t>(6, left);
      const RowsTimesRunFn kernel = kRowsTimesRun[step - 1];
      for (int64_t p0 = 0; p0 < k; p0 += kDepthBlock)
        kernel(std::min(kDepthBlock, k - p0), a + r0 * lda + p0, lda, run + p0 * kRunWidth, c + r0 * ldc + j0, ldc,
               cols, p0 > 0);
    }
  }
}

// The head's V [L, Hv] as runs of 16 columns (run q: L x 16 floats, zero past Hv).
__attribute__((target("avx2"))) const float* ValueRuns(const SdpaGeometry& g, int64_t b, int64_t n,
                                                       SgemmScratch& scratch) {
  const int64_t L = g.kv_len, Hv = g.v_head, runs = (Hv + kRunWidth - 1) / kRunWidth;
  const int64_t whole = Hv / kRunWidth, cols = Hv - whole * kRunWidth;  // whole runs, then `cols` columns
  float* out = scratch.Get(runs * L * kRunWidth);
  const float* v = g.value + b * L * g.v_ld + n * Hv;
  for (int64_t l = 0; l < L; ++l) {
    const float* row = v + l * g.v_ld;
    float* dst = out + l * kRunWidth;
    for (int64_t q = 0; q < whole; ++q) {
      _mm256_store_ps(dst + q * L * kRunWidth, _mm256_loadu_ps(row + q * kRunWidth));
      _mm256_store_ps(dst + q * L * kRunWidth + 8, _mm256_loadu_ps(row + q * kRunWidth + 8));
    }
    if (cols > 0) {
      float* last = dst + whole * L * kRunWidth;
      std::memcpy(last, row + whole * kRunWidth, static_cast<size_t>(cols) * sizeof(float));
      std::fill(last + cols, last + kRunWidth, 0.f);
    }
  }
  return out;
}

// e^v as simd_math.h's ExpNonPositiveOrZero8 computes it, bit for bit, for
// v = x - max <= 0 (or NaN), in two halves: the range reduction, which
// leaves t (2^n in its low mantissa bits), r and the lanes below -87, and the
// polynomial times 2^n with those lanes zeroed. ExpNonPositiveOrZero8 first
// clamps v to -87, which only keeps the lanes it zeroes in range; here they
// may become NaN or anything before they are zeroed, and NaN stays NaN
// through the same operations.
struct ReducedExp {
  __m256 t, r, tiny;
};
__attribute__((target("avx2,fma"), always_inline)) inline ReducedExp ReduceExp(__m256 v) {
  const __m256 shifter = _mm256_set1_ps(12582912.f + 127.f);  // 1.5 * 2^23 + 127
  ReducedExp x;
  x.tiny = _mm256_cmp_ps(v, _mm256_set1_ps(-87.f), _CMP_LT_OQ);
  x.t = _mm256_fmadd_ps(v, _mm256_set1_ps(1.44269504088896341f), shifter);
  const __m256 n = _mm256_sub_ps(x.t, shifter);
  x.r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), v);
  x.r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), x.r);
  return x;
}
__attribute__((target("avx2,fma"), always_inline)) inline __m256 FinishExp(const ReducedExp& x) {
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(x.t), 23));
  return _mm256_andnot_ps(x.tiny, _mm256_mul_ps(Estrin8(x.r, kExpOfNonPositiveR), scale));
}

// SoftmaxRow8(row, row, n) for n a positive multiple of 8, the same bits for rows
// without NaN (a row with a NaN comes out all NaN either way, perhaps with
// another NaN's bits): its maximum in four independent chains (one vmaxps
// chain waited on the previous one's latency every step), and the
// exponential software-pipelined, each step reducing the vector two ahead
// and finishing this one. The exponential's ~40-cycle chain per vector had
// the core's FP scheduler full of waiting operations (two rows interleaved
// ran no faster): 8.5 cycles a vector for 6 cycles of FMA-unit work (Zen 3);
// pipelined one vector ahead 7.6, two ahead 7.2 (12 rows of 200 scores,
// thread CPU time). A cheaper exponential (degree 5, one-step reduction,
// 2^n added to the exponent) measured 6.7 cycles: ~1.5% of ViT's node for
// other bits, not taken.
__attribute__((target("avx2,fma"))) void SoftmaxScores(float* row, int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  __m256 m0 = _mm256_set1_ps(-kInf), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(row + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(row + i + 8));
    m2 = _mm256_max_ps(m2, _mm256_loadu_ps(row + i + 16));
    m3 = _mm256_max_ps(m3, _mm256_loadu_ps(row + i + 24));
  }
  for (; i < n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(row + i));
  __m256 vmax = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
  vmax = _mm256_max_ps(vmax, _mm256_permute2f128_ps(vmax, vmax, 1));
  vmax = _mm256_max_ps(vmax, _mm256_shuffle_ps(vmax, vmax, 0x4E));
  vmax = _mm256_max_ps(vmax, _mm256_shuffle_ps(vmax, vmax, 0xB1));
  const float row_max = _mm256_cvtss_f32(vmax);
  if (std::isinf(row_max) || std::isnan(row_max)) {
    std::fill(row, row + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  const __m256 shift = _mm256_set1_ps(row_max);
  __m256 vsum = _mm256_setzero_ps();
  // Vectors i + 8 and i + 16 reduced (or being reduced) while vector i finishes.
  ReducedExp first = ReduceExp(_mm256_sub_ps(_mm256_loadu_ps(row), shift));
  ReducedExp second = n > 8 ? ReduceExp(_mm256_sub_ps(_mm256_loadu_ps(row + 8), shift)) : first;
  for (i = 0; i < n; i += 8) {
    const ReducedExp x = first;
    first = second;
    if (i + 16 < n) second = ReduceExp(_mm256_sub_ps(_mm256_loadu_ps(row + i + 16), shift));
    const __m256 e = FinishExp(x);
    _mm256_storeu_ps(row + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vsum);
  float sum = 0.f;
  for (int k = 0; k < 8; ++k) sum += lanes[k];
  const __m256 scale = _mm256_set1_ps(1.f / sum);
  for (i = 0; i < n; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), scale));
}

// AddBiasRow on eight lanes (GCC's -O2 leaves that loop scalar: 2.3% of
// BERT's attention node).
__attribute__((target("avx2"))) void AddBiasRowAvx2(float* row, const float* bias, int64_t stride, int64_t n) {
  const int64_t n8 = n / 8 * 8;
  if (stride == 0) {
    const __m256 b = _mm256_set1_ps(bias[0]);
    for (int64_t i = 0; i < n8; i += 8) _mm256_storeu_ps(row + i, _mm256_add_ps(_mm256_loadu_ps(row + i), b));
  } else {
    for (int64_t i = 0; i < n8; i += 8)
      _mm256_storeu_ps(row + i, _mm256_add_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(bias + i)));
  }
  AddBiasRow(row + n8, bias + (stride == 0 ? 0 : n8), stride, n - n8);
}

// Queries [s0, s1) of one (batch, head), as AttendQueries computes them (the
// same bits): scaled queries copied row-major (SGEMM multiplies A by alpha
// as it packs it), scores against K^T's runs, the softmax rows, and P V
// against V's runs, straight into the output.
__attribute__((target("avx2"))) void AttendQueriesAvx2(const SdpaGeometry& g, int64_t b, int64_t n, int64_t s0,
                                                       int64_t s1, const float* kt, const float* vr,
                                                       HeadScratch& scratch, float* out) {
  const int64_t Dv = g.heads * g.v_head, H = g.head;
  const int64_t rows = s1 - s0, keys = g.VisibleKeys(s1 - 1);
  const int64_t ld = (keys + 7) / 8 * 8;  // scores: whole vectors stored
  float* q = scratch.query.Get(rows * H);
  const __m256 scale = _mm256_set1_ps(g.scale);
  const int64_t h8 = H / 8 * 8;
  for (int64_t s = s0; s < s1; ++s) {
    const float* src = g.query + (b * g.q_len + s) * g.q_ld + n * H;
    float* dst = q + (s - s0) * H;
    for (int64_t h = 0; h < h8; h += 8) _mm256_storeu_ps(dst + h, _mm256_mul_ps(_mm256_loadu_ps(src + h), scale));
    for (int64_t h = h8; h < H; ++h) dst[h] = src[h] * g.scale;
  }
  scratch.scores.resize(static_cast<size_t>(rows * ld));
  float* scores = scratch.scores.data();
  // A causal block of 12 as two halves, the first over the fewer keys its
  // queries see (the second half's keys are the block's): the keys skipped
  // have probability 0, whose products add nothing to P V's sums (an FMA
  // chain from +0 never holds -0), so the bits stay. GPT-2's node 0.988x
  // (in-process A/B, 3 x 500 rounds).
  const bool halves = g.causal && rows == 12;
  const int64_t half_keys = halves ? g.VisibleKeys(s0 + 5) : keys;
  if (halves) {
    RowsTimesRuns(6, (half_keys + 7) / 8 * 8, H, q, H, kt, H * kRunWidth, scores, ld);
    RowsTimesRuns(6, ld, H, q + 6 * H, H, kt, H * kRunWidth, scores + 6 * ld, ld);
  } else {
    RowsTimesRuns(rows, ld, H, q, H, kt, H * kRunWidth, scores, ld);  // ld columns: no masked stores
  }
  for (int64_t s = s0; s < s1; ++s) {
    float* row = scores + (s - s0) * ld;
    const int64_t visible = g.VisibleKeys(s), lanes = (visible + 7) / 8 * 8;
    if (g.bias) {
      const float* bias = g.bias + b * g.bias_stride[0] + n * g.bias_stride[1] + s * g.bias_stride[2];
      AddBiasRowAvx2(row, bias, g.bias_stride[3], visible);
    }
    std::fill(row + visible, row + lanes, -std::numeric_limits<float>::infinity());
    SoftmaxScores(row, lanes);
    std::fill(row + visible, row + keys, 0.f);
  }
  float* o = out + (b * g.q_len + s0) * Dv + n * g.v_head;
  if (halves) {
    RowsTimesRuns(6, g.v_head, half_keys, scores, ld, vr, g.kv_len * kRunWidth, o, Dv);
    RowsTimesRuns(6, g.v_head, keys, scores + 6 * ld, ld, vr, g.kv_len * kRunWidth, o + 6 * Dv, Dv);
  } else {
    RowsTimesRuns(rows, g.v_head, keys, scores, ld, vr, g.kv_len * kRunWidth, o, Dv);
  }
}

// Queries per block on the AVX2 path: the block's scores (12 x 200 floats
// for ViT) stay in L1 from their SGEMM through the softmax to P V. Node
// alone, 1 thread, ViT / BERT / GPT-2 (causal) us: 6 rows 1625 / 712 / 445,
// 12 rows 1610 / 702 / 438, 18 rows 1601 / 707 / 462, 24 rows 1620 / 703 /
// 458, 36 rows 1621 / 705 / 489.
constexpr int64_t kQueryBlockAvx2 = 12;

void AttendHeadAvx2(const SdpaGeometry& g, int64_t b, int64_t n, HeadScratch& scratch, float* out) {
  const float* kt = TransposeKeyRuns(g, b, n, scratch.key);
  const float* vr = ValueRuns(g, b, n, scratch.value);
  for (int64_t s0 = 0; s0 < g.q_len; s0 += kQueryBlockAvx2)
    AttendQueriesAvx2(g, b, n, s0, std::min(g.q_len, s0 + kQueryBlockAvx2), kt, vr, scratch, out);
}

}  // namespace

Status ScaledDotProductAttentionFloat(KernelContext& ctx) {
  Result<SdpaGeometry> geometry = SdpaGeometryOf(ctx);
  if (!geometry.ok() || !CpuHasAvx2Fma()) return RunReference(ctx);  // the reference reports the error
  const SdpaGeometry& g = geometry.value();
  if (g.kv_len == 0 || g.head == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat,
                                                                  {g.batch, g.q_len, g.heads * g.v_head}));
  if (out.num_elements() == 0) return Status::Ok();
  float* po = out.data<float>();
  // The block path wherever SGEMM runs an FMA kernel: its ymm tiles give the AVX-512 kernel's bits too, and on
  // a Zen 4 core (512-bit operations split in two) they run as fast, so it pays there as well (fused attention
  // node alone, AVX-512 SGEMM path -> block path, 1 / 2 threads: ViT 1.72-1.84 -> 1.62-1.65 / 0.96-1.04 ->
  // 0.84-0.86 ms, BERT 0.75-0.80 -> 0.70-0.73 / 0.41-0.44 -> 0.38-0.44 ms).
  const SgemmIsa isa = SgemmActiveIsa();
  const bool block_path = (isa == SgemmIsa::kAvx2 || isa == SgemmIsa::kAvx512) &&
                          !g_force_sgemm_path.load(std::memory_order_relaxed);
  ParallelTasks(ctx, g.batch * g.heads, [&](int64_t task) {
    thread_local HeadScratch scratch;
    if (block_path) AttendHeadAvx2(g, task / g.heads, task % g.heads, scratch, po);
    else AttendHead(g, task / g.heads, task % g.heads, scratch, po);
  });
  return Status::Ok();
}

#else
Status ScaledDotProductAttentionFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
