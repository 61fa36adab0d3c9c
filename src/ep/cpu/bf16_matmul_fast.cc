// MatMul and Gemm on bfloat16 through the AVX512-BF16 GEMM (bf16_gemm.h),
// reached from MatMulFloat / GemmFloat when their inputs are bfloat16. On a
// CPU without AVX512-BF16, and for shapes these do not take, the reference
// kernels run. A constant B (weights) is packed once per session.
#include <map>
#include <vector>

#include "ep/cpu/bf16_gemm.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/narrow_matmul.h"

namespace nee::cpu {

namespace {

bool IsBf16(const Tensor* t) { return t->dtype() == DataType::kBFloat16; }

Bf16GemmArgs ProductArgs(int64_t m, const uint16_t* a, int64_t k, const Bf16PackedB* b, uint16_t* y, int64_t n) {
  Bf16GemmArgs g;
  g.m = m;
  g.a = a;
  g.lda = k;
  g.b = b;
  g.y = y;
  g.ldy = n;
  return g;
}

}  // namespace

Status MatMulBFloat16(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (!CpuHasAvx512Bf16() || !IsBf16(a) || !IsBf16(b) || b->rank() < 2 || a->rank() < (b->rank() == 2 ? 1 : 2))
    return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const narrow::MatMulShape s, narrow::PlanMatMul(ctx, *a, *b));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kBFloat16, s.out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  const uint16_t* ap = a->data<uint16_t>();
  uint16_t* yp = out.data<uint16_t>();
  if (s.shared_b) {
    auto packed = narrow::PackB<Bf16PackedB>(ctx, 1, b->data<uint16_t>(), s.k, s.n, s.n, 1);
    Bf16Gemm(ProductArgs(out.num_elements() / s.n, ap, s.k, packed.get(), yp, s.n), ctx.pool());
    return Status::Ok();
  }
  // The batched case: one product per broadcast batch index; each distinct B
  // matrix packed once (a B broadcast over A's batch is packed once).
  const std::vector<narrow::Product> products = narrow::BatchProducts(*a, *b, s);
  std::map<int64_t, size_t> slot;
  const auto packed = narrow::PackDistinctB<Bf16PackedB>(ctx, products, b->data<uint16_t>(), s, slot);
  narrow::RunProducts(ctx, products, s, [&](const narrow::Product& p, ThreadPool* pool) {
    Bf16Gemm(ProductArgs(s.m, ap + p.a, s.k, packed[slot.at(p.b)].get(), yp + p.y, s.n), pool);
  });
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
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kBFloat16, {m, n}));
  if (out.num_elements() == 0) return Status::Ok();
  // The kernel reads A's rows in place; a transposed A is copied once.
  std::vector<uint16_t> a_rows;
  const uint16_t* ap = a->data<uint16_t>();
  if (plan.trans_a) {
    a_rows.resize(static_cast<size_t>(m * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t i = 0; i < m; ++i) a_rows[static_cast<size_t>(i * k + p)] = ap[p * m + i];
    ap = a_rows.data();
  }
  auto packed =
      narrow::PackB<Bf16PackedB>(ctx, 1, b->data<uint16_t>(), k, n, plan.trans_b ? 1 : n, plan.trans_b ? k : 1);
  Bf16GemmArgs g = ProductArgs(m, ap, k, packed.get(), out.data<uint16_t>(), n);
  g.alpha = plan.alpha;
  narrow::SetGemmC(g, plan, c);
  Bf16Gemm(g, ctx.pool());
  return Status::Ok();
}

}  // namespace nee::cpu
