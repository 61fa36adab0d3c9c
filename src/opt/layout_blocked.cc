// Level-2 layout pass: runs of convolutions in nee's channel-blocked layout
// (ops/blocked_conv.h). A blocked tensor keeps a pixel's eight channels in
// one vector, so a pointwise conv is a GEMM whose input is read where it lies
// and whose output tiles are stored whole, with bias and activation applied
// in registers, and a depthwise conv (any stride) is plain vector arithmetic,
// with no transposes or gathers; in NCHW both pay for those (MobileNetV2 on
// AVX2: its stride-2 depthwise convs 1.7x and its pointwise convs 1.1x slower
// than ONNX Runtime's blocked kernels).
//
// Conv and com.microsoft FusedConv nodes of these kinds become BlockedConv:
//   - pointwise: 1x1, stride 1, no padding, group 1;
//   - depthwise: 3x3, stride 1 or 2, padding 1, one channel per group (5x5
//     and 7x7 too on AVX2 and AVX-512 hosts, pads of at most half the kernel);
// with float32 input and output whose channel counts are known (batch, height
// and width may be symbolic: the kernels read them at run time; pads given or
// VALID where the input's size is not known), 2-D, dilation 1, constant
// weights, and input and output channels multiples of 8 (no padding lanes).
// Two more kinds join a run, on hosts with AVX2 or AVX-512 (the stem
// kernels, ep/cpu/blocked_stem_avx512.h and blocked_stem_avx2.h, make them pay):
//   - a stem: a group-1 conv over few input channels (not a multiple of 8, at
//     most 16: a CNN's first conv on RGB) becomes a BlockedConv reading its
//     NCHW input (input_layout = "nchw"), so its output needs no ToBlocked;
//   - MaxPool (2-D, channels multiples of 8, no Indices)
//     becomes BlockedMaxPool, e.g. ResNet's between its stem and first stage.
// A stem joins the run its output feeds, a MaxPool (only one that feeds a
// blocked conv or Concat) the runs on both sides. Also on these hosts, ops
// that give the blocked result when run unchanged on blocked tensors link
// runs: a Concat along channels, an Add of equal shapes, a nearest Resize by
// constant scales (its scales given the lanes' axis), all on channels that
// fill whole blocks, and only where a blocked node reads their output. So
// YOLO's CSP blocks (1x1 branches concatenated, residual Adds), its SPPF and
// its upsampling neck stay blocked, and its stride-2 convs with them. And
// group-1 3x3 stride-1 convs (Winograd, reading and writing the layout) join
// the runs they read from or feed on AVX2 and AVX-512 hosts, so ResNet's and
// YOLO's bottlenecks need no reorders.
// A GlobalAveragePool of a converted conv's output reads its blocked twin
// (BlockedGlobalAveragePool), so a CNN's last feature map needs no FromBlocked.
// On AVX2 and AVX-512 hosts a pointwise conv whose only reader transposes its channels
// behind the pixels (a detector head: ChannelsLastReader) joins the run it
// reads from and writes channels last (output_layout = "nhwc").
// Only connected runs of at least kMinRun such nodes (linked through their
// input or residual) are converted: each value entering a run is reordered
// once (ToBlocked) and each value leaving it once (FromBlocked), which a lone
// conv would not repay. A converted conv's NCHW output is still produced (by a
// FromBlocked) for any reader outside the run; dead-node elimination drops it
// when no one reads it.
#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "base/cpu_isa.h"
#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/blocked_conv.h"
#include "ops/nn_util.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {
namespace {
using opt::GraphEditor;
using opt::IntAttr;
using opt::IntsAttr;

constexpr size_t kMinRun = 3;

bool IsConvNode(const Node& n) {
  return (n.domain.empty() && n.op_type == "Conv") || (n.domain == opt::kMicrosoftDomain && n.op_type == "FusedConv");
}

// What a candidate becomes: a BlockedConv on blocked input, a BlockedConv on
// its NCHW input (a stem), a BlockedMaxPool, or a kept op: a Concat along
// channels, an Add of equal shapes (joins: BlockableJoin) or a nearest Resize
// (BlockableResize), which stay the same ONNX ops, run on the blocked tensors.
enum class Kind { kConv, kStem, kMaxPool, kJoin, kResize, kSplit, kChannelsLast };

// The ops a run keeps as they are, on blocked tensors: they only copy, add or
// apply a function to each element, and repay no reorders of their own.
bool KeptOp(Kind kind) { return kind == Kind::kJoin || kind == Kind::kResize || kind == Kind::kSplit; }

// The one reader of a pointwise conv's output that wants its channels last:
// a Transpose (or TransposeColumnMap) moving them behind the pixels, either
// directly (perm [0, 2, 3, 1]) or after a Reshape that splits the channels
// into [A1, .., Ak] (a detector head's [1, 255, H, W] -> [1, 3, 85, H, W]
// then [0, 1, 3, 4, 2]). With the conv writing [N, H, W, M] instead, the
// Reshape splits the last axis ([N, H, W, A1, .., Ak]) and the transpose's
// permutation is renumbered to the new axes; where that keeps the last axis
// in place, the transpose only moves whole rows of the innermost channels
// (85 floats) instead of gathering every element across a plane.
struct ChannelsLastReader {
  int64_t reshape = -1;         // the Reshape's node index, or -1
  std::vector<int64_t> shape;   // its new target shape
  size_t transpose = 0;         // the Transpose's node index
  std::vector<int64_t> perm;    // its new permutation
};

// The explicit window of a blockable node, when it is one (see the header).
struct Candidate {
  size_t node;
  Kind kind = Kind::kConv;
  int64_t C = 0, M = 0, group = 1;
  nn::WindowSpec spec;
  std::string z;  // FusedConv's residual input, or ""
  // Whether it repays a run's reorders: not a stride-1 3x3 conv, which
  // Winograd computes as fast on NCHW (the blocked one reorders each block
  // of rows in cache instead, a pass about as costly as ToBlocked's), so it
  // only joins runs that others make (InLongRuns).
  bool repays = true;
  std::vector<float> scales;  // a Resize's scales, NCHW
  std::vector<int64_t> split;  // a Split's output channels
  ChannelsLastReader reader;  // kChannelsLast's
};

// Whether the conv's activation is one the direct and stem tiles apply in
// registers (ep/cpu/blocked_tile_avx512.h's InRegisters): none, Relu, Clip,
// SiLU or HardSwish.
bool TilesFinish(const Node& n) {
  const Attribute* act = n.FindAttr("activation");
  const std::string kind = act ? act->s : "";
  return kind.empty() || kind == "Relu" || kind == "Clip" || kind == "Silu" || kind == "HardSwish";
}

// Group-1 convs that the CPU provider computes in the blocked layout
// (elsewhere only the reference would, so they stay NCHW there): on AVX2 and
// AVX-512, stride 2 (ResNet's and YOLO's downsampling 3x3 and 1x1) directly
// (ep/cpu/blocked_direct_avx512.h, blocked_direct_avx2.h; a 1x1 as the
// pointwise conv of the pixels it reads: with both blocked, ResNet-50 on AVX2
// has 2 ToBlocked and 1 FromBlocked instead of 8 and 7); and 3x3 stride 1 by
// Winograd reading and writing the layout (ep/cpu/conv_winograd.h; fewer
// multiplies: ResNet-50's 25% faster than ONNX Runtime's direct NCHWc ones),
// so no FromBlocked and ToBlocked sit around them (on AVX2, ResNet-50's
// bottlenecks had one of each around every 3x3 conv: 33 reorders a run).
// Winograd takes 16 channels and more on each side; only the activations
// the direct tiles finish in registers.
bool DirectOrWinograd(const Node& n, const Candidate& c, const std::vector<int64_t>& kernel) {
  if (HostIsaLevel() < CpuIsaLevel::kAvx2 || c.group != 1) return false;
  const bool winograd = c.spec.strides[0] == 1 && kernel == std::vector<int64_t>{3, 3} && c.C >= 16 && c.M >= 16;
  const bool direct = c.spec.strides[0] == 2;
  if ((!direct && !winograd) || c.spec.dilations != std::vector<int64_t>{1, 1}) return false;
  for (size_t d = 0; d < 2; ++d)
    if (c.spec.pads[d] >= kernel[d] || c.spec.pads[d + 2] >= kernel[d]) return false;
  return TilesFinish(n);
}

// A stem conv that the stem kernels compute (ep/cpu/blocked_stem_avx512.h, blocked_stem_avx2.h):
// group 1, equal strides of 1 or 2, no residual, an activation it finishes.
bool StemConv(const Node& n, const Candidate& c, const std::vector<int64_t>& kernel) {
  if (HostIsaLevel() < CpuIsaLevel::kAvx2 || c.group != 1 || c.C > 2 * kChannelBlock || !c.z.empty()) return false;
  if (c.spec.dilations != std::vector<int64_t>{1, 1} || c.spec.strides[0] != c.spec.strides[1]) return false;
  if (c.spec.strides[0] != 1 && c.spec.strides[0] != 2) return false;
  for (size_t d = 0; d < 2; ++d)
    if (c.spec.pads[d] >= kernel[d] || c.spec.pads[d + 2] >= kernel[d]) return false;
  return TilesFinish(n);
}

// opt::SoleConsumer of `value`, when it reads it as its first input; -1 otherwise.
int64_t SoleReader(const GraphEditor& ed, const std::string& value) {
  const int64_t reader = opt::SoleConsumer(ed, value);
  return reader >= 0 && ed.node(static_cast<size_t>(reader)).inputs[0] == value ? reader : -1;
}

// Whether the conv output `y` (static NCHW dims) has a ChannelsLastReader
// (see there), which is then filled in.
bool FindChannelsLastReader(GraphEditor& ed, const std::string& y, const std::vector<int64_t>& dims,
                            ChannelsLastReader* r) {
  int64_t reader = SoleReader(ed, y);
  if (reader < 0) return false;
  std::vector<int64_t> split = {dims[1]};  // the channels' sub-axes A1..Ak
  const Node* t = &ed.node(static_cast<size_t>(reader));
  if (t->domain.empty() && t->op_type == "Reshape") {
    std::vector<int64_t> out;
    if (t->inputs.size() != 2 || !opt::StaticDims(ed.TensorType(t->outputs[0]), &out) || out.size() < 4) return false;
    const size_t k = out.size() - 3;
    if (out[0] != dims[0] || out[k + 1] != dims[2] || out[k + 2] != dims[3]) return false;
    split.assign(out.begin() + 1, out.begin() + 1 + static_cast<int64_t>(k));
    int64_t product = 1;
    for (int64_t a : split) product *= a;
    if (product != dims[1]) return false;
    r->reshape = reader;
    r->shape = {dims[0], dims[2], dims[3]};
    r->shape.insert(r->shape.end(), split.begin(), split.end());
    reader = SoleReader(ed, t->outputs[0]);
    if (reader < 0) return false;
    t = &ed.node(static_cast<size_t>(reader));
  }
  const bool transpose = (t->domain.empty() && t->op_type == "Transpose") ||
                         (t->domain == kNeeDomain && t->op_type == "TransposeColumnMap");
  const Attribute* perm = t->FindAttr("perm");
  const size_t k = split.size(), rank = k + 3;
  if (!transpose || !perm || perm->ints.size() != rank) return false;
  // Old axes [N, A1..Ak, H, W] as numbered in [N, H, W, A1..Ak].
  std::vector<int64_t> renumber(rank);
  renumber[0] = 0;
  for (size_t i = 1; i <= k; ++i) renumber[i] = static_cast<int64_t>(i) + 2;
  renumber[k + 1] = 1;
  renumber[k + 2] = 2;
  r->perm.clear();
  std::vector<bool> seen(rank, false);
  for (int64_t axis : perm->ints) {
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(axis)]) return false;
    seen[static_cast<size_t>(axis)] = true;
    r->perm.push_back(renumber[static_cast<size_t>(axis)]);
  }
  r->transpose = static_cast<size_t>(reader);
  return r->perm.back() == static_cast<int64_t>(rank) - 1;  // it pays where rows of the last axis stay whole
}

