// Operator family: ONNX Runtime's com.microsoft QOperator ops that
// onnxruntime.quantization writes: QLinearAdd, QLinearMul, QLinearConcat,
// QLinearGlobalAveragePool, QLinearAveragePool, QGemm, QLinearSigmoid, QLinearLeakyRelu,
// QLinearSoftmax. Split from quantize.cc (the standard QuantizeLinear,
// DequantizeLinear, QLinearMatMul and QLinearConv) to keep each file readable
// whole; the two share no helper, since these follow ONNX Runtime's float
// arithmetic where the standard ops follow onnx.reference's double.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

// ---- com.microsoft QOperator ops (ONNX Runtime's quantize_static, QOperator format) ------------------
// onnxruntime.quantization writes these contrib ops next to the standard QLinearConv / QLinearMatMul.
// Each dequantizes, applies the float op and requantizes; like ONNX Runtime's kernels the arithmetic is
// done in float (scale ratios formed first), rounding half to even and saturating to the output type.

// Reads a uint8 / int8 element as an integer; other types are refused by CheckQuantized8.
int32_t Quantized8At(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kUint8 ? static_cast<int32_t>(t.data<uint8_t>()[i])
                                       : static_cast<int32_t>(t.data<int8_t>()[i]);
}

Status CheckQuantized8(const KernelContext& ctx, const Tensor& t, size_t input) {
  if (t.dtype() != DataType::kUint8 && t.dtype() != DataType::kInt8)
    return ctx.InputError(input, std::string("must be uint8 or int8, got ") + DataTypeName(t.dtype()));
  return Status::Ok();
}

// A per-tensor scale (float scalar) and its optional zero point (scalar of the data's type).
struct QuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

Result<QuantParams> ReadQuantParams(const KernelContext& ctx, size_t scale_input, size_t zp_input,
                                    DataType data_type) {
  QuantParams q;
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(scale_input));
  if (scale->num_elements() != 1 || scale->dtype() != DataType::kFloat)
    return ctx.InputError(scale_input, "(scale) must be a float scalar, got " + scale->Describe());
  q.scale = scale->data<float>()[0];
  if (ctx.has_input(zp_input)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* zp, ctx.InputTensor(zp_input));
    if (zp->num_elements() != 1 || zp->dtype() != data_type)
      return ctx.InputError(zp_input, std::string("(zero point) must be a ") + DataTypeName(data_type) +
                                          " scalar, got " + zp->Describe());
    q.zero_point = Quantized8At(*zp, 0);
  }
  return q;
}

// Stores round(value) + zero_point, saturated: ONNX Runtime rounds (half to even) before adding the zero point.
void StoreQuantized8(Tensor& y, int64_t i, float value, int32_t zero_point) {
  const bool is_u8 = y.dtype() == DataType::kUint8;
  float v = std::nearbyint(value);
  if (std::isnan(v)) v = 0;
  v = std::clamp(v + static_cast<float>(zero_point), is_u8 ? 0.0f : -128.0f, is_u8 ? 255.0f : 127.0f);
  if (is_u8) {
    y.data<uint8_t>()[i] = static_cast<uint8_t>(v);
  } else {
    y.data<int8_t>()[i] = static_cast<int8_t>(v);
  }
}

// The output type of a QLinear op: its zero point's type when given, else the first input's.
DataType QLinearOutputType(const InferenceContext& ctx, size_t zp_input, size_t data_input) {
  if (ctx.has_input(zp_input) && ctx.input_type(zp_input).elem_type != DataType::kUndefined)
    return ctx.input_type(zp_input).elem_type;
  return ctx.has_input(data_input) ? ctx.input_type(data_input).elem_type : DataType::kUndefined;
}

// QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp?): broadcasting.
Status InferQLinearBinary(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, 3));
  std::optional<Shape> shape;
  if (a->shape && b->shape) {
    auto s = BroadcastShapes(*a->shape, *b->shape);
    if (!s.ok()) return ctx.Error(s.status().message());
    shape = s.value();
  }
  ctx.output_types[0] = TypeInfo::Tensor(QLinearOutputType(ctx, 7, 0), shape);
  return Status::Ok();
}

