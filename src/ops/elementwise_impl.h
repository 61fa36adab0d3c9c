// Private helpers for the elementwise families (elementwise_math.cc,
// activation.cc, logic.cc): element representations, compile-time type sets
// with dispatch, broadcast loops split into tight per-block inner loops, and
// the shared shape rules. Not meant for other families.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/float_formats.h"
#include "ops/op_util.h"

namespace nee::ew {

// ---- Element representations -------------------------------------------------

// Tags for the 16-bit floats: stored as uint16_t bits, computed in float.
struct Float16 {};
struct BFloat16 {};

// How an element type is stored in a tensor and which type the math runs in.
template <typename T>
struct Repr {
  using Storage = T;
  using Compute = T;
  static constexpr DataType kType = DataTypeOf<T>::value;
  static const T& Load(const T& v) { return v; }
  static T Store(const T& v) { return v; }
};
template <>
struct Repr<Float16> {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr DataType kType = DataType::kFloat16;
  static float Load(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Store(float v) { return FloatToHalf(v); }
};
template <>
struct Repr<BFloat16> {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr DataType kType = DataType::kBFloat16;
  static float Load(uint16_t v) { return BFloat16ToFloat(v); }
  static uint16_t Store(float v) { return FloatToBFloat16(v); }
};

// ---- Type sets and dispatch ----------------------------------------------------

using TypeSet = uint64_t;
constexpr TypeSet Bit(DataType t) { return TypeSet{1} << static_cast<int>(t); }
constexpr TypeSet kFloatTypes =
    Bit(DataType::kFloat) | Bit(DataType::kDouble) | Bit(DataType::kFloat16) | Bit(DataType::kBFloat16);
constexpr TypeSet kSignedIntTypes =
    Bit(DataType::kInt8) | Bit(DataType::kInt16) | Bit(DataType::kInt32) | Bit(DataType::kInt64);
constexpr TypeSet kUnsignedIntTypes =
    Bit(DataType::kUint8) | Bit(DataType::kUint16) | Bit(DataType::kUint32) | Bit(DataType::kUint64);
constexpr TypeSet kIntTypes = kSignedIntTypes | kUnsignedIntTypes;
constexpr TypeSet kNumericTypes = kFloatTypes | kIntTypes;
constexpr TypeSet kBoolType = Bit(DataType::kBool);
constexpr TypeSet kStringType = Bit(DataType::kString);
constexpr TypeSet kFloat8Types = Bit(DataType::kFloat8E4M3FN) | Bit(DataType::kFloat8E4M3FNUZ) |
                                 Bit(DataType::kFloat8E5M2) | Bit(DataType::kFloat8E5M2FNUZ);

inline bool InSet(TypeSet set, DataType t) {
  int v = static_cast<int>(t);
  return v >= 0 && v < 64 && ((set >> v) & 1) != 0;
}

inline Status UnsupportedType(const Node& node, DataType t) {
  return NotImplemented(node.Describe() + ": element type " + DataTypeName(t) + " is not supported");
}

// Calls f.template operator()<T>() with T the element tag of `t` (float,
// double, Float16, BFloat16, the integer types, bool, std::string) when `t` is
// in kAllowed; otherwise an error naming the node (and so the op) and type.
// Only the allowed types are instantiated.
template <TypeSet kAllowed, typename F>
Status Visit(DataType t, const Node& node, F&& f) {
#define NEE_EW_CASE(E, CT)                                    \
  case DataType::E:                                           \
    if constexpr ((kAllowed & Bit(DataType::E)) != 0)         \
      return f.template operator()<CT>();                     \
    break;
  switch (t) {
    NEE_EW_CASE(kFloat, float)
    NEE_EW_CASE(kDouble, double)
    NEE_EW_CASE(kFloat16, Float16)
    NEE_EW_CASE(kBFloat16, BFloat16)
    NEE_EW_CASE(kInt8, int8_t)
    NEE_EW_CASE(kInt16, int16_t)
    NEE_EW_CASE(kInt32, int32_t)
    NEE_EW_CASE(kInt64, int64_t)
    NEE_EW_CASE(kUint8, uint8_t)
    NEE_EW_CASE(kUint16, uint16_t)
    NEE_EW_CASE(kUint32, uint32_t)
    NEE_EW_CASE(kUint64, uint64_t)
    NEE_EW_CASE(kBool, bool)
    NEE_EW_CASE(kString, std::string)
    default: break;
  }
#undef NEE_EW_CASE
  return UnsupportedType(node, t);
}

// ---- Integer arithmetic without undefined behaviour ----------------------------
// Signed overflow wraps (two's complement, as numpy does); small types are
// widened to unsigned int so that promotion never overflows a signed int.

template <typename C>
using WideUnsigned = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;

template <typename C>
C WrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(a) + WideUnsigned<C>(b));
  else return a + b;
}
template <typename C>
C WrapSub(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(a) - WideUnsigned<C>(b));
  else return a - b;
}
template <typename C>
C WrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(a) * WideUnsigned<C>(b));
  else return a * b;
}
template <typename C>
C WrapNeg(C a) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(WideUnsigned<C>(0) - WideUnsigned<C>(a));
  else return -a;
}