// The 4-D float shape of a value whose channel count (dim 1) is known. Its
// batch, height and width may be symbolic (a model exported with dynamic
// axes): the blocked kernels read those from the tensors at run time.
bool ChannelsKnown(const TypeInfo* type, Shape* shape) {
  if (!opt::IsFloatWithRank(type) || type->shape->size() != 4 || !(*type->shape)[1].known()) return false;
  *shape = *type->shape;
  return true;
}

// Resolves the window's pads over x's height and width, and checks that the
// window gives y's where both sizes are known. Where the input's size is not
// known only explicit pads (auto_pad NOTSET or VALID) can be written into the
// blocked node: SAME pads depend on it.
bool ResolveWindowPads(const Node& n, nn::WindowSpec& s, const Shape& x, const Shape& y, bool same_uses_dilation) {
  for (size_t d = 0; d < 2; ++d) {
    if (!x[2 + d].known()) {
      if (s.auto_pad == "SAME_UPPER" || s.auto_pad == "SAME_LOWER") return false;
      if (s.auto_pad == "VALID") s.pads[d] = s.pads[2 + d] = 0;
      continue;
    }
    Result<int64_t> out = nn::WindowOutputDim(n, s, d, x[2 + d].value, same_uses_dilation);  // resolves auto_pad
    if (!out.ok() || (y[2 + d].known() && out.value() != y[2 + d].value)) return false;
  }
  return true;
}

