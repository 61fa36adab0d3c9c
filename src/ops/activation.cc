// Operator family: Activation. Pointwise activation functions (Relu and its
// variants, sigmoids, Tanh, Elu/Selu/Celu, Softplus/Softsign, Gelu, Mish,
// Swish, the gated SwiGLU), PRelu with a broadcast slope, Clip and Shrink; and
// ONNX Runtime's com.microsoft Gelu, BiasGelu, FastGelu and QuickGelu, which its
// transformer optimizer writes into BERT / GPT-2 / ViT models.
//
// Float functions run in float for float, float16 and bfloat16 and in double
// for double (see elementwise_impl.h); attributes are floats in the schema
// and are converted to the compute type once.
#include <cmath>
#include <limits>

#include "ops/elementwise_impl.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace ew;  // NOLINT: the helpers are this family's vocabulary

constexpr TypeSet kReluTypes = kFloatTypes | kSignedIntTypes;
constexpr TypeSet kPReluTypes = kFloatTypes | Bit(DataType::kInt32) | Bit(DataType::kInt64) |
                                Bit(DataType::kUint32) | Bit(DataType::kUint64);

// Numerically stable logistic function: never evaluates exp of a large positive number.
template <typename C>
C Sigmoid(C x) {
  if (x >= 0) return C(1) / (C(1) + std::exp(-x));
  const C e = std::exp(x);
  return e / (C(1) + e);
}

// log(1 + exp(x)) without overflow for large x.
template <typename C>
C Softplus(C x) {
  if (x > 0) return x + std::log1p(std::exp(-x));
  return std::log1p(std::exp(x));
}

// Runs a float-only activation, reading float attributes first.
template <typename Op>
Status FloatActivation(KernelContext& ctx, const Op& op) {
  return SameTypeUnary<kFloatTypes, false>(ctx, op);
}

// ---- Relu family ---------------------------------------------------------------

Status ReluKernel(KernelContext& ctx) {
  // `x < 0 ? 0 : x` keeps NaN, as numpy's maximum(x, 0).
  return SameTypeUnary<kReluTypes, false>(ctx, [](auto x) { return x < 0 ? decltype(x)(0) : x; });
}

Status LeakyReluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 0.01f));
  return FloatActivation(ctx, [alpha](auto x) { return x < 0 ? decltype(x)(alpha) * x : x; });
}

Status ThresholdedReluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.0f));
  return FloatActivation(ctx, [alpha](auto x) { return x > decltype(x)(alpha) ? x : decltype(x)(0); });
}

// PRelu before opset 7 knew no numpy broadcasting: its slope is shared when of size 1 and otherwise,
// as Caffe2 defined the op and PyTorch exports nn.PReLU(num_parameters=C), one value per channel (X's
// axis 1). Such a 1-D slope of X's channel count is read as [C, 1, ..., 1]; from opset 7 numpy
// broadcasting would align it with X's last axis instead. Other slopes broadcast as from opset 7.
Result<BinaryInputs> PreparePRelu(const KernelContext& ctx) {
  if (ctx.opset() >= 7) return PrepareBinary(ctx, true, false);
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* slope, ctx.InputTensor(1));
  if (x->rank() < 2 || slope->rank() != 1 || slope->dim(0) != x->dim(1) || slope->dim(0) == 1)
    return PrepareBinary(ctx, true, false);
  if (x->dtype() != slope->dtype())
    return ctx.InputError(1, std::string("has element type ") + DataTypeName(slope->dtype()) + " but input 0 has " +
                                 DataTypeName(x->dtype()));
  BinaryInputs in{x, slope, x->dims(), std::vector<int64_t>(x->dims().size(), 1), x->dims()};
  in.b_dims[1] = x->dim(1);
  return in;
}

