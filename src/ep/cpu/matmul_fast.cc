// MatMul and Gemm on float32 through the blocked SGEMM (sgemm.cc); bfloat16
// goes to bf16_matmul_fast.cc. Other element types, and shapes these do not
// handle, go to the reference kernels.
// A constant 2-D B (weights) is packed once per session (PreparedCache).
#include <algorithm>
#include <cmath>
#include <memory>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/gemm_plan.h"
#include "ep/cpu/packed_constant_b.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_x86.h"
#define NEE_MATMUL_X86 1
#endif

namespace nee::cpu {

namespace {

// sum_i a[i] * b[i] with four partial sums of eight lanes, combined in a fixed
// order: one output's value never depends on which thread computes it.
float DotPortable(const float* a, const float* b, int64_t k) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < k; ++i) sum += a[i] * b[i];
  return sum;
}

#ifdef NEE_MATMUL_X86
// A dot product's four partial sums of eight lanes combined in a fixed order,
// then the elements [i, k) past the last whole vector: shared by DotAvx2 and
// DotPairAvx2, so a row's value is the same whichever computes it.
__attribute__((target("avx2,fma"), always_inline)) inline float FinishDotAvx2(__m256 s0, __m256 s1, __m256 s2,
                                                                             __m256 s3, const float* a,
                                                                             const float* b, int64_t i, int64_t k) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  float sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (; i < k; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

__attribute__((target("avx2,fma"))) float DotAvx2(const float* a, const float* b, int64_t k) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= k; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  return FinishDotAvx2(acc0, acc1, acc2, acc3, a, b, i, k);
}

// DotAvx2 of a with two rows at once, each row's sums exactly DotAvx2's (so
// the same bits): a's vectors are loaded once for both, and the two rows
// stream from memory side by side.
__attribute__((target("avx2,fma"))) void DotPairAvx2(const float* a, const float* b0, const float* b1, int64_t k,
                                                     float* out) {
  __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0, q0 = p0, q1 = p0, q2 = p0, q3 = p0;
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    const __m256 a0 = _mm256_loadu_ps(a + i), a1 = _mm256_loadu_ps(a + i + 8);
    const __m256 a2 = _mm256_loadu_ps(a + i + 16), a3 = _mm256_loadu_ps(a + i + 24);
    p0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + i), p0);
    q0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b1 + i), q0);
    p1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b0 + i + 8), p1);
    q1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b1 + i + 8), q1);
    p2 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b0 + i + 16), p2);
    q2 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b1 + i + 16), q2);
    p3 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b0 + i + 24), p3);
    q3 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b1 + i + 24), q3);
  }
  for (; i + 8 <= k; i += 8) {
    const __m256 a0 = _mm256_loadu_ps(a + i);
    p0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b0 + i), p0);
    q0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b1 + i), q0);
  }
  out[0] = FinishDotAvx2(p0, p1, p2, p3, a, b0, i, k);
  out[1] = FinishDotAvx2(q0, q1, q2, q3, a, b1, i, k);
}
#endif

void DotPairPortable(const float* a, const float* b0, const float* b1, int64_t k, float* out) {
  out[0] = DotPortable(a, b0, k);
  out[1] = DotPortable(a, b1, k);
}

using DotFn = float (*)(const float*, const float*, int64_t);
using DotPairFn = void (*)(const float*, const float*, const float*, int64_t, float*);
struct Dots {
  DotFn one;
  DotPairFn pair;
};
Dots SelectDots() {
#ifdef NEE_MATMUL_X86
  if (CpuHasAvx2Fma() && !SgemmPortableForced()) return {DotAvx2, DotPairAvx2};
#endif
  return {DotPortable, DotPairPortable};
}

// One row of A times a transposed B (n rows of k, as torch's Linear stores its
// weight): y[j] = alpha * dot(a, B[j]) + beta_y * y[j]. A matrix-vector product
// is bound by reading B once; dot products read it in place, in order, where
// SGEMM would pack it into panels and use one row of a twelve-row tile. Two
// rows at a time (each row's sums as alone): a's loads shared, two streams of
// B in flight (1000 x 1280 from L3 10% faster than a row at a time, from
// memory 0-5%).
void GemvTransposedB(const KernelContext& ctx, const float* a, const float* b, int64_t n, int64_t k, float alpha,
                     float beta_y, float* y) {
  const Dots dots = SelectDots();
  auto finish = [&](int64_t j, float sum) {
    const float v = alpha * sum;
    y[j] = beta_y == 0.f ? v : v + y[j];
  };
  ctx.ParallelFor(n, std::max<int64_t>(16, 16384 / std::max<int64_t>(k, 1)), [&](int64_t begin, int64_t end) {
    int64_t j = begin;
    for (float sums[2]; j + 2 <= end; j += 2) {
      dots.pair(a, b + j * k, b + (j + 1) * k, k, sums);
      finish(j, sums[0]);
      finish(j + 1, sums[1]);
    }
    if (j < end) finish(j, dots.one(a, b + j * k, k));
  });
}
// Dims with the trailing two removed.
std::vector<int64_t> BatchDims(const std::vector<int64_t>& d) { return {d.begin(), d.end() - 2}; }

}  // namespace

