// Operator family: signal processing and a few numeric scans.
//
//   DFT (17: axis attribute; 20: axis input): forward / inverse discrete
//       Fourier transform along one axis; the last dim holds 1 (real) or 2
//       (real, imaginary) values. onesided=1 returns the first n/2+1 bins
//       (forward) or reads them and returns a real signal (inverse).
//   STFT (17): framed, windowed forward DFT of a [batch, length, 1|2] signal.
//   HannWindow, HammingWindow, BlackmanWindow (17): window vectors.
//   MelWeightMatrix (17): triangular mel filter bank.
//   CumProd (26): cumulative product along an axis (exclusive / reverse).
//   Det (11, 22): determinants of [*, M, M] matrices.
//
// The transforms are plain O(n^2) sums over a precomputed table of unit
// roots (exact symmetry, no accumulated phase error), computed in double.
#include <cmath>
#include <complex>
#include <numbers>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/float_formats.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using Complex = std::complex<double>;

// Upper bounds on window and transform lengths: far beyond real signals,
// small enough that length products cannot overflow and that the per-line
// scratch of a transform stays modest.
constexpr int64_t kMaxLength = int64_t{1} << 31;
constexpr int64_t kMaxTransformLength = int64_t{1} << 22;

// A scalar integer input (int32 or int64), or nullopt when omitted.
Result<std::optional<int64_t>> ScalarIntInput(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return std::optional<int64_t>();
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->num_elements() != 1 || (t->dtype() != DataType::kInt32 && t->dtype() != DataType::kInt64))
    return ctx.InputError(i, "must be an int32 or int64 scalar, got " + t->Describe());
  return std::optional<int64_t>(t->dtype() == DataType::kInt32 ? t->data<int32_t>()[0] : t->data<int64_t>()[0]);
}

// The same at inference time, when the value is known.
std::optional<int64_t> KnownScalarInt(const InferenceContext& ctx, size_t i) {
  const Tensor* t = ctx.input_value(i);
  if (!t || t->num_elements() != 1) return std::nullopt;
  auto v = t->ToInt64Vector();
  if (!v.ok()) return std::nullopt;
  return v.value()[0];
}

Status RequireFloat(const KernelContext& ctx, const Tensor& t) {
  if (nn::IsRealFloat(t.dtype())) return Status::Ok();
  return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError(ctx.node().op_type.c_str(), t.dtype()));
}

// e^{sign * 2 pi i k / n} for k in [0, n).
std::vector<Complex> UnitRoots(int64_t n, double sign) {
  std::vector<Complex> roots(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const double angle = sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
    roots[static_cast<size_t>(k)] = Complex(std::cos(angle), std::sin(angle));
  }
  return roots;
}

// out[k] = sum_j in[j] * roots[(j * k) mod n] for k < out.size(); `in` is
// already truncated or zero-padded to n values.
void Transform(const std::vector<Complex>& in, const std::vector<Complex>& roots, std::vector<Complex>& out) {
  const uint64_t n = roots.size();
  for (size_t k = 0; k < out.size(); ++k) {
    Complex sum = 0;
    for (size_t j = 0; j < in.size(); ++j)
      if (in[j] != Complex(0)) sum += in[j] * roots[static_cast<size_t>((j * static_cast<uint64_t>(k)) % n)];
    out[k] = sum;
  }
}

// ---- DFT ------------------------------------------------------------------------

struct DftAttrs {
  bool inverse = false;
  bool onesided = false;
};

Result<DftAttrs> ReadDftAttrs(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t inverse, node.GetInt("inverse", 0));
  NEE_ASSIGN_OR_RETURN(int64_t onesided, node.GetInt("onesided", 0));
  return DftAttrs{inverse != 0, onesided != 0};
}

