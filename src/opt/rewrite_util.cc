#include "opt/rewrite_util.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace nee::opt {

GraphEditor::GraphEditor(Graph& graph, const CheckedGraph& checked)
    : graph_(graph), checked_(checked), removed_(graph.nodes.size(), false) {
  std::unordered_set<std::string> graph_inputs;
  for (const ValueInfo& vi : graph.inputs) {
    graph_inputs.insert(vi.name);
    names_.insert(vi.name);
  }
  for (size_t i = 0; i < graph.initializers.size(); ++i) {
    const std::string& name = graph.initializers[i].name;
    names_.insert(name);
    if (graph_inputs.count(name)) overridable_.insert(name);
    initializer_index_.emplace(name, i);
  }
  for (const ValueInfo& vi : graph.outputs) pinned_.insert(vi.name);
  for (const auto& captured : checked.implicit_inputs)
    for (const std::string& name : captured) pinned_.insert(name);
  for (const std::string& name : checked.captured) pinned_.insert(name);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (!node.inputs[k].empty()) AddUse(node.inputs[k], Use{n, k});
    for (const std::string& out : node.outputs) {
      if (out.empty()) continue;
      producer_.emplace(out, n);
      names_.insert(out);
    }
  }
}

void GraphEditor::AddUse(const std::string& name, Use use) { uses_[name].push_back(use); }

void GraphEditor::DropUse(const std::string& name, Use use) {
  auto it = uses_.find(name);
  if (it == uses_.end()) return;
  auto& list = it->second;
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const Use& u) { return u.node == use.node && u.input == use.input; }),
             list.end());
}

int64_t GraphEditor::Producer(const std::string& name) const {
  auto it = producer_.find(name);
  if (it == producer_.end() || removed_[it->second]) return -1;
  return static_cast<int64_t>(it->second);
}

std::vector<Use> GraphEditor::Uses(const std::string& name) const {
  auto it = uses_.find(name);
  if (it == uses_.end()) return {};
  std::vector<Use> live;
  for (const Use& u : it->second)
    if (!removed_[u.node]) live.push_back(u);
  return live;
}

bool GraphEditor::IsPinned(const std::string& name) const { return pinned_.count(name) > 0; }

bool GraphEditor::OnlyUsedBy(const std::string& name, size_t consumer) const {
  if (IsPinned(name)) return false;
  std::vector<Use> uses = Uses(name);
  return uses.size() == 1 && uses[0].node == consumer;
}

Tensor GraphEditor::Constant(const std::string& name) const {
  if (name.empty() || overridable_.count(name)) return Tensor();
  auto it = initializer_index_.find(name);
  if (it == initializer_index_.end()) return Tensor();
  return graph_.initializers[it->second].tensor;
}

const TypeInfo* GraphEditor::TensorType(const std::string& name) const {
  auto it = checked_.types.find(name);
  if (it == checked_.types.end() || !it->second.is_tensor()) return nullptr;
  return &it->second;
}

void GraphEditor::SetInput(size_t n, size_t input, const std::string& name) {
  Node& node = graph_.nodes[n];
  if (input >= node.inputs.size()) node.inputs.resize(input + 1);
  if (!node.inputs[input].empty()) DropUse(node.inputs[input], Use{n, input});
  node.inputs[input] = name;
  if (!name.empty()) AddUse(name, Use{n, input});
  changed_ = true;
}

void GraphEditor::ReplaceUses(const std::string& from, const std::string& to) {
  for (const Use& u : Uses(from)) SetInput(u.node, u.input, to);
}

void GraphEditor::RenameOutput(size_t n, size_t output, const std::string& name) {
  Node& node = graph_.nodes[n];
  std::string old = node.outputs[output];
  node.outputs[output] = name;
  producer_.erase(old);
  producer_[name] = n;
  names_.insert(name);
  ReplaceUses(old, name);
  changed_ = true;
}

void GraphEditor::RemoveNode(size_t n) {
  if (removed_[n]) return;
  const Node& node = graph_.nodes[n];
  for (size_t k = 0; k < node.inputs.size(); ++k)
    if (!node.inputs[k].empty()) DropUse(node.inputs[k], Use{n, k});
  removed_[n] = true;
  changed_ = true;
}

void GraphEditor::SetOutput(size_t n, size_t output, const std::string& name) {
  Node& node = graph_.nodes[n];
  if (output >= node.outputs.size()) node.outputs.resize(output + 1);
  node.outputs[output] = name;
  producer_[name] = n;
  names_.insert(name);
  changed_ = true;
}

void GraphEditor::RewriteAs(size_t n, const std::string& domain, const std::string& op_type,
                          const std::vector<std::string>& inputs, std::vector<Attribute> attributes) {
  Node& node = graph_.nodes[n];
  for (size_t k = 0; k < node.inputs.size(); ++k)
    if (!node.inputs[k].empty()) DropUse(node.inputs[k], Use{n, k});
  node.domain = domain;
  node.op_type = op_type;
  node.inputs = inputs;
  node.attributes = std::move(attributes);
  for (size_t k = 0; k < node.inputs.size(); ++k)
    if (!node.inputs[k].empty()) AddUse(node.inputs[k], Use{n, k});
  changed_ = true;
}

std::string GraphEditor::FreshName(const std::string& hint) {
  std::string name = hint;
  for (int suffix = 1; names_.count(name); ++suffix) name = hint + "_" + std::to_string(suffix);
  names_.insert(name);
  return name;
}