Status MatMulFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (a->dtype() == DataType::kBFloat16) return MatMulBFloat16(ctx);
  if (a->dtype() != DataType::kFloat || b->dtype() != DataType::kFloat || b->rank() < 2 ||
      a->rank() < (b->rank() == 2 ? 1 : 2))
    return RunReference(ctx);
  const auto& ad = a->dims();
  const auto& bd = b->dims();
  if (a->rank() == 1) {
    // A vector times a 2-D B: one row through the same packed B as any other
    // A, so that a constant B, once packed, is never read in place again.
    const int64_t k = ad[0], n = bd[1];
    if (bd[0] != k)
      return ctx.InputError(1, "inner dimensions differ: " + DimsToString(ad) + " x " + DimsToString(bd));
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, {n}));
    if (out.num_elements() == 0) return Status::Ok();
    const MatrixView bv{b->data<float>(), n, 1};
    if (auto packed = PackedConstantB(ctx, 1, k, n, bv, false, true))
      Sgemm(1, n, k, SgemmA({a->data<float>(), k, 1}), SgemmB(*packed), 0.f, out.data<float>(), n, ctx.pool());
    else
      Sgemm(1, n, k, 1.f, {a->data<float>(), k, 1}, bv, 0.f, out.data<float>(), n, ctx.pool());
    return Status::Ok();
  }
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k)
    return ctx.InputError(1, "inner dimensions differ: " + DimsToString(ad) + " x " + DimsToString(bd));
  auto batch = BroadcastDims(BatchDims(ad), BatchDims(bd));
  if (!batch.ok()) return ctx.InputError(1, batch.status().message());
  std::vector<int64_t> out_dims = batch.value();
  out_dims.push_back(m);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  const float* ap = a->data<float>();
  const float* bp = b->data<float>();
  float* cp = out.data<float>();
  if (b->rank() == 2) {
    // Every batch of A shares B: one multiply of [batch*m, k] by [k, n].
    int64_t rows = ProductOf(out_dims, 0, out_dims.size() - 1);
    if (ProductOf(BatchDims(ad)) == ProductOf(batch.value())) {
      const MatrixView bv{bp, n, 1};
      if (auto packed = PackedConstantB(ctx, 1, k, n, bv, false, true))
        Sgemm(rows, n, k, SgemmA({ap, k, 1}), SgemmB(*packed), 0.f, cp, n, ctx.pool());
      else
        Sgemm(rows, n, k, 1.f, {ap, k, 1}, bv, 0.f, cp, n, ctx.pool());
      return Status::Ok();
    }
  }
  // General batched case: walk the broadcast batch index, collecting the
  // products (batch offsets of A, B and C).
  std::vector<std::vector<int64_t>> in_batches = {BatchDims(ad), BatchDims(bd)};
  struct Product {
    int64_t a, b, c;
  };
  std::vector<Product> products;
  ForEachBroadcastBlock(batch.value(), in_batches,
                        [&](int64_t out_off, const int64_t* in_off, const int64_t* steps, int64_t count) {
                          for (int64_t i = 0; i < count; ++i)
                            products.push_back({in_off[0] + i * steps[0], in_off[1] + i * steps[1], out_off + i});
                        });
  auto multiply = [&](const Product& p, ThreadPool* pool) {
    Sgemm(m, n, k, 1.f, {ap + p.a * m * k, k, 1}, {bp + p.b * k * n, n, 1}, 0.f, cp + p.c * m * n, n, pool);
  };
  // Many small products (attention heads): one per task, each on one thread.
  // Few or large ones: one after another, each shared by the threads. Either
  // way each product is computed the same way, so the bits are the same.
  const int threads = NumThreads(ctx);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (threads > 1 && static_cast<int64_t>(products.size()) >= 2 * threads && flops < 5e7) {
    ParallelTasks(ctx, static_cast<int64_t>(products.size()), [&](int64_t t) { multiply(products[t], nullptr); });
  } else {
    for (const Product& p : products) multiply(p, ctx.pool());
  }
  return Status::Ok();
}

