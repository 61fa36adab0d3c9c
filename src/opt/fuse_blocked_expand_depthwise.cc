// Level-2 fusion after the layout pass: a pointwise BlockedConv whose only
// reader is a depthwise BlockedConv (MobileNetV2's expand -> depthwise, the
// first two convs of an inverted residual block) becomes one ai.nee
// BlockedExpandDepthwise (ops/blocked_conv.h), and so does the pointwise
// conv after them where it is the depthwise conv's only reader (the block's
// projection, its residual Z included). Its kernel computes the expanded
// tensor and the depthwise output a band of rows at a time into buffers
// that stay in L2 (ep/cpu/blocked_expand_depthwise_fast.cc) where the convs
// wrote them to memory and read them back: 6x the block's channels over the
// block's plane, twice.
//
// On AVX2 and AVX-512 hosts, where that kernel runs its bands (MobileNetV2
// batch 8 on a Zen 3 core with AVX2: 0.88 of the unfused time at one
// thread, 0.83 at two), and only for the shapes it takes: a 1x1 conv
// over input channels that fill whole blocks, no residual, into a 3x3
// depthwise conv of stride 1 or 2 with pads of at most 1, no residual. A
// missing bias becomes zeros (the fused op takes both). And only where the
// expanded tensor is larger than a core's L2 (kLargerThan): a smaller one
// stays in L2 between the two convs anyway (known from the dims that are
// known: a symbolic batch counts as one image). Fusing MobileNetV2's thirteen
// smaller pairs too (batch 1) measured 1.00-1.01 of the unfused time at one
// thread, 0.97-0.99 at two: within this machine's noise, so they stay
// two nodes.
#include <string>
#include <vector>

