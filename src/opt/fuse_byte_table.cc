// Level-2 fusion of a byte-to-byte function into one ai.nee TableLookup (ops/table_lookup.cc).
//
// A chain of element-wise ops from one 8-bit tensor x to another, y, whose other operands are constants of
// one value, gives each y element as a function of its x byte alone: 256 possible inputs. Quantized models
// are full of them: a quantized SiLU is
//
//   QDQ form:       Mul(DQ(x), DQ(Q(Sigmoid(DQ(x))))) -> Q      (ONNX Runtime's quantize_static, QDQ)
//   QOperator form: QLinearMul(x, QLinearSigmoid(x))              (the same, QOperator)
//
// and HardSwish, LeakyRelu, Relu between DequantizeLinear and QuantizeLinear the same. The pass finds such a
// cone, evaluates its nodes once with their reference kernels on the 256 values of x's type, and writes
// TableLookup(x, table) in its place: bitwise what the reference kernels compute for the chain, and one pass
// over the bytes instead of several, each through float (ONNX Runtime fuses the QDQ form into QLinearSigmoid
// and QLinearMul and runs two lookups and a multiply).
//
// The cone grows backwards from the node writing y through producers that are element-wise ops (the list
// below: ops whose every output element is a function of the same element of each input), over float
// tensors in between, until one 8-bit tensor is all it reads besides constants. Every value inside must be
// read only inside it (not a graph output, not read by a subgraph), each constant must hold one value of rank
// at most x's (so that broadcasting changes no shape), and the cone is the largest such one found.
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ops/attention_sdpa.h"  // kNeeDomain
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {

using opt::GraphEditor;

constexpr size_t kMaxConeNodes = 24;

// Ops whose outputs are element-wise functions of their inputs' same-index elements (with numpy broadcasting
// of one-value operands): default domain and com.microsoft's quantized ones. Not Identity: alone it would
// become a table where eliminate-noops removes it.
bool IsElementwiseOp(const Node& node) {
  static const std::unordered_set<std::string> kDefault = {
      "Abs", "Acos", "Acosh", "Add", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil", "Celu", "Clip", "Cos",
      "Cosh", "DequantizeLinear", "Div", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
      "LeakyRelu", "Log", "Max", "Min", "Mish", "Mul", "Neg", "Pow", "PRelu", "QuantizeLinear", "Reciprocal",
      "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub", "Sum",
      "Tan", "Tanh", "ThresholdedRelu"};
  static const std::unordered_set<std::string> kMicrosoft = {"QLinearSigmoid", "QLinearLeakyRelu", "QLinearAdd",
                                                             "QLinearMul"};
  if (node.outputs.size() != 1 || node.outputs[0].empty()) return false;
  for (const Attribute& a : node.attributes)
    if (a.g || !a.graphs.empty()) return false;
  if (node.domain.empty() || node.domain == "ai.onnx") return kDefault.count(node.op_type) > 0;
  return node.domain == opt::kMicrosoftDomain && kMicrosoft.count(node.op_type) > 0;
}

bool Is8BitValue(const GraphEditor& ed, const std::string& name) {
  const TypeInfo* t = ed.TensorType(name);
  return t && Is8Bit(t->elem_type);
}

// A cone of element-wise nodes: `nodes` (the sink, writing y, first) and the values they read from outside.
struct Cone {
  std::vector<size_t> nodes;
  std::unordered_set<size_t> members;
  std::string source;  // the one 8-bit value read from outside, once found
};

// The non-constant values the cone's nodes read that no cone node writes, in first-read order.
std::vector<std::string> Frontier(const GraphEditor& ed, const Cone& cone) {
  std::vector<std::string> frontier;
  for (size_t n : cone.nodes)
    for (const std::string& in : ed.node(n).inputs) {
      if (in.empty() || ed.Constant(in).defined()) continue;
      const int64_t producer = ed.Producer(in);
      if (producer >= 0 && cone.members.count(static_cast<size_t>(producer))) continue;
      if (std::find(frontier.begin(), frontier.end(), in) == frontier.end()) frontier.push_back(in);
    }
  return frontier;
}

// Whether every value written inside the cone, y aside, is read only by cone nodes, and every constant it
// reads holds one value of rank at most `rank` (x's; -1 when unknown: rank 0 only).
bool Closed(const GraphEditor& ed, const Cone& cone, int64_t rank) {
  for (size_t n : cone.nodes) {
    for (const std::string& in : ed.node(n).inputs) {
      if (in.empty()) continue;
      const Tensor c = ed.Constant(in);
      if (c.defined() && (c.num_elements() != 1 || c.rank() > std::max<int64_t>(rank, 0))) return false;
    }
    if (n == cone.nodes.front()) continue;
    const std::string& out = ed.node(n).outputs[0];
    if (ed.IsPinned(out)) return false;
    for (const opt::Use& use : ed.Uses(out))
      if (!cone.members.count(use.node)) return false;
  }
  return true;
}

int64_t RankOf(const GraphEditor& ed, const std::string& name) {
  const TypeInfo* t = ed.TensorType(name);
  return t && t->shape ? static_cast<int64_t>(t->shape->size()) : -1;
}

// The largest cone ending at node `sink` that reads one 8-bit value; no nodes when there is none. `position`:
// each node's place in the execution order.
Cone GrowCone(const GraphEditor& ed, size_t sink, const std::vector<size_t>& position) {
  Cone cone, best;
  cone.nodes.push_back(sink);
  cone.members.insert(sink);
  while (true) {
    const std::vector<std::string> frontier = Frontier(ed, cone);
    if (frontier.size() == 1 && Is8BitValue(ed, frontier[0]) && Closed(ed, cone, RankOf(ed, frontier[0]))) {
      best = cone;
      best.source = frontier[0];
    }
    if (cone.nodes.size() >= kMaxConeNodes) break;
    // Float values must be computed inside; 8-bit ones may be, when that still ends at one source. Of
    // those, the one computed last first: the source the others derive from (a SiLU's x) is taken in last.
    int64_t next = -1;
    for (int pass = 0; pass < 2 && next < 0; ++pass)
      for (const std::string& value : frontier) {
        if (Is8BitValue(ed, value) != (pass == 1)) continue;
        const int64_t producer = ed.Producer(value);
        const bool elementwise = producer >= 0 && !ed.removed(static_cast<size_t>(producer)) &&
                                 IsElementwiseOp(ed.node(static_cast<size_t>(producer)));
        if (!elementwise && pass == 0) return best;  // a float value from outside: no larger cone can close
        const auto later = [&](int64_t a, int64_t b) {
          return position[static_cast<size_t>(a)] > position[static_cast<size_t>(b)];
        };
        if (elementwise && (next < 0 || later(producer, next))) next = producer;
      }
    if (next < 0) break;
    cone.nodes.push_back(static_cast<size_t>(next));
    cone.members.insert(static_cast<size_t>(next));
  }
  return best;
}

// The cone's output for each of the 256 values of its source's type, by the reference kernels; an undefined
// tensor when a kernel fails or the result is not 256 bytes.
Tensor EvaluateTable(const GraphEditor& ed, const Cone& cone) {
  const CheckedGraph& checked = ed.checked();
  const DataType type = ed.TensorType(cone.source)->elem_type;
  std::vector<int64_t> dims(static_cast<size_t>(std::max<int64_t>(RankOf(ed, cone.source), 1)), 1);
  dims.back() = 256;
  auto source = Tensor::Allocate(type, dims);
  if (!source.ok()) return Tensor();
  auto* bytes = static_cast<uint8_t*>(source.value().raw_data());
  for (int v = 0; v < 256; ++v) bytes[v] = static_cast<uint8_t>(type == DataType::kInt8 ? v ^ 0x80 : v);  // lowest first
  std::unordered_map<std::string, Value> values;
  values.emplace(cone.source, Value(source.value()));
  for (size_t index : checked.order) {
    if (!cone.members.count(index)) continue;
    const Node& node = ed.node(index);
    std::vector<Value> constants(node.inputs.size());
    std::vector<const Value*> inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& in = node.inputs[i];
      if (in.empty()) {
        inputs.push_back(nullptr);
      } else if (auto it = values.find(in); it != values.end()) {
        inputs.push_back(&it->second);
      } else {
        constants[i] = Value(ed.Constant(in));
        inputs.push_back(&constants[i]);
      }
    }
    std::vector<Value> outputs(1);
    KernelContext ctx(node, checked.opsets[index], inputs, &outputs, nullptr, nullptr, nullptr);
    if (!checked.schemas[index]->kernel || !checked.schemas[index]->kernel(ctx).ok() || !outputs[0].is_tensor())
      return Tensor();
    values[node.outputs[0]] = std::move(outputs[0]);
  }
  const Value& y = values[ed.node(cone.nodes.front()).outputs[0]];
  if (!y.is_tensor() || !Is8Bit(y.tensor().dtype()) || y.tensor().num_elements() != 256) return Tensor();
  auto table = Tensor::Allocate(y.tensor().dtype(), {256});
  if (!table.ok()) return Tensor();
  std::memcpy(table.value().raw_data(), y.tensor().raw_data(), 256);
  return table.value();
}

void TryFuse(GraphEditor& ed, size_t sink, const std::vector<size_t>& position) {
  const Node& node = ed.node(sink);
  if (!IsElementwiseOp(node) || !Is8BitValue(ed, node.outputs[0])) return;
  const Cone cone = GrowCone(ed, sink, position);
  if (cone.nodes.empty()) return;
  const Tensor table = EvaluateTable(ed, cone);
  if (!table.defined()) return;
  const std::string table_name = ed.AddInitializer(node.outputs[0] + "_table", table);
  const std::string source = cone.source;
  for (size_t n : cone.nodes)
    if (n != sink) ed.RemoveNode(n);
  ed.RewriteAs(sink, kNeeDomain, "TableLookup", {source, table_name}, {});
}

}  // namespace

Status FuseByteTable(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  std::vector<size_t> position(graph.nodes.size());
  for (size_t i = 0; i < checked.order.size(); ++i) position[checked.order[i]] = i;
  // From the last node back, so that a cone takes in the smaller ones ending inside it.
  for (auto it = checked.order.rbegin(); it != checked.order.rend(); ++it)
    if (!ed.removed(*it)) TryFuse(ed, *it, position);
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
