// Operator family: vision sampling and detection ops.
//
//   GridSample (16, 20, 22): samples X at the normalized positions of a grid
//       (nearest / (bi)linear / (bi)cubic; zeros, border or reflection
//       padding), for any number of spatial dims.
//   AffineGrid (20): the sampling grid of a batch of affine matrices.
//   NonMaxSuppression (10, 11): greedy IoU suppression per batch and class.
//   RoiAlign (10, 16, 22): bilinear average / max pooling of regions.
//   DeformConv (19, 22): convolution whose taps are shifted by learned
//       offsets (bilinear sampling with zeros outside) and scaled by a mask.
//
// (Col2Im lives in indexing.cc.) All arithmetic is done in double; every
// index computed from data (box indices, ROI batch indices, sampling
// positions) is range-checked before it addresses memory.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using tensor_util::KnownInts;

Status RequireFloat(const KernelContext& ctx, const Tensor& t) {
  if (nn::IsRealFloat(t.dtype())) return Status::Ok();
  return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError(ctx.node().op_type.c_str(), t.dtype()));
}

bool IsRealNumber(DataType t) { return nn::ComputeKindOf(t) != nn::ComputeKind::kNone; }

// ---- Sampling at fractional positions ------------------------------------------

enum class Padding { kZeros, kBorder, kReflection };
enum class Interp { kNearest, kLinear, kCubic };

// Reflects x into [low, high] by folding at the borders as often as needed.
double Reflect(double x, double low, double high) {
  const double range = high - low;
  if (range <= 0) return low;
  if (x >= low && x <= high) return x;
  const double dist = x < low ? low - x : x - high;
  const double folds = std::floor(dist / range);
  const double rest = dist - folds * range;
  const bool even = std::fmod(folds, 2.0) == 0;
  if (x < low) return even ? low + rest : high - rest;
  return even ? high - rest : low + rest;
}

