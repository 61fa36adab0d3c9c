// nee — thin C++ wrappers over the C API (nee.h): RAII handles, and failures
// thrown as nee::api::Error in the caller's code (nothing throws inside the
// library; this header turns returned statuses into exceptions).
// The wrappers live in nee::api so they never share a name with the
// engine's internal classes (which would break the one-definition rule when
// a program links the static library).
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "nee/nee.h"

namespace nee::api {

class Error : public std::runtime_error {
 public:
  Error(nee_status_code_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  nee_status_code_t code() const { return code_; }

 private:
  nee_status_code_t code_;
};

// Throws if `status` is a failure (and frees it either way).
inline void Check(nee_status_t status) {
  if (!status) return;
  nee_status_code_t code = nee_status_code(status);
  std::string message = nee_status_message(status);
  nee_status_free(status);
  throw Error(code, message);
}

struct ValueDeleter {
  void operator()(nee_value_t* v) const { nee_value_release(v); }
};
using ValuePtr = std::unique_ptr<nee_value_t, ValueDeleter>;

inline ValuePtr LoadValue(const std::string& path) {
  nee_value_t* v = nullptr;
  Check(nee_value_load_file(path.c_str(), &v));
  return ValuePtr(v);
}

inline std::string Describe(const nee_value_t* v) {
  size_t n = 0;
  Check(nee_value_describe(v, nullptr, 0, &n));
  std::string s(n + 1, '\0');
  Check(nee_value_describe(v, s.data(), s.size(), &n));
  s.resize(n);
  return s;
}

class SessionOptions {
 public:
  SessionOptions() { Check(nee_session_options_create(&options_)); }
  ~SessionOptions() { nee_session_options_release(options_); }
  SessionOptions(const SessionOptions&) = delete;
  SessionOptions& operator=(const SessionOptions&) = delete;
  SessionOptions& SetIntraOpThreads(int n) { nee_session_options_set_intra_op_threads(options_, n); return *this; }
  SessionOptions& SetOptimizationLevel(int l) { nee_session_options_set_optimization_level(options_, l); return *this; }
  SessionOptions& SetRunTimeoutMs(int64_t ms) { nee_session_options_set_run_timeout_ms(options_, ms); return *this; }
  SessionOptions& SetRunMemoryLimit(int64_t bytes) { nee_session_options_set_run_memory_limit(options_, bytes); return *this; }
  SessionOptions& SetProfiling(const std::string& file_prefix) {
    Check(nee_session_options_set_profiling(options_, file_prefix.c_str()));
    return *this;
  }
  SessionOptions& SetReferenceKernelsOnly(bool on) {
    nee_session_options_set_reference_kernels_only(options_, on ? 1 : 0);
    return *this;
  }
  SessionOptions& SetAllowSpinning(bool on) {
    nee_session_options_set_allow_spinning(options_, on ? 1 : 0);
    return *this;
  }
  // Sessions in a confined child process (nee_session_options_set_sandbox).
  SessionOptions& SetSandbox(bool on, int64_t address_space_bytes = 0, int64_t wall_ms = 0) {
    nee_session_options_set_sandbox(options_, on ? 1 : 0);
    Check(nee_session_options_set_sandbox_limits(options_, address_space_bytes, wall_ms));
    return *this;
  }
  // A custom-op library (include/nee/custom_op.h), loaded when a session is created.
  SessionOptions& AddCustomOpsLibrary(const std::string& path) {
    Check(nee_session_options_add_custom_ops_library(options_, path.c_str()));
    return *this;
  }
  // A limit on what the model may make the session do (nee_limit_t in nee.h).
  SessionOptions& SetLimit(int32_t limit, int64_t value) {
    Check(nee_session_options_set_limit(options_, limit, value));
    return *this;
  }
  const nee_session_options_t* get() const { return options_; }

 private:
  nee_session_options_t* options_ = nullptr;
};

// Per-run options; Terminate may be called from another thread during a run.
class RunOptions {
 public:
  RunOptions() { Check(nee_run_options_create(&options_)); }
  ~RunOptions() { nee_run_options_release(options_); }
  RunOptions(const RunOptions&) = delete;
  RunOptions& operator=(const RunOptions&) = delete;
  RunOptions& SetTerminate(bool terminate) { nee_run_options_set_terminate(options_, terminate ? 1 : 0); return *this; }
  RunOptions& SetTimeoutMs(int64_t ms) { nee_run_options_set_timeout_ms(options_, ms); return *this; }
  RunOptions& SetOnlyExecutePathToFetches(bool on) {
    nee_run_options_set_only_execute_path_to_fetches(options_, on ? 1 : 0);
    return *this;
  }
  const nee_run_options_t* get() const { return options_; }

