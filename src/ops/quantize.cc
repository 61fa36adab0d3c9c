// Operator family: Quantize. QuantizeLinear and DequantizeLinear (opset 10
// to the newest: per-tensor, per-axis and blocked scales; 8/16-bit integers,
// int4/uint4, int2/uint2, float8 and float4e2m1), DynamicQuantizeLinear,
// QLinearMatMul and QLinearConv. ONNX Runtime's com.microsoft QOperator ops
// (QLinearAdd, QGemm, ...) are the QuantizeContrib family, quantize_contrib.cc.
//
// Arithmetic follows onnx.reference: quotients are formed in double and then
// rounded to the precision numpy would have computed them in (which gives the
// same bits, because double has more than twice the precision of float), and
// integer results round half to even (np.rint) before saturating.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ir/float_formats.h"
#include "ops/dynamic_quantize.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

// ---- Element access for the quantized formats ------------------------------

// Any element a quantize op reads (inputs, scales, zero points) as double.
double ReadElement(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kUint2: return GetCrumb(t.data<uint8_t>(), i);
    case DataType::kInt2: return Int2FromCrumb(GetCrumb(t.data<uint8_t>(), i));
    case DataType::kFloat8E8M0: return Float8E8M0ToFloat(t.data<uint8_t>()[i]);
    default: return ReadAsDouble(t, i);
  }
}

// Rounds v to the precision of floating type `precision`, as if the
// operation producing v had been computed in that type.
double RoundToPrecision(double v, DataType precision) {
  switch (precision) {
    case DataType::kFloat: return static_cast<float>(v);
    case DataType::kFloat16: return HalfToFloat(FloatToHalf(static_cast<float>(v)));
    case DataType::kBFloat16: return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    default: return v;
  }
}

// The numpy result type of dividing/multiplying values of types a and b
// (int32 with anything is float64; mixed narrow floats go through float32).
DataType PromotedFloatType(DataType a, DataType b) {
  if (a == DataType::kInt32 || b == DataType::kInt32 || a == DataType::kDouble || b == DataType::kDouble)
    return DataType::kDouble;
  if (a == b) return a;
  return DataType::kFloat;
}

struct IntRange {
  double lo, hi;
};
bool QuantIntRange(DataType t, IntRange* r) {
  switch (t) {
    case DataType::kUint8: *r = {0, 255}; return true;
    case DataType::kInt8: *r = {-128, 127}; return true;
    case DataType::kUint16: *r = {0, 65535}; return true;
    case DataType::kInt16: *r = {-32768, 32767}; return true;
    case DataType::kInt32: *r = {-2147483648.0, 2147483647.0}; return true;
    case DataType::kUint4: *r = {0, 15}; return true;
    case DataType::kInt4: *r = {-8, 7}; return true;
    case DataType::kUint2: *r = {0, 3}; return true;
    case DataType::kInt2: *r = {-2, 1}; return true;
    default: return false;
  }
}

bool IsFloat8(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2 ||
         t == DataType::kFloat8E5M2FNUZ;
}

bool IsQuantizedType(DataType t) {
  IntRange r;
  return (QuantIntRange(t, &r) && t != DataType::kInt32) || IsFloat8(t) || t == DataType::kFloat4E2M1;
}

// Writes an integer value already clamped to the type's range. NaN (a NaN
// or infinite scale) passes any clamp and has no integer value: casting it
// is undefined, so it is written as 0.
void WriteInt(Tensor& t, int64_t i, double v) {
  if (std::isnan(v)) v = 0;
  switch (t.dtype()) {
    case DataType::kUint8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DataType::kUint16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case DataType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case DataType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DataType::kUint4: SetNibble(t.data<uint8_t>(), i, static_cast<uint8_t>(v)); break;
    case DataType::kInt4: SetNibble(t.data<uint8_t>(), i, static_cast<uint8_t>(static_cast<int>(v) & 0xF)); break;
    case DataType::kUint2: SetCrumb(t.data<uint8_t>(), i, static_cast<uint8_t>(v)); break;
    case DataType::kInt2: SetCrumb(t.data<uint8_t>(), i, static_cast<uint8_t>(static_cast<int>(v) & 0x3)); break;
    default: break;
  }
}

