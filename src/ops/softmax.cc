// Operator family: Softmax, LogSoftmax, Hardmax.
//
// Semantics changed at opset 13. Before it, the input is coerced to 2-D at
// `axis` (default 1): [prod(dims[:axis]), prod(dims[axis:])] and the op runs
// over each row. From 13 the op runs along the single dim `axis` (default -1).
// Both are the same loop over an (outer, n, inner) split of the dims.
#include <algorithm>
#include <cmath>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using nn::ComputeInput;
using nn::ComputeKind;
using nn::ComputeKindOf;
using nn::ComputeOutput;

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};

Result<Split> SplitForOpset(const Node& node, int64_t opset, const std::vector<int64_t>& dims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", opset >= 13 ? -1 : 1));
  Split s;
  if (rank == 0) {
    // A scalar: one group of one element (axis must be 0 or -1).
    if (axis_attr != 0 && axis_attr != -1) return InvalidModel(node.Describe() + ": axis out of range for a scalar");
    return s;
  }
  if (opset < 13) {
    // Coerced to 2-D; axis == rank is allowed there (the second dim is 1).
    int64_t axis = axis_attr < 0 ? axis_attr + rank : axis_attr;
    if (axis < 0 || axis > rank)
      return InvalidModel(node.Describe() + ": axis " + std::to_string(axis_attr) + " is out of range for rank " +
                          std::to_string(rank));
    s.outer = ProductOf(dims, 0, static_cast<size_t>(axis));
    s.n = ProductOf(dims, static_cast<size_t>(axis));
    return s;
  }
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, rank, node));
  s.outer = ProductOf(dims, 0, static_cast<size_t>(axis));
  s.n = dims[static_cast<size_t>(axis)];
  s.inner = ProductOf(dims, static_cast<size_t>(axis) + 1);
  return s;
}

Status InferSoftmax(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  if (x->shape) {
    // Validate the axis against the rank (dims themselves do not matter).
    std::vector<int64_t> ones(x->shape->size(), 1);
    NEE_RETURN_IF_ERROR(SplitForOpset(ctx.node, ctx.opset, ones).status());
  }
  ctx.output_types[0] = *x;
  return Status::Ok();
}

template <typename A>
Status SoftmaxTyped(KernelContext& ctx, const Tensor& x, const Split& s, SoftmaxKind kind) {
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x.dtype(), x.dims()));
  ComputeInput<A> cx(x);
  ComputeOutput<A> cy(y);
  ctx.ParallelFor(s.outer * s.inner, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, s.n)), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t base = (u / s.inner) * s.n * s.inner + u % s.inner;
      const A* xr = cx.data() + base;
      A* yr = cy.data() + base;
      // First maximum: Hardmax's choice and the shift that keeps exp finite.
      int64_t arg = 0;
      for (int64_t i = 1; i < s.n; ++i)
        if (xr[i * s.inner] > xr[arg * s.inner]) arg = i;
      if (kind == SoftmaxKind::kHardmax) {
        for (int64_t i = 0; i < s.n; ++i) yr[i * s.inner] = i == arg ? A{1} : A{0};
        continue;
      }
      const A max = s.n > 0 ? xr[arg * s.inner] : A{};
      double sum = 0;
      for (int64_t i = 0; i < s.n; ++i) sum += std::exp(static_cast<double>(xr[i * s.inner] - max));
      if (kind == SoftmaxKind::kSoftmax) {
        for (int64_t i = 0; i < s.n; ++i)
          yr[i * s.inner] = static_cast<A>(std::exp(static_cast<double>(xr[i * s.inner] - max)) / sum);
      } else {
        const double log_sum = std::log(sum);
        for (int64_t i = 0; i < s.n; ++i)
          yr[i * s.inner] = static_cast<A>(static_cast<double>(xr[i * s.inner] - max) - log_sum);
      }
    }
  });
  cy.Commit();
  return Status::Ok();
}

Status SoftmaxLikeKernel(KernelContext& ctx, SoftmaxKind kind) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (!nn::IsRealFloat(x->dtype()))
    return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError(ctx.node().op_type.c_str(), x->dtype()));
  NEE_ASSIGN_OR_RETURN(Split s, SplitForOpset(ctx.node(), ctx.opset(), x->dims()));
  if (ComputeKindOf(x->dtype()) == ComputeKind::kFloat) return SoftmaxTyped<float>(ctx, *x, s, kind);
  return SoftmaxTyped<double>(ctx, *x, s, kind);
}

Status SoftmaxKernel(KernelContext& ctx) { return SoftmaxLikeKernel(ctx, SoftmaxKind::kSoftmax); }
Status LogSoftmaxKernel(KernelContext& ctx) { return SoftmaxLikeKernel(ctx, SoftmaxKind::kLogSoftmax); }
Status HardmaxKernel(KernelContext& ctx) { return SoftmaxLikeKernel(ctx, SoftmaxKind::kHardmax); }

}  // namespace

void RegisterSoftmaxOps(OpRegistry& registry) {
  registry.RegisterVersions("", "Softmax", {1, 11, 13}, InferSoftmax, SoftmaxKernel);
  registry.RegisterVersions("", "LogSoftmax", {1, 11, 13}, InferSoftmax, LogSoftmaxKernel);
  registry.RegisterVersions("", "Hardmax", {1, 11, 13}, InferSoftmax, HardmaxKernel);
}

}  // namespace nee
