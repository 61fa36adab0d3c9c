// What an operator is: its schema entry (domain, name, the opset version it
// was introduced or changed in, arity), its shape/type rule and its reference
// kernel. One family file in ops/ defines these for a group of related ops.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <typeindex>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "ir/graph.h"
#include "ir/value.h"

namespace nee {

class CustomOp;  // ops/custom_ops.h
struct OpSchema;

// ---- Shape and type inference ---------------------------------------------

// Runs inference on a subgraph (If/Loop/Scan bodies) given the types of its
// formal inputs; returns the types of its outputs. Provided by check/.
using SubgraphInferFn =
    std::function<Result<std::vector<TypeInfo>>(const Graph&, const std::vector<TypeInfo>&)>;

struct InferenceContext {
  const Node& node;
  int64_t opset;  // the model's opset for the node's domain
  // Per input: its type, or nullptr for an omitted optional input.
  std::vector<const TypeInfo*> input_types;
  // Per input: its value when known before running (an initializer, a
  // Constant, or a propagated shape computation); nullptr otherwise.
  std::vector<const Tensor*> input_values;
  // Filled by the rule: one entry per node output.
  std::vector<TypeInfo> output_types;
  // Optionally filled: output values the rule could compute cheaply (shape
  // tensors), enabling Shape->Gather->Concat->Reshape propagation.
  std::vector<std::optional<Tensor>> output_values;
  SubgraphInferFn infer_subgraph;
  // The schema entry whose rule runs (set by the checker; custom ops' rules read it).
  const OpSchema* schema = nullptr;

  size_t num_inputs() const { return input_types.size(); }
  bool has_input(size_t i) const { return i < input_types.size() && input_types[i] != nullptr; }
  const TypeInfo& input_type(size_t i) const { return *input_types[i]; }
  const Tensor* input_value(size_t i) const { return i < input_values.size() ? input_values[i] : nullptr; }
  size_t num_outputs() const { return output_types.size(); }
  // Error helper: "node 'x' (Op): input 1: <message>".
  Status Error(const std::string& message) const;
  Status InputError(size_t index, const std::string& message) const;
};

using ShapeFn = Status (*)(InferenceContext&);

// ---- Running --------------------------------------------------------------

// Runs a subgraph attribute (If/Loop/Scan bodies) on the given inputs.
// `outer_scope` resolves names the body captures from enclosing graphs.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual Result<std::vector<Value>> Run(const Graph& body, const std::vector<Value>& inputs) = 0;
};

// What a kernel computes once and reuses on every later run of the same node
// in the same session: parsed attributes, geometry for one input-shape
// signature, constant weights packed into the layout a fast kernel reads
// (TFLite's Prepare, ncnn's create_pipeline). One cache per planned node,
// owned by the execution plan; entries are built on first use under a lock and
// then shared read-only by concurrent runs. The key is exact (the values that
// determine the state, e.g. input dims), never a hash, so two signatures can
// never share an entry.
class PreparedCache {
 public:
  using Key = std::vector<int64_t>;

  // The state of type T stored under `key`, built by `build()` (returning
  // Result<std::shared_ptr<const T>>) the first time. A failed build is not
  // cached: the error is returned and the next call tries again.
  template <typename T, typename Build>
  Result<std::shared_ptr<const T>> GetOrBuild(const Key& key, Build&& build) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : entries_)
      if (e.type == std::type_index(typeid(T)) && e.key == key) return std::static_pointer_cast<const T>(e.state);
    const auto started = std::chrono::steady_clock::now();
    Result<std::shared_ptr<const T>> built = build();
    build_us_ += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started)
                     .count();
    if (!built.ok()) return built.status();
    // Bounded like the session's per-shape plans: a model fed ever-new shapes
    // drops its oldest states (runs still holding one keep it alive). The
    // oldest of the same type goes first: a kernel keeps one entry of packed
    // weights (whose build may have dropped the constant input it packed, so
    // it cannot be rebuilt) beside one plan per input shape, and new shapes
    // must evict old plans, not the weights.
    if (entries_.size() >= kMaxEntries) entries_.erase(OldestToEvict(std::type_index(typeid(T))));
    entries_.push_back({std::type_index(typeid(T)), key, built.value()});
    return built;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

  // Microseconds spent building entries since the last call (the profiler
  // reports them apart from the run that triggered them: weights packed on
  // the first run are preparation, not that run's kernel time). With
  // concurrent runs a build may be reported by another run of the node.
  int64_t TakeBuildMicroseconds() {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t us = build_us_;
    build_us_ = 0;
    return us;
  }

 private:
  static constexpr size_t kMaxEntries = 16;
  struct Entry {
    std::type_index type;
    Key key;
    std::shared_ptr<const void> state;
  };
  // The oldest entry of `type`, or the oldest of all when there is none.
  typename std::vector<Entry>::iterator OldestToEvict(std::type_index type) {
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->type == type) return it;
    return entries_.begin();
  }
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  int64_t build_us_ = 0;
};

class KernelContext {
 public:
  // Implemented by exec/: where outputs are placed (planned arena or heap).
  class OutputAllocator {
   public:
    virtual ~OutputAllocator() = default;
    // `zero_fill`: whether the bytes must start as zeros (false when the
    // kernel writes every element).
    virtual Result<Tensor> Allocate(size_t output_index, DataType type, std::vector<int64_t> dims,
                                    bool zero_fill) = 0;
  };

