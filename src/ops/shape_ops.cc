// Operator family: ops that change or report a tensor's shape and leave its
// elements in order. Reshape, Flatten, Squeeze, Unsqueeze, Shape, Size,
// Identity, Dropout (inference). The other data-movement ops that were in
// this file: concat_split.cc, pad_tile.cc, rearrange.cc.
//
// These ops only move bytes, so the kernels work on element storage (see
// tensor_util.h) and serve every element type, strings and packed sub-byte
// types included. Shape rules also compute small output values when the
// inputs are known, so that shape computations (Shape->Gather->Concat->
// Reshape) fold to static shapes in the checker.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/shape_ops_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family
using namespace shape_ops_util;  // NOLINT: shared with the other data-movement families

// Product of dims [begin, end) as a Dim: known when every factor is (or a
// factor is a known 0).
Dim ProductDim(const Shape& shape, size_t begin, size_t end) {
  int64_t product = 1;
  int unknown = 0;
  const Dim* only_unknown = nullptr;
  for (size_t i = begin; i < end; ++i) {
    if (shape[i].known()) {
      if (shape[i].value == 0) return Dim::Known(0);
      product *= shape[i].value;
    } else {
      ++unknown;
      only_unknown = &shape[i];
    }
  }
  if (unknown == 0) return Dim::Known(product);
  // One unknown dim times ones is that dim, symbol and all ([batch, 1] -> batch):
  // Flatten of [batch, 3, 4] at axis 1 keeps its batch dim as onnx's inference does.
  if (unknown == 1 && product == 1) return *only_unknown;
  return Dim::Unknown();
}

// ---- Reshape ------------------------------------------------------------------

Result<std::vector<int64_t>> ResolveReshape(const std::vector<int64_t>& in, const std::vector<int64_t>& shape,
                                            bool allowzero, const Node& node) {
  std::vector<int64_t> out(shape.size());
  int64_t infer_at = -1;
  int64_t known_product = 1;
  NEE_ASSIGN_OR_RETURN(int64_t in_count, CheckedElementCount(in));
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[i];
    if (s == -1) {
      if (infer_at >= 0) return InvalidModel(node.Describe() + ": shape has more than one -1");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (s < -1) return InvalidModel(node.Describe() + ": shape has invalid dimension " + std::to_string(s));
    if (s == 0 && !allowzero) {
      if (i >= in.size())
        return InvalidModel(node.Describe() + ": shape entry " + std::to_string(i) +
                            " is 0 (copy) but the input has rank " + std::to_string(in.size()));
      s = in[i];
    }
    out[i] = s;
    if (s != 0 && known_product > INT64_MAX / s)
      return InvalidArgument(node.Describe() + ": shape " + DimsToString(shape) + " is too large");
    known_product *= s;
  }
  if (infer_at >= 0) {
    if (known_product == 0)
      return InvalidArgument(node.Describe() + ": cannot infer the -1 dimension of " + DimsToString(shape) +
                             " when other dimensions are 0");
    if (in_count % known_product != 0)
      return InvalidArgument(node.Describe() + ": cannot reshape " + DimsToString(in) + " to " + DimsToString(shape));
    out[static_cast<size_t>(infer_at)] = in_count / known_product;
  } else if (known_product != in_count) {
    return InvalidArgument(node.Describe() + ": cannot reshape " + DimsToString(in) + " (" + std::to_string(in_count) +
                           " elements) to " + DimsToString(out));
  }
  return out;
}

