// Operator family: shape and data-movement ops. Reshape, Flatten, Transpose,
// Squeeze, Unsqueeze, Concat, Split, Expand, Tile, Pad, Shape, Size,
// Identity, Dropout (inference), Trilu, DepthToSpace, SpaceToDepth,
// ReverseSequence, CenterCropPad.
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
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family

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

// d * m, or unknown when d is unknown or the product would overflow.
Dim MulDim(const Dim& d, int64_t m) {
  if (!d.known() || m < 0 || (m != 0 && d.value > INT64_MAX / m)) return Dim::Unknown();
  return Dim::Known(d.value * m);
}

// The input's shape (nullopt when unknown), for rules.
std::optional<Shape> InputShape(const InferenceContext& ictx, size_t i) {
  if (!ictx.has_input(i)) return std::nullopt;
  const TypeInfo& t = ictx.input_type(i);
  return t.is_tensor() ? t.shape : std::nullopt;
}

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

// ---- Expand / Tile -----------------------------------------------------------------

Status ExpandKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntInput(ctx, 1));
  auto dims = BroadcastDims(x->dims(), shape);
  if (!dims.ok()) return ctx.InputError(1, dims.status().message());
  const std::vector<int64_t>& out_dims = dims.value();
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  std::vector<int64_t> in_strides = StridesOf(x->dims());
  std::vector<int64_t> strides(out_dims.size(), 0);
  size_t offset = out_dims.size() - x->dims().size();
  for (size_t i = 0; i < x->dims().size(); ++i) strides[offset + i] = x->dims()[i] == 1 ? 0 : in_strides[i];
  return StridedCopy(ctx.node(), *x, 0, strides, out);
}

Status ExpandInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out;
  if (auto shape = KnownInts(ictx, 1)) {
    for (int64_t d : *shape)
      if (d < 0) return ictx.InputError(1, "has negative dimension " + std::to_string(d));
    if (x->shape) {
      auto b = BroadcastShapes(*x->shape, ShapeFromDims(*shape));
      if (!b.ok()) return ictx.Error(b.status().message());
      out = std::move(b).value();
    }
  } else if (auto shape_shape = InputShape(ictx, 1); x->shape && shape_shape && shape_shape->size() == 1 &&
                                                     (*shape_shape)[0].known()) {
    out = Shape(std::max<size_t>(x->shape->size(), static_cast<size_t>((*shape_shape)[0].value)), Dim::Unknown());
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, ExpandKernel);
  return Status::Ok();
}

Status TileKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, IntInput(ctx, 1));
  if (static_cast<int64_t>(repeats.size()) != x->rank())
    return ctx.InputError(1, "has " + std::to_string(repeats.size()) + " repeats for an input of rank " +
                                 std::to_string(x->rank()));
  std::vector<int64_t> out_dims, view_dims, strides;
  std::vector<int64_t> in_strides = StridesOf(x->dims());
  for (int64_t d = 0; d < x->rank(); ++d) {
    if (repeats[d] < 0) return ctx.InputError(1, "has negative repeat " + std::to_string(repeats[d]));
    if (x->dim(d) != 0 && repeats[d] > INT64_MAX / x->dim(d)) return ctx.InputError(1, "repeats are too large");
    out_dims.push_back(x->dim(d) * repeats[d]);
    // The output seen as [r0, d0, r1, d1, ...]: repeat dims have stride 0.
    view_dims.push_back(repeats[d]);
    view_dims.push_back(x->dim(d));
    strides.push_back(0);
    strides.push_back(in_strides[d]);
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  NEE_ASSIGN_OR_RETURN(Tensor view, out.Reshaped(view_dims));
  return StridedCopy(ctx.node(), *x, 0, strides, view);
}