// Converts a double to integer type I by truncation, saturating at the
// type's limits (NaN gives 0); a plain cast would be undefined out of range.
template <typename I>
I TruncSaturate(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

// ---- Broadcast loops -------------------------------------------------------------

// Below this many elements a loop is not worth spreading over threads.
constexpr int64_t kMinParallelChunk = 1 << 14;

// Calls block(out_offset, in_offsets, in_steps, count) over the output of
// `out_dims`, where each input (dims broadcastable to out_dims) advances by
// in_steps[k] (0 or 1) along the run. Splits the work over ctx's threads
// along the outermost non-1 output dim; every element is computed the same
// way whatever the split.
template <size_t N, typename Block>
void ForEachBlock(const KernelContext& ctx, const std::vector<int64_t>& out_dims,
                  const std::array<std::vector<int64_t>, N>& in_dims, const Block& block) {
  const int64_t total = ProductOf(out_dims);
  if (total == 0) return;

  // Fast path: every input is either the whole output shape or one element.
  std::array<int64_t, N> steps{};
  bool flat = true;
  for (size_t k = 0; k < N; ++k) {
    int64_t n = ProductOf(in_dims[k]);
    if (n == total) steps[k] = 1;
    else if (n == 1) steps[k] = 0;
    else flat = false;
  }
  if (flat) {
    ctx.ParallelFor(total, kMinParallelChunk, [&](int64_t begin, int64_t end) {
      std::array<int64_t, N> offsets{};
      for (size_t k = 0; k < N; ++k) offsets[k] = steps[k] ? begin : 0;
      block(begin, offsets.data(), steps.data(), end - begin);
    });
    return;
  }

  // General case. Align every input to the output rank and drop the dims
  // where the output is 1 (every input is 1 there too).
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> ins(N);
  const size_t rank = out_dims.size();
  for (size_t d = 0; d < rank; ++d) {
    if (out_dims[d] == 1) continue;
    dims.push_back(out_dims[d]);
    for (size_t k = 0; k < N; ++k) {
      size_t pad = rank - in_dims[k].size();
      ins[k].push_back(d < pad ? 1 : in_dims[k][d - pad]);
    }
  }
  // Split along dims[0]: a slice [begin, end) is itself a broadcast problem
  // whose inputs start at begin * (their elements per index of dims[0]).
  const int64_t out_row = total / dims[0];
  std::array<int64_t, N> in_row{};
  for (size_t k = 0; k < N; ++k) in_row[k] = ins[k][0] == 1 ? 0 : ProductOf(ins[k], 1);
  ctx.ParallelFor(dims[0], std::max<int64_t>(1, kMinParallelChunk / out_row), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> slice_dims = dims;
    slice_dims[0] = end - begin;
    std::vector<std::vector<int64_t>> slice_ins = ins;
    for (size_t k = 0; k < N; ++k)
      if (ins[k][0] != 1) slice_ins[k][0] = end - begin;
    std::array<int64_t, N> offsets{};
    ForEachBroadcastBlock(slice_dims, slice_ins,
                          [&](int64_t out_offset, const int64_t* in_offsets, const int64_t* in_steps, int64_t count) {
                            for (size_t k = 0; k < N; ++k) offsets[k] = in_offsets[k] + begin * in_row[k];
                            block(out_offset + begin * out_row, offsets.data(), in_steps, count);
                          });
  });
}