// Keys' cubic convolution weights (a = -0.75) for the taps at -1, 0, 1, 2
// around a position at fraction t in [0, 1).
void CubicWeights(double t, double w[4]) {
  constexpr double a = -0.75;
  auto near = [](double x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };     // |x| <= 1
  auto far = [](double x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// An N-d sampler over one [d1, ..., dr] plane of doubles.
class Sampler {
 public:
  Sampler(std::vector<int64_t> dims, Interp interp, Padding padding, bool align_corners)
      : dims_(std::move(dims)), interp_(interp), padding_(padding), align_corners_(align_corners) {
    strides_ = StridesOf(dims_);
  }

  // Pixel coordinate of a normalized position in [-1, 1] along dim d.
  double Denormalize(double n, size_t d) const {
    const double size = static_cast<double>(dims_[d]);
    return align_corners_ ? (n + 1) / 2 * (size - 1) : ((n + 1) * size - 1) / 2;
  }

  // Value at pixel coordinates `x` (one per dim, outermost first).
  double Sample(const double* plane, std::vector<double> x) const {
    const size_t r = dims_.size();
    if (interp_ == Interp::kNearest)
      for (size_t d = 0; d < r; ++d) x[d] = std::nearbyint(x[d]);  // ties to even, as PyTorch
    // Nearest and linear sampling move an outside position onto the plane first. Cubic
    // sampling does not (PyTorch, ONNX Runtime): its 4 taps per dim each take the padding
    // rule in Pixel(), so a position just outside still blends several distinct pixels.
    for (size_t d = 0; d < r && interp_ != Interp::kCubic; ++d) {
      if (x[d] >= low(d) && x[d] <= high(d)) continue;
      if (padding_ == Padding::kBorder) x[d] = std::clamp(x[d], 0.0, static_cast<double>(dims_[d] - 1));
      if (padding_ == Padding::kReflection) x[d] = Reflect(x[d], low(d), high(d));
    }
    // Only zeros padding leaves positions far outside; they read padding.
    // Checking here also keeps the integer conversions below in range.
    for (size_t d = 0; d < r; ++d) {
      if (std::isnan(x[d])) return x[d];
      if (!(std::fabs(x[d]) < 1e15)) return 0;
    }
    if (interp_ == Interp::kNearest) {
      std::vector<int64_t> index(r);
      for (size_t d = 0; d < r; ++d) index[d] = static_cast<int64_t>(x[d]);
      return Pixel(plane, index);
    }
    // Tensor product of the per-dim taps: 2 (linear) or 4 (cubic) per dim.
    const int taps = interp_ == Interp::kLinear ? 2 : 4;
    const int first = interp_ == Interp::kLinear ? 0 : -1;
    std::vector<int64_t> base(r);
    std::vector<double> weights(r * 4);
    for (size_t d = 0; d < r; ++d) {
      const double fl = std::floor(x[d]);
      base[d] = static_cast<int64_t>(fl) + first;
      const double t = x[d] - fl;
      if (interp_ == Interp::kLinear) {
        weights[d * 4] = 1 - t;
        weights[d * 4 + 1] = t;
      } else {
        CubicWeights(t, &weights[d * 4]);
      }
    }
    int64_t corners = 1;
    for (size_t d = 0; d < r; ++d) corners *= taps;
    double sum = 0;
    std::vector<int64_t> index(r);
    for (int64_t c = 0; c < corners; ++c) {
      double w = 1;
      int64_t rest = c;
      for (size_t d = r; d-- > 0;) {
        const int tap = static_cast<int>(rest % taps);
        rest /= taps;
        index[d] = base[d] + tap;
        w *= weights[d * 4 + tap];
      }
      if (w != 0) sum += w * Pixel(plane, index);
    }
    return sum;
  }

 private:
  double low(size_t) const { return align_corners_ ? 0.0 : -0.5; }
  double high(size_t d) const { return static_cast<double>(dims_[d]) - (align_corners_ ? 1.0 : 0.5); }

  // The pixel at integer coordinates, with the padding rule outside the plane.
  double Pixel(const double* plane, const std::vector<int64_t>& index) const {
    int64_t offset = 0;
    for (size_t d = 0; d < dims_.size(); ++d) {
      int64_t i = index[d];
      const int64_t size = dims_[d];
      if (i < 0 || i >= size) {
        if (padding_ == Padding::kZeros) return 0;
        if (padding_ == Padding::kBorder) i = std::clamp<int64_t>(i, 0, size - 1);
        else i = std::clamp<int64_t>(static_cast<int64_t>(Reflect(static_cast<double>(i), low(d), high(d))), 0, size - 1);
      }
      offset += i * strides_[d];
    }
    return plane[offset];
  }

  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
  Interp interp_;
  Padding padding_;
  bool align_corners_;
};

// ---- GridSample -----------------------------------------------------------------

struct GridSampleAttrs {
  Interp interp = Interp::kLinear;
  Padding padding = Padding::kZeros;
  bool align_corners = false;
};

Result<GridSampleAttrs> ReadGridSampleAttrs(const Node& node, int64_t opset) {
  GridSampleAttrs a;
  NEE_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", opset >= 20 ? "linear" : "bilinear"));
  NEE_ASSIGN_OR_RETURN(std::string padding, node.GetString("padding_mode", "zeros"));
  NEE_ASSIGN_OR_RETURN(int64_t align, node.GetInt("align_corners", 0));
  // Opset 16 spells the modes bilinear/bicubic, 20 linear/cubic; accept both.
  if (mode == "nearest") a.interp = Interp::kNearest;
  else if (mode == "linear" || mode == "bilinear") a.interp = Interp::kLinear;
  else if (mode == "cubic" || mode == "bicubic") a.interp = Interp::kCubic;
  else return InvalidModel(node.Describe() + ": unknown mode '" + mode + "'");
  if (padding == "zeros") a.padding = Padding::kZeros;
  else if (padding == "border") a.padding = Padding::kBorder;
  else if (padding == "reflection") a.padding = Padding::kReflection;
  else return InvalidModel(node.Describe() + ": unknown padding_mode '" + padding + "'");
  a.align_corners = align != 0;
  return a;
}

Status GridSampleInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_RETURN_IF_ERROR(ReadGridSampleAttrs(ctx.node, ctx.opset).status());
  std::optional<Shape> y;
  const Shape* grid = nn::KnownShape(ctx, 1);
  if (grid && grid->size() >= 3) {
    Shape s{(*grid)[0], Dim::Unknown()};
    if (x->shape && x->shape->size() == grid->size()) {
      s[0] = nn::MergeDims((*x->shape)[0], (*grid)[0]);
      s[1] = (*x->shape)[1];
    }
    s.insert(s.end(), grid->begin() + 1, grid->end() - 1);
    y = s;
  } else if (x->shape) {
    y = Shape(x->shape->size(), Dim::Unknown());
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
  return Status::Ok();
}

Status GridSampleKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* grid, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(GridSampleAttrs attrs, ReadGridSampleAttrs(ctx.node(), ctx.opset()));
  if (!IsRealNumber(x->dtype()))
    return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("GridSample", x->dtype()));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *grid));
  const int64_t rank = x->rank();
  if (rank < 3) return ctx.InputError(0, "must have rank >= 3 [N, C, d1, ...], got " + DimsToString(x->dims()));
  const int64_t r = rank - 2;
  if (grid->rank() != rank || grid->dim(0) != x->dim(0) || grid->dim(rank - 1) != r)
    return ctx.InputError(1, "must have shape [" + std::to_string(x->dim(0)) + ", out dims..., " + std::to_string(r) +
                                 "] for X of shape " + DimsToString(x->dims()) + ", got " + DimsToString(grid->dims()));
  const int64_t batch = x->dim(0), channels = x->dim(1);
  std::vector<int64_t> in_dims(x->dims().begin() + 2, x->dims().end());
  std::vector<int64_t> out_spatial(grid->dims().begin() + 1, grid->dims().end() - 1);
  std::vector<int64_t> y_dims = {batch, channels};
  y_dims.insert(y_dims.end(), out_spatial.begin(), out_spatial.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), y_dims));
  if (y.num_elements() == 0) return Status::Ok();
  if (ProductOf(in_dims) == 0) return ctx.InputError(0, "has an empty spatial dim; there is nothing to sample");

  nn::ComputeInput<double> xs(*x);
  nn::ComputeInput<double> gs(*grid);
  nn::ComputeOutput<double> ys(y);
  const Sampler sampler(in_dims, attrs.interp, attrs.padding, attrs.align_corners);
  const int64_t plane = ProductOf(in_dims), points = ProductOf(out_spatial);
  ctx.ParallelFor(batch * points, 64, [&](int64_t begin, int64_t end) {
    std::vector<double> pos(static_cast<size_t>(r));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t n = u / points, p = u % points;
      // The grid lists coordinates innermost dim first (x, y, z).
      const double* g = gs.data() + u * r;
      for (int64_t d = 0; d < r; ++d) pos[d] = sampler.Denormalize(g[r - 1 - d], static_cast<size_t>(d));
      for (int64_t c = 0; c < channels; ++c)
        ys[(n * channels + c) * points + p] = sampler.Sample(xs.data() + (n * channels + c) * plane, pos);
    }
  });
  ys.Commit();
  return Status::Ok();
}

