// MatMul and Gemm on float16 through the float16-weight GEMM (f16_gemm.h):
// a constant B (weights) is packed once per session and kept float16, so a
// float16 model's weights take half a float32 model's memory. Registered in
// front of the float32 kernels (MatMulFloatOrHalf / GemmFloatOrHalf), which
// take every other element type. Shapes these do not take go to the
// reference kernels.
#include <map>
#include <memory>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/f16_gemm.h"
#include "ep/cpu/gemm_plan.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/op_util.h"

namespace nee::cpu {

namespace {

bool IsHalf(const Tensor* t) { return t->dtype() == DataType::kFloat16; }

std::vector<int64_t> MatrixBatch(const std::vector<int64_t>& d) { return {d.begin(), d.end() - 2}; }

// B (k x n, element (r, j) at b[r * row_stride + j * col_stride]) packed:
// once per session through the node's PreparedCache when input `index` is a
// constant, per call otherwise. Runs read only the packed copy, so the
// constant is dropped (this kernel takes every float16 call of the node).
std::shared_ptr<const F16PackedB> PackHalfB(KernelContext& ctx, size_t index, const uint16_t* b, int64_t k,
                                            int64_t n, int64_t row_stride, int64_t col_stride) {
  auto pack = [&] { return std::make_shared<const F16PackedB>(k, n, b, row_stride, col_stride); };
  if (!ctx.prepared() || !ctx.input_is_constant(index)) return pack();
  auto packed = ctx.prepared()->GetOrBuild<F16PackedB>(
      {k, n, col_stride == 1 ? 0 : 1}, [&]() -> Result<std::shared_ptr<const F16PackedB>> {
        auto built = pack();
        ctx.DropConstantInput(index);
        return built;
      });
  return packed.ok() ? packed.value() : pack();
}

// One product of the batch: the offsets of its A, B and Y matrices, in elements.
struct HalfProduct {
  int64_t a, b, y;
};

// MatMul with a batched B (attention's products): each distinct B matrix
// packed once per call, the products spread over the threads when they are
// many and small (each then on one thread), else one after another on all.
Status BatchedHalfMatMul(KernelContext& ctx, const Tensor& a, const Tensor& b, const std::vector<int64_t>& batch,
                         int64_t m, int64_t k, int64_t n, Tensor& out) {
  std::vector<HalfProduct> products;
  std::vector<std::vector<int64_t>> in_batches = {MatrixBatch(a.dims()), MatrixBatch(b.dims())};
  ForEachBroadcastBlock(batch, in_batches, [&](int64_t out_off, const int64_t* in_off, const int64_t* steps,
                                               int64_t count) {
    for (int64_t i = 0; i < count; ++i)
      products.push_back({(in_off[0] + i * steps[0]) * m * k, (in_off[1] + i * steps[1]) * k * n, (out_off + i) * m * n});
  });
  std::map<int64_t, size_t> b_slot;  // B's offset -> its packed copy
  std::vector<int64_t> b_offsets;
  for (const HalfProduct& p : products)
    if (b_slot.emplace(p.b, b_offsets.size()).second) b_offsets.push_back(p.b);
  std::vector<std::unique_ptr<const F16PackedB>> packed(b_offsets.size());
  const uint16_t* bp = b.data<uint16_t>();
  ParallelTasks(ctx, static_cast<int64_t>(b_offsets.size()), [&](int64_t t) {
    packed[static_cast<size_t>(t)] = std::make_unique<const F16PackedB>(k, n, bp + b_offsets[t], n, 1);
  });
  auto multiply = [&](const HalfProduct& p, ThreadPool* pool) {
    F16GemmArgs g;
    g.m = m;
    g.a = a.data<uint16_t>() + p.a;
    g.a_row_stride = k;
    g.b = packed[b_slot[p.b]].get();
    g.y = out.data<uint16_t>() + p.y;
    g.ldy = n;
    F16Gemm(g, pool);
  };
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int threads = NumThreads(ctx);
  if (threads > 1 && static_cast<int64_t>(products.size()) >= 2 * threads && flops < 5e7)
    ParallelTasks(ctx, static_cast<int64_t>(products.size()), [&](int64_t t) { multiply(products[t], nullptr); });
  else
    for (const HalfProduct& p : products) multiply(p, ctx.pool());
  return Status::Ok();
}

Status MatMulFloat16(KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (!IsHalf(&b) || b.rank() < 2 || a.rank() < (b.rank() == 2 ? 1 : 2)) return RunReference(ctx);
  const auto& ad = a.dims();
  const auto& bd = b.dims();
  const int64_t k = ad.back(), n = bd.back(), m = a.rank() == 1 ? 1 : ad[ad.size() - 2];
  if (bd[bd.size() - 2] != k)
    return ctx.InputError(1, "inner dimensions differ: " + DimsToString(ad) + " x " + DimsToString(bd));
  std::vector<int64_t> batch;
  if (a.rank() > 1) {
    auto broadcast = BroadcastDims(MatrixBatch(ad), MatrixBatch(bd));
    if (!broadcast.ok()) return ctx.InputError(1, broadcast.status().message());
    batch = broadcast.value();
  }
  std::vector<int64_t> out_dims = batch;
  if (a.rank() > 1) out_dims.push_back(m);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat16, out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  const bool shared_b = b.rank() == 2 && (a.rank() == 1 || ProductOf(MatrixBatch(ad)) == ProductOf(batch));
  if (!shared_b) return BatchedHalfMatMul(ctx, a, b, batch, m, k, n, out);
  // A 2-D B shared by every batch of A: one product of [batch * m, k] by [k, n].
  auto packed = PackHalfB(ctx, 1, b.data<uint16_t>(), k, n, n, 1);
  F16GemmArgs g;
  g.m = out.num_elements() / n;
  g.a = a.data<uint16_t>();
  g.a_row_stride = k;
  g.b = packed.get();
  g.y = out.data<uint16_t>();
  g.ldy = n;
  F16Gemm(g, ctx.pool());
  return Status::Ok();
}

Status GemmFloat16(KernelContext& ctx, const Tensor& a, const Tensor& b) {
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2)->tensor() : nullptr;
  if (!IsHalf(&b) || a.rank() != 2 || b.rank() != 2 ||
      (c && (!ctx.input(2)->is_tensor() || !IsHalf(c) || c->rank() > 2)))
    return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const GemmPlan plan, PlanGemm(ctx, a, b, c));
  if (c) NEE_RETURN_IF_ERROR(CheckGemmC(ctx, plan, *c));
  const int64_t m = plan.m, k = plan.k, n = plan.n;
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat16, {m, n}));
  if (out.num_elements() == 0) return Status::Ok();
  auto packed = PackHalfB(ctx, 1, b.data<uint16_t>(), k, n, plan.trans_b ? 1 : n, plan.trans_b ? k : 1);
  F16GemmArgs g;
  g.m = m;
  g.a = a.data<uint16_t>();
  g.a_row_stride = plan.trans_a ? 1 : k;  // a transposed A is read by its columns while it is packed
  g.a_col_stride = plan.trans_a ? m : 1;
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
  F16Gemm(g, ctx.pool());
  return Status::Ok();
}

}  // namespace

Status MatMulFloatOrHalf(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  if (!IsHalf(a)) return MatMulFloat(ctx);
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  return MatMulFloat16(ctx, *a, *b);
}

Status GemmFloatOrHalf(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  if (!IsHalf(a)) return GemmFloat(ctx);
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  return GemmFloat16(ctx, *a, *b);
}

}  // namespace nee::cpu
