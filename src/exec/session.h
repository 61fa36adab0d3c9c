// A session: a model loaded, checked, optimized and planned once, then run
// many times — concurrently from several threads if the caller wants.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "check/checker.h"
#include "exec/run_control.h"
#include "ir/graph.h"
#include "ops/custom_ops.h"
#include "plan/execution_plan.h"
#include "plan/memory_plan.h"

namespace nee {

struct SessionOptions {
  int intra_op_num_threads = 0;  // 0: one per available core
  // Idle pool workers poll for the next loop before sleeping (fastest); false
  // (ONNX Runtime's session.intra_op.allow_spinning=0): they sleep at once.
  bool allow_spinning = true;
  int graph_optimization_level = 99;  // 0 none, 1 basic, 2 extended, 3/99 all
  size_t max_cached_shape_plans = 32;
  // Default time limit of a run that sets none in its RunOptions; 0: none.
  int64_t run_timeout_ms = 0;
  // Most bytes of tensors one run may hold at once (its arena plus heap
  // outputs); -1: the machine's physical memory, 0: unlimited.
  int64_t run_memory_limit_bytes = -1;
  // Run every node with its op's reference kernel, never an optimized one
  // (the oracle configuration of the tests; slower).
  bool reference_kernels_only = false;
  // Time every node of every run (Profiler); EndProfiling writes the trace to
  // `<profile_file_prefix>_<date>_<time>.json`.
  bool enable_profiling = false;
  std::string profile_file_prefix = "nee_profile";

  // Limits on what an untrusted model may make the session do (docs/SECURITY.md).
  // Exceeding one is an error naming the limit; <= 0 turns a limit off.
  // Nodes in all the model's graphs, subgraphs and expanded functions included.
  int64_t max_graph_nodes = 1'000'000;
  // Nesting of subgraphs (If/Loop/Scan bodies inside bodies).
  int max_subgraph_depth = 32;
  // Bytes any one tensor read from the model file may claim.
  int64_t max_tensor_bytes = int64_t{16} << 30;
  // Bytes of external data the model may map, all its tensors together.
  int64_t max_external_data_bytes = int64_t{64} << 30;
  // Bytes of tensors all concurrent runs of the session hold at once (their
  // arenas and heap tensors); -1: the machine's physical memory.
  int64_t session_memory_limit_bytes = -1;

  // Custom operators (ops/custom_ops.h, include/nee/custom_op.h): shared
  // libraries loaded, in order, when the session is created, and ops defined
  // in-process. They are this session's alone.
  std::vector<std::string> custom_op_libraries;
  std::vector<std::shared_ptr<const CustomOp>> custom_ops;
};

struct NamedValue {
  std::string name;
  Value value;
};

// Arena statistics of one shape signature's memory plan (for `nee inspect --plan`).
struct PlanReport {
  size_t num_nodes = 0;
  size_t num_values = 0;
  size_t num_planned = 0;
  size_t arena_bytes = 0;
  size_t planned_bytes = 0;
};

class GraphRunner;
class Profiler;

class Session {
 public:
  static Result<std::unique_ptr<Session>> CreateFromFile(const std::string& path, const SessionOptions& options);
  static Result<std::unique_ptr<Session>> CreateFromBytes(const void* data, size_t size, const SessionOptions& options);
  static Result<std::unique_ptr<Session>> Create(Model model, const SessionOptions& options);
  ~Session();

  // Runs the model. `output_names` empty means every graph output, in order.
  // `run_options` (may be null) can stop the run early: terminate flag, timeout.
  Result<std::vector<Value>> Run(const std::vector<NamedValue>& inputs, const std::vector<std::string>& output_names,
                                 const RunOptions* run_options = nullptr) const;