template <bool kMul>
Status QLinearBinaryKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(3));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *a, 0));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *b, 3));
  if (a->dtype() != b->dtype()) return ctx.InputError(3, "must have the type of input 0");
  NEE_ASSIGN_OR_RETURN(QuantParams qa, ReadQuantParams(ctx, 1, 2, a->dtype()));
  NEE_ASSIGN_OR_RETURN(QuantParams qb, ReadQuantParams(ctx, 4, 5, b->dtype()));
  NEE_ASSIGN_OR_RETURN(QuantParams qc, ReadQuantParams(ctx, 6, 7, a->dtype()));
  auto out_dims = BroadcastDims(a->dims(), b->dims());
  if (!out_dims.ok()) return ctx.Error(out_dims.status().message());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, a->dtype(), out_dims.value()));
  if (y.num_elements() == 0) return Status::Ok();
  const float ratio_a = qa.scale / qc.scale, ratio_b = qb.scale / qc.scale;
  const float ratio_ab = qa.scale * qb.scale / qc.scale;
  ForEachBroadcastBlock(out_dims.value(), {a->dims(), b->dims()},
                        [&](int64_t out, const int64_t* offs, const int64_t* steps, int64_t count) {
                          for (int64_t c = 0; c < count; ++c) {
                            float va = static_cast<float>(Quantized8At(*a, offs[0] + c * steps[0]) - qa.zero_point);
                            float vb = static_cast<float>(Quantized8At(*b, offs[1] + c * steps[1]) - qb.zero_point);
                            float v = kMul ? va * vb * ratio_ab : ratio_a * va + ratio_b * vb;
                            StoreQuantized8(y, out + c, v, qc.zero_point);
                          }
                        });
  return Status::Ok();
}

// QLinearConcat (Y_scale, Y_zp, then (X_i, X_i_scale, X_i_zp) triples), attribute axis.
Status InferQLinearConcat(InferenceContext& ctx) {
  // The declaration's variadic formal admits any count from 3 on; ONNX
  // Runtime's kernel takes (tensor, scale, zero point) triples, at least one,
  // and refuses other counts when the session is created: so does nee.
  const size_t n = ctx.num_inputs();
  if (n < 5 || (n - 2) % 3 != 0 || n > 2 + 3 * 1024)
    return ctx.Error("takes Y_scale, Y_zero_point, then one to 1024 (tensor, scale, zero point) triples: got " +
                     std::to_string(n) + " inputs");
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node.GetInt("axis", 0));
  std::optional<Shape> shape;
  std::vector<int64_t> out;
  bool known = ctx.num_inputs() >= 5 && (ctx.num_inputs() - 2) % 3 == 0;
  for (size_t i = 2; known && i < ctx.num_inputs(); i += 3) {
    const TypeInfo& t = ctx.input_type(i);
    std::vector<int64_t> dims;
    if (!t.shape || !ShapeIsStatic(*t.shape, &dims)) {
      known = false;
      break;
    }
    if (out.empty()) {
      if (dims.empty() || axis < -static_cast<int64_t>(dims.size()) || axis >= static_cast<int64_t>(dims.size()))
        return ctx.Error("axis " + std::to_string(axis) + " is out of range for input " + std::to_string(i));
      if (axis < 0) axis += static_cast<int64_t>(dims.size());
      out = dims;
      continue;
    }
    if (dims.size() != out.size()) return ctx.InputError(i, "has a different rank from the first input");
    out[static_cast<size_t>(axis)] += dims[static_cast<size_t>(axis)];
  }
  if (known && !out.empty()) shape = ShapeFromDims(out);
  ctx.output_types[0] = TypeInfo::Tensor(QLinearOutputType(ctx, 1, 2), shape);
  return Status::Ok();
}

