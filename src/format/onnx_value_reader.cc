// The ONNX reader's SequenceProto, MapProto and OptionalProto parsing, and
// the value-file entry points (ReadTensorProto, ReadValueProto*) that pick
// among the message kinds. Split from onnx_reader.cc (model, graph and node
// messages) to keep each file readable whole.
#include "format/onnx_reader_internal.h"

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nee::onnx_reader_internal {

namespace {

// Field numbers, from onnx/onnx-ml.proto and onnx/onnx-data.proto.
constexpr FieldName kSequenceFields[] = {
    {1, "name"}, {2, "elem_type"}, {3, "tensor_values"}, {4, "sparse_tensor_values"},
    {5, "sequence_values"}, {6, "map_values"}, {7, "optional_values"}};
constexpr FieldName kMapFields[] = {
    {1, "name"}, {2, "key_type"}, {3, "keys"}, {4, "string_keys"}, {5, "values"}};
constexpr FieldName kOptionalFields[] = {
    {1, "name"}, {2, "elem_type"}, {3, "tensor_value"}, {4, "sparse_tensor_value"},
    {5, "sequence_value"}, {6, "map_value"}, {7, "optional_value"}};

// SequenceProto / OptionalProto elem_type values.
enum ValueElemType { kValueTensor = 1, kValueSparse = 2, kValueSequence = 3, kValueMap = 4,
                     kValueOptional = 5 };

}  // namespace

// ---------------------------------------------------- sequence/map/optional ---

Status OnnxParser::ParseSequence(ByteRange b, Value* value) {
  MessageReader m(d_, b, kSequenceFields);
  int32_t elem_type = 0;
  std::vector<Value> elements;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    int64_t index = static_cast<int64_t>(elements.size());
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.Bytes(f).status()); break;
      case 2: { NEE_ASSIGN_OR_RETURN(elem_type, m.Int32(f)); break; }
      case 3: {
        Tensor t;
        std::string name, doc;
        NEE_RETURN_IF_ERROR(Sub(m, f, "tensor_values", index,
                                [&](ByteRange tb) { return ParseTensor(tb, f.offset, &t, &name, &doc); }));
        elements.emplace_back(std::move(t));
        break;
      }
      case 4:
        return m.Error("sparse tensors in sequences are not supported", f);
      case 5:
      case 6:
      case 7: {
        Value v;
        const char* name = f.number == 5 ? "sequence_values" : f.number == 6 ? "map_values" : "optional_values";
        NEE_RETURN_IF_ERROR(Sub(m, f, name, index, [&](ByteRange vb) {
          return f.number == 5 ? ParseSequence(vb, &v) : f.number == 6 ? ParseMap(vb, &v) : ParseOptional(vb, &v);
        }));
        elements.push_back(std::move(v));
        break;
      }
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  if (elem_type < 0 || elem_type > kValueOptional)
    return d_.Error("invalid sequence elem_type " + std::to_string(elem_type), d_.OffsetOf(b.data), "elem_type");
  // The element type, as far as the values tell it.
  TypeInfo element_type;
  if (elem_type == kValueTensor || (!elements.empty() && elements[0].is_tensor())) {
    element_type = TypeInfo::Tensor(elements.empty() ? DataType::kUndefined : elements[0].tensor().dtype());
  } else if (elem_type == kValueSequence) {
    element_type = TypeInfo::Sequence(TypeInfo());
  }
  *value = Value::Sequence(std::move(elements), std::move(element_type));
  return Status::Ok();
}

// Stacks a map's scalar (or same-shaped) value tensors into one tensor.
Status OnnxParser::TensorsToMapValues(const std::vector<Value>& elements, size_t offset, Tensor* values) {
  if (elements.empty()) {
    NEE_ASSIGN_OR_RETURN(*values, Tensor::Allocate(DataType::kFloat, {0}));
    return Status::Ok();
  }
  for (const Value& v : elements)
    if (!v.is_tensor()) return d_.Error("map values must be tensors", offset, "values");
  const Tensor& first = elements[0].tensor();
  std::vector<int64_t> dims = {static_cast<int64_t>(elements.size())};
  dims.insert(dims.end(), first.dims().begin(), first.dims().end());
  for (const Value& v : elements)
    if (v.tensor().dtype() != first.dtype() || v.tensor().dims() != first.dims())
      return d_.Error("map values differ in type or shape", offset, "values");
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(first.dtype(), dims));
  if (first.dtype() == DataType::kString) {
    std::string* p = out.data<std::string>();
    for (const Value& v : elements)
      for (const std::string& s : v.tensor().span<std::string>()) *p++ = s;
  } else {
    uint8_t* p = static_cast<uint8_t*>(out.raw_data());
    for (const Value& v : elements) {
      std::memcpy(p, v.tensor().raw_data(), v.tensor().byte_size());
      p += v.tensor().byte_size();
    }
  }
  *values = std::move(out);
  return Status::Ok();
}

