// Turns a checked graph into something a run loop can walk: every value gets
// an integer slot, every node its kernel (chosen by the execution provider),
// input/output slots and the slots that die after it.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "check/checker.h"
#include "ep/cpu/cpu_provider.h"

namespace nee {

struct PlannedNode {
  const Node* node = nullptr;
  const OpSchema* schema = nullptr;
  KernelFn kernel = nullptr;
  int64_t opset = 0;
  std::vector<int> inputs;   // slot per input, -1 when omitted
  std::vector<int> outputs;  // slot per output, -1 when omitted
  std::vector<int> release_after;  // slots whose last reader is this node
  bool has_subgraphs = false;
  std::vector<int> implicit_inputs;  // slots its subgraphs read from this graph
  // Per input: whether it is a session constant (an initializer that is not
  // also a graph input), so kernels may prepare from its bytes once.
  std::vector<bool> constant_inputs;
  // What the node's kernel prepared once for this session (see PreparedCache).
  std::shared_ptr<PreparedCache> prepared = std::make_shared<PreparedCache>();
};

struct ExecutionPlan {
  std::vector<PlannedNode> nodes;  // in execution order
  std::vector<std::string> slot_names;
  std::unordered_map<std::string, int> slot_of;
  std::vector<int> input_slots;   // per graph input
  std::vector<int> output_slots;  // per graph output
  std::vector<std::pair<int, Tensor>> constant_slots;  // initializers (defaults for overridable ones too)
  std::vector<std::pair<int, std::string>> captured_slots;  // names read from enclosing graphs
  // Per slot: the index in `nodes` of its producer (-1: input/initializer/captured)
  // and of its last reader (-1: never read; graph outputs live to the end).
  std::vector<int> producer;
  std::vector<int> last_use;
  std::vector<bool> is_graph_output;

  size_t num_slots() const { return slot_names.size(); }
};

// Per node of `plan`: whether it must run to compute the graph outputs
// `outputs` (indices into output_slots): their producers and, transitively,
// the producers of everything those read (subgraph captures included).
std::vector<bool> NodesNeededFor(const ExecutionPlan& plan, const std::vector<size_t>& outputs);

Result<ExecutionPlan> BuildExecutionPlan(const Graph& graph, const CheckedGraph& checked,
                                         const CpuProvider& provider);

}  // namespace nee
