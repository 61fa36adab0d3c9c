#include "ops/control_flow_util.h"

#include <cstring>

#include "ops/op_util.h"

namespace nee::cf {

namespace {

// Bit-level copy for packed sub-byte types (int4, uint4, float4, int2, uint2):
// element i occupies bits [i*bits, (i+1)*bits), low bits first.
void CopyPackedElements(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset,
                        int64_t count, int bits) {
  const uint8_t* in = static_cast<const uint8_t*>(src.raw_data());
  uint8_t* out = static_cast<uint8_t*>(dst.raw_data());
  const uint8_t mask = static_cast<uint8_t>((1u << bits) - 1);
  for (int64_t k = 0; k < count; ++k) {
    int64_t sbit = (src_offset + k) * bits;
    int64_t dbit = (dst_offset + k) * bits;
    uint8_t v = static_cast<uint8_t>((in[sbit / 8] >> (sbit % 8)) & mask);
    uint8_t& d = out[dbit / 8];
    d = static_cast<uint8_t>((d & ~(mask << (dbit % 8))) | (v << (dbit % 8)));
  }
}

}  // namespace

void CopyElements(const Tensor& src, int64_t src_offset, Tensor& dst, int64_t dst_offset, int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DataType::kString) {
    const std::string* in = src.data<std::string>() + src_offset;
    std::string* out = dst.data<std::string>() + dst_offset;
    for (int64_t k = 0; k < count; ++k) out[k] = in[k];
    return;
  }
  int bits = ElementBits(src.dtype());
  if (bits % 8 != 0) {
    CopyPackedElements(src, src_offset, dst, dst_offset, count, bits);
    return;
  }
  size_t bytes = static_cast<size_t>(bits / 8);
  std::memcpy(static_cast<char*>(dst.raw_data()) + dst_offset * bytes,
              static_cast<const char*>(src.raw_data()) + src_offset * bytes, count * bytes);
}

Result<Tensor> SliceAlongAxis(const Tensor& t, int64_t axis, int64_t index) {
  const std::vector<int64_t>& dims = t.dims();
  std::vector<int64_t> out_dims = dims;
  out_dims.erase(out_dims.begin() + axis);
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), out_dims));
  const int64_t outer = ProductOf(dims, 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(dims, static_cast<size_t>(axis) + 1);
  const int64_t extent = dims[static_cast<size_t>(axis)];
  for (int64_t o = 0; o < outer; ++o) CopyElements(t, (o * extent + index) * inner, out, o * inner, inner);
  return out;
}

void StackAlongAxis(const std::vector<Tensor>& parts, int64_t axis, Tensor& out) {
  if (parts.empty()) return;
  const std::vector<int64_t>& part_dims = parts[0].dims();
  const int64_t outer = ProductOf(part_dims, 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(part_dims, static_cast<size_t>(axis));
  const int64_t count = static_cast<int64_t>(parts.size());
  for (int64_t p = 0; p < count; ++p)
    for (int64_t o = 0; o < outer; ++o) CopyElements(parts[p], o * inner, out, (o * count + p) * inner, inner);
}

Status CopyTensorToOutput(KernelContext& ctx, size_t i, const Tensor& t) {
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(i, t.dtype(), t.dims()));
  CopyElements(t, 0, out, 0, t.num_elements());
  return Status::Ok();
}

Status SetValueOutput(KernelContext& ctx, size_t i, const Value& v) {
  if (v.is_tensor()) return CopyTensorToOutput(ctx, i, v.tensor());
  if (v.empty()) return ctx.Error("output " + std::to_string(i) + " has no value");
  return ctx.SetOutput(i, v);
}

Result<Value> OwnedCopy(const Value& v) {
  if (!v.is_tensor()) return v;
  NEE_ASSIGN_OR_RETURN(Tensor copy, v.tensor().Clone());
  return Value(std::move(copy));
}

TypeInfo TypeOfValue(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return TypeInfo::Tensor(v.tensor().dtype(), ShapeFromDims(v.tensor().dims()));
    case Value::Kind::kSequence: return TypeInfo::Sequence(v.element_type());
    case Value::Kind::kNone: return TypeInfo::Optional(v.element_type());
    case Value::Kind::kMap: {
      Shape n = {Dim::Known(v.map_values().num_elements())};
      return TypeInfo::Map(v.map_keys().dtype(), TypeInfo::Tensor(v.map_values().dtype(), n));
    }
    case Value::Kind::kEmpty: break;
  }
  return TypeInfo{};
}

