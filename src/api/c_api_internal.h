// The objects behind the C API's handles, shared by the c_api*.cc files and
// sandboxed_session.cc (which describes a session to a parent process).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/model_overrides.h"
#include "exec/session.h"
#include "nee/nee.h"

namespace nee {
class SandboxedSession;
}

struct nee_status_impl {
  nee_status_code_t code;
  std::string message;
};
struct nee_value_impl {
  nee::Value value;
};
struct nee_session_options_impl {
  nee::SessionOptions options;
  nee::ModelOverrides overrides;  // applied to the model before the session checks it
  // nee_session_options_set_sandbox / _set_sandbox_limits (api/sandboxed_session.h).
  bool sandbox = false;
  int64_t sandbox_address_space_bytes = 0;  // 0: derived (docs/SECURITY.md)
  int64_t sandbox_wall_ms = 0;              // 0: derived from the run's time limit
};
struct nee_run_options_impl {
  nee::RunOptions options;
};
struct nee_session_impl {
  // Exactly one of the two: the session in this process, or the child process
  // holding it (then the lists and the model's metadata below are its description).
  std::unique_ptr<nee::Session> session;
  std::unique_ptr<nee::SandboxedSession> sandbox;
  // Stable strings for nee_value_info_t.
  std::vector<std::string> input_types, output_types, overridable_types;
  std::vector<std::pair<std::string, size_t>> op_histogram;
  nee_model_stats_t stats{};
  std::mutex profile_mu;
  std::string profile_path;  // the trace nee_session_end_profiling wrote
};
