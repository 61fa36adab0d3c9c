// The C API for values: creating tensors, sequences and none, reading them
// back, loading, saving and serializing them. Split from c_api.cc, which
// holds sessions; like it, conversions only, no logic.
#include <cstring>
#include <string>
#include <vector>

#include "format/npy.h"
#include "format/onnx_reader.h"
#include "format/onnx_writer.h"
#include "nee/nee.h"

#include "api/c_api_util.h"

using namespace nee::c_api_util;  // NOLINT: the helpers every file of the C API uses

namespace {

const nee::Tensor* TensorOf(const nee_value_t* v) {
  return v && v->value.is_tensor() ? &v->value.tensor() : (v && v->value.is_map() ? &v->value.map_keys() : nullptr);
}

bool EndsWith(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

extern "C" {

nee_status_t nee_value_create_tensor_view(nee_dtype_t dtype, const int64_t* dims, size_t rank, void* data,
                                          size_t data_size, void (*release)(void*), void* release_context,
                                          nee_value_t** out_value) {
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  if (rank > 0 && !dims) return NullArg("dims");
  // Whatever happens, the caller's bytes are handed back exactly once.
  std::shared_ptr<void> owner(release_context, [release](void* context) {
    if (release) release(context);
  });
  return Guard([&]() -> nee_status_t {
    auto type = static_cast<nee::DataType>(dtype);
    if (!nee::IsValidDataType(dtype) || type == nee::DataType::kString)
      return Err(NEE_STATUS_INVALID_ARGUMENT, "invalid tensor element type for a view (strings cannot be viewed)");
    std::vector<int64_t> shape(dims, dims + rank);
    auto count = nee::CheckedElementCount(shape);
    if (!count.ok()) return MakeStatus(count.status());
    nee::Tensor t = nee::Tensor::View(type, std::move(shape), data, owner);
    if (data_size != t.byte_size())
      return Err(NEE_STATUS_INVALID_ARGUMENT, ("data has " + std::to_string(data_size) + " bytes, the tensor " +
                                               t.Describe() + " needs " + std::to_string(t.byte_size())).c_str());
    if (data_size > 0 && !data) return NullArg("data");
    *out_value = Wrap(nee::Value(std::move(t)));
    return nullptr;
  });
}

nee_status_t nee_value_create_tensor(nee_dtype_t dtype, const int64_t* dims, size_t rank, const void* data,
                                     size_t data_size, nee_value_t** out_value) {
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  if (rank > 0 && !dims) return NullArg("dims");
  return Guard([&]() -> nee_status_t {
    auto type = static_cast<nee::DataType>(dtype);
    if (!nee::IsValidDataType(dtype) || type == nee::DataType::kString)
      return Err(NEE_STATUS_INVALID_ARGUMENT, "invalid tensor element type (use nee_value_create_string_tensor for strings)");
    // Every byte is copied from `data` below (or the sizes disagree and nothing is used).
    auto t = nee::Tensor::AllocateUninitialized(type, std::vector<int64_t>(dims, dims + rank));
    if (!t.ok()) return MakeStatus(t.status());
    if (data_size != t->byte_size())
      return Err(NEE_STATUS_INVALID_ARGUMENT, ("data has " + std::to_string(data_size) + " bytes, the tensor " +
                                               t->Describe() + " needs " + std::to_string(t->byte_size())).c_str());
    if (data_size > 0) {
      if (!data) return NullArg("data");
      std::memcpy(t->raw_data(), data, data_size);
    }
    *out_value = Wrap(nee::Value(std::move(t).value()));
    return nullptr;
  });
}

nee_status_t nee_value_create_string_tensor(const int64_t* dims, size_t rank, const char* const* strings,
                                            const size_t* lengths, nee_value_t** out_value) {
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  if (rank > 0 && !dims) return NullArg("dims");
  return Guard([&]() -> nee_status_t {
    auto t = nee::Tensor::Allocate(nee::DataType::kString, std::vector<int64_t>(dims, dims + rank));
    if (!t.ok()) return MakeStatus(t.status());
    if (t->num_elements() > 0 && (!strings || !lengths)) return NullArg("strings");
    for (int64_t i = 0; i < t->num_elements(); ++i) {
      if (!strings[i] && lengths[i] > 0) return NullArg("a string");
      t->data<std::string>()[i].assign(strings[i] ? strings[i] : "", lengths[i]);
    }
    *out_value = Wrap(nee::Value(std::move(t).value()));
    return nullptr;
  });
}

nee_status_t nee_value_create_sequence(const nee_value_t* const* elements, size_t count, nee_dtype_t element_dtype,
                                       nee_value_t** out_value) {
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  return Guard([&]() -> nee_status_t {
    std::vector<nee::Value> items;
    for (size_t i = 0; i < count; ++i) {
      if (!elements || !elements[i]) return NullArg("a sequence element");
      items.push_back(elements[i]->value);
    }
    auto elem_type = nee::TypeInfo::Tensor(static_cast<nee::DataType>(element_dtype));
    *out_value = Wrap(nee::Value::Sequence(std::move(items), elem_type));
    return nullptr;
  });
}

nee_status_t nee_value_create_none(nee_value_t** out_value) {
  if (!out_value) return NullArg("out_value");
  return Guard([&]() -> nee_status_t {
    *out_value = Wrap(nee::Value::None(nee::TypeInfo{}));
    return nullptr;
  });
}

nee_status_t nee_value_load_file(const char* path, nee_value_t** out_value) {
  if (!path) return NullArg("path");
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  return Guard([&]() -> nee_status_t {
    std::string p = path;
    if (EndsWith(p, ".npy")) {
      auto t = nee::ReadNpyFile(p);
      if (!t.ok()) return MakeStatus(t.status());
      *out_value = Wrap(nee::Value(std::move(t).value()));
      return nullptr;
    }
    auto v = nee::ReadValueProtoFile(p);
    if (!v.ok()) return MakeStatus(v.status());
    *out_value = Wrap(std::move(v).value());
    return nullptr;
  });
}

nee_status_t nee_session_load_input_file(const nee_session_t* session, size_t input_index, const char* path,
                                         nee_value_t** out_value) {
  if (!session) return NullArg("session");
  if (!path) return NullArg("path");
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  const auto& inputs = InputsOf(session);
  if (input_index >= inputs.size()) return Err(NEE_STATUS_INVALID_ARGUMENT, "input index out of range");
  std::string p = path;
  if (EndsWith(p, ".npy")) return nee_value_load_file(path, out_value);
  return Guard([&]() -> nee_status_t {
    auto v = nee::ReadValueProtoFileAs(p, inputs[input_index].type);
    if (!v.ok()) return MakeStatus(v.status());
    *out_value = Wrap(std::move(v).value());
    return nullptr;
  });
}

nee_status_t nee_value_save_file(const nee_value_t* value, const char* path) {
  if (!value) return NullArg("value");
  if (!path) return NullArg("path");
  return Guard([&]() -> nee_status_t {
    std::string p = path;
    if (EndsWith(p, ".npy")) {
      if (!value->value.is_tensor())
        return Err(NEE_STATUS_INVALID_ARGUMENT, ("'" + p + "': a .npy file holds a tensor, not a " +
                                                 value->value.Describe() + "; save it as .pb").c_str());
      return MakeStatus(nee::WriteNpyFile(value->value.tensor(), p));
    }
    // .pb: TensorProto for tensors; SequenceProto/MapProto/OptionalProto otherwise.
    auto bytes = value->value.is_tensor() ? nee::SerializeTensorProto(value->value.tensor(), "")
                                          : nee::SerializeValueProto(value->value, "");
    if (!bytes.ok()) return MakeStatus(bytes.status());
    FILE* f = std::fopen(path, "wb");
    if (!f) return Err(NEE_STATUS_IO_ERROR, ("cannot write '" + p + "'").c_str());
    size_t written = std::fwrite(bytes->data(), 1, bytes->size(), f);
    bool ok = std::fclose(f) == 0 && written == bytes->size();
    if (!ok) return Err(NEE_STATUS_IO_ERROR, ("cannot write '" + p + "'").c_str());
    return nullptr;
  });
}

nee_status_t nee_value_serialize(const nee_value_t* value, void* buffer, size_t capacity, size_t* out_size) {
  if (!value) return NullArg("value");
  if (!out_size) return NullArg("out_size");
  if (!buffer && capacity) return NullArg("buffer");
  *out_size = 0;
  return Guard([&]() -> nee_status_t {
    auto bytes = value->value.is_tensor() ? nee::SerializeTensorProto(value->value.tensor(), "")
                                          : nee::SerializeValueProto(value->value, "");
    if (!bytes.ok()) return MakeStatus(bytes.status());
    *out_size = bytes->size();
    if (capacity >= bytes->size() && !bytes->empty()) std::memcpy(buffer, bytes->data(), bytes->size());
    return nullptr;
  });
}

nee_status_t nee_value_deserialize(const void* data, size_t size, int32_t kind, nee_value_t** out_value) {
  if (!data && size) return NullArg("data");
  if (!out_value) return NullArg("out_value");
  *out_value = nullptr;
  nee::TypeInfo type;
  switch (kind) {
    case NEE_VALUE_TENSOR: type.kind = nee::TypeInfo::Kind::kTensor; break;
    case NEE_VALUE_SEQUENCE: type.kind = nee::TypeInfo::Kind::kSequence; break;
    case NEE_VALUE_MAP: type.kind = nee::TypeInfo::Kind::kMap; break;
    case NEE_VALUE_NONE: type.kind = nee::TypeInfo::Kind::kOptional; break;
    default: return Err(NEE_STATUS_INVALID_ARGUMENT, ("nee_value_deserialize: unknown kind " + std::to_string(kind)).c_str());
  }
  return Guard([&]() -> nee_status_t {
    auto v = nee::ReadValueProtoBytes(nee::MappedFile::FromBytes(data, size), &type);
    if (!v.ok()) return MakeStatus(v.status());
    *out_value = Wrap(std::move(v).value());
    return nullptr;
  });
}

void nee_value_release(nee_value_t* value) { delete value; }

nee_value_kind_t nee_value_kind(const nee_value_t* value) {
  if (!value) return NEE_VALUE_NONE;
  switch (value->value.kind()) {
    case nee::Value::Kind::kTensor: return NEE_VALUE_TENSOR;
    case nee::Value::Kind::kSequence: return NEE_VALUE_SEQUENCE;
    case nee::Value::Kind::kMap: return NEE_VALUE_MAP;
    default: return NEE_VALUE_NONE;
  }
}

nee_dtype_t nee_value_dtype(const nee_value_t* value) {
  if (value && value->value.is_sequence()) return static_cast<nee_dtype_t>(value->value.element_type().elem_type);
  const nee::Tensor* t = TensorOf(value);
  return t ? static_cast<nee_dtype_t>(t->dtype()) : NEE_DTYPE_UNDEFINED;
}
size_t nee_value_rank(const nee_value_t* value) {
  const nee::Tensor* t = TensorOf(value);
  return t ? t->dims().size() : 0;
}
const int64_t* nee_value_dims(const nee_value_t* value) {
  const nee::Tensor* t = TensorOf(value);
  return t ? t->dims().data() : nullptr;
}
int64_t nee_value_element_count(const nee_value_t* value) {
  const nee::Tensor* t = TensorOf(value);
  return t ? t->num_elements() : 0;
}
const void* nee_value_data(const nee_value_t* value) {
  const nee::Tensor* t = TensorOf(value);
  return t && t->dtype() != nee::DataType::kString ? t->raw_data() : nullptr;
}
size_t nee_value_data_size(const nee_value_t* value) {
  const nee::Tensor* t = TensorOf(value);
  return t && t->dtype() != nee::DataType::kString ? t->byte_size() : 0;
}

nee_status_t nee_value_string_at(const nee_value_t* value, int64_t index, const char** out_bytes, size_t* out_length) {
  const nee::Tensor* t = TensorOf(value);
  if (!t || t->dtype() != nee::DataType::kString) return Err(NEE_STATUS_INVALID_ARGUMENT, "not a string tensor");
  if (index < 0 || index >= t->num_elements()) return Err(NEE_STATUS_INVALID_ARGUMENT, "string index out of range");
  if (!out_bytes || !out_length) return NullArg("out_bytes or out_length");
  const std::string& s = t->data<std::string>()[index];
  *out_bytes = s.data();
  *out_length = s.size();
  return nullptr;
}

size_t nee_value_sequence_length(const nee_value_t* value) {
  return value && value->value.is_sequence() ? value->value.elements().size() : 0;
}

nee_status_t nee_value_sequence_at(const nee_value_t* value, size_t index, nee_value_t** out_value) {
  if (!out_value) return NullArg("out_value");
  if (!value || !value->value.is_sequence()) return Err(NEE_STATUS_INVALID_ARGUMENT, "not a sequence");
  if (index >= value->value.elements().size()) return Err(NEE_STATUS_INVALID_ARGUMENT, "sequence index out of range");
  return Guard([&]() -> nee_status_t {
    *out_value = Wrap(value->value.elements()[index]);
    return nullptr;
  });
}

nee_status_t nee_value_map_keys(const nee_value_t* value, nee_value_t** out_keys) {
  if (!out_keys) return NullArg("out_keys");
  if (!value || !value->value.is_map()) return Err(NEE_STATUS_INVALID_ARGUMENT, "not a map");
  return Guard([&]() -> nee_status_t {
    *out_keys = Wrap(nee::Value(value->value.map_keys()));
    return nullptr;
  });
}

nee_status_t nee_value_map_values(const nee_value_t* value, nee_value_t** out_values) {
  if (!out_values) return NullArg("out_values");
  if (!value || !value->value.is_map()) return Err(NEE_STATUS_INVALID_ARGUMENT, "not a map");
  return Guard([&]() -> nee_status_t {
    *out_values = Wrap(nee::Value(value->value.map_values()));
    return nullptr;
  });
}

nee_status_t nee_value_describe(const nee_value_t* value, char* buffer, size_t capacity, size_t* out_length) {
  if (!value) return NullArg("value");
  return Guard([&]() -> nee_status_t {
    FillString(value->value.Describe(), buffer, capacity, out_length);
    return nullptr;
  });
}

}  // extern "C"