// out = op(a, b) elementwise with broadcasting. TA, TB, TO are element tags
// (see Repr); op takes and returns their Compute types.
template <typename TA, typename TB, typename TO, typename Op>
void BinaryLoop(const KernelContext& ctx, const Tensor& a, const std::vector<int64_t>& a_dims, const Tensor& b,
                const std::vector<int64_t>& b_dims, Tensor& out, const Op& op) {
  using RA = Repr<TA>;
  using RB = Repr<TB>;
  using RO = Repr<TO>;
  const auto* pa = a.data<typename RA::Storage>();
  const auto* pb = b.data<typename RB::Storage>();
  auto* po = out.data<typename RO::Storage>();
  auto apply = [&op](const typename RA::Storage& x, const typename RB::Storage& y) {
    return RO::Store(op(RA::Load(x), RB::Load(y)));
  };
  ForEachBlock<2>(ctx, out.dims(), {a_dims, b_dims},
                  [&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
                    const auto* xa = pa + off[0];
                    const auto* xb = pb + off[1];
                    auto* y = po + o;
                    if (step[0] && step[1]) {
                      for (int64_t i = 0; i < n; ++i) y[i] = apply(xa[i], xb[i]);
                    } else if (step[0]) {
                      for (int64_t i = 0; i < n; ++i) y[i] = apply(xa[i], xb[0]);
                    } else if (step[1]) {
                      for (int64_t i = 0; i < n; ++i) y[i] = apply(xa[0], xb[i]);
                    } else {
                      const auto v = apply(xa[0], xb[0]);
                      for (int64_t i = 0; i < n; ++i) y[i] = v;
                    }
                  });
}

// out = op(x) elementwise; out has x's shape.
template <typename TI, typename TO, typename Op>
void UnaryLoop(const KernelContext& ctx, const Tensor& x, Tensor& out, const Op& op) {
  using RI = Repr<TI>;
  using RO = Repr<TO>;
  const auto* px = x.data<typename RI::Storage>();
  auto* po = out.data<typename RO::Storage>();
  ctx.ParallelFor(x.num_elements(), kMinParallelChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = RO::Store(op(RI::Load(px[i])));
  });
}

// ---- Kernel scaffolding ------------------------------------------------------------

// Opsets before 7 broadcast only with the attribute broadcast=1: B's dims then
// match a contiguous run of A's dims starting at `axis` (by default the
// trailing ones). Returns B's dims padded with 1s to A's rank.
inline Result<std::vector<int64_t>> LegacyBroadcastDims(const Node& node, const std::vector<int64_t>& a,
                                                        const std::vector<int64_t>& b) {
  NEE_ASSIGN_OR_RETURN(int64_t broadcast, node.GetInt("broadcast", 0));
  if (broadcast == 0) {
    if (a != b)
      return InvalidArgument(node.Describe() + ": input shapes " + DimsToString(a) + " and " + DimsToString(b) +
                             " differ and the broadcast attribute is 0");
    return b;
  }
  const int64_t rank_a = static_cast<int64_t>(a.size());
  const int64_t rank_b = static_cast<int64_t>(b.size());
  NEE_ASSIGN_OR_RETURN(int64_t axis, node.GetInt("axis", rank_a - rank_b));
  if (axis < 0) axis += rank_a;
  if (axis < 0 || axis + rank_b > rank_a)
    return InvalidArgument(node.Describe() + ": cannot broadcast shape " + DimsToString(b) + " onto " +
                           DimsToString(a) + " at axis " + std::to_string(axis));
  std::vector<int64_t> aligned(a.size(), 1);
  for (int64_t i = 0; i < rank_b; ++i) {
    int64_t d = b[static_cast<size_t>(i)];
    if (d != 1 && d != a[static_cast<size_t>(axis + i)])
      return InvalidArgument(node.Describe() + ": cannot broadcast shape " + DimsToString(b) + " onto " +
                             DimsToString(a) + " at axis " + std::to_string(axis));
    aligned[static_cast<size_t>(axis + i)] = d;
  }
  return aligned;
}

