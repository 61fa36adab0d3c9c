// See sandboxed_session.h. The child runs the C API on its own session; what
// it sends back is read here as bytes from a possibly compromised process:
// every count and length is checked, values go through the same reader as
// .pb input files (nee_value_deserialize).
#include "api/sandboxed_session.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "api/c_api_internal.h"

namespace nee {
namespace {

enum Request : int { kRun = 1 };

constexpr int kMaxTypeDepth = 64;

// In the child: the run options of every run (runs come one at a time). The
// parent's SIGUSR1 (its caller set RunOptions terminate) sets their flag, an
// atomic store, so the run stops before its next node as it would unsandboxed.
nee_run_options_t* g_run_options = nullptr;
void OnTerminate(int) {
  if (g_run_options) nee_run_options_set_terminate(g_run_options, 1);
}

nee_status_t Error(int code, const std::string& message) {
  return new (std::nothrow) nee_status_impl{static_cast<nee_status_code_t>(code), message};
}
nee_status_t Malformed() {
  return Error(NEE_STATUS_RUNTIME_ERROR, "the sandboxed process sent a malformed reply");
}
SandboxReply ReplyOf(nee_status_t st) {
  SandboxReply r{static_cast<int>(nee_status_code(st)), nee_status_message(st)};
  nee_status_free(st);
  return r;
}

void PutType(MessageWriter& w, const TypeInfo& t) {
  w.U64(static_cast<uint64_t>(t.kind));
  w.I64(static_cast<int64_t>(t.elem_type));
  w.Text(t.denotation);
  w.U64(t.shape ? 1 : 0);
  if (t.shape) {
    w.U64(t.shape->size());
    for (const Dim& d : *t.shape) {
      w.I64(d.value);
      w.Text(d.symbol);
      w.Text(d.denotation);
    }
  }
  w.U64(t.inner ? 1 : 0);
  if (t.inner) PutType(w, *t.inner);
}

bool GetType(MessageReader& r, TypeInfo* t, int depth) {
  if (depth > kMaxTypeDepth) return false;
  uint64_t kind = r.U64();
  if (kind > static_cast<uint64_t>(TypeInfo::Kind::kOptional)) return false;
  t->kind = static_cast<TypeInfo::Kind>(kind);
  int64_t elem = r.I64();
  if (elem < 0 || elem > 1000) return false;
  t->elem_type = static_cast<DataType>(elem);
  t->denotation = r.Text();
  if (r.U64()) {
    Shape shape(r.Count());
    for (Dim& d : shape) {
      d.value = r.I64();
      d.symbol = r.Text();
      d.denotation = r.Text();
    }
    t->shape = std::move(shape);
  }
  if (r.U64()) {
    t->inner = std::make_shared<TypeInfo>();
    if (!GetType(r, t->inner.get(), depth + 1)) return false;
  }
  return r.ok();
}

void PutList(MessageWriter& w, const std::vector<ValueInfo>& list) {
  w.U64(list.size());
  for (const ValueInfo& vi : list) {
    w.Text(vi.name);
    PutType(w, vi.type);
  }
}

bool GetList(MessageReader& r, std::vector<ValueInfo>* list) {
  list->resize(r.Count());
  for (ValueInfo& vi : *list) {
    vi.name = r.Text();
    if (!GetType(r, &vi.type, 0)) return false;
  }
  return r.ok();
}

// The child's first reply: what the parent needs to answer every query.
std::string Describe(const nee_session_impl& s) {
  MessageWriter w;
  PutList(w, s.session->inputs());
  PutList(w, s.session->outputs());
  PutList(w, s.session->overridable_initializers());
  const Model& m = s.session->model();
  for (const std::string* text : {&m.producer_name, &m.producer_version, &m.domain, &m.doc_string, &m.graph.name,
                                  &m.graph.doc_string})
    w.Text(*text);
  w.I64(m.model_version);
  w.I64(m.ir_version);
  w.U64(m.opset_imports.size());
  for (const OpsetImport& o : m.opset_imports) {
    w.Text(o.domain);
    w.I64(o.version);
  }
  w.U64(m.metadata_props.size());
  for (const auto& [k, v] : m.metadata_props) {
    w.Text(k);
    w.Text(v);
  }
  w.U64(s.stats.node_count);
  w.U64(s.stats.initializer_count);
  w.I64(s.stats.parameter_count);
  w.I64(s.stats.parameter_bytes);
  w.U64(s.op_histogram.size());
  for (const auto& [op, count] : s.op_histogram) {
    w.Text(op);
    w.U64(count);
  }
  return std::move(w.bytes());
}

bool ReadDescription(const std::string& bytes, SandboxedSession& box, nee_session_impl& s) {
  MessageReader r(bytes);
  if (!GetList(r, &box.inputs) || !GetList(r, &box.outputs) || !GetList(r, &box.overridable)) return false;
  Model& m = box.model;
  for (std::string* text : {&m.producer_name, &m.producer_version, &m.domain, &m.doc_string, &m.graph.name,
                            &m.graph.doc_string})
    *text = r.Text();
  m.model_version = r.I64();
  m.ir_version = r.I64();
  m.opset_imports.resize(r.Count());
  for (OpsetImport& o : m.opset_imports) {
    o.domain = r.Text();
    o.version = r.I64();
  }
  m.metadata_props.resize(r.Count());
  for (auto& [k, v] : m.metadata_props) {
    k = r.Text();
    v = r.Text();
  }
  s.stats.node_count = r.U64();
  s.stats.initializer_count = r.U64();
  s.stats.parameter_count = r.I64();
  s.stats.parameter_bytes = r.I64();
  s.op_histogram.resize(r.Count());
  for (auto& [op, count] : s.op_histogram) {
    op = r.Text();
    count = r.U64();
  }
  return r.done();
}

// Appends a value's kind and protobuf bytes.
nee_status_t PutValue(MessageWriter& w, const nee_value_t* v) {
  w.U64(static_cast<uint64_t>(nee_value_kind(v)));
  size_t size = 0;
  if (nee_status_t st = nee_value_serialize(v, nullptr, 0, &size)) return st;
  w.U64(size);
  std::string& bytes = w.bytes();
  const size_t at = bytes.size();
  bytes.resize(at + size);
  return nee_value_serialize(v, bytes.data() + at, size, &size);
}

nee_status_t GetValue(MessageReader& r, nee_value_t** out) {
  const uint64_t kind = r.U64();
  const std::string bytes = r.Text();
  if (!r.ok() || kind > NEE_VALUE_NONE) return Malformed();
  return nee_value_deserialize(bytes.data(), bytes.size(), static_cast<int32_t>(kind), out);
}

// A run request: time limit, only_execute_path_to_fetches, named inputs, wanted outputs.
SandboxReply ServeRun(const nee_session_t* session, const std::string& request) {
  MessageReader r(request);
  const int64_t timeout_ms = r.I64();
  const uint64_t only_path = r.U64();
  std::vector<std::string> names(r.Count());
  std::vector<nee_value_t*> values;
  struct Release {
    std::vector<nee_value_t*>& v;
    ~Release() {
      for (nee_value_t* x : v) nee_value_release(x);
    }
  } release{values};
  for (std::string& name : names) {
    name = r.Text();
    nee_value_t* v = nullptr;
    if (nee_status_t st = GetValue(r, &v)) return ReplyOf(st);
    values.push_back(v);
  }
  std::vector<std::string> wanted(r.Count());
  for (std::string& name : wanted) name = r.Text();
  if (!r.done()) return {NEE_STATUS_RUNTIME_ERROR, "sandbox: malformed run request"};
  std::vector<const char*> name_ptrs, wanted_ptrs;
  for (const auto& n : names) name_ptrs.push_back(n.c_str());
  for (const auto& n : wanted) wanted_ptrs.push_back(n.c_str());
  nee_run_options_t* options = g_run_options;
  nee_run_options_set_terminate(options, 0);
  nee_run_options_set_timeout_ms(options, timeout_ms);
  nee_run_options_set_only_execute_path_to_fetches(options, only_path != 0);
  const size_t count = wanted.empty() ? nee_session_output_count(session) : wanted.size();
  std::vector<nee_value_t*> outputs(count, nullptr);
  nee_status_t st = nee_session_run_with_options(session, options, name_ptrs.data(), values.data(), values.size(),
                                                 wanted.empty() ? nullptr : wanted_ptrs.data(), wanted.size(),
                                                 outputs.data());
  if (st) return ReplyOf(st);
  Release release_outputs{outputs};
  MessageWriter w;
  w.U64(outputs.size());
  for (nee_value_t* v : outputs)
    if (nee_status_t put = PutValue(w, v)) return ReplyOf(put);
  return {NEE_STATUS_OK, std::move(w.bytes())};
}

int64_t PhysicalMemory() { return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE); }

// The bytes of address space this process has mapped (the child starts with a copy of them).
int64_t MappedBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0;
  if (f) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return static_cast<int64_t>(pages) * sysconf(_SC_PAGESIZE);
}

}  // namespace

