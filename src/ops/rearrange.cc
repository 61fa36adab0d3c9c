// Operator family: ops that move elements to other positions of the same
// data. Transpose, Trilu (keeps or zeroes a triangle), DepthToSpace,
// SpaceToDepth, ReverseSequence. Split from shape_ops.cc to keep each file
// readable whole.
//
// These ops only move bytes, so the kernels work on element storage (see
// tensor_util.h) and serve every element type, strings and packed sub-byte
// types included.
#include <algorithm>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/shape_ops_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family
using namespace shape_ops_util;  // NOLINT: shared with the other data-movement families

// Copies src viewed with `view_dims` and transposed by `perm` into dst
// (whose element count matches).
Status TransposeView(const Node& node, const Tensor& src, const std::vector<int64_t>& view_dims,
                     const std::vector<int64_t>& perm, Tensor& dst) {
  std::vector<int64_t> strides = StridesOf(view_dims);
  std::vector<int64_t> out_dims(perm.size()), out_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out_dims[i] = view_dims[static_cast<size_t>(perm[i])];
    out_strides[i] = strides[static_cast<size_t>(perm[i])];
  }
  NEE_ASSIGN_OR_RETURN(Tensor view, dst.Reshaped(out_dims));
  return StridedCopy(node, src, 0, out_strides, view);
}

// ---- Transpose ------------------------------------------------------------------

Result<std::vector<int64_t>> TransposePerm(const Node& node, int64_t rank) {
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) reversed[i] = rank - 1 - i;
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, node.GetInts("perm", reversed));
  if (static_cast<int64_t>(perm.size()) != rank)
    return InvalidModel(node.Describe() + ": perm " + DimsToString(perm) + " does not match rank " +
                        std::to_string(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    if (p < -rank || p >= rank || seen[static_cast<size_t>(p < 0 ? p + rank : p)])
      return InvalidModel(node.Describe() + ": perm " + DimsToString(perm) + " is not a permutation of the axes");
    if (p < 0) p += rank;
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

Status TransposeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ctx.node(), x->rank()));
  std::vector<int64_t> out_dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out_dims[i] = x->dim(perm[i]);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  return TransposeView(ctx.node(), *x, x->dims(), perm, out);
}

Status TransposeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out;
  if (x->shape) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ictx.node, static_cast<int64_t>(x->shape->size())));
    Shape s;
    for (int64_t p : perm) s.push_back((*x->shape)[static_cast<size_t>(p)]);
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, TransposeKernel);
  return Status::Ok();
}

// ---- Trilu ----------------------------------------------------------------------------------

Status TriluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->rank() < 2) return ctx.InputError(0, "must have rank >= 2, got " + x->Describe());
  int64_t k = 0;
  if (ctx.has_input(1)) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> kv, IntInput(ctx, 1));
    if (kv.size() != 1) return ctx.InputError(1, "must be a scalar");
    k = kv[0];
  }
  NEE_ASSIGN_OR_RETURN(int64_t upper, ctx.node().GetInt("upper", 1));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  const int64_t rows = x->dim(x->rank() - 2), cols = x->dim(x->rank() - 1);
  const int64_t matrices = rows * cols == 0 ? 0 : x->num_elements() / (rows * cols);
  return VisitStorage(ctx.node(), x->dtype(), [&]<typename A>() -> Status {
    A src(*x), dst(out);
    using V = typename A::Value;
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          int64_t idx = (m * rows + i) * cols + j;
          bool keep = upper ? (j - i >= k) : (j - i <= k);
          dst.Set(idx, keep ? V(src.Get(idx)) : V{});
        }
    return Status::Ok();
  });
}

Status TriluInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  if (x->shape && x->shape->size() < 2) return ictx.InputError(0, "must have rank >= 2");
  ictx.output_types[0] = *x;
  return Status::Ok();
}

// ---- DepthToSpace / SpaceToDepth ------------------------------------------------------------

Result<int64_t> BlockSize(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t b, node.GetInt("blocksize"));
  if (b <= 0 || b > (1 << 16))
    return InvalidModel(node.Describe() + ": blocksize must be in [1, 65536], got " + std::to_string(b));
  return b;
}

Status DepthToSpaceKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->rank() != 4) return ctx.InputError(0, "must have rank 4, got " + x->Describe());
  NEE_ASSIGN_OR_RETURN(int64_t bs, BlockSize(ctx.node()));
  NEE_ASSIGN_OR_RETURN(std::string mode, ctx.node().GetString("mode", "DCR"));
  int64_t b = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  if (c % (bs * bs) != 0)
    return ctx.InputError(0, "channels " + std::to_string(c) + " are not divisible by blocksize^2");
  int64_t c2 = c / (bs * bs);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), {b, c2, h * bs, w * bs}));
  if (mode == "DCR") return TransposeView(ctx.node(), *x, {b, bs, bs, c2, h, w}, {0, 3, 4, 1, 5, 2}, out);
  if (mode == "CRD") return TransposeView(ctx.node(), *x, {b, c2, bs, bs, h, w}, {0, 1, 4, 2, 5, 3}, out);
  return ctx.Error("unknown mode '" + mode + "'");
}