// Normalizes the DFT axis against rank r; the last dim (complex parts) is not allowed.
Result<int64_t> DftAxis(const Node& node, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank - 2)
    return InvalidModel(node.Describe() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                        std::to_string(rank) + " (the last dim holds the complex parts)");
  return a;
}

Status DftInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(DftAttrs attrs, ReadDftAttrs(ctx.node));
  if (!x->shape) {
    ctx.output_types[0] = TypeInfo::Tensor(x->elem_type);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x->shape->size());
  if (rank < 2) return ctx.InputError(0, "must have rank >= 2 (signal dims, then 1 or 2), got " + ShapeToString(*x->shape));
  Shape y = *x->shape;
  y.back() = Dim::Known(attrs.inverse && attrs.onesided ? 1 : 2);
  std::optional<int64_t> axis_value;
  if (ctx.opset < 20) {
    NEE_ASSIGN_OR_RETURN(int64_t a, ctx.node.GetInt("axis", 1));
    axis_value = a;
  } else if (!ctx.has_input(2)) {
    axis_value = -2;
  } else {
    axis_value = KnownScalarInt(ctx, 2);
  }
  if (!axis_value) {
    // Which dim changes is unknown: only the rank and the last dim are.
    for (size_t i = 0; i + 1 < y.size(); ++i) y[i] = Dim::Unknown();
    ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(int64_t axis, DftAxis(ctx.node, *axis_value, rank));
  std::optional<int64_t> length;
  if (ctx.has_input(1)) {
    length = KnownScalarInt(ctx, 1);
  } else if ((*x->shape)[axis].known()) {
    const int64_t n = (*x->shape)[axis].value;
    length = attrs.inverse && attrs.onesided ? 2 * (n - 1) : n;
  }
  if (length && *length > 0) y[axis] = Dim::Known(attrs.onesided && !attrs.inverse ? *length / 2 + 1 : *length);
  else y[axis] = Dim::Unknown();
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
  return Status::Ok();
}