Status OnnxParser::ParseMap(ByteRange b, Value* value) {
  MessageReader m(d_, b, kMapFields);
  int32_t key_type = 0;
  std::vector<int64_t> keys;
  std::vector<std::string> string_keys;
  Value values;
  bool has_values = false;
  size_t values_offset = d_.OffsetOf(b.data);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.Bytes(f).status()); break;
      case 2: { NEE_ASSIGN_OR_RETURN(key_type, m.Int32(f)); break; }
      case 3: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &keys)); break;
      case 4: { NEE_ASSIGN_OR_RETURN(std::string s, m.String(f)); string_keys.push_back(std::move(s)); break; }
      case 5:
        has_values = true;
        values_offset = f.offset;
        NEE_RETURN_IF_ERROR(Sub(m, f, "values", -1, [&](ByteRange vb) { return ParseSequence(vb, &values); }));
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  size_t offset = d_.OffsetOf(b.data);
  if (!IsValidDataType(key_type) || (!IsSignedInteger(static_cast<DataType>(key_type)) &&
                                     !IsUnsignedInteger(static_cast<DataType>(key_type)) &&
                                     key_type != static_cast<int32_t>(DataType::kString)) ||
      IsSubByte(static_cast<DataType>(key_type)))
    return d_.Error("invalid map key_type " + std::to_string(key_type), offset, "key_type");
  DataType key = static_cast<DataType>(key_type);
  bool string_key = key == DataType::kString;
  if (string_key ? !keys.empty() : !string_keys.empty())
    return d_.Error("map keys stored in the wrong field for key type " + std::string(DataTypeName(key)), offset);
  int64_t n = static_cast<int64_t>(string_key ? string_keys.size() : keys.size());
  size_t n_values = has_values ? values.elements().size() : 0;
  if (static_cast<size_t>(n) != n_values)
    return d_.Error("map has " + std::to_string(n) + " keys but " + std::to_string(n_values) + " values", offset);
  NEE_ASSIGN_OR_RETURN(Tensor key_tensor, Tensor::Allocate(key, {n}));
  for (int64_t i = 0; i < n; ++i) {
    switch (key) {
      case DataType::kString: key_tensor.data<std::string>()[i] = string_keys[i]; break;
      case DataType::kInt8: key_tensor.data<int8_t>()[i] = static_cast<int8_t>(keys[i]); break;
      case DataType::kInt16: key_tensor.data<int16_t>()[i] = static_cast<int16_t>(keys[i]); break;
      case DataType::kInt32: key_tensor.data<int32_t>()[i] = static_cast<int32_t>(keys[i]); break;
      case DataType::kInt64: key_tensor.data<int64_t>()[i] = keys[i]; break;
      case DataType::kUint8: key_tensor.data<uint8_t>()[i] = static_cast<uint8_t>(keys[i]); break;
      case DataType::kUint16: key_tensor.data<uint16_t>()[i] = static_cast<uint16_t>(keys[i]); break;
      case DataType::kUint32: key_tensor.data<uint32_t>()[i] = static_cast<uint32_t>(keys[i]); break;
      case DataType::kUint64: key_tensor.data<uint64_t>()[i] = static_cast<uint64_t>(keys[i]); break;
      default: break;
    }
  }
  Tensor value_tensor;
  if (has_values) {
    NEE_RETURN_IF_ERROR(TensorsToMapValues(values.elements(), values_offset, &value_tensor));
  } else {
    NEE_ASSIGN_OR_RETURN(value_tensor, Tensor::Allocate(DataType::kFloat, {0}));
  }
  *value = Value::Map(std::move(key_tensor), std::move(value_tensor));
  return Status::Ok();
}

