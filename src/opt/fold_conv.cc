// Level-2 folds into Conv / ConvTranspose with constant float weights:
//   Conv -> BatchNormalization (inference)   => Conv with scaled weights, shifted bias
//   Conv -> Mul(per-channel constant)        => Conv with scaled weights and bias
//   Conv -> Add/Sub(per-channel constant)    => Conv with shifted bias
//   Mul/Add/Sub(per-channel constant) -> Conv or FusedConv without padding
//                                            => the same with scaled weights / shifted bias
//                                               (a pass of its own, after fuse-conv-activation,
//                                               which would otherwise lose a written-out
//                                               HardSwish's division by 6 to it)
// The folded weights and bias are new initializers (the originals may be
// shared); the Conv takes over the consumer's output name. Arithmetic is in
// double, rounded once to float. One sweep in execution order folds a chain
// of them whatever its order: PP-OCRv5's detector head writes ConvTranspose
// -> Add(bias) -> BatchNormalization, whose normalization was left as an
// 11 ms pass of its own when the BatchNormalization folds ran before the
// Add folds.
#include <algorithm>
#include <cmath>

#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// A Conv or ConvTranspose whose weights (and bias, if any) are constant
// float tensors, with what the folds need to know about it.
struct FoldableConv {
  size_t index = 0;
  bool transpose = false;
  int64_t group = 1;
  int64_t out_channels = 0;
  Tensor weights;
  std::vector<double> bias;  // per output channel (zeros when the Conv has none)
};

bool MatchConv(GraphEditor& ed, size_t index, FoldableConv* conv) {
  const Node& node = ed.node(index);
  bool transpose = opt::IsOp(node, "ConvTranspose");
  const bool fused = node.op_type == "FusedConv" && node.domain == opt::kMicrosoftDomain;
  if (!opt::IsOp(node, "Conv") && !transpose && !fused) return false;
  if (node.outputs.size() != 1 || node.inputs.size() < 2) return false;
  Tensor w = ed.Constant(node.inputs[1]);
  if (!opt::IsFloatTensor(w) || w.rank() < 3) return false;
  auto group = node.GetInt("group", 1);
  if (!group.ok() || group.value() < 1) return false;
  int64_t out_channels = transpose ? w.dim(1) * group.value() : w.dim(0);
  if (transpose && w.dim(0) % group.value() != 0) return false;
  if (out_channels <= 0) return false;
  std::vector<double> bias(static_cast<size_t>(out_channels), 0.0);
  if (node.HasInput(2)) {
    Tensor b = ed.Constant(node.inputs[2]);
    if (!opt::IsFloatTensor(b) || b.rank() != 1 || b.num_elements() != out_channels) return false;
    for (int64_t m = 0; m < out_channels; ++m) bias[m] = b.data<float>()[m];
  }
  conv->index = index;
  conv->transpose = transpose;
  conv->group = group.value();
  conv->out_channels = out_channels;
  conv->weights = w;
  conv->bias = std::move(bias);
  return true;
}

// The Conv feeding `node`'s input `input`, when `node` is its only reader.
bool ConvFeeding(GraphEditor& ed, size_t node, size_t input, FoldableConv* conv) {
  const std::string& name = ed.node(node).inputs[input];
  int64_t producer = ed.Producer(name);
  if (producer < 0 || !ed.OnlyUsedBy(name, node)) return false;
  // (Not a FusedConv: its activation comes after the bias these folds change.)
  return ed.node(static_cast<size_t>(producer)).op_type != "FusedConv" &&
         MatchConv(ed, static_cast<size_t>(producer), conv);
}

// Weights with every output channel m multiplied by scale[m].
Result<Tensor> ScaledWeights(const FoldableConv& conv, const std::vector<double>& scale) {
  const Tensor& w = conv.weights;
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DataType::kFloat, w.dims()));
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  int64_t dim0 = w.dim(0), dim1 = w.dim(1);
  int64_t kernel = w.num_elements() / (dim0 * dim1);
  for (int64_t a = 0; a < dim0; ++a) {
    for (int64_t b = 0; b < dim1; ++b) {
      // Conv: W[M, C/group, k...]; ConvTranspose: W[C, M/group, k...] with
      // input channel a in group a / (C/group) writing output channel group*(M/group)+b.
      int64_t m = conv.transpose ? (a / (dim0 / conv.group)) * dim1 + b : a;
      int64_t base = (a * dim1 + b) * kernel;
      for (int64_t k = 0; k < kernel; ++k)
        dst[base + k] = static_cast<float>(static_cast<double>(src[base + k]) * scale[m]);
    }
  }
  return out;
}