Status QLinearConcatKernel(KernelContext& ctx) {
  const size_t n = ctx.num_inputs();
  if (n < 5 || (n - 2) % 3 != 0)
    return ctx.Error("expects Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got " +
                     std::to_string(n) + " inputs");
  NEE_ASSIGN_OR_RETURN(const Tensor* first, ctx.InputTensor(2));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *first, 2));
  const DataType type = first->dtype();
  NEE_ASSIGN_OR_RETURN(QuantParams qy, ReadQuantParams(ctx, 0, 1, type));
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(axis, NormalizeDimAxis(axis, first->rank(), ctx.node()));
  std::vector<const Tensor*> xs;
  std::vector<QuantParams> qs;
  std::vector<int64_t> out = first->dims();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 2; i < n; i += 3) {
    NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(i));
    if (x->dtype() != type) return ctx.InputError(i, "must have the type of the first input");
    if (x->rank() != first->rank()) return ctx.InputError(i, "has a different rank from the first input");
    for (int64_t d = 0; d < x->rank(); ++d)
      if (d != axis && x->dim(d) != first->dim(d))
        return ctx.InputError(i, "shape " + DimsToString(x->dims()) + " does not match " +
                                     DimsToString(first->dims()) + " outside axis " + std::to_string(axis));
    NEE_ASSIGN_OR_RETURN(QuantParams q, ReadQuantParams(ctx, i + 1, i + 2, type));
    xs.push_back(x);
    qs.push_back(q);
    out[static_cast<size_t>(axis)] += x->dim(axis);
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, type, out));
  const int64_t outer = ProductOf(out, 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(out, static_cast<size_t>(axis) + 1);
  const int64_t out_row = out[static_cast<size_t>(axis)] * inner;
  int64_t column = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = *xs[k];
    const int64_t row = x.dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < row; ++j) {
        int32_t v = Quantized8At(x, o * row + j);
        float dq = static_cast<float>(v - qs[k].zero_point) * qs[k].scale;
        StoreQuantized8(y, o * out_row + column + j, dq / qy.scale, qy.zero_point);
      }
    }
    column += row;
  }
  return Status::Ok();
}

// QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp), attribute channels_last.
Status InferQLinearGlobalAveragePool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t channels_last, ctx.node.GetInt("channels_last", 0));
  std::optional<Shape> shape;
  if (x->shape && x->shape->size() >= 3) {
    Shape s = *x->shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    for (int64_t d = 0; d < rank; ++d) {
      bool spatial = channels_last ? (d >= 1 && d < rank - 1) : d >= 2;
      if (spatial) s[static_cast<size_t>(d)] = Dim::Known(1);
    }
    shape = s;
  }
  ctx.output_types[0] = TypeInfo::Tensor(QLinearOutputType(ctx, 4, 0), shape);
  return Status::Ok();
}

// What the QLinear pools share: X (8-bit, rank >= 3), the quantization of X
// and of Y, and X's layout (channels after batch, or channels last).
struct QLinearPoolInput {
  const Tensor* x = nullptr;
  QuantParams qx, qy;
  bool channels_last = false;
  int64_t batch = 0, channels = 0;
};

Result<QLinearPoolInput> ReadQLinearPoolInput(KernelContext& ctx) {
  QLinearPoolInput in;
  NEE_ASSIGN_OR_RETURN(in.x, ctx.InputTensor(0));
  const Tensor& x = *in.x;
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, x, 0));
  if (x.rank() < 3) return ctx.InputError(0, "must have rank >= 3, got " + DimsToString(x.dims()));
  NEE_ASSIGN_OR_RETURN(in.qx, ReadQuantParams(ctx, 1, 2, x.dtype()));
  NEE_ASSIGN_OR_RETURN(in.qy, ReadQuantParams(ctx, 3, 4, x.dtype()));
  NEE_ASSIGN_OR_RETURN(int64_t channels_last, ctx.node().GetInt("channels_last", 0));
  in.channels_last = channels_last != 0;
  in.batch = x.dim(0);
  in.channels = in.channels_last ? x.dim(x.rank() - 1) : x.dim(1);
  return in;
}

Status QLinearGlobalAveragePoolKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(QLinearPoolInput pool, ReadQLinearPoolInput(ctx));
  const auto& [x, qx, qy, channels_last, batch, channels] = pool;
  const int64_t rank = x->rank();
  const int64_t image = channels_last ? ProductOf(x->dims(), 1, static_cast<size_t>(rank - 1))
                                      : ProductOf(x->dims(), 2);
  std::vector<int64_t> out = x->dims();
  for (int64_t d = 0; d < rank; ++d)
    if (channels_last ? (d >= 1 && d < rank - 1) : d >= 2) out[static_cast<size_t>(d)] = 1;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), out));
  if (image == 0) return ctx.InputError(0, "has an empty spatial extent");
  // ONNX Runtime: sum in int32, then one float multiply by x_scale / (y_scale * image_size).
  const float multiplier = qx.scale / (qy.scale * static_cast<float>(image));
  for (int64_t nb = 0; nb < batch; ++nb) {
    for (int64_t c = 0; c < channels; ++c) {
      int64_t sum = 0;
      for (int64_t p = 0; p < image; ++p) {
        int64_t index = channels_last ? (nb * image + p) * channels + c : (nb * channels + c) * image + p;
        sum += Quantized8At(*x, index);
      }
      sum -= static_cast<int64_t>(qx.zero_point) * image;
      StoreQuantized8(y, nb * channels + c, static_cast<float>(sum) * multiplier, qy.zero_point);
    }
  }
  return Status::Ok();
}

// QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?), attributes alpha, transA, transB.
// C is int32 with scale alpha * a_scale * b_scale; without y_scale the output is float.
Result<std::array<int64_t, 3>> QGemmDims(const Node& node, const std::vector<int64_t>& a,
                                         const std::vector<int64_t>& b) {
  NEE_ASSIGN_OR_RETURN(int64_t trans_a, node.GetInt("transA", 0));
  NEE_ASSIGN_OR_RETURN(int64_t trans_b, node.GetInt("transB", 0));
  if (a.size() != 2 || b.size() != 2)
    return InvalidArgument(node.Describe() + ": A and B must be 2-D, got " + DimsToString(a) + " and " +
                           DimsToString(b));
  int64_t m = trans_a ? a[1] : a[0], k = trans_a ? a[0] : a[1];
  int64_t kb = trans_b ? b[1] : b[0], n = trans_b ? b[0] : b[1];
  if (k != kb)
    return InvalidArgument(node.Describe() + ": inner dimensions differ: A " + DimsToString(a) + " and B " +
                           DimsToString(b));
  return std::array<int64_t, 3>{m, k, n};
}

Status InferQGemm(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, 3));
  std::optional<Shape> shape;
  std::vector<int64_t> ad, bd;
  if (a->shape && b->shape && ShapeIsStatic(*a->shape, &ad) && ShapeIsStatic(*b->shape, &bd)) {
    auto dims = QGemmDims(ctx.node, ad, bd);
    if (!dims.ok()) return dims.status();
    shape = ShapeFromDims({dims.value()[0], dims.value()[2]});
  }
  DataType out = ctx.has_input(7) ? QLinearOutputType(ctx, 8, 0) : DataType::kFloat;
  ctx.output_types[0] = TypeInfo::Tensor(out, shape);
  return Status::Ok();
}