// Stores `quotient` (x / scale) plus `zero_point` into element i of a
// quantized tensor.
void StoreQuantized(Tensor& y, int64_t i, double quotient, double zero_point, bool saturate) {
  DataType t = y.dtype();
  IntRange range;
  if (QuantIntRange(t, &range)) {
    double v = std::nearbyint(quotient);  // round half to even
    if (std::isnan(v)) v = 0;
    v = std::clamp(v + zero_point, range.lo, range.hi);
    WriteInt(y, i, v);
  } else if (IsFloat8(t)) {
    // onnx.reference ignores the zero point for float8.
    y.data<uint8_t>()[i] = FloatToFloat8(static_cast<float>(quotient), t, saturate);
  } else if (t == DataType::kFloat4E2M1) {
    SetNibble(y.data<uint8_t>(), i, FloatToFloat4E2M1(static_cast<float>(quotient + zero_point)));
  }
}

// ---- Scale / zero-point layout ---------------------------------------------

// Maps an element of x to the index of its scale (and zero point).
struct ScaleLayout {
  enum class Kind { kPerTensor, kPerAxis, kBlocked } kind = Kind::kPerTensor;
  int64_t axis_dim = 1;    // x's size along the axis
  int64_t inner = 1;       // product of x's dims after the axis
  int64_t block = 1;       // block size (blocked)
  int64_t scale_axis = 1;  // scale's size along the axis (blocked)

  int64_t ScaleIndex(int64_t i) const {
    switch (kind) {
      case Kind::kPerTensor: return 0;
      case Kind::kPerAxis: return (i / inner) % axis_dim;
      case Kind::kBlocked: {
        int64_t inner_index = i % inner;
        int64_t along = (i / inner) % axis_dim;
        int64_t outer = i / (inner * axis_dim);
        return (outer * scale_axis + along / block) * inner + inner_index;
      }
    }
    return 0;
  }
};

