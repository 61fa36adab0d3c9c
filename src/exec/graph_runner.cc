#include "exec/graph_runner.h"

#include <cstring>

#include "base/mapped_file.h"
#include "ep/cpu/cpu_provider.h"
#include "exec/profiler.h"

namespace nee {

const Value* Frame::Find(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent) {
    auto it = f->plan->slot_of.find(name);
    if (it == f->plan->slot_of.end()) continue;
    if (const Value* v = f->At(it->second)) return v;
  }
  return nullptr;
}

Result<std::unique_ptr<GraphRunner>> GraphRunner::Build(const Graph& graph, CheckedGraph checked,
                                                        const OpsetMap& opsets, const TypeScope* outer, int depth,
                                                        const CpuProvider& provider, const OpRegistry& registry) {
  return Make(graph, std::move(checked), opsets, outer, depth, provider, registry, nullptr);
}

Result<std::unique_ptr<GraphRunner>> GraphRunner::Make(const Graph& graph, CheckedGraph checked,
                                                       const OpsetMap& opsets, const TypeScope* outer, int depth,
                                                       const CpuProvider& provider, const OpRegistry& registry,
                                                       const GraphRunner* parent) {
  std::unique_ptr<GraphRunner> runner(new GraphRunner(graph, std::move(checked), parent));
  NEE_ASSIGN_OR_RETURN(runner->plan_, BuildExecutionPlan(graph, runner->checked_, provider));
  runner->fixed_values_.resize(runner->plan_.num_slots());
  for (const auto& [slot, tensor] : runner->plan_.constant_slots) runner->fixed_values_[slot] = Value(tensor);
  runner->ResolveCaptures();
  TypeScope scope{outer, &runner->checked_.types, &runner->checked_.constants};
  for (const Node& node : graph.nodes) {
    for (const Graph* body : BodiesOf(node)) {
      auto body_checked = CheckGraph(*body, opsets, registry, &scope, CheckOptions{}, depth + 1);
      if (!body_checked.ok()) {
        // The model-level check already accepted this body under the node's
        // shape rule (e.g. an untaken If branch); fail only if it runs.
        runner->body_errors_.emplace(body, body_checked.status().WithContext(node.Describe() + ": "));
        continue;
      }
      NEE_ASSIGN_OR_RETURN(auto body_runner, Make(*body, std::move(body_checked).value(), opsets, &scope, depth + 1,
                                                  provider, registry, runner.get()));
      runner->bodies_.emplace(body, std::move(body_runner));
    }
  }
  return runner;
}

void GraphRunner::ResolveCaptures() {
  captures_.assign(plan_.captured_slots.size(), CaptureRef{});
  for (size_t i = 0; i < captures_.size(); ++i) {
    int up = 0;
    for (const GraphRunner* r = parent_; r; r = r->parent_, ++up) {
      auto it = r->plan_.slot_of.find(plan_.captured_slots[i].second);
      if (it == r->plan_.slot_of.end()) continue;
      captures_[i] = CaptureRef{up, it->second, &r->plan_};
      break;
    }
  }
}

const Value* GraphRunner::CapturedValue(size_t i, const Frame* outer) const {
  const CaptureRef& ref = captures_[i];
  const Frame* f = outer;
  for (int k = 0; k < ref.up && f; ++k) f = f->parent;
  // The frames are those of the enclosing graphs (bodies run only from their
  // owner's nodes); the plan check keeps a surprise from reading a wrong slot.
  if (ref.up >= 0 && f && f->plan == ref.plan)
    if (const Value* v = f->At(ref.slot)) return v;
  // Not there (e.g. released): the name is looked for further out.
  return outer ? outer->Find(plan_.captured_slots[i].second) : nullptr;
}