 private:
  nee_run_options_t* options_ = nullptr;
};

struct ValueInfo {
  std::string name;
  std::string type;
  nee_dtype_t element_type;
  int64_t rank;  // -1 unknown
  std::vector<int64_t> dims;          // -1 where symbolic or unknown
  std::vector<std::string> symbols;   // the symbol where dims[i] == -1
};

class Session {
 public:
  Session(const std::string& path, const SessionOptions& options) {
    Check(nee_session_create_from_file(path.c_str(), options.get(), &session_));
  }
  ~Session() { nee_session_release(session_); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::vector<ValueInfo> Inputs() const { return Infos(0, nee_session_input_count(session_)); }
  std::vector<ValueInfo> Outputs() const { return Infos(1, nee_session_output_count(session_)); }

  std::string Metadata(const std::string& key) const {
    size_t n = 0;
    Check(nee_session_metadata(session_, key.c_str(), nullptr, 0, &n));
    std::string s(n + 1, '\0');
    Check(nee_session_metadata(session_, key.c_str(), s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }

  // Writes the profile of the runs so far; returns its path ("" when not profiling).
  std::string EndProfiling() {
    size_t n = 0;
    Check(nee_session_end_profiling(session_, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    Check(nee_session_end_profiling(session_, s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }
  // Time per op type of the profiled runs so far.
  std::string ProfileSummary() const {
    size_t n = 0;
    Check(nee_session_profile_summary(session_, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    Check(nee_session_profile_summary(session_, s.data(), s.size(), &n));
    s.resize(n);
    return s;
  }

  // Runs with named inputs; returns every output in graph order.
  std::vector<ValuePtr> Run(const std::vector<std::string>& names, const std::vector<const nee_value_t*>& values,
                            const RunOptions* run_options = nullptr) const {
    std::vector<const char*> cnames;
    for (const auto& n : names) cnames.push_back(n.c_str());
    std::vector<nee_value_t*> out(nee_session_output_count(session_), nullptr);
    Check(nee_session_run_with_options(session_, run_options ? run_options->get() : nullptr, cnames.data(),
                                       values.data(), values.size(), nullptr, 0, out.data()));
    std::vector<ValuePtr> result;
    for (nee_value_t* v : out) result.emplace_back(v);
    return result;
  }

  nee_plan_report_t PlanReport(const std::vector<std::string>& names, const std::vector<const nee_value_t*>& values) const {
    std::vector<const char*> cnames;
    for (const auto& n : names) cnames.push_back(n.c_str());
    nee_plan_report_t r{};
    Check(nee_session_plan_report(session_, cnames.data(), values.data(), values.size(), &r));
    return r;
  }

  // Reads a value file for input `index`, using its declared type as the hint.
  ValuePtr LoadInput(size_t index, const std::string& path) const {
    nee_value_t* v = nullptr;
    Check(nee_session_load_input_file(session_, index, path.c_str(), &v));
    return ValuePtr(v);
  }

  const nee_session_t* get() const { return session_; }

 private:
  std::vector<ValueInfo> Infos(int is_output, size_t count) const {
    std::vector<ValueInfo> infos;
    for (size_t i = 0; i < count; ++i) {
      nee_value_info_t info;
      Check(nee_session_value_info(session_, is_output, i, &info));
      ValueInfo vi{info.name, info.type, info.element_type, info.rank, {}, {}};
      for (int64_t d = 0; d < info.rank; ++d) {
        int64_t size;
        const char* symbol;
        Check(nee_session_value_dim(session_, is_output, i, static_cast<size_t>(d), &size, &symbol));
        vi.dims.push_back(size);
        vi.symbols.emplace_back(symbol);
      }
      infos.push_back(std::move(vi));
    }
    return infos;
  }

  nee_session_t* session_ = nullptr;
};

}  // namespace nee::api