Tensor BiasTensor(const std::vector<double>& bias) {
  Tensor t = Tensor::Allocate(DataType::kFloat, {static_cast<int64_t>(bias.size())}).value();
  for (size_t m = 0; m < bias.size(); ++m) t.data<float>()[m] = static_cast<float>(bias[m]);
  return t;
}

// Gives the Conv new weights (when `weights` is defined) and bias, takes over
// `consumer`'s output name and removes `consumer`.
void Rewire(GraphEditor& ed, const FoldableConv& conv, size_t consumer, Tensor weights,
            const std::vector<double>& bias) {
  Node& node = ed.node(conv.index);
  std::string base = node.name.empty() ? node.outputs[0] : node.name;
  if (weights.defined()) ed.SetInput(conv.index, 1, ed.AddInitializer(base + "_folded_W", std::move(weights)));
  ed.SetInput(conv.index, 2, ed.AddInitializer(base + "_folded_B", BiasTensor(bias)));
  std::string output = ed.node(consumer).outputs[0];
  ed.RemoveNode(consumer);
  ed.RenameOutput(conv.index, 0, output);
}

// Reads a constant 1-D float parameter of `count` values as doubles.
bool ChannelParam(GraphEditor& ed, const std::string& name, int64_t count, std::vector<double>* out) {
  Tensor t = ed.Constant(name);
  if (!opt::IsFloatTensor(t) || t.rank() != 1 || t.num_elements() != count) return false;
  out->assign(t.data<float>(), t.data<float>() + count);
  return true;
}

bool OnlyFirstOutput(const Node& node) {
  for (size_t k = 1; k < node.outputs.size(); ++k)
    if (!node.outputs[k].empty()) return false;
  return !node.outputs.empty() && !node.outputs[0].empty();
}

Status TryFoldBatchNorm(GraphEditor& ed, size_t index, bool* folded) {
  const Node& bn = ed.node(index);
  if (!opt::IsOp(bn, "BatchNormalization") || bn.inputs.size() != 5 || !OnlyFirstOutput(bn)) return Status::Ok();
  int64_t opset = ed.checked().opsets[index];
  // Only inference-mode, per-channel normalization folds.
  auto spatial = bn.GetInt("spatial", 1);
  auto training = bn.GetInt("training_mode", 0);
  auto epsilon = bn.GetFloat("epsilon", 1e-5f);
  if (!spatial.ok() || !training.ok() || !epsilon.ok()) return Status::Ok();
  if ((opset < 9 && spatial.value() != 1) || training.value() != 0) return Status::Ok();
  if (opt::HasOtherAttributes(bn, {"epsilon", "momentum", "spatial", "training_mode"})) return Status::Ok();
  FoldableConv conv;
  if (!ConvFeeding(ed, index, 0, &conv)) return Status::Ok();
  int64_t m = conv.out_channels;
  std::vector<double> scale, shift, mean, var;
  if (!ChannelParam(ed, bn.inputs[1], m, &scale) || !ChannelParam(ed, bn.inputs[2], m, &shift) ||
      !ChannelParam(ed, bn.inputs[3], m, &mean) || !ChannelParam(ed, bn.inputs[4], m, &var))
    return Status::Ok();
  std::vector<double> factor(m), bias(m);
  for (int64_t c = 0; c < m; ++c) {
    double denom = var[c] + static_cast<double>(epsilon.value());
    if (!(denom > 0)) return Status::Ok();  // leave NaN/negative variance for the kernel to show
    factor[c] = scale[c] / std::sqrt(denom);
    bias[c] = (conv.bias[c] - mean[c]) * factor[c] + shift[c];
  }
  NEE_ASSIGN_OR_RETURN(Tensor weights, ScaledWeights(conv, factor));
  Rewire(ed, conv, index, std::move(weights), bias);
  *folded = true;
  return Status::Ok();
}