Status GemmFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (a->dtype() == DataType::kBFloat16) return GemmBFloat16(ctx);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2)->tensor() : nullptr;
  if (a->dtype() != DataType::kFloat || b->dtype() != DataType::kFloat || a->rank() != 2 || b->rank() != 2 ||
      (c && (!ctx.input(2)->is_tensor() || c->dtype() != DataType::kFloat || c->rank() > 2)))
    return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const GemmPlan plan, PlanGemm(ctx, *a, *b, c));
  const bool add_c = c && plan.beta != 0.f;
  if (add_c) NEE_RETURN_IF_ERROR(CheckGemmC(ctx, plan, *c));
  const int64_t m = plan.m, k = plan.k, n = plan.n;
  const bool trans_a = plan.trans_a, trans_b = plan.trans_b;
  const float alpha = plan.alpha, beta = plan.beta;
  const float* cp = add_c ? c->data<float>() : nullptr;
  if (m == 1 && trans_b) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kFloat, {m, n}));
    float* y = out.data<float>();
    if (add_c)
      for (int64_t j = 0; j < n; ++j) y[j] = beta * cp[plan.c_cols == 1 ? 0 : j];
    GemvTransposedB(ctx, a->data<float>(), b->data<float>(), n, k, alpha, add_c ? 1.f : 0.f, y);
    return Status::Ok();
  }
  // SGEMM writes every element (beta 0), and beta * C is added to each
  // finished row block of alpha A B while it is in L1 (its epilogue), instead
  // of being copied into Y first and read back by every k-block.
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, {m, n}));
  float* y = out.data<float>();
  const SgemmEpilogueFn add_c_fn = [&](int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* tile, int64_t ldc) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* c_row = cp + (plan.c_rows == 1 ? 0 : i0 + r) * plan.c_cols;
      float* y_row = tile + r * ldc;
      if (plan.c_cols == 1) {
        const float v = beta * c_row[0];
        for (int64_t j = 0; j < cols; ++j) y_row[j] += v;
      } else if (beta == 1.f) {
        for (int64_t j = 0; j < cols; ++j) y_row[j] += c_row[j0 + j];
      } else {
        for (int64_t j = 0; j < cols; ++j) y_row[j] += beta * c_row[j0 + j];
      }
    }
  };
  const SgemmEpilogueFn* epilogue = add_c ? &add_c_fn : nullptr;
  MatrixView av = trans_a ? MatrixView{a->data<float>(), 1, m} : MatrixView{a->data<float>(), k, 1};
  MatrixView bv = trans_b ? MatrixView{b->data<float>(), 1, k} : MatrixView{b->data<float>(), n, 1};
  // With B transposed, a one-row A reads B in place (GemvTransposedB above):
  // B is kept then, only its file pages let go.
  if (auto packed = PackedConstantB(ctx, 1, k, n, bv, trans_b != 0, trans_b == 0))
    Sgemm(m, n, k, SgemmA(av, alpha), SgemmB(*packed), 0.f, y, n, ctx.pool(), epilogue);
  else
    Sgemm(m, n, k, SgemmA(av, alpha), SgemmB(bv), 0.f, y, n, ctx.pool(), epilogue);
  return Status::Ok();
}


Result<GemmPlan> PlanGemm(const KernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor* c) {
  const Node& node = ctx.node();
  GemmPlan plan;
  NEE_ASSIGN_OR_RETURN(const int64_t trans_a, node.GetInt("transA", 0));
  NEE_ASSIGN_OR_RETURN(const int64_t trans_b, node.GetInt("transB", 0));
  NEE_ASSIGN_OR_RETURN(plan.alpha, node.GetFloat("alpha", 1.f));
  NEE_ASSIGN_OR_RETURN(plan.beta, node.GetFloat("beta", 1.f));
  plan.trans_a = trans_a != 0;
  plan.trans_b = trans_b != 0;
  plan.m = plan.trans_a ? a.dim(1) : a.dim(0);
  plan.k = plan.trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = plan.trans_b ? b.dim(1) : b.dim(0);
  plan.n = plan.trans_b ? b.dim(0) : b.dim(1);
  if (plan.k != kb)
    return ctx.InputError(1, "inner dimensions differ: A " + DimsToString(a.dims()) +
                                 (plan.trans_a ? " (transposed)" : "") + ", B " + DimsToString(b.dims()) +
                                 (plan.trans_b ? " (transposed)" : ""));
  if (c && c->rank() >= 1) plan.c_cols = c->dim(c->rank() - 1);
  if (c && c->rank() == 2) plan.c_rows = c->dim(0);
  return plan;
}

Status CheckGemmC(const KernelContext& ctx, const GemmPlan& plan, const Tensor& c) {
  if ((plan.c_rows != 1 && plan.c_rows != plan.m) || (plan.c_cols != 1 && plan.c_cols != plan.n))
    return ctx.InputError(2, "shape " + DimsToString(c.dims()) + " does not broadcast to [" + std::to_string(plan.m) +
                                 "," + std::to_string(plan.n) + "]");
  return Status::Ok();
}

}  // namespace nee::cpu
