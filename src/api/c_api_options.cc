// The C API for session options (threads, limits, sandbox, profiling,
// initializers, custom ops) and run options. Split from c_api.cc, which
// holds sessions; like it, conversions only, no logic.
#include <string>

#include "api/model_overrides.h"
#include "exec/session.h"
#include "nee/nee.h"

#include "api/c_api_util.h"

using namespace nee::c_api_util;  // NOLINT: the helpers every file of the C API uses

extern "C" {

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

}  // extern "C"
