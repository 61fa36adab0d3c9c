// The ONNX reader's TensorProto, SparseTensorProto and TypeProto parsing:
// counting values before allocating, zero-copy views of raw and external
// data, typed fields decoded into tensors, and the type / shape / dim
// messages of value infos. Split from onnx_reader.cc (model, graph and node
// messages) to keep each file readable whole.
#include "format/onnx_reader_internal.h"

#include <cstring>
#include <new>

#include "base/populated_memory.h"

namespace nee::onnx_reader_internal {

namespace {

// Field numbers, from onnx/onnx-ml.proto and onnx/onnx-data.proto.
constexpr FieldName kTensorFields[] = {
    {1, "dims"}, {2, "data_type"}, {3, "segment"}, {4, "float_data"}, {5, "int32_data"},
    {6, "string_data"}, {7, "int64_data"}, {8, "name"}, {9, "raw_data"}, {10, "double_data"},
    {11, "uint64_data"}, {12, "doc_string"}, {13, "external_data"}, {14, "data_location"},
    {16, "metadata_props"}};
constexpr FieldName kSegmentFields[] = {{1, "begin"}, {2, "end"}};
constexpr FieldName kSparseTensorFields[] = {{1, "values"}, {2, "indices"}, {3, "dims"}};
constexpr FieldName kTypeFields[] = {
    {1, "tensor_type"}, {4, "sequence_type"}, {5, "map_type"}, {6, "denotation"},
    {7, "opaque_type"}, {8, "sparse_tensor_type"}, {9, "optional_type"}};
constexpr FieldName kTensorTypeFields[] = {{1, "elem_type"}, {2, "shape"}};
constexpr FieldName kElemTypeFields[] = {{1, "elem_type"}};
constexpr FieldName kMapTypeFields[] = {{1, "key_type"}, {2, "value_type"}};
constexpr FieldName kShapeFields[] = {{1, "dim"}};
constexpr FieldName kDimFields[] = {{1, "dim_value"}, {2, "dim_param"}, {3, "denotation"}};

// Alignment a zero-copy view needs so that element loads are aligned.
size_t ElementAlignment(DataType type) {
  int bits = ElementBits(type);
  if (type == DataType::kComplex64) return 4;
  if (type == DataType::kComplex128) return 8;
  if (bits <= 8) return 1;
  return static_cast<size_t>(bits / 8 > 8 ? 8 : bits / 8);
}

// Which typed TensorProto field holds a data type's values.
const char* TypedFieldName(TypedField f) {
  switch (f) {
    case TypedField::kFloat: return "float_data";
    case TypedField::kInt32: return "int32_data";
    case TypedField::kString: return "string_data";
    case TypedField::kInt64: return "int64_data";
    case TypedField::kDouble: return "double_data";
    case TypedField::kUint64: return "uint64_data";
    case TypedField::kNone: break;
  }
  return "none";
}
TypedField TypedFieldFor(DataType type) {
  switch (type) {
    case DataType::kFloat: case DataType::kComplex64: return TypedField::kFloat;
    case DataType::kDouble: case DataType::kComplex128: return TypedField::kDouble;
    case DataType::kInt64: return TypedField::kInt64;
    case DataType::kUint32: case DataType::kUint64: return TypedField::kUint64;
    case DataType::kString: return TypedField::kString;
    case DataType::kUndefined: return TypedField::kNone;
    default: return TypedField::kInt32;  // int8/16/32, uint8/16, bool, 16-bit and 8-bit floats, sub-byte
  }
}

}  // namespace

Status OnnxParser::ElemTypeFromValue(int32_t value, size_t offset, const char* field, DataType* out) {
  // 0 (undefined) is allowed in types: partially specified value infos use it.
  if (value != 0 && !IsValidDataType(value))
    return d_.Error("unsupported element type " + std::to_string(value), offset, field);
  *out = static_cast<DataType>(value);
  return Status::Ok();
}

Status OnnxParser::ParseType(ByteRange b, TypeInfo* type) {
  MessageReader m(d_, b, kTypeFields);
  std::string denotation;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1:
      case 8: {
        bool sparse = f.number == 8;
        NEE_RETURN_IF_ERROR(Sub(m, f, sparse ? "sparse_tensor_type" : "tensor_type", -1,
                                [&](ByteRange t) { return ParseTensorType(t, type); }));
        type->kind = sparse ? TypeInfo::Kind::kSparseTensor : TypeInfo::Kind::kTensor;
        break;
      }
      case 4:
      case 9: {
        bool optional = f.number == 9;
        TypeInfo inner;
        NEE_RETURN_IF_ERROR(Sub(m, f, optional ? "optional_type" : "sequence_type", -1, [&](ByteRange s) {
          MessageReader sm(d_, s, kElemTypeFields);
          while (!sm.done()) {
            Field sf;
            NEE_RETURN_IF_ERROR(sm.Next(&sf));
            if (sf.number == 1) {
              NEE_RETURN_IF_ERROR(Sub(sm, sf, "elem_type", -1, [&](ByteRange e) { return ParseType(e, &inner); }));
            } else {
              NEE_RETURN_IF_ERROR(sm.Unknown(sf));
            }
          }
          return Status::Ok();
        }));
        *type = optional ? TypeInfo::Optional(std::move(inner)) : TypeInfo::Sequence(std::move(inner));
        break;
      }
      case 5: {
        DataType key = DataType::kUndefined;
        TypeInfo value;
        NEE_RETURN_IF_ERROR(Sub(m, f, "map_type", -1, [&](ByteRange s) {
          MessageReader mm(d_, s, kMapTypeFields);
          while (!mm.done()) {
            Field mf;
            NEE_RETURN_IF_ERROR(mm.Next(&mf));
            if (mf.number == 1) {
              NEE_ASSIGN_OR_RETURN(int32_t k, mm.Int32(mf));
              NEE_RETURN_IF_ERROR(ElemTypeFromValue(k, mf.offset, "key_type", &key));
            } else if (mf.number == 2) {
              NEE_RETURN_IF_ERROR(Sub(mm, mf, "value_type", -1, [&](ByteRange v) { return ParseType(v, &value); }));
            } else {
              NEE_RETURN_IF_ERROR(mm.Unknown(mf));
            }
          }
          return Status::Ok();
        }));
        *type = TypeInfo::Map(key, std::move(value));
        break;
      }
      case 6: { NEE_ASSIGN_OR_RETURN(denotation, m.String(f)); break; }
      case 7:  // opaque_type: no runtime meaning; the type stays unknown.
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  type->denotation = std::move(denotation);
  return Status::Ok();
}

Status OnnxParser::ParseTensorType(ByteRange b, TypeInfo* type) {
  MessageReader m(d_, b, kTensorTypeFields);
  type->shape.reset();
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1) {
      NEE_ASSIGN_OR_RETURN(int32_t t, m.Int32(f));
      NEE_RETURN_IF_ERROR(ElemTypeFromValue(t, f.offset, "elem_type", &type->elem_type));
    } else if (f.number == 2) {
      Shape shape;
      NEE_RETURN_IF_ERROR(Sub(m, f, "shape", -1, [&](ByteRange s) { return ParseShape(s, &shape); }));
      type->shape = std::move(shape);
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseShape(ByteRange b, Shape* shape) {
  MessageReader m(d_, b, kShapeFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1) {
      NEE_RETURN_IF_ERROR(SubAppend(m, f, "dim", shape, &OnnxParser::ParseDim));
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseDim(ByteRange b, Dim* dim) {
  MessageReader m(d_, b, kDimFields);
  *dim = Dim::Unknown();
  std::string denotation;  // kept across the dim_value / dim_param oneof, which replaces *dim
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: {  // oneof: the last of dim_value / dim_param wins
        NEE_ASSIGN_OR_RETURN(int64_t v, m.Int64(f));
        // A negative size carries no information; keep the dim unknown.
        *dim = v >= 0 ? Dim::Known(v) : Dim::Unknown();
        break;
      }
      case 2: {
        NEE_ASSIGN_OR_RETURN(std::string s, m.String(f));
        *dim = s.empty() ? Dim::Unknown() : Dim::Symbol(std::move(s));
        break;
      }
      case 3: {
        NEE_ASSIGN_OR_RETURN(denotation, m.String(f));
        break;
      }
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  dim->denotation = std::move(denotation);
  return Status::Ok();
}

Status OnnxParser::ParseSparseTensor(ByteRange b, SparseTensor* sparse) {
  MessageReader m(d_, b, kSparseTensorFields);
  std::string doc;
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1:
        NEE_RETURN_IF_ERROR(Sub(m, f, "values", -1, [&](ByteRange t) {
          return ParseTensor(t, f.offset, &sparse->values, &sparse->name, &doc);
        }));
        break;
      case 2: {
        std::string ignored;
        NEE_RETURN_IF_ERROR(Sub(m, f, "indices", -1, [&](ByteRange t) {
          return ParseTensor(t, f.offset, &sparse->indices, &ignored, &doc);
        }));
        break;
      }
      case 3: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &sparse->dims)); break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  for (int64_t d : sparse->dims)
    if (d < 0) return d_.Error("negative dimension in sparse tensor '" + sparse->name + "'", d_.OffsetOf(b.data));
  // Both parts are required (an empty sparse tensor has empty values and indices).
  if (!sparse->values.defined())
    return d_.Error("sparse tensor '" + sparse->name + "' has no values", d_.OffsetOf(b.data));
  if (!sparse->indices.defined())
    return d_.Error("sparse tensor '" + sparse->name + "' has no indices", d_.OffsetOf(b.data));
  return Status::Ok();
}

// --------------------------------------------------------------- tensors ---

Status OnnxParser::ParseSegment(ByteRange b) {
  MessageReader m(d_, b, kSegmentFields);
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    if (f.number == 1 || f.number == 2) {
      NEE_RETURN_IF_ERROR(m.Int64(f).status());
    } else {
      NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseTensorFields(ByteRange b, TensorFields* tf) {
  MessageReader m(d_, b, kTensorFields);
  // Accepts one unpacked element (wire type `scalar`) or a packed run.
  auto add_run = [&m](const Field& f, WireType scalar, size_t width, std::vector<ByteRange>* runs) -> Status {
    if (f.wire_type == scalar) {
      runs->push_back(f.payload);
      return Status::Ok();
    }
    NEE_ASSIGN_OR_RETURN(ByteRange run, m.Message(f));
    if (width > 0 && run.size % width != 0)
      return m.Error("packed field size " + std::to_string(run.size) + " is not a multiple of " +
                         std::to_string(width),
                     f);
    if (width == 0 && PackedVarints::Count(run) < 0) return m.Error("malformed packed varint", f);
    if (run.size > 0) runs->push_back(run);
    return Status::Ok();
  };
  while (!m.done()) {
    Field f;
    NEE_RETURN_IF_ERROR(m.Next(&f));
    switch (f.number) {
      case 1: NEE_RETURN_IF_ERROR(m.AppendInt64s(f, &tf->dims)); break;
      case 2: { NEE_ASSIGN_OR_RETURN(tf->data_type, m.Int32(f)); break; }
      case 3:
        tf->has_segment = true;
        NEE_RETURN_IF_ERROR(Sub(m, f, "segment", -1, [&](ByteRange s) { return ParseSegment(s); }));
        break;
      case 4: NEE_RETURN_IF_ERROR(add_run(f, WireType::kFixed32, 4, &tf->float_runs)); break;
      case 5: NEE_RETURN_IF_ERROR(add_run(f, WireType::kVarint, 0, &tf->int32_runs)); break;
      case 6: { NEE_ASSIGN_OR_RETURN(std::string_view s, m.Bytes(f)); tf->strings.push_back(s); break; }
      case 7: NEE_RETURN_IF_ERROR(add_run(f, WireType::kVarint, 0, &tf->int64_runs)); break;
      case 8: { NEE_ASSIGN_OR_RETURN(tf->name, m.String(f)); break; }
      case 9: {
        NEE_ASSIGN_OR_RETURN(tf->raw, m.Message(f));
        tf->has_raw = true;
        tf->raw_offset = f.offset;
        break;
      }
      case 10: NEE_RETURN_IF_ERROR(add_run(f, WireType::kFixed64, 8, &tf->double_runs)); break;
      case 11: NEE_RETURN_IF_ERROR(add_run(f, WireType::kVarint, 0, &tf->uint64_runs)); break;
      case 12: { NEE_ASSIGN_OR_RETURN(tf->doc_string, m.String(f)); break; }
      case 13:
        NEE_RETURN_IF_ERROR(SubAppend(m, f, "external_data", &tf->external_data, &OnnxParser::ParseEntry));
        break;
      case 14: { NEE_ASSIGN_OR_RETURN(tf->data_location, m.Int32(f)); break; }
      case 16:  // metadata_props: not kept
        NEE_RETURN_IF_ERROR(m.Message(f).status());
        break;
      default:
        NEE_RETURN_IF_ERROR(m.Unknown(f));
    }
  }
  return Status::Ok();
}

Status OnnxParser::ParseTensor(ByteRange b, size_t offset, Tensor* tensor, std::string* name,
                               std::string* doc_string) {
  TensorFields tf;
  tf.offset = offset;
  NEE_RETURN_IF_ERROR(ParseTensorFields(b, &tf));
  NEE_RETURN_IF_ERROR(BuildTensor(tf, tensor));
  *name = std::move(tf.name);
  *doc_string = std::move(tf.doc_string);
  return Status::Ok();
}

Status OnnxParser::BuildTensor(const TensorFields& tf, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  if (tf.has_segment) return d_.Error(who + "segmented tensors are not supported", tf.offset);
  if (!IsValidDataType(tf.data_type))
    return d_.Error(who + (tf.data_type == 0 ? std::string("data_type is not set")
                                             : "unsupported data_type " + std::to_string(tf.data_type)),
                    tf.offset, "data_type");
  DataType type = static_cast<DataType>(tf.data_type);
  for (int64_t dim : tf.dims)
    if (dim < 0) return d_.Error(who + "negative dimension in " + DimsToString(tf.dims), tf.offset, "dims");
  auto count_or = CheckedElementCount(tf.dims);
  if (!count_or.ok()) return d_.Error(who + count_or.status().message(), tf.offset, "dims");
  int64_t count = count_or.value();
  // Bounds the byte computations below; the data present is checked after.
  const bool custom_limit = options_.max_tensor_bytes > 0 && options_.max_tensor_bytes < kMaxTensorBytes;
  const int64_t max_bytes = custom_limit ? options_.max_tensor_bytes : kMaxTensorBytes;
  if (count > max_bytes * 8 / ElementBits(type))
    return d_.Error(who + "shape " + DimsToString(tf.dims) + " needs more than the limit of " +
                        std::to_string(max_bytes) + " bytes per tensor" +
                        (custom_limit ? " (SessionOptions max_tensor_bytes)" : ""),
                    tf.offset, "dims");

  if (tf.data_location == 1) return BuildFromExternal(tf, type, tf.dims, count, tensor);
  if (tf.data_location != 0)
    return d_.Error(who + "invalid data_location " + std::to_string(tf.data_location), tf.offset, "data_location");
  if (tf.has_raw) return BuildFromRaw(tf, type, tf.dims, count, tensor);
  return BuildFromTyped(tf, type, tf.dims, count, tensor);
}

Result<Tensor> OnnxParser::ViewOrCopy(DataType type, std::vector<int64_t> dims, const uint8_t* bytes,
                                      size_t size, std::shared_ptr<void> owner, bool* viewed) {
  if (size > 0 && reinterpret_cast<uintptr_t>(bytes) % ElementAlignment(type) == 0) {
    *viewed = true;
    return Tensor::View(type, std::move(dims), const_cast<uint8_t*>(bytes), std::move(owner));
  }
  // Unaligned (or empty): an owned copy, since unaligned element loads are UB.
  *viewed = false;
  if (size == 0) return Tensor::Allocate(type, std::move(dims));
  // Not Tensor::Allocate: its zero-fill would touch every page a second time.
  std::shared_ptr<void> copy_owner = AllocatePopulated(size);
  if (!copy_owner) return OutOfMemory("cannot allocate " + std::to_string(size) + " bytes for a tensor");
  void* copy = copy_owner.get();
  // The copy is what everyone reads from now on: the mapped file's pages
  // need not stay resident beside it (a no-op unless they are file pages).
  // Chunk by chunk, so that a large tensor's copy and its file pages are
  // never resident together in full (a peak of twice its size).
  constexpr size_t kChunk = size_t{4} << 20;
  for (size_t done = 0; done < size; done += kChunk) {
    const size_t n = std::min(kChunk, size - done);
    std::memcpy(static_cast<uint8_t*>(copy) + done, bytes + done, n);
    ReleaseFileBackedPages(bytes + done, n);
  }
  ReleaseFileBackedPages(bytes, size);  // the pages that straddled two chunks
  return Tensor::View(type, std::move(dims), copy, std::move(copy_owner));
}

Status OnnxParser::BuildFromRaw(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                                int64_t count, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  if (type == DataType::kString)
    return d_.Error(who + "string tensors cannot use raw_data", tf.raw_offset, "raw_data");
  size_t expected = StorageBytes(type, count);
  if (tf.raw.size != expected)
    return d_.Error(who + "raw_data has " + std::to_string(tf.raw.size) + " bytes, expected " +
                        std::to_string(expected) + " for " + DataTypeName(type) + DimsToString(dims),
                    tf.raw_offset, "raw_data");
  bool viewed = false;
  NEE_ASSIGN_OR_RETURN(*tensor, ViewOrCopy(type, std::move(dims), tf.raw.data, tf.raw.size, file_, &viewed));
  if (viewed) viewed_main_file_ = true;
  return Status::Ok();
}

namespace {

// Sums the element count of packed runs (fixed width or varint).
int64_t CountRunValues(const std::vector<ByteRange>& runs, size_t width) {
  int64_t total = 0;
  for (const ByteRange& r : runs) total += width ? static_cast<int64_t>(r.size / width) : PackedVarints::Count(r);
  return total;
}

template <typename Fn>
void ForEachVarint(const std::vector<ByteRange>& runs, Fn&& fn) {
  for (const ByteRange& r : runs) {
    PackedVarints it(r);
    uint64_t v;
    while (it.Next(&v)) fn(v);
  }
}

void CopyFixedRuns(const std::vector<ByteRange>& runs, uint8_t* out) {
  for (const ByteRange& r : runs) {
    std::memcpy(out, r.data, r.size);
    out += r.size;
  }
}

}  // namespace

Status OnnxParser::BuildFromTyped(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                                  int64_t count, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  TypedField field = TypedFieldFor(type);
  for (TypedField other : {TypedField::kFloat, TypedField::kInt32, TypedField::kString, TypedField::kInt64,
                           TypedField::kDouble, TypedField::kUint64}) {
    if (other != field && tf.HasTyped(other))
      return d_.Error(who + TypedFieldName(other) + " cannot hold " + DataTypeName(type) + " values",
                      tf.offset, TypedFieldName(other));
  }
  bool complex = type == DataType::kComplex64 || type == DataType::kComplex128;
  // Number of values the typed field must hold for `count` elements.
  int64_t expected_values = complex ? count * 2 : count;
  int64_t present = 0;
  switch (field) {
    case TypedField::kFloat: present = CountRunValues(tf.float_runs, 4); break;
    case TypedField::kDouble: present = CountRunValues(tf.double_runs, 8); break;
    case TypedField::kInt64: present = CountRunValues(tf.int64_runs, 0); break;
    case TypedField::kUint64: present = CountRunValues(tf.uint64_runs, 0); break;
    case TypedField::kString: present = static_cast<int64_t>(tf.strings.size()); break;
    case TypedField::kInt32:
      present = CountRunValues(tf.int32_runs, 0);
      // Sub-byte types store one packed byte per int32 value.
      if (IsSubByte(type)) expected_values = static_cast<int64_t>(StorageBytes(type, count));
      break;
    case TypedField::kNone: break;
  }
  if (present != expected_values) {
    if (present == 0 && count > 0)
      return d_.Error(who + "no data for " + std::to_string(count) + " elements of " + DataTypeName(type) +
                          DimsToString(dims),
                      tf.offset);
    return d_.Error(who + TypedFieldName(field) + " has " + std::to_string(present) + " values, expected " +
                        std::to_string(expected_values) + " for " + DataTypeName(type) + DimsToString(dims),
                    tf.offset, TypedFieldName(field));
  }
  // The count now matches data actually present in the file, so this
  // allocation is bounded by the file size.
  NEE_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(type, std::move(dims)));
  uint8_t* out = static_cast<uint8_t*>(t.raw_data());
  switch (field) {
    case TypedField::kFloat: CopyFixedRuns(tf.float_runs, out); break;
    case TypedField::kDouble: CopyFixedRuns(tf.double_runs, out); break;
    case TypedField::kInt64: {
      int64_t* p = t.data<int64_t>();
      ForEachVarint(tf.int64_runs, [&p](uint64_t v) { *p++ = static_cast<int64_t>(v); });
      break;
    }
    case TypedField::kUint64: {
      if (type == DataType::kUint64) {
        uint64_t* p = t.data<uint64_t>();
        ForEachVarint(tf.uint64_runs, [&p](uint64_t v) { *p++ = v; });
      } else {
        uint32_t* p = t.data<uint32_t>();
        ForEachVarint(tf.uint64_runs, [&p](uint64_t v) { *p++ = static_cast<uint32_t>(v); });
      }
      break;
    }
    case TypedField::kString: {
      std::string* p = t.data<std::string>();
      for (std::string_view s : tf.strings) *p++ = std::string(s);
      break;
    }
    case TypedField::kInt32: {
      int bits = ElementBits(type);
      if (type == DataType::kBool) {
        ForEachVarint(tf.int32_runs, [&out](uint64_t v) { *out++ = static_cast<uint32_t>(v) != 0 ? 1 : 0; });
      } else if (bits <= 8) {  // 8-bit types and packed sub-byte bytes
        ForEachVarint(tf.int32_runs, [&out](uint64_t v) { *out++ = static_cast<uint8_t>(v); });
      } else if (bits == 16) {
        uint16_t* p = t.data<uint16_t>();
        ForEachVarint(tf.int32_runs, [&p](uint64_t v) { *p++ = static_cast<uint16_t>(v); });
      } else {
        int32_t* p = t.data<int32_t>();
        ForEachVarint(tf.int32_runs, [&p](uint64_t v) { *p++ = static_cast<int32_t>(static_cast<uint32_t>(v)); });
      }
      break;
    }
    case TypedField::kNone: break;
  }
  *tensor = std::move(t);
  return Status::Ok();
}

Status OnnxParser::BuildFromExternal(const TensorFields& tf, DataType type, std::vector<int64_t> dims,
                                     int64_t count, Tensor* tensor) {
  const std::string who = "tensor '" + tf.name + "': ";
  auto supplied = options_.external_initializers.find(tf.name);
  if (supplied != options_.external_initializers.end())
    return UseSuppliedTensor(tf, type, dims, supplied->second, tensor);
  if (type == DataType::kString)
    return d_.Error(who + "string tensors cannot use external data", tf.offset, "data_location");
  size_t expected = StorageBytes(type, count);
  auto slice_or = external_.Resolve(tf.name, tf.external_data, expected);
  if (!slice_or.ok()) return d_.Error(slice_or.status().message(), tf.offset, "external_data");
  const format::ExternalSlice& slice = slice_or.value();
  bool viewed = false;
  NEE_ASSIGN_OR_RETURN(*tensor, ViewOrCopy(type, std::move(dims), slice.data, slice.size, slice.file, &viewed));
  return Status::Ok();
}

Status OnnxParser::UseSuppliedTensor(const TensorFields& tf, DataType type, const std::vector<int64_t>& dims,
                                     const Tensor& supplied, Tensor* tensor) {
  if (supplied.dtype() != type || supplied.dims() != dims)
    return InvalidArgument("external initializer '" + tf.name + "': the model stores " + DataTypeName(type) +
                           ShapeToString(ShapeFromDims(dims)) + " but the supplied tensor is " +
                           DataTypeName(supplied.dtype()) + ShapeToString(ShapeFromDims(supplied.dims())));
  used_supplied_.insert(tf.name);
  *tensor = supplied;
  return Status::Ok();
}

Status OnnxParser::CheckSuppliedTensorsUsed() const {
  for (const auto& [name, tensor] : options_.external_initializers)
    if (!used_supplied_.count(name))
      return InvalidArgument("external initializer '" + name +
                             "' was supplied but the model stores no tensor of that name as external data");
  return Status::Ok();
}

}  // namespace nee::onnx_reader_internal
