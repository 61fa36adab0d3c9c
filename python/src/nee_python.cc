// The `nee._nee` extension: a thin nanobind layer over the C API. It turns
// nee statuses into Python exceptions (classes defined in nee/__init__.py and
// registered here) and numpy buffers into nee values and back.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include <cstring>
#include <string>
#include <vector>

#include "api/sandboxed_session.h"
#include "custom_ops.h"
#include "ir/attr_decl.h"  // the attribute-default audit (a test hook below, not API)
#include "check/type_constraints.h"  // the output-type audit (a test hook below, not API)
#include "ops/attr_spec.h"  // every op version's declaration (a test hook below, not API)
#include "nee/nee.h"

namespace nb = nanobind;

namespace {

// Text from a model file (names, metadata): decoded leniently, never raising.
nb::str Text(const char* s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s, static_cast<Py_ssize_t>(std::strlen(s)), "replace"));
}
nb::str Text(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

constexpr int kStatusCodes = NEE_STATUS_CANCELLED + 1;
nb::object g_error_classes[kStatusCodes];  // indexed by nee_status_code_t

[[noreturn]] void Raise(nee_status_t status) {
  nee_status_code_t code = nee_status_code(status);
  std::string message = nee_status_message(status);
  nee_status_free(status);
  // As an int: a code from a newer library may lie outside the enum this was built with.
  const int index = static_cast<int>(code);
  nb::object cls = (index >= 0 && index < kStatusCodes && g_error_classes[index].is_valid()) ? g_error_classes[index]
                                                                                     : nb::borrow(PyExc_RuntimeError);
  // Names inside messages come from the model file and may not be valid UTF-8.
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
  PyErr_SetObject(cls.ptr(), text);
  Py_XDECREF(text);
  throw nb::python_error();
}

void Check(nee_status_t status) {
  if (status) Raise(status);
}

// Owns one nee value on the Python side.
struct Value {
  nee_value_t* handle = nullptr;
  explicit Value(nee_value_t* h) : handle(h) {}
  Value(const Value&) = delete;
  Value(Value&& o) noexcept : handle(o.handle) { o.handle = nullptr; }
  ~Value() { nee_value_release(handle); }
};

Value TensorFromBuffer(int dtype, const std::vector<int64_t>& shape, nb::bytes data) {
  nee_value_t* v = nullptr;
  Check(nee_value_create_tensor(static_cast<nee_dtype_t>(dtype), shape.data(), shape.size(), data.c_str(),
                                data.size(), &v));
  return Value(v);
}

// Zero-copy from a contiguous numpy array (any dtype; the caller passes the nee dtype).
Value TensorFromArray(int dtype, nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> array) {
  std::vector<int64_t> shape(array.shape_ptr(), array.shape_ptr() + array.ndim());
  nee_value_t* v = nullptr;
  Check(nee_value_create_tensor(static_cast<nee_dtype_t>(dtype), shape.data(), shape.size(), array.data(),
                                array.nbytes(), &v));
  return Value(v);
}

// Drops the reference a tensor view held on its numpy array. nee calls it from
// whichever thread lets go of the bytes last, so it takes the GIL first.
void ReleaseArray(void* object) {
  if (!Py_IsInitialized()) return;  // interpreter shutting down: leave it to the process exit
  nb::gil_scoped_acquire gil;
  Py_DECREF(static_cast<PyObject*>(object));
}

// A tensor over a numpy array's own buffer (no copy): the value keeps the
// array alive until nee no longer uses its bytes.
Value TensorViewOfArray(int dtype, nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> array, nb::object owner) {
  std::vector<int64_t> shape(array.shape_ptr(), array.shape_ptr() + array.ndim());
  PyObject* held = owner.ptr();
  Py_INCREF(held);
  nee_value_t* v = nullptr;
  Check(nee_value_create_tensor_view(static_cast<nee_dtype_t>(dtype), shape.data(), shape.size(),
                                     const_cast<void*>(array.data()), array.nbytes(), ReleaseArray, held, &v));
  return Value(v);
}

Value StringTensor(const std::vector<int64_t>& shape, const std::vector<nb::bytes>& items) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& b : items) {
    ptrs.push_back(b.c_str());
    lens.push_back(b.size());
  }
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (count != static_cast<int64_t>(items.size())) throw nb::value_error("string tensor: shape and item count differ");
  nee_value_t* v = nullptr;
  Check(nee_value_create_string_tensor(shape.data(), shape.size(), ptrs.data(), lens.data(), &v));
  return Value(v);
}

