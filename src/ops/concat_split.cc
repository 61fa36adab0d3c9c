// Operator family: Concat and Split, which join tensors along an axis and
// cut one apart. Split from shape_ops.cc to keep each file readable whole.
//
// These ops only move bytes, so the kernels work on element storage (see
// tensor_util.h) and serve every element type, strings and packed sub-byte
// types included.
#include <algorithm>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family

// ---- Concat -----------------------------------------------------------------------

// Required from opset 4; Concat-1 defaulted it to 1.
Result<int64_t> ConcatAxis(const Node& node, int64_t opset) {
  if (opset < 4) return node.GetInt("axis", 1);
  return node.GetInt("axis");
}

Status ConcatKernel(KernelContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.Error("needs at least one input");
  NEE_ASSIGN_OR_RETURN(const Tensor* first, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ConcatAxis(ctx.node(), ctx.opset()));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(axis_attr, first->rank(), ctx.node()));
  std::vector<const Tensor*> inputs;
  std::vector<int64_t> out_dims = first->dims();
  out_dims[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
    if (t->dtype() != first->dtype())
      return ctx.InputError(i, std::string("has type ") + DataTypeName(t->dtype()) + ", expected " +
                                   DataTypeName(first->dtype()));
    if (t->rank() != first->rank())
      return ctx.InputError(i, "has rank " + std::to_string(t->rank()) + ", expected " + std::to_string(first->rank()));
    for (int64_t d = 0; d < t->rank(); ++d)
      if (d != axis && t->dim(d) != first->dim(d))
        return ctx.InputError(i, "has shape " + DimsToString(t->dims()) + ", incompatible with " +
                                     DimsToString(first->dims()) + " outside axis " + std::to_string(axis));
    out_dims[axis] += t->dim(axis);
    inputs.push_back(t);
  }
  // Not zero-filled: every element is written, and inputs the memory planner
  // placed inside the output (plan/memory_plan.cc) must keep their bytes.
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, first->dtype(), out_dims));
  const int64_t outer = ProductOf(out_dims, 0, axis);
  const int64_t inner = ProductOf(out_dims, axis + 1);
  return VisitStorage(ctx.node(), first->dtype(), [&]<typename A>() -> Status {
    A dst(out);
    int64_t offset = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (const Tensor* t : inputs) {
        int64_t chunk = t->dim(axis) * inner;
        dst.CopyRun(offset, A(*t), o * chunk, chunk);
        offset += chunk;
      }
    }
    return Status::Ok();
  });
}

Status ConcatInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ConcatAxis(ictx.node, ictx.opset));
  DataType type = DataType::kUndefined;
  std::optional<Shape> out;
  bool rank_unknown = false;
  for (size_t i = 0; i < ictx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ictx, i));
    if (type == DataType::kUndefined) type = t->elem_type;
    if (!t->shape) {
      rank_unknown = true;
      continue;
    }
    const Shape& s = *t->shape;
    if (!out) {
      out = s;
      NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(axis_attr, static_cast<int64_t>(s.size()), ictx.node));
      (void)axis;
      continue;
    }
    if (s.size() != out->size())
      return ictx.InputError(i, "has rank " + std::to_string(s.size()) + ", expected " + std::to_string(out->size()));
    int64_t axis = axis_attr < 0 ? axis_attr + static_cast<int64_t>(s.size()) : axis_attr;
    for (size_t d = 0; d < s.size(); ++d) {
      Dim& o = (*out)[d];
      if (static_cast<int64_t>(d) == axis) {
        o = o.known() && s[d].known() ? Dim::Known(o.value + s[d].value) : Dim::Unknown();
      } else if (o.known() && s[d].known() && o.value != s[d].value) {
        return ictx.InputError(i, "has dimension " + std::to_string(d) + " of size " + std::to_string(s[d].value) +
                                      ", expected " + std::to_string(o.value));
      } else if (!o.known()) {
        o = s[d];
      }
    }
  }
  if (rank_unknown && out) {
    int64_t axis = axis_attr < 0 ? axis_attr + static_cast<int64_t>(out->size()) : axis_attr;
    (*out)[axis] = Dim::Unknown();
  }
  ictx.output_types[0] = TypeInfo::Tensor(type, out);
  PropagateByRunning(ictx, ConcatKernel);
  return Status::Ok();
}

// ---- Split --------------------------------------------------------------------------

// Sizes of each output along the axis. `split` empty when not given.
Result<std::vector<int64_t>> SplitSizes(const Node& node, int64_t opset, int64_t dim, size_t num_outputs,
                                        const std::optional<std::vector<int64_t>>& split) {
  if (split) {
    if (split->size() != num_outputs)
      return InvalidModel(node.Describe() + ": split " + DimsToString(*split) + " has " +
                          std::to_string(split->size()) + " entries for " + std::to_string(num_outputs) + " outputs");
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) return InvalidModel(node.Describe() + ": split " + DimsToString(*split) + " has a negative entry");
      if (s > (dim >= 0 ? dim : INT64_MAX / static_cast<int64_t>(num_outputs + 1)) || sum > INT64_MAX - s)
        return InvalidArgument(node.Describe() + ": split " + DimsToString(*split) + " exceeds the axis size");
      sum += s;
    }
    if (dim >= 0 && sum != dim)
      return InvalidArgument(node.Describe() + ": split " + DimsToString(*split) + " sums to " + std::to_string(sum) +
                             ", but the axis has size " + std::to_string(dim));
    return *split;
  }
  if (num_outputs == 0) return InvalidModel(node.Describe() + ": has no outputs");
  int64_t n = static_cast<int64_t>(num_outputs);
  if (opset >= 18 && node.HasAttr("num_outputs")) {
    NEE_ASSIGN_OR_RETURN(int64_t attr, node.GetInt("num_outputs"));
    if (attr != n)
      return InvalidModel(node.Describe() + ": num_outputs is " + std::to_string(attr) + " but the node has " +
                          std::to_string(n) + " outputs");
    int64_t chunk = (dim + n - 1) / n;
    std::vector<int64_t> sizes(num_outputs, chunk);
    sizes.back() = dim - chunk * (n - 1);
    if (sizes.back() < 0)
      return InvalidArgument(node.Describe() + ": cannot split an axis of size " + std::to_string(dim) + " into " +
                             std::to_string(n) + " outputs");
    return sizes;
  }
  if (dim % n != 0)
    return InvalidArgument(node.Describe() + ": axis of size " + std::to_string(dim) +
                           " cannot be split evenly into " + std::to_string(n) + " outputs");
  return std::vector<int64_t>(num_outputs, dim / n);
}

