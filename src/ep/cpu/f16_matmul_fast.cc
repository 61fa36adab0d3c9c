// MatMul and Gemm on float16 through the float16-weight GEMM (f16_gemm.h):
// a constant B (weights) is packed once per session and kept float16, so a
// float16 model's weights take half a float32 model's memory. Registered in
// front of the float32 kernels (MatMulFloatOrHalf / GemmFloatOrHalf), which
// take every other element type. Shapes these do not take go to the
// reference kernels.
#include <map>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/f16_gemm.h"
#include "ep/cpu/narrow_matmul.h"

namespace nee::cpu {

namespace {

bool IsHalf(const Tensor* t) { return t->dtype() == DataType::kFloat16; }

F16GemmArgs ProductArgs(int64_t m, const uint16_t* a, int64_t k, const F16PackedB* b, uint16_t* y, int64_t n) {
  F16GemmArgs g;
  g.m = m;
  g.a = a;
  g.a_row_stride = k;
  g.b = b;
  g.y = y;
  g.ldy = n;
  return g;
}

Status MatMulFloat16(KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (!IsHalf(&b) || b.rank() < 2 || a.rank() < (b.rank() == 2 ? 1 : 2)) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const narrow::MatMulShape s, narrow::PlanMatMul(ctx, a, b));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat16, s.out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  const uint16_t* ap = a.data<uint16_t>();
  uint16_t* yp = out.data<uint16_t>();
  if (s.shared_b) {
    auto packed = narrow::PackB<F16PackedB>(ctx, 1, b.data<uint16_t>(), s.k, s.n, s.n, 1);
    F16Gemm(ProductArgs(out.num_elements() / s.n, ap, s.k, packed.get(), yp, s.n), ctx.pool());
    return Status::Ok();
  }
  // A batched B (attention's products): each distinct B packed per call.
  const std::vector<narrow::Product> products = narrow::BatchProducts(a, b, s);
  std::map<int64_t, size_t> slot;
  const auto packed = narrow::PackDistinctB<F16PackedB>(ctx, products, b.data<uint16_t>(), s, slot);
  narrow::RunProducts(ctx, products, s, [&](const narrow::Product& p, ThreadPool* pool) {
    F16Gemm(ProductArgs(s.m, ap + p.a, s.k, packed[slot.at(p.b)].get(), yp + p.y, s.n), pool);
  });
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
  auto packed = narrow::PackB<F16PackedB>(ctx, 1, b.data<uint16_t>(), k, n, plan.trans_b ? 1 : n, plan.trans_b ? k : 1);
  F16GemmArgs g = ProductArgs(m, a.data<uint16_t>(), k, packed.get(), out.data<uint16_t>(), n);
  if (plan.trans_a) {  // a transposed A is read by its columns while it is widened
    g.a_row_stride = 1;
    g.a_col_stride = m;
  }
  g.alpha = plan.alpha;
  narrow::SetGemmC(g, plan, c);
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