// PRelu: slope broadcasts to X's shape (unidirectionally); the output has X's shape.
Status PReluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BinaryInputs in, PreparePRelu(ctx));
  if (in.out_dims != in.a_dims)
    return ctx.InputError(1, "(slope) of shape " + DimsToString(in.b_dims) +
                                 " does not broadcast to the input's shape " + DimsToString(in.a_dims));
  return Visit<kPReluTypes>(in.a->dtype(), ctx.node(), [&]<typename T>() -> Status {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, Repr<T>::kType, in.out_dims));
    BinaryLoop<T, T, T>(ctx, *in.a, in.a_dims, *in.b, in.b_dims, out, [](auto x, auto slope) {
      if constexpr (std::is_unsigned_v<decltype(x)>) return x;
      else return x < 0 ? WrapMul(slope, x) : x;
    });
    return Status::Ok();
  });
}

Status InferPRelu(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(CheckAllowedType<kPReluTypes>(ictx, 1));
  NEE_RETURN_IF_ERROR(CheckSameTypes(ictx, 0, 2));
  return InferUnary<kPReluTypes, false>(ictx);
}

// ---- Sigmoids and Tanh -----------------------------------------------------------

Status SigmoidKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) { return Sigmoid(x); });
}

// max(0, min(1, alpha * x + beta)), written so that NaN stays NaN.
template <typename C>
C HardSigmoid(C x, C alpha, C beta) {
  const C v = alpha * x + beta;
  return v < 0 ? C(0) : (v > 1 ? C(1) : v);
}

Status HardSigmoidKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 0.2f));
  NEE_ASSIGN_OR_RETURN(float beta, ctx.node().GetFloat("beta", 0.5f));
  return FloatActivation(ctx, [alpha, beta](auto x) {
    using C = decltype(x);
    return HardSigmoid(x, C(alpha), C(beta));
  });
}

Status HardSwishKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) {
    using C = decltype(x);
    return x * HardSigmoid(x, C(1) / C(6), C(0.5));
  });
}

Status TanhKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) { return std::tanh(x); });
}

// ---- Exponential linear units ------------------------------------------------------

Status EluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.0f));
  return FloatActivation(ctx, [alpha](auto x) { return x < 0 ? decltype(x)(alpha) * std::expm1(x) : x; });
}

Status SeluKernel(KernelContext& ctx) {
  // Defaults are the float32 constants of the ONNX schema: Selu-1 declares
  // them to 5 digits (1.6732, 1.0507), Selu-6 to float precision.
  const bool v6 = ctx.opset() >= 6;
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", v6 ? 1.67326319217681884765625f : 1.6732f));
  NEE_ASSIGN_OR_RETURN(float gamma, ctx.node().GetFloat("gamma", v6 ? 1.05070102214813232421875f : 1.0507f));
  return FloatActivation(ctx, [alpha, gamma](auto x) {
    using C = decltype(x);
    return x <= 0 ? C(gamma) * (C(alpha) * std::exp(x) - C(alpha)) : C(gamma) * x;
  });
}

Status CeluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.0f));
  if (alpha == 0) return InvalidModel(ctx.node().Describe() + ": attribute alpha must not be 0");
  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) for alpha > 0, term by term otherwise.
  return FloatActivation(ctx, [alpha](auto x) {
    using C = decltype(x);
    if (std::isnan(x)) return x;
    const C a = C(alpha);
    const C negative_part = a * std::expm1(x / a);
    return (x > 0 ? x : C(0)) + (negative_part < 0 ? negative_part : C(0));
  });
}

// ---- Soft functions, Gelu, Mish, Swish ---------------------------------------------

Status SoftplusKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) { return Softplus(x); });
}

Status SoftsignKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
}

Status GeluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::string approximate, ctx.node().GetString("approximate", "none"));
  if (approximate == "none") {
    return FloatActivation(ctx, [](auto x) {
      using C = decltype(x);
      return C(0.5) * x * (C(1) + std::erf(x * C(M_SQRT1_2)));
    });
  }
  if (approximate == "tanh") {
    return FloatActivation(ctx, [](auto x) {
      using C = decltype(x);
      const C sqrt_2_over_pi = C(0.79788456080286535588);  // sqrt(2 / pi)
      return C(0.5) * x * (C(1) + std::tanh(sqrt_2_over_pi * (x + C(0.044715) * x * x * x)));
    });
  }
  return InvalidModel(ctx.node().Describe() + ": attribute approximate must be \"none\" or \"tanh\", got \"" +
                      approximate + "\"");
}

