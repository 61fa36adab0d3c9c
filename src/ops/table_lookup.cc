// ai.nee TableLookup (X, table) -> Y: every byte of X mapped through a 256-entry table,
//
//   Y[i] = table[X[i] - lowest value of X's type]
//
// X uint8 or int8 (an int8 v reads table[v + 128]), table a uint8 or int8 tensor of 256 elements, Y of X's
// shape and the table's element type. Written by opt/fuse_byte_table.cc for a chain of element-wise ops
// from one 8-bit tensor to another (a quantized SiLU: DequantizeLinear, Sigmoid, QuantizeLinear, Mul,
// QuantizeLinear; QLinearSigmoid then QLinearMul), whose result per element depends on that element's
// byte alone: the pass evaluates the chain once on all 256 bytes with the reference kernels.
// The fast kernel is ep/cpu/byte_lookup.cc's.
#include <string>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

namespace {

Status InferTableLookup(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* table, InputTensorType(ctx, 1));
  if (table->shape) {
    std::vector<int64_t> dims;
    if (ShapeIsStatic(*table->shape, &dims) && (dims.size() != 1 || dims[0] != 256))
      return ctx.InputError(1, "(table) must hold 256 values in one dimension, got shape " + DimsToString(dims));
  }
  ctx.output_types[0] = TypeInfo::Tensor(table->elem_type, x->shape);
  return Status::Ok();
}

Status TableLookupKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* table, ctx.InputTensor(1));
  if (!Is8Bit(x->dtype())) return ctx.InputError(0, "(X) must be uint8 or int8, got " + x->Describe());
  if (!Is8Bit(table->dtype()) || table->rank() != 1 || table->dim(0) != 256)
    return ctx.InputError(1, "(table) must be uint8 or int8 of shape [256], got " + table->Describe());
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, table->dtype(), x->dims()));
  const auto* entries = static_cast<const uint8_t*>(table->raw_data());
  auto* out = static_cast<uint8_t*>(y.raw_data());
  const int low = x->dtype() == DataType::kInt8 ? -128 : 0;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    const int value = x->dtype() == DataType::kInt8 ? x->data<int8_t>()[i] : x->data<uint8_t>()[i];
    out[i] = entries[value - low];
  }
  return Status::Ok();
}

}  // namespace

void RegisterTableLookupOps(OpRegistry& registry) {
  registry.RegisterVersions("ai.nee", "TableLookup", {1}, InferTableLookup, TableLookupKernel);
}

}  // namespace nee
