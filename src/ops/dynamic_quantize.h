// DynamicQuantizeLinear's scale and zero point from the input's range, and
// its two scalar outputs: shared by the reference kernel (ops/quantize.cc)
// and the fast one (ep/cpu/quant_fast.cc), so both compute them the same way.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/op_schema.h"

namespace nee {

struct DynamicQuantParams {
  float scale, zero_point;  // the zero point a whole number in [0, 255]
};

// For a range [min_x, max_x] that includes 0 (so 0 is exactly representable).
// An infinite input makes the scale infinite and -inf/inf NaN; NaN has no
// integer value (casting it is undefined), so such a zero point is 0, and a
// NaN element quantizes to the zero point, like 0.
inline DynamicQuantParams DynamicQuantizeParams(float min_x, float max_x) {
  const float qmin = 0, qmax = 255;
  const float scale = (max_x == min_x ? 1.0f : (max_x - min_x)) / (qmax - qmin);
  float initial_zero_point = qmin - min_x / scale;
  if (std::isnan(initial_zero_point)) initial_zero_point = qmin;
  return {scale, std::nearbyint(std::clamp(initial_zero_point, qmin, qmax))};
}

// Outputs 1 (y_scale) and 2 (y_zero_point), where the node has them.
inline Status WriteDynamicQuantizeParams(KernelContext& ctx, const DynamicQuantParams& p) {
  if (ctx.num_outputs() > 1) {
    NEE_ASSIGN_OR_RETURN(Tensor s, ctx.AllocateOutput(1, DataType::kFloat, {}));
    s.data<float>()[0] = p.scale;
  }
  if (ctx.num_outputs() > 2) {
    NEE_ASSIGN_OR_RETURN(Tensor z, ctx.AllocateOutput(2, DataType::kUint8, {}));
    z.data<uint8_t>()[0] = static_cast<uint8_t>(p.zero_point);
  }
  return Status::Ok();
}

}  // namespace nee