void GraphRunner::EnableConstantDropping(std::function<void(const std::string&)> released) {
  std::lock_guard<std::mutex> lock(drop_mu_);
  const size_t n_slots = plan_.num_slots();
  undropped_reads_.assign(n_slots, -1);
  for (const auto& entry : plan_.constant_slots) undropped_reads_[entry.first] = 0;
  for (int s : plan_.input_slots) undropped_reads_[s] = -1;     // overridable default
  for (int s : plan_.output_slots) undropped_reads_[s] = -1;    // handed to the caller
  for (const auto& entry : plan_.captured_slots) undropped_reads_[entry.first] = -1;
  node_dropped_.assign(plan_.nodes.size(), {});
  for (size_t n = 0; n < plan_.nodes.size(); ++n) {
    const PlannedNode& pn = plan_.nodes[n];
    node_dropped_[n].assign(pn.inputs.size(), false);
    for (int s : pn.inputs)
      if (s >= 0 && undropped_reads_[s] >= 0) ++undropped_reads_[s];
    for (int s : pn.implicit_inputs) undropped_reads_[s] = -1;  // a subgraph reads it in place
  }
  released_ = std::move(released);
  fixed_values_.clear();  // constants are copied into each run's slots: they may be replaced when dropped
  drop_hook_ = std::make_unique<DropHook>(*this);
  dropping_ = true;
}

std::pair<Tensor, std::string> GraphRunner::LastReadDone(size_t node, size_t input) const {
  std::lock_guard<std::mutex> lock(drop_mu_);
  if (!dropping_ || node >= node_dropped_.size() || input >= node_dropped_[node].size() ||
      node_dropped_[node][input])
    return {};
  node_dropped_[node][input] = true;
  const int s = plan_.nodes[node].inputs[input];
  if (s < 0 || undropped_reads_[s] <= 0 || --undropped_reads_[s] > 0) return {};
  Tensor constant;
  for (auto& entry : const_cast<ExecutionPlan&>(plan_).constant_slots) {
    if (entry.first != s) continue;
    constant = std::move(entry.second);
    entry.second = Tensor::View(constant.dtype(), constant.dims(), nullptr, nullptr);
    break;
  }
  const_cast<CheckedGraph&>(checked_).constants.erase(plan_.slot_names[s]);
  return {std::move(constant), plan_.slot_names[s]};
}

void GraphRunner::Dropped(size_t node, size_t input) const {
  auto [dropped, name] = LastReadDone(node, input);  // the bytes are let go (if this was the last reference) at return
  if (name.empty()) return;
  // Pages of the mapped file too, now that no reader is left (no-op for heap bytes).
  if (dropped.defined()) ReleaseFileBackedPages(dropped.raw_data(), dropped.byte_size());
  if (released_) released_(name);  // the session drops its reference
}

Tensor GraphRunner::Take(size_t node, size_t input) const {
  auto [taken, name] = LastReadDone(node, input);
  if (name.empty()) return Tensor();
  if (released_) released_(name);  // the session drops its reference
  // Who else may hold the bytes now: the reading run's own slot (constants
  // are copied into each run's slots), other runs' slots, other sessions or
  // a caller sharing the tensor. Two holders, this one and the reading run's,
  // means none of the others. The file's mapping is read-only.
  if (taken.defined() && taken.owned_by_at_most(2) && !IsInMappedFile(taken.raw_data(), taken.byte_size()))
    return taken;
  return Tensor();  // the caller packs from its input and releases the file's pages
}

Result<const GraphRunner*> GraphRunner::BodyRunner(const Graph* body) const {
  auto it = bodies_.find(body);
  if (it != bodies_.end()) return static_cast<const GraphRunner*>(it->second.get());
  auto err = body_errors_.find(body);
  if (err != body_errors_.end()) return err->second;
  return RuntimeError("subgraph '" + body->name + "' was not prepared for execution");
}

// Runs a node's bodies with the node's frame as their outer scope.
class GraphRunner::BodyInvoker : public SubgraphRunner {
 public:
  BodyInvoker(const GraphRunner& owner, const Frame& frame, const RunEnv& env)
      : owner_(owner), frame_(frame), env_(env) {}
  Result<std::vector<Value>> Run(const Graph& body, const std::vector<Value>& inputs) override {
    NEE_ASSIGN_OR_RETURN(const GraphRunner* runner, owner_.BodyRunner(&body));
    if (inputs.size() != body.inputs.size())
      return InvalidArgument("subgraph '" + body.name + "' takes " + std::to_string(body.inputs.size()) +
                             " inputs, got " + std::to_string(inputs.size()));
    // No arena for bodies: their outputs must stay valid across iterations
    // (Loop/Scan keep scan outputs by reference until they stack them).
    return runner->Execute(inputs, &frame_, nullptr, nullptr, env_);
  }

 private:
  const GraphRunner& owner_;
  const Frame& frame_;
  const RunEnv& env_;
};

