// Operator family: ElementwiseMath. Arithmetic with numpy broadcasting (Add,
// Sub, Mul, Div, Pow, Mod), unary math (Neg, Abs, Sqrt, Exp, Log, ...,
// trigonometric and hyperbolic functions), variadic Min/Max/Mean/Sum, bit
// operations and the IsNaN/IsInf predicates.
//
// Conventions shared by these kernels (see elementwise_impl.h):
// - float16/bfloat16 are computed in float and rounded back per element.
// - Integer arithmetic wraps on overflow like numpy; integer division
//   truncates toward zero like C; a zero integer divisor is an error.
// - Before opset 7 the binary arithmetic ops broadcast only through their
//   `broadcast`/`axis` attributes.
#include <cmath>
#include <limits>

#include "ops/elementwise_impl.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace ew;  // NOLINT: the helpers are this family's vocabulary

constexpr TypeSet kSignedNumericTypes = kFloatTypes | kSignedIntTypes;
constexpr TypeSet kPowBaseTypes = kFloatTypes | Bit(DataType::kInt32) | Bit(DataType::kInt64);

// ---- Add, Sub, Mul, Div ---------------------------------------------------------

Status AddKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, false, true>(ctx, [](auto a, auto b) { return WrapAdd(a, b); });
}
Status SubKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, false, true>(ctx, [](auto a, auto b) { return WrapSub(a, b); });
}
Status MulKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, false, true>(ctx, [](auto a, auto b) { return WrapMul(a, b); });
}

// Integer Div and Mod reject a zero divisor up front, so that the loops never
// divide by zero (which would crash the process).
Status CheckNoIntegerZeroDivisor(const KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (!InSet(kIntTypes, b->dtype()) || a->num_elements() == 0) return Status::Ok();
  return Visit<kIntTypes>(b->dtype(), ctx.node(), [&]<typename T>() -> Status {
    for (T v : b->span<T>())
      if (v == 0) return ctx.InputError(1, "contains a zero divisor for integer " + ctx.node().op_type);
    return Status::Ok();
  });
}

template <typename C>
C DivOp(C a, C b) {
  if constexpr (std::is_signed_v<C> && std::is_integral_v<C>) {
    if (b == -1) return WrapNeg(a);  // INT_MIN / -1 overflows (and traps on x86)
  }
  return static_cast<C>(a / b);  // integers: truncates toward zero
}

Status DivKernel(KernelContext& ctx) {
  NEE_RETURN_IF_ERROR(CheckNoIntegerZeroDivisor(ctx));
  return SameTypeBinary<kNumericTypes, false, true>(ctx, [](auto a, auto b) { return DivOp(a, b); });
}

// ---- Pow ---------------------------------------------------------------------------

// base^e for a non-negative or negative integer exponent, wrapping on overflow.
// A negative exponent gives the truncated real result: 0 unless |base| is 1.
template <typename C>
C IntPow(C base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  C result = 1;
  while (e != 0) {
    if (e & 1) result = WrapMul(result, base);
    base = WrapMul(base, base);
    e >>= 1;
  }
  return result;
}

template <typename C>
C PowOp(C base, double e) {
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(std::pow(static_cast<double>(base), e));
  } else {
    // Integer base: exact integer power for integral exponents, otherwise the
    // real power truncated to the base type (numpy's power(...).astype).
    if (std::trunc(e) == e && std::fabs(e) < 9.0e18) return IntPow(base, static_cast<int64_t>(e));
    return TruncSaturate<C>(std::pow(static_cast<double>(base), e));
  }
}

Status PowKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(BinaryInputs in, PrepareBinary(ctx, false, true));
  if (!InSet(kNumericTypes, in.b->dtype())) return UnsupportedType(ctx.node(), in.b->dtype());
  // The exponent may have any numeric type; reading it as double is exact for
  // every exponent that can matter, and keeps one loop per base type.
  NEE_ASSIGN_OR_RETURN(Tensor exponent, Tensor::Allocate(DataType::kDouble, in.b->dims()));
  for (int64_t i = 0; i < in.b->num_elements(); ++i) exponent.data<double>()[i] = ReadAsDouble(*in.b, i);
  return Visit<kPowBaseTypes>(in.a->dtype(), ctx.node(), [&]<typename T>() -> Status {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, Repr<T>::kType, in.out_dims));
    BinaryLoop<T, double, T>(ctx, *in.a, in.a_dims, exponent, in.b_dims, out,
                             [](auto x, double e) { return PowOp(x, e); });
    return Status::Ok();
  });
}