Value Sequence(const std::vector<const Value*>& items, int element_dtype) {
  std::vector<const nee_value_t*> handles;
  for (const Value* item : items) handles.push_back(item->handle);
  nee_value_t* v = nullptr;
  Check(nee_value_create_sequence(handles.data(), handles.size(), static_cast<nee_dtype_t>(element_dtype), &v));
  return Value(v);
}

Value NoneValue() {
  nee_value_t* v = nullptr;
  Check(nee_value_create_none(&v));
  return Value(v);
}

Value LoadFile(const std::string& path) {
  nee_value_t* v = nullptr;
  Check(nee_value_load_file(path.c_str(), &v));
  return Value(v);
}

// Describes a value for Python: ("tensor", dtype, shape, bytes-or-list),
// ("sequence", dtype, [values]), ("map", keys, values), ("none",).
nb::object Unpack(const nee_value_t* v);

nb::object UnpackTensor(const nee_value_t* v) {
  int dtype = nee_value_dtype(v);
  std::vector<int64_t> shape(nee_value_dims(v), nee_value_dims(v) + nee_value_rank(v));
  if (dtype == NEE_DTYPE_STRING) {
    nb::list items;
    for (int64_t i = 0; i < nee_value_element_count(v); ++i) {
      const char* bytes;
      size_t len;
      Check(nee_value_string_at(v, i, &bytes, &len));
      items.append(nb::bytes(bytes, len));
    }
    return nb::make_tuple("tensor", dtype, shape, items);
  }
  // One copy, into a bytearray that numpy then wraps as a writable array.
  return nb::make_tuple("tensor", dtype, shape, nb::bytearray(nee_value_data(v), nee_value_data_size(v)));
}

nb::object Unpack(const nee_value_t* v) {
  switch (nee_value_kind(v)) {
    case NEE_VALUE_TENSOR: return UnpackTensor(v);
    case NEE_VALUE_SEQUENCE: {
      nb::list items;
      for (size_t i = 0; i < nee_value_sequence_length(v); ++i) {
        nee_value_t* e = nullptr;
        Check(nee_value_sequence_at(v, i, &e));
        Value owned(e);
        items.append(Unpack(e));
      }
      return nb::make_tuple("sequence", static_cast<int>(nee_value_dtype(v)), items);
    }
    case NEE_VALUE_MAP: {
      nee_value_t *k = nullptr, *vals = nullptr;
      Check(nee_value_map_keys(v, &k));
      Value ok(k);
      Check(nee_value_map_values(v, &vals));
      Value ov(vals);
      return nb::make_tuple("map", Unpack(k), Unpack(vals));
    }
    case NEE_VALUE_NONE: break;
  }
  return nb::make_tuple("none");
}

// numpy's own element types as DLPack dtypes; others (bfloat16, float8, 4-bit,
// strings) go through Unpack.
bool NumpyNativeDtype(nee_dtype_t dtype, nb::dlpack::dtype* out) {
  using nb::dlpack::dtype_code;
  auto make = [&](dtype_code code, int bits) {
    *out = nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(bits), 1};
    return true;
  };
  switch (dtype) {
    case NEE_DTYPE_FLOAT32: return make(dtype_code::Float, 32);
    case NEE_DTYPE_FLOAT64: return make(dtype_code::Float, 64);
    case NEE_DTYPE_FLOAT16: return make(dtype_code::Float, 16);
    case NEE_DTYPE_INT8: return make(dtype_code::Int, 8);
    case NEE_DTYPE_INT16: return make(dtype_code::Int, 16);
    case NEE_DTYPE_INT32: return make(dtype_code::Int, 32);
    case NEE_DTYPE_INT64: return make(dtype_code::Int, 64);
    case NEE_DTYPE_UINT8: return make(dtype_code::UInt, 8);
    case NEE_DTYPE_UINT16: return make(dtype_code::UInt, 16);
    case NEE_DTYPE_UINT32: return make(dtype_code::UInt, 32);
    case NEE_DTYPE_UINT64: return make(dtype_code::UInt, 64);
    case NEE_DTYPE_BOOL: return make(dtype_code::Bool, 8);
    case NEE_DTYPE_COMPLEX64: return make(dtype_code::Complex, 64);
    case NEE_DTYPE_COMPLEX128: return make(dtype_code::Complex, 128);
    default: return false;
  }
}

