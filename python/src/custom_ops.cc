// The bridge between Python custom ops (nee/_custom_ops.py's PythonOp) and the
// custom-op C ABI (nee/custom_op.h). nee calls these from whichever thread
// runs the session (the GIL released by Run), so every one takes the GIL
// first; a Python exception becomes the op's error message, never an
// exception crossing the C boundary.
#include "custom_ops.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/ndarray.h>

#include <cstring>

namespace nb = nanobind;

namespace nee_python {

namespace {

// Bytes per element of a whole-byte nee dtype (1 for bool and the 8-bit types).
size_t ElementBytes(int32_t dtype) {
  switch (dtype) {
    case NEE_DTYPE_FLOAT64: case NEE_DTYPE_INT64: case NEE_DTYPE_UINT64: case NEE_DTYPE_COMPLEX64: return 8;
    case NEE_DTYPE_COMPLEX128: return 16;
    case NEE_DTYPE_FLOAT32: case NEE_DTYPE_INT32: case NEE_DTYPE_UINT32: return 4;
    case NEE_DTYPE_FLOAT16: case NEE_DTYPE_BFLOAT16: case NEE_DTYPE_INT16: case NEE_DTYPE_UINT16: return 2;
    default: return 1;
  }
}

struct PythonOp {
  nb::object handler;  // nee._custom_ops.PythonOp
};

void ReleasePythonOp(void* op) {
  if (!Py_IsInitialized()) return;  // interpreter shutting down: leave it to the process exit
  nb::gil_scoped_acquire gil;
  delete static_cast<PythonOp*>(op);
}

nb::str Bytes(const char* data, size_t size) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(data, static_cast<Py_ssize_t>(size), "replace"));
}

// The node's int, float, string and list attributes as a dict.
nb::dict Attributes(const nee_custom_op_api* api, nee_custom_op_context* ctx) {
  nb::dict attrs;
  for (size_t i = 0; i < api->attr_count(ctx); ++i) {
    const char* name = api->attr_name(ctx, i);
    if (!name) continue;
    switch (api->attr_type(ctx, name)) {
      case NEE_CUSTOM_ATTR_INT: {
        int64_t v = 0;
        api->attr_int(ctx, name, &v);
        attrs[name] = v;
        break;
      }
      case NEE_CUSTOM_ATTR_FLOAT: {
        float v = 0;
        api->attr_float(ctx, name, &v);
        attrs[name] = static_cast<double>(v);
        break;
      }
      case NEE_CUSTOM_ATTR_STRING: {
        const char* s = "";
        size_t n = 0;
        api->attr_string(ctx, name, &s, &n);
        attrs[name] = Bytes(s, n);
        break;
      }
      case NEE_CUSTOM_ATTR_INTS: {
        const int64_t* v = nullptr;
        size_t n = 0;
        api->attr_ints(ctx, name, &v, &n);
        nb::list items;
        for (size_t k = 0; k < n; ++k) items.append(v[k]);
        attrs[name] = items;
        break;
      }
      case NEE_CUSTOM_ATTR_FLOATS: {
        const float* v = nullptr;
        size_t n = 0;
        api->attr_floats(ctx, name, &v, &n);
        nb::list items;
        for (size_t k = 0; k < n; ++k) items.append(static_cast<double>(v[k]));
        attrs[name] = items;
        break;
      }
      case NEE_CUSTOM_ATTR_STRINGS: {
        size_t count = 0;
        api->attr_strings(ctx, name, 0, nullptr, nullptr, &count);
        nb::list items;
        for (size_t k = 0; k < count; ++k) {
          const char* s = "";
          size_t n = 0;
          api->attr_strings(ctx, name, k, &s, &n, &count);
          items.append(Bytes(s, n));
        }
        attrs[name] = items;
        break;
      }
      default: break;  // tensors, graphs: not passed to Python ops
    }
  }
  return attrs;
}

// Reports the Python exception being handled as the op's error.
int32_t PythonFailure(const nee_custom_op_api* api, nee_custom_op_context* ctx, nb::python_error& e) {
  std::string message;
  try {
    message = nb::cast<std::string>(nb::str(e.type().attr("__name__"))) + ": " +
              nb::cast<std::string>(nb::str(e.value()));
  } catch (...) {
    message = e.what();
  }
  api->set_error(ctx, message.c_str());
  return NEE_CUSTOM_OP_FAIL;
}

int32_t OtherFailure(const nee_custom_op_api* api, nee_custom_op_context* ctx, const char* what) {
  api->set_error(ctx, what);
  return NEE_CUSTOM_OP_FAIL;
}

