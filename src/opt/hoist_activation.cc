// Level-2 rewrite: an activation that reads a Conv's output through nodes that
// only move data (Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Identity)
// is applied before them instead, where fuse-conv-activation (the next pass)
// folds it into the Conv:
//   Conv -> Reshape -> Transpose -> Sigmoid   =>   Conv -> Sigmoid -> Reshape -> Transpose
// A YOLO detection head is this: its Sigmoid was a pass over the whole head
// output (8.6 MB at 640x640) that the FusedConv now applies while the output
// is in cache. An elementwise op with one input gives each element the same
// value wherever the element sits, so the result is bitwise what it was
// whenever the fused kernel computes the activation as the standalone kernel
// does (ep/cpu's FusedConv and Sigmoid share simd_math.h's Sigmoid8/16).
// Conditions: every value on the way (the Conv's output, each move's output)
// is read by the next node only and is no graph output or captured name, so
// nothing else sees a value before or after the activation it did not see.
#include "opt/column_map_passes.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// The activations FusedConv can apply (fuse_conv_activation.cc matches their
// attributes and Clip's bounds); each is elementwise with one data input, of
// one element type in and out.
bool IsActivation(const Node& node) {
  for (const char* op : {"Relu", "Tanh", "Sigmoid", "HardSwish", "LeakyRelu", "HardSigmoid", "Clip"})
    if (opt::IsOp(node, op)) return node.outputs.size() == 1 && !node.inputs.empty();
  return false;
}

// Nodes whose output holds their first input's elements, unchanged.
bool MovesData(const Node& node) {
  for (const char* op : {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
    if (opt::IsOp(node, op)) return node.outputs.size() == 1 && !node.inputs.empty();
  return false;
}

void TryHoist(GraphEditor& ed, size_t act_index) {
  const Node& act = ed.node(act_index);
  if (!IsActivation(act)) return;
  // Walk up through the moves to the Conv; each value read by the next node only.
  std::vector<size_t> moves;  // nearest the activation first
  std::string value = act.inputs[0];
  size_t reader = act_index;
  for (;;) {
    if (!ed.OnlyUsedBy(value, reader)) return;
    const int64_t producer = ed.Producer(value);
    if (producer < 0) return;
    const Node& node = ed.node(static_cast<size_t>(producer));
    if (node.outputs[0] != value) return;
    if (opt::IsOp(node, "Conv")) break;
    if (!MovesData(node) || node.inputs[0].empty() || moves.size() >= 8) return;
    moves.push_back(static_cast<size_t>(producer));
    reader = static_cast<size_t>(producer);
    value = node.inputs[0];
  }
  if (moves.empty()) return;  // the activation already reads the Conv
  const size_t conv = static_cast<size_t>(ed.Producer(value));
  // The activation now reads the Conv's output and writes a fresh value the
  // first move reads; the last move writes what the activation wrote.
  Node hoisted = act;
  const std::string output = act.outputs[0];
  const std::string activated = ed.FreshName(value + "_" + act.op_type);
  hoisted.inputs[0] = value;
  hoisted.outputs[0] = activated;
  ed.RemoveNode(act_index);
  ed.InsertAfter(conv, std::move(hoisted));
  ed.SetInput(moves.back(), 0, activated);
  ed.RenameOutput(moves.front(), 0, output);
}

}  // namespace

Status HoistActivationToConv(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) TryHoist(ed, index);
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
