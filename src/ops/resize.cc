// Operator family: Resize. Resize (opsets 10, 11, 13, 18, 19) and its older
// form Upsample (1, 7, 9): nearest / linear / cubic on any number of axes, every
// coordinate_transformation_mode and nearest_mode, cubic_coeff_a,
// exclude_outside, extrapolation_value, scales or sizes, and from 18
// antialias, axes and keep_aspect_ratio_policy.
//
// The reference kernel follows onnx.reference: interpolation is separable,
// so each resized axis is processed in turn on a double buffer; per output
// position along that axis it computes the source coordinate, the
// neighbouring input indices (clamped at the edges) and their weights. The
// final values are rounded (integers: half to even) and saturated to the
// element type. Nearest mode is a pure gather and works for every fixed-size
// element type bit-exactly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ir/float_formats.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/resize_geometry.h"

namespace nee {
using namespace resize;  // the shared types and sampling rules (ops/resize_geometry.h)
namespace {

bool IsUpsample(const Node& node) { return node.op_type == "Upsample"; }

// Upsample-7 holds its scales in an attribute; Upsample-1 (experimental, NCHW only) in height_scale and
// width_scale, the batch and channel axes unscaled.
Result<std::vector<float>> AttrScales(const Node& node, int64_t opset, size_t rank) {
  if (opset >= 7) return node.GetFloats("scales");
  NEE_ASSIGN_OR_RETURN(float height, node.GetFloat("height_scale"));
  NEE_ASSIGN_OR_RETURN(float width, node.GetFloat("width_scale"));
  if (rank != 4)
    return InvalidArgument(node.Describe() + ": Upsample-1 takes a 4-D (N, C, H, W) input, got rank " +
                           std::to_string(rank));
  return std::vector<float>{1, 1, height, width};
}

template <typename Ctx>
Result<ResizeAttrs> ReadAttrs(const Ctx& ctx, const Node& node, int64_t opset) {
  ResizeAttrs a;
  NEE_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "nearest"));
  if (mode == "nearest") a.mode = Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear") a.mode = Mode::kLinear;
  else if (mode == "cubic" && !IsUpsample(node)) a.mode = Mode::kCubic;
  else return ctx.Error("unknown mode '" + mode + "'");
  if (IsUpsample(node) || opset < 11) {
    // The original form: asymmetric coordinates and "simple" nearest rounding.
    a.coord = Coord::kAsymmetric;
    a.nearest = Nearest::kSimple;
    return a;
  }
  NEE_ASSIGN_OR_RETURN(std::string coord, node.GetString("coordinate_transformation_mode", "half_pixel"));
  static const std::pair<const char*, Coord> kCoords[] = {
      {"half_pixel", Coord::kHalfPixel},           {"half_pixel_symmetric", Coord::kHalfPixelSymmetric},
      {"pytorch_half_pixel", Coord::kPytorchHalfPixel}, {"align_corners", Coord::kAlignCorners},
      {"asymmetric", Coord::kAsymmetric},           {"tf_half_pixel_for_nn", Coord::kTfHalfPixelForNn},
      {"tf_crop_and_resize", Coord::kTfCropAndResize}};
  bool found = false;
  for (const auto& [name, value] : kCoords)
    if (coord == name) a.coord = value, found = true;
  if (!found) return ctx.Error("unknown coordinate_transformation_mode '" + coord + "'");
  NEE_ASSIGN_OR_RETURN(std::string nearest, node.GetString("nearest_mode", "round_prefer_floor"));
  if (nearest == "round_prefer_floor") a.nearest = Nearest::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil") a.nearest = Nearest::kRoundPreferCeil;
  else if (nearest == "floor") a.nearest = Nearest::kFloor;
  else if (nearest == "ceil") a.nearest = Nearest::kCeil;
  else return ctx.Error("unknown nearest_mode '" + nearest + "'");
  NEE_ASSIGN_OR_RETURN(float cubic_a, node.GetFloat("cubic_coeff_a", -0.75f));
  a.cubic_a = cubic_a;
  NEE_ASSIGN_OR_RETURN(int64_t exclude, node.GetInt("exclude_outside", 0));
  a.exclude_outside = exclude != 0;
  NEE_ASSIGN_OR_RETURN(float extrapolation, node.GetFloat("extrapolation_value", 0.0f));
  a.extrapolation_value = extrapolation;
  if (opset >= 18) {
    NEE_ASSIGN_OR_RETURN(int64_t antialias, node.GetInt("antialias", 0));
    a.antialias = antialias != 0 && a.mode != Mode::kNearest;
    NEE_ASSIGN_OR_RETURN(a.axes, node.GetInts("axes", {}));
    NEE_ASSIGN_OR_RETURN(a.aspect_policy, node.GetString("keep_aspect_ratio_policy", "stretch"));
    if (a.aspect_policy != "stretch" && a.aspect_policy != "not_larger" && a.aspect_policy != "not_smaller")
      return ctx.Error("unknown keep_aspect_ratio_policy '" + a.aspect_policy + "'");
  }
  return a;
}

