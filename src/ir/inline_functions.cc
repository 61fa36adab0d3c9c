#include "ir/inline_functions.h"

#include <unordered_map>

namespace nee {

namespace {
constexpr int kMaxInlineDepth = 32;
constexpr int64_t kMaxInlinedNodes = int64_t{1} << 26;  // when the caller sets no limit

class Inliner {
 public:
  Inliner(Model& model, int64_t max_nodes) : model_(model), max_nodes_(max_nodes) {}

  Status InlineGraph(Graph& graph, int depth) {
    if (depth > kMaxInlineDepth)
      return InvalidModel("model-local functions call each other more than " + std::to_string(kMaxInlineDepth) +
                          " levels deep (recursion?)");
    std::vector<Node> result;
    result.reserve(graph.nodes.size());
    for (Node& node : graph.nodes) {
      for (Attribute& a : node.attributes) {
        if (a.g) NEE_RETURN_IF_ERROR(InlineGraph(*a.g, depth));
        for (auto& g : a.graphs)
          if (g) NEE_RETURN_IF_ERROR(InlineGraph(*g, depth));
      }
      const Function* fn = model_.FindFunction(node.domain, node.op_type);
      if (!fn) {
        result.push_back(std::move(node));
        continue;
      }
      NEE_ASSIGN_OR_RETURN(std::vector<Node> body, Expand(node, *fn));
      // Functions calling a function twice, nested, double the graph at each
      // level: a small file could expand to billions of nodes.
      expanded_nodes_ += static_cast<int64_t>(body.size());
      if (expanded_nodes_ > max_nodes_)
        return InvalidModel(node.Describe() + ": expanding model-local functions would make more than " +
                            std::to_string(max_nodes_) + " nodes (SessionOptions max_graph_nodes)");
      Graph tmp;
      tmp.nodes = std::move(body);
      NEE_RETURN_IF_ERROR(InlineGraph(tmp, depth + 1));  // functions calling functions
      for (Node& n : tmp.nodes) result.push_back(std::move(n));
    }
    // Always: every node was moved into `result`, calls or not (replacing only
    // when something was expanded left a body without calls full of empty nodes).
    graph.nodes = std::move(result);
    return Status::Ok();
  }

 private:
  Result<std::vector<Node>> Expand(const Node& call, const Function& fn) {
    if (call.inputs.size() > fn.inputs.size() || call.outputs.size() > fn.outputs.size())
      return InvalidModel(call.Describe() + ": calls function '" + fn.name + "' with more inputs or outputs than it declares");
    std::string prefix = "_inl" + std::to_string(counter_++) + "_" + call.name + "/";
    std::unordered_map<std::string, std::string> rename;
    for (size_t i = 0; i < fn.inputs.size(); ++i) rename[fn.inputs[i]] = i < call.inputs.size() ? call.inputs[i] : "";
    for (size_t i = 0; i < fn.outputs.size(); ++i)
      rename[fn.outputs[i]] = i < call.outputs.size() ? call.outputs[i] : prefix + fn.outputs[i];
    auto map_name = [&](const std::string& n) -> std::string {
      if (n.empty()) return n;
      auto it = rename.find(n);
      if (it != rename.end()) return it->second;
      std::string fresh = prefix + n;
      rename.emplace(n, fresh);
      return fresh;
    };
    std::vector<Node> nodes;
    for (const Node& src : fn.nodes) {
      Node n = src;
      n.name = prefix + src.name;
      for (std::string& in : n.inputs) in = map_name(in);
      for (std::string& out : n.outputs) out = map_name(out);
      std::vector<Attribute> attrs;
      for (Attribute& a : n.attributes) {
        if (a.ref_attr_name.empty()) {
          if (a.g) RenameCaptured(*a.g, rename);
          for (auto& g : a.graphs)
            if (g) RenameCaptured(*g, rename);
          attrs.push_back(std::move(a));
          continue;
        }
        const Attribute* given = call.FindAttr(a.ref_attr_name);
        const Attribute* fallback = nullptr;
        for (const Attribute& d : fn.attribute_defaults)
          if (d.name == a.ref_attr_name) fallback = &d;
        const Attribute* source = given ? given : fallback;
        if (!source) continue;  // unset optional attribute: the op's default applies
        Attribute copy = *source;
        copy.name = a.name;
        copy.ref_attr_name.clear();
        attrs.push_back(std::move(copy));
      }
      n.attributes = std::move(attrs);
      nodes.push_back(std::move(n));
    }
    for (const OpsetImport& o : fn.opset_imports)
      if (model_.OpsetVersion(o.domain) < 0) model_.opset_imports.push_back(o);
    return nodes;
  }

  // Names a body reads from the function's scope follow the renaming.
  static void RenameCaptured(Graph& g, const std::unordered_map<std::string, std::string>& rename) {
    std::unordered_map<std::string, bool> local;
    for (const ValueInfo& vi : g.inputs) local[vi.name] = true;
    for (const Initializer& i : g.initializers) local[i.name] = true;
    for (const Node& n : g.nodes)
      for (const std::string& o : n.outputs) local[o] = true;
    auto fix = [&](std::string& name) {
      if (name.empty() || local.count(name)) return;
      auto it = rename.find(name);
      if (it != rename.end()) name = it->second;
    };
    for (Node& n : g.nodes) {
      for (std::string& in : n.inputs) fix(in);
      for (Attribute& a : n.attributes) {
        if (a.g) RenameCaptured(*a.g, rename);
        for (auto& sg : a.graphs)
          if (sg) RenameCaptured(*sg, rename);
      }
    }
    for (ValueInfo& vi : g.outputs) fix(vi.name);
  }

  Model& model_;
  const int64_t max_nodes_;
  int64_t expanded_nodes_ = 0;
  int64_t counter_ = 0;
};
}  // namespace

Status InlineModelFunctions(Model& model, int64_t max_nodes) {
  if (model.functions.empty()) return Status::Ok();
  return Inliner(model, max_nodes > 0 ? max_nodes : kMaxInlinedNodes).InlineGraph(model.graph, 0);
}

}  // namespace nee