// ---- AffineGrid ------------------------------------------------------------------

// Evenly spaced positions in [-1, 1] for a dim of `size` pixels.
double GridPosition(int64_t i, int64_t size, bool align_corners) {
  if (align_corners) return size == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(size - 1);
  return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(size);
}

Status AffineGridInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* theta, InputTensorType(ctx, 0));
  std::optional<Shape> out;
  if (auto size = KnownInts(ctx, 1); size && (size->size() == 4 || size->size() == 5)) {
    Shape s;
    s.push_back(Dim::Known((*size)[0]));
    for (size_t i = 2; i < size->size(); ++i) s.push_back(Dim::Known((*size)[i]));
    s.push_back(Dim::Known(static_cast<int64_t>(size->size()) - 2));
    out = s;
  } else if (const Shape* size_shape = nn::KnownShape(ctx, 1); size_shape && size_shape->size() == 1 &&
                                                               (*size_shape)[0].known()) {
    const int64_t r = (*size_shape)[0].value - 2;
    if (r == 2 || r == 3) {
      Shape s(static_cast<size_t>(r + 2), Dim::Unknown());
      if (theta->shape && !theta->shape->empty()) s[0] = (*theta->shape)[0];
      s.back() = Dim::Known(r);
      out = s;
    }
  }
  ctx.output_types[0] = TypeInfo::Tensor(theta->elem_type, out);
  return Status::Ok();
}

