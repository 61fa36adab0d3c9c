// A session whose model is read, checked, optimized and run in a child
// process confined by base/sandbox.h (nee_session_options_set_sandbox;
// docs/SECURITY.md, "Sandboxed sessions"). This process never parses the
// model: the child describes the session (inputs, outputs, metadata, op
// counts) once, and answers each run with the outputs or the error, the
// values crossing as ONNX protobuf bytes (nee_value_serialize).
#pragma once
#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/sandbox.h"
#include "ir/graph.h"
#include "nee/nee.h"

struct nee_session_impl;
struct nee_session_options_impl;

namespace nee {

class SandboxedSession {
 public:
  // Forks the child, which creates the session from the file at `path` (or,
  // path NULL, from the bytes) with `options` (their sandbox flag ignored),
  // then enters the running stage. On success *out holds the session, its
  // description filled in.
  static nee_status_t Create(const char* path, const void* data, size_t size,
                             const nee_session_options_impl& options, nee_session_impl** out);
  ~SandboxedSession();

  // nee_session_run_with_options: one run at a time on the socket (concurrent
  // callers wait for each other).
  nee_status_t Run(const nee_run_options_t* run_options, const char* const* input_names,
                   const nee_value_t* const* inputs, size_t input_count, const char* const* output_names,
                   size_t output_count, nee_value_t** out_values);

  pid_t child_pid() const { return child_pid_; }

  // The description the child sent.
  std::vector<ValueInfo> inputs, outputs, overridable;
  Model model;  // metadata, opset imports and graph name/doc only

 private:
  SandboxedSession() = default;
  std::mutex mu_;
  std::unique_ptr<SandboxProcess> process_;
  pid_t child_pid_ = -1;
  int64_t session_timeout_ms_ = 0;
  int64_t wall_ms_ = 0;
};

// For tests: the child process of a sandboxed session; -1 for another session.
pid_t SandboxChildPid(const nee_session_t* session);

}  // namespace nee