void GraphEditor::InsertBefore(size_t anchor, Node node) {
  before_[anchor].push_back(std::move(node));
  changed_ = true;
}

void GraphEditor::InsertAfter(size_t anchor, Node node) {
  after_[anchor].push_back(std::move(node));
  changed_ = true;
}

std::string GraphEditor::AddInitializer(const std::string& hint, Tensor tensor) {
  const std::string name = FreshName(hint);
  initializer_index_.emplace(name, graph_.initializers.size());
  graph_.initializers.push_back(Initializer{name, std::move(tensor), ""});
  changed_ = true;
  return name;
}

bool GraphEditor::Commit() {
  if (!changed_) return false;
  std::vector<Node> kept;
  kept.reserve(graph_.nodes.size());
  auto take = [&](std::unordered_map<size_t, std::vector<Node>>& inserted, size_t i) {
    auto it = inserted.find(i);
    if (it == inserted.end()) return;
    for (Node& node : it->second) kept.push_back(std::move(node));
  };
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    take(before_, i);
    if (!removed_[i]) kept.push_back(std::move(graph_.nodes[i]));
    take(after_, i);
  }
  graph_.nodes = std::move(kept);
  before_.clear();
  after_.clear();
  removed_.assign(graph_.nodes.size(), false);
  return true;
}

Node CastNode(const std::string& name, const std::string& input, const std::string& output, DataType to) {
  return MakeNode(name, "Cast", {input}, {output}, {IntAttr("to", static_cast<int64_t>(to))});
}

Node MakeNode(const std::string& name, const char* op, std::vector<std::string> inputs,
              std::vector<std::string> outputs, std::vector<Attribute> attrs) {
  Node node;
  node.name = name;
  node.op_type = op;
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
  node.attributes = std::move(attrs);
  return node;
}

bool GraphEditor::CommitDroppingInitializers(const std::vector<std::string>& candidates) {
  std::unordered_set<std::string> unused;
  for (const std::string& name : candidates)
    if (Uses(name).empty() && !IsPinned(name)) unused.insert(name);
  const bool changed = Commit();
  auto& inits = graph_.initializers;
  inits.erase(std::remove_if(inits.begin(), inits.end(), [&](const Initializer& i) { return unused.count(i.name); }),
              inits.end());
  return changed || !unused.empty();
}

bool IsFloatWithRank(const TypeInfo* type) {
  return type && type->is_tensor() && type->elem_type == DataType::kFloat && type->shape.has_value();
}

bool StaticDims(const TypeInfo* type, std::vector<int64_t>* dims) {
  return type && type->is_tensor() && type->shape && ShapeIsStatic(*type->shape, dims);
}

bool ProvablySameShape(const TypeInfo* a, const TypeInfo* b, DataType elem) {
  auto typed = [elem](const TypeInfo* t) {
    return t && t->is_tensor() && t->elem_type == elem && t->shape.has_value();
  };
  if (!typed(a) || !typed(b) || *a->shape != *b->shape) return false;
  for (const Dim& d : *a->shape)
    if (!d.known() && d.symbol.empty()) return false;
  return true;
}

bool IsOp(const Node& node, const char* op_type) {
  return node.op_type == op_type && NormalizeDomain(node.domain).empty();
}

bool HasOtherAttributes(const Node& node, const std::vector<std::string>& allowed) {
  for (const Attribute& a : node.attributes)
    if (std::find(allowed.begin(), allowed.end(), a.name) == allowed.end()) return true;
  return false;
}

int64_t SoleConsumer(const GraphEditor& ed, const std::string& name) {
  if (ed.IsPinned(name)) return -1;
  std::vector<Use> uses = ed.Uses(name);
  return uses.size() == 1 ? static_cast<int64_t>(uses[0].node) : -1;
}

bool IsBinary(const GraphEditor& ed, int64_t index, const char* op) {
  if (index < 0) return false;
  const Node& n = ed.node(static_cast<size_t>(index));
  return IsOp(n, op) && n.inputs.size() == 2 && n.outputs.size() == 1 && n.attributes.empty() &&
         ed.checked().opsets[static_cast<size_t>(index)] >= 7;
}

std::string OtherInput(const Node& node, const std::string& known) {
  if (node.inputs[0] == known) return node.inputs[1] == known ? "" : node.inputs[1];
  return node.inputs[1] == known ? node.inputs[0] : "";
}

bool ScalarConstant(const GraphEditor& ed, const std::string& name, float* value) {
  Tensor t = ed.Constant(name);
  if (!IsFloatTensor(t) || t.num_elements() != 1) return false;
  *value = t.data<float>()[0];
  return true;
}

bool NearlyEqual(double a, double b, double tolerance) {
  return std::fabs(a - b) <= tolerance * std::max(std::fabs(a), std::fabs(b));
}

Attribute StringAttr(const std::string& name, const std::string& value) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kString;
  a.s = value;
  return a;
}

Attribute IntAttr(const std::string& name, int64_t value) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kInt;
  a.i = value;
  return a;
}

Attribute IntsAttr(const std::string& name, std::vector<int64_t> values) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kInts;
  a.ints = std::move(values);
  return a;
}

Attribute FloatAttr(const std::string& name, float value) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloat;
  a.f = value;
  return a;
}

Attribute FloatsAttr(const std::string& name, std::vector<float> values) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloats;
  a.floats = std::move(values);
  return a;
}

}  // namespace nee::opt
