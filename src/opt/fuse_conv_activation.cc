// Level-2 fusion of a Conv with the activation after it into ONNX Runtime's
// com.microsoft FusedConv (ops/fused_conv.h), which applies the activation
// over the Conv's output while it is still in cache instead of in a second
// node:
//   Conv -> Relu | Tanh | Sigmoid | LeakyRelu | HardSigmoid      => FusedConv(activation = that op)
//   Conv -> Clip(constant bounds; Relu6 is Clip(0, 6))          => FusedConv("Clip", [min, max])
//   Conv -> Sigmoid, with Mul(conv, sigmoid) (SiLU / Swish)     => FusedConv("Silu")
//   Conv -> HardSwish                                           => FusedConv("HardSwish"), a nee extension
// Conditions: a float32 Conv whose output nothing else reads (no other node,
// graph output or subgraph); the activation with only the attributes its
// schema defines. The FusedConv keeps the Conv's inputs and attributes and
// takes over the activation's output name.
#include <limits>

#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// The activation a FusedConv will apply, in ORT's attribute form.
struct Activation {
  std::string name;
  std::vector<float> params;
};

// Clip's bounds: attributes before opset 11, optional constant inputs after.
// An absent bound is infinite, which clips nothing.
bool ClipBounds(GraphEditor& ed, size_t index, std::vector<float>* bounds) {
  const Node& clip = ed.node(index);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo = -kInf, hi = kInf;
  if (ed.checked().opsets[index] < 11) {
    if (opt::HasOtherAttributes(clip, {"min", "max"}) || clip.inputs.size() != 1) return false;
    auto min = clip.GetFloat("min", -kInf), max = clip.GetFloat("max", kInf);
    if (!min.ok() || !max.ok()) return false;
    lo = min.value();
    hi = max.value();
  } else {
    if (!clip.attributes.empty()) return false;
    if (clip.HasInput(1) && !opt::ScalarConstant(ed, clip.inputs[1], &lo)) return false;
    if (clip.HasInput(2) && !opt::ScalarConstant(ed, clip.inputs[2], &hi)) return false;
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

// A plain float32 Conv: one output, two or three inputs.
bool IsFusableConv(GraphEditor& ed, size_t index) {
  const Node& conv = ed.node(index);
  if (!opt::IsOp(conv, "Conv") || conv.outputs.size() != 1 || conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return false;
  if (opt::HasOtherAttributes(conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}))
    return false;
  const TypeInfo* y = ed.TensorType(conv.outputs[0]);
  return y && y->elem_type == DataType::kFloat;
}

// The Conv becomes a FusedConv writing `output`; `absorbed` nodes go.
void Rewrite(GraphEditor& ed, size_t conv_index, const Activation& act, const std::string& output,
             std::initializer_list<size_t> absorbed) {
  for (size_t n : absorbed) ed.RemoveNode(n);
  Node& conv = ed.node(conv_index);
  conv.op_type = "FusedConv";
  conv.domain = opt::kMicrosoftDomain;
  conv.attributes.push_back(opt::StringAttr("activation", act.name));
  if (!act.params.empty()) conv.attributes.push_back(opt::FloatsAttr("activation_params", act.params));
  ed.RenameOutput(conv_index, 0, output);
}

// Sigmoid(c) and Mul(c, Sigmoid(c)) as the only readers of c: returns the
// Mul's index through `mul`, the Sigmoid's through `sigmoid`.
bool MatchSilu(GraphEditor& ed, const std::string& c, size_t* sigmoid, size_t* mul) {
  if (ed.IsPinned(c)) return false;
  std::vector<opt::Use> uses = ed.Uses(c);
  if (uses.size() != 2) return false;
  for (int first = 0; first < 2; ++first) {
    const opt::Use s = uses[first], m = uses[1 - first];
    const Node& sig = ed.node(s.node);
    const Node& product = ed.node(m.node);
    if (!opt::IsOp(sig, "Sigmoid") || !sig.attributes.empty() || sig.outputs.size() != 1) continue;
    if (!opt::IsOp(product, "Mul") || product.inputs.size() != 2 || !product.attributes.empty()) continue;
    if (ed.checked().opsets[m.node] < 7) continue;  // Mul broadcast by attribute before opset 7
    if (product.inputs[1 - m.input] != sig.outputs[0] || !ed.OnlyUsedBy(sig.outputs[0], m.node)) continue;
    *sigmoid = s.node;
    *mul = m.node;
    return true;
  }
  return false;
}

Status TryFuse(GraphEditor& ed, size_t index) {
  if (!IsFusableConv(ed, index)) return Status::Ok();
  const std::string c = ed.node(index).outputs[0];
  size_t sigmoid = 0, mul = 0;
  if (MatchSilu(ed, c, &sigmoid, &mul)) {
    Rewrite(ed, index, {"Silu", {}}, ed.node(mul).outputs[0], {sigmoid, mul});
    return Status::Ok();
  }
  int64_t consumer = opt::SoleConsumer(ed, c);
  if (consumer < 0) return Status::Ok();
  Activation act;
  if (!MatchActivation(ed, static_cast<size_t>(consumer), &act)) return Status::Ok();
  if (ed.node(static_cast<size_t>(consumer)).inputs[0] != c) return Status::Ok();  // e.g. c is Clip's bound
  Rewrite(ed, index, act, ed.node(static_cast<size_t>(consumer)).outputs[0], {static_cast<size_t>(consumer)});
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