// Places planned outputs at their arena offset; everything else on the heap
// (small blocks from the session's BlockCache), counted against the run's
// memory budget.
class GraphRunner::ArenaAllocator : public KernelContext::OutputAllocator {
 public:
  // The buffers of one run's graph outputs that hold other values (MemoryPlan::host), by slot.
  using OutputHosts = std::vector<std::pair<int, std::shared_ptr<Tensor>>>;

  ArenaAllocator(const MemoryPlan* memory, uint8_t* arena, OutputHosts* hosts, const PlannedNode& node,
                 const RunEnv& env)
      : memory_(memory), arena_(arena), hosts_(hosts), node_(node), budget_(env.memory), blocks_(env.blocks) {}
  Result<Tensor> Allocate(size_t i, DataType type, std::vector<int64_t> dims, bool zero_fill) override {
    if (memory_ && i < node_.outputs.size()) {
      int slot = node_.outputs[i];
      if (slot >= 0 && memory_->offset[slot] >= 0 && memory_->type[slot] == type && memory_->dims[slot] == dims &&
          (arena_ || memory_->host[slot] >= 0)) {
        Tensor t;
        if (memory_->host[slot] < 0) {
          t = Tensor::View(type, std::move(dims), arena_ + memory_->offset[slot], nullptr);
        } else {
          NEE_ASSIGN_OR_RETURN(std::shared_ptr<Tensor> host, HostBuffer(memory_->host[slot]));
          t = Tensor::View(type, std::move(dims), static_cast<uint8_t*>(host->raw_data()) + memory_->offset[slot],
                           std::shared_ptr<void>(host, host.get()));
        }
        if (zero_fill) std::memset(t.raw_data(), 0, t.byte_size());
        return t;
      }
    }
    if (!budget_) return zero_fill ? Tensor::Allocate(type, std::move(dims))
                                   : Tensor::AllocateUninitialized(type, std::move(dims));
    return AllocateCounted(type, std::move(dims), zero_fill);
  }

 private:
  // The run's buffer of graph output `slot`, allocated (on the heap, counted
  // against the budget) when the first value inside it is produced.
  Result<std::shared_ptr<Tensor>> HostBuffer(int slot) {
    for (const auto& [s, buffer] : *hosts_)
      if (s == slot) return buffer;
    NEE_ASSIGN_OR_RETURN(Tensor t, budget_ ? AllocateCounted(memory_->type[slot], memory_->dims[slot], false)
                                           : Tensor::AllocateUninitialized(memory_->type[slot], memory_->dims[slot]));
    hosts_->emplace_back(slot, std::make_shared<Tensor>(std::move(t)));
    return hosts_->back().second;
  }

  // Owns a cached block: gives it back, and its bytes to the budget, when the
  // last tensor viewing it is gone.
  struct CachedBlock {
    CachedBlock(std::shared_ptr<BlockCache> cache, std::shared_ptr<MemoryBudget> budget, void* data,
                int64_t bytes)
        : cache(std::move(cache)), budget(std::move(budget)), data(data), bytes(bytes) {}
    CachedBlock(const CachedBlock&) = delete;
    CachedBlock& operator=(const CachedBlock&) = delete;
    ~CachedBlock() {
      cache->Give(data, BlockCache::CapacityFor(static_cast<size_t>(bytes)));
      budget->Release(bytes);
    }
    std::shared_ptr<BlockCache> cache;
    std::shared_ptr<MemoryBudget> budget;
    void* data;
    int64_t bytes;
  };

  // A heap tensor whose bytes stay reserved in the budget until it is freed.
  Result<Tensor> AllocateCounted(DataType type, std::vector<int64_t> dims, bool zero_fill) {
    NEE_ASSIGN_OR_RETURN(int64_t count, CheckedElementCount(dims));
    auto bytes = static_cast<int64_t>(StorageBytes(type, count));
    // Small counts only: `bytes` of a huge count may have wrapped around, and
    // the heap path is what refuses tensors over the size limit.
    const bool cached = blocks_ && type != DataType::kString && IsValidDataType(static_cast<int32_t>(type)) &&
                        count <= static_cast<int64_t>(BlockCache::kMaxBlockBytes) &&
                        BlockCache::Serves(static_cast<size_t>(bytes));
    NEE_RETURN_IF_ERROR(budget_->Reserve(bytes));
    if (cached) return FromCache(type, std::move(dims), bytes, zero_fill);
    Result<Tensor> heap = zero_fill ? Tensor::Allocate(type, dims) : Tensor::AllocateUninitialized(type, dims);
    if (!heap.ok()) {
      budget_->Release(bytes);
      return heap.status();
    }
    void* data = heap->raw_data();
    std::shared_ptr<MemoryBudget> budget = budget_;
    std::shared_ptr<void> owner(new Tensor(std::move(heap).value()), [budget, bytes](void* p) {
      delete static_cast<Tensor*>(p);
      budget->Release(bytes);
    });
    return Tensor::View(type, std::move(dims), data, std::move(owner));
  }

