// Executes one graph (the main graph or a control-flow body) by walking its
// execution plan. Bodies of If/Loop/Scan get runners of their own, built once.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "check/checker.h"
#include "exec/run_control.h"
#include "plan/execution_plan.h"
#include "plan/memory_plan.h"

namespace nee {

// The slots of a graph being run, so bodies can read captured outer names.
struct Frame {
  const Frame* parent = nullptr;
  const ExecutionPlan* plan = nullptr;
  const std::vector<Value>* slots = nullptr;
  // Per slot, the constants a body reads in place instead of copying them
  // into `slots` (see GraphRunner::fixed_values_); null: all in `slots`.
  const std::vector<Value>* fixed = nullptr;
  // The value of slot `s` (null: none yet, or released).
  const Value* At(int s) const {
    const Value& v = (*slots)[s];
    if (!v.empty()) return &v;
    return fixed && !(*fixed)[s].empty() ? &(*fixed)[s] : nullptr;
  }
  const Value* Find(const std::string& name) const;
};

class GraphRunner {
 public:
  // `checked` is the graph's checked form (types under its declared inputs);
  // `registry` resolves the ops of bodies (a session's custom ops included).
  static Result<std::unique_ptr<GraphRunner>> Build(const Graph& graph, CheckedGraph checked,
                                                    const OpsetMap& opsets, const TypeScope* outer, int depth,
                                                    const CpuProvider& provider,
                                                    const OpRegistry& registry = OpRegistry::Global());

  // Runs with one value per graph input (empty Value: use the initializer
  // default). `memory`/`arena` may be null (then every tensor is heap-allocated).
  // Before each node, env.control may stop the run (Cancelled). `run_nodes`
  // (per plan node; null: all) skips the others, and the outputs they would
  // have made come back empty.
  Result<std::vector<Value>> Execute(std::vector<Value> inputs, const Frame* outer, const MemoryPlan* memory,
                                     uint8_t* arena, const RunEnv& env,
                                     const std::vector<bool>* run_nodes = nullptr) const;

  const Graph& graph() const { return graph_; }
  const CheckedGraph& checked() const { return checked_; }
  const ExecutionPlan& plan() const { return plan_; }
  // The runner for a body, or the error that prevented preparing it.
  Result<const GraphRunner*> BodyRunner(const Graph* body) const;

  // Lets kernels drop constants (KernelContext::DropConstantInput): once
  // every node reading a constant initializer has dropped it, the runner
  // stops handing its bytes to runs (later runs see a tensor of the same
  // type and shape without data) and calls `released(name)`, so that the
  // owner drops its own references and the bytes are freed when the last
  // run holding them lets go. Constants that are graph outputs or read by
  // a subgraph are never dropped. Off unless enabled (bodies: never).
  void EnableConstantDropping(std::function<void(const std::string&)> released);

 private:
  GraphRunner(const Graph& graph, CheckedGraph checked, const GraphRunner* parent)
      : graph_(graph), checked_(std::move(checked)), parent_(parent) {}
  static Result<std::unique_ptr<GraphRunner>> Make(const Graph& graph, CheckedGraph checked, const OpsetMap& opsets,
                                                   const TypeScope* outer, int depth, const CpuProvider& provider,
                                                   const OpRegistry& registry, const GraphRunner* parent);
  // Where each captured name lives: found once here rather than by name on
  // every execution of the body.
  void ResolveCaptures();
  // The value of captured_slots[i] in the frames enclosing this graph.
  const Value* CapturedValue(size_t i, const Frame* outer) const;
  class BodyInvoker;
  class ArenaAllocator;
  class DropHook : public KernelContext::ConstantDropHook {
   public:
    explicit DropHook(const GraphRunner& owner) : owner_(owner) {}
    void Dropped(size_t node, size_t input) const override { owner_.Dropped(node, input); }
    Tensor Take(size_t node, size_t input) const override { return owner_.Take(node, input); }

   private:
    const GraphRunner& owner_;
  };
  void Dropped(size_t node, size_t input) const;
  Tensor Take(size_t node, size_t input) const;
  // The constant that `node` read as `input`, moved out of the plan (and its
  // name), when that read was its last undropped one; undefined otherwise.
  std::pair<Tensor, std::string> LastReadDone(size_t node, size_t input) const;

  const Graph& graph_;
  CheckedGraph checked_;
  const GraphRunner* parent_;  // the runner of the enclosing graph; null for the main graph
  ExecutionPlan plan_;
  // Per slot: the constant (initializer) it holds, for runners that never
  // drop constants (bodies). Executions read these in place: a body run on
  // every loop iteration no longer copies each constant into its slots.
  std::vector<Value> fixed_values_;
  // Per captured slot (plan_.captured_slots): how many frames up its name is
  // first declared (-1: nowhere above; looked up by name), the slot there
  // and that graph's plan (checked against the frame before it is trusted).
  struct CaptureRef {
    int up = -1;
    int slot = -1;
    const ExecutionPlan* plan = nullptr;
  };
  std::vector<CaptureRef> captures_;
  std::map<const Graph*, std::unique_ptr<GraphRunner>> bodies_;
  // Bodies that failed to check: an If branch can be invalid for the shapes
  // at hand and still be fine when it is never taken, so the error is
  // reported only if the body actually runs.
  std::map<const Graph*, Status> body_errors_;

  // Constant dropping (EnableConstantDropping). Guarded by drop_mu_: the
  // tensors in plan_.constant_slots (replaced when dropped), and per slot
  // the number of (node, input) reads not yet dropped (-1: never dropped),
  // and per node which of its inputs it dropped already.
  bool dropping_ = false;
  std::unique_ptr<DropHook> drop_hook_;
  std::function<void(const std::string&)> released_;
  mutable std::mutex drop_mu_;
  mutable std::vector<int> undropped_reads_;
  mutable std::vector<std::vector<bool>> node_dropped_;
};

}  // namespace nee