// Where scales / sizes / roi are among the inputs (-1: not an input).
struct InputSlots {
  int roi = -1, scales = -1, sizes = -1;
};
InputSlots SlotsFor(const Node& node, int64_t opset) {
  if (IsUpsample(node)) return {-1, opset >= 9 ? 1 : -1, -1};
  if (opset < 11) return {-1, 1, -1};
  return {1, 2, 3};
}

// Computes the plan from the input dims and the (already read) scales / sizes / roi.
template <typename Ctx>
Result<ResizePlan> MakePlan(const Ctx& ctx, const ResizeAttrs& attrs, const std::vector<int64_t>& in_dims,
                            const std::vector<double>* scales_in, const std::vector<int64_t>* sizes_in,
                            const std::vector<double>* roi_in) {
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  // Axes the scales / sizes / roi refer to.
  std::vector<int64_t> axes;
  if (attrs.axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  } else {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t a : attrs.axes) {
      if (a < -rank || a >= rank)
        return ctx.Error("axis " + std::to_string(a) + " is out of range for input rank " + std::to_string(rank));
      int64_t n = a < 0 ? a + rank : a;
      if (seen[static_cast<size_t>(n)]) return ctx.Error("axis " + std::to_string(a) + " appears twice in axes");
      seen[static_cast<size_t>(n)] = true;
      axes.push_back(n);
    }
  }
  const size_t naxes = axes.size();
  ResizePlan plan;
  plan.out_dims = in_dims;
  plan.scales.assign(static_cast<size_t>(rank), 1.0);
  plan.roi_start.assign(static_cast<size_t>(rank), 0.0);
  plan.roi_end.assign(static_cast<size_t>(rank), 1.0);
  if (roi_in && !roi_in->empty()) {
    if (roi_in->size() != 2 * naxes)
      return ctx.Error("roi has " + std::to_string(roi_in->size()) + " values; expected " +
                       std::to_string(2 * naxes) + " (starts then ends)");
    for (size_t i = 0; i < naxes; ++i) {
      plan.roi_start[static_cast<size_t>(axes[i])] = (*roi_in)[i];
      plan.roi_end[static_cast<size_t>(axes[i])] = (*roi_in)[naxes + i];
    }
  }
  const bool has_scales = scales_in && !scales_in->empty();
  const bool has_sizes = sizes_in && !sizes_in->empty();
  if (has_scales == has_sizes)
    return ctx.Error(has_scales ? "only one of scales and sizes may be given"
                                : "one of scales and sizes must be given (non-empty)");
  if (has_scales) {
    if (scales_in->size() != naxes)
      return ctx.Error("scales has " + std::to_string(scales_in->size()) + " values; expected " +
                       std::to_string(naxes));
    for (size_t i = 0; i < naxes; ++i) {
      double s = (*scales_in)[i];
      if (!(s > 0) || !std::isfinite(s)) return ctx.Error("scales must be positive, got " + std::to_string(s));
      size_t d = static_cast<size_t>(axes[i]);
      plan.scales[d] = s;
      double out = std::floor(s * static_cast<double>(in_dims[d]));
      if (out > static_cast<double>(kMaxTensorBytes)) return ctx.Error("scales give an output that is too large");
      plan.out_dims[d] = static_cast<int64_t>(out);
    }
    return plan;
  }
  if (sizes_in->size() != naxes)
    return ctx.Error("sizes has " + std::to_string(sizes_in->size()) + " values; expected " + std::to_string(naxes));
  for (size_t i = 0; i < naxes; ++i) {
    size_t d = static_cast<size_t>(axes[i]);
    int64_t size = (*sizes_in)[i];
    if (size < 0) return ctx.Error("sizes must be non-negative, got " + std::to_string(size));
    // The same bound as an output from scales: sizes come from the file or the
    // caller, and a dim near INT64_MAX overflows the kernels' sums of dims.
    if (size > kMaxTensorBytes) return ctx.Error("sizes give an output that is too large (" + std::to_string(size) + ")");
    if (in_dims[d] == 0) {
      if (size != 0) return ctx.Error("cannot resize an empty axis to " + std::to_string(size));
      plan.out_dims[d] = 0;
      continue;
    }
    plan.scales[d] = static_cast<double>(size) / static_cast<double>(in_dims[d]);
    plan.out_dims[d] = size;
  }
  if (attrs.aspect_policy != "stretch" && naxes > 0) {
    double s = plan.scales[static_cast<size_t>(axes[0])];
    for (int64_t a : axes) {
      double v = plan.scales[static_cast<size_t>(a)];
      s = attrs.aspect_policy == "not_larger" ? std::min(s, v) : std::max(s, v);
    }
    for (int64_t a : axes) {
      size_t d = static_cast<size_t>(a);
      plan.scales[d] = s;
      double out = s * static_cast<double>(in_dims[d]) + 0.5;  // round half up
      if (out > static_cast<double>(kMaxTensorBytes)) return ctx.Error("sizes give an output that is too large");
      plan.out_dims[d] = static_cast<int64_t>(out);
    }
  }
  return plan;
}

