#include "plan/execution_plan.h"

namespace nee {

namespace {
int SlotFor(ExecutionPlan& plan, const std::string& name) {
  auto it = plan.slot_of.find(name);
  if (it != plan.slot_of.end()) return it->second;
  int slot = static_cast<int>(plan.slot_names.size());
  plan.slot_names.push_back(name);
  plan.slot_of.emplace(name, slot);
  return slot;
}
}  // namespace

Result<ExecutionPlan> BuildExecutionPlan(const Graph& graph, const CheckedGraph& checked,
                                         const CpuProvider& provider) {
  ExecutionPlan plan;
  for (const ValueInfo& vi : graph.inputs) plan.input_slots.push_back(SlotFor(plan, vi.name));
  for (const Initializer& init : graph.initializers)
    plan.constant_slots.emplace_back(SlotFor(plan, init.name), init.tensor);
  for (const SparseTensor& s : graph.sparse_initializers) {
    NEE_ASSIGN_OR_RETURN(Tensor dense, DensifySparse(s));
    plan.constant_slots.emplace_back(SlotFor(plan, s.name), std::move(dense));
  }
  for (const std::string& name : checked.captured)
    if (!plan.slot_of.count(name)) plan.captured_slots.emplace_back(SlotFor(plan, name), name);

  // Initializers a caller cannot override: not also declared as graph inputs.
  std::vector<bool> is_constant_slot(plan.num_slots(), false);
  for (const auto& entry : plan.constant_slots) is_constant_slot[entry.first] = true;
  for (int s : plan.input_slots) is_constant_slot[s] = false;

  for (size_t idx : checked.order) {
    const Node& node = graph.nodes[idx];
    PlannedNode pn;
    pn.node = &node;
    pn.schema = checked.schemas[idx];
    pn.opset = checked.opsets[idx];
    auto kernel = provider.SelectKernel(*pn.schema, node);
    if (!kernel.ok()) return kernel.status();
    pn.kernel = kernel.value();
    for (const std::string& in : node.inputs) {
      int slot = in.empty() ? -1 : SlotFor(plan, in);
      pn.inputs.push_back(slot);
      pn.constant_inputs.push_back(slot >= 0 && slot < static_cast<int>(is_constant_slot.size()) &&
                                   is_constant_slot[slot]);
    }
    for (const std::string& out : node.outputs) pn.outputs.push_back(out.empty() ? -1 : SlotFor(plan, out));
    for (const std::string& name : checked.implicit_inputs[idx]) pn.implicit_inputs.push_back(SlotFor(plan, name));
    pn.has_subgraphs = !BodiesOf(node).empty();
    plan.nodes.push_back(std::move(pn));
  }
  for (const ValueInfo& vi : graph.outputs) plan.output_slots.push_back(SlotFor(plan, vi.name));

  // Lifetimes: a slot is released after its last reader, unless it is a graph output.
  size_t n_slots = plan.num_slots();
  plan.producer.assign(n_slots, -1);
  plan.last_use.assign(n_slots, -1);
  plan.is_graph_output.assign(n_slots, false);
  for (int s : plan.output_slots) plan.is_graph_output[s] = true;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const PlannedNode& pn = plan.nodes[i];
    for (int s : pn.outputs)
      if (s >= 0) plan.producer[s] = static_cast<int>(i);
    for (int s : pn.inputs)
      if (s >= 0) plan.last_use[s] = static_cast<int>(i);
    for (int s : pn.implicit_inputs) plan.last_use[s] = static_cast<int>(i);
  }
  for (size_t s = 0; s < n_slots; ++s) {
    if (plan.is_graph_output[s]) continue;
    int last = plan.last_use[s];
    if (last >= 0) plan.nodes[last].release_after.push_back(static_cast<int>(s));
    else if (plan.producer[s] >= 0) plan.nodes[plan.producer[s]].release_after.push_back(static_cast<int>(s));
  }
  return plan;
}

std::vector<bool> NodesNeededFor(const ExecutionPlan& plan, const std::vector<size_t>& outputs) {
  std::vector<bool> live(plan.num_slots(), false);
  for (size_t o : outputs)
    if (o < plan.output_slots.size()) live[plan.output_slots[o]] = true;
  std::vector<bool> needed(plan.nodes.size(), false);
  for (size_t i = plan.nodes.size(); i-- > 0;) {
    const PlannedNode& pn = plan.nodes[i];
    for (int s : pn.outputs) needed[i] = needed[i] || (s >= 0 && live[s]);
    if (!needed[i]) continue;
    for (int s : pn.inputs)
      if (s >= 0) live[s] = true;
    for (int s : pn.implicit_inputs) live[s] = true;
  }
  return needed;
}

}  // namespace nee
