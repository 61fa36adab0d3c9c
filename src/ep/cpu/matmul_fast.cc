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

void DotRowsPortable(const float* a, const float* b, int64_t ldb, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = DotPortable(a, b + r * ldb, k);
}

// Rows of B a dot-product pass reads side by side. A matrix-vector product is
// bound by reading B: from memory (a classifier's weights after the rest of the
// network has gone through the caches) one core fetches more bytes a second the
// more independent streams it reads (measured here, 1000 x 1280 after 64 MB of
// other traffic: 265 us two rows at a time, 216 eight at a time, 202 twelve).
constexpr int64_t kDotRows = 8;

#ifdef NEE_MATMUL_X86
// dot(a, B[r]) for `kRows` rows of B at once: each row has one accumulator of
// eight lanes over k, summed in a fixed order, then the elements past the last
// whole vector by fma. A row's arithmetic is the same whichever kRows computes
// it, so its value does not depend on how the rows were split among tasks.
template <int kRows>
__attribute__((target("avx2,fma"))) void DotRowsAvx2(const float* a, const float* b, int64_t ldb, int64_t k,
                                                     float* out) {
  __m256 acc[kRows];
  for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 av = _mm256_loadu_ps(a + i);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + r * ldb + i), acc[r]);
  }
  for (int r = 0; r < kRows; ++r) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[r]);
    float sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    for (int64_t t = i; t < k; ++t) sum = std::fma(a[t], b[r * ldb + t], sum);
    out[r] = sum;
  }
}

void DotRowsAvx2Any(const float* a, const float* b, int64_t ldb, int64_t rows, int64_t k, float* out) {
  switch (rows) {
    case 1: return DotRowsAvx2<1>(a, b, ldb, k, out);
    case 2: return DotRowsAvx2<2>(a, b, ldb, k, out);
    case 3: return DotRowsAvx2<3>(a, b, ldb, k, out);
    case 4: return DotRowsAvx2<4>(a, b, ldb, k, out);
    case 5: return DotRowsAvx2<5>(a, b, ldb, k, out);
    case 6: return DotRowsAvx2<6>(a, b, ldb, k, out);
    case 7: return DotRowsAvx2<7>(a, b, ldb, k, out);
    default: return DotRowsAvx2<kDotRows>(a, b, ldb, k, out);
  }
}
#endif

// out[r] = dot(a, B[r]) for up to kDotRows rows of B, ldb apart.
using DotRowsFn = void (*)(const float* a, const float* b, int64_t ldb, int64_t rows, int64_t k, float* out);
DotRowsFn SelectDotRows() {
#ifdef NEE_MATMUL_X86
  if (CpuHasAvx2Fma() && !SgemmPortableForced()) return DotRowsAvx2Any;
#endif
  return DotRowsPortable;
}

// One row of A times a transposed B (n rows of k, as torch's Linear stores its
// weight): y[j] = alpha * dot(a, B[j]) + beta_y * y[j]. A matrix-vector product
// is bound by reading B once; dot products read it in place, in order, where
// SGEMM would pack it into panels and use one row of a twelve-row tile.
void GemvTransposedB(const KernelContext& ctx, const float* a, const float* b, int64_t n, int64_t k, float alpha,
                     float beta_y, float* y) {
  const DotRowsFn dot_rows = SelectDotRows();
  ctx.ParallelFor(n, std::max<int64_t>(16, 16384 / std::max<int64_t>(k, 1)), [&](int64_t begin, int64_t end) {
    float sums[kDotRows];
    for (int64_t j = begin; j < end; j += kDotRows) {
      const int64_t rows = std::min(kDotRows, end - j);
      dot_rows(a, b + j * k, k, rows, k, sums);
      for (int64_t r = 0; r < rows; ++r) {
        const float v = alpha * sums[r];
        y[j + r] = beta_y == 0.f ? v : v + y[j + r];
      }
    }
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