Status TileInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out = x->shape;
  if (out) {
    auto repeats = KnownInts(ictx, 1);
    if (repeats && repeats->size() != out->size())
      return ictx.InputError(1, "has " + std::to_string(repeats->size()) + " repeats for an input of rank " +
                                    std::to_string(out->size()));
    for (size_t d = 0; d < out->size(); ++d) {
      Dim& o = (*out)[d];
      if (repeats && (*repeats)[d] < 0) return ictx.InputError(1, "has a negative repeat");
      o = repeats ? ((*repeats)[d] == 1 ? o : MulDim(o, (*repeats)[d])) : Dim::Unknown();
    }
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, TileKernel);
  return Status::Ok();
}

// ---- Pad ---------------------------------------------------------------------------------

struct PadSpec {
  std::string mode;
  std::vector<int64_t> begin, end;  // per input dim
};

// Expands pads given for `axes` to every dim of a rank-`rank` tensor.
Result<PadSpec> ExpandPads(const Node& node, int64_t rank, const std::vector<int64_t>& pads,
                           const std::optional<std::vector<int64_t>>& axes, std::string mode) {
  PadSpec spec{std::move(mode), std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
  std::vector<int64_t> all_axes(static_cast<size_t>(rank));
  std::iota(all_axes.begin(), all_axes.end(), 0);
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(axes ? *axes : all_axes, rank, node));
  if (pads.size() != 2 * norm.size())
    return InvalidModel(node.Describe() + ": pads " + DimsToString(pads) + " should have " +
                        std::to_string(2 * norm.size()) + " entries");
  for (size_t i = 0; i < norm.size(); ++i) {
    spec.begin[norm[i]] = pads[i];
    spec.end[norm[i]] = pads[i + norm.size()];
  }
  if (spec.mode != "constant" && spec.mode != "reflect" && spec.mode != "edge" && spec.mode != "wrap")
    return InvalidModel(node.Describe() + ": unknown mode '" + spec.mode + "'");
  return spec;
}

// Source coordinate of output coordinate `o` along a dim of size `n`; -1 for padding.
int64_t PadSource(int64_t o, int64_t begin, int64_t n, const std::string& mode) {
  int64_t c = o - begin;
  if (c >= 0 && c < n) return c;
  if (mode == "constant" || n == 0) return -1;
  if (mode == "edge") return c < 0 ? 0 : n - 1;
  if (mode == "wrap") return ((c % n) + n) % n;
  // reflect (mirror without repeating the edge)
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1);
  c = ((c % period) + period) % period;
  return c < n ? c : period - c;
}

Status PadKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "constant"));
  std::vector<int64_t> pads;
  std::optional<std::vector<int64_t>> axes;
  NEE_ASSIGN_OR_RETURN(Tensor fill, Tensor::Allocate(x->dtype(), {}));
  if (ctx.opset() < 11) {
    NEE_ASSIGN_OR_RETURN(pads, node.GetInts(ctx.opset() < 2 ? "paddings" : "pads"));
    NEE_ASSIGN_OR_RETURN(float value, node.GetFloat("value", 0.0f));
    if (x->dtype() != DataType::kString) WriteFromDouble(fill, 0, value);
  } else {
    NEE_ASSIGN_OR_RETURN(pads, IntInput(ctx, 1));
    if (ctx.has_input(2)) {
      NEE_ASSIGN_OR_RETURN(const Tensor* v, ctx.InputTensor(2));
      if (v->dtype() != x->dtype())
        return ctx.InputError(2, std::string("has type ") + DataTypeName(v->dtype()) + ", expected " +
                                     DataTypeName(x->dtype()));
      if (v->num_elements() >= 1) NEE_RETURN_IF_ERROR(CopyElements(node, *v, fill));
    }
    if (ctx.has_input(3)) {
      NEE_ASSIGN_OR_RETURN(std::vector<int64_t> a, IntInput(ctx, 3));
      axes = a;
    }
  }
  auto spec = ExpandPads(node, x->rank(), pads, axes, mode);
  if (!spec.ok()) return InvalidArgument(spec.status().message());
  std::vector<int64_t> out_dims(x->dims().size());
  constexpr int64_t kMaxPad = int64_t{1} << 50;  // keeps the sums below overflow
  for (size_t d = 0; d < out_dims.size(); ++d) {
    int64_t n = x->dims()[d];
    if (spec->begin[d] < -kMaxPad || spec->begin[d] > kMaxPad || spec->end[d] < -kMaxPad || spec->end[d] > kMaxPad)
      return ctx.InputError(1, "pads " + DimsToString(pads) + " are out of range");
    out_dims[d] = n + spec->begin[d] + spec->end[d];
    if (out_dims[d] < 0)
      return ctx.InputError(1, "pads " + DimsToString(pads) + " crop dimension " + std::to_string(d) + " below zero");
    if (n == 0 && out_dims[d] > 0 && mode != "constant")
      return ctx.InputError(0, "cannot be padded in " + mode + " mode along empty dimension " + std::to_string(d));
  }
  // Allocating first makes absurd sizes fail before the coordinate maps are built.
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  std::vector<std::vector<int64_t>> maps(x->dims().size());
  for (size_t d = 0; d < out_dims.size(); ++d) {
    maps[d].resize(out.num_elements() == 0 ? 0 : static_cast<size_t>(out_dims[d]));
    for (size_t o = 0; o < maps[d].size(); ++o)
      maps[d][o] = PadSource(static_cast<int64_t>(o), spec->begin[d], x->dims()[d], mode);
  }
  return MappedCopy(node, *x, maps, &fill, out);
}