Status AffineGridKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* theta, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* size_input, ctx.InputTensor(1));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *theta));
  NEE_ASSIGN_OR_RETURN(int64_t align, ctx.node().GetInt("align_corners", 0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> size, size_input->ToInt64Vector());
  if (size.size() != 4 && size.size() != 5)
    return ctx.InputError(1, "must hold [N, C, H, W] or [N, C, D, H, W], got " + DimsToString(size));
  const int64_t r = static_cast<int64_t>(size.size()) - 2;
  for (int64_t v : size)
    if (v < 0) return ctx.InputError(1, "must not hold negative sizes, got " + DimsToString(size));
  const int64_t batch = size[0];
  if (theta->dims() != std::vector<int64_t>{batch, r, r + 1})
    return ctx.InputError(0, "must have shape " + DimsToString(std::vector<int64_t>{batch, r, r + 1}) + " for size " +
                                 DimsToString(size) + ", got " + DimsToString(theta->dims()));
  // Output dims: [N, spatial..., r]; spatial dims are outermost first.
  std::vector<int64_t> spatial(size.begin() + 2, size.end());
  std::vector<int64_t> out_dims = {batch};
  out_dims.insert(out_dims.end(), spatial.begin(), spatial.end());
  out_dims.push_back(r);
  NEE_ASSIGN_OR_RETURN(Tensor grid, ctx.AllocateOutput(0, theta->dtype(), out_dims));
  nn::ComputeInput<double> th(*theta);
  nn::ComputeOutput<double> out(grid);
  const int64_t points = ProductOf(spatial);
  std::vector<double> homo(static_cast<size_t>(r + 1));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < points; ++p) {
      // The homogeneous point lists coordinates innermost dim first: (x, y[, z], 1).
      int64_t rest = p;
      for (int64_t d = r - 1; d >= 0; --d) {
        const int64_t i = rest % spatial[d];
        rest /= spatial[d];
        homo[r - 1 - d] = GridPosition(i, spatial[d], align != 0);
      }
      homo[r] = 1.0;
      for (int64_t row = 0; row < r; ++row) {
        double v = 0;
        for (int64_t k = 0; k <= r; ++k) v += th[(n * r + row) * (r + 1) + k] * homo[k];
        out[(n * points + p) * r + row] = v;
      }
    }
  out.Commit();
  return Status::Ok();
}

// ---- NonMaxSuppression ----------------------------------------------------------

struct Box {
  double y_min, x_min, y_max, x_max;
};

Box ReadBox(const float* b, bool center_point) {
  if (center_point) {  // [x_center, y_center, width, height]
    const double hw = b[2] / 2.0, hh = b[3] / 2.0;
    return {b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
  }
  // [y1, x1, y2, x2], corners in either order.
  return {std::min<double>(b[0], b[2]), std::min<double>(b[1], b[3]), std::max<double>(b[0], b[2]),
          std::max<double>(b[1], b[3])};
}

// Whether the IoU of a and b exceeds the threshold.
bool Suppresses(const Box& a, const Box& b, double iou_threshold) {
  const double ix = std::min(a.x_max, b.x_max) - std::max(a.x_min, b.x_min);
  const double iy = std::min(a.y_max, b.y_max) - std::max(a.y_min, b.y_min);
  if (ix <= 0 || iy <= 0) return false;
  const double inter = ix * iy;
  const double area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const double area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

Status NonMaxSuppressionInfer(InferenceContext& ctx) {
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Unknown(), Dim::Known(3)});
  return Status::Ok();
}

// An optional scalar input: nullopt when omitted or empty.
Result<std::optional<double>> OptionalScalar(KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::optional<double>();
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->num_elements() == 0) return std::optional<double>();
  if (t->num_elements() != 1) return ctx.InputError(i, "must be a scalar, got " + t->Describe());
  return std::optional<double>(ReadAsDouble(*t, 0));
}