// With a symbolic input, [batch, -1] style targets still have a computable
// -1 when every unknown input dim is copied through a 0 at the same
// position: the copied dims cancel out of both element counts.
void InferMinusOneAroundCopiedDims(const Shape& in, const std::vector<int64_t>& shape, bool allowzero, Shape& out) {
  int64_t in_product = 1, out_product = 1;
  size_t infer_at = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    bool copied = !allowzero && i < shape.size() && shape[i] == 0;
    if (copied) continue;
    if (!in[i].known() || (in[i].value != 0 && in_product > INT64_MAX / in[i].value)) return;
    in_product *= in[i].value;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      infer_at = i;
    } else if (allowzero || shape[i] != 0) {
      if (shape[i] != 0 && out_product > INT64_MAX / shape[i]) return;
      out_product *= shape[i];
    } else if (i >= in.size()) {
      return;
    }
  }
  if (out_product > 0 && in_product % out_product == 0) out[infer_at] = Dim::Known(in_product / out_product);
}

Result<std::vector<int64_t>> ReshapeTarget(KernelContext& ctx) {
  if (ctx.opset() < 5) return ctx.node().GetInts("shape");
  return IntInput(ctx, 1);
}

Status ReshapeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReshapeTarget(ctx));
  NEE_ASSIGN_OR_RETURN(int64_t allowzero, ctx.node().GetInt("allowzero", 0));
  auto dims = ResolveReshape(x->dims(), shape, ctx.opset() >= 14 && allowzero != 0, ctx.node());
  if (!dims.ok()) return dims.status();
  return CopyToOutput(ctx, 0, *x, std::move(dims).value());
}

Status ReshapeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t allowzero_attr, ictx.node.GetInt("allowzero", 0));
  const bool allowzero = ictx.opset >= 14 && allowzero_attr != 0;
  std::optional<std::vector<int64_t>> shape;
  if (ictx.opset < 5) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> attr, ictx.node.GetInts("shape"));
    shape = attr;
  } else {
    shape = KnownInts(ictx, 1);
  }
  std::optional<Shape> out;
  if (shape) {
    std::vector<int64_t> in_dims;
    if (x->shape && ShapeIsStatic(*x->shape, &in_dims)) {
      auto dims = ResolveReshape(in_dims, *shape, allowzero, ictx.node);
      if (!dims.ok()) return InvalidModel(dims.status().message());
      out = ShapeFromDims(dims.value());
    } else {
      Shape s;
      int minus_ones = 0;
      for (size_t i = 0; i < shape->size(); ++i) {
        int64_t v = (*shape)[i];
        if (v == -1) {
          ++minus_ones;
          s.push_back(Dim::Unknown());
        } else if (v < -1) {
          return ictx.InputError(1, "has invalid dimension " + std::to_string(v));
        } else if (v == 0 && !allowzero) {
          s.push_back(x->shape && i < x->shape->size() ? (*x->shape)[i] : Dim::Unknown());
        } else {
          s.push_back(Dim::Known(v));
        }
      }
      if (minus_ones > 1) return ictx.InputError(1, "has more than one -1");
      if (minus_ones == 1 && x->shape) InferMinusOneAroundCopiedDims(*x->shape, *shape, allowzero, s);
      out = s;
    }
  } else if (auto shape_shape = InputShape(ictx, 1); shape_shape && shape_shape->size() == 1 &&
                                                     (*shape_shape)[0].known()) {
    out = Shape(static_cast<size_t>((*shape_shape)[0].value), Dim::Unknown());
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, ReshapeKernel);
  return Status::Ok();
}

// ---- Flatten --------------------------------------------------------------------

Result<int64_t> FlattenAxis(const Node& node, int64_t rank) {
  NEE_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", 1));
  if (axis < -rank || axis > rank)
    return InvalidModel(node.Describe() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                        std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Status FlattenKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, FlattenAxis(ctx.node(), x->rank()));
  const auto& d = x->dims();
  return CopyToOutput(ctx, 0, *x, {ProductOf(d, 0, axis), ProductOf(d, axis)});
}

Status FlattenInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out;
  if (x->shape) {
    NEE_ASSIGN_OR_RETURN(int64_t axis, FlattenAxis(ictx.node, static_cast<int64_t>(x->shape->size())));
    out = Shape{ProductDim(*x->shape, 0, axis), ProductDim(*x->shape, axis, x->shape->size())};
  } else {
    out = Shape{Dim::Unknown(), Dim::Unknown()};
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, FlattenKernel);
  return Status::Ok();
}