// Takes ownership of a run's output. A tensor of a numpy type becomes a
// writable numpy array over the value's own bytes (no copy: the session
// guarantees outputs share bytes with nothing); the array keeps the value
// alive. Everything else is unpacked as Unpack describes.
nb::object TakeOutput(nee_value_t* v) {
  Value owned(v);
  nb::dlpack::dtype dtype;
  if (nee_value_kind(v) != NEE_VALUE_TENSOR || !NumpyNativeDtype(nee_value_dtype(v), &dtype)) return Unpack(v);
  std::vector<size_t> shape(nee_value_dims(v), nee_value_dims(v) + nee_value_rank(v));
  void* data = const_cast<void*>(nee_value_data(v));
  nb::capsule keep_alive(owned.handle, [](void* p) noexcept { nee_value_release(static_cast<nee_value_t*>(p)); });
  owned.handle = nullptr;  // now the capsule's
  nb::ndarray<nb::numpy> array(data, shape.size(), shape.data(), keep_alive, nullptr, dtype);
  return array.cast();
}

// Run options shared with the engine: set_terminate may come from another
// Python thread while a run (which released the GIL) is in progress.
struct RunOptions {
  nee_run_options_t* handle = nullptr;
  RunOptions() { Check(nee_run_options_create(&handle)); }
  ~RunOptions() { nee_run_options_release(handle); }
  RunOptions(const RunOptions&) = delete;
  RunOptions& operator=(const RunOptions&) = delete;
};

// (dim_param or denotation, size, by_denotation): SessionOptions.add_free_dimension_override_by_*.
using FreeDims = std::vector<std::tuple<std::string, int64_t, bool>>;
// (name, tensor): SessionOptions.add_initializer, or add_external_initializers.
using Initializers = std::vector<std::pair<std::string, const Value*>>;

// The model edits ONNX Runtime's session options make; the caller releases `options` on failure.
nee_status_t AddModelOverrides(nee_session_options_t* options, const FreeDims& free_dims,
                               const Initializers& initializers, const Initializers& external_initializers) {
  for (const auto& [name, value, by_denotation] : free_dims) {
    nee_status_t st = nee_session_options_add_free_dimension_override(options, name.c_str(), by_denotation, value);
    if (st) return st;
  }
  for (const auto& [name, value] : initializers) {
    nee_status_t st = nee_session_options_add_initializer(options, name.c_str(), value->handle);
    if (st) return st;
  }
  for (const auto& [name, value] : external_initializers) {
    nee_status_t st = nee_session_options_add_external_initializer(options, name.c_str(), value->handle);
    if (st) return st;
  }
  return nullptr;
}

struct Session {
  nee_session_t* handle = nullptr;
  ~Session() { nee_session_release(handle); }

