// Level-2 fusion of a Conv with the activation after it into ONNX Runtime's
// com.microsoft FusedConv (ops/fused_conv.h), which applies the activation
// over the Conv's output while it is still in cache instead of in a second
// node:
//   Conv -> Relu | Tanh | Sigmoid | LeakyRelu | HardSigmoid      => FusedConv(activation = that op)
//   Conv -> Clip(constant bounds; Relu6 is Clip(0, 6))          => FusedConv("Clip", [min, max])
//   Conv -> Sigmoid, with Mul(conv, sigmoid) (SiLU / Swish)     => FusedConv("Silu")
//   Conv -> HardSwish                                           => FusedConv("HardSwish"), a nee extension
//   Conv -> x * Clip(x + 3, 0, 6) / 6 (HardSwish written out)   => FusedConv("HardSwish")
//   Conv -> x * HardSigmoid(x, 1/6, 0.5) (PyTorch, opset < 14)  => FusedConv("HardSwish")
//   Conv -> Add(z) [-> any of the above] (ResNet's residual)    => FusedConv(X, W, B, Z = z, activation)
// and the same after an ai.nee ConvIntegerToFloat (fuse-quant-conv's), which stays one with Z its input 6.
// Conditions: a float32 (or bfloat16: ai.nee FusedConv) Conv whose output nothing else reads (no other node,
// graph output or subgraph), likewise the residual sum when an activation
// follows it; z of provably the Conv output's shape (FusedConv adds it
// without broadcasting); the activation with only the attributes its schema
// defines. The FusedConv keeps the Conv's inputs and attributes and takes
// over the last absorbed node's output name.
#include <limits>

#include "ir/float_formats.h"
#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/quant_conv.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// The activation a FusedConv will apply, in ORT's attribute form (an empty
// name: none).
struct Activation {
  std::string name;
  std::vector<float> params;
};

// A constant scalar Clip bound: float32, or bfloat16 (a bfloat16 Clip before
// an ai.nee FusedConv), whose float value is exact.
bool BoundConstant(GraphEditor& ed, const std::string& name, float* value) {
  const Tensor t = ed.Constant(name);
  if (!t.defined() || t.dtype() != DataType::kBFloat16 || t.num_elements() != 1)
    return opt::ScalarConstant(ed, name, value);
  *value = BFloat16ToFloat(t.data<uint16_t>()[0]);
  return true;
}

// Clip's bounds: attributes before opset 11, optional constant inputs after.
// An absent bound is infinite, which clips nothing.
bool ClipBounds(GraphEditor& ed, size_t index, std::vector<float>* bounds) {
  const Node& clip = ed.node(index);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo = -kInf, hi = kInf;
  if (ed.checked().opsets[index] < 11) {
    if (opt::HasOtherAttributes(clip, {"min", "max"}) || clip.inputs.size() != 1) return false;
    // Clip-6 declares -FLT_MAX and FLT_MAX as defaults; Clip-1 none (no bound).
    const bool v6 = ed.checked().opsets[index] >= 6;
    constexpr float kMax = std::numeric_limits<float>::max();
    auto min = clip.GetFloat("min", v6 ? -kMax : -kInf), max = clip.GetFloat("max", v6 ? kMax : kInf);
    if (!min.ok() || !max.ok()) return false;
    lo = min.value();
    hi = max.value();
  } else {
    if (!clip.attributes.empty()) return false;
    if (clip.HasInput(1) && !BoundConstant(ed, clip.inputs[1], &lo)) return false;
    if (clip.HasInput(2) && !BoundConstant(ed, clip.inputs[2], &hi)) return false;
  }
  *bounds = {lo, hi};
  return true;
}

// Whether node `index` is a single-input activation FusedConv can apply;
// fills `act` with its name and parameters (defaults made explicit).
bool MatchActivation(GraphEditor& ed, size_t index, Activation* act) {
  const Node& node = ed.node(index);
  if (node.outputs.size() != 1 || node.inputs.empty()) return false;
  for (const char* op : {"Relu", "Tanh", "Sigmoid", "HardSwish"}) {
    if (!opt::IsOp(node, op)) continue;
    if (!node.attributes.empty() || node.inputs.size() != 1) return false;
    *act = {op, {}};
    return true;
  }
  if (opt::IsOp(node, "LeakyRelu")) {
    auto alpha = node.GetFloat("alpha", 0.01f);
    if (!alpha.ok() || opt::HasOtherAttributes(node, {"alpha"}) || node.inputs.size() != 1) return false;
    *act = {"LeakyRelu", {alpha.value()}};
    return true;
  }
  if (opt::IsOp(node, "HardSigmoid")) {
    auto alpha = node.GetFloat("alpha", 0.2f), beta = node.GetFloat("beta", 0.5f);
    if (!alpha.ok() || !beta.ok() || opt::HasOtherAttributes(node, {"alpha", "beta"}) || node.inputs.size() != 1)
      return false;
    *act = {"HardSigmoid", {alpha.value(), beta.value()}};
    return true;
  }
  if (opt::IsOp(node, "Clip")) {
    std::vector<float> bounds;
    if (!ClipBounds(ed, index, &bounds)) return false;
    *act = {"Clip", bounds};
    return true;
  }
  return false;
}