// ---- Reading scales / sizes / roi ------------------------------------------

Result<std::vector<double>> ReadDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) v[static_cast<size_t>(i)] = ReadAsDouble(t, i);
  return v;
}

// ---- Shape rule ------------------------------------------------------------

// The output shape from scales over an input of partly unknown dims: a known
// dim scaled as the kernel scales it, an unknown one kept (its symbol too: a
// dynamic batch, a CNN's channels after a symbolic batch) where its scale is
// 1, else unknown. The plan is made with the unknown dims as 1; where that
// fails, the shape is left unknown and the kernel reports the problem.
Shape ScaledShape(const InferenceContext& ctx, const ResizeAttrs& attrs, const Shape& x, std::vector<double> scales) {
  std::vector<int64_t> dims;
  for (const Dim& d : x) dims.push_back(d.known() ? d.value : 1);
  std::vector<int64_t> no_sizes;
  Result<ResizePlan> plan = MakePlan(ctx, attrs, dims, &scales, &no_sizes, nullptr);
  Shape out(x.size(), Dim::Unknown());
  if (!plan.ok()) return out;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d].known()) out[d] = Dim::Known(plan.value().out_dims[d]);
    else if (plan.value().scales[d] == 1.0) out[d] = x[d];
  }
  return out;
}