Status NonMaxSuppressionKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* boxes, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scores, ctx.InputTensor(1));
  if (boxes->dtype() != DataType::kFloat) return ctx.InputError(0, "must be float, got " + boxes->Describe());
  if (scores->dtype() != DataType::kFloat) return ctx.InputError(1, "must be float, got " + scores->Describe());
  if (boxes->rank() != 3 || boxes->dim(2) != 4)
    return ctx.InputError(0, "must have shape [batches, boxes, 4], got " + DimsToString(boxes->dims()));
  const int64_t batches = boxes->dim(0), num_boxes = boxes->dim(1);
  if (scores->rank() != 3 || scores->dim(0) != batches || scores->dim(2) != num_boxes)
    return ctx.InputError(1, "must have shape [" + std::to_string(batches) + ", classes, " + std::to_string(num_boxes) +
                                 "] to match boxes " + DimsToString(boxes->dims()) + ", got " + DimsToString(scores->dims()));
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* m, ctx.InputTensor(2));
    if (m->dtype() != DataType::kInt64) return ctx.InputError(2, "must be int64, got " + m->Describe());
  }
  NEE_ASSIGN_OR_RETURN(std::optional<double> max_out, OptionalScalar(ctx, 2));
  NEE_ASSIGN_OR_RETURN(std::optional<double> iou_in, OptionalScalar(ctx, 3));
  NEE_ASSIGN_OR_RETURN(std::optional<double> score_threshold, OptionalScalar(ctx, 4));
  NEE_ASSIGN_OR_RETURN(int64_t center_point_box, ctx.node().GetInt("center_point_box", 0));
  if (center_point_box != 0 && center_point_box != 1)
    return InvalidModel(ctx.node().Describe() + ": center_point_box must be 0 or 1");
  const int64_t max_per_class =
      max_out ? std::max<int64_t>(0, ctx.input(2)->tensor().data<int64_t>()[0]) : 0;
  const double iou_threshold = iou_in.value_or(0.0);
  const int64_t classes = scores->dim(1);

  std::vector<int64_t> selected;  // triples (batch, class, box)
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches && max_per_class > 0; ++b) {
    std::vector<Box> all(static_cast<size_t>(num_boxes));
    for (int64_t i = 0; i < num_boxes; ++i)
      all[i] = ReadBox(boxes->data<float>() + (b * num_boxes + i) * 4, center_point_box == 1);
    for (int64_t c = 0; c < classes; ++c) {
      const float* s = scores->data<float>() + (b * classes + c) * num_boxes;
      order.clear();
      for (int64_t i = 0; i < num_boxes; ++i)
        // NaN scores cannot be ranked: such boxes are never selected.
        if (!std::isnan(s[i]) && (!score_threshold || s[i] > *score_threshold)) order.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return s[l] > s[r]; });
      kept.clear();
      int64_t count = 0;
      for (int64_t i : order) {
        if (count >= max_per_class) break;
        bool suppressed = false;
        for (const Box& k : kept)
          if (Suppresses(all[i], k, iou_threshold)) {
            suppressed = true;
            break;
          }
        if (suppressed) continue;
        kept.push_back(all[i]);
        selected.insert(selected.end(), {b, c, i});
        ++count;
      }
    }
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3}));
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  return Status::Ok();
}

// ---- RoiAlign ---------------------------------------------------------------------

struct RoiAlignAttrs {
  bool max_mode = false;
  int64_t out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1;
  bool half_pixel = false;
};

Result<RoiAlignAttrs> ReadRoiAlignAttrs(const Node& node, int64_t opset) {
  RoiAlignAttrs a;
  NEE_ASSIGN_OR_RETURN(std::string mode, node.GetString("mode", "avg"));
  NEE_ASSIGN_OR_RETURN(a.out_h, node.GetInt("output_height", 1));
  NEE_ASSIGN_OR_RETURN(a.out_w, node.GetInt("output_width", 1));
  NEE_ASSIGN_OR_RETURN(a.sampling_ratio, node.GetInt("sampling_ratio", 0));
  NEE_ASSIGN_OR_RETURN(float scale, node.GetFloat("spatial_scale", 1.0f));
  // Opset 10 had no attribute and behaved as output_half_pixel.
  NEE_ASSIGN_OR_RETURN(std::string transform,
                       node.GetString("coordinate_transformation_mode", opset >= 16 ? "half_pixel" : "output_half_pixel"));
  if (mode != "avg" && mode != "max") return InvalidModel(node.Describe() + ": mode must be 'avg' or 'max'");
  if (transform != "half_pixel" && transform != "output_half_pixel")
    return InvalidModel(node.Describe() + ": coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel'");
  constexpr int64_t kLimit = int64_t{1} << 24;
  if (a.out_h <= 0 || a.out_w <= 0 || a.out_h > kLimit || a.out_w > kLimit)
    return InvalidModel(node.Describe() + ": output_height and output_width must be positive");
  if (a.sampling_ratio < 0 || a.sampling_ratio > kLimit)
    return InvalidModel(node.Describe() + ": sampling_ratio must be non-negative");
  a.max_mode = mode == "max";
  a.spatial_scale = scale;
  a.half_pixel = transform == "half_pixel";
  return a;
}

Status RoiAlignInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(RoiAlignAttrs a, ReadRoiAlignAttrs(ctx.node, ctx.opset));
  Shape s{Dim::Unknown(), Dim::Unknown(), Dim::Known(a.out_h), Dim::Known(a.out_w)};
  if (const Shape* rois = nn::KnownShape(ctx, 1); rois && rois->size() == 2) s[0] = (*rois)[0];
  if (const Shape* idx = nn::KnownShape(ctx, 2); idx && idx->size() == 1) s[0] = nn::MergeDims(s[0], (*idx)[0]);
  if (x->shape && x->shape->size() == 4) s[1] = (*x->shape)[1];
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, s);
  return Status::Ok();
}