Status SpaceToDepthKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->rank() != 4) return ctx.InputError(0, "must have rank 4, got " + x->Describe());
  NEE_ASSIGN_OR_RETURN(int64_t bs, BlockSize(ctx.node()));
  int64_t b = x->dim(0), c = x->dim(1), h = x->dim(2), w = x->dim(3);
  if (h % bs != 0 || w % bs != 0)
    return ctx.InputError(0, "spatial dims of " + x->Describe() + " are not divisible by blocksize");
  // `mode` arrived in opset 28; CRD is the inverse of DepthToSpace's CRD.
  NEE_ASSIGN_OR_RETURN(std::string mode, ctx.node().GetString("mode", "DCR"));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), {b, c * bs * bs, h / bs, w / bs}));
  if (mode == "DCR") return TransposeView(ctx.node(), *x, {b, c, h / bs, bs, w / bs, bs}, {0, 3, 5, 1, 2, 4}, out);
  if (mode == "CRD") return TransposeView(ctx.node(), *x, {b, c, h / bs, bs, w / bs, bs}, {0, 1, 3, 5, 2, 4}, out);
  return ctx.Error("unknown mode '" + mode + "'");
}

Status DepthSpaceInfer(InferenceContext& ictx, bool to_space) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t bs, BlockSize(ictx.node));
  std::optional<Shape> out;
  if (x->shape) {
    if (x->shape->size() != 4) return ictx.InputError(0, "must have rank 4");
    Shape s = *x->shape;
    auto scale = [](Dim d, int64_t mul, int64_t div) {
      Dim product = MulDim(d, mul);
      return product.known() ? Dim::Known(product.value / div) : Dim::Unknown();
    };
    if (to_space) {
      s[1] = scale(s[1], 1, bs * bs);
      s[2] = scale(s[2], bs, 1);
      s[3] = scale(s[3], bs, 1);
    } else {
      s[1] = scale(s[1], bs * bs, 1);
      s[2] = scale(s[2], 1, bs);
      s[3] = scale(s[3], 1, bs);
    }
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}
Status DepthToSpaceInfer(InferenceContext& ictx) { return DepthSpaceInfer(ictx, true); }
Status SpaceToDepthInfer(InferenceContext& ictx) { return DepthSpaceInfer(ictx, false); }

// ---- ReverseSequence --------------------------------------------------------------------------

Status ReverseSequenceKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> lens, IntInput(ctx, 1));
  NEE_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.node().GetInt("batch_axis", 1));
  NEE_ASSIGN_OR_RETURN(int64_t time_axis, ctx.node().GetInt("time_axis", 0));
  if (x->rank() < 2) return ctx.InputError(0, "must have rank >= 2");
  if ((batch_axis != 0 && batch_axis != 1) || (time_axis != 0 && time_axis != 1) || batch_axis == time_axis)
    return ctx.Error("batch_axis and time_axis must be 0 and 1 in some order");
  const int64_t batch = x->dim(batch_axis), time = x->dim(time_axis);
  if (static_cast<int64_t>(lens.size()) != batch)
    return ctx.InputError(1, "has " + std::to_string(lens.size()) + " lengths for batch size " + std::to_string(batch));
  for (int64_t l : lens)
    if (l < 0 || l > time)
      return ctx.InputError(1, "has length " + std::to_string(l) + " outside [0, " + std::to_string(time) + "]");
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  std::vector<int64_t> strides = StridesOf(x->dims());
  const int64_t inner = ProductOf(x->dims(), 2);
  return VisitStorage(ctx.node(), x->dtype(), [&]<typename A>() -> Status {
    A src(*x), dst(out);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < time; ++t) {
        int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
        int64_t dst_off = b * strides[batch_axis] + t * strides[time_axis];
        int64_t src_off = b * strides[batch_axis] + from * strides[time_axis];
        dst.CopyRun(dst_off, src, src_off, inner);
      }
    return Status::Ok();
  });
}

}  // namespace

void RegisterRearrangeOps(OpRegistry& r) {
  r.RegisterVersions("", "Transpose", {1, 13, 21, 23, 24, 25}, TransposeInfer, TransposeKernel);
  r.RegisterVersions("", "Trilu", {14}, TriluInfer, TriluKernel);
  r.RegisterVersions("", "DepthToSpace", {1, 11, 13, 28}, DepthToSpaceInfer, DepthToSpaceKernel);
  r.RegisterVersions("", "SpaceToDepth", {1, 13, 28}, SpaceToDepthInfer, SpaceToDepthKernel);
  r.RegisterVersions("", "ReverseSequence", {10, 28}, InferSameAsInput0, ReverseSequenceKernel);
}

}  // namespace nee
