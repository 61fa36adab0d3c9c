// Operator family: Cast, CastLike and BitCast. The element conversion rules live in
// ir/convert.h (ConvertTensor); this file holds the schemas, the attribute
// handling that changed across versions and the shape rules.
//
// Cast:     1 (`to` is a type name string), 6 (`to` is an int), 9 (string),
//           13 (bfloat16), 19 (float8, `saturate`), 21 (int4/uint4),
//           23 (float4e2m1), 24 (float8e8m0, `round_mode`), 25 (int2/uint2),
//           28 (float6 types, which nee does not have: NotImplemented).
// CastLike: 15, 19, 21, 23, 24, 25 with the same attributes.
// BitCast:  26 (reinterprets bytes; same bit width).
// The per-version type lists are not enforced: a newer type in an older
// model is converted as the newest version would.
#include <cctype>
#include <cstring>
#include <mutex>
#include <string>

#include "ir/convert.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

namespace {

bool EqualsIgnoreCase(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return i == a.size() && b[i] == '\0';
}

// The target type of Cast from its `to` attribute: an int (opset 6+) or, in
// Cast-1 models, a TensorProto type name such as "FLOAT".
Result<DataType> CastTarget(const Node& node) {
  const Attribute* to = node.FindAttr("to");
  if (!to) return InvalidModel(node.Describe() + ": attribute 'to' is required");
  if (to->type == AttrType::kString) {
    for (int32_t v = 1; v <= kMaxDataType; ++v)
      if (EqualsIgnoreCase(to->s, DataTypeName(static_cast<DataType>(v)))) return static_cast<DataType>(v);
    return InvalidModel(node.Describe() + ": attribute 'to' names an unknown type \"" + to->s + "\"");
  }
  NEE_ASSIGN_OR_RETURN(int64_t value, node.GetInt("to"));
  if (value == 27 || value == 28)
    return NotImplemented(node.Describe() + ": casting to float6 types (" + std::to_string(value) +
                          ") is not supported");
  if (value < INT32_MIN || value > INT32_MAX || !IsValidDataType(static_cast<int32_t>(value)))
    return InvalidModel(node.Describe() + ": attribute 'to' = " + std::to_string(value) +
                        " is not a valid tensor element type");
  return static_cast<DataType>(value);
}

// `saturate` (opset 19+) and `round_mode` (opset 24+); ignored before.
Result<ConvertOptions> CastOptions(const Node& node, int64_t opset) {
  ConvertOptions options;
  if (opset >= 19) {
    NEE_ASSIGN_OR_RETURN(int64_t saturate, node.GetInt("saturate", 1));
    options.saturate = saturate != 0;
  }
  if (opset >= 24) {
    NEE_ASSIGN_OR_RETURN(std::string mode, node.GetString("round_mode", "up"));
    if (!ParseE8M0Rounding(mode, &options.e8m0_rounding))
      return InvalidModel(node.Describe() + ": attribute 'round_mode' must be \"up\", \"down\" or \"nearest\", got \"" +
                          mode + "\"");
  }
  return options;
}

Status CheckConvertible(const Node& node, DataType from, DataType to) {
  if (CanConvert(from, to)) return Status::Ok();
  return NotImplemented(node.Describe() + ": casting " + DataTypeName(from) + " to " + DataTypeName(to) +
                        " is not supported");
}

// Shape rule shared by both ops: the input's shape with the target type, and
// the converted value when the input value is known and small (shape math).
Status InferConversion(InferenceContext& ctx, DataType to, const ConvertOptions& options) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* in, InputTensorType(ctx, 0));
  if (in->elem_type != DataType::kUndefined) NEE_RETURN_IF_ERROR(CheckConvertible(ctx.node, in->elem_type, to));
  if (ctx.num_outputs() > 0) ctx.output_types[0] = TypeInfo::Tensor(to, in->shape);
  const Tensor* value = ctx.input_value(0);
  constexpr int64_t kMaxFoldedElements = 1024;
  if (value && ctx.num_outputs() > 0 && value->num_elements() <= kMaxFoldedElements &&
      CanConvert(value->dtype(), to)) {
    Result<Tensor> out = Tensor::Allocate(to, value->dims());
    if (out.ok() && ConvertTensor(*value, out.value(), options).ok()) {
      if (ctx.output_values.size() < ctx.num_outputs()) ctx.output_values.resize(ctx.num_outputs());
      ctx.output_values[0] = std::move(out).value();
    }
  }
  return Status::Ok();
}