Status QGemmKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(3));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *a, 0));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *b, 3));
  NEE_ASSIGN_OR_RETURN(auto dims, QGemmDims(ctx.node(), a->dims(), b->dims()));
  const int64_t m = dims[0], k = dims[1], n = dims[2];
  NEE_ASSIGN_OR_RETURN(int64_t trans_a, ctx.node().GetInt("transA", 0));
  NEE_ASSIGN_OR_RETURN(int64_t trans_b, ctx.node().GetInt("transB", 0));
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 1.0f));
  NEE_ASSIGN_OR_RETURN(QuantParams qa, ReadQuantParams(ctx, 1, 2, a->dtype()));
  // B's scale and zero point: a scalar or one per output column.
  NEE_ASSIGN_OR_RETURN(const Tensor* b_scale, ctx.InputTensor(4));
  if (b_scale->dtype() != DataType::kFloat || (b_scale->num_elements() != 1 && b_scale->num_elements() != n))
    return ctx.InputError(4, "(b_scale) must be a float scalar or have " + std::to_string(n) + " entries, got " +
                                 b_scale->Describe());
  NEE_ASSIGN_OR_RETURN(const Tensor* b_zp, OptionalInputTensor(ctx, 5));
  if (b_zp) {
    if (b_zp->dtype() != b->dtype() || b_zp->num_elements() != b_scale->num_elements())
      return ctx.InputError(5, "(b_zero_point) must have B's type and b_scale's size, got " + b_zp->Describe());
  }
  NEE_ASSIGN_OR_RETURN(const Tensor* c, OptionalInputTensor(ctx, 6));
  std::vector<int64_t> c_dims;
  if (c) {
    if (c->dtype() != DataType::kInt32) return ctx.InputError(6, "(C) must be int32, got " + c->Describe());
    auto bd = BroadcastDims(c->dims(), {m, n});
    if (!bd.ok() || bd.value() != std::vector<int64_t>{m, n})
      return ctx.InputError(6, "(C) shape " + DimsToString(c->dims()) + " does not broadcast to [" +
                                   std::to_string(m) + "," + std::to_string(n) + "]");
    c_dims = c->dims();
  }
  const bool quantized_out = ctx.has_input(7);
  QuantParams qy;
  DataType out_type = DataType::kFloat;
  if (quantized_out) {
    out_type = a->dtype();
    if (ctx.has_input(8)) {
      NEE_ASSIGN_OR_RETURN(const Tensor* yzp, ctx.InputTensor(8));
      NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *yzp, 8));
      out_type = yzp->dtype();
    }
    NEE_ASSIGN_OR_RETURN(qy, ReadQuantParams(ctx, 7, 8, out_type));
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, out_type, {m, n}));
  // C's element for output (i, j) under broadcasting to [m, n].
  auto c_at = [&](int64_t i, int64_t j) -> int64_t {
    if (!c) return 0;
    int64_t rows = c_dims.size() == 2 ? c_dims[0] : 1;
    int64_t cols = c_dims.empty() ? 1 : c_dims.back();
    return c->data<int32_t>()[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
  };
  ctx.ParallelFor(m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t bq = b_scale->num_elements() == 1 ? 0 : j;
        const int32_t bzp = b_zp ? Quantized8At(*b_zp, bq) : 0;
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          int32_t av = Quantized8At(*a, trans_a ? p * m + i : i * k + p) - qa.zero_point;
          int32_t bv = Quantized8At(*b, trans_b ? j * k + p : p * n + j) - bzp;
          acc += static_cast<int64_t>(av) * bv;
        }
        acc += c_at(i, j);
        const float scale = alpha * qa.scale * b_scale->data<float>()[bq];
        const float accumulated = static_cast<float>(static_cast<int32_t>(acc));
        if (quantized_out) {
          StoreQuantized8(y, i * n + j, accumulated * (scale / qy.scale), qy.zero_point);
        } else {
          y.data<float>()[i * n + j] = accumulated * scale;
        }
      }
    }
  });
  return Status::Ok();
}

// QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zp, Y_scale, Y_zp): a 256-entry table as ONNX Runtime
// builds it (dequantize, the float function, quantize).
Status InferQLinearUnary(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  ctx.output_types[0] = TypeInfo::Tensor(QLinearOutputType(ctx, 4, 0), x->shape);
  return Status::Ok();
}

template <typename Fn>
Status QLinearUnaryKernel(KernelContext& ctx, Fn fn) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *x, 0));
  NEE_ASSIGN_OR_RETURN(QuantParams qx, ReadQuantParams(ctx, 1, 2, x->dtype()));
  NEE_ASSIGN_OR_RETURN(QuantParams qy, ReadQuantParams(ctx, 3, 4, x->dtype()));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  NEE_ASSIGN_OR_RETURN(Tensor table, Tensor::Allocate(x->dtype(), {256}));
  const int32_t low = x->dtype() == DataType::kUint8 ? 0 : -128;
  for (int32_t v = low; v < low + 256; ++v) {
    float dq = static_cast<float>(v - qx.zero_point) * qx.scale;
    StoreQuantized8(table, v - low, fn(dq) / qy.scale, qy.zero_point);
  }
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    int32_t index = Quantized8At(*x, i) - low;
    if (x->dtype() == DataType::kUint8) {
      y.data<uint8_t>()[i] = table.data<uint8_t>()[index];
    } else {
      y.data<int8_t>()[i] = table.data<int8_t>()[index];
    }
  }
  return Status::Ok();
}