Status InferPow(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(CheckAllowedType<kPowBaseTypes>(ictx, 0));
  NEE_RETURN_IF_ERROR(CheckAllowedType<kNumericTypes>(ictx, 1));
  if (ictx.opset < 7) return InferSameAsInput0(ictx);
  return InferBroadcast(ictx);
}

// ---- Mod ---------------------------------------------------------------------------

// fmod=1: the remainder of truncated division (sign of a), as C's % and fmod.
// fmod=0: the remainder of floored division (sign of b), as Python and np.mod.
template <typename C>
C ModOp(C a, C b, bool fmod) {
  if constexpr (std::is_floating_point_v<C>) {
    C r = std::fmod(a, b);
    if (fmod || std::isnan(r)) return r;
    if (r == 0) return std::copysign(C(0), b);
    return (r < 0) != (b < 0) ? r + b : r;
  } else if constexpr (std::is_signed_v<C>) {
    if (b == -1) return 0;  // INT_MIN % -1 overflows (and traps on x86)
    C r = static_cast<C>(a % b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
    return r;
  } else {
    return static_cast<C>(a % b);
  }
}

Status ModKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t fmod, ctx.node().GetInt("fmod", 0));
  if (fmod != 0 && fmod != 1)
    return InvalidModel(ctx.node().Describe() + ": attribute fmod must be 0 or 1, got " + std::to_string(fmod));
  NEE_RETURN_IF_ERROR(CheckNoIntegerZeroDivisor(ctx));
  const bool truncated = fmod == 1;
  return SameTypeBinary<kNumericTypes, false, false>(
      ctx, [truncated](auto a, auto b) { return ModOp(a, b, truncated); });
}

// ---- Unary math --------------------------------------------------------------------

Status NegKernel(KernelContext& ctx) {
  return SameTypeUnary<kSignedNumericTypes, false>(ctx, [](auto x) { return WrapNeg(x); });
}

Status AbsKernel(KernelContext& ctx) {
  return SameTypeUnary<kNumericTypes, false>(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) return std::fabs(x);
    else if constexpr (std::is_signed_v<C>) return x < 0 ? WrapNeg(x) : x;  // abs(INT_MIN) wraps, as numpy
    else return x;
  });
}

Status SignKernel(KernelContext& ctx) {
  return SameTypeUnary<kNumericTypes, false>(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<C>((x > 0) - (x < 0));
  });
}

// Unary functions defined only on the float types: computed in float (for
// float, float16, bfloat16) or double.
#define NEE_FLOAT_UNARY_KERNEL(Name, expr)                                            \
  Status Name##Kernel(KernelContext& ctx) {                                         \
    return SameTypeUnary<kFloatTypes, false>(ctx, [](auto x) -> decltype(x) { return expr; }); \
  }
NEE_FLOAT_UNARY_KERNEL(Sqrt, std::sqrt(x))
NEE_FLOAT_UNARY_KERNEL(Exp, std::exp(x))
NEE_FLOAT_UNARY_KERNEL(Log, std::log(x))
NEE_FLOAT_UNARY_KERNEL(Reciprocal, 1 / x)
NEE_FLOAT_UNARY_KERNEL(Floor, std::floor(x))
NEE_FLOAT_UNARY_KERNEL(Ceil, std::ceil(x))
// nearbyint in the default rounding mode rounds halves to even, as ONNX asks.
NEE_FLOAT_UNARY_KERNEL(Round, std::nearbyint(x))
NEE_FLOAT_UNARY_KERNEL(Erf, std::erf(x))
NEE_FLOAT_UNARY_KERNEL(Sin, std::sin(x))
NEE_FLOAT_UNARY_KERNEL(Cos, std::cos(x))
NEE_FLOAT_UNARY_KERNEL(Tan, std::tan(x))
NEE_FLOAT_UNARY_KERNEL(Asin, std::asin(x))
NEE_FLOAT_UNARY_KERNEL(Acos, std::acos(x))
NEE_FLOAT_UNARY_KERNEL(Atan, std::atan(x))
NEE_FLOAT_UNARY_KERNEL(Sinh, std::sinh(x))
NEE_FLOAT_UNARY_KERNEL(Cosh, std::cosh(x))
NEE_FLOAT_UNARY_KERNEL(Asinh, std::asinh(x))
NEE_FLOAT_UNARY_KERNEL(Acosh, std::acosh(x))
NEE_FLOAT_UNARY_KERNEL(Atanh, std::atanh(x))
#undef NEE_FLOAT_UNARY_KERNEL