Status InferResize(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  TypeInfo& out = ctx.output_types[0];
  out = TypeInfo::Tensor(x->elem_type);
  if (!x->shape) return Status::Ok();
  out.shape = Shape(x->shape->size(), Dim::Unknown());
  NEE_ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadAttrs(ctx, ctx.node, ctx.opset));
  InputSlots slots = SlotsFor(ctx.node, ctx.opset);
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  bool known = true;
  if (slots.scales < 0) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> s, AttrScales(ctx.node, ctx.opset, x->shape->size()));
    scales.assign(s.begin(), s.end());
  } else if (ctx.has_input(static_cast<size_t>(slots.scales))) {
    const Tensor* t = ctx.input_value(static_cast<size_t>(slots.scales));
    if (!t) {
      known = false;
    } else {
      NEE_ASSIGN_OR_RETURN(scales, ReadDoubles(*t));
    }
  }
  if (slots.sizes >= 0 && ctx.has_input(static_cast<size_t>(slots.sizes))) {
    const Tensor* t = ctx.input_value(static_cast<size_t>(slots.sizes));
    if (!t) {
      known = false;
    } else {
      NEE_ASSIGN_OR_RETURN(sizes, t->ToInt64Vector());
    }
  }
  if (!known) return Status::Ok();
  // With sizes and no aspect policy the output dims do not depend on the input's.
  std::vector<int64_t> in_dims;
  bool static_input = ShapeIsStatic(*x->shape, &in_dims);
  if (!static_input) {
    if (!sizes.empty() && attrs.aspect_policy == "stretch" && attrs.axes.empty() &&
        sizes.size() == x->shape->size())
      out.shape = ShapeFromDims(sizes);
    if (sizes.empty()) out.shape = ScaledShape(ctx, attrs, *x->shape, scales);
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(ResizePlan plan, MakePlan(ctx, attrs, in_dims, &scales, &sizes, nullptr));
  out.shape = ShapeFromDims(plan.out_dims);
  return Status::Ok();
}

}  // namespace

// ---- Per-axis sampling (declared in ops/resize_geometry.h) -------------------

