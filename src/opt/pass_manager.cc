#include "opt/pass_manager.h"

#include <optional>

#include "ops/attr_spec.h"

namespace nee {

namespace {
// Fusions write com.microsoft ops and nee's own (ai.nee), version 1 of each;
// a model that did not use such a domain gets its import here, so that the
// checker resolves them.
void ImportDomainIfUsed(Model& model, const char* domain) {
  if (model.OpsetVersion(domain) >= 0) return;
  for (const Node& node : model.graph.nodes) {
    if (node.domain == domain) {
      model.opset_imports.push_back({domain, 1});
      return;
    }
  }
}

void ImportFusionDomainsIfUsed(Model& model) {
  ImportDomainIfUsed(model, "com.microsoft");
  ImportDomainIfUsed(model, "ai.nee");
}

const GraphPass kPasses[] = {
    {"fold-constants", 1, FoldConstants},
    {"eliminate-dead-nodes", 1, EliminateDeadNodes},
    {"eliminate-noops", 2, EliminateNoOps},
    {"fold-conv-batchnorm", 2, FoldConvBatchNorm},
    {"fold-conv-add-mul", 2, FoldConvAddMul},
    {"fuse-matmul-add-gemm", 2, FuseMatMulAddIntoGemm},
    {"fold-transpose-gemm", 2, FoldTransposeIntoGemm},
    // After the folds above, so that Conv + BatchNormalization + Relu becomes one node.
    {"fuse-conv-activation", 2, FuseConvActivation},
    // After MatMul + Add -> Gemm, which then keeps its bias (BiasGelu takes it only otherwise).
    {"fuse-gelu", 2, FuseGelu},
    {"fuse-skip-layer-norm", 2, FuseSkipLayerNorm},
    {"fuse-attention", 2, FuseAttention},
    // After fuse-gelu and fuse-skip-layer-norm, whose ops it takes in (or leaves a bias to).
    {"fuse-matmul-bias", 2, FuseMatMulBias},
    // After fuse-conv-activation: runs of pointwise and depthwise convs, with
    // their activations and residuals, into the channel-blocked layout.
    {"block-conv-layout", 2, BlockConvLayout},
    // The Reshapes around a fused attention that now keep their input's shape.
    {"eliminate-noops", 2, EliminateNoOps},
    // Initializers the folds above replaced.
    {"eliminate-dead-nodes", 2, EliminateDeadNodes},
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

Status OptimizeModel(Model& model, int level, std::vector<PassReport>* report, const OpRegistry* registry) {
  const OpRegistry& ops = registry ? *registry : OpRegistry::Global();
  // The first check reports problems in the model as the user wrote it; later
  // ones only run after a pass changed something.
  std::optional<CheckedGraph> checked;
  // Extended passes are a speed-up, never a reason to fail: a pass whose
  // rewrite does not check is undone from this copy of the graph as it was
  // before the pass. The copy stays valid while passes leave the graph as it
  // is, so it is taken again only after a pass changed something (copying a
  // graph with large attributes, e.g. a 500-tree ensemble, for each of a
  // dozen passes cost half of such a session's creation).
  std::optional<Graph> before;
  for (const GraphPass& pass : kPasses) {
    if (pass.level > level) continue;
    // Constant folding runs kernels, which read absent attributes' declared
    // defaults; nodes an earlier pass wrote are bound here too.
    BindAttrDeclarations(model);
    if (!checked) {
      NEE_ASSIGN_OR_RETURN(CheckedGraph fresh, CheckModel(model, ops));
      checked = std::move(fresh);
    }
    const size_t imports_before = model.opset_imports.size();
    const bool undoable = pass.level >= 2;
    if (undoable && !before) before = model.graph;
    bool changed = false;
    PassReport entry{pass.name, pass.level, model.graph.nodes.size(), 0, false, false};
    auto record = [&](bool undone) {
      entry.changed = changed && !undone;
      entry.undone = undone;
      entry.nodes_after = model.graph.nodes.size();
      if (report) report->push_back(entry);
    };
    auto undo = [&] {
      model.graph = std::move(*before);
      before.reset();
      model.opset_imports.resize(imports_before);
      record(true);
    };
    Status st = pass.run(model.graph, *checked, &changed);
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
    BindAttrDeclarations(model);
    Result<CheckedGraph> rechecked = CheckModel(model, ops);
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

}  // namespace nee
