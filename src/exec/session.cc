#include "exec/session.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "base/huge_pages.h"
#include "exec/graph_runner.h"
#include "exec/profiler.h"
#include "format/onnx_reader.h"
#include "ir/inline_functions.h"
#include "ops/attr_spec.h"
#include "opt/pass_manager.h"

namespace nee {

struct Session::ShapePlan {
  CheckedGraph checked;
  MemoryPlan memory;
  std::mutex mu;
  std::vector<std::shared_ptr<uint8_t>> free_arenas;

  // An arena for one run: reused from an earlier run when one is free.
  Result<std::shared_ptr<uint8_t>> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!free_arenas.empty()) {
        auto a = std::move(free_arenas.back());
        free_arenas.pop_back();
        return a;
      }
    }
    if (memory.arena_bytes == 0) return std::shared_ptr<uint8_t>();
    // On transparent huge pages (base/huge_pages.h): every run writes and reads it through, and between
    // runs on a busy machine its TLB entries go cold (MobileNetV2, 1 thread, 100 ms between runs: -1 to -4%).
    static_assert(MemoryPlan::kAlignment <= 64, "HugePageAllocate aligns to 64 bytes");
    void* p = HugePageAllocate(memory.arena_bytes);
    if (!p) return OutOfMemory("cannot allocate the " + std::to_string(memory.arena_bytes) + "-byte arena");
    return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { HugePageFree(q); });
  }
  void Release(std::shared_ptr<uint8_t> arena) {
    if (!arena) return;
    std::lock_guard<std::mutex> lock(mu);
    free_arenas.push_back(std::move(arena));
  }
};

Session::~Session() = default;

namespace {

ReadOptions ReadLimitsOf(const SessionOptions& options) {
  ReadOptions read;
  read.max_tensor_bytes = options.max_tensor_bytes;
  read.max_external_data_bytes = options.max_external_data_bytes;
  return read;
}

// Enforces max_graph_nodes and max_subgraph_depth over the graph and every
// body nested in it, before the checker and planner spend time on them.
Status CheckGraphSize(const Graph& graph, const SessionOptions& options, int depth, int64_t* nodes) {
  if (options.max_subgraph_depth > 0 && depth > options.max_subgraph_depth)
    return InvalidModel("graph '" + graph.name + "': subgraphs nested " + std::to_string(depth) +
                        " deep, over the limit of " + std::to_string(options.max_subgraph_depth) +
                        " (SessionOptions max_subgraph_depth)");
  *nodes += static_cast<int64_t>(graph.nodes.size());
  if (options.max_graph_nodes > 0 && *nodes > options.max_graph_nodes)
    return InvalidModel("graph '" + graph.name + "': the model has more than " +
                        std::to_string(options.max_graph_nodes) +
                        " nodes (SessionOptions max_graph_nodes; subgraphs and functions count)");
  for (const Node& node : graph.nodes)
    for (const Graph* body : BodiesOf(node))
      NEE_RETURN_IF_ERROR(CheckGraphSize(*body, options, depth + 1, nodes));
  return Status::Ok();
}

// The type ONNX Runtime lists for a graph output: the declared type with what
// inference proved merged in (as onnx's mergeInShapeInfo): a dim declared
// symbolic or unknown takes an inferred value, an unknown one an inferred
// symbol, and an output declared without a shape (or a type) takes the inferred
// one. A silero-vad LSTM state declared [1, "LSTMhn_dim_1", 128] is listed as
// [1, 1, 128]. A declared value is never replaced.
TypeInfo ReportedOutputType(const TypeInfo& declared, const TypeInfo* inferred) {
  if (!inferred || inferred->kind == TypeInfo::Kind::kUnknown) return declared;
  if (declared.kind == TypeInfo::Kind::kUnknown) return *inferred;
  const bool tensor = declared.kind == TypeInfo::Kind::kTensor || declared.kind == TypeInfo::Kind::kSparseTensor;
  if (!tensor || declared.kind != inferred->kind || !inferred->shape) return declared;
  if (declared.elem_type != DataType::kUndefined && declared.elem_type != inferred->elem_type) return declared;
  TypeInfo merged = declared;
  merged.elem_type = inferred->elem_type;
  if (!merged.shape) {
    merged.shape = inferred->shape;
    return merged;
  }
  if (merged.shape->size() != inferred->shape->size()) return declared;
  for (size_t i = 0; i < merged.shape->size(); ++i) {
    Dim& dim = (*merged.shape)[i];
    const Dim& found = (*inferred->shape)[i];
    if (dim.known()) continue;
    if (found.known()) {
      dim.value = found.value;
      dim.symbol.clear();
    } else if (dim.symbol.empty()) {
      dim.symbol = found.symbol;
    }
  }
  return merged;
}

// Before IR version 4 every initializer had to be listed as a graph input
// too, and a caller cannot override one (ONNX Runtime refuses the name): they
// are constants, so the optimizer may fold them and kernels pack them once.
void DropInitializerInputsBeforeIr4(Model& model) {
  if (model.ir_version <= 0 || model.ir_version >= 4) return;
  Graph& g = model.graph;
  std::vector<ValueInfo> inputs;
  for (ValueInfo& vi : g.inputs)
    if (!g.FindInitializer(vi.name)) inputs.push_back(std::move(vi));
  g.inputs = std::move(inputs);
}

}  // namespace

