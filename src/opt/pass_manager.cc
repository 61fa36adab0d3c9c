#include "opt/pass_manager.h"

#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ops/attr_spec.h"
#include "opt/column_map_passes.h"

namespace nee {

namespace {
// Fusions write com.microsoft ops and nee's own (ai.nee), version 1 of each;
// a model that did not use such a domain gets its import here, so that the
// checker resolves them.
bool UsesDomain(const Graph& graph, const char* domain) {
  for (const Node& node : graph.nodes) {
    if (node.domain == domain) return true;
    for (const Graph* body : BodiesOf(node))
      if (UsesDomain(*body, domain)) return true;
  }
  return false;
}

void ImportDomainIfUsed(Model& model, const char* domain) {
  if (model.OpsetVersion(domain) < 0 && UsesDomain(model.graph, domain)) model.opset_imports.push_back({domain, 1});
}

void ImportFusionDomainsIfUsed(Model& model) {
  ImportDomainIfUsed(model, "com.microsoft");
  ImportDomainIfUsed(model, "ai.nee");
}

const GraphPass kPasses[] = {
    // Element-wise chains from one 8-bit tensor to another as one table: before fuse-qdq-conv, which would
    // make a QDQ SiLU's Mul a QLinearMul (rounding once, where the table is the chain's result bit for bit).
    {"fuse-byte-table", 2, FuseByteTable},
    // Before constant folding, which would dequantize the int8 weights into float ones.
    {"fuse-qdq-conv", 2, FuseQdqConv},
    {"fold-constants", 1, FoldConstants},
    {"eliminate-dead-nodes", 1, EliminateDeadNodes},
    // Before the float fusions below, which then see float32 nodes.
    {"widen-narrow-float", 2, WidenNarrowFloat},
    {"eliminate-noops", 2, EliminateNoOps},
    {"fold-conv-affine", 2, FoldConvAffine},
    // Before MatMul + Add -> Gemm: it rewrites a MatMul.
    {"one-hot-matmul-as-gather", 2, OneHotMatMulAsGather},
    {"fuse-matmul-add-gemm", 2, FuseMatMulAddIntoGemm},
    {"fold-transpose-gemm", 2, FoldTransposeIntoGemm},
    // Before fuse-conv-activation, which then takes the residual and activation after the fused op.
    {"fuse-quant-conv", 2, FuseQuantConv},
    // Before fuse-conv-activation, which then folds the activation it moved into the Conv.
    {"hoist-activation-to-conv", 2, HoistActivationToConv},
    // After the folds above, so that Conv + BatchNormalization + Relu becomes one node.
    {"fuse-conv-activation", 2, FuseConvActivation},
    // After it: a written-out HardSwish's "/ 6" before a Conv is the HardSwish's, not a scale to fold.
    {"fold-conv-input-affine", 2, FoldConvInputAffine},
    // Before fuse-gelu and fuse-skip-layer-norm: the bias goes into the GEMM's epilogue.
    {"fuse-quant-matmul", 2, FuseQuantMatMul},
    // After MatMul + Add -> Gemm, which then keeps its bias (BiasGelu takes it only otherwise).
    {"fuse-gelu", 2, FuseGelu},
    // Before fuse-skip-layer-norm, which may then take a residual Add into the op it makes.
    {"fuse-layer-norm", 2, FuseLayerNorm},
    {"fuse-skip-layer-norm", 2, FuseSkipLayerNorm},
    {"fuse-attention", 2, FuseAttention},
    // After fuse-gelu and fuse-skip-layer-norm, whose ops it takes in (or leaves a bias to).
    {"fuse-matmul-bias", 2, FuseMatMulBias},
    // A detector head's box decode: after hoist-activation-to-conv took its Sigmoid into the head Conv.
    {"fuse-transpose-column-map", 2, FuseTransposeColumnMap},
    // After the fusions, so that it moves above the fused nodes.
    {"gather-rows-early", 2, GatherRowsEarly},
    // After fuse-conv-activation: runs of pointwise and depthwise convs, with
    // their activations and residuals, into the channel-blocked layout.
    {"block-conv-layout", 2, BlockConvLayout},
    // The Reshapes around a fused attention that now keep their input's shape.
    {"eliminate-noops", 2, EliminateNoOps},
    // Initializers the folds above replaced (and the FromBlocked nodes no one reads).
    {"eliminate-dead-nodes", 2, EliminateDeadNodes},
    // After the layout pass and the dead FromBlocked after each blocked conv are gone.
    {"fuse-blocked-expand-depthwise", 2, FuseBlockedExpandDepthwise},
};
}  // namespace

int RecordedOptimizationLevel(const Model& model) {
  for (const auto& [key, value] : model.metadata_props) {
    if (key != kOptimizedLevelKey) continue;
    if (value.empty() || value.size() > 3 || value.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::stoi(value);
  }
  return -1;
}

namespace {

// One graph's pass loop. `check` checks the graph as it now is (the whole
// model for the main graph; a body within its enclosing scope). `where`
// names a subgraph ("" for the main graph): a body's passes are all undoable
// (a body left unoptimized still runs) and only its changes are reported.
struct PassTarget {
  Graph& graph;
  std::function<Result<CheckedGraph>()> check;
  std::string where;
};

Status RunPasses(Model& model, const PassTarget& target, int level, std::vector<PassReport>* report,
                 std::optional<CheckedGraph>* final_check) {
  const bool body = !target.where.empty();
  // The first check reports problems in the model as the user wrote it; later
  // ones only run after a pass changed something.
  std::optional<CheckedGraph>& checked = *final_check;
  // Extended passes are a speed-up, never a reason to fail: a pass whose
  // rewrite does not check is undone from this copy of the graph as it was
  // before the pass. The copy stays valid while passes leave the graph as it
  // is, so it is taken again only after a pass changed something (copying a
  // graph with large attributes, e.g. a 500-tree ensemble, for each of a
  // dozen passes cost half of such a session's creation).
  std::optional<Graph> before;
  // Constant folding runs kernels, which read absent attributes' declared
  // defaults: nodes are bound to their declarations first, and again after
  // a pass wrote new ones (binding the whole model for each pass on each of
  // silero-vad's 40 bodies took half its session creation).
  BindAttrDeclarations(target.graph, model.opset_imports);
  for (const GraphPass& pass : kPasses) {
    if (pass.level > level) continue;
    if (!checked) {
      NEE_ASSIGN_OR_RETURN(CheckedGraph fresh, target.check());
      checked = std::move(fresh);
    }
    const size_t imports_before = model.opset_imports.size();
    const bool undoable = body || pass.level >= 2;
    if (undoable && !before) before = target.graph;
    bool changed = false;
    PassReport entry{pass.name, pass.level, target.graph.nodes.size(), 0, false, false, target.where};
    auto record = [&](bool undone) {
      entry.changed = changed && !undone;
      entry.undone = undone;
      entry.nodes_after = target.graph.nodes.size();
      if (report && (!body || entry.changed || undone)) report->push_back(entry);
    };
    auto undo = [&] {
      target.graph = std::move(*before);
      before.reset();
      model.opset_imports.resize(imports_before);
      record(true);
    };
    Status st = pass.run(target.graph, *checked, &changed);
    if (!st.ok() && undoable) {
      undo();
      continue;
    }
    if (!st.ok()) return st.WithContext(std::string("optimization pass ") + pass.name + ": ");
    if (!changed) {
      record(false);
      continue;
    }
    ImportFusionDomainsIfUsed(model);
    BindAttrDeclarations(target.graph, model.opset_imports);
    Result<CheckedGraph> rechecked = target.check();
    if (rechecked.ok()) {
      checked = std::move(rechecked.value());
      before.reset();
      record(false);
    } else if (undoable) {
      undo();
    } else {
      before.reset();
      record(false);
      checked.reset();  // the next pass's check reports the problem
    }
  }
  return Status::Ok();
}

// The check RunPasses left (none after an undone last pass), or a fresh one.
Status EnsureChecked(const PassTarget& target, std::optional<CheckedGraph>& checked) {
  if (checked) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(CheckedGraph fresh, target.check());
  checked = std::move(fresh);
  return Status::Ok();
}

// Enclosing graphs' initializers a body may read: fixed values (a body's
// own inputs are formal, and only the main graph's initializers that are
// not also inputs count), so constant folding inside the body may use them.
using KnownOuterValues = std::unordered_map<std::string, const Tensor*>;

void AddFixedInitializers(const Graph& graph, KnownOuterValues& known) {
  // A name this graph defines otherwise hides an outer value of that name
  // from the bodies inside it; an initializer that is also an input is an
  // overridable default, not fixed.
  for (const ValueInfo& vi : graph.inputs) known.erase(vi.name);
  for (const Node& node : graph.nodes)
    for (const std::string& o : node.outputs) known.erase(o);
  std::unordered_set<std::string> inputs;
  for (const ValueInfo& vi : graph.inputs) inputs.insert(vi.name);
  for (const Initializer& init : graph.initializers)
    if (!inputs.count(init.name)) known[init.name] = &init.tensor;
}

Status OptimizeBodies(Model& model, Graph& graph, const CheckedGraph& checked, const TypeScope* outer,
                      KnownOuterValues known, int level, int depth, const OpRegistry& ops,
                      std::vector<PassReport>* report);

// One body, copied first (the model's bodies may be shared with other copies
// of it), optimized within `scope`, then its own bodies, within the scope of
// the body as optimized: what its folding made constant (silero-vad's LSTM
// weights, Constant nodes of the outer branch) is known to them.
Status OptimizeBody(Model& model, std::shared_ptr<Graph>& slot, const std::string& where, const TypeScope& scope,
                    const KnownOuterValues& known, int level, int depth, const OpRegistry& ops,
                    std::vector<PassReport>* report) {
  auto body = std::make_shared<Graph>(*slot);
  auto check = [&model, &ops, &scope, &known, depth, graph = body.get()]() -> Result<CheckedGraph> {
    NEE_ASSIGN_OR_RETURN(CheckedGraph c,
                         CheckGraph(*graph, OpsetsOf(model.opset_imports), ops, &scope, CheckOptions{}, depth));
    for (const std::string& name : c.captured) {
      auto it = known.find(name);
      if (it != known.end()) c.constants.emplace(name, *it->second);
    }
    return c;
  };
  // A body that does not check on its own (an If branch valid only under
  // types its node's rule gives it) is left as it is.
  std::optional<CheckedGraph> checked;
  {
    Result<CheckedGraph> first = check();
    if (!first.ok()) return Status::Ok();
    checked = std::move(first).value();
  }
  slot = body;
  const PassTarget target{*body, check, where};
  if (!RunPasses(model, target, level, report, &checked).ok() || !EnsureChecked(target, checked).ok())
    return Status::Ok();  // the body keeps what the passes left it
  KnownOuterValues inner = known;
  AddFixedInitializers(*body, inner);
  return OptimizeBodies(model, *body, *checked, &scope, std::move(inner), level, depth, ops, report);
}

Status OptimizeBodies(Model& model, Graph& graph, const CheckedGraph& checked, const TypeScope* outer,
                      KnownOuterValues known, int level, int depth, const OpRegistry& ops,
                      std::vector<PassReport>* report) {
  if (depth >= 16) return Status::Ok();  // deeper bodies run as written
  const TypeScope scope{outer, &checked.types, &checked.constants};
  for (Node& node : graph.nodes) {
    for (Attribute& a : node.attributes) {
      const std::string where = node.Describe() + " attribute '" + a.name + "'";
      if (a.g) NEE_RETURN_IF_ERROR(OptimizeBody(model, a.g, where, scope, known, level, depth + 1, ops, report));
      for (std::shared_ptr<Graph>& g : a.graphs)
        if (g) NEE_RETURN_IF_ERROR(OptimizeBody(model, g, where, scope, known, level, depth + 1, ops, report));
    }
  }
  return Status::Ok();
}

// The main graph's bodies as they were, to put back if the optimized model
// as a whole does not check.
std::vector<std::pair<std::shared_ptr<Graph>*, std::shared_ptr<Graph>>> TopLevelBodies(Graph& graph) {
  std::vector<std::pair<std::shared_ptr<Graph>*, std::shared_ptr<Graph>>> slots;
  for (Node& node : graph.nodes)
    for (Attribute& a : node.attributes) {
      if (a.g) slots.emplace_back(&a.g, a.g);
      for (std::shared_ptr<Graph>& g : a.graphs)
        if (g) slots.emplace_back(&g, g);
    }
  return slots;
}

}  // namespace

Status OptimizeModel(Model& model, int level, std::vector<PassReport>* report, const OpRegistry* registry) {
  const OpRegistry& ops = registry ? *registry : OpRegistry::Global();
  std::optional<CheckedGraph> checked;
  auto check_model = [&]() { return CheckModel(model, ops); };
  const PassTarget main{model.graph, check_model, ""};
  NEE_RETURN_IF_ERROR(RunPasses(model, main, level, report, &checked));
  // Subgraph bodies (If branches, Loop and Scan bodies) get the same passes,
  // each within the scope of the graph holding it: a branch's constants fold
  // and its weights become initializers that kernels prepare once.
  auto original = TopLevelBodies(model.graph);
  if (original.empty() || level < 1) return Status::Ok();
  NEE_RETURN_IF_ERROR(EnsureChecked(main, checked));
  KnownOuterValues known;
  AddFixedInitializers(model.graph, known);
  NEE_RETURN_IF_ERROR(OptimizeBodies(model, model.graph, *checked, nullptr, std::move(known), level, 0, ops, report));
  BindAttrDeclarations(model);
  if (!CheckModel(model, ops).ok()) {
    for (auto& [slot, body] : original) *slot = body;
    BindAttrDeclarations(model);
  }
  return Status::Ok();
}

}  // namespace nee