// A 2-D float MaxPool without Indices, on channels that fill whole blocks.
bool BlockableMaxPool(GraphEditor& ed, size_t index, Candidate* c) {
  const Node& n = ed.node(index);
  if (!n.domain.empty() || n.op_type != "MaxPool" || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  // Where the stems stay NCHW (below AVX2), a blocked pool would only move
  // the run's ToBlocked before it, onto its four times larger input.
  if (HostIsaLevel() < CpuIsaLevel::kAvx2) return false;
  Shape x, y;
  if (!ChannelsKnown(ed.TensorType(n.inputs[0]), &x) || !ChannelsKnown(ed.TensorType(n.outputs[0]), &y)) return false;
  Result<nn::WindowSpec> spec = nn::ReadWindowSpec(n, 2, nullptr);
  if (!spec.ok()) return false;
  nn::WindowSpec s = spec.value();
  if (!ResolveWindowPads(n, s, x, y, false)) return false;
  const int64_t C = x[1].value;
  if (s.dilations != std::vector<int64_t>{1, 1} || s.ceil_mode || C % kChannelBlock != 0 || y[1].value != C)
    return false;
  c->node = index;
  c->kind = Kind::kMaxPool;
  c->C = c->M = C;
  s.auto_pad = "NOTSET";
  c->spec = s;
  return true;
}

// A value of one element (all dims 1, or none): broadcast over any tensor,
// it is the same operand for the blocked one.
bool SingleElement(const TypeInfo* type) {
  std::vector<int64_t> dims;
  return opt::IsFloatWithRank(type) && opt::StaticDims(type, &dims) &&
         std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d == 1; });
}