Result<std::unique_ptr<Session>> Session::CreateFromFile(const std::string& path, const SessionOptions& options) {
  const auto start = Phase::Clock::now();
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(path, ReadLimitsOf(options)));
  return CreateTimed(std::move(model), options, {{"model_loading_uri", start, Phase::Clock::now()}});
}

Result<std::unique_ptr<Session>> Session::CreateFromBytes(const void* data, size_t size,
                                                          const SessionOptions& options) {
  // A model from memory has no folder (no base_dir): external data is refused.
  const auto start = Phase::Clock::now();
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelBytes(MappedFile::FromBytes(data, size), ReadLimitsOf(options)));
  return CreateTimed(std::move(model), options, {{"model_loading_array", start, Phase::Clock::now()}});
}

Result<std::unique_ptr<Session>> Session::Create(Model model, const SessionOptions& options) {
  return CreateTimed(std::move(model), options, {});
}

Result<std::unique_ptr<Session>> Session::CreateTimed(Model model, const SessionOptions& options,
                                                      std::vector<Phase> phases) {
  // Each phase's start and end, for the profile (a few clock reads).
  const auto init_start = Phase::Clock::now();
  auto phase_start = init_start;
  auto end_phase = [&](const char* name) {
    const auto now = Phase::Clock::now();
    phases.push_back({name, phase_start, now});
    phase_start = now;
  };
  std::unique_ptr<Session> s(new Session());
  if (!options.custom_op_libraries.empty() || !options.custom_ops.empty()) {
    NEE_ASSIGN_OR_RETURN(s->custom_ops_, CustomOpSet::Create(options.custom_op_libraries, options.custom_ops));
    s->registry_ = &s->custom_ops_->registry();
    end_phase("custom_ops_loading");
  }
  s->options_ = options;
  s->model_ = std::make_unique<Model>(std::move(model));
  DetachSubgraphs(*s->model_);  // the caller's copies of the model share them
  NEE_RETURN_IF_ERROR(CheckModelFunctions(*s->model_, *s->registry_));
  NEE_RETURN_IF_ERROR(InlineModelFunctions(*s->model_, options.max_graph_nodes));
  DropInitializerInputsBeforeIr4(*s->model_);
  // Kernels and shape rules read absent attributes' declared defaults.
  BindAttrDeclarations(*s->model_);
  int64_t nodes = 0;
  NEE_RETURN_IF_ERROR(CheckGraphSize(s->model_->graph, options, 0, &nodes));
  end_phase("function_inlining");
  // The model as written is checked first (inside OptimizeModel, or here at
  // level 0), so errors refer to what the user wrote.
  // A model nee already optimized to this level (`nee optimize`) is only checked.
  const int recorded = RecordedOptimizationLevel(*s->model_);
  if (recorded < 0 || recorded < options.graph_optimization_level) {
    NEE_RETURN_IF_ERROR(OptimizeModel(*s->model_, options.graph_optimization_level, nullptr, s->registry_));
    BindAttrDeclarations(*s->model_);  // the nodes the passes wrote
    end_phase("graph_optimization");
  }
  NEE_ASSIGN_OR_RETURN(s->checked_, CheckModel(*s->model_, *s->registry_));
  for (const ValueInfo& out : s->model_->graph.outputs) {
    s->outputs_.push_back(out);
    auto inferred = s->checked_.types.find(out.name);
    s->outputs_.back().type =
        ReportedOutputType(out.type, inferred == s->checked_.types.end() ? nullptr : &inferred->second);
  }
  end_phase("model_check");

  int threads = options.intra_op_num_threads;
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  s->pool_ = std::make_unique<ThreadPool>(threads, options.allow_spinning);
  s->memory_limit_ = options.run_memory_limit_bytes < 0 ? DefaultRunMemoryLimit() : options.run_memory_limit_bytes;
  s->session_memory_ = std::make_shared<MemoryBudget>(
      options.session_memory_limit_bytes < 0 ? DefaultRunMemoryLimit() : options.session_memory_limit_bytes, nullptr,
      "the session's concurrent runs", "SessionOptions session memory limit");
  end_phase("thread_pool_creation");

  OpsetMap opsets = OpsetsOf(s->model_->opset_imports);
  NEE_ASSIGN_OR_RETURN(s->main_, GraphRunner::Build(s->model_->graph, s->checked_, opsets, nullptr, 0,
                                                    options.reference_kernels_only ? CpuProvider::ReferenceOnly()
                                                                                   : CpuProvider::Default(),
                                                    *s->registry_));
  // The runner's constants are all the session needs from here on: kernels
  // that pack a constant may drop it (see GraphRunner::EnableConstantDropping),
  // and the model keeps a data-less stand-in for shape checks of later runs.
  s->checked_.constants.clear();
  Session* session = s.get();
  s->main_->EnableConstantDropping([session](const std::string& name) {
    std::lock_guard<std::mutex> lock(session->constants_mu_);
    for (Initializer& init : session->model_->graph.initializers)
      if (init.name == name) init.tensor = Tensor::View(init.tensor.dtype(), init.tensor.dims(), nullptr, nullptr);
  });
  end_phase("execution_planning");

  const Graph& g = s->model_->graph;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (g.FindInitializer(g.inputs[i].name)) {  // an overridable default: not listed as an input, like ORT
      s->overridable_.push_back(g.inputs[i]);
      s->overridable_to_graph_input_.push_back(static_cast<int>(i));
      continue;
    }
    s->feedable_inputs_.push_back(g.inputs[i]);
    s->feedable_to_graph_input_.push_back(static_cast<int>(i));
  }
  if (options.enable_profiling) {
    // Time 0 of the trace is when making the session began (loading included).
    s->profiler_ = std::make_unique<Profiler>(phases.empty() ? init_start : phases.front().start);
    phases.push_back({"session_initialization", init_start, Phase::Clock::now()});
    for (const Phase& p : phases)
      s->profiler_->RecordSession(p.name, s->profiler_->Us(p.start), s->profiler_->Us(p.end) - s->profiler_->Us(p.start));
    s->profiling_.store(true);
  }
  return s;
}