// Split-1's split input: typed T like the data (float or double in the
// spec; integer tensors are read too), holding whole numbers.
Result<std::vector<int64_t>> LegacySplitInput(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(1));
  if (t->dtype() != DataType::kFloat && t->dtype() != DataType::kDouble) return IntInput(ctx, 1);
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const double v = t->dtype() == DataType::kFloat ? t->data<float>()[i] : t->data<double>()[i];
    if (!(v >= 0 && v <= 9.0e15) || v != static_cast<double>(static_cast<int64_t>(v)))
      return ctx.InputError(1, "(split) must hold whole, non-negative sizes, got " + std::to_string(v));
    sizes.push_back(static_cast<int64_t>(v));
  }
  return sizes;
}

Status SplitKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->rank() == 0) return ctx.InputError(0, "cannot split a scalar (rank 0)");
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, x->rank(), ctx.node()));
  std::optional<std::vector<int64_t>> split;
  if (ctx.opset() >= 13 || (ctx.opset() < 2 && ctx.has_input(1))) {
    if (ctx.has_input(1)) {
      NEE_ASSIGN_OR_RETURN(std::vector<int64_t> s, ctx.opset() < 2 ? LegacySplitInput(ctx) : IntInput(ctx, 1));
      split = s;
    }
  } else if (ctx.node().HasAttr("split")) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> s, ctx.node().GetInts("split"));
    split = s;
  }
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                       SplitSizes(ctx.node(), ctx.opset(), x->dim(axis), ctx.num_outputs(), split));
  const int64_t outer = ProductOf(x->dims(), 0, axis);
  const int64_t inner = ProductOf(x->dims(), axis + 1);
  const int64_t in_chunk = x->dim(axis) * inner;
  int64_t start = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims = x->dims();
    dims[axis] = sizes[k];
    // Not zero-filled: every element is written, and the memory planner may
    // have placed the output inside x (a split on channels of one image).
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(k, x->dtype(), dims));
    const int64_t chunk = sizes[k] * inner;
    NEE_RETURN_IF_ERROR(VisitStorage(ctx.node(), x->dtype(), [&]<typename A>() -> Status {
      A dst(out), src(*x);
      for (int64_t o = 0; o < outer; ++o) dst.CopyRun(o * chunk, src, o * in_chunk + start * inner, chunk);
      return Status::Ok();
    }));
    start += sizes[k];
  }
  return Status::Ok();
}

Status SplitInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  for (auto& t : ictx.output_types) t = TypeInfo::Tensor(x->elem_type);
  if (!x->shape) return Status::Ok();
  if (x->shape->empty()) return InvalidModel(ictx.node.Describe() + ": cannot split a scalar (input 0 has rank 0)");
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ictx.node.GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, static_cast<int64_t>(x->shape->size()), ictx.node));
  std::optional<std::vector<int64_t>> split;
  bool split_unknown = false;
  // As the kernel reads it: an input from opset 13; before 2 the input when given, else the attribute.
  if (ictx.opset >= 13 || (ictx.opset < 2 && ictx.has_input(1))) {
    if (ictx.has_input(1)) {
      split = KnownInts(ictx, 1);
      split_unknown = !split;
    }
  } else if (ictx.node.HasAttr("split")) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> s, ictx.node.GetInts("split"));
    split = s;
  }
  const Dim dim = (*x->shape)[axis];
  std::optional<std::vector<int64_t>> sizes;
  if (!split_unknown && (split || dim.known())) {
    NEE_ASSIGN_OR_RETURN(sizes, SplitSizes(ictx.node, ictx.opset, dim.known() ? dim.value : -1,
                                           ictx.num_outputs(), split));
  }
  for (size_t k = 0; k < ictx.num_outputs(); ++k) {
    Shape s = *x->shape;
    s[axis] = sizes ? Dim::Known((*sizes)[k]) : Dim::Unknown();
    ictx.output_types[k] = TypeInfo::Tensor(x->elem_type, s);
  }
  PropagateByRunning(ictx, SplitKernel);
  return Status::Ok();
}

}  // namespace

void RegisterConcatSplitOps(OpRegistry& r) {
  r.RegisterVersions("", "Concat", {1, 4, 11, 13}, ConcatInfer, ConcatKernel);
  r.RegisterVersions("", "Split", {1, 2, 11, 13, 18}, SplitInfer, SplitKernel);
}

}  // namespace nee