nee_status_t SandboxedSession::Create(const char* path, const void* data, size_t size,
                                      const nee_session_options_impl& options, nee_session_impl** out) {
  *out = nullptr;
  if (!options.options.custom_op_libraries.empty() || !options.options.custom_ops.empty())
    return Error(NEE_STATUS_INVALID_ARGUMENT,
                 "a sandboxed session cannot use custom operators (they are code from outside the model, which "
                 "the sandbox cannot load or call); drop the sandbox or the custom ops");
  if (options.options.enable_profiling)
    return Error(NEE_STATUS_INVALID_ARGUMENT,
                 "a sandboxed session cannot profile (the trace is a file, which the sandbox cannot write); drop "
                 "the sandbox or profiling");
  nee_session_options_impl child_options = options;
  child_options.sandbox = false;

  // Limits (docs/SECURITY.md): the address space the tensors may take (the run
  // memory limit, else physical memory), the model and the threads, on top of
  // what the child inherits mapped from this process.
  SandboxLimits limits;
  if (options.sandbox_address_space_bytes > 0) {
    limits.address_space_bytes = MappedBytes() + options.sandbox_address_space_bytes;
  } else {
    const int64_t run_limit = options.options.run_memory_limit_bytes;
    const int64_t tensors = run_limit > 0 ? run_limit : PhysicalMemory();
    int64_t model_bytes = static_cast<int64_t>(size);
    struct stat st;
    if (path && stat(path, &st) == 0) model_bytes = st.st_size;
    const int64_t cores = std::max<int64_t>(1, sysconf(_SC_NPROCESSORS_ONLN));
    const int64_t threads = options.options.intra_op_num_threads > 0 ? options.options.intra_op_num_threads : cores;
    limits.address_space_bytes = MappedBytes() + SandboxAddressSpace(tensors, model_bytes, threads);
  }

  const std::string model_path = path ? path : "";
  const bool from_file = path != nullptr;
  SandboxReply error;
  auto process = SandboxProcess::Start(
      limits,
      [&](SandboxChannel& channel) {
        nee_session_t* session = nullptr;
        nee_status_t st = from_file ? nee_session_create_from_file(model_path.c_str(), &child_options, &session)
                                    : nee_session_create_from_memory(data, size, &child_options, &session);
        if (st) {
          channel.Send(ReplyOf(st));
          return;
        }
        // The model and its external data are read; from here on no file can be opened.
        std::string stage_error;
        if (!EnterSandboxStage(SandboxStage::kRunning, &stage_error)) {
          channel.Send({NEE_STATUS_RUNTIME_ERROR, "sandbox: " + stage_error});
          return;
        }
        if (nee_status_t st = nee_run_options_create(&g_run_options)) {
          channel.Send(ReplyOf(st));
          return;
        }
        struct sigaction action;
        std::memset(&action, 0, sizeof action);
        action.sa_handler = OnTerminate;
        action.sa_flags = SA_RESTART;
        sigemptyset(&action.sa_mask);
        sigaction(SIGUSR1, &action, nullptr);
        if (!channel.Send({NEE_STATUS_OK, Describe(*session)})) return;
        SandboxReply request;
        while (channel.Receive(&request)) {
          SandboxReply reply = request.code == kRun ? ServeRun(session, request.bytes)
                                                    : SandboxReply{NEE_STATUS_RUNTIME_ERROR, "sandbox: unknown request"};
          if (!channel.Send(reply)) return;
        }
        // The parent closed the socket: the session is gone.
      },
      &error);
  if (!process) return Error(error.code, error.bytes);

  std::unique_ptr<SandboxedSession> box(new SandboxedSession());
  box->child_pid_ = process->pid();
  box->session_timeout_ms_ = options.options.run_timeout_ms;
  box->wall_ms_ = options.sandbox_wall_ms;
  SandboxReply reply = process->Receive(options.sandbox_wall_ms, "loading the model");
  if (reply.code != NEE_STATUS_OK) return Error(reply.code, reply.bytes);
  box->process_ = std::move(process);

  auto s = std::make_unique<nee_session_impl>();
  if (!ReadDescription(reply.bytes, *box, *s)) return Malformed();
  for (const auto& vi : box->inputs) s->input_types.push_back(vi.type.ToString());
  for (const auto& vi : box->outputs) s->output_types.push_back(vi.type.ToString());
  for (const auto& vi : box->overridable) s->overridable_types.push_back(vi.type.ToString());
  s->sandbox = std::move(box);
  *out = s.release();
  return nullptr;
}