namespace {
TypeInfo TypeOfValue(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return TypeInfo::Tensor(v.tensor().dtype(), ShapeFromDims(v.tensor().dims()));
    case Value::Kind::kSequence: return TypeInfo::Sequence(v.element_type());
    case Value::Kind::kNone: return TypeInfo::Optional(v.element_type());
    case Value::Kind::kMap: return TypeInfo::Map(v.map_keys().dtype(), TypeInfo::Tensor(v.map_values().dtype()));
    case Value::Kind::kEmpty: break;
  }
  return TypeInfo{};
}

// The plan cache's key: per input, a tensor of known dims as bytes (element
// type, rank, dims: no text to format on every run), any other type as its
// text with its length in front, so that no two signatures share a key.
template <typename T>
void AppendBytes(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void AppendSignature(std::string& key, DataType type, std::span<const int64_t> dims) {
  key += 'T';
  AppendBytes(key, static_cast<int32_t>(type));
  AppendBytes(key, static_cast<uint64_t>(dims.size()));
  key.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t));
}

void AppendSignature(std::string& key, const TypeInfo& t) {
  if (t.is_tensor() && t.shape &&
      std::all_of(t.shape->begin(), t.shape->end(), [](const Dim& d) { return d.known(); })) {
    std::vector<int64_t> dims;
    for (const Dim& d : *t.shape) dims.push_back(d.value);
    AppendSignature(key, t.elem_type, dims);
    return;
  }
  std::string text = t.ToString();
  if (t.shape) text += ShapeToString(*t.shape);
  key += 'X';
  AppendBytes(key, static_cast<uint64_t>(text.size()));
  key += text;
}