namespace resize {

// Returns the source coordinate; sets *outside for tf_crop_and_resize
// positions that fall outside the input (they take extrapolation_value).
double SourceCoordinate(const ResizeAttrs& attrs, const AxisGeometry& g, int64_t y, bool* outside) {
  const double in_w = static_cast<double>(g.in_width);
  const double out_w = g.scale * in_w;  // the real-valued output width, as the spec defines it
  const double yd = static_cast<double>(y);
  *outside = false;
  switch (attrs.coord) {
    case Coord::kAlignCorners: return out_w == 1 ? 0.0 : yd * (in_w - 1) / (out_w - 1);
    case Coord::kAsymmetric:
      // The pre-opset-11 forms have no ONNX reference beyond integer scales;
      // compute them in float as ONNX Runtime does (4 / 1.6f is then 2.5).
      if (attrs.nearest == Nearest::kSimple) return static_cast<float>(y) / static_cast<float>(g.scale);
      return yd / g.scale;
    case Coord::kTfHalfPixelForNn: return (yd + 0.5) / g.scale;
    case Coord::kPytorchHalfPixel: return out_w == 1 ? -0.5 : (yd + 0.5) / g.scale - 0.5;
    case Coord::kHalfPixel: return (yd + 0.5) / g.scale - 0.5;
    case Coord::kHalfPixelSymmetric: {
      double adjustment = static_cast<double>(g.out_width) / out_w;
      double offset = in_w / 2 * (1 - adjustment);
      return offset + (yd + 0.5) / g.scale - 0.5;
    }
    case Coord::kTfCropAndResize: {
      double x = out_w == 1 ? (g.roi_end - g.roi_start) * (in_w - 1) / 2
                            : yd * (g.roi_end - g.roi_start) * (in_w - 1) / (out_w - 1);
      x += g.roi_start * (in_w - 1);
      *outside = x < 0 || x > in_w - 1;
      return x;
    }
  }
  return 0;
}

int64_t NearestIndex(const ResizeAttrs& attrs, const AxisGeometry& g, double x) {
  double fl = std::floor(x);
  double frac = x - fl;
  double pick;
  switch (attrs.nearest) {
    case Nearest::kRoundPreferFloor: pick = frac == 0 ? x : (frac <= 0.5 ? fl : fl + 1); break;
    case Nearest::kRoundPreferCeil: pick = frac == 0 ? x : (frac < 0.5 ? fl : fl + 1); break;
    case Nearest::kFloor: pick = fl; break;
    case Nearest::kCeil: pick = frac == 0 ? x : fl + 1; break;
    case Nearest::kSimple: pick = g.scale < 1 ? std::ceil(x) : std::trunc(x); break;
    default: pick = fl; break;
  }
  if (!(pick >= 0)) return 0;  // also catches NaN
  return std::min<int64_t>(static_cast<int64_t>(std::min(pick, 9.0e18)), g.in_width - 1);
}

namespace {

// Interpolation weights for the fractional position `ratio` in (0, 1].
std::vector<double> Weights(const ResizeAttrs& attrs, double ratio, double scale) {
  const double a = attrs.cubic_a;
  if (attrs.mode == Mode::kLinear && !attrs.antialias) return {1 - ratio, ratio};
  if (attrs.mode == Mode::kCubic && !attrs.antialias) {
    double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;
    return {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a, ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
            ((a + 2) * q - (a + 3)) * q * q + 1, ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a};
  }
  // Antialiasing widens the filter by 1/scale when downsampling.
  const double s = std::min(scale, 1.0);
  std::vector<double> w;
  if (attrs.mode == Mode::kLinear) {
    int64_t start = static_cast<int64_t>(std::floor(-1 / s) + 1);
    int64_t footprint = 2 - 2 * start;
    for (int64_t i = start; i < start + footprint; ++i)
      w.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0, 1.0));
  } else {
    int64_t i_start = static_cast<int64_t>(std::floor(-2 / s) + 1);
    int64_t i_end = 2 - i_start;
    for (int64_t i = i_start; i < i_end; ++i) {
      double x = std::fabs(s * (static_cast<double>(i) - ratio));
      double x2 = x * x, x3 = x2 * x;
      w.push_back(x <= 1 ? (a + 2) * x3 - (a + 3) * x2 + 1 : x < 2 ? a * x3 - 5 * a * x2 + 8 * a * x - 4 * a : 0.0);
    }
  }
  double sum = 0;
  for (double v : w) sum += v;
  for (double& v : w) v /= sum;
  return w;
}

}  // namespace

Taps TapsFor(const ResizeAttrs& attrs, const AxisGeometry& g, int64_t y) {
  Taps taps;
  double x = SourceCoordinate(attrs, g, y, &taps.outside);
  double fl = std::floor(x);
  double ratio = x == fl ? 1.0 : x - fl;  // prefer the left neighbour on exact hits
  taps.weight = Weights(attrs, ratio, g.scale);
  const int64_t n = static_cast<int64_t>(taps.weight.size());
  // The n input positions nearest x, ties going to the smaller index.
  const int64_t pad = (n + 1) / 2;
  double xp = x + static_cast<double>(pad);
  double p = std::floor(xp);
  double frac = xp - p;
  int64_t offset = n % 2 == 0 ? (frac == 0 ? -(n / 2) : -(n / 2) + 1) : (frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1);
  // Coordinates far outside the input only ever clamp; keep the arithmetic in range.
  double start_d = std::clamp(p, -1.0e15, 1.0e15) + static_cast<double>(offset - pad);
  int64_t start = static_cast<int64_t>(start_d);
  taps.index.resize(static_cast<size_t>(n));
  double kept = 0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t idx = start + k;
    if (attrs.exclude_outside && (idx < 0 || idx >= g.in_width)) taps.weight[static_cast<size_t>(k)] = 0;
    kept += taps.weight[static_cast<size_t>(k)];
    taps.index[static_cast<size_t>(k)] = std::clamp<int64_t>(idx, 0, g.in_width - 1);
  }
  if (attrs.exclude_outside && kept != 0)
    for (double& w : taps.weight) w /= kept;
  return taps;
}