struct BinaryInputs {
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  std::vector<int64_t> a_dims, b_dims, out_dims;
};

// Reads inputs 0 and 1 and resolves their broadcasting: numpy rules, or the
// legacy attributes when `legacy_before_7` and the model's opset is below 7.
inline Result<BinaryInputs> PrepareBinary(const KernelContext& ctx, bool same_type, bool legacy_before_7) {
  BinaryInputs in;
  NEE_ASSIGN_OR_RETURN(in.a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(in.b, ctx.InputTensor(1));
  if (same_type && in.a->dtype() != in.b->dtype())
    return ctx.InputError(1, std::string("has element type ") + DataTypeName(in.b->dtype()) +
                                 " but input 0 has " + DataTypeName(in.a->dtype()));
  in.a_dims = in.a->dims();
  if (legacy_before_7 && ctx.opset() < 7) {
    NEE_ASSIGN_OR_RETURN(in.b_dims, LegacyBroadcastDims(ctx.node(), in.a->dims(), in.b->dims()));
    in.out_dims = in.a_dims;
    return in;
  }
  in.b_dims = in.b->dims();
  auto out = BroadcastDims(in.a_dims, in.b_dims);
  if (!out.ok()) return out.status().WithContext(ctx.node().Describe() + ": ");
  in.out_dims = std::move(out).value();
  return in;
}

// A binary kernel whose inputs share one type from kAllowed and whose output
// has that type (kBoolOut false) or is bool. `check(ctx, b)` may reject
// operands before the loop (integer division by zero); op is generic over
// the Compute type.
template <TypeSet kAllowed, bool kBoolOut, bool kLegacy, typename Op>
Status SameTypeBinary(KernelContext& ctx, const Op& op) {
  NEE_ASSIGN_OR_RETURN(BinaryInputs in, PrepareBinary(ctx, true, kLegacy));
  return Visit<kAllowed>(in.a->dtype(), ctx.node(), [&]<typename T>() -> Status {
    using TO = std::conditional_t<kBoolOut, bool, T>;
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, Repr<TO>::kType, in.out_dims));
    BinaryLoop<T, T, TO>(ctx, *in.a, in.a_dims, *in.b, in.b_dims, out, op);
    return Status::Ok();
  });
}

// A unary kernel on a type from kAllowed; output has the input's shape and
// type (or bool).
template <TypeSet kAllowed, bool kBoolOut, typename Op>
Status SameTypeUnary(KernelContext& ctx, const Op& op) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  return Visit<kAllowed>(x->dtype(), ctx.node(), [&]<typename T>() -> Status {
    using TO = std::conditional_t<kBoolOut, bool, T>;
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, Repr<TO>::kType, x->dims()));
    UnaryLoop<T, TO>(ctx, *x, out, op);
    return Status::Ok();
  });
}

// ---- Shape rules ------------------------------------------------------------------

// Input i, when its element type is known, must be in kAllowed.
template <TypeSet kAllowed>
Status CheckAllowedType(const InferenceContext& ictx, size_t i) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ictx, i));
  if (t->elem_type != DataType::kUndefined && !InSet(kAllowed, t->elem_type))
    return ictx.InputError(i, std::string("has element type ") + DataTypeName(t->elem_type) +
                                  ", which " + ictx.node.op_type + " does not accept");
  return Status::Ok();
}

