// Private helpers for the neural-network op families (matmul, conv, pool,
// normalization, softmax): compute-type views of tensors, the sliding-window
// geometry shared by Conv and the pools, and a small row-parallel GEMM.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/float_formats.h"
#include "ops/op_util.h"

namespace nee::nn {

// ---- Compute types -----------------------------------------------------------
// Kernels are written once per compute type: float (for float, float16 and
// bfloat16), double, and uint64_t for integers (wrapping arithmetic, which
// gives the same low bits as numpy's fixed-width integer math).
enum class ComputeKind { kFloat, kDouble, kInteger, kNone };

inline ComputeKind ComputeKindOf(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kFloat16:
    case DataType::kBFloat16: return ComputeKind::kFloat;
    case DataType::kDouble: return ComputeKind::kDouble;
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
      return ComputeKind::kInteger;
    default: return ComputeKind::kNone;
  }
}

inline bool IsRealFloat(DataType t) { return ComputeKindOf(t) == ComputeKind::kFloat || t == DataType::kDouble; }

// Runs fn(p) with p pointing at t's elements as their own C++ type when they
// are stored as one (the integer types, float, double, bool) and returns true;
// returns false for every other type. TensorT is Tensor or const Tensor.
template <typename TensorT, typename Fn>
bool WithPlainData(TensorT& t, Fn&& fn) {
  switch (t.dtype()) {
    case DataType::kFloat: fn(t.template data<float>()); return true;
    case DataType::kDouble: fn(t.template data<double>()); return true;
    case DataType::kInt8: fn(t.template data<int8_t>()); return true;
    case DataType::kInt16: fn(t.template data<int16_t>()); return true;
    case DataType::kInt32: fn(t.template data<int32_t>()); return true;
    case DataType::kInt64: fn(t.template data<int64_t>()); return true;
    case DataType::kUint8: fn(t.template data<uint8_t>()); return true;
    case DataType::kUint16: fn(t.template data<uint16_t>()); return true;
    case DataType::kUint32: fn(t.template data<uint32_t>()); return true;
    case DataType::kUint64: fn(t.template data<uint64_t>()); return true;
    case DataType::kBool: fn(t.template data<bool>()); return true;
    default: return false;
  }
}

// Converts `n` elements of `t` into compute type A.
template <typename A>
void ConvertToCompute(const Tensor& t, A* dst) {
  const int64_t n = t.num_elements();
  auto copy = [&](const auto* src) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(src[i]);
  };
  if (WithPlainData(t, copy)) return;
  switch (t.dtype()) {
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(HalfToFloat(t.data<uint16_t>()[i]));
      break;
    case DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(BFloat16ToFloat(t.data<uint16_t>()[i]));
      break;
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<A>(ReadAsDouble(t, i));
  }
}