bool IsIdentityAxis(const ResizeAttrs& attrs, const AxisGeometry& g) {
  auto close = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)); };
  bool roi_trivial = attrs.coord != Coord::kTfCropAndResize ||
                     (std::fabs(g.roi_start) <= 1e-9 && close(g.roi_end, 1.0));
  return close(g.scale, 1.0) && g.out_width == g.in_width && roi_trivial;
}

}  // namespace resize

namespace {

// ---- Kernels ---------------------------------------------------------------

// Saturating store of the final double value, as onnx.reference's saturate_cast.
void StoreSaturated(Tensor& y, int64_t i, double v) {
  const DataType t = y.dtype();
  if (IsFloatingPoint(t)) {
    double max = t == DataType::kDouble ? std::numeric_limits<double>::max()
                 : t == DataType::kFloat16 ? 65504.0
                                           : std::numeric_limits<float>::max();
    if (!std::isnan(v)) v = std::clamp(v, -max, max);
    WriteFromDouble(y, i, v);
  } else if (t == DataType::kBool) {
    WriteFromDouble(y, i, v);
  } else {
    // Integers: round half to even, then clamp (WriteFromDouble follows Cast,
    // which does not saturate). Bounds are the largest doubles inside range.
    double lo = 0, hi = 0;
    switch (t) {
      case DataType::kInt8: lo = -128, hi = 127; break;
      case DataType::kUint8: lo = 0, hi = 255; break;
      case DataType::kInt16: lo = -32768, hi = 32767; break;
      case DataType::kUint16: lo = 0, hi = 65535; break;
      case DataType::kInt32: lo = -2147483648.0, hi = 2147483647.0; break;
      case DataType::kUint32: lo = 0, hi = 4294967295.0; break;
      case DataType::kInt64: lo = -9223372036854775808.0, hi = 9223372036854774784.0; break;
      case DataType::kUint64: lo = 0, hi = 18446744073709549568.0; break;
      default: break;
    }
    v = std::isnan(v) ? 0 : std::clamp(std::nearbyint(v), lo, hi);
    WriteFromDouble(y, i, v);
  }
}

// Nearest: a gather, bit-exact for every fixed-size element type.
Status ResizeNearest(KernelContext& ctx, const ResizeAttrs& attrs, const Tensor& x, const ResizePlan& plan,
                     Tensor& y) {
  const size_t rank = x.dims().size();
  // Per axis: the source index of each output position and whether it lies
  // outside the crop (Tensors, so that a failed allocation is an error).
  std::vector<Tensor> source_t(rank), outside_t(rank);
  std::vector<const int64_t*> source(rank);
  std::vector<const uint8_t*> outside(rank);
  for (size_t d = 0; d < rank; ++d) {
    AxisGeometry g{x.dim(static_cast<int64_t>(d)), plan.out_dims[d], plan.scales[d], plan.roi_start[d], plan.roi_end[d]};
    auto src_or = Tensor::Allocate(DataType::kInt64, {g.out_width});
    auto out_or = Tensor::Allocate(DataType::kUint8, {g.out_width});
    if (!src_or.ok()) return src_or.status().WithContext(ctx.node().Describe() + ": ");
    if (!out_or.ok()) return out_or.status().WithContext(ctx.node().Describe() + ": ");
    source_t[d] = std::move(src_or).value();
    outside_t[d] = std::move(out_or).value();
    bool identity = IsIdentityAxis(attrs, g);
    for (int64_t o = 0; o < g.out_width; ++o) {
      bool out_of_input = false;
      double c = identity ? static_cast<double>(o) : SourceCoordinate(attrs, g, o, &out_of_input);
      source_t[d].data<int64_t>()[o] = identity ? o : NearestIndex(attrs, g, c);
      outside_t[d].data<uint8_t>()[o] = out_of_input ? 1 : 0;
    }
    source[d] = source_t[d].data<int64_t>();
    outside[d] = outside_t[d].data<uint8_t>();
  }
  const std::vector<int64_t> in_strides = StridesOf(x.dims());
  const int64_t total = y.num_elements();
  const size_t elem_bytes = static_cast<size_t>(ElementBits(x.dtype()) / 8);
  const bool is_string = x.dtype() == DataType::kString;
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(y.raw_data());
  ctx.ParallelFor(total, 1024, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(rank);
    for (int64_t i = begin; i < end; ++i) {
      int64_t rem = i, offset = 0;
      bool extrapolate = false;
      for (size_t d = rank; d-- > 0;) {
        int64_t o = rem % plan.out_dims[d];
        rem /= plan.out_dims[d];
        offset += source[d][o] * in_strides[d];
        extrapolate = extrapolate || outside[d][o] != 0;
      }
      if (extrapolate && !is_string) StoreSaturated(y, i, attrs.extrapolation_value);
      else if (is_string) y.data<std::string>()[i] = x.data<std::string>()[offset];
      else std::memcpy(dst + static_cast<size_t>(i) * elem_bytes, src + static_cast<size_t>(offset) * elem_bytes, elem_bytes);
    }
  });
  return Status::Ok();
}

