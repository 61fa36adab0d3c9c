// nee's fused ScaledDotProductAttention (ops/attention_sdpa.h) on float32:
// one task per (batch, head), claimed by threads one at a time. A task
// computes its S x L scores with one single-threaded SGEMM reading Q in place
// (the scale folded into its packing) and the head's K^T, copied contiguously
// (see TransposeKey), adds the bias row by row, takes the softmax of each row with the AVX2
// exponential, and multiplies by V with a second SGEMM that writes straight
// into the head's columns of the [B, S, N*Hv] output. Only one head's scores
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


// The head's K^T [H, L] written contiguously: SGEMM packs a row-major B much
// faster than one read down its columns (K in place is [L, H] with row
// stride D), which made the fused attention slower than the unfused graph's
// Transpose + MatMul at ViT's 197 tokens.
// 8x8 tiles by AVX2 (the scalar loop cost ViT-B/16 about 0.5 ms of its 24 ms
// of attention at 1 thread), the ragged edges one by one.
__attribute__((target("avx2"))) void TransposeKey(const SdpaGeometry& g, int64_t b, int64_t n,
                                                  std::vector<float>& kt) {
  const int64_t L = g.kv_len, H = g.head, D = g.heads * g.head;
  kt.resize(static_cast<size_t>(H * L));
  const float* k = g.key + b * L * D + n * H;
  float* out = kt.data();
  const int64_t l8 = L / 8 * 8, h8 = H / 8 * 8;
  for (int64_t l = 0; l < l8; l += 8)
    for (int64_t h = 0; h < h8; h += 8) Transpose8x8Avx2(k + l * D + h, D, out + h * L + l, L);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = l < l8 ? h8 : 0; h < H; ++h) out[h * L + l] = k[l * D + h];
}

// One (batch, head): scores = scale * Q K^T (+ bias), softmax, out = P V.
void AttendHead(const SdpaGeometry& g, int64_t b, int64_t n, std::vector<float>& scores, std::vector<float>& kt,
                float* out) {
  const int64_t S = g.q_len, L = g.kv_len, D = g.heads * g.head, Dv = g.heads * g.v_head;
  scores.resize(static_cast<size_t>(S * L));
  TransposeKey(g, b, n, kt);
  const MatrixView q{g.query + b * S * D + n * g.head, D, 1};
  Sgemm(S, L, g.head, g.scale, q, MatrixView{kt.data(), L, 1}, 0.f, scores.data(), L, nullptr);
  for (int64_t s = 0; s < S; ++s) {
    float* row = scores.data() + s * L;
    if (g.bias) {
      const float* bias = g.bias + b * g.bias_stride[0] + n * g.bias_stride[1] + s * g.bias_stride[2];
      AddBiasRow(row, bias, g.bias_stride[3], L);
    }
    SoftmaxRow8(row, row, L);
  }
  const MatrixView p{scores.data(), L, 1};
  const MatrixView v{g.value + b * L * Dv + n * g.v_head, Dv, 1};
  Sgemm(S, g.v_head, L, 1.f, p, v, 0.f, out + b * S * Dv + n * g.v_head, Dv, nullptr);
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
  ParallelTasks(ctx, g.batch * g.heads, [&](int64_t task) {
    thread_local std::vector<float> scores, kt;
    AttendHead(g, task / g.heads, task % g.heads, scores, kt, po);
  });
  return Status::Ok();
}

#else
Status ScaledDotProductAttentionFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