// ---- Variadic Min, Max, Mean, Sum --------------------------------------------------

// Folds all inputs (broadcast together) with `combine` in the Compute type,
// left to right; kMean then divides by the number of inputs. Float and
// double accumulate in the output itself, float16/bfloat16 in a float buffer.
template <TypeSet kAllowed, bool kMean, typename Combine>
Status VariadicKernel(KernelContext& ctx, const Combine& combine) {
  if (ctx.num_inputs() == 0) return InvalidModel(ctx.node().Describe() + ": needs at least one input");
  std::vector<const Tensor*> inputs;
  std::vector<int64_t> out_dims;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
    if (i == 0) {
      out_dims = t->dims();
    } else {
      if (t->dtype() != inputs[0]->dtype())
        return ctx.InputError(i, std::string("has element type ") + DataTypeName(t->dtype()) +
                                     " but input 0 has " + DataTypeName(inputs[0]->dtype()));
      auto dims = BroadcastDims(out_dims, t->dims());
      if (!dims.ok()) return dims.status().WithContext(ctx.node().Describe() + ": input " + std::to_string(i) + ": ");
      out_dims = std::move(dims).value();
    }
    inputs.push_back(t);
  }
  return Visit<kAllowed>(inputs[0]->dtype(), ctx.node(), [&]<typename T>() -> Status {
    using R = Repr<T>;
    using S = typename R::Storage;
    using C = typename R::Compute;
    constexpr bool kInPlace = std::is_same_v<S, C>;
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, R::kType, out_dims));
    const int64_t total = out.num_elements();
    std::vector<C> scratch(kInPlace ? 0 : static_cast<size_t>(total));
    C* acc = nullptr;
    if constexpr (kInPlace) acc = out.data<C>();
    else acc = scratch.data();
    for (size_t k = 0; k < inputs.size(); ++k) {
      const S* p = inputs[k]->data<S>();
      ForEachBlock<1>(ctx, out_dims, {inputs[k]->dims()},
                      [&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
                        C* a = acc + o;
                        const S* x = p + off[0];
                        if (k == 0) {
                          for (int64_t i = 0; i < n; ++i) a[i] = R::Load(x[i * step[0]]);
                        } else if (step[0]) {
                          for (int64_t i = 0; i < n; ++i) a[i] = combine(a[i], R::Load(x[i]));
                        } else {
                          const C v = R::Load(x[0]);
                          for (int64_t i = 0; i < n; ++i) a[i] = combine(a[i], v);
                        }
                      });
    }
    if (!kMean && kInPlace) return Status::Ok();
    const C count = static_cast<C>(inputs.size());
    S* po = out.data<S>();
    ctx.ParallelFor(total, kMinParallelChunk, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = R::Store(kMean ? static_cast<C>(acc[i] / count) : acc[i]);
    });
    return Status::Ok();
  });
}

// Min and Max propagate NaN, as numpy's minimum/maximum.
template <typename C>
C MinOp(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}
template <typename C>
C MaxOp(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}

Status MinKernel(KernelContext& ctx) {
  return VariadicKernel<kNumericTypes, false>(ctx, [](auto a, auto b) { return MinOp(a, b); });
}
Status MaxKernel(KernelContext& ctx) {
  return VariadicKernel<kNumericTypes, false>(ctx, [](auto a, auto b) { return MaxOp(a, b); });
}
Status SumKernel(KernelContext& ctx) {
  return VariadicKernel<kFloatTypes, false>(ctx, [](auto a, auto b) { return a + b; });
}
Status MeanKernel(KernelContext& ctx) {
  return VariadicKernel<kFloatTypes, true>(ctx, [](auto a, auto b) { return a + b; });
}

// ---- Bit operations ----------------------------------------------------------------