// A constant that broadcasts against a Conv output of rank `rank` as one
// value per channel (or one value for all), without changing its shape.
bool PerChannelConstant(const Tensor& c, int64_t rank, int64_t channels, std::vector<double>* values) {
  if (!opt::IsFloatTensor(c) || c.rank() > rank) return false;
  int64_t pad = rank - c.rank();
  int64_t per_channel = 1;
  for (int64_t d = 0; d < c.rank(); ++d) {
    int64_t axis = d + pad, size = c.dim(d);
    if (axis == 1 && (size == channels || size == 1)) {
      per_channel = size;
    } else if (size != 1) {
      return false;
    }
  }
  values->resize(static_cast<size_t>(channels));
  for (int64_t m = 0; m < channels; ++m) (*values)[m] = c.data<float>()[per_channel == 1 ? 0 : m];
  return true;
}

Status TryFoldAffine(GraphEditor& ed, size_t index, bool* folded) {
  const Node& node = ed.node(index);
  bool is_add = opt::IsOp(node, "Add"), is_sub = opt::IsOp(node, "Sub"), is_mul = opt::IsOp(node, "Mul");
  if (!is_add && !is_sub && !is_mul) return Status::Ok();
  // Before opset 7 these ops broadcast only with an attribute.
  if (ed.checked().opsets[index] < 7 || node.inputs.size() != 2 || !OnlyFirstOutput(node)) return Status::Ok();
  if (!node.attributes.empty()) return Status::Ok();
  // Sub folds only as Conv - constant.
  for (size_t side = 0; side < (is_sub ? 1u : 2u); ++side) {
    FoldableConv conv;
    if (!ConvFeeding(ed, index, side, &conv)) continue;
    std::vector<double> c;
    if (!PerChannelConstant(ed.Constant(node.inputs[1 - side]), conv.weights.rank(), conv.out_channels, &c))
      continue;
    std::vector<double> bias = conv.bias;
    Tensor weights;
    if (is_mul) {
      for (int64_t m = 0; m < conv.out_channels; ++m) bias[m] *= c[m];
      NEE_ASSIGN_OR_RETURN(weights, ScaledWeights(conv, c));
    } else {
      for (int64_t m = 0; m < conv.out_channels; ++m) bias[m] += is_sub ? -c[m] : c[m];
    }
    Rewire(ed, conv, index, std::move(weights), bias);
    *folded = true;
    return Status::Ok();
  }
  return Status::Ok();
}

// ---- An affine op before the Conv (input side) --------------------------------------------

// The Conv's input channels' scale or shift when its input is Mul / Add /
// Sub(x, per-channel constant) that only the Conv reads: y = x * scale +
// shift per channel, with x of the Conv input's shape. Fills the affine
// node's index and x.
bool AffineFeeding(GraphEditor& ed, const FoldableConv& conv, size_t* affine, std::string* x,
                   std::vector<double>* scale, std::vector<double>* shift) {
  const std::string& input = ed.node(conv.index).inputs[0];
  const int64_t producer = ed.Producer(input);
  if (producer < 0 || !ed.OnlyUsedBy(input, conv.index) || ed.IsPinned(input)) return false;
  const Node& node = ed.node(static_cast<size_t>(producer));
  const bool is_mul = opt::IsBinary(ed, producer, "Mul"), is_add = opt::IsBinary(ed, producer, "Add"),
             is_sub = opt::IsBinary(ed, producer, "Sub");
  if (!is_mul && !is_add && !is_sub) return false;
  const int64_t channels = conv.weights.dim(1) * conv.group, rank = conv.weights.rank();
  for (size_t side = 0; side < (is_sub ? 1u : 2u); ++side) {  // Sub only as x - constant
    std::vector<double> c;
    const Tensor constant = ed.Constant(node.inputs[1 - side]);
    if (!PerChannelConstant(constant, rank, channels, &c)) continue;
    // x keeps its shape: the constant is all size-1 dims, or x's channels are known to be the Conv's.
    const TypeInfo* type = ed.TensorType(node.inputs[side]);
    const bool one_value = constant.num_elements() == 1;
    if (!type || !type->shape || static_cast<int64_t>(type->shape->size()) != rank ||
        (!one_value && (*type->shape)[1].value != channels))
      continue;
    scale->assign(static_cast<size_t>(channels), 1.0);
    shift->assign(static_cast<size_t>(channels), 0.0);
    for (int64_t k = 0; k < channels; ++k) {
      if (is_mul) (*scale)[k] = c[k];
      else (*shift)[k] = is_sub ? -c[k] : c[k];
    }
    *affine = static_cast<size_t>(producer);
    *x = node.inputs[side];
    return true;
  }
  return false;
}

