// What the com.microsoft QLinear* fast kernels (qlinear_fast.cc, qlinear_pointwise_fast.cc) share: reading a
// per-tensor scale and zero point, and storing a value as the reference (ops/quantize_contrib.cc) does.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ep/cpu/no_fp_contract.h"
#include "ops/op_schema.h"
#include "ops/op_util.h"

namespace nee::cpu {

struct Quant8 {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

// A float scalar scale and its optional 8-bit scalar zero point of `type`; false when malformed.
inline bool ReadQuant8(const KernelContext& ctx, size_t scale_input, size_t zp_input, DataType type, Quant8* q) {
  const Value* s = ctx.input(scale_input);
  if (!s || !s->is_tensor() || s->tensor().dtype() != DataType::kFloat || s->tensor().num_elements() != 1)
    return false;
  q->scale = s->tensor().data<float>()[0];
  q->zero_point = 0;
  if (!ctx.has_input(zp_input)) return true;
  const Value* z = ctx.input(zp_input);
  if (!z->is_tensor() || z->tensor().dtype() != type || z->tensor().num_elements() != 1) return false;
  q->zero_point = static_cast<int32_t>(ReadAsDouble(z->tensor(), 0));
  return true;
}

// A QLinear binary op's inputs (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): two 8-bit tensors of one
// type and three per-tensor quantizations; false when anything is absent or malformed (the reference reports it).
inline bool ReadQLinearBinary(const KernelContext& ctx, const Tensor** a, const Tensor** b, Quant8* qa, Quant8* qb,
                              Quant8* qc) {
  for (size_t i : {size_t{0}, size_t{3}})
    if (!ctx.has_input(i) || !ctx.input(i)->is_tensor()) return false;
  *a = &ctx.input(0)->tensor();
  *b = &ctx.input(3)->tensor();
  const DataType type = (*a)->dtype();
  return Is8Bit(type) && (*b)->dtype() == type &&
         ReadQuant8(ctx, 1, 2, type, qa) && ReadQuant8(ctx, 4, 5, type, qb) && ctx.has_input(6) &&
         ReadQuant8(ctx, 6, 7, type, qc);
}

// round half to even, plus the zero point, saturated: the reference's StoreQuantized8.
NEE_NO_FP_CONTRACT inline int32_t Store8(float value, int32_t zero_point, bool is_signed) {
  float v = std::nearbyint(value);
  if (std::isnan(v)) v = 0;
  v = std::clamp(v + static_cast<float>(zero_point), is_signed ? -128.0f : 0.0f, is_signed ? 127.0f : 255.0f);
  return static_cast<int32_t>(v);
}

}  // namespace nee::cpu