Status MishKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) { return x * std::tanh(Softplus(x)); });
}

Status SwishKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.0f));
  return FloatActivation(ctx, [alpha](auto x) { return x * Sigmoid(decltype(x)(alpha) * x); });
}

// SwiGLU (28): Swish_alpha(A) * B for A and B of one shape (no broadcasting).
Status SwiGLUKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.0f));
  NEE_ASSIGN_OR_RETURN(BinaryInputs in, PrepareBinary(ctx, true, false));
  if (in.a_dims != in.b_dims)
    return ctx.InputError(1, "(B) has shape " + DimsToString(in.b_dims) + " but the gate A has " +
                                 DimsToString(in.a_dims) + "; SwiGLU does not broadcast");
  return Visit<kFloatTypes>(in.a->dtype(), ctx.node(), [&]<typename T>() -> Status {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, Repr<T>::kType, in.out_dims));
    BinaryLoop<T, T, T>(ctx, *in.a, in.a_dims, *in.b, in.b_dims, out, [alpha](auto a, auto b) {
      return a * Sigmoid(decltype(a)(alpha) * a) * b;
    });
    return Status::Ok();
  });
}

Status InferSwiGLU(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(CheckAllowedType<kFloatTypes>(ictx, 1));
  NEE_RETURN_IF_ERROR(CheckSameTypes(ictx, 0, 2));
  NEE_RETURN_IF_ERROR((InferUnary<kFloatTypes, false>(ictx)));
  // The output has the common shape; take B's where A's is unknown.
  if (ictx.num_outputs() > 0 && !ictx.output_types[0].shape && ictx.input_type(1).shape)
    ictx.output_types[0].shape = ictx.input_type(1).shape;
  return Status::Ok();
}

// ---- Clip ----------------------------------------------------------------------------

// Reads Clip's optional bound input i (opset 11+): absent, or one element of X's type.
Result<const Tensor*> ClipBound(const KernelContext& ctx, size_t i, DataType x_type) {
  if (!ctx.has_input(i)) return static_cast<const Tensor*>(nullptr);
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->dtype() != x_type)
    return ctx.InputError(i, std::string("has element type ") + DataTypeName(t->dtype()) +
                                 " but the input has " + DataTypeName(x_type));
  if (t->num_elements() != 1)
    return ctx.InputError(i, "must be a scalar, got shape " + DimsToString(t->dims()));
  return t;
}

// min(max(x, lo), hi): when lo > hi every element becomes hi, as the spec
// says; NaN inputs stay NaN.
Status ClipKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (ctx.opset() < 11) {
    // Bounds are float attributes. Clip-6 declares defaults of -FLT_MAX and
    // FLT_MAX (so an infinite input becomes finite, as in ONNX Runtime and
    // onnx.reference); Clip-1 declares none: an absent bound is no bound.
    const Node& node = ctx.node();
    const bool v6 = ctx.opset() >= 6;
    const bool has_lo = v6 || node.HasAttr("min"), has_hi = v6 || node.HasAttr("max");
    NEE_ASSIGN_OR_RETURN(float lo, node.GetFloat("min", std::numeric_limits<float>::lowest()));
    NEE_ASSIGN_OR_RETURN(float hi, node.GetFloat("max", std::numeric_limits<float>::max()));
    return FloatActivation(ctx, [=](auto v) {
      using C = decltype(v);
      if (has_lo && v < C(lo)) v = C(lo);
      if (has_hi && v > C(hi)) v = C(hi);
      return v;
    });
  }
  NEE_ASSIGN_OR_RETURN(const Tensor* lo_tensor, ClipBound(ctx, 1, x->dtype()));
  NEE_ASSIGN_OR_RETURN(const Tensor* hi_tensor, ClipBound(ctx, 2, x->dtype()));
  return Visit<kNumericTypes>(x->dtype(), ctx.node(), [&]<typename T>() -> Status {
    using R = Repr<T>;
    using C = typename R::Compute;
    const bool has_lo = lo_tensor != nullptr, has_hi = hi_tensor != nullptr;
    const C lo = has_lo ? C(R::Load(lo_tensor->data<typename R::Storage>()[0])) : C(0);
    const C hi = has_hi ? C(R::Load(hi_tensor->data<typename R::Storage>()[0])) : C(0);
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, R::kType, x->dims()));
    UnaryLoop<T, T>(ctx, *x, out, [=](C v) {
      if (has_lo && v < lo) v = lo;
      if (has_hi && v > hi) v = hi;
      return v;
    });
    return Status::Ok();
  });
}