  KernelContext(const Node& node, int64_t opset, std::vector<const Value*> inputs,
                std::vector<Value>* outputs, OutputAllocator* allocator, ThreadPool* pool,
                SubgraphRunner* subgraphs)
      : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(outputs),
        allocator_(allocator), pool_(pool), subgraphs_(subgraphs) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_->size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // The input value; nullptr when omitted.
  const Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  // The input as a tensor; fails (naming node and input) when omitted or not a tensor.
  Result<const Tensor*> InputTensor(size_t i) const;
  // Whether the node asked for output i (optional outputs may be omitted).
  bool wants_output(size_t i) const { return node_.HasOutput(i); }

  // Allocates output i with the given type and dims and stores it. The
  // returned tensor shares bytes with the stored output.
  Result<Tensor> AllocateOutput(size_t i, DataType type, std::vector<int64_t> dims);
  // Like AllocateOutput, for a kernel that writes every element of the output:
  // the bytes are not zero-filled first (for strings this is AllocateOutput).
  Result<Tensor> AllocateOutputForOverwrite(size_t i, DataType type, std::vector<int64_t> dims);
  // Stores a non-tensor (or pre-made tensor) output value.
  Status SetOutput(size_t i, Value value);

  ThreadPool* pool() const { return pool_; }
  // Parallel loop over [0, n): fn(begin, end). Runs inline without a pool.
  void ParallelFor(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) const;
  SubgraphRunner* subgraphs() const { return subgraphs_; }

  // Set by the run loop: the node's prepared-state cache, and which inputs
  // are session constants (initializers that no caller can override), whose
  // bytes are the same on every run. Without them (a kernel run on its own,
  // constant folding) prepared() is null and no input counts as constant.
  void SetPrepared(PreparedCache* cache, const std::vector<bool>* constant_inputs) {
    prepared_ = cache;
    constant_inputs_ = constant_inputs;
  }
  PreparedCache* prepared() const { return prepared_; }
  bool input_is_constant(size_t i) const {
    return constant_inputs_ && i < constant_inputs_->size() && (*constant_inputs_)[i];
  }
  // The schema entry of the node (set by the run loop; custom ops' kernels read it).
  void SetSchema(const OpSchema* schema) { schema_ = schema; }
  const OpSchema* schema() const { return schema_; }

  // For a kernel that has just packed constant input i into its prepared
  // state: lets the process drop the input's pages if they are a view of the
  // mapped model file (see ReleaseFileBackedPages). No-op otherwise.
  void ReleaseConstantInput(size_t i) const;

  // Told by DropConstantInput which node dropped which input (exec/ implements
  // it for the session's main graph).
  class ConstantDropHook {
   public:
    virtual ~ConstantDropHook() = default;
    virtual void Dropped(size_t node, size_t input) const = 0;
    // Dropped, handing the constant over when its bytes may be overwritten
    // (see TakeConstantInput).
    virtual Tensor Take(size_t node, size_t input) const {
      Dropped(node, input);
      return Tensor();
    }
  };
  void SetConstantDropHook(const ConstantDropHook* hook, size_t node) {
    drop_hook_ = hook;
    node_index_ = node;
  }
  // ReleaseConstantInput and a promise: this node's kernel never reads input
  // i's bytes again in this session, whatever the shapes of later runs' inputs
  // (it holds a prepared copy that does not depend on them). Once every
  // reader of a constant has promised so, the session lets its bytes go (a
  // heap copy is freed; file pages are dropped), unless the constant is a
  // graph output. A kernel that may still take a path reading the input
  // in place on some later run must call ReleaseConstantInput instead.
  void DropConstantInput(size_t i) const;
  // DropConstantInput for a kernel about to copy input i into a layout of
  // its own, which may write over the input's bytes instead: returns the
  // constant when this node was its last reader, no other run, session or
  // caller holds it, and its bytes are heap memory (not the read-only mapped
  // file). Otherwise an undefined tensor: the caller packs from the input as
  // usual and then calls ReleaseConstantInput(i). The drop is recorded either way.
  Tensor TakeConstantInput(size_t i) const;

  Status Error(const std::string& message) const;
  Status InputError(size_t index, const std::string& message) const;

 private:
  Result<Tensor> AllocateOutputImpl(size_t i, DataType type, std::vector<int64_t> dims, bool zero_fill);

  const Node& node_;
  int64_t opset_;
  std::vector<const Value*> inputs_;
  std::vector<Value>* outputs_;
  OutputAllocator* allocator_;
  ThreadPool* pool_;
  SubgraphRunner* subgraphs_;
  PreparedCache* prepared_ = nullptr;
  const std::vector<bool>* constant_inputs_ = nullptr;
  const OpSchema* schema_ = nullptr;
  const ConstantDropHook* drop_hook_ = nullptr;
  size_t node_index_ = 0;
};

using KernelFn = Status (*)(KernelContext&);

// ---- Schema ---------------------------------------------------------------

constexpr int kVariadic = 1 << 20;

struct OpSchema {
  const char* domain;     // "" for ai.onnx, "ai.onnx.ml", ...
  const char* name;
  int since_version;      // this entry is in force from here until the next entry
  int min_inputs;
  int max_inputs;         // kVariadic for variadic
  int min_outputs;
  int max_outputs;
  ShapeFn infer;          // may be null: outputs then get unknown types
  KernelFn kernel;        // reference kernel; null if the op only has a function body
  // A session's custom op (ops/custom_ops.h): its definition, which infer and
  // kernel (ops/custom_op_bridge.cc) call through the C ABI. Null for nee's own ops.
  const CustomOp* custom = nullptr;
};

}  // namespace nee