Status ResizeInterpolate(KernelContext& ctx, const ResizeAttrs& attrs, const Tensor& x, const ResizePlan& plan,
                         Tensor& y) {
  if (x.dtype() == DataType::kString || x.dtype() == DataType::kBool || IsSubByte(x.dtype()) ||
      x.dtype() == DataType::kComplex64 || x.dtype() == DataType::kComplex128)
    return NotImplemented(ctx.node().Describe() + ": linear/cubic Resize does not support element type " +
                          DataTypeName(x.dtype()));
  std::vector<int64_t> dims = x.dims();
  // Buffers are Tensors so that an allocation failure is an error, not a throw.
  auto work = Tensor::Allocate(DataType::kDouble, {x.num_elements()});
  if (!work.ok()) return work.status().WithContext(ctx.node().Describe() + ": ");
  Tensor buffer = std::move(work).value();
  for (int64_t i = 0; i < x.num_elements(); ++i) buffer.data<double>()[i] = ReadAsDouble(x, i);
  for (size_t d = 0; d < dims.size(); ++d) {
    AxisGeometry g{dims[d], plan.out_dims[d], plan.scales[d], plan.roi_start[d], plan.roi_end[d]};
    if (IsIdentityAxis(attrs, g)) continue;
    if (g.in_width == 0 && g.out_width > 0) return ctx.Error("cannot interpolate from an empty axis");
    // Taps per output position: tabulated when the axis is of ordinary size,
    // recomputed per row otherwise (the same values either way).
    const bool tabulate = g.out_width <= (int64_t{1} << 16);
    std::vector<Taps> taps(tabulate ? static_cast<size_t>(g.out_width) : 0);
    for (size_t o = 0; o < taps.size(); ++o) taps[o] = TapsFor(attrs, g, static_cast<int64_t>(o));
    const int64_t outer = ProductOf(dims, 0, d), inner = ProductOf(dims, d + 1);
    // The intermediate buffer can exceed both input and output (one axis
    // grown before another shrinks); bound it like a tensor.
    const double next_count = static_cast<double>(outer) * static_cast<double>(g.out_width) * static_cast<double>(inner);
    if (next_count * sizeof(double) > static_cast<double>(kMaxTensorBytes))
      return ctx.Error("the intermediate result along axis " + std::to_string(d) + " would be too large");
    auto next_or = Tensor::Allocate(DataType::kDouble, {outer * g.out_width * inner});
    if (!next_or.ok()) return next_or.status().WithContext(ctx.node().Describe() + ": ");
    Tensor next = std::move(next_or).value();
    const double* src = buffer.data<double>();
    ctx.ParallelFor(outer * g.out_width, std::max<int64_t>(1, 4096 / (inner + 1)), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t o = row / g.out_width, pos = row % g.out_width;
        Taps computed;
        if (!tabulate) computed = TapsFor(attrs, g, pos);
        const Taps& t = tabulate ? taps[static_cast<size_t>(pos)] : computed;
        double* dst = next.data<double>() + row * inner;
        if (t.outside) {
          std::fill(dst, dst + inner, attrs.extrapolation_value);
          continue;
        }
        for (int64_t i = 0; i < inner; ++i) {
          double s = 0;
          for (size_t k = 0; k < t.index.size(); ++k)
            s += t.weight[k] * src[(o * g.in_width + t.index[k]) * inner + i];
          dst[i] = s;
        }
      }
    });
    buffer = std::move(next);
    dims[d] = g.out_width;
  }
  for (int64_t i = 0; i < y.num_elements(); ++i) StoreSaturated(y, i, buffer.data<double>()[i]);
  return Status::Ok();
}

}  // namespace