SandboxedSession::~SandboxedSession() = default;  // ~SandboxProcess kills and reaps the child

nee_status_t SandboxedSession::Run(const nee_run_options_t* run_options, const char* const* input_names,
                                   const nee_value_t* const* inputs, size_t input_count,
                                   const char* const* output_names, size_t output_count, nee_value_t** out_values) {
  const RunOptions* ro = run_options ? &run_options->options : nullptr;
  if (ro && ro->terminate())
    return Error(NEE_STATUS_CANCELLED, "the run was terminated (RunOptions terminate is set)");
  const int64_t timeout_ms = ro && ro->timeout_ms > 0 ? ro->timeout_ms : session_timeout_ms_;
  MessageWriter w;
  w.I64(ro ? ro->timeout_ms : 0);
  w.U64(ro && ro->only_execute_path_to_fetches ? 1 : 0);
  w.U64(input_count);
  for (size_t i = 0; i < input_count; ++i) {
    if (!input_names || !input_names[i] || !inputs || !inputs[i])
      return Error(NEE_STATUS_INVALID_ARGUMENT, "input name or value " + std::to_string(i) + " is NULL");
    w.Text(input_names[i]);
    if (nee_status_t st = PutValue(w, inputs[i])) return st;
  }
  w.U64(output_count);
  for (size_t i = 0; i < output_count; ++i) {
    if (!output_names[i]) return Error(NEE_STATUS_INVALID_ARGUMENT, "an output name is NULL");
    w.Text(output_names[i]);
  }
  // A run that outlives its own time limit by far is stopped from here: the
  // child is killed, and the session with it.
  const int64_t wall_ms = wall_ms_ > 0 ? wall_ms_ : timeout_ms > 0 ? 60000 + 2 * timeout_ms : 0;
  SandboxReply reply;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reply = process_->Call({kRun, std::move(w.bytes())}, wall_ms, "running the model",
                           ro ? ro->terminate_flag() : nullptr);
  }
  if (reply.code != NEE_STATUS_OK) return Error(reply.code, reply.bytes);
  MessageReader r(reply.bytes);
  const uint64_t count = r.Count();
  const size_t expected = output_count > 0 ? output_count : outputs.size();
  if (!r.ok() || count != expected) return Malformed();
  std::vector<nee_value_t*> values;
  for (uint64_t i = 0; i < count; ++i) {
    nee_value_t* v = nullptr;
    if (nee_status_t st = GetValue(r, &v)) {
      for (nee_value_t* x : values) nee_value_release(x);
      return st;
    }
    values.push_back(v);
  }
  if (!r.done()) {
    for (nee_value_t* x : values) nee_value_release(x);
    return Malformed();
  }
  std::copy(values.begin(), values.end(), out_values);
  return nullptr;
}

pid_t SandboxChildPid(const nee_session_t* session) {
  return session && session->sandbox ? session->sandbox->child_pid() : -1;
}

}  // namespace nee