std::string SignatureKey(const std::vector<TypeInfo>& types) {
  std::string key;
  for (const TypeInfo& t : types) AppendSignature(key, t);
  return key;
}
}  // namespace

Status Session::ValidateInput(const ValueInfo& vi, Value& value) const {
  const TypeInfo& want = vi.type;
  auto label = [&vi] { return "input '" + vi.name + "'"; };  // for errors only: not spelled out on every run
  if (want.kind == TypeInfo::Kind::kTensor) {
    if (!value.is_tensor()) return InvalidArgument(label() + ": expected " + want.ToString() + ", got " + value.Describe());
    const Tensor& t = value.tensor();
    if (want.elem_type != DataType::kUndefined && t.dtype() != want.elem_type)
      return InvalidArgument(label() + ": expected element type " + DataTypeName(want.elem_type) + " (" +
                             DataTypeNumpyName(want.elem_type) + "), got " + DataTypeName(t.dtype()) + " (" +
                             DataTypeNumpyName(t.dtype()) + ")");
    if (want.shape && want.shape->empty() && !t.dims().empty()) {
      // A scalar input fed as a one-element tensor of any rank ([1], [1,1], ...),
      // as scripts written for ONNX Runtime do (np.array([7]) for a traced int):
      // the value is taken as the declared scalar, so every rule and kernel sees
      // the shape the model declares. ONNX Runtime checks no shape at all for a
      // declared scalar; a tensor of several or no elements is refused here.
      if (t.num_elements() != 1)
        return InvalidArgument(label() + ": expected a scalar (shape []; a one-element tensor such as [1] is "
                               "accepted too), got shape " + DimsToString(t.dims()) + " with " +
                               std::to_string(t.num_elements()) + " elements");
      NEE_ASSIGN_OR_RETURN(Tensor scalar, t.Reshaped({}));
      value = Value(std::move(scalar));
      return Status::Ok();
    }
    if (want.shape) {
      const Shape& s = *want.shape;
      bool ok = s.size() == t.dims().size();
      for (size_t d = 0; ok && d < s.size(); ++d) ok = !s[d].known() || s[d].value == t.dims()[d];
      if (!ok)
        return InvalidArgument(label() + ": expected shape " + ShapeToString(s) + ", got " + DimsToString(t.dims()));
    }
    return Status::Ok();
  }
  if (want.kind == TypeInfo::Kind::kSequence && !value.is_sequence())
    return InvalidArgument(label() + ": expected " + want.ToString() + ", got " + value.Describe());
  if (want.kind == TypeInfo::Kind::kMap && !value.is_map())
    return InvalidArgument(label() + ": expected " + want.ToString() + ", got " + value.Describe());
  return Status::Ok();
}

namespace {
// NEE_SHARE_BUFFERS=0 plans every value a block of its own (no views, no
// Concat parts in place): the reference the tests compare aliasing with.
MemoryPlanOptions MemoryPlanOptionsFromEnv() {
  MemoryPlanOptions options;
  const char* share = std::getenv("NEE_SHARE_BUFFERS");
  options.share_buffers = !(share && std::string(share) == "0");
  return options;
}
}  // namespace

Result<std::shared_ptr<Session::ShapePlan>> Session::PlanFor(const std::vector<TypeInfo>& input_types) const {
  std::string key = SignatureKey(input_types);
  if (std::shared_ptr<ShapePlan> plan = CachedPlan(key)) return plan;
  return MakePlan(std::move(key), input_types);
}

std::shared_ptr<Session::ShapePlan> Session::CachedPlan(const std::string& key) const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<Session::ShapePlan>> Session::MakePlan(std::string key,
                                                              const std::vector<TypeInfo>& input_types) const {
  auto plan = std::make_shared<ShapePlan>();
  CheckOptions options;
  options.input_types = &input_types;
  Result<CheckedGraph> checked = [&] {
    std::lock_guard<std::mutex> lock(constants_mu_);  // initializers may be dropped meanwhile
    return CheckModel(*model_, *registry_, options);
  }();
  if (!checked.ok()) return InvalidArgument(checked.status().message());
  plan->checked = std::move(checked).value();
  plan->memory = PlanMemory(main_->plan(), plan->checked.types, &plan->checked.constants, MemoryPlanOptionsFromEnv());
  plan->checked.constants.clear();  // only the types are needed: do not keep constants alive
  std::lock_guard<std::mutex> lock(plans_mu_);
  if (plans_.size() >= options_.max_cached_shape_plans) plans_.clear();  // bounded cache for many shapes
  return plans_.emplace(std::move(key), plan).first->second;
}