Status DftKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *x));
  NEE_ASSIGN_OR_RETURN(DftAttrs attrs, ReadDftAttrs(ctx.node()));
  const int64_t rank = x->rank();
  if (rank < 2 || (x->dims().back() != 1 && x->dims().back() != 2))
    return ctx.InputError(0, "must have rank >= 2 and a last dim of 1 (real) or 2 (complex), got " + DimsToString(x->dims()));
  int64_t axis_attr = 1;
  if (ctx.opset() < 20) {
    NEE_ASSIGN_OR_RETURN(axis_attr, ctx.node().GetInt("axis", 1));
  } else {
    NEE_ASSIGN_OR_RETURN(std::optional<int64_t> a, ScalarIntInput(ctx, 2));
    axis_attr = a.value_or(-2);
  }
  NEE_ASSIGN_OR_RETURN(int64_t axis, DftAxis(ctx.node(), axis_attr, rank));
  const int64_t n_in = x->dim(axis);
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> length_in, ScalarIntInput(ctx, 1));
  const int64_t length = length_in ? *length_in : (attrs.inverse && attrs.onesided ? 2 * (n_in - 1) : n_in);
  if (length <= 0 || length > kMaxTransformLength)
    return ctx.InputError(1, "dft_length must be in [1, " + std::to_string(kMaxTransformLength) + "], got " +
                                 std::to_string(length));
  const bool complex_in = x->dims().back() == 2;
  const bool real_out = attrs.inverse && attrs.onesided;
  const int64_t n_out = attrs.onesided && !attrs.inverse ? length / 2 + 1 : length;
  std::vector<int64_t> y_dims = x->dims();
  y_dims[axis] = n_out;
  y_dims.back() = real_out ? 1 : 2;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), y_dims));
  if (y.num_elements() == 0) return Status::Ok();

  nn::ComputeInput<double> xs(*x);
  nn::ComputeOutput<double> ys(y);
  const int64_t outer = ProductOf(x->dims(), 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(x->dims(), static_cast<size_t>(axis) + 1, static_cast<size_t>(rank) - 1);
  const int64_t parts_in = x->dims().back(), parts_out = y_dims.back();
  const std::vector<Complex> roots = UnitRoots(length, attrs.inverse ? 1.0 : -1.0);
  const double scale = attrs.inverse ? 1.0 / static_cast<double>(length) : 1.0;
  // Values read per line: the inverse one-sided transform reads n/2+1 bins.
  const int64_t read = real_out ? std::min(n_in, length / 2 + 1) : std::min(n_in, length);
  ctx.ParallelFor(outer * inner, 1, [&](int64_t begin, int64_t end) {
    std::vector<Complex> in(static_cast<size_t>(length)), out(static_cast<size_t>(real_out ? length : n_out));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / inner, i = u % inner;
      std::fill(in.begin(), in.end(), Complex(0));
      for (int64_t j = 0; j < read; ++j) {
        const double* v = xs.data() + ((o * n_in + j) * inner + i) * parts_in;
        in[static_cast<size_t>(j)] = Complex(v[0], complex_in ? v[1] : 0.0);
      }
      if (real_out) {
        // Rebuild the full Hermitian spectrum from its first half; the
        // imaginary parts of the DC and Nyquist bins cannot be represented
        // in a real signal and are dropped, as numpy's irfft does.
        in[0] = Complex(in[0].real(), 0);
        if (length % 2 == 0) in[static_cast<size_t>(length / 2)] = Complex(in[static_cast<size_t>(length / 2)].real(), 0);
        for (int64_t k = 1; k < (length + 1) / 2; ++k)
          in[static_cast<size_t>(length - k)] = std::conj(in[static_cast<size_t>(k)]);
      }
      Transform(in, roots, out);
      for (int64_t k = 0; k < n_out; ++k) {
        double* v = ys.data() + ((o * n_out + k) * inner + i) * parts_out;
        v[0] = out[static_cast<size_t>(k)].real() * scale;
        if (!real_out) v[1] = out[static_cast<size_t>(k)].imag() * scale;
      }
    }
  });
  ys.Commit();
  return Status::Ok();
}

// ---- STFT -----------------------------------------------------------------------

Status StftInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t onesided, ctx.node.GetInt("onesided", 1));
  Shape y(4, Dim::Unknown());
  y[3] = Dim::Known(2);
  const Shape* signal = nn::KnownShape(ctx, 0);
  if (signal && signal->size() == 3) y[0] = (*signal)[0];
  std::optional<int64_t> length = KnownScalarInt(ctx, 3);
  if (!length) {
    if (const Shape* w = nn::KnownShape(ctx, 2); w && w->size() == 1 && (*w)[0].known()) length = (*w)[0].value;
    else if (!ctx.has_input(2) && !ctx.has_input(3) && signal && signal->size() == 3 && (*signal)[1].known())
      length = (*signal)[1].value;
  }
  const std::optional<int64_t> step = KnownScalarInt(ctx, 1);
  if (length && *length > 0) {
    y[2] = Dim::Known(onesided ? *length / 2 + 1 : *length);
    if (step && *step > 0 && signal && signal->size() == 3 && (*signal)[1].known() && (*signal)[1].value >= *length)
      y[1] = Dim::Known(((*signal)[1].value - *length) / *step + 1);
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
  return Status::Ok();
}