// Whether every tap of the Conv reads the input itself, never padding: then
// Conv(x * s + t) = Conv'(x), W'[m, c, k] = W[m, c, k] s[c], bias'[m] =
// bias[m] + sum over c, k of W[m, c, k] t[c] (c over m's group). PP-LCNetV3
// (PP-OCRv4/v5's detectors and recognizers) ends each activation with a
// learnable scalar affine, x * scale + bias, before its pointwise convs.
bool Unpadded(const Node& conv) {
  auto pads = conv.GetInts("pads", {});
  auto auto_pad = conv.GetString("auto_pad", "NOTSET");
  if (!pads.ok() || !auto_pad.ok()) return false;
  if (auto_pad.value() == "VALID") return true;
  return auto_pad.value() == "NOTSET" &&
         std::all_of(pads.value().begin(), pads.value().end(), [](int64_t p) { return p == 0; });
}

Status TryFoldInputAffine(GraphEditor& ed, size_t index, bool* folded) {
  FoldableConv conv;
  if (opt::IsOp(ed.node(index), "ConvTranspose") || !MatchConv(ed, index, &conv) || !Unpadded(ed.node(index)))
    return Status::Ok();
  size_t affine = 0;
  std::string x;
  std::vector<double> scale, shift;
  if (!AffineFeeding(ed, conv, &affine, &x, &scale, &shift)) return Status::Ok();
  const Tensor& w = conv.weights;
  const int64_t M = w.dim(0), per_group = w.dim(1), kernel = w.num_elements() / (M * per_group);
  const int64_t m_per_group = M / conv.group;
  NEE_ASSIGN_OR_RETURN(Tensor weights, Tensor::Allocate(DataType::kFloat, w.dims()));
  std::vector<double> bias = conv.bias;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t ci = 0; ci < per_group; ++ci) {
      const int64_t c = m / m_per_group * per_group + ci;  // the input channel
      const int64_t base = (m * per_group + ci) * kernel;
      for (int64_t k = 0; k < kernel; ++k) {
        const double v = w.data<float>()[base + k];
        weights.data<float>()[base + k] = static_cast<float>(v * scale[c]);
        bias[m] += v * shift[c];
      }
    }
  Node& node = ed.node(index);
  const std::string name = node.name.empty() ? node.outputs[0] : node.name;
  ed.SetInput(index, 0, x);
  ed.SetInput(index, 1, ed.AddInitializer(name + "_folded_W", std::move(weights)));
  ed.SetInput(index, 2, ed.AddInitializer(name + "_folded_B", BiasTensor(bias)));
  ed.RemoveNode(affine);
  *folded = true;
  return Status::Ok();
}

Status TryFold(GraphEditor& ed, size_t index, bool* folded) {
  NEE_RETURN_IF_ERROR(TryFoldBatchNorm(ed, index, folded));
  return *folded ? Status::Ok() : TryFoldAffine(ed, index, folded);
}

// A chain of affine ops before a Conv or FusedConv (x * scale + bias), nearest first.
Status TryFoldInputAffines(GraphEditor& ed, size_t index, bool* folded) {
  for (bool more = true; more;) {
    more = false;
    NEE_RETURN_IF_ERROR(TryFoldInputAffine(ed, index, &more));
    *folded = *folded || more;
  }
  return Status::Ok();
}

Status RunFold(Graph& graph, const CheckedGraph& checked, bool* changed,
               Status (*fold)(GraphEditor&, size_t, bool*)) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order) {
    if (ed.removed(index)) continue;
    bool folded = false;
    NEE_RETURN_IF_ERROR(fold(ed, index, &folded));
  }
  *changed = ed.Commit();
  return Status::Ok();
}
}  // namespace

Status FoldConvAffine(Graph& graph, const CheckedGraph& checked, bool* changed) {
  return RunFold(graph, checked, changed, TryFold);
}

Status FoldConvInputAffine(Graph& graph, const CheckedGraph& checked, bool* changed) {
  return RunFold(graph, checked, changed, TryFoldInputAffines);
}

}  // namespace nee