namespace resize {

Result<ResizeAttrs> ReadKernelAttrs(const KernelContext& ctx) {
  return ReadAttrs(ctx, ctx.node(), ctx.opset());
}

Result<ResizePlan> ReadKernelPlan(KernelContext& ctx, const ResizeAttrs& attrs, const Tensor& x) {
  InputSlots slots = SlotsFor(ctx.node(), ctx.opset());
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (slots.scales < 0) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> s, AttrScales(ctx.node(), ctx.opset(), x.dims().size()));
    scales.assign(s.begin(), s.end());
  } else if (ctx.has_input(static_cast<size_t>(slots.scales))) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(static_cast<size_t>(slots.scales)));
    if (!IsFloatingPoint(t->dtype())) return ctx.InputError(static_cast<size_t>(slots.scales), "(scales) must be float");
    NEE_ASSIGN_OR_RETURN(scales, ReadDoubles(*t));
  }
  if (slots.sizes >= 0 && ctx.has_input(static_cast<size_t>(slots.sizes))) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(static_cast<size_t>(slots.sizes)));
    if (t->dtype() != DataType::kInt64) return ctx.InputError(static_cast<size_t>(slots.sizes), "(sizes) must be int64");
    NEE_ASSIGN_OR_RETURN(sizes, t->ToInt64Vector());
  }
  if (slots.roi >= 0 && ctx.has_input(static_cast<size_t>(slots.roi)) && attrs.coord == Coord::kTfCropAndResize) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(static_cast<size_t>(slots.roi)));
    NEE_ASSIGN_OR_RETURN(roi, ReadDoubles(*t));
  }
  return MakePlan(ctx, attrs, x.dims(), &scales, &sizes, &roi);
}

}  // namespace resize

namespace {

Status ResizeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(ResizeAttrs attrs, ReadKernelAttrs(ctx));
  NEE_ASSIGN_OR_RETURN(ResizePlan plan, ReadKernelPlan(ctx, attrs, *x));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), plan.out_dims));
  if (y.num_elements() == 0) return Status::Ok();
  if (x->num_elements() == 0) return ctx.Error("cannot resize an empty input to a non-empty output");
  if (IsSubByte(x->dtype()))
    return NotImplemented(ctx.node().Describe() + ": Resize does not support element type " +
                          DataTypeName(x->dtype()));
  if (attrs.mode == Mode::kNearest) return ResizeNearest(ctx, attrs, *x, plan, y);
  return ResizeInterpolate(ctx, attrs, *x, plan, y);
}

}  // namespace

void RegisterResizeOps(OpRegistry& registry) {
  registry.RegisterVersions("", "Resize", {10, 11, 13, 18, 19}, InferResize, ResizeKernel);
  registry.RegisterVersions("", "Upsample", {1, 7, 9}, InferResize, ResizeKernel);
}

}  // namespace nee
