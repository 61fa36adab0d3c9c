// Private helpers for the data-movement families (shape_ops.cc,
// concat_split.cc, pad_tile.cc, rearrange.cc, indexing.cc, selection.cc,
// generator.cc): element access that only cares about an element's storage
// (so one kernel serves every type, strings and packed sub-byte types
// included), a strided copy that covers Transpose/Slice/Expand/Tile-like
// rearrangements, ordered-key access for sorting ops, and the helper that
// lets a shape rule compute small output values by running the kernel.
#pragma once
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

#include "ir/float_formats.h"
#include "ops/op_util.h"

namespace nee::tensor_util {

// ---- Storage-level element access ------------------------------------------

// Elements stored one per T (T is an unsigned integer of the element's size,
// a 16-byte blob for complex128, or std::string).
template <typename T>
struct Plain {
  using Value = T;
  static constexpr bool kPacked = false;
  T* p;
  explicit Plain(const Tensor& t) : p(static_cast<T*>(const_cast<void*>(t.raw_data()))) {}
  const T& Get(int64_t i) const { return p[i]; }
  void Set(int64_t i, const T& v) const { p[i] = v; }
  // Copies `count` consecutive elements (the fast path of most kernels).
  // Nothing to do when they already are there (a Concat input the memory
  // planner placed inside the output).
  void CopyRun(int64_t dst, const Plain& src, int64_t src_index, int64_t count) const {
    if (p + dst == src.p + src_index) return;
    if constexpr (std::is_trivially_copyable_v<T>) {
      if (count > 0) std::memcpy(p + dst, src.p + src_index, static_cast<size_t>(count) * sizeof(T));
    } else {
      for (int64_t k = 0; k < count; ++k) p[dst + k] = src.p[src_index + k];
    }
  }
};

struct Bytes16 {
  uint64_t lo, hi;
  bool operator==(const Bytes16&) const = default;
};

// Packed sub-byte elements (4 or 2 bits), low bits first as ONNX packs them.
template <int kBits>
struct Packed {
  using Value = uint8_t;
  static constexpr bool kPacked = true;
  static constexpr int kPerByte = 8 / kBits;
  static constexpr uint8_t kMask = (1 << kBits) - 1;
  uint8_t* p;
  explicit Packed(const Tensor& t) : p(static_cast<uint8_t*>(const_cast<void*>(t.raw_data()))) {}
  uint8_t Get(int64_t i) const {
    return static_cast<uint8_t>((p[i / kPerByte] >> ((i % kPerByte) * kBits)) & kMask);
  }
  void Set(int64_t i, uint8_t v) const {
    int shift = static_cast<int>(i % kPerByte) * kBits;
    uint8_t& byte = p[i / kPerByte];
    byte = static_cast<uint8_t>((byte & ~(kMask << shift)) | ((v & kMask) << shift));
  }
  void CopyRun(int64_t dst, const Packed& src, int64_t src_index, int64_t count) const {
    for (int64_t k = 0; k < count; ++k) Set(dst + k, src.Get(src_index + k));
  }
};

// Runs fn.template operator()<Access>() with the accessor for `dtype`'s
// storage; fn returns Status. Unknown storage -> NotImplemented naming the node.
template <typename Fn>
Status VisitStorage(const Node& node, DataType dtype, Fn&& fn) {
  if (dtype == DataType::kString) return fn.template operator()<Plain<std::string>>();
  switch (IsValidDataType(static_cast<int32_t>(dtype)) ? ElementBits(dtype) : 0) {
    case 8: return fn.template operator()<Plain<uint8_t>>();
    case 16: return fn.template operator()<Plain<uint16_t>>();
    case 32: return fn.template operator()<Plain<uint32_t>>();
    case 64: return fn.template operator()<Plain<uint64_t>>();
    case 128: return fn.template operator()<Plain<Bytes16>>();
    case 4: return fn.template operator()<Packed<4>>();
    case 2: return fn.template operator()<Packed<2>>();
    default: break;
  }
  return NotImplemented(node.Describe() + ": element type " + DataTypeName(dtype) + " is not supported");
}

// Copies every element of `src` into `dst` (same type and element count).
inline Status CopyElements(const Node& node, const Tensor& src, Tensor& dst);
// Allocates output `i` with `dims` and copies src's elements (in order) into it.
inline Status CopyToOutput(KernelContext& ctx, size_t i, const Tensor& src, std::vector<int64_t> dims);
// Viewing `src` as [outer, n, inner], copies the slices at `positions` (each in
// [0, n), in the order listed, repeats allowed) along the middle axis into
// `dst`, viewed as [outer, positions.size(), inner]. Used by Gather-like ops.
inline Status CopySlicesAlongAxis(const Node& node, const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                                  const std::vector<int64_t>& positions, Tensor& dst);

// dst[o] = src[base + sum_d o_d * src_strides[d]] for every multi-index o of
// dst's dims. Strides may be 0 (broadcast) or negative (reversal); the caller
// guarantees every addressed source element is in range.
inline Status StridedCopy(const Node& node, const Tensor& src, int64_t base, const std::vector<int64_t>& src_strides,
                   Tensor& dst);

// dst[o] = src[map(o)] where, per output dim d, coordinate o_d maps to source
// coordinate coord_maps[d][o_d] (or -1: the element is `fill`, a 1-element
// tensor of the same type). Used by Pad/CenterCropPad-like ops.
inline Status MappedCopy(const Node& node, const Tensor& src, const std::vector<std::vector<int64_t>>& coord_maps,
                  const Tensor* fill, Tensor& dst);

// ---- Ordered access (sorting, comparisons) ----------------------------------

// A reader exposing elements of a typed tensor as comparable keys.
template <typename T, typename K = T>
struct Keys {
  using Key = K;
  const T* p;
  explicit Keys(const Tensor& t) : p(t.data<T>()) {}
  K Get(int64_t i) const { return static_cast<K>(p[i]); }
};
struct HalfKeys {
  using Key = float;
  const uint16_t* p;
  explicit HalfKeys(const Tensor& t) : p(t.data<uint16_t>()) {}
  float Get(int64_t i) const { return HalfToFloat(p[i]); }
};
struct BFloat16Keys {
  using Key = float;
  const uint16_t* p;
  explicit BFloat16Keys(const Tensor& t) : p(t.data<uint16_t>()) {}
  float Get(int64_t i) const { return BFloat16ToFloat(p[i]); }
};

// Runs fn.template operator()<Reader>() for ordered element types (every
// real number type, bool; strings when allow_strings).
template <typename Fn>
Status VisitOrdered(const Node& node, DataType dtype, bool allow_strings, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat: return fn.template operator()<Keys<float>>();
    case DataType::kDouble: return fn.template operator()<Keys<double>>();
    case DataType::kInt8: return fn.template operator()<Keys<int8_t>>();
    case DataType::kInt16: return fn.template operator()<Keys<int16_t>>();
    case DataType::kInt32: return fn.template operator()<Keys<int32_t>>();
    case DataType::kInt64: return fn.template operator()<Keys<int64_t>>();
    case DataType::kUint8: return fn.template operator()<Keys<uint8_t>>();
    case DataType::kUint16: return fn.template operator()<Keys<uint16_t>>();
    case DataType::kUint32: return fn.template operator()<Keys<uint32_t>>();
    case DataType::kUint64: return fn.template operator()<Keys<uint64_t>>();
    case DataType::kBool: return fn.template operator()<Keys<bool>>();
    case DataType::kFloat16: return fn.template operator()<HalfKeys>();
    case DataType::kBFloat16: return fn.template operator()<BFloat16Keys>();
    case DataType::kString:
      if (allow_strings) return fn.template operator()<Keys<std::string>>();
      break;
    default: break;
  }
  return NotImplemented(node.Describe() + ": element type " + DataTypeName(dtype) + " is not supported");
}

