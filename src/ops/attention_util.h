// Helpers the ai.onnx attention-era reference kernels share (attention.cc,
// rotary_embedding.cc, linear_attention.cc, flex_attention.cc, which were one
// file): the rounding that makes float16/bfloat16 results track the ONNX
// reference, the float input check, optional inputs, the dim arithmetic of
// their shape rules and the 3-D / 4-D head layout. Kept in one place so that
// the families agree on them. Internal to ops/.
#pragma once
#include <string>

#include "ir/float_formats.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee::attention_util {

// Rounds a compute value to what storing it in `type` and reading it back gives.
template <typename A>
A RoundTo(DataType type, A x) {
  switch (type) {
    case DataType::kFloat16: return static_cast<A>(HalfToFloat(FloatToHalf(static_cast<float>(x))));
    case DataType::kBFloat16: return static_cast<A>(BFloat16ToFloat(FloatToBFloat16(static_cast<float>(x))));
    case DataType::kFloat: return static_cast<A>(static_cast<float>(x));
    default: return x;
  }
}

// One step of a running sum as numpy reduces `type`: bfloat16 (ml_dtypes)
// rounds after every addition; the other types accumulate at full width.
template <typename A>
A SumStep(DataType type, A sum, A x) {
  return type == DataType::kBFloat16 ? RoundTo<A>(type, sum + x) : sum + x;
}

inline bool IsAttentionFloat(DataType t) {
  return t == DataType::kFloat || t == DataType::kDouble || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

inline Status CheckFloatInput(const KernelContext& ctx, size_t i, const Tensor& t) {
  if (!IsAttentionFloat(t.dtype()))
    return NotImplemented(ctx.node().Describe() + ": input " + std::to_string(i) + ": " +
                          nn::TypeError(ctx.node().op_type.c_str(), t.dtype()));
  return Status::Ok();
}

// An optional input: nullptr when omitted (or an empty optional).
inline Result<const Tensor*> OptionalInput(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i) || ctx.input(i)->is_none()) return static_cast<const Tensor*>(nullptr);
  return ctx.InputTensor(i);
}

// a / n when a is known and divisible; an error when a is known and is not.
inline Result<Dim> DivideDim(const InferenceContext& ctx, size_t input, const Dim& a, int64_t n, const char* what) {
  if (!a.known()) return Dim::Unknown();
  if (n <= 0 || a.value % n != 0)
    return ctx.InputError(input, std::string(what) + " " + std::to_string(a.value) + " is not divisible by " +
                                     std::to_string(n));
  return Dim::Known(a.value / n);
}

inline Dim MultiplyDim(const Dim& a, int64_t n) { return a.known() ? Dim::Known(a.value * n) : Dim::Unknown(); }

// Where row (b, h, s) of a [batch, heads, seq, width] tensor starts, for the
// 4-D layout or the 3-D (batch, seq, heads * width) one.
struct HeadLayout {
  int64_t batch_stride, head_stride, seq_stride;
  static HeadLayout Of(bool three_d, int64_t heads, int64_t seq, int64_t width) {
    if (three_d) return {seq * heads * width, width, heads * width};
    return {heads * seq * width, seq * width, width};
  }
  int64_t Row(int64_t b, int64_t h, int64_t s) const { return b * batch_stride + h * head_stride + s * seq_stride; }
};

}  // namespace nee::attention_util
