// Helpers ONNX Runtime's com.microsoft attention contrib ops share
// (attention_contrib.cc, group_query_attention.cc, which were one file): the
// float-like type check, inputs converted to float and outputs written from
// float, the shape checks and the dim arithmetic of their shape rules, the
// num_heads and scale attributes. Internal to ops/.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee::attention_contrib_util {

constexpr const char* kMs = "com.microsoft";

inline bool IsFloatLike(DataType t) {
  return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

inline Status RequireFloatLike(const KernelContext& ctx, size_t input, const Tensor& t) {
  if (IsFloatLike(t.dtype())) return Status::Ok();
  return NotImplemented(ctx.node().Describe() + ": input " + std::to_string(input) + ": element type " +
                        DataTypeName(t.dtype()) + " is not supported (float, float16, bfloat16)");
}

// Input i (which must have the element type of input 0) converted to float.
inline Result<std::vector<float>> FloatsOf(const KernelContext& ctx, size_t i, DataType expected) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->dtype() != expected)
    return ctx.InputError(i, std::string("has element type ") + DataTypeName(t->dtype()) + " but input 0 has " +
                                 DataTypeName(expected));
  std::vector<float> v(static_cast<size_t>(t->num_elements()));
  nn::ConvertToCompute<float>(*t, v.data());
  return v;
}

inline Status WriteOutput(KernelContext& ctx, size_t i, DataType type, std::vector<int64_t> dims,
                   const std::vector<float>& values) {
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(i, type, std::move(dims)));
  nn::ConvertFromCompute<float>(values.data(), out);
  return Status::Ok();
}

inline Status CheckDims(const KernelContext& ctx, size_t i, const Tensor& t, const std::vector<int64_t>& expected,
                 const char* what) {
  if (t.dims() == expected) return Status::Ok();
  return ctx.InputError(i, std::string("(") + what + ") must have shape " + DimsToString(expected) + ", got " +
                               DimsToString(t.dims()));
}

inline Result<float> ScaleOf(const KernelContext& ctx, int64_t head_size) {
  NEE_ASSIGN_OR_RETURN(float scale, ctx.node().GetFloat("scale", 0.0f));
  if (scale != 0.0f) return scale;
  return head_size > 0 ? 1.0f / std::sqrt(static_cast<float>(head_size)) : 1.0f;
}

inline Result<int64_t> NumHeads(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t heads, node.GetInt("num_heads"));
  if (heads <= 0) return InvalidArgument(node.Describe() + ": num_heads must be positive, got " + std::to_string(heads));
  return heads;
}

inline Dim DimOf(const TypeInfo* t, size_t axis) {
  if (t == nullptr || !t->shape || axis >= t->shape->size()) return Dim::Unknown();
  return (*t->shape)[axis];
}

inline Dim Times(const Dim& d, int64_t factor) { return d.known() ? Dim::Known(d.value * factor) : Dim::Unknown(); }
inline Dim Plus(const Dim& a, const Dim& b) { return a.known() && b.known() ? Dim::Known(a.value + b.value) : Dim::Unknown(); }
inline Dim DivBy(const Dim& d, int64_t by) {
  return d.known() && by > 0 && d.value % by == 0 ? Dim::Known(d.value / by) : Dim::Unknown();
}

inline size_t RankOf(const InferenceContext& ctx, size_t i) {
  if (!ctx.has_input(i) || !ctx.input_type(i).shape) return 0;
  return ctx.input_type(i).shape->size();
}

}  // namespace nee::attention_contrib_util