// A Concat along channels or an Add, Mul, Sub or Div, all of whose operands
// have channels that fill whole blocks (or, for the arithmetic, are single
// values: PP-OCR's decomposed HardSwish, x * Clip(x + 3, 0, 6) / 6, and its
// scalar affine steps after activations): the same op on the blocked tensors
// [N, Cb, H, W, 8] gives the blocked result (a Concat along axis 1 there
// appends whole blocks; an Add is elementwise on one layout). Joining
// a run through them keeps a CSP block's branches (YOLO's C3: two convs
// concatenated, a bottleneck's residual Add) blocked, where they went
// FromBlocked into an NCHW Concat and ToBlocked again after it.
bool BlockableJoin(GraphEditor& ed, size_t index, Candidate* c) {
  const Node& n = ed.node(index);
  const bool concat = n.op_type == "Concat";
  const bool binary = n.op_type == "Add" || n.op_type == "Mul" || n.op_type == "Sub" || n.op_type == "Div";
  if (!n.domain.empty() || (!concat && !binary) || n.outputs.size() != 1 || n.inputs.empty()) return false;
  // Only where blocked runs reach them: the stride-2 and stem convs that
  // link YOLO's blocks are blocked on AVX2 and AVX-512 hosts (on AVX2,
  // YOLO with its joins blocked: 0.96x the time with them NCHW, 1 thread).
  if (HostIsaLevel() < CpuIsaLevel::kAvx2) return false;
  Shape y;
  if (!ChannelsKnown(ed.TensorType(n.outputs[0]), &y) || y[1].value % kChannelBlock != 0) return false;
  if (binary && n.inputs.size() != 2) return false;
  if (concat) {
    Result<int64_t> axis = n.GetInt("axis", 0);
    if (!axis.ok() || (axis.value() != 1 && axis.value() != -3)) return false;
  }
  // An Add's (Mul's, ...) operands have the output's channels (none
  // broadcast along them), so any broadcasting over N, H and W is the same
  // on the blocked tensors, whose dims 0, 2 and 3 are those (an SE block's
  // Mul by [N, C, 1, 1] scales); a Concat's operands agree on N, H and W, or
  // the op fails at run time in either layout.
  for (const std::string& in : n.inputs) {
    if (binary && !in.empty() && SingleElement(ed.TensorType(in))) continue;
    Shape x;
    if (in.empty() || !ChannelsKnown(ed.TensorType(in), &x) || x[1].value % kChannelBlock != 0) return false;
    if (binary && x[1].value != y[1].value) return false;
  }
  c->node = index;
  c->kind = Kind::kJoin;
  c->C = c->M = y[1].value;
  return true;
}

// Activations that act on each element alone (Clip's bounds are scalars):
// the same op on the blocked tensor gives the blocked result. Where a conv's
// output goes through an Add and then one of these (a ResNet block whose
// residual Add the conv could not take as its Z, its operands' sizes not
// known to match: height and width symbolic), they keep the run going.
bool ElementwiseActivation(const Node& n) {
  static const char* const kOps[] = {"Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
                                     "Tanh", "Elu", "Selu", "Softplus", "Mish", "Gelu"};
  if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.empty()) return false;
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return n.op_type == op; });
}

bool BlockableActivation(GraphEditor& ed, size_t index, Candidate* c) {
  const Node& n = ed.node(index);
  if (!ElementwiseActivation(n) || HostIsaLevel() < CpuIsaLevel::kAvx2) return false;  // as the joins
  Shape x, y;
  if (!ChannelsKnown(ed.TensorType(n.inputs[0]), &x) || !ChannelsKnown(ed.TensorType(n.outputs[0]), &y)) return false;
  if (x[1].value % kChannelBlock != 0 || y[1].value != x[1].value) return false;
  for (size_t i = 1; i < n.inputs.size(); ++i) {  // Clip's min and max
    const TypeInfo* bound = n.inputs[i].empty() ? nullptr : ed.TensorType(n.inputs[i]);
    if (!n.inputs[i].empty() && (!bound || !bound->shape || !bound->shape->empty())) return false;
  }
  c->node = index;
  c->kind = Kind::kJoin;
  c->C = c->M = x[1].value;
  return true;
}

// A Split along channels into parts that fill whole blocks (YOLOv8's C2f
// blocks split a conv's output in two): the same Split of the blocked tensor
// into as many blocks per part gives each part's blocked twin.
bool BlockableSplit(GraphEditor& ed, size_t index, Candidate* c) {
  const Node& n = ed.node(index);
  if (!n.domain.empty() || n.op_type != "Split" || n.inputs.empty() || n.outputs.empty()) return false;
  if (HostIsaLevel() < CpuIsaLevel::kAvx2) return false;  // as the joins
  Shape x;
  if (!ChannelsKnown(ed.TensorType(n.inputs[0]), &x) || x[1].value % kChannelBlock != 0) return false;
  Result<int64_t> axis = n.GetInt("axis", 0);
  if (!axis.ok() || (axis.value() != 1 && axis.value() != -3)) return false;
  std::vector<int64_t> split;
  int64_t total = 0;
  for (const std::string& out : n.outputs) {
    Shape y;
    if (out.empty() || !ChannelsKnown(ed.TensorType(out), &y) || y[1].value % kChannelBlock != 0) return false;
    split.push_back(y[1].value);
    total += y[1].value;
  }
  if (total != x[1].value) return false;
  c->node = index;
  c->kind = Kind::kSplit;
  c->C = c->M = x[1].value;
  c->split = std::move(split);
  return true;
}