  static Session* Create(nb::object model, int threads, int opt_level, int64_t run_timeout_ms,
                         int64_t run_memory_limit, bool reference_kernels_only, bool profiling,
                         const std::string& profile_prefix, const FreeDims& free_dims,
                         const Initializers& initializers, const Initializers& external_initializers,
                         const std::vector<std::pair<int32_t, int64_t>>& limits, bool allow_spinning,
                         const std::vector<std::string>& custom_op_libraries,
                         const std::vector<nee_python::PythonOpSpec>& custom_ops, bool sandbox,
                         int64_t sandbox_address_space_bytes, int64_t sandbox_wall_ms) {
    nee_session_options_t* options = nullptr;
    Check(nee_session_options_create(&options));
    if (nee_status_t st = nee_python::AddCustomOps(options, custom_op_libraries, custom_ops)) {
      nee_session_options_release(options);
      Raise(st);
    }
    if (nee_status_t st = AddModelOverrides(options, free_dims, initializers, external_initializers)) {
      nee_session_options_release(options);
      Raise(st);
    }
    for (const auto& [limit, value] : limits) {  // (nee_limit_t, value) pairs: see nee.h
      if (nee_status_t st = nee_session_options_set_limit(options, limit, value)) {
        nee_session_options_release(options);
        Raise(st);
      }
    }
    nee_session_options_set_intra_op_threads(options, threads);
    nee_session_options_set_optimization_level(options, opt_level);
    nee_session_options_set_run_timeout_ms(options, run_timeout_ms);
    nee_session_options_set_run_memory_limit(options, run_memory_limit);
    nee_session_options_set_reference_kernels_only(options, reference_kernels_only ? 1 : 0);
    nee_session_options_set_allow_spinning(options, allow_spinning ? 1 : 0);
    nee_session_options_set_sandbox(options, sandbox ? 1 : 0);
    if (nee_status_t st = nee_session_options_set_sandbox_limits(options, sandbox_address_space_bytes, sandbox_wall_ms)) {
      nee_session_options_release(options);
      Raise(st);
    }
    if (profiling) {
      nee_status_t st = nee_session_options_set_profiling(options, profile_prefix.c_str());
      if (st) {
        nee_session_options_release(options);
        Raise(st);
      }
    }
    auto* s = new Session();
    nee_status_t st;
    if (nb::isinstance<nb::bytes>(model)) {
      nb::bytes b = nb::cast<nb::bytes>(model);
      nb::gil_scoped_release release;
      st = nee_session_create_from_memory(b.c_str(), b.size(), options, &s->handle);
    } else {
      std::string path = nb::cast<std::string>(model);
      nb::gil_scoped_release release;
      st = nee_session_create_from_file(path.c_str(), options, &s->handle);
    }
    nee_session_options_release(options);
    if (st) {
      delete s;
      Raise(st);
    }
    return s;
  }

  // (name, type string, element dtype, dims list with symbols as str / None)
  // of a NEE_LIST_*: inputs, outputs or overridable initializers.
  nb::list Infos(int list) const {
    nb::list out;
    size_t n = list == NEE_LIST_INPUTS    ? nee_session_input_count(handle)
               : list == NEE_LIST_OUTPUTS ? nee_session_output_count(handle)
                                          : nee_session_overridable_initializer_count(handle);
    for (size_t i = 0; i < n; ++i) {
      nee_value_info_t info;
      Check(nee_session_value_info(handle, list, i, &info));
      nb::object shape = nb::none();
      if (info.rank >= 0) {
        nb::list dims;
        for (int64_t d = 0; d < info.rank; ++d) {
          int64_t size;
          const char* symbol;
          Check(nee_session_value_dim(handle, list, i, static_cast<size_t>(d), &size, &symbol));
          if (size >= 0) dims.append(size);
          else if (symbol && *symbol) dims.append(Text(symbol));
          else dims.append(nb::none());
        }
        shape = dims;
      }
      out.append(nb::make_tuple(Text(info.name), Text(info.type), static_cast<int>(info.element_type), shape));
    }
    return out;
  }

  nb::str Metadata(const std::string& key) const { return Text(MetadataBytes(key)); }