Status QLinearSigmoidKernel(KernelContext& ctx) {
  return QLinearUnaryKernel(ctx, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
}

Status QLinearLeakyReluKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 0.01f));
  return QLinearUnaryKernel(ctx, [alpha](float v) { return v >= 0 ? v : v * alpha; });
}


// QLinearAveragePool (X, x_scale, x_zp, y_scale, y_zp): AveragePool's attributes (no dilations) plus
// channels_last. As ONNX Runtime: each tap dequantized in float, averaged, then quantized.
Status InferQLinearAveragePool(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t channels_last, ctx.node.GetInt("channels_last", 0));
  std::optional<Shape> shape;
  std::vector<int64_t> dims;
  if (x->shape && ShapeIsStatic(*x->shape, &dims) && dims.size() >= 3) {
    const size_t n = dims.size() - 2;
    NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, nn::ReadWindowSpec(ctx.node, n, nullptr));
    std::vector<int64_t> out = dims;
    for (size_t d = 0; d < n; ++d) {
      const size_t axis = channels_last ? d + 1 : d + 2;
      NEE_ASSIGN_OR_RETURN(out[axis], nn::WindowOutputDim(ctx.node, spec, d, dims[axis], false));
    }
    shape = ShapeFromDims(out);
  }
  ctx.output_types[0] = TypeInfo::Tensor(QLinearOutputType(ctx, 4, 0), shape);
  return Status::Ok();
}

Status QLinearAveragePoolKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(QLinearPoolInput pool, ReadQLinearPoolInput(ctx));
  const auto& [x, qx, qy, channels_last, batch, channels] = pool;
  NEE_ASSIGN_OR_RETURN(int64_t include_pad, ctx.node().GetInt("count_include_pad", 0));
  const size_t n = static_cast<size_t>(x->rank() - 2);
  NEE_ASSIGN_OR_RETURN(nn::WindowSpec spec, nn::ReadWindowSpec(ctx.node(), n, nullptr));
  for (int64_t dl : spec.dilations)
    if (dl != 1) return ctx.Error("dilations are not supported by QLinearAveragePool");
  std::vector<int64_t> in(n), out(n);
  for (size_t d = 0; d < n; ++d) {
    in[d] = x->dim(static_cast<int64_t>(channels_last ? d + 1 : d + 2));
    NEE_ASSIGN_OR_RETURN(out[d], nn::WindowOutputDim(ctx.node(), spec, d, in[d], false));
  }
  std::vector<int64_t> out_dims{batch};
  if (!channels_last) out_dims.push_back(channels);
  out_dims.insert(out_dims.end(), out.begin(), out.end());
  if (channels_last) out_dims.push_back(channels);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), out_dims));
  const int64_t in_size = ProductOf(in), out_size = ProductOf(out);
  // Element index of spatial position `pos` (row-major over `in`) of (batch b, channel c).
  // (Copies: clang before 16 cannot capture structured bindings.)
  auto x_index = [&, last = channels_last, ch = channels](int64_t b, int64_t c, int64_t pos) {
    return last ? (b * in_size + pos) * ch + c : (b * ch + c) * in_size + pos;
  };
  std::vector<int64_t> o(n), k(n);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t flat = 0; flat < out_size; ++flat) {
        for (int64_t rest = flat, d = static_cast<int64_t>(n) - 1; d >= 0; --d) {
          o[static_cast<size_t>(d)] = rest % out[static_cast<size_t>(d)];
          rest /= out[static_cast<size_t>(d)];
        }
        float sum = 0;
        int64_t inside = 0, declared = 0;
        std::fill(k.begin(), k.end(), 0);
        const int64_t taps = ProductOf(spec.kernel);
        for (int64_t t = 0; t < taps; ++t) {
          bool in_input = true, in_declared = true;
          int64_t pos = 0;
          for (size_t d = 0; d < n; ++d) {
            const int64_t xi = o[d] * spec.strides[d] - spec.pad_begin(d) + k[d];
            if (xi < 0 || xi >= in[d]) in_input = false;
            if (xi < -spec.pad_begin(d) || xi >= in[d] + spec.pad_end(d)) in_declared = false;
            pos = pos * in[d] + xi;
          }
          declared += in_declared;
          if (in_input) {
            ++inside;
            sum += static_cast<float>(Quantized8At(*x, x_index(b, c, pos)) - qx.zero_point) * qx.scale;
          }
          for (size_t d = n; d-- > 0;) {
            if (++k[d] < spec.kernel[d]) break;
            k[d] = 0;
          }
        }
        const int64_t count = include_pad ? declared : inside;
        const float average = count > 0 ? sum / static_cast<float>(count) : 0.0f;
        const int64_t out_index = channels_last ? (b * out_size + flat) * channels + c : (b * channels + c) * out_size + flat;
        StoreQuantized8(y, out_index, average / qy.scale, qy.zero_point);
      }
  return Status::Ok();
}