// ---- Squeeze / Unsqueeze --------------------------------------------------------

// Axes from the attribute (before opset 13) or input 1; nullopt when not given.
Result<std::optional<std::vector<int64_t>>> AxesFromKernel(KernelContext& ctx) {
  if (ctx.opset() < 13) {
    if (!ctx.node().HasAttr("axes")) return std::optional<std::vector<int64_t>>();
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.node().GetInts("axes"));
    return std::optional<std::vector<int64_t>>(axes);
  }
  if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>();
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, IntInput(ctx, 1));
  return std::optional<std::vector<int64_t>>(axes);
}

// For rules: axes known (attr or known input), absent (`absent` true), or unknown.
Result<std::optional<std::vector<int64_t>>> AxesFromRule(const InferenceContext& ictx, bool* absent) {
  *absent = false;
  if (ictx.opset < 13) {
    if (!ictx.node.HasAttr("axes")) {
      *absent = true;
      return std::optional<std::vector<int64_t>>();
    }
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ictx.node.GetInts("axes"));
    return std::optional<std::vector<int64_t>>(axes);
  }
  if (!ictx.has_input(1)) {
    *absent = true;
    return std::optional<std::vector<int64_t>>();
  }
  return KnownInts(ictx, 1);
}

Result<std::vector<int64_t>> SqueezedDims(const Node& node, const std::vector<int64_t>& in,
                                          const std::optional<std::vector<int64_t>>& axes) {
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (axes) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(*axes, rank, node));
    for (int64_t a : norm) {
      if (in[a] != 1)
        return InvalidArgument(node.Describe() + ": cannot squeeze axis " + std::to_string(a) + " of size " +
                               std::to_string(in[a]));
      drop[a] = true;
    }
  } else {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

Status SqueezeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(auto axes, AxesFromKernel(ctx));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, SqueezedDims(ctx.node(), x->dims(), axes));
  return CopyToOutput(ctx, 0, *x, dims);
}

Status SqueezeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  bool absent = false;
  NEE_ASSIGN_OR_RETURN(auto axes, AxesFromRule(ictx, &absent));
  std::optional<Shape> out;
  if (x->shape) {
    const Shape& in = *x->shape;
    int64_t rank = static_cast<int64_t>(in.size());
    if (axes) {
      NEE_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(*axes, rank, ictx.node));
      std::vector<bool> drop(in.size(), false);
      for (int64_t a : norm) {
        if (in[a].known() && in[a].value != 1)
          return ictx.Error("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(in[a].value));
        drop[a] = true;
      }
      Shape s;
      for (size_t i = 0; i < in.size(); ++i)
        if (!drop[i]) s.push_back(in[i]);
      out = s;
    } else if (absent) {
      bool all_known = std::all_of(in.begin(), in.end(), [](const Dim& d) { return d.known(); });
      if (all_known) {
        Shape s;
        for (const Dim& d : in)
          if (d.value != 1) s.push_back(d);
        out = s;
      }
    } else if (auto axes_shape = InputShape(ictx, 1); axes_shape && axes_shape->size() == 1 &&
                                                      (*axes_shape)[0].known()) {
      int64_t n = rank - (*axes_shape)[0].value;
      if (n >= 0) out = Shape(static_cast<size_t>(n), Dim::Unknown());
    }
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, SqueezeKernel);
  return Status::Ok();
}

// Output dims of Unsqueeze as positions: true where a new 1 goes.
Result<std::vector<bool>> UnsqueezeMask(const Node& node, int64_t in_rank, const std::vector<int64_t>& axes) {
  int64_t out_rank = in_rank + static_cast<int64_t>(axes.size());
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes, out_rank, node));
  std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
  for (int64_t a : norm) is_new[a] = true;
  return is_new;
}