int32_t InferPythonOp(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  if (!Py_IsInitialized()) return OtherFailure(api, ctx, "the Python interpreter has shut down");
  nb::gil_scoped_acquire gil;
  try {
    nb::list types;
    for (size_t i = 0; i < api->num_inputs(ctx); ++i) {
      int32_t code = 0;
      int64_t rank = -1;
      const int64_t* dims = nullptr;
      if (api->input_type(ctx, i, &code, &rank, &dims) != NEE_CUSTOM_OP_OK) {
        types.append(nb::none());
        continue;
      }
      nb::object shape = nb::none();
      if (rank >= 0) {
        nb::list ds;
        for (int64_t k = 0; k < rank; ++k) {
          const char* symbol = api->input_dim_symbol(ctx, i, static_cast<size_t>(k));
          if (dims[k] >= 0) ds.append(dims[k]);
          else if (symbol) ds.append(nb::str(symbol));
          else ds.append(nb::none());
        }
        shape = ds;
      }
      types.append(nb::make_tuple(code, shape));
    }
    const size_t n_out = api->num_outputs(ctx);
    nb::object handler = static_cast<PythonOp*>(user_data)->handler;
    nb::list result = nb::cast<nb::list>(handler.attr("infer")(types, Attributes(api, ctx), n_out));
    for (size_t k = 0; k < n_out && k < result.size(); ++k) {
      nb::tuple entry = nb::cast<nb::tuple>(result[k]);
      const int32_t code = nb::cast<int32_t>(entry[0]);
      if (entry[1].is_none()) {
        if (api->set_output_type(ctx, k, code, -1, nullptr) != NEE_CUSTOM_OP_OK)
          return OtherFailure(api, ctx, "invalid output element type");
        continue;
      }
      nb::list shape = nb::cast<nb::list>(entry[1]);
      std::vector<int64_t> dims;
      std::vector<std::string> symbols;
      for (nb::handle d : shape) {
        const bool symbol = nb::isinstance<nb::str>(d);
        dims.push_back(d.is_none() || symbol ? -1 : nb::cast<int64_t>(d));
        symbols.push_back(symbol ? nb::cast<std::string>(d) : std::string());
      }
      if (api->set_output_type(ctx, k, code, static_cast<int64_t>(dims.size()), dims.data()) != NEE_CUSTOM_OP_OK)
        return OtherFailure(api, ctx, "shape_fn gave an invalid output type or shape");
      for (size_t a = 0; a < symbols.size(); ++a)
        if (!symbols[a].empty()) api->set_output_dim_symbol(ctx, k, a, symbols[a].c_str());
    }
    return NEE_CUSTOM_OP_OK;
  } catch (nb::python_error& e) {
    return PythonFailure(api, ctx, e);
  } catch (const std::exception& e) {
    return OtherFailure(api, ctx, e.what());
  }
}

int32_t ComputePythonOp(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  if (!Py_IsInitialized()) return OtherFailure(api, ctx, "the Python interpreter has shut down");
  nb::gil_scoped_acquire gil;
  try {
    nb::list inputs;
    for (size_t i = 0; i < api->num_inputs(ctx); ++i) {
      int32_t code = 0;
      int64_t rank = 0;
      const int64_t* dims = nullptr;
      int32_t rc = api->input_type(ctx, i, &code, &rank, &dims);
      if (rc == NEE_CUSTOM_OP_ABSENT) {
        inputs.append(nb::none());
        continue;
      }
      if (rc != NEE_CUSTOM_OP_OK) return OtherFailure(api, ctx, "Python custom ops take tensors only");
      // Whole-byte element types only (no strings, no packed 4-bit types).
      if (code <= NEE_DTYPE_UNDEFINED || code == NEE_DTYPE_STRING || code > NEE_DTYPE_FLOAT8E5M2FNUZ)
        return OtherFailure(api, ctx, "Python custom ops take tensors of whole-byte numeric types only");
      const void* data = api->input_data(ctx, i);
      std::vector<int64_t> shape(dims, dims + rank);
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      // A copy the function may keep: nee reuses the input's bytes after the call.
      size_t bytes = count == 0 ? 0 : static_cast<size_t>(count) * ElementBytes(code);
      inputs.append(nb::make_tuple(code, shape, nb::bytearray(data, data ? bytes : 0)));
    }
    const size_t n_out = api->num_outputs(ctx);
    nb::object handler = static_cast<PythonOp*>(user_data)->handler;
    nb::list result = nb::cast<nb::list>(handler.attr("compute")(inputs, Attributes(api, ctx), n_out));
    for (size_t k = 0; k < n_out; ++k) {
      nb::tuple entry = nb::cast<nb::tuple>(result[k]);
      const int32_t code = nb::cast<int32_t>(entry[0]);
      auto array = nb::cast<nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>>(entry[1]);
      std::vector<int64_t> dims(array.shape_ptr(), array.shape_ptr() + array.ndim());
      void* out = nullptr;
      if (api->allocate_output(ctx, k, code, dims.size(), dims.data(), &out) != NEE_CUSTOM_OP_OK)
        return NEE_CUSTOM_OP_FAIL;  // the message is set
      if (array.nbytes() > 0) std::memcpy(out, array.data(), array.nbytes());
    }
    return NEE_CUSTOM_OP_OK;
  } catch (nb::python_error& e) {
    return PythonFailure(api, ctx, e);
  } catch (const std::exception& e) {
    return OtherFailure(api, ctx, e.what());
  }
}

}  // namespace

nee_status_t AddCustomOps(nee_session_options_t* options, const std::vector<std::string>& libraries,
                          const std::vector<PythonOpSpec>& ops) {
  for (const std::string& path : libraries)
    if (nee_status_t st = nee_session_options_add_custom_ops_library(options, path.c_str())) return st;
  for (const auto& [domain, op_type, since, min_in, max_in, min_out, max_out, handler] : ops) {
    auto* op = new PythonOp{handler};
    nee_custom_op_def def{sizeof(nee_custom_op_def), domain.c_str(), op_type.c_str(), since, min_in, max_in,
                          min_out, max_out, InferPythonOp, ComputePythonOp, op, ReleasePythonOp};
    if (nee_status_t st = nee_session_options_add_custom_op(options, &def)) {
      delete op;  // still ours when the definition is refused
      return st;
    }
  }
  return nullptr;
}

}  // namespace nee_python