// Converts x into a fresh output 0 of type `to`.
Status RunConversion(KernelContext& ctx, const Tensor& x, DataType to, const ConvertOptions& options) {
  NEE_RETURN_IF_ERROR(CheckConvertible(ctx.node(), x.dtype(), to));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, to, x.dims()));
  const int64_t n = x.num_elements();
  if (x.dtype() == DataType::kString || to == DataType::kString) {
    // Strings allocate and may fail to parse: one pass, first error reported.
    Status status = ConvertTensor(x, y, options);
    return status.ok() ? status : ctx.InputError(0, status.message());
  }
  // Blocks of 8 elements so that packed sub-byte outputs never share a byte
  // between two chunks; each element's result does not depend on chunking.
  constexpr int64_t kBlock = 8;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::mutex mutex;
  Status first_error;
  ctx.ParallelFor(blocks, 4096, [&](int64_t b0, int64_t b1) {
    Status s = ConvertElements(x, y, b0 * kBlock, std::min(b1 * kBlock, n), options);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mutex);
      if (first_error.ok()) first_error = s;
    }
  });
  return first_error.ok() ? first_error : ctx.Error(first_error.message());
}

// ---- Cast --------------------------------------------------------------------

Status InferCast(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(DataType to, CastTarget(ctx.node));
  NEE_ASSIGN_OR_RETURN(ConvertOptions options, CastOptions(ctx.node, ctx.opset));
  return InferConversion(ctx, to, options);
}

Status CastKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(DataType to, CastTarget(ctx.node()));
  NEE_ASSIGN_OR_RETURN(ConvertOptions options, CastOptions(ctx.node(), ctx.opset()));
  return RunConversion(ctx, *x, to, options);
}

// ---- CastLike ----------------------------------------------------------------

Status InferCastLike(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* like, InputTensorType(ctx, 1));
  NEE_ASSIGN_OR_RETURN(ConvertOptions options, CastOptions(ctx.node, ctx.opset));
  if (like->elem_type == DataType::kUndefined) {
    // Target type unknown: only the shape is known.
    NEE_ASSIGN_OR_RETURN(const TypeInfo* in, InputTensorType(ctx, 0));
    if (ctx.num_outputs() > 0) ctx.output_types[0] = TypeInfo::Tensor(DataType::kUndefined, in->shape);
    return Status::Ok();
  }
  return InferConversion(ctx, like->elem_type, options);
}

Status CastLikeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* like, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(ConvertOptions options, CastOptions(ctx.node(), ctx.opset()));
  return RunConversion(ctx, *x, like->dtype(), options);
}

// ---- BitCast (opset 26) ------------------------------------------------------
// Reinterprets the bytes as another type of the same bit width. Reading a
// bool from a byte other than 0/1 is undefined in C++, so bytes cast to bool
// are normalised to 0/1 (the only change to the bits BitCast makes).

Status CheckBitCast(const Node& node, DataType from, DataType to) {
  if (from == DataType::kString || to == DataType::kString)
    return InvalidModel(node.Describe() + ": BitCast does not support string tensors");
  if (ElementBits(from) != ElementBits(to))
    return InvalidModel(node.Describe() + ": BitCast from " + DataTypeName(from) + " (" +
                        std::to_string(ElementBits(from)) + " bits) to " + DataTypeName(to) + " (" +
                        std::to_string(ElementBits(to)) + " bits) needs equal bit widths");
  return Status::Ok();
}

Status InferBitCast(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(DataType to, CastTarget(ctx.node));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* in, InputTensorType(ctx, 0));
  if (in->elem_type != DataType::kUndefined) NEE_RETURN_IF_ERROR(CheckBitCast(ctx.node, in->elem_type, to));
  if (ctx.num_outputs() > 0) ctx.output_types[0] = TypeInfo::Tensor(to, in->shape);
  return Status::Ok();
}

Status BitCastKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(DataType to, CastTarget(ctx.node()));
  NEE_RETURN_IF_ERROR(CheckBitCast(ctx.node(), x->dtype(), to));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, to, x->dims()));
  if (y.byte_size() != x->byte_size()) return ctx.Error("BitCast: byte sizes differ");
  if (to == DataType::kBool) {
    const uint8_t* in = static_cast<const uint8_t*>(x->raw_data());
    for (int64_t i = 0; i < x->num_elements(); ++i) y.data<bool>()[i] = in[i] != 0;
  } else if (x->byte_size() > 0) {
    std::memcpy(y.raw_data(), x->raw_data(), x->byte_size());
  }
  return Status::Ok();
}

}  // namespace

void RegisterCastOps(OpRegistry& registry) {
  registry.RegisterVersions("", "Cast", {1, 6, 9, 13, 19, 21, 23, 24, 25, 28}, InferCast, CastKernel);
  registry.RegisterVersions("", "CastLike", {15, 19, 21, 23, 24, 25}, InferCastLike, CastLikeKernel);
  registry.RegisterVersions("", "BitCast", {26}, InferBitCast, BitCastKernel);
}

}  // namespace nee