Status UnsqueezeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(auto axes, AxesFromKernel(ctx));
  if (!axes) return ctx.Error("axes are required");
  NEE_ASSIGN_OR_RETURN(std::vector<bool> is_new, UnsqueezeMask(ctx.node(), x->rank(), *axes));
  std::vector<int64_t> dims;
  size_t next = 0;
  for (bool n : is_new) dims.push_back(n ? 1 : x->dims()[next++]);
  return CopyToOutput(ctx, 0, *x, dims);
}

Status UnsqueezeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  bool absent = false;
  NEE_ASSIGN_OR_RETURN(auto axes, AxesFromRule(ictx, &absent));
  if (absent) return ictx.Error("axes are required");
  std::optional<Shape> out;
  if (x->shape) {
    if (axes) {
      NEE_ASSIGN_OR_RETURN(std::vector<bool> is_new,
                           UnsqueezeMask(ictx.node, static_cast<int64_t>(x->shape->size()), *axes));
      Shape s;
      size_t next = 0;
      for (bool n : is_new) s.push_back(n ? Dim::Known(1) : (*x->shape)[next++]);
      out = s;
    } else if (auto axes_shape = InputShape(ictx, 1); axes_shape && axes_shape->size() == 1 &&
                                                      (*axes_shape)[0].known()) {
      out = Shape(x->shape->size() + static_cast<size_t>((*axes_shape)[0].value), Dim::Unknown());
    }
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, UnsqueezeKernel);
  return Status::Ok();
}

// ---- Shape / Size -------------------------------------------------------------------------

// [start, end) of the dims Shape reports (opset 15 start/end, clamped per spec).
Result<std::pair<int64_t, int64_t>> ShapeRange(const Node& node, int64_t opset, int64_t rank) {
  int64_t start = 0, end = rank;
  if (opset >= 15) {
    NEE_ASSIGN_OR_RETURN(start, node.GetInt("start", 0));
    NEE_ASSIGN_OR_RETURN(end, node.GetInt("end", rank));
  }
  auto clamp = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = clamp(end);
  return std::make_pair(start, std::max(start, end));
}

Status ShapeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(auto range, ShapeRange(ctx.node(), ctx.opset(), x->rank()));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kInt64, {range.second - range.first}));
  for (int64_t i = range.first; i < range.second; ++i) out.data<int64_t>()[i - range.first] = x->dim(i);
  return Status::Ok();
}

Status ShapeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  if (!x->shape) {
    ictx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Unknown()});
    return Status::Ok();
  }
  const Shape& s = *x->shape;
  NEE_ASSIGN_OR_RETURN(auto range, ShapeRange(ictx.node, ictx.opset, static_cast<int64_t>(s.size())));
  ictx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(range.second - range.first)});
  std::vector<int64_t> dims;
  for (int64_t i = range.first; i < range.second; ++i) {
    if (!s[i].known()) return Status::Ok();
    dims.push_back(s[i].value);
  }
  SetOutputValue(ictx, 0, Tensor::FromVector<int64_t>(dims, {static_cast<int64_t>(dims.size())}));
  return Status::Ok();
}

Status SizeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kInt64, {}));
  out.data<int64_t>()[0] = x->num_elements();
  return Status::Ok();
}

Status SizeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  ictx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, Shape{});
  std::vector<int64_t> dims;
  if (x->shape && ShapeIsStatic(*x->shape, &dims)) {
    auto count = CheckedElementCount(dims);
    if (count.ok()) SetOutputValue(ictx, 0, Tensor::Scalar<int64_t>(count.value()));
  }
  return Status::Ok();
}

// ---- Identity / Dropout -------------------------------------------------------------------

Status IdentityKernel(KernelContext& ctx) {
  const Value* v = ctx.input(0);
  if (!v) return ctx.InputError(0, "is required but missing");
  if (v->is_tensor()) return CopyToOutput(ctx, 0, v->tensor(), v->tensor().dims());
  // Sequences share immutable elements; maps and optionals copy as values.
  return ctx.SetOutput(0, *v);
}