Status StftKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* signal, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *signal));
  NEE_ASSIGN_OR_RETURN(int64_t onesided, ctx.node().GetInt("onesided", 1));
  if (signal->rank() != 3 || (signal->dim(2) != 1 && signal->dim(2) != 2))
    return ctx.InputError(0, "must have shape [batch, length, 1 or 2], got " + DimsToString(signal->dims()));
  const int64_t batch = signal->dim(0), signal_length = signal->dim(1), parts = signal->dim(2);
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> step, ScalarIntInput(ctx, 1));
  if (!step || *step <= 0) return ctx.InputError(1, "frame_step must be positive");
  NEE_ASSIGN_OR_RETURN(const Tensor* window, OptionalInputTensor(ctx, 2));
  if (window) {
    if (window->rank() != 1) return ctx.InputError(2, "must be 1-D, got " + DimsToString(window->dims()));
  }
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> length_in, ScalarIntInput(ctx, 3));
  const int64_t length = length_in ? *length_in : window ? window->dim(0) : signal_length;
  if (length <= 0 || length > signal_length || length > kMaxTransformLength)
    return ctx.InputError(3, "frame_length must be in [1, " + std::to_string(signal_length) + "], got " +
                                 std::to_string(length));
  if (window && window->dim(0) != length)
    return ctx.InputError(2, "has " + std::to_string(window->dim(0)) + " values, frame_length is " + std::to_string(length));
  const int64_t frames = (signal_length - length) / *step + 1;
  const int64_t bins = onesided ? length / 2 + 1 : length;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, signal->dtype(), {batch, frames, bins, 2}));
  if (y.num_elements() == 0) return Status::Ok();
  nn::ComputeInput<double> xs(*signal);
  std::vector<double> weights(static_cast<size_t>(length), 1.0);
  if (window) nn::ConvertToCompute(*window, weights.data());
  nn::ComputeOutput<double> ys(y);
  const std::vector<Complex> roots = UnitRoots(length, -1.0);
  ctx.ParallelFor(batch * frames, 1, [&](int64_t begin, int64_t end) {
    std::vector<Complex> in(static_cast<size_t>(length)), out(static_cast<size_t>(bins));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t b = u / frames, f = u % frames;
      for (int64_t j = 0; j < length; ++j) {
        const double* v = xs.data() + (b * signal_length + f * *step + j) * parts;
        in[static_cast<size_t>(j)] = Complex(v[0], parts == 2 ? v[1] : 0.0) * weights[static_cast<size_t>(j)];
      }
      Transform(in, roots, out);
      for (int64_t k = 0; k < bins; ++k) {
        ys[(u * bins + k) * 2] = out[static_cast<size_t>(k)].real();
        ys[(u * bins + k) * 2 + 1] = out[static_cast<size_t>(k)].imag();
      }
    }
  });
  ys.Commit();
  return Status::Ok();
}

// ---- Windows and the mel filter bank ----------------------------------------------

bool IsWindowOutputType(int64_t t) {
  switch (static_cast<DataType>(t)) {
    case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: case DataType::kUint64:
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kFloat16: case DataType::kFloat: case DataType::kDouble: case DataType::kBFloat16:
      return true;
    default: return false;
  }
}

Result<DataType> ReadOutputDatatype(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t t, node.GetInt("output_datatype", 1));
  if (!IsWindowOutputType(t))
    return InvalidModel(node.Describe() + ": output_datatype " + std::to_string(t) + " is not a supported numeric type");
  return static_cast<DataType>(t);
}

enum class WindowKind { kHann, kHamming, kBlackman };

Status WindowInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(DataType type, ReadOutputDatatype(ctx.node));
  std::optional<int64_t> size = KnownScalarInt(ctx, 0);
  ctx.output_types[0] = TypeInfo::Tensor(type, Shape{size && *size >= 0 ? Dim::Known(*size) : Dim::Unknown()});
  return Status::Ok();
}