// Checks the scale's shape against x and the axis / block_size attributes.
// `scale_input` is the input index of the scale (for messages).
template <typename Ctx>
Result<ScaleLayout> MakeScaleLayout(const Ctx& ctx, const std::vector<int64_t>& x_dims,
                                    const std::vector<int64_t>& scale_dims, size_t scale_input) {
  ScaleLayout layout;
  const int64_t rank = static_cast<int64_t>(x_dims.size());
  int64_t scale_count = ProductOf(scale_dims);
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis", 1));
  NEE_ASSIGN_OR_RETURN(int64_t block, ctx.node().GetInt("block_size", 0));
  if (block < 0) return ctx.Error("block_size must be positive, got " + std::to_string(block));
  if (block == 0 && scale_count == 1 && scale_dims.size() <= 1) return layout;
  if (rank == 0) return ctx.InputError(scale_input, "must be a scalar for a scalar input, got " + DimsToString(scale_dims));
  if (axis < -rank || axis >= rank)
    return ctx.Error("axis " + std::to_string(axis) + " is out of range for input rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  layout.axis_dim = x_dims[static_cast<size_t>(axis)];
  layout.inner = ProductOf(x_dims, static_cast<size_t>(axis) + 1);
  if (block == 0) {
    if (scale_dims.size() != 1 || scale_dims[0] != layout.axis_dim)
      return ctx.InputError(scale_input, "must be a scalar or a 1-D tensor of length " +
                                             std::to_string(layout.axis_dim) + " (the size of axis " +
                                             std::to_string(axis) + "), got shape " + DimsToString(scale_dims));
    layout.kind = ScaleLayout::Kind::kPerAxis;
    return layout;
  }
  // Blocked: same shape as x except along the axis, where it holds one entry per block.
  bool ok = static_cast<int64_t>(scale_dims.size()) == rank;
  for (int64_t d = 0; ok && d < rank; ++d)
    if (d != axis) ok = scale_dims[static_cast<size_t>(d)] == x_dims[static_cast<size_t>(d)];
  int64_t blocks = ok ? scale_dims[static_cast<size_t>(axis)] : 0;
  if (ok) ok = blocks > 0 ? (blocks * block >= layout.axis_dim && (blocks - 1) * block < layout.axis_dim)
                          : layout.axis_dim == 0;
  if (!ok)
    return ctx.InputError(scale_input, "has shape " + DimsToString(scale_dims) +
                                           ", which does not match input shape " + DimsToString(x_dims) +
                                           " blocked by " + std::to_string(block) + " along axis " +
                                           std::to_string(axis));
  layout.kind = ScaleLayout::Kind::kBlocked;
  layout.block = block;
  layout.scale_axis = blocks;
  return layout;
}

// Zero point must match the scale's shape and (where given) be the declared type.
template <typename Ctx>
Status CheckZeroPoint(const Ctx& ctx, const Tensor& scale, const Tensor* zero_point, size_t zp_input) {
  if (!zero_point) return Status::Ok();
  if (zero_point->num_elements() != scale.num_elements() ||
      (zero_point->rank() > 0 && scale.rank() > 0 && zero_point->dims() != scale.dims()))
    return ctx.InputError(zp_input, "(zero point) must have the scale's shape " + DimsToString(scale.dims()) +
                                        ", got " + DimsToString(zero_point->dims()));
  return Status::Ok();
}

// ---- QuantizeLinear --------------------------------------------------------

// The output element type: the zero point's type, else output_dtype, else uint8.
template <typename Ctx>
Result<DataType> QuantizeOutputType(const Ctx& ctx, const Node& node, bool has_zero_point, DataType zp_type) {
  NEE_ASSIGN_OR_RETURN(int64_t output_dtype, node.GetInt("output_dtype", 0));
  if (output_dtype != 0 && !IsValidDataType(static_cast<int32_t>(output_dtype)))
    return ctx.Error("output_dtype " + std::to_string(output_dtype) + " is not a valid type");
  DataType declared = static_cast<DataType>(output_dtype);
  if (has_zero_point) {
    if (output_dtype != 0 && declared != zp_type)
      return ctx.Error(std::string("output_dtype ") + DataTypeName(declared) + " differs from the zero point type " +
                       DataTypeName(zp_type));
    declared = zp_type;
  } else if (output_dtype == 0) {
    declared = DataType::kUint8;
  }
  if (!IsQuantizedType(declared))
    return NotImplemented(node.Describe() + ": quantizing to " + DataTypeName(declared) + " is not supported");
  return declared;
}

Status InferQuantizeLinear(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  bool has_zp = ctx.has_input(2);
  DataType zp_type = has_zp ? ctx.input_type(2).elem_type : DataType::kUndefined;
  if (has_zp && zp_type == DataType::kUndefined) {
    ctx.output_types[0] = TypeInfo::Tensor(DataType::kUndefined, x->shape);
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(DataType out, QuantizeOutputType(ctx, ctx.node, has_zp, zp_type));
  ctx.output_types[0] = TypeInfo::Tensor(out, x->shape);
  return Status::Ok();
}

Status QuantizeLinearKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* zp, OptionalInputTensor(ctx, 2));
  const DataType xt = x->dtype(), st = scale->dtype();
  if (!IsFloatingPoint(xt) && xt != DataType::kInt32)
    return NotImplemented(ctx.node().Describe() + ": QuantizeLinear does not support input type " + DataTypeName(xt));
  if (!IsFloatingPoint(st) && st != DataType::kInt32)
    return ctx.InputError(1, std::string("(scale) must be a float type, got ") + DataTypeName(st));
  NEE_ASSIGN_OR_RETURN(DataType out_type,
                       QuantizeOutputType(ctx, ctx.node(), zp != nullptr, zp ? zp->dtype() : DataType::kUndefined));
  NEE_ASSIGN_OR_RETURN(ScaleLayout layout, MakeScaleLayout(ctx, x->dims(), scale->dims(), 1));
  NEE_RETURN_IF_ERROR(CheckZeroPoint(ctx, *scale, zp, 2));
  NEE_ASSIGN_OR_RETURN(int64_t saturate, ctx.node().GetInt("saturate", 1));
  NEE_ASSIGN_OR_RETURN(int64_t precision_attr, ctx.node().GetInt("precision", 0));
  DataType precision = precision_attr != 0 ? static_cast<DataType>(precision_attr)
                                           : PromotedFloatType(x->dtype(), scale->dtype());
  if (precision != DataType::kFloat && precision != DataType::kFloat16 && precision != DataType::kBFloat16 &&
      precision != DataType::kDouble)
    return ctx.Error("precision " + std::to_string(precision_attr) + " must be a float type");
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, out_type, x->dims()));
  // Sub-byte outputs share bytes between neighbours: run those serially.
  const bool packed = IsSubByte(out_type);
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t s = layout.ScaleIndex(i);
      double xv = RoundToPrecision(ReadElement(*x, i), precision);
      double sv = RoundToPrecision(ReadElement(*scale, s), precision);
      double q = RoundToPrecision(xv / sv, precision);
      StoreQuantized(y, i, q, zp ? ReadElement(*zp, s) : 0.0, saturate != 0);
    }
  };
  if (packed) body(0, x->num_elements());
  else ctx.ParallelFor(x->num_elements(), 4096, body);
  return Status::Ok();
}