  // One small allocation (the owner) instead of an aligned block, a tensor
  // and two shared-pointer control blocks. `bytes` is already reserved.
  Result<Tensor> FromCache(DataType type, std::vector<int64_t> dims, int64_t bytes, bool zero_fill) {
    void* data = blocks_->Take(static_cast<size_t>(bytes));
    if (!data) {
      budget_->Release(bytes);
      return OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes for tensor " + DimsToString(dims));
    }
    auto owner = std::make_shared<CachedBlock>(blocks_, budget_, data, bytes);
    if (zero_fill) std::memset(data, 0, static_cast<size_t>(bytes));
    return Tensor::View(type, std::move(dims), data, std::move(owner));
  }

  const MemoryPlan* memory_;
  uint8_t* arena_;
  OutputHosts* hosts_;
  const PlannedNode& node_;
  const std::shared_ptr<MemoryBudget>& budget_;
  const std::shared_ptr<BlockCache>& blocks_;
};

namespace {
bool InArena(const Tensor& t, const uint8_t* arena, size_t arena_bytes) {
  auto p = static_cast<const uint8_t*>(t.raw_data());
  return arena && p >= arena && p < arena + arena_bytes;
}

// The slots of one execution, taken from the vectors finished executions on
// this thread left behind (every Value empty again) instead of building and
// destroying num_slots Values each time: a body runs once per node that
// holds it, per loop iteration. Nested bodies take vectors of their own.
class SlotVector {
 public:
  explicit SlotVector(size_t n) {
    std::vector<std::vector<Value>>& spare = Spare();
    if (!spare.empty()) {
      slots_ = std::move(spare.back());
      spare.pop_back();
    }
    slots_.resize(n);
  }
  SlotVector(const SlotVector&) = delete;
  SlotVector& operator=(const SlotVector&) = delete;
  ~SlotVector() {
    for (Value& v : slots_)
      if (!v.empty()) v = Value();  // drops what the run still held
    std::vector<std::vector<Value>>& spare = Spare();
    if (spare.size() < kMaxSpare && slots_.capacity() <= kMaxSpareSlots) spare.push_back(std::move(slots_));
  }
  std::vector<Value>& get() { return slots_; }

 private:
  // At most this many vectors per thread, none of a big graph's (its
  // execution dwarfs building the vector; the thread would keep ~1 MiB).
  static constexpr size_t kMaxSpare = 8;
  static constexpr size_t kMaxSpareSlots = 4096;
  static std::vector<std::vector<Value>>& Spare() {
    thread_local std::vector<std::vector<Value>> spare;
    return spare;
  }
  std::vector<Value> slots_;
};
}  // namespace