// An ai.nee ConvIntegerToFloat (written by fuse-quant-conv) with neither a
// residual nor an activation yet.
bool IsBareConvIntegerToFloat(const Node& node) {
  return node.domain == kNeeDomain && node.op_type == "ConvIntegerToFloat" && node.outputs.size() == 1 &&
         node.inputs.size() <= kConvIntegerResidualInput && !node.HasAttr("activation");
}

// A plain float32 Conv (one output, two or three inputs), or a bare ConvIntegerToFloat.
bool IsFusableConv(GraphEditor& ed, size_t index) {
  const Node& conv = ed.node(index);
  if (IsBareConvIntegerToFloat(conv)) return true;
  if (!opt::IsOp(conv, "Conv") || conv.outputs.size() != 1 || conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return false;
  if (opt::HasOtherAttributes(conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}))
    return false;
  const TypeInfo* y = ed.TensorType(conv.outputs[0]);
  return y && (y->elem_type == DataType::kFloat || y->elem_type == DataType::kBFloat16);
}

// What the Conv absorbs: an optional residual Add (its other operand z) and
// an activation, and the nodes that go with them.
struct Fusion {
  std::string z;
  Activation act;
  std::vector<size_t> absorbed;
};

// FusedConv's activation attributes (none for an empty name).
void AddActivation(Node& conv, const Activation& act) {
  if (!act.name.empty()) conv.attributes.push_back(opt::StringAttr("activation", act.name));
  if (!act.params.empty()) conv.attributes.push_back(opt::FloatsAttr("activation_params", act.params));
}

// The Conv becomes a FusedConv writing `output` (a ConvIntegerToFloat stays
// one); the absorbed nodes go.
void Rewrite(GraphEditor& ed, size_t conv_index, const Fusion& f, const std::string& output) {
  for (size_t n : f.absorbed) ed.RemoveNode(n);
  if (IsBareConvIntegerToFloat(ed.node(conv_index))) {  // keeps its op, takes Z and the activation
    if (!f.z.empty()) ed.SetInput(conv_index, kConvIntegerResidualInput, f.z);
    AddActivation(ed.node(conv_index), f.act);
    ed.RenameOutput(conv_index, 0, output);
    return;
  }
  if (!f.z.empty()) ed.SetInput(conv_index, 3, f.z);  // an absent bias stays an empty input 2
  Node& conv = ed.node(conv_index);
  conv.op_type = "FusedConv";
  // A bfloat16 Conv (which widen-narrow-float left narrow): ai.nee FusedConv,
  // com.microsoft's on bfloat16, each step rounded as the unfused nodes round.
  const TypeInfo* y = ed.TensorType(conv.outputs[0]);
  conv.domain = y && y->elem_type == DataType::kBFloat16 ? kNeeDomain : opt::kMicrosoftDomain;
  AddActivation(conv, f.act);
  ed.RenameOutput(conv_index, 0, output);
}

// c's only reader is Add(c, z) (either order) with z of c's shape: the Add's
// index and z.
bool MatchResidualAdd(GraphEditor& ed, const std::string& c, size_t* add, std::string* z) {
  int64_t reader = opt::SoleConsumer(ed, c);
  if (reader < 0) return false;
  const Node& n = ed.node(static_cast<size_t>(reader));
  if (!opt::IsOp(n, "Add") || n.inputs.size() != 2 || n.outputs.size() != 1 || !n.attributes.empty() ||
      ed.checked().opsets[static_cast<size_t>(reader)] < 7)
    return false;
  const std::string& other = n.inputs[0] == c ? n.inputs[1] : n.inputs[0];
  const TypeInfo* ct = ed.TensorType(c);
  if (other == c || !ct || !opt::ProvablySameShape(ct, ed.TensorType(other), ct->elem_type)) return false;
  *add = static_cast<size_t>(reader);
  *z = other;
  return true;
}

