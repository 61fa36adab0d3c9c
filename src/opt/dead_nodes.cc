// Dead-code removal: nodes none of whose outputs reach a graph output.
#include <unordered_set>

#include "opt/pass_manager.h"

namespace nee {

Status EliminateDeadNodes(Graph& graph, const CheckedGraph& checked, bool* changed) {
  // Walk backwards from the graph outputs; keep nodes that feed them
  // (directly, or through values their subgraphs capture).
  std::unordered_set<std::string> live;
  for (const ValueInfo& vi : graph.outputs) live.insert(vi.name);
  std::vector<bool> keep(graph.nodes.size(), false);
  for (auto it = checked.order.rbegin(); it != checked.order.rend(); ++it) {
    const Node& node = graph.nodes[*it];
    bool needed = false;
    for (const std::string& o : node.outputs) needed = needed || (!o.empty() && live.count(o));
    if (!needed) continue;
    keep[*it] = true;
    for (const std::string& in : node.inputs) live.insert(in);
    for (const std::string& c : checked.implicit_inputs[*it]) live.insert(c);
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(graph.nodes[i]));
  *changed = kept.size() != graph.nodes.size();
  graph.nodes = std::move(kept);
  // Initializers nobody reads any more (e.g. after folding) are dropped too.
  std::unordered_set<std::string> used(live.begin(), live.end());
  for (const ValueInfo& vi : graph.inputs) used.insert(vi.name);
  std::vector<Initializer> inits;
  for (Initializer& init : graph.initializers)
    if (used.count(init.name)) inits.push_back(std::move(init));
  *changed = *changed || inits.size() != graph.initializers.size();
  graph.initializers = std::move(inits);
  return Status::Ok();
}

}  // namespace nee