// ---- Inputs and indices -------------------------------------------------------

// Reads integer input i (which must be present) as int64 values.
inline Result<std::vector<int64_t>> IntInput(KernelContext& ctx, size_t i);
// Reads a scalar (or 1-element) numeric input as double.
inline Result<double> ScalarInput(KernelContext& ctx, size_t i);

// Reads element i of an integer index tensor (int32 or int64; others via ToInt64).
inline int64_t IndexAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kInt64: return t.data<int64_t>()[i];
    case DataType::kInt32: return t.data<int32_t>()[i];
    case DataType::kInt16: return t.data<int16_t>()[i];
    case DataType::kInt8: return t.data<int8_t>()[i];
    case DataType::kUint8: return t.data<uint8_t>()[i];
    case DataType::kUint16: return t.data<uint16_t>()[i];
    case DataType::kUint32: return t.data<uint32_t>()[i];
    case DataType::kUint64: return static_cast<int64_t>(t.data<uint64_t>()[i]);
    default: {
      // Non-integer index types are invalid; map them so that NaN and huge
      // values land out of range instead of in undefined conversions.
      double v = ReadAsDouble(t, i);
      return v >= -9.0e18 && v <= 9.0e18 ? static_cast<int64_t>(v) : std::numeric_limits<int64_t>::min();
    }
  }
}