Status PadInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out = x->shape;
  if (out) {
    std::optional<std::vector<int64_t>> pads;
    std::optional<std::vector<int64_t>> axes;
    bool axes_unknown = false;
    if (ictx.opset < 11) {
      NEE_ASSIGN_OR_RETURN(std::vector<int64_t> p, ictx.node.GetInts(ictx.opset < 2 ? "paddings" : "pads"));
      pads = p;
    } else {
      pads = KnownInts(ictx, 1);
      if (ictx.has_input(3)) {
        axes = KnownInts(ictx, 3);
        axes_unknown = !axes;
      }
    }
    NEE_ASSIGN_OR_RETURN(std::string mode, ictx.node.GetString("mode", "constant"));
    if (pads && !axes_unknown) {
      NEE_ASSIGN_OR_RETURN(PadSpec spec, ExpandPads(ictx.node, static_cast<int64_t>(out->size()), *pads, axes, mode));
      for (size_t d = 0; d < out->size(); ++d) {
        Dim& o = (*out)[d];
        if (spec.begin[d] == 0 && spec.end[d] == 0) continue;
        constexpr int64_t kMaxPad = int64_t{1} << 50;
        auto in_range = [&](int64_t v) { return v > -kMaxPad && v < kMaxPad; };
        bool small = o.known() && in_range(o.value) && in_range(spec.begin[d]) && in_range(spec.end[d]);
        o = small ? Dim::Known(o.value + spec.begin[d] + spec.end[d]) : Dim::Unknown();
        if (o.known() && o.value < 0) return ictx.Error("pads crop dimension " + std::to_string(d) + " below zero");
      }
    } else {
      for (Dim& o : *out) o = Dim::Unknown();
    }
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, PadKernel);
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

// ---- CenterCropPad ------------------------------------------------------------------------------