// Bilinear sample of `plane` at (y, x) as RoiAlign defines it: zero beyond
// one pixel outside, clamped to the edge pixels inside that band. In max
// mode the four weighted corners are maximized instead of summed.
double RoiSample(const double* plane, int64_t height, int64_t width, double y, double x, bool max_mode) {
  // Written so that NaN positions also read as outside.
  if (!(y >= -1.0 && y <= static_cast<double>(height) && x >= -1.0 && x <= static_cast<double>(width))) return 0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly, hx = 1 - lx;
  const double v1 = hy * hx * plane[y_low * width + x_low], v2 = hy * lx * plane[y_low * width + x_high];
  const double v3 = ly * hx * plane[y_high * width + x_low], v4 = ly * lx * plane[y_high * width + x_high];
  if (max_mode) return std::max(std::max(v1, v2), std::max(v3, v4));
  return v1 + v2 + v3 + v4;
}

Status RoiAlignKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* rois, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* batch_indices, ctx.InputTensor(2));
  NEE_ASSIGN_OR_RETURN(RoiAlignAttrs a, ReadRoiAlignAttrs(ctx.node(), ctx.opset()));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *x));
  if (x->rank() != 4) return ctx.InputError(0, "must have shape [N, C, H, W], got " + DimsToString(x->dims()));
  if (rois->rank() != 2 || rois->dim(1) != 4)
    return ctx.InputError(1, "must have shape [num_rois, 4], got " + DimsToString(rois->dims()));
  const int64_t num_rois = rois->dim(0);
  if (batch_indices->rank() != 1 || batch_indices->dim(0) != num_rois)
    return ctx.InputError(2, "must have shape [" + std::to_string(num_rois) + "], got " +
                                 DimsToString(batch_indices->dims()));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> batch_of, batch_indices->ToInt64Vector());
  const int64_t batch = x->dim(0), channels = x->dim(1), height = x->dim(2), width = x->dim(3);
  for (int64_t i = 0; i < num_rois; ++i)
    if (batch_of[i] < 0 || batch_of[i] >= batch)
      return ctx.InputError(2, "value " + std::to_string(batch_of[i]) + " at index " + std::to_string(i) +
                                   " is not a batch index in [0, " + std::to_string(batch) + ")");
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), {num_rois, channels, a.out_h, a.out_w}));
  if (y.num_elements() == 0) return Status::Ok();
  if (height == 0 || width == 0) return ctx.InputError(0, "has an empty spatial dim");
  nn::ComputeInput<double> xs(*x);
  nn::ComputeInput<double> rs(*rois);
  nn::ComputeOutput<double> ys(y);
  const double offset = a.half_pixel ? 0.5 : 0.0;
  constexpr double kMaxSamples = 1 << 20;  // per bin and dim; guards hostile ROI sizes
  for (int64_t n = 0; n < num_rois; ++n) {
    const double* roi = rs.data() + n * 4;
    const double start_w = roi[0] * a.spatial_scale - offset, start_h = roi[1] * a.spatial_scale - offset;
    double roi_w = roi[2] * a.spatial_scale - offset - start_w, roi_h = roi[3] * a.spatial_scale - offset - start_h;
    if (!a.half_pixel) {
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(a.out_h), bin_w = roi_w / static_cast<double>(a.out_w);
    const double grid_h_d = a.sampling_ratio > 0 ? static_cast<double>(a.sampling_ratio) : std::ceil(bin_h);
    const double grid_w_d = a.sampling_ratio > 0 ? static_cast<double>(a.sampling_ratio) : std::ceil(bin_w);
    if (!(grid_h_d <= kMaxSamples && grid_w_d <= kMaxSamples && grid_h_d * grid_w_d <= kMaxSamples * 16))
      return ctx.InputError(1, "region " + std::to_string(n) + " needs too many samples per bin");
    const int64_t grid_h = std::max<int64_t>(0, static_cast<int64_t>(grid_h_d));
    const int64_t grid_w = std::max<int64_t>(0, static_cast<int64_t>(grid_w_d));
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t c = 0; c < channels; ++c) {
      const double* plane = xs.data() + (batch_of[n] * channels + c) * height * width;
      for (int64_t ph = 0; ph < a.out_h; ++ph)
        for (int64_t pw = 0; pw < a.out_w; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const double yy = start_h + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const double xx = start_w + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(grid_w);
              const double v = RoiSample(plane, height, width, yy, xx, a.max_mode);
              acc = a.max_mode ? (first ? v : std::max(acc, v)) : acc + v;
              first = false;
            }
          }
          ys[((n * channels + c) * a.out_h + ph) * a.out_w + pw] = a.max_mode ? acc : acc / count;
        }
    }
  }
  ys.Commit();
  return Status::Ok();
}

