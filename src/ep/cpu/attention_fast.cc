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
// Each task writes its own output slice and SGEMM does not split k, so the
// result does not depend on the thread count. CPUs without AVX2+FMA, and an
// empty key sequence, go to the reference kernel.
#include <algorithm>
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

using RowsTimesRunFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, bool);
constexpr RowsTimesRunFn kRowsTimesRun[6] = {RowsTimesRun<1>, RowsTimesRun<2>, RowsTimesRun<3>,
                                             RowsTimesRun<4>, RowsTimesRun<5>, RowsTimesRun<6>};

// C[rows, n] = A[rows, k] B[k, n]: A row-major (lda), B as runs of 16
// columns, run q at b + q * run_stride (k x 16 floats, zero past n). Runs
// outermost, so that a run is read from L2 once and from L1 by the other
// rows; rows in groups of six (7 or 8 left as 4 + the rest: two rows have
// too few accumulators to hide the FMA latency); k in SGEMM's k-blocks.
void RowsTimesRuns(int64_t rows, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t run_stride, float* c, int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += kRunWidth) {
    const float* run = b + j0 / kRunWidth * run_stride;
    const int64_t cols = std::min(kRunWidth, n - j0);
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
  float* out = scratch.Get(runs * L * kRunWidth);
  const float* v = g.value + b * L * g.v_ld + n * Hv;
  for (int64_t q = 0; q < runs; ++q) {
    float* run = out + q * L * kRunWidth;
    const int64_t j0 = q * kRunWidth, cols = std::min(kRunWidth, Hv - j0);
    if (cols == kRunWidth) {
      for (int64_t l = 0; l < L; ++l) {
        _mm256_store_ps(run + l * kRunWidth, _mm256_loadu_ps(v + l * g.v_ld + j0));
        _mm256_store_ps(run + l * kRunWidth + 8, _mm256_loadu_ps(v + l * g.v_ld + j0 + 8));
      }
    } else {
      for (int64_t l = 0; l < L; ++l) {
        std::fill(run + l * kRunWidth + cols, run + (l + 1) * kRunWidth, 0.f);
        std::memcpy(run + l * kRunWidth, v + l * g.v_ld + j0, static_cast<size_t>(cols) * sizeof(float));
      }
    }
  }
  return out;
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
  const int64_t ld = (keys + kRunWidth - 1) / kRunWidth * kRunWidth;  // scores: whole runs stored
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
  RowsTimesRuns(rows, ld, H, q, H, kt, H * kRunWidth, scores, ld);
  for (int64_t s = s0; s < s1; ++s) {
    float* row = scores + (s - s0) * ld;
    const int64_t visible = g.VisibleKeys(s), lanes = (visible + 7) / 8 * 8;
    if (g.bias) {
      const float* bias = g.bias + b * g.bias_stride[0] + n * g.bias_stride[1] + s * g.bias_stride[2];
      AddBiasRow(row, bias, g.bias_stride[3], visible);
    }
    std::fill(row + visible, row + lanes, -std::numeric_limits<float>::infinity());
    SoftmaxRow8(row, row, lanes);
    std::fill(row + visible, row + keys, 0.f);
  }
  RowsTimesRuns(rows, g.v_head, keys, scores, ld, vr, g.kv_len * kRunWidth, out + (b * g.q_len + s0) * Dv + n * g.v_head,
                Dv);
}

// Queries per block on the AVX2 path.
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
  const bool avx2 = SgemmActiveIsa() == SgemmIsa::kAvx2;
  ParallelTasks(ctx, g.batch * g.heads, [&](int64_t task) {
    thread_local HeadScratch scratch;
    if (avx2) AttendHeadAvx2(g, task / g.heads, task % g.heads, scratch, po);
    else AttendHead(g, task / g.heads, task % g.heads, scratch, po);
  });
  return Status::Ok();
}

#else
Status ScaledDotProductAttentionFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
