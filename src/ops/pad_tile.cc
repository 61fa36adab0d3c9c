// Operator family: ops whose output grows the input by repeating or padding
// it (or crops it). Expand, Tile, Pad, CenterCropPad. Split from shape_ops.cc
// to keep each file readable whole.
//
// These ops only move bytes, so the kernels work on element storage (see
// tensor_util.h) and serve every element type, strings and packed sub-byte
// types included.
#include <algorithm>
#include <numeric>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/shape_ops_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family
using namespace shape_ops_util;  // NOLINT: shared with the other data-movement families

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

void RegisterPadTileOps(OpRegistry& r) {
  r.RegisterVersions("", "Expand", {8, 13}, ExpandInfer, ExpandKernel);
  r.RegisterVersions("", "Tile", {6, 13}, TileInfer, TileKernel);
  r.RegisterVersions("", "Pad", {1, 2, 11, 13, 18, 19, 21, 23, 24, 25}, PadInfer, PadKernel);
  r.RegisterVersions("", "CenterCropPad", {18}, CenterCropPadInfer, CenterCropPadKernel);
}

}  // namespace nee