namespace {

std::optional<Shape> UnionShapes(const std::optional<Shape>& a, const std::optional<Shape>& b) {
  if (!a || !b || a->size() != b->size()) return std::nullopt;
  Shape out(a->size());
  for (size_t d = 0; d < a->size(); ++d) out[d] = (*a)[d] == (*b)[d] ? (*a)[d] : Dim::Unknown();
  return out;
}

}  // namespace

TypeInfo UnionTypes(const TypeInfo& a, const TypeInfo& b) {
  if (a.kind != b.kind || a.kind == TypeInfo::Kind::kUnknown) return TypeInfo{};
  TypeInfo out;
  out.kind = a.kind;
  switch (a.kind) {
    case TypeInfo::Kind::kTensor:
    case TypeInfo::Kind::kSparseTensor:
      if (a.elem_type != b.elem_type) return TypeInfo{};
      out.elem_type = a.elem_type;
      out.shape = UnionShapes(a.shape, b.shape);
      return out;
    case TypeInfo::Kind::kMap:
      if (a.elem_type != b.elem_type) return TypeInfo{};
      out.elem_type = a.elem_type;
      [[fallthrough]];
    case TypeInfo::Kind::kSequence:
    case TypeInfo::Kind::kOptional:
      if (a.inner && b.inner) out.inner = std::make_shared<TypeInfo>(UnionTypes(*a.inner, *b.inner));
      else out.inner = std::make_shared<TypeInfo>();
      return out;
    case TypeInfo::Kind::kUnknown: break;
  }
  return TypeInfo{};
}

bool TypesEqual(const TypeInfo& a, const TypeInfo& b) {
  if (a.kind != b.kind || a.elem_type != b.elem_type || a.shape != b.shape) return false;
  if (!a.inner || !b.inner) return !a.inner && !b.inner;
  return TypesEqual(*a.inner, *b.inner);
}

TypeInfo WithoutShapes(const TypeInfo& t) {
  TypeInfo out = t;
  out.shape.reset();
  if (t.inner) out.inner = std::make_shared<TypeInfo>(WithoutShapes(*t.inner));
  return out;
}

std::vector<TypeInfo> DeclaredOutputTypes(const Graph& g) {
  std::vector<TypeInfo> types;
  types.reserve(g.outputs.size());
  for (const ValueInfo& v : g.outputs) types.push_back(v.type);
  return types;
}

Result<std::vector<TypeInfo>> InferBody(const InferenceContext& ictx, const Graph& body,
                                        const std::vector<TypeInfo>& input_types) {
  if (!ictx.infer_subgraph) return DeclaredOutputTypes(body);
  // Where the caller knows nothing about an input, the body's declaration
  // is the better guess (it is part of the model).
  std::vector<TypeInfo> inputs = input_types;
  if (inputs.size() == body.inputs.size()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TypeInfo& declared = body.inputs[i].type;
      if (inputs[i].kind == TypeInfo::Kind::kUnknown) {
        inputs[i] = declared;
      } else if (inputs[i].is_tensor() && !inputs[i].shape && declared.is_tensor() &&
                 (declared.elem_type == inputs[i].elem_type || declared.elem_type == DataType::kUndefined)) {
        inputs[i].shape = declared.shape;  // e.g. a sequence element whose shape only the body declares
      }
    }
  }
  Result<std::vector<TypeInfo>> types = ictx.infer_subgraph(body, inputs);
  if (!types.ok()) return types.status().WithContext(ictx.node.Describe() + ": in subgraph '" + body.name + "': ");
  // A callback that knows less than the body's declarations: fill from them.
  std::vector<TypeInfo> out = std::move(types).value();
  std::vector<TypeInfo> declared = DeclaredOutputTypes(body);
  out.resize(std::max(out.size(), declared.size()));
  for (size_t i = 0; i < declared.size(); ++i)
    if (out[i].kind == TypeInfo::Kind::kUnknown) out[i] = declared[i];
  return out;
}

}  // namespace nee::cf