// A nearest Resize of H and W (YOLO's and FPNs' upsampling) by constant
// scales: on the blocked tensor the same Resize with scales [1, 1, sh, sw, 1]
// picks the same source pixel for each output pixel (nearest sampling along
// an axis depends only on that axis), and copies its eight lanes.
bool BlockableResize(GraphEditor& ed, size_t index, Candidate* c) {
  const Node& n = ed.node(index);
  if (!n.domain.empty() || n.op_type != "Resize" || n.outputs.size() != 1) return false;
  if (HostIsaLevel() < CpuIsaLevel::kAvx2) return false;  // as the joins
  // The opset-11+ form with constant scales and no roi or sizes.
  if (n.inputs.size() < 3 || n.inputs.size() > 4 || !n.inputs[1].empty() || n.inputs[2].empty()) return false;
  if (n.inputs.size() == 4 && !n.inputs[3].empty()) return false;
  const Attribute* mode = n.FindAttr("mode");
  const Attribute* coord = n.FindAttr("coordinate_transformation_mode");
  if ((mode && mode->s != "nearest") || (coord && coord->s == "tf_crop_and_resize") || n.FindAttr("axes"))
    return false;
  const Tensor scales = ed.Constant(n.inputs[2]);
  if (!opt::IsFloatTensor(scales) || scales.num_elements() != 4) return false;
  const float* sc = scales.data<float>();
  if (sc[0] != 1.f || sc[1] != 1.f) return false;
  Shape x, y;
  if (!ChannelsKnown(ed.TensorType(n.inputs[0]), &x) || !ChannelsKnown(ed.TensorType(n.outputs[0]), &y)) return false;
  if (x[1].value % kChannelBlock != 0 || y[1].value != x[1].value) return false;
  c->node = index;
  c->kind = Kind::kResize;
  c->C = c->M = x[1].value;
  c->scales.assign(sc, sc + 4);
  return true;
}

bool Blockable(GraphEditor& ed, size_t index, Candidate* c) {
  const Node& n = ed.node(index);
  if (BlockableMaxPool(ed, index, c) || BlockableJoin(ed, index, c) || BlockableResize(ed, index, c) ||
      BlockableActivation(ed, index, c) || BlockableSplit(ed, index, c))
    return true;
  if (!IsConvNode(n) || n.outputs.size() != 1 || n.inputs.size() < 2 || n.inputs.size() > 4) return false;
  Shape x, y;
  if (!ChannelsKnown(ed.TensorType(n.inputs[0]), &x) || !ChannelsKnown(ed.TensorType(n.outputs[0]), &y)) return false;
  const Tensor w = ed.Constant(n.inputs[1]);
  if (!opt::IsFloatTensor(w) || w.rank() != 4) return false;
  if (n.HasInput(2) && !opt::IsFloatWithRank(ed.TensorType(n.inputs[2]))) return false;
  // FusedConv's residual: the output's shape, which the kernels check at run
  // time in either layout (it is never broadcast).
  Shape z;
  if (n.HasInput(3) && (!ChannelsKnown(ed.TensorType(n.inputs[3]), &z) || z[1].value != y[1].value)) return false;
  const std::vector<int64_t> kernel = {w.dim(2), w.dim(3)};
  Result<nn::WindowSpec> spec = nn::ReadWindowSpec(n, 2, &kernel);
  if (!spec.ok() || spec.value().kernel != kernel) return false;
  nn::WindowSpec s = spec.value();
  if (!ResolveWindowPads(n, s, x, y, true)) return false;
  Result<int64_t> group = n.GetInt("group", 1);
  if (!group.ok()) return false;
  c->node = index;
  c->C = x[1].value;
  c->M = w.dim(0);
  c->group = group.value();
  c->spec = s;
  c->z = n.HasInput(3) ? n.inputs[3] : "";
  // A pointwise conv on blocked input whose reader wants channels last (any M: the AVX-512 pair tiles store
  // it, masked past M, the AVX2 tiles through a staging buffer); it joins a run it reads from. (Static shapes
  // only: the reader's Reshape is rewritten with the new dims.)
  const std::vector<int64_t> ones = {1, 1};
  const bool pointwise_1x1 = c->group == 1 && kernel == ones && s.strides == ones && s.dilations == ones &&
                             std::all_of(s.pads.begin(), s.pads.end(), [](int64_t p) { return p == 0; });
  std::vector<int64_t> y_dims;
  if (pointwise_1x1 && c->z.empty() && c->C % kChannelBlock == 0 && y[1].value == c->M && ShapeIsStatic(y, &y_dims) &&
      HostIsaLevel() >= CpuIsaLevel::kAvx2 && FindChannelsLastReader(ed, n.outputs[0], y_dims, &c->reader)) {
    c->kind = Kind::kChannelsLast;
    c->repays = false;
    return true;
  }
  if (c->M % kChannelBlock != 0 || y[1].value != c->M) return false;
  if (c->C % kChannelBlock != 0) {
    c->kind = Kind::kStem;
    return StemConv(n, *c, kernel);
  }
  if (s.dilations != std::vector<int64_t>{1, 1} || s.strides[0] != s.strides[1]) return false;
  const bool no_pads = std::all_of(s.pads.begin(), s.pads.end(), [](int64_t p) { return p == 0; });
  const bool pads_one = std::all_of(s.pads.begin(), s.pads.end(), [](int64_t p) { return p == 1; });
  const bool pointwise = c->group == 1 && kernel == std::vector<int64_t>{1, 1} && s.strides[0] == 1 && no_pads;
  // Depthwise: 3x3 with pads of 1, or, where the host has AVX2 (ep/cpu/depthwise_blocked_kxk.h), 5x5 and 7x7
  // with pads of at most half the kernel (MobileNetV3's and EfficientNet's).
  const int64_t k = kernel[0];
  const bool pads_within_half =
      std::all_of(s.pads.begin(), s.pads.end(), [&](int64_t p) { return p >= 0 && p <= k / 2; });
  const bool depthwise_kernel = kernel[1] == k && ((k == 3 && pads_one) ||
                                                   ((k == 5 || k == 7) && pads_within_half &&
                                                    HostIsaLevel() >= CpuIsaLevel::kAvx2));
  const bool depthwise =
      c->group == c->C && c->M == c->C && depthwise_kernel && (s.strides[0] == 1 || s.strides[0] == 2);
  c->repays = !(c->group == 1 && kernel == std::vector<int64_t>{3, 3} && s.strides[0] == 1);
  return pointwise || depthwise || DirectOrWinograd(n, *c, kernel);
}

