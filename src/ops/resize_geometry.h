// The Resize reference kernel's attributes, plan and per-axis sampling rules
// (defined in ops/resize.cc), shared with the CPU provider's fast Resize
// (ep/cpu/resize_fast.cc) so that both compute source coordinates, indices
// and weights with the very same code and agree bitwise.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op_schema.h"

namespace nee::resize {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric,
                   kTfHalfPixelForNn, kTfCropAndResize };
// kSimple is the pre-opset-11 behaviour (Upsample, Resize-10): truncate when
// upsampling, round up when downsampling.
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeAttrs {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
  bool antialias = false;
  std::vector<int64_t> axes;  // raw attribute; empty: all
  std::string aspect_policy = "stretch";
};

// The resolved per-axis plan: output dims, the scale used in the coordinate
// transform, and the roi (start, end) per axis.
struct ResizePlan {
  std::vector<int64_t> out_dims;
  std::vector<double> scales;
  std::vector<double> roi_start, roi_end;
};

// One axis as the sampling rules see it.
struct AxisGeometry {
  int64_t in_width = 0, out_width = 0;
  double scale = 1;
  double roi_start = 0, roi_end = 1;
};

// Taps for one output position: input indices (clamped) and weights.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool outside = false;
};

// The running node's attributes (Resize or Upsample, any opset).
Result<ResizeAttrs> ReadKernelAttrs(const KernelContext& ctx);
// The plan for input `x` from the running node's scales / sizes / roi inputs
// (or attribute); errors exactly as the reference kernel reports them.
Result<ResizePlan> ReadKernelPlan(KernelContext& ctx, const ResizeAttrs& attrs, const Tensor& x);

// Source coordinate of output index y; *outside is set for tf_crop_and_resize
// positions outside the input.
double SourceCoordinate(const ResizeAttrs& attrs, const AxisGeometry& g, int64_t y, bool* outside);
// The input index nearest mode picks for source coordinate x (clamped).
int64_t NearestIndex(const ResizeAttrs& attrs, const AxisGeometry& g, double x);
// Linear / cubic (antialiased or not) taps of output index y.
Taps TapsFor(const ResizeAttrs& attrs, const AxisGeometry& g, int64_t y);
// Whether the axis is left as it is (the reference skips it: no arithmetic).
bool IsIdentityAxis(const ResizeAttrs& attrs, const AxisGeometry& g);

}  // namespace nee::resize