Status InferClip(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(CheckSameTypes(ictx, 0, 3));
  return InferUnary<kNumericTypes, false>(ictx);
}

// ---- Shrink ----------------------------------------------------------------------------

// x < -lambd: x + bias; x > lambd: x - bias; otherwise 0. Integer inputs are
// computed in double and truncated back, like the ONNX reference
// (np.where(...).astype(x.dtype)).
Status ShrinkKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float bias, ctx.node().GetFloat("bias", 0.0f));
  NEE_ASSIGN_OR_RETURN(float lambd, ctx.node().GetFloat("lambd", 0.5f));
  return SameTypeUnary<kNumericTypes, false>(ctx, [bias, lambd](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (x < -C(lambd)) return x + C(bias);
      if (x > C(lambd)) return x - C(bias);
      return C(0);
    } else {
      const double v = static_cast<double>(x);
      if (v < -static_cast<double>(lambd)) return TruncSaturate<C>(v + bias);
      if (v > static_cast<double>(lambd)) return TruncSaturate<C>(v - bias);
      return C(0);
    }
  });
}

// ---- com.microsoft fused Gelu forms ------------------------------------------------
//
// ONNX Runtime's transformer optimizer (onnxruntime.transformers.optimizer) rewrites Gelu
// subgraphs into these contrib ops: Gelu (erf form), BiasGelu (erf form of A + bias),
// FastGelu (tanh form of X, optionally + bias), QuickGelu (x * sigmoid(alpha * x)). The
// bias is 1-D over the input's last axis.

template <typename C>
C GeluErf(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(M_SQRT1_2)));
}

template <typename C>
C GeluTanh(C x) {
  const C sqrt_2_over_pi = C(0.79788456080286535588);
  return C(0.5) * x * (C(1) + std::tanh(sqrt_2_over_pi * (x + C(0.044715) * x * x * x)));
}

// f(x + bias) when input 1 (the bias) is present, f(x) otherwise.
template <typename F>
Status WithOptionalBias(KernelContext& ctx, const F& f) {
  if (!ctx.has_input(1)) return FloatActivation(ctx, f);
  NEE_ASSIGN_OR_RETURN(BinaryInputs in, PrepareBinary(ctx, true, false));
  if (in.b_dims.size() != 1 || in.a_dims.empty() || in.b_dims[0] != in.a_dims.back())
    return ctx.InputError(1, "(bias) must be 1-D with the input's last dimension " +
                                 (in.a_dims.empty() ? std::string("(the input is a scalar)")
                                                    : std::to_string(in.a_dims.back())) +
                                 ", got " + DimsToString(in.b_dims));
  return Visit<kFloatTypes>(in.a->dtype(), ctx.node(), [&]<typename T>() -> Status {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, Repr<T>::kType, in.out_dims));
    BinaryLoop<T, T, T>(ctx, *in.a, in.a_dims, *in.b, in.b_dims, out, [&f](auto x, auto b) { return f(x + b); });
    return Status::Ok();
  });
}