// Shifts by a negative amount or by the bit width or more give what the sign
// extension alone would: 0, or -1 for a right shift of a negative value
// (BitShift-28 semantics; earlier versions left these cases undefined).
template <typename C>
C ShiftOp(C x, C amount, bool left) {
  constexpr int kBits = static_cast<int>(sizeof(C) * 8);
  bool out_of_range;
  if constexpr (std::is_signed_v<C>) out_of_range = amount < 0 || amount >= kBits;
  else out_of_range = amount >= static_cast<C>(kBits);
  if (out_of_range) {
    if constexpr (std::is_signed_v<C>) {
      if (!left && x < 0) return -1;
    }
    return 0;
  }
  const int s = static_cast<int>(amount);
  if (left) return static_cast<C>(WideUnsigned<C>(x) << s);  // bits past the sign bit are dropped
  return static_cast<C>(x >> s);  // arithmetic for signed types (C++20)
}

Status BitShiftKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::string direction, ctx.node().GetString("direction"));
  if (direction != "LEFT" && direction != "RIGHT")
    return InvalidModel(ctx.node().Describe() + ": attribute direction must be \"LEFT\" or \"RIGHT\", got \"" +
                        direction + "\"");
  const bool left = direction == "LEFT";
  return SameTypeBinary<kIntTypes, false, false>(ctx, [left](auto x, auto y) { return ShiftOp(x, y, left); });
}

Status BitwiseAndKernel(KernelContext& ctx) {
  return SameTypeBinary<kIntTypes, false, false>(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a & b); });
}
Status BitwiseOrKernel(KernelContext& ctx) {
  return SameTypeBinary<kIntTypes, false, false>(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a | b); });
}
Status BitwiseXorKernel(KernelContext& ctx) {
  return SameTypeBinary<kIntTypes, false, false>(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a ^ b); });
}
Status BitwiseNotKernel(KernelContext& ctx) {
  return SameTypeUnary<kIntTypes, false>(ctx, [](auto x) { return static_cast<decltype(x)>(~x); });
}

// ---- IsNaN, IsInf --------------------------------------------------------------------

constexpr TypeSet kIsNaNTypes = kFloatTypes | kFloat8Types;

// A float predicate producing bool; float8 inputs go through ReadAsDouble.
template <typename Pred>
Status FloatPredicateKernel(KernelContext& ctx, const Pred& pred) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (InSet(kFloat8Types, x->dtype())) {
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kBool, x->dims()));
    for (int64_t i = 0; i < x->num_elements(); ++i) out.data<bool>()[i] = pred(ReadAsDouble(*x, i));
    return Status::Ok();
  }
  return SameTypeUnary<kFloatTypes, true>(ctx, pred);
}

Status IsNaNKernel(KernelContext& ctx) {
  return FloatPredicateKernel(ctx, [](auto x) { return std::isnan(x); });
}

Status IsInfKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(int64_t detect_negative, ctx.node().GetInt("detect_negative", 1));
  NEE_ASSIGN_OR_RETURN(int64_t detect_positive, ctx.node().GetInt("detect_positive", 1));
  const bool negative = detect_negative != 0, positive = detect_positive != 0;
  return FloatPredicateKernel(ctx, [negative, positive](auto x) {
    return std::isinf(x) && (x > 0 ? positive : negative);
  });
}

}  // namespace

