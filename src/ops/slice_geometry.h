// Slice resolved against its input: what the reference kernel and the CPU
// provider's fast copy (ep/cpu/copy_fast.cc) both walk, so they agree on
// every starts/ends/axes/steps corner (negative, clamped, reversed).
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op_schema.h"

namespace nee {

struct SliceGeometry {
  std::vector<int64_t> out_dims;
  std::vector<int64_t> strides;  // per output dim, in input elements (negative for reversed axes)
  int64_t base = 0;              // input element of output index 0
};

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;  // axes, steps: empty for the defaults
};

// Reads starts/ends/axes/steps (attributes before opset 10, inputs after) and
// resolves them against x; errors name the node.
Result<SliceGeometry> ResolveSlice(KernelContext& ctx, const Tensor& x);

// Resolves `p` against an input of `dims` (what ResolveSlice does once it has
// read them); the memory planner places a Slice's output with it.
Result<SliceGeometry> ResolveSliceParams(const Node& node, const std::vector<int64_t>& dims, SliceParams p);

}  // namespace nee