// ---- DequantizeLinear ------------------------------------------------------

template <typename Ctx>
Result<DataType> DequantizeOutputType(const Ctx& ctx, const Node& node, DataType scale_type) {
  NEE_ASSIGN_OR_RETURN(int64_t output_dtype, node.GetInt("output_dtype", 0));
  if (output_dtype == 0) {
    if (scale_type == DataType::kFloat8E8M0)
      return ctx.Error("a float8e8m0 scale needs the output_dtype attribute");
    return scale_type;
  }
  DataType t = static_cast<DataType>(output_dtype);
  if (t != DataType::kFloat && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return ctx.Error("output_dtype " + std::to_string(output_dtype) + " must be float, float16 or bfloat16");
  return t;
}

Status InferDequantizeLinear(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* scale, InputTensorType(ctx, 1));
  NEE_ASSIGN_OR_RETURN(DataType out, DequantizeOutputType(ctx, ctx.node, scale->elem_type));
  ctx.output_types[0] = TypeInfo::Tensor(out, x->shape);
  return Status::Ok();
}

Status DequantizeLinearKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* zp, OptionalInputTensor(ctx, 2));
  const DataType xt = x->dtype();
  if (!IsQuantizedType(xt) && xt != DataType::kInt32)
    return NotImplemented(ctx.node().Describe() + ": DequantizeLinear does not support input type " +
                          DataTypeName(xt));
  // Float8 and float4 carry no zero point (onnx.reference ignores it).
  if (IsFloat8(xt) || xt == DataType::kFloat4E2M1) zp = nullptr;
  if (zp && zp->dtype() != xt)
    return ctx.InputError(2, std::string("(zero point) must have the input's type ") + DataTypeName(xt) +
                                 ", got " + DataTypeName(zp->dtype()));
  if (!IsFloatingPoint(scale->dtype()))
    return ctx.InputError(1, std::string("(scale) must be a float type, got ") + DataTypeName(scale->dtype()));
  NEE_ASSIGN_OR_RETURN(DataType out_type, DequantizeOutputType(ctx, ctx.node(), scale->dtype()));
  NEE_ASSIGN_OR_RETURN(ScaleLayout layout, MakeScaleLayout(ctx, x->dims(), scale->dims(), 1));
  NEE_RETURN_IF_ERROR(CheckZeroPoint(ctx, *scale, zp, 2));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, out_type, x->dims()));
  // numpy: x.astype(float32) - zero_point, times the scale; the float32
  // product of two exact operands rounds once, so double then narrow matches.
  DataType product_type = PromotedFloatType(xt == DataType::kInt32 ? DataType::kInt32 : DataType::kFloat,
                                            scale->dtype());
  ctx.ParallelFor(x->num_elements(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t s = layout.ScaleIndex(i);
      double xv = static_cast<float>(ReadElement(*x, i));
      double centered = zp ? xv - ReadElement(*zp, s) : xv;
      double v = RoundToPrecision(centered * ReadElement(*scale, s), product_type);
      WriteFromDouble(y, i, v);
    }
  });
  return Status::Ok();
}

// ---- DynamicQuantizeLinear -------------------------------------------------

Status InferDynamicQuantizeLinear(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kUint8, x->shape);
  if (ctx.num_outputs() > 1) ctx.output_types[1] = TypeInfo::Tensor(DataType::kFloat, Shape{});
  if (ctx.num_outputs() > 2) ctx.output_types[2] = TypeInfo::Tensor(DataType::kUint8, Shape{});
  return Status::Ok();
}

Status DynamicQuantizeLinearKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat)
    return NotImplemented(ctx.node().Describe() + ": DynamicQuantizeLinear supports float input only, got " +
                          DataTypeName(x->dtype()));
  const float* xs = x->data<float>();
  const int64_t n = x->num_elements();
  // The range always includes 0 so that 0 is exactly representable.
  float max_x = 0, min_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_x = std::max(max_x, xs[i]);
    min_x = std::min(min_x, xs[i]);
  }
  const float qmin = 0, qmax = 255;
  const DynamicQuantParams p = DynamicQuantizeParams(min_x, max_x);
  const float scale = p.scale, zero_point = p.zero_point;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kUint8, x->dims()));
  ctx.ParallelFor(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float q = std::nearbyint(xs[i] / scale) + zero_point;
      y.data<uint8_t>()[i] = static_cast<uint8_t>(std::isnan(q) ? zero_point : std::clamp(q, qmin, qmax));
    }
  });
  return WriteDynamicQuantizeParams(ctx, p);
}

// ---- QLinearMatMul ---------------------------------------------------------

// numpy matmul shapes: 1-D operands are promoted and the added dim dropped;
// batch dims broadcast.
struct MatMulDims {
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> a_batch, b_batch, batch, out;
};

template <typename Ctx>
Result<MatMulDims> MatMulShape(const Ctx& ctx, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) return ctx.Error("QLinearMatMul inputs must have rank >= 1");
  MatMulDims d;
  d.m = a.size() == 1 ? 1 : a[a.size() - 2];
  d.k = a.back();
  int64_t kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  d.n = b.size() == 1 ? 1 : b.back();
  if (kb != d.k)
    return ctx.Error("inner dimensions differ: a " + DimsToString(a) + " and b " + DimsToString(b));
  if (a.size() > 2) d.a_batch.assign(a.begin(), a.end() - 2);
  if (b.size() > 2) d.b_batch.assign(b.begin(), b.end() - 2);
  auto batch = BroadcastDims(d.a_batch, d.b_batch);
  if (!batch.ok()) return ctx.Error(batch.status().message());
  d.batch = batch.value();
  d.out = d.batch;
  if (a.size() > 1) d.out.push_back(d.m);
  if (b.size() > 1) d.out.push_back(d.n);
  return d;
}

Status InferQLinearMatMul(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, 3));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* yzp, InputTensorType(ctx, 7));
  std::vector<int64_t> ad, bd;
  std::optional<Shape> shape;
  if (a->shape && b->shape && ShapeIsStatic(*a->shape, &ad) && ShapeIsStatic(*b->shape, &bd)) {
    NEE_ASSIGN_OR_RETURN(MatMulDims d, MatMulShape(ctx, ad, bd));
    shape = ShapeFromDims(d.out);
  }
  ctx.output_types[0] = TypeInfo::Tensor(yzp->elem_type, shape);
  return Status::Ok();
}

// A scale or zero point that is a scalar, or 1-D with `count` entries.
template <typename Ctx>
Status CheckScalarOrVector(const Ctx& ctx, const Tensor& t, size_t input, int64_t count, const char* what) {
  if (t.num_elements() == 1 && t.rank() <= 1) return Status::Ok();
  if (t.rank() == 1 && t.dim(0) == count) return Status::Ok();
  return ctx.InputError(input, std::string("(") + what + ") must be a scalar or have " + std::to_string(count) +
                                   " entries, got shape " + DimsToString(t.dims()));
}

double At(const Tensor& t, int64_t i) { return ReadElement(t, t.num_elements() == 1 ? 0 : i); }

// The requantization multiplier in_scale * w_scale / out_scale, computed in
// the scales' precision as numpy does.
double Multiplier(double a_scale, double b_scale, double y_scale, DataType scale_type) {
  double ab = RoundToPrecision(a_scale * b_scale, scale_type);
  return RoundToPrecision(ab / y_scale, scale_type);
}