// A one-input gate node g(c) and Mul(c, g(c)) as the only readers of c, the
// gate's output read by that Mul only: SiLU (`is_gate` a Sigmoid) and
// PyTorch's HardSwish before opset 14 (a HardSigmoid of slope 1/6). Returns
// the gate's index through `gate`, the Mul's through `mul`.
bool MatchGateProduct(GraphEditor& ed, const std::string& c, bool (*is_gate)(const Node&),
                      size_t* gate, size_t* mul) {
  if (ed.IsPinned(c)) return false;
  std::vector<opt::Use> uses = ed.Uses(c);
  if (uses.size() != 2) return false;
  for (int first = 0; first < 2; ++first) {
    const opt::Use g = uses[first], m = uses[1 - first];
    const Node& gate_node = ed.node(g.node);
    if (!is_gate(gate_node) || gate_node.inputs.size() != 1 || gate_node.outputs.size() != 1) continue;
    // (IsBinary: Mul broadcast by attribute before opset 7)
    if (!opt::IsBinary(ed, static_cast<int64_t>(m.node), "Mul")) continue;
    const Node& product = ed.node(m.node);
    if (product.inputs[1 - m.input] != gate_node.outputs[0] || !ed.OnlyUsedBy(gate_node.outputs[0], m.node)) continue;
    *gate = g.node;
    *mul = m.node;
    return true;
  }
  return false;
}

// SiLU: Sigmoid(c) and Mul(c, Sigmoid(c)).
bool IsPlainSigmoid(const Node& node) { return opt::IsOp(node, "Sigmoid") && node.attributes.empty(); }

// HardSwish as PyTorch exports nn.Hardswish before opset 14: x * HardSigmoid(x,
// alpha 1/6, beta 0.5) (MobileNetV3 at opset 13 and below). ONNX defines
// HardSwish as exactly this product; the kernels round it a little
// differently (x / 6 or x * alpha, a fused multiply-add or not): an ulp or
// two of the output.
bool IsHardSwishGate(const Node& node) {
  if (!opt::IsOp(node, "HardSigmoid") || opt::HasOtherAttributes(node, {"alpha", "beta"})) return false;
  auto alpha = node.GetFloat("alpha", 0.2f), beta = node.GetFloat("beta", 0.5f);
  return alpha.ok() && beta.ok() && alpha.value() == 1.f / 6.f && beta.value() == 0.5f;
}

// A float32 scalar constant within float rounding of `want` whose rank is at
// most `rank`, so that an elementwise op with it keeps its other operand's shape.
bool ScalarNear(GraphEditor& ed, const std::string& name, double want, size_t rank) {
  float value = 0;
  return opt::ScalarConstant(ed, name, &value) && static_cast<size_t>(ed.Constant(name).rank()) <= rank &&
         opt::NearlyEqual(value, want, 1e-6);
}

// The sole reader of `name` when it divides it by 6 or multiplies it by 1/6; -1 otherwise.
int64_t SixthOf(GraphEditor& ed, const std::string& name, size_t rank) {
  const int64_t reader = opt::SoleConsumer(ed, name);
  if (opt::IsBinary(ed, reader, "Div")) {
    const Node& div = ed.node(static_cast<size_t>(reader));
    return div.inputs[0] == name && ScalarNear(ed, div.inputs[1], 6, rank) ? reader : -1;
  }
  if (!opt::IsBinary(ed, reader, "Mul")) return -1;
  const std::string other = opt::OtherInput(ed.node(static_cast<size_t>(reader)), name);
  return !other.empty() && ScalarNear(ed, other, 1.0 / 6.0, rank) ? reader : -1;
}

