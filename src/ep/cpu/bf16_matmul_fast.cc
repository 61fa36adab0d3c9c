// MatMul and Gemm on bfloat16 through the AVX512-BF16 GEMM (bf16_gemm.h),
// reached from MatMulFloat / GemmFloat when their inputs are bfloat16. On a
// CPU without AVX512-BF16, and for shapes these do not take, the reference
// kernels run. A constant B (weights) is packed once per session.
#include <map>
#include <memory>
#include <vector>

#include "ep/cpu/bf16_gemm.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/gemm_plan.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/op_util.h"

namespace nee::cpu {

namespace {

bool IsBf16(const Tensor* t) { return t->dtype() == DataType::kBFloat16; }

// B (k x n, element (r, j) at b[r * row_stride + j * col_stride]) packed: once
// per session through the node's PreparedCache when input `index` is a
// constant, per call otherwise. The packed copy is all later runs read, so
// the constant is dropped (the kernel takes this path on every run of this
// CPU, whatever A's shape).
std::shared_ptr<const Bf16PackedB> PackB(KernelContext& ctx, size_t index, const uint16_t* b, int64_t k, int64_t n,
                                         int64_t row_stride, int64_t col_stride) {
  auto pack = [&] { return std::make_shared<const Bf16PackedB>(k, n, b, row_stride, col_stride); };
  if (!ctx.prepared() || !ctx.input_is_constant(index)) return pack();
  auto packed = ctx.prepared()->GetOrBuild<Bf16PackedB>(
      {k, n, col_stride == 1 ? 0 : 1}, [&]() -> Result<std::shared_ptr<const Bf16PackedB>> {
        auto built = pack();
        ctx.DropConstantInput(index);
        return built;
      });
  return packed.ok() ? packed.value() : pack();
}

std::vector<int64_t> BatchDims(const std::vector<int64_t>& d) { return {d.begin(), d.end() - 2}; }

// The batched case: one product per broadcast batch index; each distinct B
// matrix packed once (a B broadcast over A's batch is packed once).
Status BatchedMatMul(KernelContext& ctx, const Tensor& a, const Tensor& b, const std::vector<int64_t>& batch,
                     int64_t m, int64_t k, int64_t n, Tensor& out) {
  struct Product {
    int64_t a, b, c;
  };
  std::vector<Product> products;
  std::vector<std::vector<int64_t>> in_batches = {BatchDims(a.dims()), BatchDims(b.dims())};
  ForEachBroadcastBlock(batch, in_batches,
                        [&](int64_t out_off, const int64_t* in_off, const int64_t* steps, int64_t count) {
                          for (int64_t i = 0; i < count; ++i)
                            products.push_back({in_off[0] + i * steps[0], in_off[1] + i * steps[1], out_off + i});
                        });
  std::map<int64_t, size_t> slot_of_b;  // B's batch offset -> its packed copy
  std::vector<int64_t> distinct_b;
  for (const Product& p : products)
    if (slot_of_b.emplace(p.b, distinct_b.size()).second) distinct_b.push_back(p.b);
  std::vector<std::shared_ptr<const Bf16PackedB>> packed(distinct_b.size());
  const uint16_t* bp = b.data<uint16_t>();
  ParallelTasks(ctx, static_cast<int64_t>(distinct_b.size()), [&](int64_t t) {
    packed[t] = std::make_shared<const Bf16PackedB>(k, n, bp + distinct_b[t] * k * n, n, 1);
  });
  auto multiply = [&](const Product& p, ThreadPool* pool) {
    Bf16GemmArgs g;
    g.m = m;
    g.a = a.data<uint16_t>() + p.a * m * k;
    g.lda = k;
    g.b = packed[slot_of_b[p.b]].get();
    g.y = out.data<uint16_t>() + p.c * m * n;
    g.ldy = n;
    Bf16Gemm(g, pool);
  };
  // As MatMulFloat: many small products (attention heads) one per task, few
  // or large ones each over all threads; each product is computed alike.
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int threads = NumThreads(ctx);
  if (threads > 1 && static_cast<int64_t>(products.size()) >= 2 * threads && flops < 5e7)
    ParallelTasks(ctx, static_cast<int64_t>(products.size()), [&](int64_t t) { multiply(products[t], nullptr); });
  else
    for (const Product& p : products) multiply(p, ctx.pool());
  return Status::Ok();
}

}  // namespace

Status MatMulBFloat16(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (!CpuHasAvx512Bf16() || !IsBf16(a) || !IsBf16(b) || b->rank() < 2 || a->rank() < (b->rank() == 2 ? 1 : 2))
    return RunReference(ctx);
  const auto& ad = a->dims();
  const auto& bd = b->dims();
  const int64_t k = ad.back(), n = bd.back(), m = a->rank() == 1 ? 1 : ad[ad.size() - 2];
  if (bd[bd.size() - 2] != k)
    return ctx.InputError(1, "inner dimensions differ: " + DimsToString(ad) + " x " + DimsToString(bd));
  std::vector<int64_t> batch;
  if (a->rank() > 1) {
    auto broadcast = BroadcastDims(BatchDims(ad), BatchDims(bd));
    if (!broadcast.ok()) return ctx.InputError(1, broadcast.status().message());
    batch = broadcast.value();
  }
  std::vector<int64_t> out_dims = batch;
  if (a->rank() > 1) out_dims.push_back(m);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kBFloat16, out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  const bool shared_b = b->rank() == 2 && (a->rank() == 1 || ProductOf(BatchDims(ad)) == ProductOf(batch));
  if (!shared_b) return BatchedMatMul(ctx, *a, *b, batch, m, k, n, out);
  // A 2-D B shared by every batch of A: one product of [batch * m, k] by [k, n].
  auto packed = PackB(ctx, 1, b->data<uint16_t>(), k, n, n, 1);
  Bf16GemmArgs g;
  g.m = out.num_elements() / n;
  g.a = a->data<uint16_t>();
  g.lda = k;
  g.b = packed.get();
  g.y = out.data<uint16_t>();
  g.ldy = n;
  Bf16Gemm(g, ctx.pool());
  return Status::Ok();
}

Status GemmBFloat16(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2)->tensor() : nullptr;
  if (!CpuHasAvx512Bf16() || !IsBf16(a) || !IsBf16(b) || a->rank() != 2 || b->rank() != 2 ||
      (c && (!ctx.input(2)->is_tensor() || !IsBf16(c) || c->rank() > 2)))
    return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const GemmPlan plan, PlanGemm(ctx, *a, *b, c));
  if (c) NEE_RETURN_IF_ERROR(CheckGemmC(ctx, plan, *c));
  const int64_t m = plan.m, k = plan.k, n = plan.n;
  const bool trans_a = plan.trans_a, trans_b = plan.trans_b;
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kBFloat16, {m, n}));
  if (out.num_elements() == 0) return Status::Ok();
  // The kernel reads A's rows in place; a transposed A is copied once.
  std::vector<uint16_t> a_rows;
  const uint16_t* ap = a->data<uint16_t>();
  if (trans_a) {
    a_rows.resize(static_cast<size_t>(m * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t i = 0; i < m; ++i) a_rows[static_cast<size_t>(i * k + p)] = ap[p * m + i];
    ap = a_rows.data();
  }
  auto packed = PackB(ctx, 1, b->data<uint16_t>(), k, n, trans_b ? 1 : n, trans_b ? k : 1);
  Bf16GemmArgs g;
  g.m = m;
  g.a = ap;
  g.lda = k;
  g.b = packed.get();
  g.alpha = plan.alpha;
  if (c) {
    // The reference adds beta * C whenever C is given (beta 0 included).
    g.c = c->data<uint16_t>();
    g.c_row_stride = plan.c_rows == 1 ? 0 : plan.c_cols;
    g.c_col_stride = plan.c_cols == 1 ? 0 : 1;
    g.beta = plan.beta;
  }
  g.y = out.data<uint16_t>();
  g.ldy = n;
  Bf16Gemm(g, ctx.pool());
  return Status::Ok();
}

}  // namespace nee::cpu
