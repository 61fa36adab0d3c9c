// Constant folding: a node whose inputs are all known before running
// (initializers, or outputs of nodes folded before it) is evaluated once with
// its kernel and replaced by an initializer holding the result. A Shape or
// Size of a tensor whose dims the model fixes is folded too (the checker
// computed its value from the inferred static shape), so the shape
// arithmetic after it folds with it.
#include <unordered_map>
#include <unordered_set>

#include "opt/pass_manager.h"

namespace nee {

namespace {
// Folding never grows the model by more than this per value.
constexpr int64_t kMaxFoldedBytes = int64_t{1} << 24;

bool IsFoldable(const Node& node, const OpSchema& schema) {
  if (!schema.kernel) return false;
  // Custom ops are opaque: their kernels run when the model runs, never here.
  if (schema.custom) return false;
  // Random generators must run every time; bodies need the run loop.
  static const std::unordered_set<std::string> kNever = {
      "RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial", "Bernoulli",
      "If", "Loop", "Scan", "SequenceMap"};
  if (kNever.count(node.op_type)) return false;
  for (const Attribute& a : node.attributes)
    if (a.g || !a.graphs.empty()) return false;
  return true;
}

// The value of a Shape / Size node's output when the checker could compute it
// from the input's inferred shape: every dim it reads is static in the model.
// The check here runs on the model's declared input types, never on a feed's
// shape, so a symbolic dim stays symbolic and its Shape stays a node. Not in
// a body: a Loop's carried values may change shape from one iteration to the
// next whatever the body's inputs declare.
const Tensor* StaticShapeValue(const Node& node, const CheckedGraph& checked) {
  if (checked.is_body) return nullptr;
  if (!node.domain.empty() && node.domain != "ai.onnx") return nullptr;
  if (node.op_type != "Shape" && node.op_type != "Size") return nullptr;
  if (node.outputs.size() != 1 || node.outputs[0].empty()) return nullptr;
  auto it = checked.constants.find(node.outputs[0]);
  return it == checked.constants.end() ? nullptr : &it->second;
}
}  // namespace

Status FoldConstants(Graph& graph, const CheckedGraph& checked, bool* changed) {
  std::unordered_map<std::string, Value> known;
  std::unordered_set<std::string> graph_inputs;
  for (const ValueInfo& vi : graph.inputs) graph_inputs.insert(vi.name);
  for (const Initializer& init : graph.initializers)
    if (!graph_inputs.count(init.name)) known.emplace(init.name, Value(init.tensor));
  // A subgraph body's captured names whose values its enclosing graphs fix
  // (their initializers; the optimizer puts those into `constants`).
  for (const std::string& name : checked.captured) {
    auto it = checked.constants.find(name);
    if (it != checked.constants.end()) known.emplace(name, Value(it->second));
  }
  std::unordered_set<std::string> graph_outputs;
  for (const ValueInfo& vi : graph.outputs) graph_outputs.insert(vi.name);

  std::vector<bool> folded(graph.nodes.size(), false);
  std::vector<Initializer> produced;
  for (size_t idx : checked.order) {
    const Node& node = graph.nodes[idx];
    if (const Tensor* value = StaticShapeValue(node, checked)) {
      folded[idx] = true;
      known[node.outputs[0]] = Value(*value);
      produced.push_back(Initializer{node.outputs[0], *value, ""});
      continue;
    }
    if (!IsFoldable(node, *checked.schemas[idx])) continue;
    std::vector<const Value*> inputs;
    bool all_known = true;
    for (const std::string& in : node.inputs) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = known.find(in);
      if (it == known.end()) {
        all_known = false;
        break;
      }
      inputs.push_back(&it->second);
    }
    if (!all_known) continue;
    std::vector<Value> outputs(node.outputs.size());
    KernelContext ctx(node, checked.opsets[idx], inputs, &outputs, nullptr, nullptr, nullptr);
    // A failure here is left for the run to report with the real inputs.
    if (!checked.schemas[idx]->kernel(ctx).ok()) continue;
    bool fits = true;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!node.HasOutput(k)) continue;
      fits = fits && outputs[k].is_tensor() && static_cast<int64_t>(outputs[k].tensor().byte_size()) <= kMaxFoldedBytes;
    }
    if (!fits) continue;
    folded[idx] = true;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!node.HasOutput(k)) continue;
      known[node.outputs[k]] = outputs[k];
      produced.push_back(Initializer{node.outputs[k], outputs[k].tensor(), ""});
    }
  }
  if (produced.empty()) {
    *changed = false;
    return Status::Ok();
  }
  // Keep folded values that are graph outputs as Identity-free initializers:
  // a graph output may name an initializer directly.
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (!folded[i]) kept.push_back(std::move(graph.nodes[i]));
  graph.nodes = std::move(kept);
  for (Initializer& init : produced) graph.initializers.push_back(std::move(init));
  *changed = true;
  return Status::Ok();
}

}  // namespace nee