// Candidates joined through their input or residual, by union-find.
struct Runs {
  std::vector<size_t> parent;
  size_t Find(size_t i) { return parent[i] == i ? i : parent[i] = Find(parent[i]); }
  void Join(size_t a, size_t b) { parent[Find(a)] = Find(b); }
};

std::vector<bool> InLongRuns(GraphEditor& ed, const std::vector<Candidate>& cands) {
  std::unordered_map<size_t, size_t> slot;  // node index -> candidate
  for (size_t i = 0; i < cands.size(); ++i) slot[cands[i].node] = i;
  // Which candidate reads which: (reader, producer) pairs.
  std::vector<std::pair<size_t, size_t>> links;
  for (size_t i = 0; i < cands.size(); ++i) {
    const Node& n = ed.node(cands[i].node);
    std::vector<std::string> read = {n.inputs[0], cands[i].z};
    if (cands[i].kind == Kind::kJoin) read = n.inputs;
    for (const std::string& in : read) {
      if (in.empty() || (cands[i].kind == Kind::kStem && in == n.inputs[0])) continue;  // a stem reads NCHW
      const int64_t producer = ed.Producer(in);
      auto it = producer < 0 ? slot.end() : slot.find(static_cast<size_t>(producer));
      if (it != slot.end()) links.emplace_back(i, it->second);
    }
  }
  // Runs are linked through the candidates that repay reorders (and joins);
  // a stride-1 3x3 conv does not link two runs, or make one of pointwise
  // convs that would otherwise each stay NCHW.
  Runs runs{std::vector<size_t>(cands.size())};
  std::iota(runs.parent.begin(), runs.parent.end(), size_t{0});
  for (const auto& [reader, producer] : links)
    if (cands[reader].repays && cands[producer].repays) runs.Join(reader, producer);
  // A run's length counts its convs and pools: joins and resizes only copy
  // or add, and repay no reorders of their own.
  std::vector<size_t> size(cands.size(), 0);
  for (size_t i = 0; i < cands.size(); ++i)
    if (!KeptOp(cands[i].kind) && cands[i].repays) ++size[runs.Find(i)];
  std::vector<bool> keep(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) keep[i] = cands[i].repays && size[runs.Find(i)] >= kMinRun;
  // A stride-1 3x3 conv joins a run it reads from or feeds (ResNet's and
  // YOLO's bottlenecks): blocked, it saves the reorders around it.
  std::vector<bool> joins_run = keep;
  for (const auto& [reader, producer] : links) {
    if (!cands[reader].repays && keep[producer]) joins_run[reader] = true;
    if (!cands[producer].repays && keep[reader]) joins_run[producer] = true;
  }
  return joins_run;
}

// MaxPool candidates that feed a blocked conv directly (ResNet's, before its
// first stage), and the rest. A pool read only by NCHW readers or other
// pools (YOLO's SPPF chain into a Concat) would need a FromBlocked of its own
// output, where NCHW it shares its producer's one and runs separably
// (ep/cpu/pool_fast.cc).
std::vector<Candidate> WithoutPoolsOutsideRuns(GraphEditor& ed, std::vector<Candidate> cands) {
  std::unordered_set<std::string> conv_inputs;  // and joins' inputs (YOLO's SPPF pools into a blocked Concat)
  for (const Candidate& c : cands) {
    if (c.kind == Kind::kJoin || c.kind == Kind::kSplit)
      conv_inputs.insert(ed.node(c.node).inputs.begin(), ed.node(c.node).inputs.end());
    if (c.kind != Kind::kConv) continue;
    conv_inputs.insert(ed.node(c.node).inputs[0]);
    if (!c.z.empty()) conv_inputs.insert(c.z);
  }
  std::vector<Candidate> kept;
  for (Candidate& c : cands)
    if (c.kind != Kind::kMaxPool || conv_inputs.count(ed.node(c.node).outputs[0])) kept.push_back(std::move(c));
  return kept;
}