// ---- DeformConv -------------------------------------------------------------------

Status DeformConvInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> y;
  const Shape* offset = nn::KnownShape(ctx, 2);
  if (offset && offset->size() >= 3) {
    Shape s = *offset;
    s[1] = Dim::Unknown();
    if (x->shape && !x->shape->empty()) s[0] = nn::MergeDims((*x->shape)[0], s[0]);
    if (const Shape* w = nn::KnownShape(ctx, 1); w && !w->empty()) s[1] = (*w)[0];
    y = s;
  } else if (x->shape) {
    y = Shape(x->shape->size(), Dim::Unknown());
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
  return Status::Ok();
}

// Bilinear sample at real pixel coordinates, zero outside the plane.
double SampleZeroPadded(const double* plane, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                        const std::vector<double>& pos) {
  const size_t r = dims.size();
  std::vector<int64_t> base(r);
  std::vector<double> frac(r);
  for (size_t d = 0; d < r; ++d) {
    // Positions far outside contribute nothing; checking here also keeps the
    // integer conversion below in range.
    if (!(pos[d] > -1.0 && pos[d] < static_cast<double>(dims[d]))) return 0;
    const double fl = std::floor(pos[d]);
    base[d] = static_cast<int64_t>(fl);
    frac[d] = pos[d] - fl;
  }
  double sum = 0;
  for (int64_t corner = 0; corner < (int64_t{1} << r); ++corner) {
    double w = 1;
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < r && inside; ++d) {
      const bool up = (corner >> d) & 1;
      const int64_t i = base[d] + (up ? 1 : 0);
      w *= up ? frac[d] : 1 - frac[d];
      inside = i >= 0 && i < dims[d];
      offset += i * strides[d];
    }
    if (inside && w != 0) sum += w * plane[offset];
  }
  return sum;
}