TypeInfo Session::DefaultInputType(size_t i) const {
  const ValueInfo& input = model_->graph.inputs[i];
  const Initializer* init = model_->graph.FindInitializer(input.name);
  return init ? TypeInfo::Tensor(init->tensor.dtype(), ShapeFromDims(init->tensor.dims())) : input.type;
}

Result<std::shared_ptr<Session::ShapePlan>> Session::PlanForInputs(const std::vector<Value>& graph_inputs) const {
  // The key straight from the values: their types are spelled out only when
  // no plan has them yet.
  std::string key;
  key.reserve(64);
  for (size_t i = 0; i < graph_inputs.size(); ++i) {
    const Value& v = graph_inputs[i];
    if (v.is_tensor()) AppendSignature(key, v.tensor().dtype(), v.tensor().dims());
    else AppendSignature(key, v.empty() ? DefaultInputType(i) : TypeOfValue(v));
  }
  if (std::shared_ptr<ShapePlan> plan = CachedPlan(key)) return plan;
  std::vector<TypeInfo> input_types;
  for (size_t i = 0; i < graph_inputs.size(); ++i)
    input_types.push_back(graph_inputs[i].empty() ? DefaultInputType(i) : TypeOfValue(graph_inputs[i]));
  return MakePlan(std::move(key), input_types);
}

Status Session::PlaceFeeds(const std::vector<NamedValue>& inputs, std::vector<Value>& graph_inputs) const {
  std::vector<bool> fed(graph_inputs.size(), false);
  auto find = [](const std::vector<ValueInfo>& list, const std::string& name) {
    size_t k = 0;
    while (k < list.size() && list[k].name != name) ++k;
    return k;
  };
  for (const NamedValue& nv : inputs) {
    const ValueInfo* vi = nullptr;
    int graph_index = -1;
    if (size_t k = find(feedable_inputs_, nv.name); k < feedable_inputs_.size()) {
      vi = &feedable_inputs_[k];
      graph_index = feedable_to_graph_input_[k];
    } else if (size_t o = find(overridable_, nv.name); o < overridable_.size()) {
      // Feeding an overridable initializer replaces its value for this run.
      vi = &overridable_[o];
      graph_index = overridable_to_graph_input_[o];
    } else {
      std::string names;
      for (const ValueInfo& in : feedable_inputs_) names += (names.empty() ? "" : ", ") + in.name;
      std::string defaults;
      for (const ValueInfo& in : overridable_) defaults += (defaults.empty() ? "" : ", ") + in.name;
      return InvalidArgument("'" + nv.name + "' is not an input of this model (inputs: " + names +
                             (defaults.empty() ? "" : "; overridable initializers: " + defaults) + ")");
    }
    if (fed[graph_index]) return InvalidArgument("input '" + nv.name + "' is given more than once");
    if (nv.value.empty()) return InvalidArgument("input '" + nv.name + "' has no value");
    Value value = nv.value;
    NEE_RETURN_IF_ERROR(ValidateInput(*vi, value));
    fed[graph_index] = true;
    graph_inputs[graph_index] = std::move(value);
  }
  for (size_t k = 0; k < feedable_inputs_.size(); ++k) {
    const int graph_index = feedable_to_graph_input_[k];
    if (fed[graph_index]) continue;
    // An optional-typed input may be left out.
    if (feedable_inputs_[k].type.kind == TypeInfo::Kind::kOptional) {
      graph_inputs[graph_index] = Value::None(*feedable_inputs_[k].type.inner);
      continue;
    }
    return InvalidArgument("input '" + feedable_inputs_[k].name + "' is required but was not given");
  }
  return Status::Ok();
}