Status QLinearMatMulKernel(KernelContext& ctx) {
  const Tensor* in[8];
  for (size_t i = 0; i < 8; ++i) {
    NEE_ASSIGN_OR_RETURN(in[i], ctx.InputTensor(i));
  }
  const Tensor &a = *in[0], &a_scale = *in[1], &a_zp = *in[2], &b = *in[3], &b_scale = *in[4], &b_zp = *in[5],
               &y_scale = *in[6], &y_zp = *in[7];
  NEE_ASSIGN_OR_RETURN(MatMulDims d, MatMulShape(ctx, a.dims(), b.dims()));
  IntRange range;
  if (!QuantIntRange(y_zp.dtype(), &range) || !QuantIntRange(a.dtype(), &range) || !QuantIntRange(b.dtype(), &range))
    return NotImplemented(ctx.node().Describe() + ": QLinearMatMul supports integer inputs only");
  QuantIntRange(y_zp.dtype(), &range);
  if (a_zp.dtype() != a.dtype()) return ctx.InputError(2, "(a_zero_point) must have a's type");
  if (b_zp.dtype() != b.dtype()) return ctx.InputError(5, "(b_zero_point) must have b's type");
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, a_scale, 1, d.m, "a_scale"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, a_zp, 2, d.m, "a_zero_point"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, b_scale, 4, d.n, "b_scale"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, b_zp, 5, d.n, "b_zero_point"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, y_scale, 6, 1, "y_scale"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, y_zp, 7, 1, "y_zero_point"));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, y_zp.dtype(), d.out));
  const DataType scale_type = a_scale.dtype();
  const int64_t batches = ProductOf(d.batch);
  const int64_t m = d.m, n = d.n, k = d.k;
  // Offsets of each batch's matrix in a and b (broadcast batch dims).
  std::vector<int64_t> a_off(static_cast<size_t>(batches)), b_off(static_cast<size_t>(batches));
  {
    std::vector<int64_t> ab = d.a_batch, bb = d.b_batch;
    int64_t bi = 0;
    ForEachBroadcastBlock(d.batch.empty() ? std::vector<int64_t>{1} : d.batch,
                          {ab.empty() ? std::vector<int64_t>{1} : ab, bb.empty() ? std::vector<int64_t>{1} : bb},
                          [&](int64_t, const int64_t* offs, const int64_t* steps, int64_t count) {
                            for (int64_t c = 0; c < count; ++c, ++bi) {
                              a_off[static_cast<size_t>(bi)] = (offs[0] + c * steps[0]) * m * k;
                              b_off[static_cast<size_t>(bi)] = (offs[1] + c * steps[1]) * k * n;
                            }
                          });
  }
  const double yzp = ReadElement(y_zp, 0), ys = ReadElement(y_scale, 0);
  ctx.ParallelFor(batches * m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t batch = row / m, i = row % m;
      double azp = At(a_zp, i), as = At(a_scale, i);
      for (int64_t j = 0; j < n; ++j) {
        double bzp = At(b_zp, j);
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          int64_t av = static_cast<int64_t>(ReadElement(a, a_off[static_cast<size_t>(batch)] + i * k + p) - azp);
          int64_t bv = static_cast<int64_t>(ReadElement(b, b_off[static_cast<size_t>(batch)] + p * n + j) - bzp);
          acc += av * bv;
        }
        double v = static_cast<double>(static_cast<int32_t>(acc)) * Multiplier(as, At(b_scale, j), ys, scale_type) + yzp;
        WriteInt(y, row * n + j, std::clamp(std::nearbyint(v), range.lo, range.hi));
      }
    }
  });
  return Status::Ok();
}

// ---- QLinearConv -----------------------------------------------------------

struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  std::vector<int64_t> in_spatial, kernel, strides, dilations, pad_begin, out_spatial;
};