// Normalizes index `idx` into [0, size) (negative counts from the end);
// returns false when out of range.
inline bool NormalizeIndex(int64_t& idx, int64_t size) {
  if (idx < 0) idx += size;
  return idx >= 0 && idx < size;
}

// Normalizes a list of axes against `rank`; rejects out-of-range and duplicates.
inline Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, const Node& node);

// The input's static dims when its type has a fully known shape.
inline bool StaticDims(const InferenceContext& ictx, size_t i, std::vector<int64_t>* dims);
// The input's rank when known, else -1.
inline int64_t KnownRank(const InferenceContext& ictx, size_t i);
// The values of integer input i when the shape rule knows them, else nullopt.
inline std::optional<std::vector<int64_t>> KnownInts(const InferenceContext& ictx, size_t i);

// ---- Value propagation in shape rules -----------------------------------------

constexpr int64_t kMaxPropagatedElements = 1024;

// When every present input value is known and every wanted output has a
// static inferred shape of at most kMaxPropagatedElements elements, runs
// `kernel` on the known values and stores the tensor outputs into ictx.output_values (and their exact
// types into ictx.output_types). Kernel failures are ignored here: the rule
// has already checked what it can, and a run will report them.
inline void PropagateByRunning(InferenceContext& ictx, KernelFn kernel);

// Stores `value` as output i's value (and exact type) when small enough.
inline void SetOutputValue(InferenceContext& ictx, size_t i, Tensor value);

// ---- Definitions -----------------------------------------------------------------

inline Status CopyElements(const Node& node, const Tensor& src, Tensor& dst) {
  return VisitStorage(node, src.dtype(), [&]<typename A>() -> Status {
    A in(src), out(dst);
    out.CopyRun(0, in, 0, std::min(src.num_elements(), dst.num_elements()));
    return Status::Ok();
  });
}

inline Status CopySlicesAlongAxis(const Node& node, const Tensor& src, int64_t outer, int64_t n, int64_t inner,
                                  const std::vector<int64_t>& positions, Tensor& dst) {
  return VisitStorage(node, src.dtype(), [&]<typename A>() -> Status {
    A in(src), out(dst);
    int64_t offset = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j : positions) {
        out.CopyRun(offset, in, (o * n + j) * inner, inner);
        offset += inner;
      }
    return Status::Ok();
  });
}

inline Status CopyToOutput(KernelContext& ctx, size_t i, const Tensor& src, std::vector<int64_t> dims) {
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(i, src.dtype(), std::move(dims)));
  if (out.num_elements() != src.num_elements())
    return ctx.Error("output " + std::to_string(i) + " " + DimsToString(out.dims()) + " does not hold the " +
                     std::to_string(src.num_elements()) + " elements of the input");
  // The memory planner may place a view op's output on its input's bytes
  // (plan/memory_plan.cc): then there is nothing to copy.
  if (out.raw_data() == src.raw_data() && src.dtype() != DataType::kString) return Status::Ok();
  return CopyElements(ctx.node(), src, out);
}

inline Status StridedCopy(const Node& node, const Tensor& src, int64_t base, const std::vector<int64_t>& src_strides,
                          Tensor& dst) {
  return VisitStorage(node, src.dtype(), [&]<typename A>() -> Status {
    A in(src), out(dst);
    const std::vector<int64_t>& dims = dst.dims();
    const int64_t total = dst.num_elements();
    if (total == 0) return Status::Ok();
    const size_t rank = dims.size();
    if (rank == 0) {
      out.Set(0, in.Get(base));
      return Status::Ok();
    }
    const int64_t inner = dims[rank - 1];
    const int64_t inner_stride = src_strides[rank - 1];
    std::vector<int64_t> index(rank - 1, 0);
    int64_t src_offset = base;
    for (int64_t o = 0; o < total; o += inner) {
      if (inner_stride == 1) {
        out.CopyRun(o, in, src_offset, inner);
      } else {
        for (int64_t k = 0; k < inner; ++k) out.Set(o + k, in.Get(src_offset + k * inner_stride));
      }
      for (size_t d = rank - 1; d-- > 0;) {
        src_offset += src_strides[d];
        if (++index[d] < dims[d]) break;
        src_offset -= src_strides[d] * dims[d];
        index[d] = 0;
      }
    }
    return Status::Ok();
  });
}