Status WindowKernel(KernelContext& ctx, WindowKind kind) {
  NEE_ASSIGN_OR_RETURN(DataType type, ReadOutputDatatype(ctx.node()));
  NEE_ASSIGN_OR_RETURN(int64_t periodic, ctx.node().GetInt("periodic", 1));
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> size, ScalarIntInput(ctx, 0));
  if (!size || *size < 0 || *size > kMaxLength)
    return ctx.InputError(0, "size must be a non-negative scalar, got " + (size ? std::to_string(*size) : "none"));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, type, {*size}));
  // A periodic window is the first `size` values of a symmetric one of size+1.
  const double period = static_cast<double>(periodic ? *size : *size - 1);
  for (int64_t i = 0; i < *size; ++i) {
    const double n = static_cast<double>(i);
    double v = 0;
    switch (kind) {
      case WindowKind::kHann: {
        const double s = std::sin(std::numbers::pi * n / period);
        v = s * s;
        break;
      }
      case WindowKind::kHamming: {
        constexpr double a0 = 25.0 / 46.0;
        v = a0 - (1 - a0) * std::cos(2 * std::numbers::pi * n / period);
        break;
      }
      case WindowKind::kBlackman:
        v = 0.42 - 0.5 * std::cos(2 * std::numbers::pi * n / period) + 0.08 * std::cos(4 * std::numbers::pi * n / period);
        break;
    }
    WriteFromDouble(y, i, v);
  }
  return Status::Ok();
}

Status HannWindowKernel(KernelContext& ctx) { return WindowKernel(ctx, WindowKind::kHann); }
Status HammingWindowKernel(KernelContext& ctx) { return WindowKernel(ctx, WindowKind::kHamming); }
Status BlackmanWindowKernel(KernelContext& ctx) { return WindowKernel(ctx, WindowKind::kBlackman); }

Status MelWeightMatrixInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(DataType type, ReadOutputDatatype(ctx.node));
  const std::optional<int64_t> mel_bins = KnownScalarInt(ctx, 0), dft_length = KnownScalarInt(ctx, 1);
  ctx.output_types[0] = TypeInfo::Tensor(
      type, Shape{dft_length && *dft_length >= 0 ? Dim::Known(*dft_length / 2 + 1) : Dim::Unknown(),
                  mel_bins && *mel_bins >= 0 ? Dim::Known(*mel_bins) : Dim::Unknown()});
  return Status::Ok();
}

Result<double> ScalarFloatInput(const KernelContext& ctx, size_t i) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->num_elements() != 1 || !nn::IsRealFloat(t->dtype()))
    return ctx.InputError(i, "must be a floating-point scalar, got " + t->Describe());
  return ReadAsDouble(*t, 0);
}

Status MelWeightMatrixKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(DataType type, ReadOutputDatatype(ctx.node()));
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> mel_bins, ScalarIntInput(ctx, 0));
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> dft_length, ScalarIntInput(ctx, 1));
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> sample_rate, ScalarIntInput(ctx, 2));
  NEE_ASSIGN_OR_RETURN(double lower_hz, ScalarFloatInput(ctx, 3));
  NEE_ASSIGN_OR_RETURN(double upper_hz, ScalarFloatInput(ctx, 4));
  if (!mel_bins || *mel_bins <= 0 || *mel_bins > kMaxLength) return ctx.InputError(0, "num_mel_bins must be positive");
  if (!dft_length || *dft_length <= 0 || *dft_length > kMaxLength) return ctx.InputError(1, "dft_length must be positive");
  if (!sample_rate || *sample_rate <= 0) return ctx.InputError(2, "sample_rate must be positive");
  const int64_t spectrum_bins = *dft_length / 2 + 1;
  // Allocating first also bounds num_mel_bins before the edge table is built.
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, type, {spectrum_bins, *mel_bins}));
  // Band edges: num_mel_bins + 2 points evenly spaced on the mel scale,
  // mapped back to Hz and then to (floored) spectrum bin indices.
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low_mel = to_mel(lower_hz), high_mel = to_mel(upper_hz);
  const int64_t points = *mel_bins + 2;
  const double mel_step = (high_mel - low_mel) / static_cast<double>(points);
  std::vector<int64_t> edge(static_cast<size_t>(points));
  for (int64_t i = 0; i < points; ++i) {
    const double mel = low_mel + static_cast<double>(i) * mel_step;
    const double hz = 700.0 * std::expm1(mel / 2595.0 * std::log(10.0));
    const double bin = std::floor(static_cast<double>(*dft_length + 1) * hz / static_cast<double>(*sample_rate));
    if (!(bin >= 0 && bin < static_cast<double>(spectrum_bins)))
      return ctx.InputError(4, "the band edge " + std::to_string(hz) + " Hz falls outside the " +
                                   std::to_string(spectrum_bins) + " spectrum bins (check lower/upper_edge_hertz against sample_rate)");
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  // Outputs may live in a reused arena: write every element.
  for (int64_t i = 0; i < y.num_elements(); ++i) WriteFromDouble(y, i, 0.0);
  for (int64_t m = 0; m < *mel_bins; ++m) {
    const int64_t left = edge[m], center = edge[m + 1], right = edge[m + 2];
    // Rising edge up to the peak of 1 at the center, then the falling edge.
    if (center == left) WriteFromDouble(y, center * *mel_bins + m, 1.0);
    for (int64_t j = left; center > left && j <= center; ++j)
      WriteFromDouble(y, j * *mel_bins + m, static_cast<double>(j - left) / static_cast<double>(center - left));
    for (int64_t j = center; j < right; ++j)
      WriteFromDouble(y, j * *mel_bins + m, static_cast<double>(right - j) / static_cast<double>(right - center));
  }
  return Status::Ok();
}

