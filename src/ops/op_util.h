// Helpers shared by op families: axis handling, broadcasting, common shape
// rules and type dispatch. Kept small; op-specific logic stays in its family.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/op_schema.h"

namespace nee {

// Maps a possibly negative axis into [0, rank); error names the node.
// Rank 0 takes axis 0, for ops that treat a scalar as one element along it
// (CumSum, TopK, Softmax); an op that indexes a dimension by the axis uses
// NormalizeDimAxis.
Result<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const Node& node, const char* what = "axis");
// The same for an axis naming one of the input's dimensions: a scalar has
// none, so rank 0 is an error (the axis must be in [-rank, rank)).
Result<int64_t> NormalizeDimAxis(int64_t axis, int64_t rank, const Node& node, const char* what = "axis");

// Numpy-style multidirectional broadcasting of concrete dims.
Result<std::vector<int64_t>> BroadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// The same on symbolic shapes (unknown dims stay unknown unless decided by the other side).
Result<Shape> BroadcastShapes(const Shape& a, const Shape& b);

// Walks an output of shape `out_dims` and, for each run of `count`
// consecutive output elements, reports the matching offsets into each input
// (whose dims broadcast to out_dims) and whether each input advances (1) or
// stays (0) along that run. fn(out_offset, in_offsets, in_steps, count).
using BroadcastBlockFn = std::function<void(int64_t, const int64_t*, const int64_t*, int64_t)>;
void ForEachBroadcastBlock(const std::vector<int64_t>& out_dims,
                           const std::vector<std::vector<int64_t>>& in_dims,
                           const BroadcastBlockFn& fn);

// Row-major strides (in elements).
std::vector<int64_t> StridesOf(const std::vector<int64_t>& dims);
int64_t ProductOf(const std::vector<int64_t>& dims, size_t begin = 0, size_t end = SIZE_MAX);

// ---- Common shape rules ----------------------------------------------------
// Output 0 has input 0's type and shape.
Status InferSameAsInput0(InferenceContext& ctx);
// All inputs broadcast; output 0 has input 0's element type.
Status InferBroadcast(InferenceContext& ctx);
// All inputs broadcast; output 0 is bool (comparisons, logic).
Status InferBroadcastBool(InferenceContext& ctx);
// Input i must be a tensor; returns it (or an error naming the input).
Result<const TypeInfo*> InputTensorType(const InferenceContext& ctx, size_t i);

// ---- Kernel inputs -----------------------------------------------------------
// Optional input i as a tensor; nullptr when the model omits it.
Result<const Tensor*> OptionalInputTensor(const KernelContext& ctx, size_t i);

// ---- Element access across types -------------------------------------------
// Reads element i of a numeric tensor of any real type as double (float16,
// bfloat16, float8 and packed types included); writes a double into element i
// with the conversion rules of Cast (ir/convert.h).
double ReadAsDouble(const Tensor& t, int64_t i);
void WriteFromDouble(Tensor& t, int64_t i, double v);

}  // namespace nee

// Type dispatch: runs `body` with `T` bound to the C++ type of `dtype`.
// Unsupported types fall through to `otherwise`.
#define NEE_CASE_TYPE(E, CT, ...) \
  case ::nee::DataType::E: {      \
    using T = CT;                 \
    __VA_ARGS__;                  \
    break;                        \
  }
#define NEE_DISPATCH_FLOAT(dtype, otherwise, ...)          \
  switch (dtype) {                                         \
    NEE_CASE_TYPE(kFloat, float, __VA_ARGS__)              \
    NEE_CASE_TYPE(kDouble, double, __VA_ARGS__)            \
    default: otherwise;                                    \
  }
#define NEE_DISPATCH_NUMERIC(dtype, otherwise, ...)        \
  switch (dtype) {                                         \
    NEE_CASE_TYPE(kFloat, float, __VA_ARGS__)              \
    NEE_CASE_TYPE(kDouble, double, __VA_ARGS__)            \
    NEE_CASE_TYPE(kInt8, int8_t, __VA_ARGS__)              \
    NEE_CASE_TYPE(kInt16, int16_t, __VA_ARGS__)            \
    NEE_CASE_TYPE(kInt32, int32_t, __VA_ARGS__)            \
    NEE_CASE_TYPE(kInt64, int64_t, __VA_ARGS__)            \
    NEE_CASE_TYPE(kUint8, uint8_t, __VA_ARGS__)            \
    NEE_CASE_TYPE(kUint16, uint16_t, __VA_ARGS__)          \
    NEE_CASE_TYPE(kUint32, uint32_t, __VA_ARGS__)          \
    NEE_CASE_TYPE(kUint64, uint64_t, __VA_ARGS__)          \
    default: otherwise;                                    \
  }
// Every fixed-size type copied bytewise (for data movement ops): dispatch on size.