inline Status MappedCopy(const Node& node, const Tensor& src, const std::vector<std::vector<int64_t>>& coord_maps,
                         const Tensor* fill, Tensor& dst) {
  return VisitStorage(node, src.dtype(), [&]<typename A>() -> Status {
    A in(src), out(dst);
    const std::vector<int64_t>& dims = dst.dims();
    const int64_t total = dst.num_elements();
    if (total == 0) return Status::Ok();
    std::vector<int64_t> strides = StridesOf(src.dims());
    const size_t rank = dims.size();
    std::vector<int64_t> index(rank, 0);
    for (int64_t o = 0; o < total; ++o) {
      int64_t offset = 0;
      bool inside = true;
      for (size_t d = 0; d < rank && inside; ++d) {
        int64_t c = coord_maps[d][index[d]];
        if (c < 0) inside = false;
        else offset += c * strides[d];
      }
      if (inside) {
        out.Set(o, in.Get(offset));
      } else if (fill) {
        A f(*fill);
        out.Set(o, f.Get(0));
      }
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < dims[d]) break;
        index[d] = 0;
      }
    }
    return Status::Ok();
  });
}

inline Result<std::vector<int64_t>> IntInput(KernelContext& ctx, size_t i) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  auto values = t->ToInt64Vector();
  if (!values.ok()) return ctx.InputError(i, values.status().message());
  return std::move(values).value();
}

inline Result<double> ScalarInput(KernelContext& ctx, size_t i) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->num_elements() != 1)
    return ctx.InputError(i, "must hold exactly one value, got " + t->Describe());
  if (t->dtype() == DataType::kString) return ctx.InputError(i, "must be numeric, got " + t->Describe());
  return ReadAsDouble(*t, 0);
}

inline Result<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank, const Node& node) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return InvalidModel(node.Describe() + ": axis " + std::to_string(a) + " is out of range for rank " +
                          std::to_string(rank));
    int64_t n = a < 0 ? a + rank : a;
    if (seen[static_cast<size_t>(n)])
      return InvalidModel(node.Describe() + ": axis " + std::to_string(a) + " is repeated");
    seen[static_cast<size_t>(n)] = true;
    out.push_back(n);
  }
  return out;
}

inline bool StaticDims(const InferenceContext& ictx, size_t i, std::vector<int64_t>* dims) {
  if (!ictx.has_input(i)) return false;
  const TypeInfo& t = ictx.input_type(i);
  return t.is_tensor() && t.shape && ShapeIsStatic(*t.shape, dims);
}

inline int64_t KnownRank(const InferenceContext& ictx, size_t i) {
  if (!ictx.has_input(i)) return -1;
  const TypeInfo& t = ictx.input_type(i);
  return t.is_tensor() && t.shape ? static_cast<int64_t>(t.shape->size()) : -1;
}

inline std::optional<std::vector<int64_t>> KnownInts(const InferenceContext& ictx, size_t i) {
  const Tensor* t = ictx.input_value(i);
  if (!t) return std::nullopt;
  auto v = t->ToInt64Vector();
  if (!v.ok()) return std::nullopt;
  return std::move(v).value();
}

inline void SetOutputValue(InferenceContext& ictx, size_t i, Tensor value) {
  if (!value.defined() || value.num_elements() > kMaxPropagatedElements) return;
  if (ictx.output_values.size() < ictx.output_types.size()) ictx.output_values.resize(ictx.output_types.size());
  if (i >= ictx.output_values.size()) return;
  ictx.output_types[i] = TypeInfo::Tensor(value.dtype(), ShapeFromDims(value.dims()));
  ictx.output_values[i] = std::move(value);
}

inline void PropagateByRunning(InferenceContext& ictx, KernelFn kernel) {
  std::vector<Value> values(ictx.num_inputs());
  std::vector<const Value*> pointers(ictx.num_inputs(), nullptr);
  for (size_t i = 0; i < ictx.num_inputs(); ++i) {
    if (!ictx.has_input(i)) continue;
    const Tensor* t = ictx.input_value(i);
    if (!t) return;
    values[i] = Value(*t);
    pointers[i] = &values[i];
  }
  for (size_t o = 0; o < ictx.num_outputs(); ++o) {
    if (!ictx.node.HasOutput(o)) continue;
    const TypeInfo& type = ictx.output_types[o];
    std::vector<int64_t> dims;
    if (type.is_tensor() && type.shape && ShapeIsStatic(*type.shape, &dims)) {
      auto count = CheckedElementCount(dims);
      if (!count.ok() || count.value() > kMaxPropagatedElements) return;
    } else {
      return;  // output size unknown: running could allocate without bound
    }
  }
  std::vector<Value> outputs(ictx.num_outputs());
  KernelContext kctx(ictx.node, ictx.opset, pointers, &outputs, nullptr, nullptr, nullptr);
  if (!kernel(kctx).ok()) return;
  for (size_t o = 0; o < outputs.size(); ++o)
    if (outputs[o].is_tensor()) SetOutputValue(ictx, o, outputs[o].tensor());
}

}  // namespace nee::tensor_util