// Inputs first..last-1 (when known) must all have input `first`'s element type.
inline Status CheckSameTypes(const InferenceContext& ictx, size_t first, size_t end) {
  DataType expected = DataType::kUndefined;
  size_t expected_index = first;
  for (size_t i = first; i < end && i < ictx.num_inputs(); ++i) {
    if (!ictx.has_input(i)) continue;
    DataType t = ictx.input_type(i).elem_type;
    if (t == DataType::kUndefined) continue;
    if (expected == DataType::kUndefined) {
      expected = t;
      expected_index = i;
    } else if (t != expected) {
      return ictx.InputError(i, std::string("has element type ") + DataTypeName(t) + " but input " +
                                    std::to_string(expected_index) + " has " + DataTypeName(expected));
    }
  }
  return Status::Ok();
}

// Output 0 has input 0's shape, and its type or bool.
template <TypeSet kAllowed, bool kBoolOut>
Status InferUnary(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(CheckAllowedType<kAllowed>(ictx, 0));
  if (!kBoolOut) return InferSameAsInput0(ictx);
  if (ictx.num_outputs() > 0) ictx.output_types[0] = TypeInfo::Tensor(DataType::kBool, ictx.input_type(0).shape);
  return Status::Ok();
}

// All inputs share one type from kAllowed and broadcast (numpy rules, or the
// legacy attribute rules before opset 7 when kLegacy: then the output has
// input 0's shape). Output type: the inputs' or bool.
template <TypeSet kAllowed, bool kBoolOut, bool kLegacy>
Status InferBroadcastSameType(InferenceContext& ictx) {
  for (size_t i = 0; i < ictx.num_inputs(); ++i) NEE_RETURN_IF_ERROR(CheckAllowedType<kAllowed>(ictx, i));
  NEE_RETURN_IF_ERROR(CheckSameTypes(ictx, 0, ictx.num_inputs()));
  if (kLegacy && ictx.opset < 7) return InferUnary<kAllowed, kBoolOut>(ictx);
  return kBoolOut ? InferBroadcastBool(ictx) : InferBroadcast(ictx);
}

// ---- Value propagation for shape computations -------------------------------------

// Shape computations (Shape -> Gather -> Mul -> Concat -> Reshape, or
// Where(Equal(shape, -1), ...)) need the values of small integer tensors at
// check time. When every present input's value is known, small, and of an
// integer or bool type, runs the kernel on them and records output 0's
// value. Best effort: a kernel error leaves the value unknown (the run will
// report it).
constexpr int64_t kMaxFoldElements = 1024;

inline void FoldSmallIntegerValues(InferenceContext& ictx, KernelFn kernel) {
  if (ictx.output_values.empty() || ictx.num_outputs() != 1) return;
  std::vector<Value> values(ictx.num_inputs());
  std::vector<const Value*> pointers(ictx.num_inputs(), nullptr);
  bool any = false;
  for (size_t i = 0; i < ictx.num_inputs(); ++i) {
    if (!ictx.has_input(i)) continue;
    const Tensor* t = ictx.input_value(i);
    if (!t || t->num_elements() > kMaxFoldElements) return;
    if (!InSet(kIntTypes | kBoolType, t->dtype())) return;
    values[i] = Value(*t);
    pointers[i] = &values[i];
    any = true;
  }
  if (!any) return;
  std::vector<Value> outputs(1);
  KernelContext kctx(ictx.node, ictx.opset, pointers, &outputs, nullptr, nullptr, nullptr);
  if (!kernel(kctx).ok() || !outputs[0].is_tensor()) return;
  ictx.output_values[0] = outputs[0].tensor();
}

// A shape rule followed by value propagation through the op's own kernel.
template <ShapeFn kRule, KernelFn kKernel>
Status InferAndFold(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(kRule(ictx));
  FoldSmallIntegerValues(ictx, kKernel);
  return Status::Ok();
}

}  // namespace nee::ew