// Writes `src` (compute type A) into `t`, converting to t's element type.
template <typename A>
void ConvertFromCompute(const A* src, Tensor& t) {
  const int64_t n = t.num_elements();
  auto copy = [&](auto* dst) {
    using D = std::remove_pointer_t<decltype(dst)>;
    if constexpr (std::is_floating_point_v<A> && std::is_integral_v<D> && !std::is_same_v<D, bool>) {
      // A float result (NaN or out of range from hostile inputs, e.g.
      // GridSample of an integer image at a NaN grid point) into an integer
      // tensor: static_cast is undefined there; Cast's rule is not.
      for (int64_t i = 0; i < n; ++i) WriteFromDouble(t, i, static_cast<double>(src[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(src[i]);
    }
  };
  if (WithPlainData(t, copy)) return;
  switch (t.dtype()) {
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(src[i]));
      break;
    case DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) t.data<uint16_t>()[i] = FloatToBFloat16(static_cast<float>(src[i]));
      break;
    default:
      for (int64_t i = 0; i < n; ++i) WriteFromDouble(t, i, static_cast<double>(src[i]));
  }
}

// A read-only view of a tensor in compute type A: points at the tensor's
// bytes when its element type is A, otherwise owns a converted copy.
template <typename A>
class ComputeInput {
 public:
  ComputeInput() = default;
  explicit ComputeInput(const Tensor& t) {
    if (t.dtype() == DataTypeOf<A>::value) {
      ptr_ = t.data<A>();
      return;
    }
    storage_.resize(static_cast<size_t>(t.num_elements()));
    ConvertToCompute(t, storage_.data());
    ptr_ = storage_.data();
  }
  ComputeInput(const ComputeInput&) = delete;
  ComputeInput& operator=(const ComputeInput&) = delete;
  ComputeInput(ComputeInput&& o) noexcept { *this = std::move(o); }
  ComputeInput& operator=(ComputeInput&& o) noexcept {
    bool owned = o.ptr_ == o.storage_.data();
    storage_ = std::move(o.storage_);
    ptr_ = owned ? storage_.data() : o.ptr_;
    return *this;
  }
  const A* data() const { return ptr_; }
  A operator[](int64_t i) const { return ptr_[i]; }

 private:
  const A* ptr_ = nullptr;
  std::vector<A> storage_;
};

// A writable buffer in compute type A for an output tensor: writes straight
// into the tensor when its element type is A; otherwise Commit() converts.
template <typename A>
class ComputeOutput {
 public:
  explicit ComputeOutput(Tensor t) : tensor_(std::move(t)) {
    if (tensor_.dtype() == DataTypeOf<A>::value) {
      ptr_ = tensor_.data<A>();
    } else {
      storage_.assign(static_cast<size_t>(tensor_.num_elements()), A{});
      ptr_ = storage_.data();
    }
  }
  A* data() { return ptr_; }
  A& operator[](int64_t i) { return ptr_[i]; }
  void Commit() {
    if (ptr_ == storage_.data() && !storage_.empty()) ConvertFromCompute(storage_.data(), tensor_);
  }

 private:
  Tensor tensor_;
  A* ptr_ = nullptr;
  std::vector<A> storage_;
};

inline std::string TypeError(const char* op, DataType t) {
  return std::string(op) + " does not support element type " + DataTypeName(t);
}

// Error naming input `input` unless its element type `actual` is `expected`
// (the type the op's other inputs fix).
inline Status RequireElementType(const KernelContext& ctx, size_t input, DataType actual, DataType expected) {
  if (actual == expected) return Status::Ok();
  return ctx.InputError(input, std::string("has element type ") + DataTypeName(actual) + ", expected " +
                                   DataTypeName(expected));
}

// ---- GEMM core ---------------------------------------------------------------
// c[j] += a * b[j]. Written four lanes at a time with non-aliasing pointers
// so that -O2 (whose cheap vectorizer skips loops of unknown trip count)
// still emits SIMD code; each c[j] gets exactly one multiply-add per call,
// so the result equals the plain loop's.
template <typename A>
inline void AddScaledRow(A* __restrict c, const A* __restrict b, A a, int64_t n) {
  const int64_t n4 = n - n % 4;
  for (int64_t j = 0; j < n4; j += 4) {
    c[j] += a * b[j];
    c[j + 1] += a * b[j + 1];
    c[j + 2] += a * b[j + 2];
    c[j + 3] += a * b[j + 3];
  }
  for (int64_t j = n4; j < n; ++j) c[j] += a * b[j];
}

// C[i, j] (+)= sum_k A(i, k) * B[k, j] for rows i in [row_begin, row_end),
// with A addressed as a[i * a_row_stride + k * a_col_stride] (so a transposed
// A needs no copy) and B row-major [K, N]. The i-k-j order streams rows of B
// and C; each C element sums k in increasing order whatever the row split,
// keeping results deterministic.
template <typename A>
void GemmRows(int64_t row_begin, int64_t row_end, int64_t N, int64_t K, const A* a,
              int64_t a_row_stride, int64_t a_col_stride, const A* b, A* c, bool accumulate) {
  for (int64_t i = row_begin; i < row_end; ++i) {
    A* c_row = c + i * N;
    if (!accumulate) std::fill(c_row, c_row + N, A{});
    const A* a_row = a + i * a_row_stride;
    for (int64_t k = 0; k < K; ++k) AddScaledRow(c_row, b + k * N, a_row[k * a_col_stride], N);
  }
}

// ---- Sliding windows (Conv, ConvTranspose, pools) ----------------------------
struct WindowSpec {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins for each spatial dim, then ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  size_t rank() const { return kernel.size(); }
  int64_t pad_begin(size_t d) const { return pads[d]; }
  int64_t pad_end(size_t d) const { return pads[rank() + d]; }
  int64_t dilated_kernel(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }
};

// Reads kernel_shape (or takes `inferred_kernel` when the attribute is absent
// and it is non-null), strides, dilations, pads, auto_pad and ceil_mode, and
// validates them for `spatial_rank` spatial dims.
inline Result<WindowSpec> ReadWindowSpec(const Node& node, size_t spatial_rank,
                                         const std::vector<int64_t>* inferred_kernel) {
  WindowSpec s;
  const std::string where = node.Describe() + ": ";
  if (node.HasAttr("kernel_shape")) {
    NEE_ASSIGN_OR_RETURN(s.kernel, node.GetInts("kernel_shape"));
  } else if (inferred_kernel) {
    s.kernel = *inferred_kernel;
  } else {
    return InvalidModel(where + "attribute 'kernel_shape' is required");
  }
  const size_t n = spatial_rank;
  if (s.kernel.size() != n)
    return InvalidModel(where + "kernel_shape has " + std::to_string(s.kernel.size()) +
                        " dims, expected " + std::to_string(n) + " (the input's spatial rank)");
  NEE_ASSIGN_OR_RETURN(s.strides, node.GetInts("strides", std::vector<int64_t>(n, 1)));
  NEE_ASSIGN_OR_RETURN(s.dilations, node.GetInts("dilations", std::vector<int64_t>(n, 1)));
  NEE_ASSIGN_OR_RETURN(s.pads, node.GetInts("pads", std::vector<int64_t>(2 * n, 0)));
  NEE_ASSIGN_OR_RETURN(s.auto_pad, node.GetString("auto_pad", "NOTSET"));
  NEE_ASSIGN_OR_RETURN(int64_t ceil_mode, node.GetInt("ceil_mode", 0));
  s.ceil_mode = ceil_mode != 0;
  if (s.strides.empty()) s.strides.assign(n, 1);
  if (s.dilations.empty()) s.dilations.assign(n, 1);
  if (s.pads.empty()) s.pads.assign(2 * n, 0);
  if (s.strides.size() != n) return InvalidModel(where + "strides must have " + std::to_string(n) + " values");
  if (s.dilations.size() != n) return InvalidModel(where + "dilations must have " + std::to_string(n) + " values");
  if (s.pads.size() != 2 * n) return InvalidModel(where + "pads must have " + std::to_string(2 * n) + " values");
  for (size_t d = 0; d < n; ++d) {
    if (s.kernel[d] <= 0) return InvalidModel(where + "kernel_shape values must be positive, got " + DimsToString(s.kernel));
    if (s.strides[d] <= 0) return InvalidModel(where + "strides must be positive, got " + DimsToString(s.strides));
    if (s.dilations[d] <= 0) return InvalidModel(where + "dilations must be positive, got " + DimsToString(s.dilations));
  }
  for (int64_t p : s.pads)
    if (p < 0) return InvalidModel(where + "pads must be non-negative, got " + DimsToString(s.pads));
  // Bounds far beyond any real tensor keep the window arithmetic from overflowing.
  constexpr int64_t kMaxWindowValue = int64_t{1} << 31;
  for (size_t d = 0; d < n; ++d)
    if (s.kernel[d] > kMaxWindowValue || s.strides[d] > kMaxWindowValue || s.dilations[d] > kMaxWindowValue ||
        s.pads[d] > kMaxWindowValue || s.pads[n + d] > kMaxWindowValue)
      return InvalidModel(where + "kernel_shape, strides, dilations or pads value is implausibly large");
  if (s.auto_pad != "NOTSET" && s.auto_pad != "VALID" && s.auto_pad != "SAME_UPPER" && s.auto_pad != "SAME_LOWER")
    return InvalidModel(where + "unknown auto_pad '" + s.auto_pad + "'");
  return s;
}

// Output size of spatial dim d for input size `in`; resolves auto_pad into
// s.pads for that dim. `same_uses_dilation`: Conv counts dilation in the SAME
// padding, the pools follow the ONNX reference and use the plain kernel.
inline Result<int64_t> WindowOutputDim(const Node& node, WindowSpec& s, size_t d, int64_t in,
                                       bool same_uses_dilation = true) {
  const int64_t stride = s.strides[d];
  const int64_t dk = s.dilated_kernel(d);
  if (s.auto_pad == "SAME_UPPER" || s.auto_pad == "SAME_LOWER") {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t k = same_uses_dilation ? dk : s.kernel[d];
    const int64_t total = std::max<int64_t>(0, (out - 1) * stride + k - in);
    const int64_t small = total / 2, large = total - total / 2;
    s.pads[d] = s.auto_pad == "SAME_UPPER" ? small : large;
    s.pads[s.rank() + d] = s.auto_pad == "SAME_UPPER" ? large : small;
    return out;
  }
  if (s.auto_pad == "VALID") {
    s.pads[d] = 0;
    s.pads[s.rank() + d] = 0;
  }
  const int64_t padded = in + s.pad_begin(d) + s.pad_end(d);
  if (padded < dk)
    return InvalidArgument(node.Describe() + ": spatial dim " + std::to_string(d) + ": the (dilated) kernel " +
                           std::to_string(dk) + " is bigger than the padded input " + std::to_string(padded));
  int64_t out = (padded - dk) / stride + 1;
  if (s.ceil_mode && s.auto_pad != "VALID") {
    out = (padded - dk + stride - 1) / stride + 1;
    // The last window must start inside the input or its begin padding.
    if ((out - 1) * stride >= in + s.pad_begin(d)) --out;
  }
  return out;
}

// For each output position o along one spatial dim and each kernel tap k,
// the input coordinate o*stride - pad_begin + k*dilation, or -1 when it falls
// into padding. Laid out [k][o].
inline std::vector<int64_t> WindowInputIndex(const WindowSpec& s, size_t d, int64_t in, int64_t out) {
  std::vector<int64_t> idx(static_cast<size_t>(s.kernel[d] * out));
  for (int64_t k = 0; k < s.kernel[d]; ++k)
    for (int64_t o = 0; o < out; ++o) {
      int64_t x = o * s.strides[d] - s.pad_begin(d) + k * s.dilations[d];
      idx[static_cast<size_t>(k * out + o)] = (x >= 0 && x < in) ? x : -1;
    }
  return idx;
}

// ---- Shape-rule helpers --------------------------------------------------------
// The rank of input i when known, else -1.
inline int64_t KnownRank(const InferenceContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return -1;
  const TypeInfo& t = ctx.input_type(i);
  return t.shape ? static_cast<int64_t>(t.shape->size()) : -1;
}

inline const Shape* KnownShape(const InferenceContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return nullptr;
  const TypeInfo& t = ctx.input_type(i);
  return t.shape ? &*t.shape : nullptr;
}

// Merges two dims that must be equal: keeps the known one.
inline Dim MergeDims(const Dim& a, const Dim& b) { return a.known() || !a.symbol.empty() ? a : b; }

// Checks that a and b, when both known, are equal.
inline bool DimsConflict(const Dim& a, const Dim& b) { return a.known() && b.known() && a.value != b.value; }

}  // namespace nee::nn