Status DeformConvKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* offset, ctx.InputTensor(2));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *x));
  if (x->rank() < 3) return ctx.InputError(0, "must have rank >= 3 [N, C, d1, ...], got " + DimsToString(x->dims()));
  const size_t r = static_cast<size_t>(x->rank() - 2);
  if (w->rank() != x->rank()) return ctx.InputError(1, "must have rank " + std::to_string(x->rank()) + ", got " + DimsToString(w->dims()));
  std::vector<int64_t> w_kernel(w->dims().begin() + 2, w->dims().end());
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, nn::ReadWindowSpec(node, r, &w_kernel));
  if (spec.kernel != w_kernel)
    return ctx.InputError(1, "spatial dims " + DimsToString(w_kernel) + " differ from kernel_shape " + DimsToString(spec.kernel));
  if (spec.auto_pad != "NOTSET") return NotImplemented(node.Describe() + ": DeformConv has no auto_pad");
  NEE_ASSIGN_OR_RETURN(int64_t group, node.GetInt("group", 1));
  NEE_ASSIGN_OR_RETURN(int64_t offset_group, node.GetInt("offset_group", 1));
  const int64_t batch = x->dim(0), in_ch = x->dim(1), out_ch = w->dim(0);
  if (group <= 0 || offset_group <= 0) return InvalidModel(node.Describe() + ": group and offset_group must be positive");
  if (in_ch % group != 0 || w->dim(1) * group != in_ch || out_ch % group != 0)
    return ctx.InputError(1, "shape " + DimsToString(w->dims()) + " does not fit " + std::to_string(in_ch) +
                                 " input channels in " + std::to_string(group) + " groups");
  if (in_ch % offset_group != 0)
    return InvalidModel(node.Describe() + ": input channels " + std::to_string(in_ch) + " are not divisible by offset_group " +
                        std::to_string(offset_group));
  // Output spatial dims follow the usual convolution arithmetic.
  std::vector<int64_t> in_dims(x->dims().begin() + 2, x->dims().end()), out_dims(r);
  for (size_t d = 0; d < r; ++d) {
    NEE_ASSIGN_OR_RETURN(out_dims[d], nn::WindowOutputDim(node, spec, d, in_dims[d]));
  }
  const int64_t taps = ProductOf(spec.kernel), points = ProductOf(out_dims), plane = ProductOf(in_dims);
  std::vector<int64_t> expect_offset = {batch, offset_group * taps * static_cast<int64_t>(r)};
  expect_offset.insert(expect_offset.end(), out_dims.begin(), out_dims.end());
  if (offset->dims() != expect_offset)
    return ctx.InputError(2, "must have shape " + DimsToString(expect_offset) + ", got " + DimsToString(offset->dims()));
  std::vector<int64_t> expect_mask = {batch, offset_group * taps};
  expect_mask.insert(expect_mask.end(), out_dims.begin(), out_dims.end());
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, OptionalInputTensor(ctx, 3));
  if (bias) {
    if (bias->dims() != std::vector<int64_t>{out_ch})
      return ctx.InputError(3, "must have shape [" + std::to_string(out_ch) + "], got " + DimsToString(bias->dims()));
  }
  NEE_ASSIGN_OR_RETURN(const Tensor* mask, OptionalInputTensor(ctx, 4));
  if (mask) {
    if (mask->dims() != expect_mask)
      return ctx.InputError(4, "must have shape " + DimsToString(expect_mask) + ", got " + DimsToString(mask->dims()));
  }
  std::vector<int64_t> y_dims = {batch, out_ch};
  y_dims.insert(y_dims.end(), out_dims.begin(), out_dims.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), y_dims));
  if (y.num_elements() == 0) return Status::Ok();

  nn::ComputeInput<double> xs(*x), ws(*w), os(*offset);
  nn::ComputeInput<double> bs, ms;
  if (bias) bs = nn::ComputeInput<double>(*bias);
  if (mask) ms = nn::ComputeInput<double>(*mask);
  nn::ComputeOutput<double> ys(y);
  const std::vector<int64_t> in_strides = StridesOf(in_dims);
  const int64_t in_per_group = in_ch / group, out_per_group = out_ch / group, in_per_offset_group = in_ch / offset_group;
  // Sampled input columns for one (n, channel): [taps][points].
  std::vector<double> column(static_cast<size_t>(taps * points));
  std::vector<int64_t> tap(r), point(r);
  std::vector<double> pos(r);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oc = 0; oc < out_ch; ++oc)
      for (int64_t p = 0; p < points; ++p) ys[(n * out_ch + oc) * points + p] = bias ? bs[oc] : 0.0;
    for (int64_t ic = 0; ic < in_ch; ++ic) {
      const int64_t og = ic / in_per_offset_group;
      const double* in_plane = xs.data() + (n * in_ch + ic) * plane;
      for (int64_t k = 0; k < taps; ++k) {
        for (int64_t rest = k, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
          tap[d] = rest % spec.kernel[d];
          rest /= spec.kernel[d];
        }
        for (int64_t p = 0; p < points; ++p) {
          for (int64_t rest = p, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
            point[d] = rest % out_dims[d];
            rest /= out_dims[d];
          }
          for (size_t d = 0; d < r; ++d) {
            const int64_t channel = ((og * taps + k) * static_cast<int64_t>(r) + static_cast<int64_t>(d));
            pos[d] = static_cast<double>(point[d] * spec.strides[d] - spec.pad_begin(d) + tap[d] * spec.dilations[d]) +
                     os[(n * offset_group * taps * static_cast<int64_t>(r) + channel) * points + p];
          }
          double v = SampleZeroPadded(in_plane, in_dims, in_strides, pos);
          if (mask) v *= ms[(n * offset_group * taps + og * taps + k) * points + p];
          column[static_cast<size_t>(k * points + p)] = v;
        }
      }
      // Every output channel of the input channel's group takes its share.
      const int64_t g = ic / in_per_group;
      for (int64_t oc = g * out_per_group; oc < (g + 1) * out_per_group; ++oc) {
        double* out = ys.data() + (n * out_ch + oc) * points;
        const double* weights = ws.data() + (oc * in_per_group + ic % in_per_group) * taps;
        for (int64_t k = 0; k < taps; ++k)
          for (int64_t p = 0; p < points; ++p) out[p] += weights[k] * column[static_cast<size_t>(k * points + p)];
      }
    }
  }
  ys.Commit();
  return Status::Ok();
}

}  // namespace

void RegisterVisionOps(OpRegistry& registry) {
  registry.RegisterVersions("", "GridSample", {16, 20, 22}, GridSampleInfer, GridSampleKernel);
  registry.RegisterVersions("", "AffineGrid", {20}, AffineGridInfer, AffineGridKernel);
  registry.RegisterVersions("", "NonMaxSuppression", {10, 11}, NonMaxSuppressionInfer, NonMaxSuppressionKernel);
  registry.RegisterVersions("", "RoiAlign", {10, 16, 22}, RoiAlignInfer, RoiAlignKernel);
  registry.RegisterVersions("", "DeformConv", {19, 22}, DeformConvInfer, DeformConvKernel);
}

}  // namespace nee