Status IdentityInfer(InferenceContext& ictx) {
  if (!ictx.has_input(0)) return ictx.InputError(0, "is required");
  ictx.output_types[0] = ictx.input_type(0);
  PropagateByRunning(ictx, IdentityKernel);
  return Status::Ok();
}

Status DropoutKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(double training, ScalarInput(ctx, 2));
    double ratio = 0.5;
    if (ctx.has_input(1)) {
      NEE_ASSIGN_OR_RETURN(ratio, ScalarInput(ctx, 1));
    }
    if (training != 0 && ratio != 0)
      return NotImplemented(ctx.node().Describe() + ": training-mode Dropout (random masking) is not supported");
  }
  NEE_RETURN_IF_ERROR(CopyToOutput(ctx, 0, *x, x->dims()));
  if (ctx.wants_output(1)) {
    // Inference keeps every element: the mask is all true (all ones before opset 10).
    DataType mask_type = ctx.opset() >= 10 ? DataType::kBool : x->dtype();
    NEE_ASSIGN_OR_RETURN(Tensor mask, ctx.AllocateOutput(1, mask_type, x->dims()));
    for (int64_t i = 0; i < mask.num_elements(); ++i) WriteFromDouble(mask, i, 1.0);
  }
  return Status::Ok();
}

Status DropoutInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  if (ictx.opset < 7) {
    // Dropout-1 and -6 choose the mode by attribute, and is_test=0 (the
    // default) is training mode: "the output Y will either be a random
    // dropout, or a simple copy of the input". nee runs inference and refuses
    // it when the session is created, as it refuses training_mode=1 from
    // Dropout-12 on; a ratio of 0 drops nothing, so it is a copy. ONNX Runtime
    // and onnx.reference refuse both versions whatever is_test says (no
    // kernel before Dropout-7); nee runs is_test=1, the spec's copy.
    NEE_ASSIGN_OR_RETURN(int64_t is_test, ictx.node.GetInt("is_test", 0));
    NEE_ASSIGN_OR_RETURN(float ratio, ictx.node.GetFloat("ratio", 0.5f));
    if (is_test == 0 && ratio != 0)
      return NotImplemented(ictx.node.Describe() +
                            ": training-mode Dropout (is_test=0, the default before opset 7: "
                            "random masking) is not supported; set is_test=1 for inference");
  }
  ictx.output_types[0] = *x;
  if (ictx.num_outputs() > 1)
    ictx.output_types[1] = TypeInfo::Tensor(ictx.opset >= 10 ? DataType::kBool : x->elem_type, x->shape);
  return Status::Ok();
}

}  // namespace

void RegisterShapeOpsOps(OpRegistry& r) {
  r.RegisterVersions("", "Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}, ReshapeInfer, ReshapeKernel);
  r.RegisterVersions("", "Flatten", {1, 9, 11, 13, 21, 23, 24, 25}, FlattenInfer, FlattenKernel);
  r.RegisterVersions("", "Squeeze", {1, 11, 13, 21, 23, 24, 25}, SqueezeInfer, SqueezeKernel);
  r.RegisterVersions("", "Unsqueeze", {1, 11, 13, 21, 23, 24, 25}, UnsqueezeInfer, UnsqueezeKernel);
  r.RegisterVersions("", "Shape", {1, 13, 15, 19, 21, 23, 24, 25}, ShapeInfer, ShapeKernel);
  r.RegisterVersions("", "Size", {1, 13, 19, 21, 23, 24, 25}, SizeInfer, SizeKernel);
  r.RegisterVersions("", "Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}, IdentityInfer, IdentityKernel);
  r.RegisterVersions("", "Dropout", {1, 6, 7, 10, 12, 13, 22}, DropoutInfer, DropoutKernel);
}

}  // namespace nee