Result<std::vector<Value>> Session::Run(const std::vector<NamedValue>& inputs,
                                        const std::vector<std::string>& output_names,
                                        const RunOptions* run_options) const {
  const Graph& g = model_->graph;
  std::vector<Value> graph_inputs(g.inputs.size());
  NEE_RETURN_IF_ERROR(PlaceFeeds(inputs, graph_inputs));

  std::vector<size_t> wanted;
  if (output_names.empty()) {
    for (size_t i = 0; i < g.outputs.size(); ++i) wanted.push_back(i);
  } else {
    for (const std::string& name : output_names) {
      size_t i = 0;
      while (i < g.outputs.size() && g.outputs[i].name != name) ++i;
      if (i == g.outputs.size()) return InvalidArgument("'" + name + "' is not an output of this model");
      wanted.push_back(i);
    }
  }

  NEE_ASSIGN_OR_RETURN(std::shared_ptr<ShapePlan> plan, PlanForInputs(graph_inputs));

  int64_t timeout_ms = run_options && run_options->timeout_ms > 0 ? run_options->timeout_ms : options_.run_timeout_ms;
  RunControl control(run_options ? run_options->terminate_flag() : nullptr, timeout_ms);
  RunEnv env;
  env.pool = pool_.get();
  env.control = &control;
  env.memory = std::make_shared<MemoryBudget>(memory_limit_, session_memory_);
  env.blocks = blocks_;
  if (profiling_.load(std::memory_order_relaxed)) env.profiler = profiler_.get();
  const int64_t run_start_us = env.profiler ? env.profiler->NowUs() : 0;
  auto arena_bytes = static_cast<int64_t>(plan->memory.arena_bytes);
  if (Status fits = env.memory->Reserve(arena_bytes); !fits.ok())
    return fits.WithContext("the memory plan's arena for these input shapes: ");
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> arena, plan->Acquire());
  std::vector<bool> run_nodes;
  if (run_options && run_options->only_execute_path_to_fetches) run_nodes = NodesNeededFor(main_->plan(), wanted);
  auto results = main_->Execute(std::move(graph_inputs), nullptr, &plan->memory, arena.get(), env,
                                run_nodes.empty() ? nullptr : &run_nodes);
  plan->Release(std::move(arena));
  env.memory->Release(arena_bytes);
  if (env.profiler) env.profiler->RecordSession("model_run", run_start_us, env.profiler->NowUs() - run_start_us);
  if (!results.ok()) return results.status();
  // Callers own their outputs and may write to them (Python hands them out as
  // writable arrays without a copy): an output that shares bytes — an
  // initializer, an input, an element taken out of a sequence, the same output
  // asked for twice — is copied.
  std::vector<Value>& all = results.value();
  std::vector<int> handed_out(all.size(), -1);  // where in `out` an output already went
  std::vector<Value> out;
  for (size_t i : wanted) {
    Value v = handed_out[i] >= 0 ? out[handed_out[i]] : std::move(all[i]);
    if (v.is_tensor() && !v.tensor().exclusively_owned()) {
      NEE_ASSIGN_OR_RETURN(Tensor copy, v.tensor().Clone());
      v = Value(std::move(copy));
    }
    if (handed_out[i] < 0) handed_out[i] = static_cast<int>(out.size());
    out.push_back(std::move(v));
  }
  return out;
}

Result<PlanReport> Session::ReportPlan(const std::vector<TypeInfo>& input_types) const {
  NEE_ASSIGN_OR_RETURN(std::shared_ptr<ShapePlan> plan, PlanFor(input_types));
  PlanReport r;
  r.num_nodes = main_->plan().nodes.size();
  r.num_values = main_->plan().num_slots();
  r.num_planned = plan->memory.num_planned;
  r.arena_bytes = plan->memory.arena_bytes;
  r.planned_bytes = plan->memory.planned_bytes;
  return r;
}

Result<std::string> Session::EndProfiling() {
  if (!profiling_.exchange(false)) return std::string();
  // ONNX Runtime's naming: prefix, then the date and time the trace was written.
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d_%H-%M-%S", &local);
  std::string path = options_.profile_file_prefix + "_" + stamp + ".json";
  NEE_RETURN_IF_ERROR(profiler_->WriteTrace(path));
  return path;
}

std::string Session::ProfileSummary() const { return profiler_ ? profiler_->Summary() : std::string(); }

}  // namespace nee