Result<std::vector<Value>> GraphRunner::Execute(std::vector<Value> inputs, const Frame* outer,
                                                const MemoryPlan* memory, uint8_t* arena, const RunEnv& env,
                                                const std::vector<bool>* run_nodes) const {
  SlotVector slot_vector(plan_.num_slots());
  std::vector<Value>& slots = slot_vector.get();
  Frame frame{outer, &plan_, &slots, fixed_values_.empty() ? nullptr : &fixed_values_};
  if (!frame.fixed) {
    std::unique_lock<std::mutex> lock(drop_mu_, std::defer_lock);
    if (dropping_) lock.lock();
    for (const auto& [slot, tensor] : plan_.constant_slots) slots[slot] = Value(tensor);
  }
  for (size_t i = 0; i < plan_.input_slots.size() && i < inputs.size(); ++i)
    if (!inputs[i].empty()) slots[plan_.input_slots[i]] = std::move(inputs[i]);
  for (size_t i = 0; i < plan_.captured_slots.size(); ++i) {
    const Value* v = CapturedValue(i, outer);
    if (!v)
      return RuntimeError("graph '" + graph_.name + "' reads '" + plan_.captured_slots[i].second +
                          "' from an enclosing graph, which has no value for it");
    slots[plan_.captured_slots[i].first] = *v;
  }
  size_t arena_bytes = memory ? memory->arena_bytes : 0;

  // A body without nodes is checked too: a loop over it must still stop.
  if (env.control && plan_.nodes.empty()) {
    Status stop = env.control->Check();
    if (!stop.ok()) return stop.WithContext("graph '" + graph_.name + "': ");
  }
  std::vector<Value> out;  // the node's outputs; its capacity serves every node
  ArenaAllocator::OutputHosts hosts;
  for (size_t n = 0; n < plan_.nodes.size(); ++n) {
    const PlannedNode& pn = plan_.nodes[n];
    if (run_nodes && !(*run_nodes)[n]) continue;
    if (env.control) {
      Status stop = env.control->Check();
      if (!stop.ok()) return stop.WithContext("before " + pn.node->Describe() + ": ");
    }
    std::vector<const Value*> in;
    in.reserve(pn.inputs.size());
    for (size_t k = 0; k < pn.inputs.size(); ++k) {
      int s = pn.inputs[k];
      if (s < 0) {
        in.push_back(nullptr);
        continue;
      }
      const Value* v = frame.At(s);
      if (!v)
        return RuntimeError(pn.node->Describe() + ": input " + std::to_string(k) + " '" + plan_.slot_names[s] +
                            "' has no value (an optional output that was not produced?)");
      in.push_back(v);
    }
    out.clear();
    out.resize(pn.outputs.size());
    std::vector<const Value*> profiled_inputs;
    if (env.profiler) profiled_inputs = in;
    ArenaAllocator allocator(memory, arena, &hosts, pn, env);
    BodyInvoker bodies(*this, frame, env);
    KernelContext ctx(*pn.node, pn.opset, std::move(in), &out, &allocator, env.pool, &bodies);
    ctx.SetPrepared(pn.prepared.get(), &pn.constant_inputs);
    ctx.SetSchema(pn.schema);
    if (drop_hook_) ctx.SetConstantDropHook(drop_hook_.get(), n);
    const int64_t start_us = env.profiler ? env.profiler->NowUs() : 0;
    Status st = pn.kernel(ctx);
    if (env.profiler) {
      const char* kind = pn.schema->custom ? "custom" : pn.kernel == pn.schema->kernel ? "reference" : "optimized";
      const int64_t prepare_us = pn.prepared ? pn.prepared->TakeBuildMicroseconds() : 0;
      env.profiler->RecordNode(*pn.node, n, kind, start_us, env.profiler->NowUs() - start_us, profiled_inputs, out,
                               prepare_us);
    }
    if (!st.ok()) return st;
    for (size_t k = 0; k < pn.outputs.size(); ++k) {
      int s = pn.outputs[k];
      if (s < 0) continue;
      if (out[k].empty())
        return RuntimeError(pn.node->Describe() + ": did not produce output " + std::to_string(k) + " '" +
                            plan_.slot_names[s] + "'");
      // Safety net: an output that aliases some other arena region (a kernel
      // that passed an input through) would be overwritten; give it its own copy.
      // A value planned inside a graph output's buffer (host >= 0) has its
      // offset in that buffer, so any arena address is someone else's region.
      if (out[k].is_tensor() && InArena(out[k].tensor(), arena, arena_bytes) &&
          (memory->offset[s] < 0 || memory->host[s] >= 0 || out[k].tensor().raw_data() != arena + memory->offset[s])) {
        NEE_ASSIGN_OR_RETURN(Tensor copy, out[k].tensor().Clone());
        out[k] = Value(std::move(copy));
      }
      slots[s] = std::move(out[k]);
    }
    for (int s : pn.release_after) slots[s] = Value();
  }

  std::vector<Value> results;
  results.reserve(plan_.output_slots.size());
  for (int s : plan_.output_slots) {
    const Value* v = frame.At(s);
    if (!v && run_nodes) {
      results.emplace_back();  // not asked for
      continue;
    }
    if (!v) return RuntimeError("graph '" + graph_.name + "': output '" + plan_.slot_names[s] + "' was not computed");
    if (v->is_tensor() && InArena(v->tensor(), arena, arena_bytes)) {
      NEE_ASSIGN_OR_RETURN(Tensor copy, v->tensor().Clone());
      results.emplace_back(std::move(copy));
    } else {
      results.push_back(*v);
    }
  }
  return results;
}

}  // namespace nee