// ---- CumProd ----------------------------------------------------------------------

// `v` rounded to the precision of floating type `t`.
double RoundTo(DataType t, double v) {
  switch (t) {
    case DataType::kFloat: return static_cast<float>(v);
    case DataType::kFloat16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DataType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    default: return v;
  }
}

// Products of integers wrap like numpy's fixed-width arithmetic; floating
// products round to the element type after every step, as numpy does.
template <typename T, bool = std::is_integral_v<T>>
struct ProductAccumulator {
  using type = double;
};
template <typename T>
struct ProductAccumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void CumProdLine(const Tensor& x, Tensor& y, int64_t base, int64_t n, int64_t stride, bool exclusive, bool reverse) {
  using Acc = typename ProductAccumulator<T>::type;
  Acc acc = 1;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t at = base + (reverse ? n - 1 - s : s) * stride;
    if (exclusive) {
      if constexpr (std::is_integral_v<T>) y.data<T>()[at] = static_cast<T>(acc);
      else WriteFromDouble(y, at, acc);
    }
    if constexpr (std::is_integral_v<T>) acc = static_cast<Acc>(acc * static_cast<Acc>(x.data<T>()[at]));
    else acc = RoundTo(x.dtype(), acc * ReadAsDouble(x, at));
    if (!exclusive) {
      if constexpr (std::is_integral_v<T>) y.data<T>()[at] = static_cast<T>(acc);
      else WriteFromDouble(y, at, acc);
    }
  }
}

Status CumProdKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> axis_in, ScalarIntInput(ctx, 1));
  NEE_ASSIGN_OR_RETURN(int64_t exclusive, ctx.node().GetInt("exclusive", 0));
  NEE_ASSIGN_OR_RETURN(int64_t reverse, ctx.node().GetInt("reverse", 0));
  const int64_t rank = x->rank();
  if (!axis_in || *axis_in < -std::max<int64_t>(rank, 1) || *axis_in >= std::max<int64_t>(rank, 1))
    return ctx.InputError(1, "axis must be a scalar in [-rank, rank) for rank " + std::to_string(rank));
  const int64_t axis = rank == 0 ? 0 : (*axis_in < 0 ? *axis_in + rank : *axis_in);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  const int64_t n = rank == 0 ? 1 : x->dim(axis);
  const int64_t inner = rank == 0 ? 1 : ProductOf(x->dims(), static_cast<size_t>(axis) + 1);
  const int64_t outer = rank == 0 ? 1 : ProductOf(x->dims(), 0, static_cast<size_t>(axis));
  auto run = [&]<typename T>() {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        CumProdLine<T>(*x, y, o * n * inner + i, n, inner, exclusive != 0, reverse != 0);
  };
  switch (x->dtype()) {
    case DataType::kInt32: run.operator()<int32_t>(); break;
    case DataType::kInt64: run.operator()<int64_t>(); break;
    case DataType::kUint32: run.operator()<uint32_t>(); break;
    case DataType::kUint64: run.operator()<uint64_t>(); break;
    case DataType::kFloat: case DataType::kDouble: case DataType::kFloat16: case DataType::kBFloat16:
      run.operator()<float>();
      break;
    default:
      return NotImplemented(ctx.node().Describe() + ": " + nn::TypeError("CumProd", x->dtype()));
  }
  return Status::Ok();
}