// HardSwish as exporters write it out where they do not emit the op (PyTorch
// before opset 14, PaddlePaddle's hard_swish in the PP-OCR models): with x =
// c, (x * Clip(x + 3, 0, 6)) / 6 or x * (Clip(x + 3, 0, 6) / 6), the division
// also as a product with 1/6, and Add(c, 3) and Mul(c, ...) the only readers
// of c. Fills the pattern's nodes and the value its last node writes.
// HardSwish computes x * clip(x / 6 + 0.5, 0, 1): the same function, within
// float rounding of x (about 5e-7 |x| where x is near -3 and the output near
// 0; elsewhere a few ulp of the output). Four passes over the conv's output
// become none (PP-OCR's angle classifier: a third of its run).
bool MatchWrittenOutHardSwish(GraphEditor& ed, const std::string& c, std::vector<size_t>* nodes, std::string* output) {
  const TypeInfo* type = ed.TensorType(c);
  if (ed.IsPinned(c) || !type || type->elem_type != DataType::kFloat || !type->shape) return false;
  const size_t rank = type->shape->size();
  const std::vector<opt::Use> uses = ed.Uses(c);
  if (uses.size() != 2) return false;
  for (int first = 0; first < 2; ++first) {
    const size_t add = uses[first].node, mul = uses[1 - first].node;
    if (!opt::IsBinary(ed, static_cast<int64_t>(add), "Add") || !opt::IsBinary(ed, static_cast<int64_t>(mul), "Mul"))
      continue;
    if (!ScalarNear(ed, ed.node(add).inputs[1 - uses[first].input], 3, rank)) continue;
    const std::string& sum = ed.node(add).outputs[0];
    const int64_t clip = opt::SoleConsumer(ed, sum);
    std::vector<float> bounds;
    if (clip < 0 || !opt::IsOp(ed.node(static_cast<size_t>(clip)), "Clip") ||
        ed.node(static_cast<size_t>(clip)).inputs[0] != sum || !ClipBounds(ed, static_cast<size_t>(clip), &bounds) ||
        bounds != std::vector<float>{0.f, 6.f})
      continue;
    const std::string& clipped = ed.node(static_cast<size_t>(clip)).outputs[0];
    const std::string& factor = ed.node(mul).inputs[1 - uses[1 - first].input];
    if (factor == clipped) {  // (x * clip) / 6
      if (opt::SoleConsumer(ed, clipped) != static_cast<int64_t>(mul)) continue;
      const int64_t scale = SixthOf(ed, ed.node(mul).outputs[0], rank);
      if (scale < 0) continue;
      *nodes = {add, static_cast<size_t>(clip), mul, static_cast<size_t>(scale)};
      *output = ed.node(static_cast<size_t>(scale)).outputs[0];
      return true;
    }
    const int64_t scale = SixthOf(ed, clipped, rank);  // x * (clip / 6)
    if (scale < 0 || ed.node(static_cast<size_t>(scale)).outputs[0] != factor ||
        opt::SoleConsumer(ed, factor) != static_cast<int64_t>(mul))
      continue;
    *nodes = {add, static_cast<size_t>(clip), static_cast<size_t>(scale), mul};
    *output = ed.node(mul).outputs[0];
    return true;
  }
  return false;
}

Status TryFuse(GraphEditor& ed, size_t index) {
  if (!IsFusableConv(ed, index)) return Status::Ok();
  Fusion f;
  std::string value = ed.node(index).outputs[0];  // what the activation would read
  size_t add = 0;
  if (MatchResidualAdd(ed, value, &add, &f.z)) {
    f.absorbed.push_back(add);
    value = ed.node(add).outputs[0];
  }
  size_t gate = 0, mul = 0;
  const TypeInfo* value_type = ed.TensorType(value);
  const bool float32 = value_type && value_type->elem_type == DataType::kFloat;
  if (MatchGateProduct(ed, value, IsPlainSigmoid, &gate, &mul) ||
      (float32 && MatchGateProduct(ed, value, IsHardSwishGate, &gate, &mul))) {
    f.act = {opt::IsOp(ed.node(gate), "Sigmoid") ? "Silu" : "HardSwish", {}};
    f.absorbed.insert(f.absorbed.end(), {gate, mul});
    Rewrite(ed, index, f, ed.node(mul).outputs[0]);
    return Status::Ok();
  }
  std::vector<size_t> hard_swish;
  std::string hard_swish_output;
  if (MatchWrittenOutHardSwish(ed, value, &hard_swish, &hard_swish_output)) {
    f.act = {"HardSwish", {}};
    f.absorbed.insert(f.absorbed.end(), hard_swish.begin(), hard_swish.end());
    Rewrite(ed, index, f, hard_swish_output);
    return Status::Ok();
  }
  int64_t consumer = opt::SoleConsumer(ed, value);
  // (the activation must read `value` as its input, not, say, as Clip's bound)
  if (consumer >= 0 && MatchActivation(ed, static_cast<size_t>(consumer), &f.act) &&
      ed.node(static_cast<size_t>(consumer)).inputs[0] == value) {
    f.absorbed.push_back(static_cast<size_t>(consumer));
    Rewrite(ed, index, f, ed.node(static_cast<size_t>(consumer)).outputs[0]);
  } else if (!f.z.empty()) {
    Rewrite(ed, index, Fusion{f.z, {}, {add}}, value);  // Conv + Add alone still saves a pass
  }
  return Status::Ok();
}
}  // namespace

Status FuseConvActivation(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