Status InferWithOptionalBias(InferenceContext& ictx) {
  for (size_t i = 0; i < ictx.num_inputs(); ++i) NEE_RETURN_IF_ERROR(CheckAllowedType<kFloatTypes>(ictx, i));
  NEE_RETURN_IF_ERROR(CheckSameTypes(ictx, 0, ictx.num_inputs()));
  return InferUnary<kFloatTypes, false>(ictx);
}

Status MsGeluKernel(KernelContext& ctx) {
  return FloatActivation(ctx, [](auto x) { return GeluErf(x); });
}

Status BiasGeluKernel(KernelContext& ctx) {
  return WithOptionalBias(ctx, [](auto x) { return GeluErf(x); });
}

Status FastGeluKernel(KernelContext& ctx) {
  return WithOptionalBias(ctx, [](auto x) { return GeluTanh(x); });
}

Status QuickGeluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.702f));
  return FloatActivation(ctx, [alpha](auto x) { return x * Sigmoid(decltype(x)(alpha) * x); });
}

}  // namespace

void RegisterActivationOps(OpRegistry& r) {
  constexpr ShapeFn kFloatUnary = InferUnary<kFloatTypes, false>;
  r.RegisterVersions("", "Relu", {1, 6, 13, 14}, InferAndFold<InferUnary<kReluTypes, false>, ReluKernel>, ReluKernel);
  r.RegisterVersions("", "LeakyRelu", {1, 6, 16}, kFloatUnary, LeakyReluKernel);
  r.RegisterVersions("", "PRelu", {1, 6, 7, 9, 16}, InferPRelu, PReluKernel);
  r.RegisterVersions("", "ThresholdedRelu", {10, 22}, kFloatUnary, ThresholdedReluKernel);
  r.RegisterVersions("", "Sigmoid", {1, 6, 13}, kFloatUnary, SigmoidKernel);
  r.RegisterVersions("", "HardSigmoid", {1, 6, 22}, kFloatUnary, HardSigmoidKernel);
  r.RegisterVersions("", "HardSwish", {14, 22}, kFloatUnary, HardSwishKernel);
  r.RegisterVersions("", "Tanh", {1, 6, 13}, kFloatUnary, TanhKernel);
  r.RegisterVersions("", "Elu", {1, 6, 22}, kFloatUnary, EluKernel);
  r.RegisterVersions("", "Selu", {1, 6, 22}, kFloatUnary, SeluKernel);
  r.RegisterVersions("", "Celu", {12, 28}, kFloatUnary, CeluKernel);
  r.RegisterVersions("", "Softplus", {1, 22}, kFloatUnary, SoftplusKernel);
  r.RegisterVersions("", "Softsign", {1, 22}, kFloatUnary, SoftsignKernel);
  r.RegisterVersions("", "Gelu", {20}, kFloatUnary, GeluKernel);
  r.RegisterVersions("", "Mish", {18, 22}, kFloatUnary, MishKernel);
  r.RegisterVersions("", "Swish", {24}, kFloatUnary, SwishKernel);
  r.RegisterVersions("", "SwiGLU", {28}, InferSwiGLU, SwiGLUKernel);
  r.RegisterVersions("", "Clip", {1, 6, 11, 12, 13}, InferAndFold<InferClip, ClipKernel>, ClipKernel);
  r.RegisterVersions("", "Shrink", {9}, InferUnary<kNumericTypes, false>, ShrinkKernel);
  r.RegisterVersions("com.microsoft", "Gelu", {1}, kFloatUnary, MsGeluKernel);
  r.RegisterVersions("com.microsoft", "BiasGelu", {1}, InferWithOptionalBias, BiasGeluKernel);
  r.RegisterVersions("com.microsoft", "FastGelu", {1}, InferWithOptionalBias, FastGeluKernel);
  r.RegisterVersions("com.microsoft", "QuickGelu", {1}, kFloatUnary, QuickGeluKernel);
}

}  // namespace nee