#include "base/cpu_isa.h"
#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/blocked_conv.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {
namespace {
using opt::GraphEditor;

constexpr int64_t kLargerThan = 1 << 20;

bool IsBlockedConv(const Node& n) { return n.domain == kNeeDomain && n.op_type == "BlockedConv"; }

int64_t IntOr(const Node& n, const char* name, int64_t fallback) {
  Result<int64_t> v = n.GetInt(name, fallback);
  return v.ok() ? v.value() : -1;
}

bool AllEqual(const Node& n, const char* name, int64_t value, size_t count) {
  const Attribute* a = n.FindAttr(name);
  if (!a) return true;  // the defaults: strides 1, pads 0, dilations 1
  if (a->ints.size() != count) return false;
  for (int64_t v : a->ints)
    if (v != value) return false;
  return true;
}

bool DefaultLayouts(const Node& n) {
  const Attribute* in = n.FindAttr("input_layout");
  const Attribute* out = n.FindAttr("output_layout");
  return (!in || in->s == "blocked") && (!out || out->s == "blocked");
}

// A blocked 1x1 stride-1 unpadded group-1 conv without residual over whole
// input blocks, with constant weights [E, C, 1, 1], whose output is large.
bool ExpandConv(const GraphEditor& ed, const Node& n) {
  if (!IsBlockedConv(n) || n.inputs.size() > 3 || !DefaultLayouts(n) || IntOr(n, "group", 1) != 1) return false;
  const int64_t C = IntOr(n, "channels", -1);
  const Tensor w = ed.Constant(n.inputs[1]);
  if (C <= 0 || C % kChannelBlock != 0 || !opt::IsFloatTensor(w) || w.rank() != 4) return false;
  if (w.dim(1) != C || w.dim(2) != 1 || w.dim(3) != 1 || w.dim(0) % kChannelBlock != 0) return false;
  if (!AllEqual(n, "strides", 1, 2) || !AllEqual(n, "pads", 0, 4) || !AllEqual(n, "dilations", 1, 2)) return false;
  // [N, Eb, H, W, 8]: its size at least, a symbolic dim (a dynamic batch) counted as 1.
  const TypeInfo* y = ed.TensorType(n.outputs[0]);
  if (!opt::IsFloatWithRank(y) || y->shape->size() != 5) return false;
  int64_t bytes = static_cast<int64_t>(sizeof(float));
  for (const Dim& d : *y->shape) bytes *= d.known() ? d.value : 1;
  return bytes > kLargerThan;
}

// A blocked 3x3 depthwise conv over E channels, stride 1 or 2, pads of at
// most 1, no residual, with constant weights [E, 1, 3, 3].
bool DepthwiseConv(const GraphEditor& ed, const Node& n, int64_t E) {
  if (!IsBlockedConv(n) || n.inputs.size() > 3 || !DefaultLayouts(n)) return false;
  if (IntOr(n, "channels", -1) != E || IntOr(n, "group", 1) != E) return false;
  const Tensor w = ed.Constant(n.inputs[1]);
  if (!opt::IsFloatTensor(w) || w.dims() != std::vector<int64_t>{E, 1, 3, 3}) return false;
  const bool stride_ok = AllEqual(n, "strides", 1, 2) || AllEqual(n, "strides", 2, 2);
  const Attribute* pads = n.FindAttr("pads");
  bool pads_ok = !pads || pads->ints.size() == 4;
  if (pads)
    for (int64_t p : pads->ints) pads_ok = pads_ok && p >= 0 && p <= 1;
  return stride_ok && pads_ok && AllEqual(n, "dilations", 1, 2);
}

// The conv's bias, or a zero one of E values added to the graph.
std::string BiasOrZeros(GraphEditor& ed, const Node& n, int64_t E) {
  if (n.HasInput(2)) return n.inputs[2];
  return ed.AddInitializer(n.name + "_zero_bias", Tensor::FromVector<float>(std::vector<float>(E, 0.f), {E}));
}

// A blocked 1x1 stride-1 unpadded group-1 conv over E channels (a residual
// allowed), with constant weights [P, E, 1, 1]: a block's projection.
bool ProjectConv(const GraphEditor& ed, const Node& n, int64_t E) {
  if (!IsBlockedConv(n) || !DefaultLayouts(n) || IntOr(n, "group", 1) != 1 || IntOr(n, "channels", -1) != E)
    return false;
  const Tensor w = ed.Constant(n.inputs[1]);
  if (!opt::IsFloatTensor(w) || w.rank() != 4 || w.dim(0) <= 0 || w.dim(0) % kChannelBlock != 0) return false;
  if (w.dim(1) != E || w.dim(2) != 1 || w.dim(3) != 1) return false;
  return AllEqual(n, "strides", 1, 2) && AllEqual(n, "pads", 0, 4) && AllEqual(n, "dilations", 1, 2);
}

// The attributes `prefix` + activation / activation_params of n's activation.
void AddActivation(const Node& n, const std::string& prefix, std::vector<Attribute>* attrs) {
  for (const Attribute& a : n.attributes) {
    if (a.name != "activation" && a.name != "activation_params") continue;
    Attribute renamed = a;
    renamed.name = prefix + a.name;
    attrs->push_back(renamed);
  }
}

// The pair (and the projection reading the depthwise conv's output, where
// `project` >= 0) as one node, written where the last of them was (its
// inputs are all there by then: a residual may come from a node between).
void Fuse(GraphEditor& ed, size_t expand, size_t depthwise, int64_t project) {
  const Node& e = ed.node(expand);
  const Node& d = ed.node(depthwise);
  const int64_t E = ed.Constant(e.inputs[1]).dim(0);
  std::vector<std::string> inputs = {e.inputs[0], e.inputs[1], BiasOrZeros(ed, e, E), d.inputs[1],
                                     BiasOrZeros(ed, d, E)};
  std::vector<Attribute> attrs;
  for (const Attribute& a : e.attributes)
    if (a.name == "channels") attrs.push_back(a);
  AddActivation(e, "expand_", &attrs);
  for (const Attribute& a : d.attributes)
    if (a.name == "kernel_shape" || a.name == "strides" || a.name == "pads" || a.name == "dilations" ||
        a.name == "activation" || a.name == "activation_params")
      attrs.push_back(a);
  size_t at = depthwise;
  if (project >= 0) {
    at = static_cast<size_t>(project);
    const Node& p = ed.node(at);
    inputs.push_back(p.inputs[1]);
    inputs.push_back(BiasOrZeros(ed, p, ed.Constant(p.inputs[1]).dim(0)));
    if (p.HasInput(3)) inputs.push_back(p.inputs[3]);
    AddActivation(p, "project_", &attrs);
    ed.RemoveNode(depthwise);
  }
  ed.RewriteAs(at, kNeeDomain, "BlockedExpandDepthwise", inputs, std::move(attrs));
  ed.RemoveNode(expand);
}

// The projection reading the depthwise conv's output (its only reader, as
// its input), or -1. It joins whenever the pair is fused: MobileNetV2 at
// batch 8, all sixteen projections joined, ran 0.97-0.98 of the time with
// only the four whose depthwise output passes 4 MiB joined, and at batch 1
// the three that join ran 0.98-1.02 of the time without them.
int64_t Projection(const GraphEditor& ed, const Node& depthwise, int64_t E) {
  const int64_t reader = opt::SoleConsumer(ed, depthwise.outputs[0]);
  if (reader < 0) return -1;
  const Node& p = ed.node(static_cast<size_t>(reader));
  return p.inputs[0] == depthwise.outputs[0] && ProjectConv(ed, p, E) ? reader : -1;
}

}  // namespace

Status FuseBlockedExpandDepthwise(Graph& graph, const CheckedGraph& checked, bool* changed) {
  *changed = false;
  if (HostIsaLevel() < CpuIsaLevel::kAvx2) return Status::Ok();
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order) {
    if (ed.removed(index) || !IsBlockedConv(ed.node(index))) continue;
    const int64_t producer = ed.Producer(ed.node(index).inputs[0]);
    if (producer < 0 || ed.removed(static_cast<size_t>(producer))) continue;
    const Node& e = ed.node(static_cast<size_t>(producer));
    if (!ExpandConv(ed, e) || !ed.OnlyUsedBy(e.outputs[0], index)) continue;
    const int64_t E = ed.Constant(e.inputs[1]).dim(0);
    if (!DepthwiseConv(ed, ed.node(index), E)) continue;
    Fuse(ed, static_cast<size_t>(producer), index, Projection(ed, ed.node(index), E));
  }
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
