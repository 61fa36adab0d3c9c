// Shape-rule helpers shared by the shape and data-movement families that
// were one file (shape_ops.cc, concat_split.cc, pad_tile.cc, rearrange.cc):
// kept in one place so that the families agree on them. Internal to ops/.
#pragma once
#include <cstdint>
#include <optional>

#include "ops/op_registry.h"

namespace nee::shape_ops_util {

// d * m, or unknown when d is unknown or the product would overflow.
inline Dim MulDim(const Dim& d, int64_t m) {
  if (!d.known() || m < 0 || (m != 0 && d.value > INT64_MAX / m)) return Dim::Unknown();
  return Dim::Known(d.value * m);
}

// The input's shape (nullopt when unknown), for rules.
inline std::optional<Shape> InputShape(const InferenceContext& ictx, size_t i) {
  if (!ictx.has_input(i)) return std::nullopt;
  const TypeInfo& t = ictx.input_type(i);
  return t.is_tensor() ? t.shape : std::nullopt;
}

}  // namespace nee::shape_ops_util