  const Model& model() const { return *model_; }
  // Graph inputs a caller may feed (initializers excluded), with declared types.
  const std::vector<ValueInfo>& inputs() const { return feedable_inputs_; }
  // Graph outputs with their declared types, merged with what checking inferred
  // as ONNX Runtime lists them (see ReportedOutputType in session.cc).
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // Initializers that are also graph inputs (IR 4 and later; ONNX Runtime's
  // overridable initializers), with their declared types: a run may feed one
  // to replace its value for that run.
  const std::vector<ValueInfo>& overridable_initializers() const { return overridable_; }
  int num_threads() const { return pool_->num_threads(); }
  // The memory plan for the given concrete input types (as --plan reports it).
  Result<PlanReport> ReportPlan(const std::vector<TypeInfo>& input_types) const;

  // With SessionOptions::enable_profiling: writes the trace of the runs so far
  // and returns its path; profiling stops (ONNX Runtime's end_profiling).
  // Without it (or after it): an empty path.
  Result<std::string> EndProfiling();
  // Per-op-type totals of the profiled runs so far ("" when not profiling).
  std::string ProfileSummary() const;

 private:
  Session() = default;
  // A phase of making the session, for the profile.
  struct Phase {
    using Clock = std::chrono::steady_clock;
    const char* name;
    Clock::time_point start, end;
  };
  static Result<std::unique_ptr<Session>> CreateTimed(Model model, const SessionOptions& options,
                                                      std::vector<Phase> phases);
  struct ShapePlan;
  Result<std::shared_ptr<ShapePlan>> PlanFor(const std::vector<TypeInfo>& input_types) const;
  // The plan for a run's graph inputs (empty: the input's default).
  Result<std::shared_ptr<ShapePlan>> PlanForInputs(const std::vector<Value>& graph_inputs) const;
  std::shared_ptr<ShapePlan> CachedPlan(const std::string& key) const;  // null: none yet
  Result<std::shared_ptr<ShapePlan>> MakePlan(std::string key, const std::vector<TypeInfo>& input_types) const;
  // The type of graph input i when a run does not feed it.
  TypeInfo DefaultInputType(size_t i) const;
  // Checks a fed value against the input's declared type; may replace it (a
  // one-element tensor fed for a declared scalar becomes that scalar).
  Status ValidateInput(const ValueInfo& vi, Value& value) const;
  // Places each fed value at its graph input; checks names and types.
  Status PlaceFeeds(const std::vector<NamedValue>& inputs, std::vector<Value>& graph_inputs) const;

  // First, so destroyed last: the schemas of everything below may point into
  // the custom ops, whose code may live in a library this keeps loaded.
  std::shared_ptr<const CustomOpSet> custom_ops_;
  const OpRegistry* registry_ = &OpRegistry::Global();  // custom_ops_'s when there are any
  std::unique_ptr<Model> model_;
  SessionOptions options_;
  CheckedGraph checked_;
  std::unique_ptr<ThreadPool> pool_;
  int64_t memory_limit_ = 0;  // per run; 0: unlimited
  std::shared_ptr<MemoryBudget> session_memory_;  // the parent of every run's budget
  std::shared_ptr<BlockCache> blocks_ = std::make_shared<BlockCache>();  // small tensors' bytes, all runs
  std::unique_ptr<GraphRunner> main_;
  std::vector<ValueInfo> feedable_inputs_;
  std::vector<ValueInfo> outputs_;
  std::vector<int> feedable_to_graph_input_;
  std::vector<ValueInfo> overridable_;
  std::vector<int> overridable_to_graph_input_;
  // Made at creation when profiling; kept to the end (a run may still be
  // recording into it while EndProfiling writes), switched off by EndProfiling.
  std::unique_ptr<Profiler> profiler_;
  std::atomic<bool> profiling_{false};

  // Guards model_'s initializers, which the main runner's constant dropping
  // replaces by data-less stand-ins, against the checks of PlanFor.
  mutable std::mutex constants_mu_;
  mutable std::mutex plans_mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<ShapePlan>> plans_;
};

}  // namespace nee