// ---- Det --------------------------------------------------------------------------

Status DetInfer(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  std::optional<Shape> y;
  if (x->shape) {
    if (x->shape->size() < 2) return ctx.InputError(0, "must have rank >= 2 [*, M, M], got " + ShapeToString(*x->shape));
    const Dim& a = (*x->shape)[x->shape->size() - 2];
    const Dim& b = x->shape->back();
    if (nn::DimsConflict(a, b)) return ctx.InputError(0, "must hold square matrices, got " + ShapeToString(*x->shape));
    y = Shape(x->shape->begin(), x->shape->end() - 2);
  }
  ctx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
  return Status::Ok();
}

// Determinant by LU decomposition with partial pivoting (destroys `a`).
double Determinant(std::vector<double>& a, int64_t m) {
  double det = 1;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r)
      if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
    if (a[pivot * m + col] == 0) return 0;
    if (pivot != col) {
      for (int64_t c = 0; c < m; ++c) std::swap(a[col * m + c], a[pivot * m + c]);
      det = -det;
    }
    const double p = a[col * m + col];
    det *= p;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / p;
      if (f == 0) continue;
      for (int64_t c = col; c < m; ++c) a[r * m + c] -= f * a[col * m + c];
    }
  }
  return det;
}

Status DetKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(RequireFloat(ctx, *x));
  const int64_t rank = x->rank();
  if (rank < 2 || x->dim(rank - 1) != x->dim(rank - 2))
    return ctx.InputError(0, "must have shape [*, M, M], got " + DimsToString(x->dims()));
  const int64_t m = x->dim(rank - 1);
  std::vector<int64_t> y_dims(x->dims().begin(), x->dims().end() - 2);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), y_dims));
  nn::ComputeInput<double> xs(*x);
  nn::ComputeOutput<double> ys(y);
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < y.num_elements(); ++b) {
    std::copy(xs.data() + b * m * m, xs.data() + (b + 1) * m * m, a.begin());
    ys[b] = Determinant(a, m);
  }
  ys.Commit();
  return Status::Ok();
}

}  // namespace

void RegisterSignalOps(OpRegistry& registry) {
  registry.RegisterVersions("", "DFT", {17, 20}, DftInfer, DftKernel);
  registry.RegisterVersions("", "STFT", {17}, StftInfer, StftKernel);
  registry.RegisterVersions("", "HannWindow", {17}, WindowInfer, HannWindowKernel);
  registry.RegisterVersions("", "HammingWindow", {17}, WindowInfer, HammingWindowKernel);
  registry.RegisterVersions("", "BlackmanWindow", {17}, WindowInfer, BlackmanWindowKernel);
  registry.RegisterVersions("", "MelWeightMatrix", {17}, MelWeightMatrixInfer, MelWeightMatrixKernel);
  registry.RegisterVersions("", "CumProd", {26}, InferSameAsInput0, CumProdKernel);
  registry.RegisterVersions("", "Det", {11, 22}, DetInfer, DetKernel);
}

}  // namespace nee