  std::string MetadataBytes(const std::string& key) const {
    size_t n = 0;
    Check(nee_session_metadata(handle, key.c_str(), nullptr, 0, &n));
    std::string s(n + 1, '\0');
    Check(nee_session_metadata(handle, key.c_str(), s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }

  // The profile's path after writing it ("" when not profiling).
  std::string EndProfiling() {
    size_t n = 0;
    Check(nee_session_end_profiling(handle, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    Check(nee_session_end_profiling(handle, s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }

  std::string ProfileSummary() const {
    size_t n = 0;
    Check(nee_session_profile_summary(handle, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    Check(nee_session_profile_summary(handle, s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }

  nb::list CustomMetadataKeys() const {
    nb::list keys;
    for (size_t i = 0; i < nee_session_custom_metadata_count(handle); ++i)
      keys.append(Text(nee_session_custom_metadata_key(handle, i)));
    return keys;
  }

  nb::list Run(const std::vector<std::string>& output_names, const std::vector<std::string>& input_names,
               const std::vector<const Value*>& inputs, const RunOptions* run_options) const {
    std::vector<const char*> in_names, out_names;
    for (const auto& n : input_names) in_names.push_back(n.c_str());
    for (const auto& n : output_names) out_names.push_back(n.c_str());
    std::vector<const nee_value_t*> handles;
    for (const Value* v : inputs) handles.push_back(v->handle);
    size_t n_out = output_names.empty() ? nee_session_output_count(handle) : output_names.size();
    std::vector<nee_value_t*> results(n_out, nullptr);
    nee_status_t st;
    {
      nb::gil_scoped_release release;  // concurrent runs from Python threads
      st = nee_session_run_with_options(handle, run_options ? run_options->handle : nullptr, in_names.data(),
                                        handles.data(), handles.size(), out_names.empty() ? nullptr : out_names.data(),
                                        out_names.size(), results.data());
    }
    Check(st);
    nb::list out;
    for (size_t i = 0; i < results.size(); ++i) {
      nee_value_t* r = results[i];
      results[i] = nullptr;
      try {
        out.append(TakeOutput(r));
      } catch (...) {
        for (nee_value_t* rest : results) nee_value_release(rest);
        throw;
      }
    }
    return out;
  }
};

}  // namespace

NB_MODULE(_nee, m) {
  m.doc() = "Low-level bindings of the nee C API; use the `nee` package instead.";
  m.def("version", [] { return std::string(nee_version()); });
  // Test hooks (tests/python/test_attr_defaults.py), not API: the audit of
  // kernels' attribute fallbacks against the declared defaults (ir/attr_decl.h).
  m.def("_set_attr_default_audit", [](bool on) { nee::SetAttrDefaultAudit(on); });
  m.def("_take_attr_default_mismatches", [] { return nee::TakeAttrDefaultMismatches(); });
  // ... and the audit of shape rules' output types against the declarations
  // (check/type_constraints.h).
  m.def("_set_output_type_audit", [](bool on) { nee::SetOutputTypeAudit(on); });
  m.def("_take_output_type_mismatches", [] { return nee::TakeOutputTypeMismatches(); });
  // tests/python/test_type_constraints.py compares every declaration's formal
  // inputs/outputs and type constraints (ops/attr_spec.h) with onnx.defs:
  // (domain, op, since, inputs, outputs, constraints), a formal as (name,
  // type, "single"|"optional"|"variadic", homogeneous, min_arity), a
  // constraint as (letter, allowed types).
  m.def("_op_declarations", [] {
    using Formal = std::tuple<std::string, std::string, std::string, bool, int>;
    auto formals = [](const std::vector<nee::FormalParam>& list) {
      std::vector<Formal> out;
      for (const nee::FormalParam& f : list)
        out.emplace_back(f.name, f.type,
                         f.option == nee::FormalParam::Option::kSingle     ? "single"
                         : f.option == nee::FormalParam::Option::kOptional ? "optional"
                                                                            : "variadic",
                         f.homogeneous, f.min_arity);
      return out;
    };
    std::vector<std::tuple<std::string, std::string, int, std::vector<Formal>, std::vector<Formal>,
                           std::vector<std::pair<std::string, std::vector<std::string>>>>>
        all;
    for (const nee::AttrSchema* s : nee::AllAttrSchemas()) {
      std::vector<std::pair<std::string, std::vector<std::string>>> constraints;
      for (const nee::TypeConstraint& c : s->constraints) constraints.emplace_back(c.letter, *c.allowed);
      all.emplace_back(s->domain, s->op, s->since_version, formals(s->inputs), formals(s->outputs),
                       std::move(constraints));
    }
    return all;
  });
  m.def("register_errors", [](nb::object invalid_model, nb::object invalid_argument, nb::object not_implemented,
                              nb::object out_of_memory, nb::object runtime, nb::object io,
                              nb::object cancelled) {
    g_error_classes[NEE_STATUS_INVALID_MODEL] = invalid_model;
    g_error_classes[NEE_STATUS_INVALID_ARGUMENT] = invalid_argument;
    g_error_classes[NEE_STATUS_NOT_IMPLEMENTED] = not_implemented;
    g_error_classes[NEE_STATUS_OUT_OF_MEMORY] = out_of_memory;
    g_error_classes[NEE_STATUS_RUNTIME_ERROR] = runtime;
    g_error_classes[NEE_STATUS_IO_ERROR] = io;
    g_error_classes[NEE_STATUS_CANCELLED] = cancelled;
  });
  nb::class_<Value>(m, "Value");
  m.def("tensor_from_array", &TensorFromArray);
  m.def("tensor_view_of_array", &TensorViewOfArray);
  m.def("tensor_from_buffer", &TensorFromBuffer);
  m.def("string_tensor", &StringTensor);
  m.def("sequence", &Sequence);
  m.def("none", &NoneValue);
  m.def("load_file", &LoadFile);
  m.def("optimize_file", [](const std::string& in_path, const std::string& out_path, int level) {
    nee_status_t st;
    {
      nb::gil_scoped_release release;
      st = nee_model_optimize_file(in_path.c_str(), out_path.c_str(), level, nullptr, 0, nullptr);
    }
    Check(st);
  });
  m.def("convert_opset", [](const std::string& in_path, const std::string& out_path, int64_t opset) {
    nee_status_t st;
    std::string report(512, '\0');
    size_t length = 0;
    {
      nb::gil_scoped_release release;
      st = nee_model_convert_opset(in_path.c_str(), out_path.c_str(), opset, report.data(), report.size(), &length);
    }
    Check(st);
    report.resize(std::min(length, report.size() - 1));
    return report;
  });
  m.def("quantize", [](const std::string& in_path, const std::string& out_path, const std::string& mode,
                       const std::vector<std::string>& exclude, int32_t flags) {
    nee_status_t st;
    std::vector<const char*> names;
    for (const std::string& name : exclude) names.push_back(name.c_str());
    std::string report(1 << 16, '\0');
    size_t length = 0;
    {
      nb::gil_scoped_release release;
      st = nee_model_quantize(in_path.c_str(), out_path.c_str(), mode.c_str(), names.data(), names.size(), flags,
                              report.data(), report.size(), &length);
    }
    Check(st);
    report.resize(std::min(length, report.size() - 1));
    return report;
  });
  m.def("quantize_int4", [](const std::string& in_path, const std::string& out_path, int64_t block_size,
                            const std::vector<std::string>& exclude) {
    nee_status_t st;
    std::vector<const char*> names;
    for (const std::string& name : exclude) names.push_back(name.c_str());
    std::string report(1 << 16, '\0');
    size_t length = 0;
    {
      nb::gil_scoped_release release;
      st = nee_model_quantize_int4(in_path.c_str(), out_path.c_str(), block_size, names.data(), names.size(),
                                   report.data(), report.size(), &length);
    }
    Check(st);
    report.resize(std::min(length, report.size() - 1));
    return report;
  });
  // nee.precision (python/nee/__init__.py): the report as JSON text.
  m.def("compare_precision",
        [](const std::string& model, const std::string& against, const std::string& inputs_dir,
           const std::vector<std::string>& input_names, const std::vector<const Value*>& values, int64_t random,
           const std::vector<std::pair<std::string, int64_t>>& dims, uint64_t seed, int threads, bool per_layer,
           double max_top1_drop, double max_abs, const std::string& variant, bool fp64) {
          std::vector<const char*> names, symbols;
          for (const auto& n : input_names) names.push_back(n.c_str());
          std::vector<const nee_value_t*> handles;
          for (const Value* v : values) handles.push_back(v ? v->handle : nullptr);
          std::vector<int64_t> sizes;
          for (const auto& [symbol, size] : dims) {
            symbols.push_back(symbol.c_str());
            sizes.push_back(size);
          }
          nee_precision_options_t o{};
          o.inputs_dir = inputs_dir.empty() ? nullptr : inputs_dir.c_str();
          o.input_names = names.data();
          o.input_values = handles.data();
          o.num_inputs = names.size();
          o.num_samples = names.empty() ? 0 : handles.size() / names.size();
          o.random_samples = random;
          o.dim_symbols = symbols.data();
          o.dim_values = sizes.data();
          o.num_dims = sizes.size();
          o.seed = seed;
          o.threads = threads;
          o.no_layers = per_layer ? 0 : 1;
          o.max_top1_drop = max_top1_drop;
          o.max_abs = max_abs;
          o.variant = variant.empty() ? nullptr : variant.c_str();
          o.fp64_reference = fp64 ? 1 : 0;
          nee_value_t* report = nullptr;
          nee_status_t st;
          {
            nb::gil_scoped_release release;
            st = nee_model_compare_precision(model.c_str(), against.empty() ? nullptr : against.c_str(), &o, &report);
          }
          Check(st);
          Value held(report);
          const char* bytes = nullptr;
          size_t length = 0;
          Check(nee_value_string_at(held.handle, 0, &bytes, &length));
          return std::string(bytes, length);
        });
  m.def("quantize_static", [](const std::string& in_path, const std::string& out_path, const std::string& dir,
                              const std::string& calibrator, double percentile, const std::vector<std::string>& exclude,
                              int32_t flags) {
    nee_status_t st;
    std::vector<const char*> names;
    for (const std::string& name : exclude) names.push_back(name.c_str());
    std::string report(1 << 16, '\0');
    size_t length = 0;
    {
      nb::gil_scoped_release release;
      st = nee_model_quantize_static(in_path.c_str(), out_path.c_str(), dir.c_str(), calibrator.c_str(), percentile,
                                     names.data(), names.size(), flags, report.data(), report.size(), &length);
    }
    Check(st);
    report.resize(std::min(length, report.size() - 1));
    return report;
  });
  m.def("unpack", [](const Value& v) { return Unpack(v.handle); });
  nb::class_<RunOptions>(m, "RunOptions")
      .def(nb::init<>())
      .def("set_terminate", [](RunOptions& r, bool t) { nee_run_options_set_terminate(r.handle, t ? 1 : 0); })
      .def("set_timeout_ms", [](RunOptions& r, int64_t ms) { nee_run_options_set_timeout_ms(r.handle, ms); })
      .def("set_only_execute_path_to_fetches",
           [](RunOptions& r, bool on) { nee_run_options_set_only_execute_path_to_fetches(r.handle, on ? 1 : 0); });
  nb::class_<Session>(m, "Session")
      .def_static("create", &Session::Create, nb::rv_policy::take_ownership)
      .def("inputs", [](const Session& s) { return s.Infos(NEE_LIST_INPUTS); })
      .def("outputs", [](const Session& s) { return s.Infos(NEE_LIST_OUTPUTS); })
      .def("overridable_initializers", [](const Session& s) { return s.Infos(NEE_LIST_OVERRIDABLE_INITIALIZERS); })
      .def("metadata", &Session::Metadata)
      .def("custom_metadata_keys", &Session::CustomMetadataKeys)
      .def("end_profiling", &Session::EndProfiling)
      .def("profile_summary", &Session::ProfileSummary)
      // The child process of a sandboxed session (-1 for another), for tests.
      .def("sandbox_pid", [](const Session& s) { return static_cast<int64_t>(nee::SandboxChildPid(s.handle)); })
      .def("run", &Session::Run, nb::arg("output_names"), nb::arg("input_names"), nb::arg("inputs"),
           nb::arg("run_options").none());
}