Status CenterCropPadKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntInput(ctx, 1));
  std::vector<int64_t> all(static_cast<size_t>(x->rank()));
  std::iota(all.begin(), all.end(), 0);
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes_attr, ctx.node().GetInts("axes", all));
  auto axes = NormalizeAxes(axes_attr, x->rank(), ctx.node());
  if (!axes.ok()) return axes.status();
  if (shape.size() != axes->size())
    return ctx.InputError(1, "has " + std::to_string(shape.size()) + " entries for " + std::to_string(axes->size()) +
                                 " axes");
  std::vector<int64_t> out_dims = x->dims();
  for (size_t i = 0; i < axes->size(); ++i) {
    if (shape[i] < 0) return ctx.InputError(1, "has a negative size");
    out_dims[(*axes)[i]] = shape[i];
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  std::vector<std::vector<int64_t>> maps(out_dims.size());
  for (size_t d = 0; d < out_dims.size() && out.num_elements() > 0; ++d) {
    int64_t n = x->dims()[d], target = out_dims[d];
    // Cropping starts at (n - target) / 2; padding puts (target - n) / 2 before.
    int64_t shift = n >= target ? -((n - target) / 2) : (target - n) / 2;
    for (int64_t o = 0; o < target; ++o) {
      int64_t c = o - shift;
      maps[d].push_back(c >= 0 && c < n ? c : -1);
    }
  }
  NEE_ASSIGN_OR_RETURN(Tensor fill, Tensor::Allocate(x->dtype(), {}));
  return MappedCopy(ctx.node(), *x, maps, &fill, out);
}

Status CenterCropPadInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out = x->shape;
  if (out) {
    auto shape = KnownInts(ictx, 1);
    std::vector<int64_t> all(out->size());
    std::iota(all.begin(), all.end(), 0);
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes_attr, ictx.node.GetInts("axes", all));
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                         NormalizeAxes(axes_attr, static_cast<int64_t>(out->size()), ictx.node));
    if (shape && shape->size() != axes.size()) return ictx.InputError(1, "does not match the axes");
    for (size_t i = 0; i < axes.size(); ++i) (*out)[axes[i]] = shape ? Dim::Known((*shape)[i]) : Dim::Unknown();
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}

}  // namespace

void RegisterShapeOpsOps(OpRegistry& r) {
  r.RegisterVersions("", "Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}, ReshapeInfer, ReshapeKernel);
  r.RegisterVersions("", "Flatten", {1, 9, 11, 13, 21, 23, 24, 25}, FlattenInfer, FlattenKernel);
  r.RegisterVersions("", "Transpose", {1, 13, 21, 23, 24, 25}, TransposeInfer, TransposeKernel);
  r.RegisterVersions("", "Squeeze", {1, 11, 13, 21, 23, 24, 25}, SqueezeInfer, SqueezeKernel);
  r.RegisterVersions("", "Unsqueeze", {1, 11, 13, 21, 23, 24, 25}, UnsqueezeInfer, UnsqueezeKernel);
  r.RegisterVersions("", "Concat", {1, 4, 11, 13}, ConcatInfer, ConcatKernel);
  r.RegisterVersions("", "Split", {1, 2, 11, 13, 18}, SplitInfer, SplitKernel);
  r.RegisterVersions("", "Expand", {8, 13}, ExpandInfer, ExpandKernel);
  r.RegisterVersions("", "Tile", {6, 13}, TileInfer, TileKernel);
  r.RegisterVersions("", "Pad", {1, 2, 11, 13, 18, 19, 21, 23, 24, 25}, PadInfer, PadKernel);
  r.RegisterVersions("", "Shape", {1, 13, 15, 19, 21, 23, 24, 25}, ShapeInfer, ShapeKernel);
  r.RegisterVersions("", "Size", {1, 13, 19, 21, 23, 24, 25}, SizeInfer, SizeKernel);
  r.RegisterVersions("", "Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}, IdentityInfer, IdentityKernel);
  r.RegisterVersions("", "Dropout", {1, 6, 7, 10, 12, 13, 22}, DropoutInfer, DropoutKernel);
  r.RegisterVersions("", "Trilu", {14}, TriluInfer, TriluKernel);
  r.RegisterVersions("", "DepthToSpace", {1, 11, 13, 28}, DepthToSpaceInfer, DepthToSpaceKernel);
  r.RegisterVersions("", "SpaceToDepth", {1, 13, 28}, SpaceToDepthInfer, SpaceToDepthKernel);
  r.RegisterVersions("", "ReverseSequence", {10, 28}, InferSameAsInput0, ReverseSequenceKernel);
  r.RegisterVersions("", "CenterCropPad", {18}, CenterCropPadInfer, CenterCropPadKernel);
}

}  // namespace nee
