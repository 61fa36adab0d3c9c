// The C API: converts between C handles and the engine's C++ objects and
// turns every failure into a nee_status_t. No logic lives here.
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "api/model_overrides.h"
#include "exec/optimize_file.h"
#include "opt/opset_convert.h"
#include "exec/calibrate.h"
#include "opt/quantize.h"
#include "exec/precision.h"
#include "exec/session.h"
#include "format/onnx_reader.h"
#include "format/npy.h"
#include "format/onnx_writer.h"
#include "nee/nee.h"

#include "api/c_api_internal.h"
#include "api/sandboxed_session.h"

namespace {

nee_status_t MakeStatus(const nee::Status& s) {
  if (s.ok()) return nullptr;
  auto* st = new (std::nothrow) nee_status_impl{static_cast<nee_status_code_t>(s.code()), s.message()};
  return st;  // on allocation failure NULL would mean OK; accept that corner
}
nee_status_t Err(nee_status_code_t code, const char* msg) {
  return new (std::nothrow) nee_status_impl{code, msg};
}
nee_status_t NullArg(const char* what) { return Err(NEE_STATUS_INVALID_ARGUMENT, (std::string(what) + " is NULL").c_str()); }

// Runs `fn`, converting any escaping C++ exception (allocation failure) into a status.
template <typename Fn>
nee_status_t Guard(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Err(NEE_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return Err(NEE_STATUS_RUNTIME_ERROR, e.what());
  } catch (...) {
    return Err(NEE_STATUS_RUNTIME_ERROR, "unknown internal error");
  }
}

nee_value_t* Wrap(nee::Value v) { return new nee_value_impl{std::move(v)}; }

// What a session describes, from the session in this process or from a
// sandboxed session's description (api/sandboxed_session.h).
const std::vector<nee::ValueInfo>& InputsOf(const nee_session_t* s) {
  return s->sandbox ? s->sandbox->inputs : s->session->inputs();
}
const std::vector<nee::ValueInfo>& OutputsOf(const nee_session_t* s) {
  return s->sandbox ? s->sandbox->outputs : s->session->outputs();
}
const std::vector<nee::ValueInfo>& OverridableOf(const nee_session_t* s) {
  return s->sandbox ? s->sandbox->overridable : s->session->overridable_initializers();
}
const nee::Model& ModelOf(const nee_session_t* s) { return s->sandbox ? s->sandbox->model : s->session->model(); }

void FillString(const std::string& s, char* buffer, size_t capacity, size_t* out_length) {
  if (out_length) *out_length = s.size();
  if (buffer && capacity > 0) {
    size_t n = std::min(capacity - 1, s.size());
    std::memcpy(buffer, s.data(), n);
    buffer[n] = '\0';
  }
}

const nee::Tensor* TensorOf(const nee_value_t* v) {
  return v && v->value.is_tensor() ? &v->value.tensor() : (v && v->value.is_map() ? &v->value.map_keys() : nullptr);
}

std::vector<nee::NamedValue> NamedInputs(const char* const* names, const nee_value_t* const* inputs, size_t count,
                                         nee_status_t* error) {
  std::vector<nee::NamedValue> feed;
  for (size_t i = 0; i < count; ++i) {
    if (!names || !names[i] || !inputs || !inputs[i]) {
      *error = NullArg("an input name or value");
      return {};
    }
    feed.push_back({names[i], inputs[i]->value});
  }
  return feed;
}

bool EndsWith(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

extern "C" {

nee_status_code_t nee_status_code(nee_status_t status) { return status ? status->code : NEE_STATUS_OK; }
const char* nee_status_message(nee_status_t status) { return status ? status->message.c_str() : ""; }
void nee_status_free(nee_status_t status) { delete status; }

const char* nee_dtype_name(nee_dtype_t dtype) { return nee::DataTypeName(static_cast<nee::DataType>(dtype)); }
const char* nee_version(void) { return "0.1.0"; }

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

nee_status_t nee_session_options_create(nee_session_options_t** out_options) {
  if (!out_options) return NullArg("out_options");
  *out_options = new (std::nothrow) nee_session_options_impl();
  return *out_options ? nullptr : Err(NEE_STATUS_OUT_OF_MEMORY, "out of memory");
}
void nee_session_options_set_intra_op_threads(nee_session_options_t* options, int32_t threads) {
  if (options) options->options.intra_op_num_threads = threads < 0 ? 0 : threads;
}
void nee_session_options_set_optimization_level(nee_session_options_t* options, int32_t level) {
  if (options) options->options.graph_optimization_level = level < 0 ? 0 : level;
}
void nee_session_options_set_run_timeout_ms(nee_session_options_t* options, int64_t timeout_ms) {
  if (options) options->options.run_timeout_ms = timeout_ms < 0 ? 0 : timeout_ms;
}
void nee_session_options_set_run_memory_limit(nee_session_options_t* options, int64_t bytes) {
  if (options) options->options.run_memory_limit_bytes = bytes < 0 ? -1 : bytes;
}
void nee_session_options_set_reference_kernels_only(nee_session_options_t* options, int32_t enabled) {
  if (options) options->options.reference_kernels_only = enabled != 0;
}
void nee_session_options_set_allow_spinning(nee_session_options_t* options, int32_t allow) {
  if (options) options->options.allow_spinning = allow != 0;
}
void nee_session_options_set_sandbox(nee_session_options_t* options, int32_t enabled) {
  if (options) options->sandbox = enabled != 0;
}
nee_status_t nee_session_options_set_sandbox_limits(nee_session_options_t* options, int64_t address_space_bytes,
                                                    int64_t wall_ms) {
  if (!options) return NullArg("options");
  if (address_space_bytes < 0 || wall_ms < 0)
    return Err(NEE_STATUS_INVALID_ARGUMENT, "sandbox limits must not be negative (0: the default)");
  options->sandbox_address_space_bytes = address_space_bytes;
  options->sandbox_wall_ms = wall_ms;
  return nullptr;
}
int32_t nee_session_options_get_sandbox(const nee_session_options_t* options) {
  return options && options->sandbox ? 1 : 0;
}
nee_status_t nee_session_options_set_profiling(nee_session_options_t* options, const char* file_prefix) {
  if (!options) return NullArg("options");
  return Guard([&]() -> nee_status_t {
    options->options.enable_profiling = file_prefix != nullptr;
    if (file_prefix) options->options.profile_file_prefix = file_prefix;
    return nullptr;
  });
}
nee_status_t nee_session_options_add_free_dimension_override(nee_session_options_t* options, const char* name,
                                                             int by_denotation, int64_t value) {
  if (!options) return NullArg("options");
  if (!name) return NullArg("name");
  if (value < 0)
    return Err(NEE_STATUS_INVALID_ARGUMENT,
               ("free dimension override '" + std::string(name) + "': value " + std::to_string(value) +
                " is negative").c_str());
  return Guard([&]() -> nee_status_t {
    options->overrides.dims.push_back(nee::DimOverride{name, by_denotation != 0, value});
    return nullptr;
  });
}

// A copy of a tensor value for the session options (the caller may free its value).
static nee_status_t CopyTensorArg(const char* name, const nee_value_t* value, nee::Tensor* out) {
  if (!name) return NullArg("name");
  if (!value) return NullArg("value");
  if (!value->value.is_tensor())
    return Err(NEE_STATUS_INVALID_ARGUMENT,
               ("initializer '" + std::string(name) + "': the value is not a tensor").c_str());
  nee::Result<nee::Tensor> copy = value->value.tensor().Clone();
  if (!copy.ok()) return MakeStatus(copy.status());
  *out = std::move(copy).value();
  return nullptr;
}

nee_status_t nee_session_options_add_initializer(nee_session_options_t* options, const char* name,
                                                 const nee_value_t* value) {
  if (!options) return NullArg("options");
  return Guard([&]() -> nee_status_t {
    nee::Tensor copy;
    if (nee_status_t st = CopyTensorArg(name, value, &copy)) return st;
    options->overrides.initializers.emplace_back(name, std::move(copy));
    return nullptr;
  });
}

nee_status_t nee_session_options_add_external_initializer(nee_session_options_t* options, const char* name,
                                                          const nee_value_t* value) {
  if (!options) return NullArg("options");
  return Guard([&]() -> nee_status_t {
    nee::Tensor copy;
    if (nee_status_t st = CopyTensorArg(name, value, &copy)) return st;
    options->overrides.external_initializers[name] = std::move(copy);
    return nullptr;
  });
}

nee_status_t nee_session_options_add_custom_ops_library(nee_session_options_t* options, const char* path) {
  if (!options) return NullArg("options");
  if (!path) return NullArg("path");
  return Guard([&]() -> nee_status_t {
    options->options.custom_op_libraries.emplace_back(path);
    return nullptr;
  });
}

nee_status_t nee_session_options_add_custom_op(nee_session_options_t* options, const nee_custom_op_def* def) {
  if (!options) return NullArg("options");
  if (!def) return NullArg("def");
  return Guard([&]() -> nee_status_t {
    options->options.custom_ops.reserve(options->options.custom_ops.size() + 1);  // no throw after Make
    auto op = nee::CustomOp::Make(*def, nullptr, "in-process registration");
    if (!op.ok()) return MakeStatus(op.status());
    options->options.custom_ops.push_back(std::move(op).value());
    return nullptr;
  });
}

void nee_session_options_release(nee_session_options_t* options) { delete options; }

// ---- Session limits: one block (nee.h "Session limits").

// The SessionOptions field behind a limit, or null for an unknown one.
// (The subgraph depth is an int: it comes back through `depth` instead.)
static int64_t* LimitField(nee::SessionOptions& o, int32_t limit, int32_t** depth) {
  *depth = nullptr;
  switch (limit) {
    case NEE_LIMIT_GRAPH_NODES: return &o.max_graph_nodes;
    case NEE_LIMIT_SUBGRAPH_DEPTH: *depth = &o.max_subgraph_depth; return nullptr;
    case NEE_LIMIT_TENSOR_BYTES: return &o.max_tensor_bytes;
    case NEE_LIMIT_EXTERNAL_DATA_BYTES: return &o.max_external_data_bytes;
    case NEE_LIMIT_SESSION_MEMORY: return &o.session_memory_limit_bytes;
  }
  return nullptr;
}

nee_status_t nee_session_options_set_limit(nee_session_options_t* options, int32_t limit, int64_t value) {
  if (!options) return NullArg("options");
  int32_t* depth = nullptr;
  int64_t* field = LimitField(options->options, limit, &depth);
  if (!field && !depth) return Err(NEE_STATUS_INVALID_ARGUMENT, "unknown limit");
  const bool may_be_default = limit == NEE_LIMIT_SESSION_MEMORY && value == -1;
  if (value < 0 && !may_be_default) return Err(NEE_STATUS_INVALID_ARGUMENT, "a limit cannot be negative");
  if (depth) {
    if (value > INT32_MAX) return Err(NEE_STATUS_INVALID_ARGUMENT, "subgraph depth limit out of range");
    *depth = static_cast<int32_t>(value);
  } else {
    *field = value;
  }
  return nullptr;
}

nee_status_t nee_session_options_get_limit(const nee_session_options_t* options, int32_t limit,
                                           int64_t* out_value) {
  if (!options) return NullArg("options");
  if (!out_value) return NullArg("out_value");
  nee::SessionOptions copy = options->options;
  int32_t* depth = nullptr;
  int64_t* field = LimitField(copy, limit, &depth);
  if (!field && !depth) return Err(NEE_STATUS_INVALID_ARGUMENT, "unknown limit");
  *out_value = depth ? *depth : *field;
  return nullptr;
}

// Walks the graph and its subgraphs for nee_session_model_stats and the op histogram.
static void CountGraph(const nee::Graph& g, std::map<std::string, size_t>& ops, nee_model_stats_t& stats) {
  stats.node_count += g.nodes.size();
  stats.initializer_count += g.initializers.size();
  for (const auto& init : g.initializers) {
    stats.parameter_count += init.tensor.num_elements();
    stats.parameter_bytes += static_cast<int64_t>(init.tensor.byte_size());
  }
  for (const auto& n : g.nodes) {
    ++ops[(n.domain.empty() ? "" : n.domain + ".") + n.op_type];
    for (const auto& a : n.attributes) {
      if (a.g) CountGraph(*a.g, ops, stats);
      for (const auto& sg : a.graphs)
        if (sg) CountGraph(*sg, ops, stats);
    }
  }
}

static void CountModel(const nee::Graph& g, nee_session_impl& s) {
  std::map<std::string, size_t> ops;
  CountGraph(g, ops, s.stats);
  s.op_histogram.assign(ops.begin(), ops.end());
}

static nee::Result<std::unique_ptr<nee::Session>> CreateWithOverrides(nee::Result<nee::Model> model,
                                                                      const nee::ModelOverrides& overrides,
                                                                      const nee::SessionOptions& options) {
  if (!model.ok()) return model.status();
  NEE_RETURN_IF_ERROR(nee::ApplyModelOverrides(overrides, *model));
  return nee::Session::Create(std::move(model).value(), options);
}

static nee_status_t FinishSession(nee::Result<std::unique_ptr<nee::Session>> session, nee_session_t** out_session) {
  if (!session.ok()) return MakeStatus(session.status());
  auto* s = new nee_session_impl();
  s->session = std::move(session).value();
  for (const auto& vi : s->session->inputs()) s->input_types.push_back(vi.type.ToString());
  for (const auto& vi : s->session->outputs()) s->output_types.push_back(vi.type.ToString());
  for (const auto& vi : s->session->overridable_initializers()) s->overridable_types.push_back(vi.type.ToString());
  CountModel(s->session->model().graph, *s);
  *out_session = s;
  return nullptr;
}

nee_status_t nee_session_create_from_file(const char* path, const nee_session_options_t* options,
                                          nee_session_t** out_session) {
  if (!path) return NullArg("path");
  if (!out_session) return NullArg("out_session");
  *out_session = nullptr;
  return Guard([&]() -> nee_status_t {
    if (options && options->sandbox) return nee::SandboxedSession::Create(path, nullptr, 0, *options, out_session);
    nee::SessionOptions opts = options ? options->options : nee::SessionOptions{};
    if (!options || options->overrides.empty())
      return FinishSession(nee::Session::CreateFromFile(path, opts), out_session);
    nee::ReadOptions read_options;
    read_options.external_initializers = options->overrides.external_initializers;
    nee::Result<nee::Model> model = nee::ReadModelFile(path, std::move(read_options));
    return FinishSession(CreateWithOverrides(std::move(model), options->overrides, opts), out_session);
  });
}

nee_status_t nee_session_create_from_memory(const void* data, size_t size, const nee_session_options_t* options,
                                            nee_session_t** out_session) {
  if (!data && size > 0) return NullArg("data");
  if (!out_session) return NullArg("out_session");
  *out_session = nullptr;
  return Guard([&]() -> nee_status_t {
    if (options && options->sandbox) return nee::SandboxedSession::Create(nullptr, data, size, *options, out_session);
    nee::SessionOptions opts = options ? options->options : nee::SessionOptions{};
    if (!options || options->overrides.empty())
      return FinishSession(nee::Session::CreateFromBytes(data, size, opts), out_session);
    nee::ReadOptions read_options;  // as CreateFromBytes: no folder, so external data is refused...
    read_options.external_initializers = options->overrides.external_initializers;  // ...unless supplied
    nee::Result<nee::Model> model = nee::ReadModelBytes(nee::MappedFile::FromBytes(data, size), read_options);
    return FinishSession(CreateWithOverrides(std::move(model), options->overrides, opts), out_session);
  });
}

void nee_session_release(nee_session_t* session) { delete session; }

size_t nee_session_input_count(const nee_session_t* session) { return session ? InputsOf(session).size() : 0; }
size_t nee_session_output_count(const nee_session_t* session) { return session ? OutputsOf(session).size() : 0; }

size_t nee_session_overridable_initializer_count(const nee_session_t* session) {
  return session ? OverridableOf(session).size() : 0;
}

// The list nee_session_value_info/_dim describe (NEE_LIST_*), and its type strings.
static const std::vector<nee::ValueInfo>& ListOf(const nee_session_t* session, int list,
                                                 const std::vector<std::string>** types) {
  if (list == NEE_LIST_INPUTS) {
    *types = &session->input_types;
    return InputsOf(session);
  }
  if (list == NEE_LIST_OVERRIDABLE_INITIALIZERS) {
    *types = &session->overridable_types;
    return OverridableOf(session);
  }
  *types = &session->output_types;
  return OutputsOf(session);
}

static const nee::ValueInfo* InfoAt(const nee_session_t* session, int list, size_t index) {
  if (!session) return nullptr;
  const std::vector<std::string>* types = nullptr;
  const auto& infos = ListOf(session, list, &types);
  return index < infos.size() ? &infos[index] : nullptr;
}

nee_status_t nee_session_value_info(const nee_session_t* session, int is_output, size_t index,
                                    nee_value_info_t* out_info) {
  if (!out_info) return NullArg("out_info");
  const nee::ValueInfo* vi = InfoAt(session, is_output, index);
  if (!vi) return Err(NEE_STATUS_INVALID_ARGUMENT, "input/output index out of range");
  out_info->name = vi->name.c_str();
  const std::vector<std::string>* types = nullptr;
  ListOf(session, is_output, &types);
  out_info->type = (*types)[index].c_str();
  out_info->element_type = vi->type.is_tensor() ? static_cast<nee_dtype_t>(vi->type.elem_type) : NEE_DTYPE_UNDEFINED;
  out_info->rank = vi->type.is_tensor() && vi->type.shape ? static_cast<int64_t>(vi->type.shape->size()) : -1;
  return nullptr;
}

nee_status_t nee_session_value_dim(const nee_session_t* session, int is_output, size_t index, size_t axis,
                                   int64_t* out_size, const char** out_symbol) {
  if (!out_size || !out_symbol) return NullArg("out_size or out_symbol");
  const nee::ValueInfo* vi = InfoAt(session, is_output, index);
  if (!vi) return Err(NEE_STATUS_INVALID_ARGUMENT, "input/output index out of range");
  if (!vi->type.shape || axis >= vi->type.shape->size()) return Err(NEE_STATUS_INVALID_ARGUMENT, "axis out of range");
  const nee::Dim& d = (*vi->type.shape)[axis];
  *out_size = d.value;
  *out_symbol = d.symbol.c_str();
  return nullptr;
}

nee_status_t nee_model_optimize_file(const char* in_path, const char* out_path, int32_t level, char* report,
                                     size_t capacity, size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  return Guard([&]() -> nee_status_t {
    nee::Result<std::string> text = nee::OptimizeModelFile(in_path, out_path, level);
    if (!text.ok()) return MakeStatus(text.status());
    FillString(*text, report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_convert_opset(const char* in_path, const char* out_path, int64_t opset, char* report,
                                     size_t capacity, size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  return Guard([&]() -> nee_status_t {
    nee::Result<nee::OpsetConversionReport> r = nee::ConvertOpsetFile(in_path, out_path, opset);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_quantize(const char* in_path, const char* out_path, const char* mode,
                                const char* const* exclude, size_t num_exclude, int32_t flags, char* report,
                                size_t capacity, size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  if (!mode) return NullArg("mode");
  if (num_exclude > 0 && !exclude) return NullArg("exclude");
  if (flags & ~(NEE_QUANTIZE_PER_CHANNEL | NEE_QUANTIZE_REDUCE_RANGE))
    return Err(NEE_STATUS_INVALID_ARGUMENT, ("unknown quantize flags " + std::to_string(flags)).c_str());
  return Guard([&]() -> nee_status_t {
    nee::Result<nee::QuantizeMode> parsed = nee::ParseQuantizeMode(mode);
    if (!parsed.ok()) return MakeStatus(parsed.status());
    if (*parsed == nee::QuantizeMode::kStatic)
      return Err(NEE_STATUS_INVALID_ARGUMENT,
                 "static quantization needs calibration data: use nee_model_quantize_static");
    nee::QuantizeOptions options;
    options.mode = *parsed;
    for (size_t i = 0; i < num_exclude; ++i) {
      if (!exclude[i]) return NullArg(("exclude[" + std::to_string(i) + "]").c_str());
      options.exclude.emplace_back(exclude[i]);
    }
    options.per_channel = (flags & NEE_QUANTIZE_PER_CHANNEL) != 0;
    options.reduce_range = (flags & NEE_QUANTIZE_REDUCE_RANGE) != 0;
    nee::Result<nee::QuantizeReport> r = nee::QuantizeModelFile(in_path, out_path, options);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_quantize_int4(const char* in_path, const char* out_path, int64_t block_size,
                                     const char* const* exclude, size_t num_exclude, char* report, size_t capacity,
                                     size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  if (num_exclude > 0 && !exclude) return NullArg("exclude");
  return Guard([&]() -> nee_status_t {
    nee::QuantizeOptions options;
    options.mode = nee::QuantizeMode::kInt4;
    options.block_size = block_size;
    for (size_t i = 0; i < num_exclude; ++i) {
      if (!exclude[i]) return NullArg(("exclude[" + std::to_string(i) + "]").c_str());
      options.exclude.emplace_back(exclude[i]);
    }
    nee::Result<nee::QuantizeReport> r = nee::QuantizeModelFile(in_path, out_path, options);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_model_compare_precision(const char* model_path, const char* reference_path,
                                         const nee_precision_options_t* options, nee_value_t** out_report) {
  if (!model_path) return NullArg("model_path");
  if (!reference_path && !(options && options->variant)) return NullArg("reference_path");
  if (!out_report) return NullArg("out_report");
  *out_report = nullptr;
  return Guard([&]() -> nee_status_t {
    nee::PrecisionRequest req;
    req.model_path = model_path;
    if (reference_path) req.reference_path = reference_path;
    if (options) {
      if (options->variant) req.variant = options->variant;
      req.fp64_reference = options->fp64_reference != 0;
      const nee_precision_options_t& o = *options;
      if (o.num_samples > 0 && o.num_inputs > 0) {
        if (!o.input_names || !o.input_values) return NullArg("input_names / input_values");
        for (size_t s = 0; s < o.num_samples; ++s) {
          std::vector<nee::NamedValue> sample;
          for (size_t i = 0; i < o.num_inputs; ++i) {
            const nee_value_t* v = o.input_values[s * o.num_inputs + i];
            if (!o.input_names[i] || !v) return NullArg("an input name or value");
            sample.push_back({o.input_names[i], v->value});
          }
          req.samples.push_back(std::move(sample));
        }
      }
      if (o.inputs_dir) req.inputs_dir = o.inputs_dir;
      if (o.random_samples < 0) return Err(NEE_STATUS_INVALID_ARGUMENT, "random_samples must not be negative");
      req.random_samples = o.random_samples;
      if (o.num_dims > 0 && (!o.dim_symbols || !o.dim_values)) return NullArg("dim_symbols / dim_values");
      for (size_t i = 0; i < o.num_dims; ++i) {
        if (!o.dim_symbols[i]) return NullArg("a dim symbol");
        if (o.dim_values[i] < 0) return Err(NEE_STATUS_INVALID_ARGUMENT, "a dim value must not be negative");
        req.dims[o.dim_symbols[i]] = o.dim_values[i];
      }
      if (o.seed != 0) req.seed = o.seed;
      req.threads = o.threads;
      req.per_layer = o.no_layers == 0;
      req.max_top1_drop_percent = o.max_top1_drop;
      req.max_abs = o.max_abs;
    }
    nee::Result<nee::PrecisionReport> report = nee::ComparePrecision(req);
    if (!report.ok()) return MakeStatus(report.status());
    auto t = nee::Tensor::Allocate(nee::DataType::kString, {});
    if (!t.ok()) return MakeStatus(t.status());
    t->data<std::string>()[0] = report->ToJson().Serialize(-1);
    *out_report = Wrap(nee::Value(std::move(t).value()));
    return nullptr;
  });
}

nee_status_t nee_model_quantize_static(const char* in_path, const char* out_path, const char* calibration_dir,
                                       const char* calibrator, double percentile, const char* const* exclude,
                                       size_t num_exclude, int32_t flags, char* report, size_t capacity,
                                       size_t* out_length) {
  if (!in_path) return NullArg("in_path");
  if (!out_path) return NullArg("out_path");
  if (!calibration_dir) return NullArg("calibration_dir");
  if (!calibrator) return NullArg("calibrator");
  if (num_exclude > 0 && !exclude) return NullArg("exclude");
  if (flags & ~(NEE_QUANTIZE_PER_CHANNEL | NEE_QUANTIZE_REDUCE_RANGE | NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS |
                NEE_QUANTIZE_PROGRESS))
    return Err(NEE_STATUS_INVALID_ARGUMENT, ("unknown static quantize flags " + std::to_string(flags)).c_str());
  return Guard([&]() -> nee_status_t {
    nee::Result<nee::CalibrationMethod> method = nee::ParseCalibrationMethod(calibrator);
    if (!method.ok()) return MakeStatus(method.status());
    nee::QuantizeOptions options;
    options.mode = nee::QuantizeMode::kStatic;
    for (size_t i = 0; i < num_exclude; ++i) {
      if (!exclude[i]) return NullArg(("exclude[" + std::to_string(i) + "]").c_str());
      options.exclude.emplace_back(exclude[i]);
    }
    options.per_channel = (flags & NEE_QUANTIZE_PER_CHANNEL) != 0;
    options.reduce_range = (flags & NEE_QUANTIZE_REDUCE_RANGE) != 0;
    options.symmetric_activations = (flags & NEE_QUANTIZE_SYMMETRIC_ACTIVATIONS) != 0;
    nee::CalibrationOptions calibration;
    calibration.dir = calibration_dir;
    calibration.method = *method;
    calibration.percentile = percentile;
    calibration.progress = (flags & NEE_QUANTIZE_PROGRESS) != 0;
    nee::Result<nee::QuantizeReport> r = nee::QuantizeStaticFile(in_path, out_path, options, calibration);
    if (!r.ok()) return MakeStatus(r.status());
    FillString(r->Text(), report, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_session_end_profiling(nee_session_t* session, char* buffer, size_t capacity, size_t* out_length) {
  if (!session) return NullArg("session");
  return Guard([&]() -> nee_status_t {
    std::lock_guard<std::mutex> lock(session->profile_mu);
    if (session->sandbox) {  // (a sandboxed session never profiles)
      FillString("", buffer, capacity, out_length);
      return nullptr;
    }
    nee::Result<std::string> path = session->session->EndProfiling();
    if (!path.ok()) return MakeStatus(path.status());
    if (!path->empty()) session->profile_path = *path;
    FillString(session->profile_path, buffer, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_session_profile_summary(const nee_session_t* session, char* buffer, size_t capacity,
                                         size_t* out_length) {
  if (!session) return NullArg("session");
  return Guard([&]() -> nee_status_t {
    FillString(session->sandbox ? std::string() : session->session->ProfileSummary(), buffer, capacity, out_length);
    return nullptr;
  });
}

nee_status_t nee_session_metadata(const nee_session_t* session, const char* key, char* buffer, size_t capacity,
                                  size_t* out_length) {
  if (!session) return NullArg("session");
  if (!key) return NullArg("key");
  return Guard([&]() -> nee_status_t {
    const nee::Model& m = ModelOf(session);
    std::string k = key, v;
    if (k == "producer_name") v = m.producer_name;
    else if (k == "producer_version") v = m.producer_version;
    else if (k == "domain") v = m.domain;
    else if (k == "doc_string") v = m.doc_string;
    else if (k == "graph_name") v = m.graph.name;
    else if (k == "graph_doc_string") v = m.graph.doc_string;
    else if (k == "model_version") v = std::to_string(m.model_version);
    else if (k == "ir_version") v = std::to_string(m.ir_version);
    else if (k == "opsets") {
      for (const auto& o : m.opset_imports)
        v += (v.empty() ? "" : ",") + (o.domain.empty() ? std::string("ai.onnx") : o.domain) + ":" + std::to_string(o.version);
    } else if (k.rfind("custom:", 0) == 0) {
      bool found = false;
      for (const auto& [mk, mv] : m.metadata_props)
        if (mk == k.substr(7)) { v = mv; found = true; }
      if (!found) return Err(NEE_STATUS_INVALID_ARGUMENT, ("no metadata_props entry '" + k.substr(7) + "'").c_str());
    } else {
      return Err(NEE_STATUS_INVALID_ARGUMENT, ("unknown metadata key '" + k + "'").c_str());
    }
    FillString(v, buffer, capacity, out_length);
    return nullptr;
  });
}

size_t nee_session_custom_metadata_count(const nee_session_t* session) {
  return session ? ModelOf(session).metadata_props.size() : 0;
}
const char* nee_session_custom_metadata_key(const nee_session_t* session, size_t index) {
  if (!session || index >= ModelOf(session).metadata_props.size()) return nullptr;
  return ModelOf(session).metadata_props[index].first.c_str();
}

nee_status_t nee_session_model_stats(const nee_session_t* session, nee_model_stats_t* out_stats) {
  if (!session) return NullArg("session");
  if (!out_stats) return NullArg("out_stats");
  *out_stats = session->stats;
  return nullptr;
}

size_t nee_session_op_type_count(const nee_session_t* session) { return session ? session->op_histogram.size() : 0; }

nee_status_t nee_session_op_type_at(const nee_session_t* session, size_t index, const char** out_op_type,
                                    size_t* out_node_count) {
  if (!session) return NullArg("session");
  if (!out_op_type || !out_node_count) return NullArg("out_op_type or out_node_count");
  if (index >= session->op_histogram.size()) return Err(NEE_STATUS_INVALID_ARGUMENT, "op index out of range");
  *out_op_type = session->op_histogram[index].first.c_str();
  *out_node_count = session->op_histogram[index].second;
  return nullptr;
}

nee_status_t nee_run_options_create(nee_run_options_t** out_options) {
  if (!out_options) return NullArg("out_options");
  *out_options = new (std::nothrow) nee_run_options_impl();
  return *out_options ? nullptr : Err(NEE_STATUS_OUT_OF_MEMORY, "cannot allocate run options");
}
void nee_run_options_set_terminate(nee_run_options_t* options, int terminate) {
  if (options) options->options.SetTerminate(terminate != 0);
}
void nee_run_options_set_timeout_ms(nee_run_options_t* options, int64_t timeout_ms) {
  if (options) options->options.timeout_ms = timeout_ms < 0 ? 0 : timeout_ms;
}
void nee_run_options_set_only_execute_path_to_fetches(nee_run_options_t* options, int32_t enabled) {
  if (options) options->options.only_execute_path_to_fetches = enabled != 0;
}
void nee_run_options_release(nee_run_options_t* options) { delete options; }

nee_status_t nee_session_run(const nee_session_t* session, const char* const* input_names,
                             const nee_value_t* const* inputs, size_t input_count, const char* const* output_names,
                             size_t output_count, nee_value_t** out_values) {
  return nee_session_run_with_options(session, nullptr, input_names, inputs, input_count, output_names, output_count,
                                      out_values);
}

nee_status_t nee_session_run_with_options(const nee_session_t* session, const nee_run_options_t* run_options,
                                          const char* const* input_names, const nee_value_t* const* inputs,
                                          size_t input_count, const char* const* output_names, size_t output_count,
                                          nee_value_t** out_values) {
  if (!session) return NullArg("session");
  if (!out_values) return NullArg("out_values");
  if (output_count > 0 && !output_names) return NullArg("output_names");
  if (session->sandbox)
    return Guard([&] {
      return session->sandbox->Run(run_options, input_names, inputs, input_count, output_names, output_count,
                                   out_values);
    });
  return Guard([&]() -> nee_status_t {
    nee_status_t error = nullptr;
    auto feed = NamedInputs(input_names, inputs, input_count, &error);
    if (error) return error;
    std::vector<std::string> wanted;
    for (size_t i = 0; i < output_count; ++i) {
      if (!output_names[i]) return NullArg("an output name");
      wanted.emplace_back(output_names[i]);
    }
    auto results = session->session->Run(feed, wanted, run_options ? &run_options->options : nullptr);
    if (!results.ok()) return MakeStatus(results.status());
    for (size_t i = 0; i < results->size(); ++i) out_values[i] = Wrap(std::move(results.value()[i]));
    return nullptr;
  });
}

nee_status_t nee_session_plan_report(const nee_session_t* session, const char* const* input_names,
                                     const nee_value_t* const* inputs, size_t input_count,
                                     nee_plan_report_t* out_report) {
  if (!session) return NullArg("session");
  if (!out_report) return NullArg("out_report");
  if (session->sandbox)
    return Err(NEE_STATUS_NOT_IMPLEMENTED, "the memory plan report is not available for a sandboxed session");
  return Guard([&]() -> nee_status_t {
    nee_status_t error = nullptr;
    auto feed = NamedInputs(input_names, inputs, input_count, &error);
    if (error) return error;
    const nee::Graph& g = session->session->model().graph;
    std::vector<nee::TypeInfo> types;
    for (const auto& gi : g.inputs) {
      nee::TypeInfo t = gi.type;
      if (const nee::Initializer* init = g.FindInitializer(gi.name))
        t = nee::TypeInfo::Tensor(init->tensor.dtype(), nee::ShapeFromDims(init->tensor.dims()));
      for (const auto& f : feed)
        if (f.name == gi.name && f.value.is_tensor())
          t = nee::TypeInfo::Tensor(f.value.tensor().dtype(), nee::ShapeFromDims(f.value.tensor().dims()));
      types.push_back(std::move(t));
    }
    auto report = session->session->ReportPlan(types);
    if (!report.ok()) return MakeStatus(report.status());
    out_report->node_count = report->num_nodes;
    out_report->value_count = report->num_values;
    out_report->planned_value_count = report->num_planned;
    out_report->arena_bytes = report->arena_bytes;
    out_report->planned_bytes = report->planned_bytes;
    return nullptr;
  });
}

}  // extern "C"