// Works out output dims from the attributes; x and w dims must be known.
template <typename Ctx>
Result<ConvGeometry> MakeConvGeometry(const Ctx& ctx, const Node& node, const std::vector<int64_t>& x,
                                      const std::vector<int64_t>& w) {
  if (x.size() < 3 || w.size() != x.size())
    return ctx.Error("x must be [N,C,D1,...] and w [M,C/group,k1,...] of the same rank, got " + DimsToString(x) +
                     " and " + DimsToString(w));
  ConvGeometry g;
  const size_t sp = x.size() - 2;
  g.batch = x[0];
  g.in_channels = x[1];
  g.out_channels = w[0];
  NEE_ASSIGN_OR_RETURN(g.group, node.GetInt("group", 1));
  if (g.group <= 0 || g.in_channels % g.group != 0 || g.out_channels % g.group != 0 ||
      w[1] * g.group != g.in_channels)
    return ctx.Error("channels do not fit group " + std::to_string(g.group) + ": x " + DimsToString(x) + ", w " +
                     DimsToString(w));
  g.in_spatial.assign(x.begin() + 2, x.end());
  std::vector<int64_t> w_kernel(w.begin() + 2, w.end());
  NEE_ASSIGN_OR_RETURN(g.kernel, node.GetInts("kernel_shape", w_kernel));
  NEE_ASSIGN_OR_RETURN(g.strides, node.GetInts("strides", std::vector<int64_t>(sp, 1)));
  NEE_ASSIGN_OR_RETURN(g.dilations, node.GetInts("dilations", std::vector<int64_t>(sp, 1)));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.GetInts("pads", std::vector<int64_t>(2 * sp, 0)));
  NEE_ASSIGN_OR_RETURN(std::string auto_pad, node.GetString("auto_pad", "NOTSET"));
  if (g.kernel != w_kernel || g.strides.size() != sp || g.dilations.size() != sp || pads.size() != 2 * sp)
    return ctx.Error("kernel_shape, strides, dilations or pads do not match the " + std::to_string(sp) +
                     " spatial dims of w " + DimsToString(w));
  g.pad_begin.resize(sp);
  g.out_spatial.resize(sp);
  for (size_t i = 0; i < sp; ++i) {
    if (g.strides[i] <= 0 || g.dilations[i] <= 0 || pads[i] < 0 || pads[i + sp] < 0)
      return ctx.Error("strides and dilations must be positive and pads non-negative");
    int64_t extent = g.dilations[i] * (g.kernel[i] - 1) + 1;
    int64_t in = g.in_spatial[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in + g.strides[i] - 1) / g.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[i] + extent - in);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.out_spatial[i] = out;
    } else if (auto_pad == "VALID") {
      g.pad_begin[i] = 0;
      g.out_spatial[i] = in >= extent ? (in - extent) / g.strides[i] + 1 : 0;
    } else if (auto_pad == "NOTSET") {
      g.pad_begin[i] = pads[i];
      int64_t padded = in + pads[i] + pads[i + sp];
      g.out_spatial[i] = padded >= extent ? (padded - extent) / g.strides[i] + 1 : 0;
    } else {
      return ctx.Error("unknown auto_pad '" + auto_pad + "'");
    }
  }
  return g;
}

Status InferQLinearConv(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* w, InputTensorType(ctx, 3));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* yzp, InputTensorType(ctx, 7));
  std::vector<int64_t> xd, wd;
  std::optional<Shape> shape;
  if (x->shape && w->shape && ShapeIsStatic(*x->shape, &xd) && ShapeIsStatic(*w->shape, &wd)) {
    NEE_ASSIGN_OR_RETURN(ConvGeometry g, MakeConvGeometry(ctx, ctx.node, xd, wd));
    std::vector<int64_t> out{g.batch, g.out_channels};
    out.insert(out.end(), g.out_spatial.begin(), g.out_spatial.end());
    shape = ShapeFromDims(out);
  } else if (x->shape) {
    shape = Shape(x->shape->size(), Dim::Unknown());
  }
  ctx.output_types[0] = TypeInfo::Tensor(yzp->elem_type, shape);
  return Status::Ok();
}