// Kept ops (joins, resizes) whose output no other candidate reads: blocked,
// they would need a FromBlocked of their output, as large as (a Concat) or
// larger than (a Resize) what they read, so they stay NCHW. Dropping one can
// leave another without a blocked reader: repeated until none is dropped.
std::vector<Candidate> WithoutDeadEndKeptOps(GraphEditor& ed, std::vector<Candidate> cands) {
  for (bool dropped = true; dropped;) {
    std::unordered_set<std::string> read;
    for (const Candidate& c : cands) {
      const Node& n = ed.node(c.node);
      if (KeptOp(c.kind)) read.insert(n.inputs.begin(), n.inputs.end());
      else read.insert(n.inputs[0]);
      if (!c.z.empty()) read.insert(c.z);
    }
    auto dead_end = [&](const Candidate& c) {
      const std::vector<std::string>& outs = ed.node(c.node).outputs;
      return KeptOp(c.kind) &&
             std::none_of(outs.begin(), outs.end(), [&](const std::string& y) { return read.count(y) > 0; });
    };
    const size_t before = cands.size();
    cands.erase(std::remove_if(cands.begin(), cands.end(), dead_end), cands.end());
    dropped = cands.size() != before;
  }
  return cands;
}

Node LayoutNode(const std::string& op, const std::string& name, const std::string& in, const std::string& out) {
  Node node;
  node.name = name;
  node.op_type = op;
  node.domain = kNeeDomain;
  node.inputs = {in};
  node.outputs = {out};
  return node;
}

class Blocker {
 public:
  explicit Blocker(GraphEditor& ed) : ed_(ed) {}

  void Convert(const Candidate& c) {
    if (c.kind == Kind::kJoin) return ConvertJoin(c);
    if (c.kind == Kind::kResize) return ConvertResize(c);
    if (c.kind == Kind::kSplit) return ConvertSplit(c);
    Node& n = ed_.node(c.node);
    std::vector<Attribute> attrs = {IntAttr("channels", c.C), IntsAttr("kernel_shape", c.spec.kernel),
                                    IntsAttr("strides", c.spec.strides), IntsAttr("pads", c.spec.pads)};
    std::vector<std::string> inputs;
    if (c.kind == Kind::kMaxPool) {
      inputs = {Blocked(n.inputs[0])};
    } else {
      // A stem reads its NCHW input where it lies.
      inputs = {c.kind == Kind::kStem ? n.inputs[0] : Blocked(n.inputs[0]), n.inputs[1],
                n.HasInput(2) ? n.inputs[2] : ""};
      if (!c.z.empty()) inputs.push_back(Blocked(c.z));
      if (inputs.back().empty()) inputs.pop_back();
      attrs.push_back(IntAttr("group", c.group));
      if (c.kind == Kind::kStem) attrs.push_back(opt::StringAttr("input_layout", "nchw"));
      if (c.kind == Kind::kChannelsLast) attrs.push_back(opt::StringAttr("output_layout", "nhwc"));
      for (const char* keep : {"activation", "activation_params"})
        if (const Attribute* a = n.FindAttr(keep)) attrs.push_back(*a);
    }
    ed_.RewriteAs(c.node, kNeeDomain, c.kind == Kind::kMaxPool ? "BlockedMaxPool" : "BlockedConv", inputs,
                  std::move(attrs));
    if (c.kind == Kind::kChannelsLast) return ChannelsLastOutput(c);
    BlockedOutput(c);
  }