Status OnnxParser::ParseOptional(ByteRange b, Value* value) {
  MessageReader m(d_, b, kOptionalFields);
  int32_t elem_type = 0;
  std::optional<Value> contents;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.Bytes(f).status()); break;
      case 2: { NEE_ASSIGN_OR_RETURN(elem_type, m.Int32(f)); break; }
      case 3: {
        Tensor t;
        std::string name, doc;
        NEE_RETURN_IF_ERROR(Sub(m, f, "tensor_value", -1,
                                [&](ByteRange tb) { return ParseTensor(tb, f.offset, &t, &name, &doc); }));
        contents = Value(std::move(t));
        break;
      }
      case 4:
        return m.Error("sparse tensors in optionals are not supported", f);
      case 5:
      case 6:
      case 7: {
        Value v;
        const char* name = f.number == 5 ? "sequence_value" : f.number == 6 ? "map_value" : "optional_value";
        NEE_RETURN_IF_ERROR(Sub(m, f, name, -1, [&](ByteRange vb) {
          return f.number == 5 ? ParseSequence(vb, &v) : f.number == 6 ? ParseMap(vb, &v) : ParseOptional(vb, &v);
        }));
        contents = std::move(v);
        break;
      }
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  if (elem_type < 0 || elem_type > kValueOptional)
    return d_.Error("invalid optional elem_type " + std::to_string(elem_type), d_.OffsetOf(b.data), "elem_type");
  if (contents) {
    *value = std::move(*contents);
    return Status::Ok();
  }
  TypeInfo held;
  if (elem_type == kValueTensor) held = TypeInfo::Tensor(DataType::kUndefined);
  if (elem_type == kValueSequence) held = TypeInfo::Sequence(TypeInfo());
  if (elem_type == kValueOptional) held = TypeInfo::Optional(TypeInfo());
  if (elem_type == kValueMap) held = TypeInfo::Map(DataType::kUndefined, TypeInfo());
  *value = Value::None(std::move(held));
  return Status::Ok();
}

}  // namespace nee::onnx_reader_internal

namespace nee {

using onnx_reader_internal::OnnxParser;

Result<Tensor> ReadTensorProto(std::shared_ptr<MappedFile> bytes) {
  if (!bytes) return InvalidArgument("ReadTensorProto: no bytes");
  OnnxParser parser(bytes, ReadOptions(), "tensor");
  Tensor tensor;
  std::string name, doc;
  NEE_RETURN_IF_ERROR(parser.ParseTensor(parser.whole(), 0, &tensor, &name, &doc));
  return tensor;
}

Result<Value> ReadValueProtoBytes(std::shared_ptr<MappedFile> bytes, const TypeInfo* expected_type) {
  if (!bytes) return InvalidArgument("ReadValueProtoBytes: no bytes");
  enum class Kind { kTensor, kSequence, kMap, kOptional };
  auto parse_as = [&](Kind kind, bool strict) -> Result<Value> {
    const char* root = kind == Kind::kTensor ? "tensor" : kind == Kind::kSequence ? "sequence"
                       : kind == Kind::kMap ? "map" : "optional";
    OnnxParser parser(bytes, ReadOptions(), root);
    parser.set_strict(strict);
    Value v;
    switch (kind) {
      case Kind::kTensor: {
        Tensor t;
        std::string name, doc;
        NEE_RETURN_IF_ERROR(parser.ParseTensor(parser.whole(), 0, &t, &name, &doc));
        v = Value(std::move(t));
        break;
      }
      case Kind::kSequence: NEE_RETURN_IF_ERROR(parser.ParseSequence(parser.whole(), &v)); break;
      case Kind::kMap: NEE_RETURN_IF_ERROR(parser.ParseMap(parser.whole(), &v)); break;
      case Kind::kOptional: NEE_RETURN_IF_ERROR(parser.ParseOptional(parser.whole(), &v)); break;
    }
    return v;
  };
  if (expected_type) {
    switch (expected_type->kind) {
      case TypeInfo::Kind::kTensor: return parse_as(Kind::kTensor, false);
      case TypeInfo::Kind::kSequence: return parse_as(Kind::kSequence, false);
      case TypeInfo::Kind::kMap: return parse_as(Kind::kMap, false);
      case TypeInfo::Kind::kOptional: return parse_as(Kind::kOptional, false);
      default:
        return NotImplemented("reading a value of type " + expected_type->ToString() + " is not supported");
    }
  }
  // No type given: the first kind that parses strictly wins.
  Result<Value> first = parse_as(Kind::kTensor, true);
  if (first.ok()) return first;
  for (Kind kind : {Kind::kSequence, Kind::kMap, Kind::kOptional}) {
    Result<Value> v = parse_as(kind, true);
    if (v.ok()) return v;
  }
  return InvalidModel("not a TensorProto, SequenceProto, MapProto or OptionalProto (as a tensor: " +
                      first.status().message() + ")");
}

Result<Value> ReadValueProtoFile(const std::string& path) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  auto v = ReadValueProtoBytes(std::move(file), nullptr);
  if (!v.ok()) return v.status().WithContext("'" + path + "': ");
  return v;
}

Result<Value> ReadValueProtoFileAs(const std::string& path, const TypeInfo& expected_type) {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  auto v = ReadValueProtoBytes(std::move(file), &expected_type);
  if (!v.ok()) return v.status().WithContext("'" + path + "': ");
  return v;
}

}  // namespace nee