Status QLinearConvKernel(KernelContext& ctx) {
  const Tensor* in[8];
  for (size_t i = 0; i < 8; ++i) {
    NEE_ASSIGN_OR_RETURN(in[i], ctx.InputTensor(i));
  }
  const Tensor &x = *in[0], &x_scale = *in[1], &x_zp = *in[2], &w = *in[3], &w_scale = *in[4], &w_zp = *in[5],
               &y_scale = *in[6], &y_zp = *in[7];
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, OptionalInputTensor(ctx, 8));
  NEE_ASSIGN_OR_RETURN(ConvGeometry g, MakeConvGeometry(ctx, ctx.node(), x.dims(), w.dims()));
  IntRange range;
  if (!QuantIntRange(x.dtype(), &range) || !QuantIntRange(w.dtype(), &range) || !QuantIntRange(y_zp.dtype(), &range))
    return NotImplemented(ctx.node().Describe() + ": QLinearConv supports 8-bit integer inputs only");
  QuantIntRange(y_zp.dtype(), &range);
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, x_scale, 1, 1, "x_scale"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, x_zp, 2, 1, "x_zero_point"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, w_scale, 4, g.out_channels, "w_scale"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, w_zp, 5, g.out_channels, "w_zero_point"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, y_scale, 6, 1, "y_scale"));
  NEE_RETURN_IF_ERROR(CheckScalarOrVector(ctx, y_zp, 7, 1, "y_zero_point"));
  if (bias && (bias->dtype() != DataType::kInt32 || bias->rank() != 1 || bias->dim(0) != g.out_channels))
    return ctx.InputError(8, "(B) must be int32 of shape [" + std::to_string(g.out_channels) + "], got " +
                                 bias->Describe());
  std::vector<int64_t> out_dims{g.batch, g.out_channels};
  out_dims.insert(out_dims.end(), g.out_spatial.begin(), g.out_spatial.end());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, y_zp.dtype(), out_dims));

  const size_t sp = g.in_spatial.size();
  const int64_t out_plane = ProductOf(g.out_spatial), in_plane = ProductOf(g.in_spatial);
  const int64_t kernel_size = ProductOf(g.kernel);
  const int64_t in_per_group = g.in_channels / g.group, out_per_group = g.out_channels / g.group;
  const double xzp = ReadElement(x_zp, 0), ys = ReadElement(y_scale, 0), yzp = ReadElement(y_zp, 0);
  const double xs = ReadElement(x_scale, 0);
  ctx.ParallelFor(g.batch * g.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o_idx(sp), k_idx(sp);
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t batch = nm / g.out_channels, oc = nm % g.out_channels;
      const int64_t grp = oc / out_per_group;
      const double wzp = At(w_zp, oc);
      const double mult = Multiplier(xs, At(w_scale, oc), ys, x_scale.dtype());
      for (int64_t o = 0; o < out_plane; ++o) {
        for (size_t d = sp, rem = static_cast<size_t>(o); d-- > 0;) {
          o_idx[d] = static_cast<int64_t>(rem) % g.out_spatial[d];
          rem /= static_cast<size_t>(g.out_spatial[d]);
        }
        int64_t acc = bias ? bias->data<int32_t>()[oc] : 0;
        for (int64_t ic = 0; ic < in_per_group; ++ic) {
          const int64_t x_base = (batch * g.in_channels + grp * in_per_group + ic) * in_plane;
          const int64_t w_base = (oc * in_per_group + ic) * kernel_size;
          for (int64_t kk = 0; kk < kernel_size; ++kk) {
            int64_t rem = kk, x_off = 0;
            bool inside = true;
            for (size_t d = sp; d-- > 0;) {
              k_idx[d] = rem % g.kernel[d];
              rem /= g.kernel[d];
            }
            for (size_t d = 0; d < sp && inside; ++d) {
              int64_t pos = o_idx[d] * g.strides[d] - g.pad_begin[d] + k_idx[d] * g.dilations[d];
              inside = pos >= 0 && pos < g.in_spatial[d];
              x_off = x_off * g.in_spatial[d] + pos;
            }
            if (!inside) continue;  // padding contributes x_zero_point - x_zero_point = 0
            int64_t xv = static_cast<int64_t>(ReadElement(x, x_base + x_off) - xzp);
            int64_t wv = static_cast<int64_t>(ReadElement(w, w_base + kk) - wzp);
            acc += xv * wv;
          }
        }
        double v = static_cast<double>(static_cast<int32_t>(acc)) * mult + yzp;
        WriteInt(y, nm * out_plane + o, std::nearbyint(std::clamp(v, range.lo, range.hi)));
      }
    }
  });
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeOps(OpRegistry& registry) {
  registry.RegisterVersions("", "QuantizeLinear", {10, 13, 19, 21, 23, 24, 25, 28}, InferQuantizeLinear,
                            QuantizeLinearKernel);
  registry.RegisterVersions("", "DequantizeLinear", {10, 13, 19, 21, 23, 24, 25, 28}, InferDequantizeLinear,
                            DequantizeLinearKernel);
  registry.RegisterVersions("", "DynamicQuantizeLinear", {11}, InferDynamicQuantizeLinear, DynamicQuantizeLinearKernel);
  registry.RegisterVersions("", "QLinearMatMul", {10, 21}, InferQLinearMatMul, QLinearMatMulKernel);
  registry.RegisterVersions("", "QLinearConv", {10}, InferQLinearConv, QLinearConvKernel);
}

}  // namespace nee
