// com.microsoft MatMulIntegerToFloat, as ONNX Runtime defines it (contrib op,
// opset 1): A (uint8/int8) times B (uint8/int8) less their zero points, the
// integer product scaled by a_scale * b_scale and plus an optional bias:
//
//   Y = float(sum_k (A[i][k] - a_zp) * (B[k][j] - b_zp[j])) * (a_scale * b_scale[j]) (+ bias[j])
//
// a_scale and a_zero_point are per tensor; b_scale and b_zero_point one value
// or one per column of B. nee takes a 2-D B (what quantized Linear layers
// have); A of rank >= 1 with numpy's matmul rules. Each step is rounded once
// in that order — the int32 sum (wrapping like MatMulInteger's) converted to
// float, the multiply by the float product a_scale * b_scale[j], the bias
// added — which is what DynamicQuantizeLinear -> MatMulInteger -> Cast ->
// Mul(a_scale * b_scale) -> Add(bias) computes, so opt/fuse_quant_matmul's
// rewrite of that chain into this op leaves the results unchanged. (ONNX
// Runtime's own kernel may round the scale product or the bias add in
// another order; it agrees to float rounding.) float32 only; float16 is
// refused as not implemented.
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

namespace {

Status InferMatMulIntegerToFloat(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* b, InputTensorType(ctx, 1));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* s, InputTensorType(ctx, 2));
  if (s->elem_type != DataType::kUndefined && s->elem_type != DataType::kFloat)
    return NotImplemented(ctx.node.Describe() + ": only float32 scales and output are implemented, got " +
                          DataTypeName(s->elem_type));
  std::optional<Shape> shape;
  if (b->shape && b->shape->size() != 2)
    return NotImplemented(ctx.node.Describe() + ": B must be 2-D, got rank " + std::to_string(b->shape->size()));
  if (a->shape && b->shape) {
    if (a->shape->empty()) return ctx.InputError(0, "must have rank >= 1");
    Shape out(a->shape->begin(), a->shape->end() - 1);
    out.push_back((*b->shape)[1]);
    shape = std::move(out);
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, std::move(shape));
  return Status::Ok();
}

// One value of an 8-bit tensor as an integer.
int32_t At8(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kInt8 ? t.data<int8_t>()[i] : t.data<uint8_t>()[i];
}

// A per-tensor or per-column input (scale or zero point): its index for column j.
int64_t PerColumn(const Tensor* t, int64_t j) { return t && t->num_elements() != 1 ? j : 0; }

Status MatMulIntegerToFloatKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* a_scale, ctx.InputTensor(2));
  NEE_ASSIGN_OR_RETURN(const Tensor* b_scale, ctx.InputTensor(3));
  NEE_ASSIGN_OR_RETURN(const Tensor* a_zp, OptionalInputTensor(ctx, 4));
  NEE_ASSIGN_OR_RETURN(const Tensor* b_zp, OptionalInputTensor(ctx, 5));
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, OptionalInputTensor(ctx, 6));
  if (!Is8Bit(a->dtype())) return ctx.InputError(0, "(A) must be int8 or uint8, got " + a->Describe());
  if (!Is8Bit(b->dtype())) return ctx.InputError(1, "(B) must be int8 or uint8, got " + b->Describe());
  if (a->rank() < 1) return ctx.InputError(0, "(A) must have rank >= 1, got " + a->Describe());
  if (b->rank() != 2) return NotImplemented(ctx.node().Describe() + ": B must be 2-D, got " + b->Describe());
  const int64_t k = a->dims().back(), n = b->dim(1);
  if (b->dim(0) != k)
    return ctx.InputError(1, "(B) has K=" + std::to_string(b->dim(0)) + " but A has K=" + std::to_string(k));
  if (a_scale->dtype() != DataType::kFloat || a_scale->num_elements() != 1)
    return ctx.InputError(2, "(a_scale) must be one float, got " + a_scale->Describe());
  if (b_scale->dtype() != DataType::kFloat || (b_scale->num_elements() != 1 && b_scale->num_elements() != n))
    return ctx.InputError(3, "(b_scale) must be one float or " + std::to_string(n) + ", got " + b_scale->Describe());
  if (a_zp && (a_zp->dtype() != a->dtype() || a_zp->num_elements() != 1))
    return ctx.InputError(4, "(a_zero_point) must be one value of A's type, got " + a_zp->Describe());
  if (b_zp && (b_zp->dtype() != b->dtype() || (b_zp->num_elements() != 1 && b_zp->num_elements() != n)))
    return ctx.InputError(5, "(b_zero_point) must be one value of B's type or " + std::to_string(n) + ", got " +
                                 b_zp->Describe());
  if (bias && (bias->dtype() != DataType::kFloat || bias->rank() != 1 || bias->dim(0) != n))
    return ctx.InputError(6, "(bias) must be float [" + std::to_string(n) + "], got " + bias->Describe());
  std::vector<int64_t> out_dims(a->dims().begin(), a->dims().end() - 1);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, DataType::kFloat, out_dims));
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < a->dims().size(); ++d) rows *= a->dims()[d];
  const int64_t za = a_zp ? At8(*a_zp, 0) : 0;
  const float sa = a_scale->data<float>()[0];
  float* out = y.data<float>();
  ctx.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t zb = b_zp ? At8(*b_zp, PerColumn(b_zp, j)) : 0;
        int64_t acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += (At8(*a, i * k + p) - za) * (At8(*b, p * n + j) - zb);
        // As MatMulInteger's int32 result, then Cast, Mul and Add.
        const float scale = sa * b_scale->data<float>()[PerColumn(b_scale, j)];
        float v = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(acc))));
        v = v * scale;
        if (bias) v = v + bias->data<float>()[j];
        out[i * n + j] = v;
      }
  });
  return Status::Ok();
}

}  // namespace

void RegisterQuantMatMulOps(OpRegistry& registry) {
  registry.RegisterVersions("com.microsoft", "MatMulIntegerToFloat", {1}, InferMatMulIntegerToFloat,
                            MatMulIntegerToFloatKernel);
}

}  // namespace nee