// QLinearSoftmax (X, x_scale, x_zp?, y_scale, y_zp?), attributes axis and opset (the original Softmax's:
// before 13 the input is flattened to 2-D at axis). Computed in float on the dequantized values.
Status QLinearSoftmaxKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_RETURN_IF_ERROR(CheckQuantized8(ctx, *x, 0));
  NEE_ASSIGN_OR_RETURN(QuantParams qx, ReadQuantParams(ctx, 1, 2, x->dtype()));
  NEE_ASSIGN_OR_RETURN(QuantParams qy, ReadQuantParams(ctx, 3, 4, x->dtype()));
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis", -1));
  NEE_ASSIGN_OR_RETURN(int64_t opset, ctx.node().GetInt("opset", 13));
  if (x->rank() == 0) return ctx.InputError(0, "must have rank >= 1");
  NEE_ASSIGN_OR_RETURN(axis, NormalizeAxis(axis, x->rank(), ctx.node()));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  // Softmax over `len` elements spaced `stride` apart, for each of `outer` x `stride` rows.
  const int64_t len = opset < 13 ? ProductOf(x->dims(), static_cast<size_t>(axis)) : x->dim(axis);
  const int64_t stride = opset < 13 ? 1 : ProductOf(x->dims(), static_cast<size_t>(axis) + 1);
  const int64_t outer = len * stride > 0 ? x->num_elements() / (len * stride) : 0;
  std::vector<float> values(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < stride; ++s) {
      const int64_t base = o * len * stride + s;
      float max_value = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < len; ++i) {
        values[static_cast<size_t>(i)] =
            static_cast<float>(Quantized8At(*x, base + i * stride) - qx.zero_point) * qx.scale;
        max_value = std::max(max_value, values[static_cast<size_t>(i)]);
      }
      float sum = 0;
      for (float& v : values) sum += (v = std::exp(v - max_value));
      for (int64_t i = 0; i < len; ++i)
        StoreQuantized8(y, base + i * stride, values[static_cast<size_t>(i)] / sum / qy.scale, qy.zero_point);
    }
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeContribOps(OpRegistry& registry) {
  // ONNX Runtime contrib ops written by onnxruntime.quantization (QOperator format).
  registry.RegisterVersions("com.microsoft", "QLinearAdd", {1}, InferQLinearBinary, QLinearBinaryKernel<false>);
  registry.RegisterVersions("com.microsoft", "QLinearMul", {1}, InferQLinearBinary, QLinearBinaryKernel<true>);
  registry.RegisterVersions("com.microsoft", "QLinearConcat", {1}, InferQLinearConcat, QLinearConcatKernel);
  registry.RegisterVersions("com.microsoft", "QLinearGlobalAveragePool", {1}, InferQLinearGlobalAveragePool,
                            QLinearGlobalAveragePoolKernel);
  registry.RegisterVersions("com.microsoft", "QGemm", {1}, InferQGemm, QGemmKernel);
  registry.RegisterVersions("com.microsoft", "QLinearSigmoid", {1}, InferQLinearUnary, QLinearSigmoidKernel);
  registry.RegisterVersions("com.microsoft", "QLinearLeakyRelu", {1}, InferQLinearUnary, QLinearLeakyReluKernel);
  registry.RegisterVersions("com.microsoft", "QLinearAveragePool", {1}, InferQLinearAveragePool,
                            QLinearAveragePoolKernel);
  registry.RegisterVersions("com.microsoft", "QLinearSoftmax", {1}, InferQLinearUnary, QLinearSoftmaxKernel);
}

}  // namespace nee