void RegisterElementwiseMathOps(OpRegistry& r) {
  // Binary arithmetic: numpy broadcasting from 7, legacy attributes before.
  constexpr ShapeFn kArith = InferBroadcastSameType<kNumericTypes, false, true>;
  r.RegisterVersions("", "Add", {1, 6, 7, 13, 14}, InferAndFold<kArith, AddKernel>, AddKernel);
  r.RegisterVersions("", "Sub", {1, 6, 7, 13, 14}, InferAndFold<kArith, SubKernel>, SubKernel);
  r.RegisterVersions("", "Mul", {1, 6, 7, 13, 14}, InferAndFold<kArith, MulKernel>, MulKernel);
  r.RegisterVersions("", "Div", {1, 6, 7, 13, 14}, InferAndFold<kArith, DivKernel>, DivKernel);
  r.RegisterVersions("", "Pow", {1, 7, 12, 13, 15}, InferAndFold<InferPow, PowKernel>, PowKernel);
  r.RegisterVersions("", "Mod", {10, 13, 28},
                     InferAndFold<InferBroadcastSameType<kNumericTypes, false, false>, ModKernel>, ModKernel);

  // Unary math.
  r.RegisterVersions("", "Neg", {1, 6, 13}, InferAndFold<InferUnary<kSignedNumericTypes, false>, NegKernel>, NegKernel);
  r.RegisterVersions("", "Abs", {1, 6, 13}, InferAndFold<InferUnary<kNumericTypes, false>, AbsKernel>, AbsKernel);
  r.RegisterVersions("", "Sign", {9, 13}, InferAndFold<InferUnary<kNumericTypes, false>, SignKernel>, SignKernel);
  constexpr ShapeFn kFloatUnary = InferUnary<kFloatTypes, false>;
  r.RegisterVersions("", "Sqrt", {1, 6, 13}, kFloatUnary, SqrtKernel);
  r.RegisterVersions("", "Exp", {1, 6, 13}, kFloatUnary, ExpKernel);
  r.RegisterVersions("", "Log", {1, 6, 13}, kFloatUnary, LogKernel);
  r.RegisterVersions("", "Reciprocal", {1, 6, 13}, kFloatUnary, ReciprocalKernel);
  r.RegisterVersions("", "Floor", {1, 6, 13}, kFloatUnary, FloorKernel);
  r.RegisterVersions("", "Ceil", {1, 6, 13}, kFloatUnary, CeilKernel);
  r.RegisterVersions("", "Round", {11, 22}, kFloatUnary, RoundKernel);
  r.RegisterVersions("", "Erf", {9, 13}, kFloatUnary, ErfKernel);
  r.RegisterVersions("", "Sin", {7, 22}, kFloatUnary, SinKernel);
  r.RegisterVersions("", "Cos", {7, 22}, kFloatUnary, CosKernel);
  r.RegisterVersions("", "Tan", {7, 22}, kFloatUnary, TanKernel);
  r.RegisterVersions("", "Asin", {7, 22}, kFloatUnary, AsinKernel);
  r.RegisterVersions("", "Acos", {7, 22}, kFloatUnary, AcosKernel);
  r.RegisterVersions("", "Atan", {7, 22}, kFloatUnary, AtanKernel);
  r.RegisterVersions("", "Sinh", {9, 22}, kFloatUnary, SinhKernel);
  r.RegisterVersions("", "Cosh", {9, 22}, kFloatUnary, CoshKernel);
  r.RegisterVersions("", "Asinh", {9, 22}, kFloatUnary, AsinhKernel);
  r.RegisterVersions("", "Acosh", {9, 22}, kFloatUnary, AcoshKernel);
  r.RegisterVersions("", "Atanh", {9, 22}, kFloatUnary, AtanhKernel);

  // Variadic, broadcasting from 8 (same shapes before; broadcasting is a superset).
  r.RegisterVersions("", "Min", {1, 6, 8, 12, 13},
                     InferAndFold<InferBroadcastSameType<kNumericTypes, false, false>, MinKernel>, MinKernel);
  r.RegisterVersions("", "Max", {1, 6, 8, 12, 13},
                     InferAndFold<InferBroadcastSameType<kNumericTypes, false, false>, MaxKernel>, MaxKernel);
  r.RegisterVersions("", "Mean", {1, 6, 8, 13}, InferBroadcastSameType<kFloatTypes, false, false>, MeanKernel);
  r.RegisterVersions("", "Sum", {1, 6, 8, 13}, InferBroadcastSameType<kFloatTypes, false, false>, SumKernel);

  // Bit operations.
  constexpr ShapeFn kIntBinary = InferBroadcastSameType<kIntTypes, false, false>;
  r.RegisterVersions("", "BitShift", {11, 28}, InferAndFold<kIntBinary, BitShiftKernel>, BitShiftKernel);
  r.RegisterVersions("", "BitwiseAnd", {18}, InferAndFold<kIntBinary, BitwiseAndKernel>, BitwiseAndKernel);
  r.RegisterVersions("", "BitwiseOr", {18}, InferAndFold<kIntBinary, BitwiseOrKernel>, BitwiseOrKernel);
  r.RegisterVersions("", "BitwiseXor", {18}, InferAndFold<kIntBinary, BitwiseXorKernel>, BitwiseXorKernel);
  r.RegisterVersions("", "BitwiseNot", {18}, InferAndFold<InferUnary<kIntTypes, false>, BitwiseNotKernel>,
                     BitwiseNotKernel);

  // Float predicates.
  r.RegisterVersions("", "IsNaN", {9, 13, 20}, InferUnary<kIsNaNTypes, true>, IsNaNKernel);
  r.RegisterVersions("", "IsInf", {10, 20}, InferUnary<kIsNaNTypes, true>, IsInfKernel);
}

}  // namespace nee