 private:
  // A join keeps its op, now on its inputs' blocked twins (a Concat's axis
  // written as 1: a negative one would count from the blocked rank); an
  // activation on its first input's, its attributes and Clip's bounds kept.
  void ConvertJoin(const Candidate& c) {
    const Node& n = ed_.node(c.node);
    const bool activation = ElementwiseActivation(n);
    std::vector<std::string> inputs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const bool as_is = (activation && i > 0) || (n.op_type != "Concat" && SingleElement(ed_.TensorType(n.inputs[i])));
      inputs.push_back(as_is ? n.inputs[i] : Blocked(n.inputs[i]));
    }
    std::vector<Attribute> attrs;
    if (n.op_type == "Concat") attrs.push_back(IntAttr("axis", 1));
    if (activation) attrs = n.attributes;
    ed_.RewriteAs(c.node, "", n.op_type, inputs, std::move(attrs));
    BlockedOutput(c);
  }

  // A Resize keeps its attributes; its scales gain the lanes' axis (1).
  void ConvertResize(const Candidate& c) {
    const Node& n = ed_.node(c.node);
    std::vector<std::string> inputs = {Blocked(n.inputs[0]), "", ""};
    std::vector<float> scales = c.scales;
    scales.push_back(1.f);
    inputs[2] = ed_.AddInitializer(n.inputs[2] + "_blocked", Tensor::FromVector<float>(scales, {5}));
    std::vector<Attribute> attrs = ed_.node(c.node).attributes;
    ed_.RewriteAs(c.node, "", "Resize", inputs, std::move(attrs));
    BlockedOutput(c);
  }

  // A Split of the blocked input into as many blocks per part, the parts
  // given explicitly (as an input from opset 13 on, else as the attribute).
  void ConvertSplit(const Candidate& c) {
    const Node& n = ed_.node(c.node);
    std::vector<int64_t> blocks;
    for (int64_t channels : c.split) blocks.push_back(channels / kChannelBlock);
    std::vector<std::string> inputs = {Blocked(n.inputs[0])};
    std::vector<Attribute> attrs = {IntAttr("axis", 1)};
    if (ed_.checked().opsets[c.node] >= 13) {
      const int64_t parts = static_cast<int64_t>(blocks.size());
      inputs.push_back(ed_.AddInitializer(n.name + "_blocked_split", Tensor::FromVector<int64_t>(blocks, {parts})));
    } else {
      attrs.push_back(IntsAttr("split", blocks));
    }
    ed_.RewriteAs(c.node, "", "Split", inputs, std::move(attrs));
    for (size_t i = 0; i < c.split.size(); ++i) BlockedOutput(c, i, c.split[i]);
  }

  // The conv now writes [N, H, W, M] (a fresh value: its only reader changes
  // with it); the Reshape after it, if any, splits the last axis, and the
  // transpose takes the renumbered permutation (ChannelsLastReader).
  void ChannelsLastOutput(const Candidate& c) {
    const ChannelsLastReader& r = c.reader;
    const std::string y = ed_.FreshName(ed_.node(c.node).outputs[0] + "_nhwc");
    ed_.RenameOutput(c.node, 0, y);
    if (r.reshape >= 0) {
      const size_t reshape = static_cast<size_t>(r.reshape);
      const int64_t rank = static_cast<int64_t>(r.shape.size());
      ed_.SetInput(reshape, 1, ed_.AddInitializer(y + "_shape", Tensor::FromVector<int64_t>(r.shape, {rank})));
      ed_.RenameOutput(reshape, 0, ed_.FreshName(ed_.node(reshape).outputs[0] + "_nhwc"));
    }
    for (Attribute& a : ed_.node(r.transpose).attributes)
      if (a.name == "perm") a.ints = r.perm;
  }

  // The converted node writes the blocked twin of its output; a FromBlocked
  // right after it still writes the NCHW value, for readers outside the run.
  void BlockedOutput(const Candidate& c) { BlockedOutput(c, 0, c.M); }
  void BlockedOutput(const Candidate& c, size_t output, int64_t channels) {
    const std::string y = ed_.node(c.node).outputs[output], node_name = ed_.node(c.node).name;
    const std::string blocked = ed_.FreshName(y + "_blocked");
    ed_.SetOutput(c.node, output, blocked);
    Node back = LayoutNode("FromBlocked", ed_.FreshName(node_name + "_from_blocked"), blocked, y);
    back.attributes.push_back(IntAttr("channels", channels));
    ed_.InsertAfter(c.node, std::move(back));
    blocked_[y] = blocked;
  }

  // The blocked twin of an NCHW value: a converted conv's output, or a
  // ToBlocked made once, right after the value's producer.
  std::string Blocked(const std::string& value) {
    auto it = blocked_.find(value);
    if (it != blocked_.end()) return it->second;
    const std::string name = ed_.FreshName(value + "_blocked");
    Node to = LayoutNode("ToBlocked", ed_.FreshName(value + "_to_blocked"), value, name);
    const int64_t producer = ed_.Producer(value);
    if (producer >= 0) ed_.InsertAfter(static_cast<size_t>(producer), std::move(to));
    else ed_.InsertBefore(0, std::move(to));
    blocked_[value] = name;
    return name;
  }

  GraphEditor& ed_;
  std::unordered_map<std::string, std::string> blocked_;  // NCHW value -> its blocked twin

 public:
  // A 2-D GlobalAveragePool of a value with a blocked twin (a CNN's last conv output) becomes a
  // BlockedGlobalAveragePool reading the twin, which writes the pool's plain [N, C, 1, 1] output: no FromBlocked of
  // the feature map before it (dead-node elimination drops that when nothing else reads the NCHW value; at two
  // threads MobileNetV2's ran 31 us on a 7x7 map, one task of pixels reading half of them from the other core).
  void GlobalAveragePool(size_t index) {
    const Node& n = ed_.node(index);
    if (!n.domain.empty() || n.op_type != "GlobalAveragePool" || n.inputs.size() != 1 || n.outputs.size() != 1)
      return;
    auto it = blocked_.find(n.inputs[0]);
    Shape x;
    if (it == blocked_.end() || !ChannelsKnown(ed_.TensorType(n.inputs[0]), &x) || x[1].value % kChannelBlock != 0)
      return;
    ed_.RewriteAs(index, kNeeDomain, "BlockedGlobalAveragePool", {it->second}, {IntAttr("channels", x[1].value)});
  }
};

}  // namespace

Status BlockConvLayout(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  std::vector<Candidate> cands;
  for (size_t index : checked.order) {
    Candidate c;
    if (Blockable(ed, index, &c)) cands.push_back(c);
  }
  cands = WithoutDeadEndKeptOps(ed, std::move(cands));
  cands = WithoutPoolsOutsideRuns(ed, std::move(cands));
  const std::vector<bool> keep = InLongRuns(ed, cands);
  Blocker blocker(ed);
  for (size_t i = 0; i < cands.size(); ++i)  // in execution order: a conv's input is converted before it
    if (keep[i]) blocker.Convert(cands[i]);
  for (size_t index : checked.order) blocker.GlobalAveragePool(index);
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
