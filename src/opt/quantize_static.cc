// Static int8 quantization in QDQ form (opt/quantize.h), from calibrated
// activation ranges handed in as plain data (exec/calibrate.h measures them).
//
// Quantized nodes: Conv, MatMul and Gemm whose activations are float32 and
// whose weight (Conv W, Gemm B, MatMul B when it is an initializer) is a
// constant float32 initializer. For such a node:
//   - every float activation it reads (X / A, and a MatMul's B when it is
//     computed) and its output go through
//       QuantizeLinear(T, T_scale, T_zero_point) -> DequantizeLinear
//     with uint8 parameters from the calibrated range (ActivationScaleZeroPoint).
//     A tensor is quantized once: every reader of it (quantized or not) reads
//     the dequantized value; a graph output keeps its name at the
//     DequantizeLinear (the producer writes `<T>_QuantizeLinear_Input`).
//   - an output read by one Relu or constant-bound Clip alone (and not a graph
//     output) is not quantized when the activation's output, quantized from
//     its own range, saturates where the activation clamps: the pair goes
//     after the activation (Conv -> Relu -> Q -> DQ), Q(Relu(y)) == Q(y), and
//     fuse-qdq-conv folds the Relu into QLinearConv. Calibration measures both
//     tensors (ChooseOutputQuantization says why).
//   - the weight becomes an int8 initializer, symmetric (zero point 0), per
//     tensor or with --per-channel per output channel (axis 0 for Conv's
//     [M, C/g, k...] and a transB Gemm's [N, K]; axis 1 for a [K, N] B),
//     read through DequantizeLinear (axis set when per channel).
//   - a constant 1-D float bias (Conv B; Gemm C with beta 1 and N elements)
//     becomes int32 with scale input_scale * weight_scale (float product;
//     values round_half_even(b / scale) computed in double), zero point 0,
//     read through DequantizeLinear (axis 0 when per channel). A bias whose
//     values would not fit int32 stays float (ONNX Runtime instead enlarges
//     the weight scale).
// This is the graph ONNX Runtime's quantize_static(quant_format=QDQ,
// activation_type=QUInt8, weight_type=QInt8, op_types_to_quantize=[Conv,
// MatMul, Gemm, Relu, Clip]) writes, but for the Relu/Clip it removes where
// nee keeps them before the Q (with symmetric activations: [Conv, MatMul,
// Gemm]); the parameters follow its compute_scale_zp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "check/checker.h"
#include "ir/inline_functions.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"
#include "opt/quantize.h"
#include "opt/rewrite_util.h"

namespace nee::quant {

namespace {

using opt::GraphEditor;
using opt::MakeNode;

constexpr int64_t kQdqOpset = 10;        // QuantizeLinear / DequantizeLinear
constexpr int64_t kPerAxisQdqOpset = 13;  // their `axis` attribute

// What quantizing one node takes.
struct Candidate {
  size_t index = 0;
  std::vector<std::string> activations;  // float inputs to quantize, then the output
  std::vector<size_t> activation_slots;  // input slot of each activation input
  size_t weight_slot = 1;
  std::string weight;                    // initializer name ("" when B is an activation)
  int64_t axis = -1;                     // per-channel axis of the weight
  size_t bias_slot = 0;
  std::string bias;                      // constant float bias to make int32 ("" none)
  // The output's sole reader when it is a Relu or a constant-bound Clip (ClampInterval): that
  // activation's output, and the interval it clamps to. The output's QDQ pair can then go after the
  // activation instead (ChooseOutputQuantization).
  std::string clamped;
  float clamp_lo = 0, clamp_hi = 0;
};

bool IsFloat32(GraphEditor& ed, const std::string& name) {
  const TypeInfo* t = ed.TensorType(name);
  return t && t->elem_type == DataType::kFloat;
}

// Whether `y` (a candidate's output, not a graph output) is read by one Relu or constant-bound Clip
// alone; if so, that activation goes into the candidate.
void FindClampingReader(GraphEditor& ed, const std::string& y, Candidate* c) {
  const int64_t reader = opt::SoleConsumer(ed, y);
  if (reader < 0) return;
  const Node& act = ed.node(static_cast<size_t>(reader));
  float lo, hi;
  if (!ClampInterval(ed, static_cast<size_t>(reader), &lo, &hi) || act.inputs[0] != y || act.outputs[0].empty() ||
      !IsFloat32(ed, act.outputs[0]))
    return;
  c->clamped = act.outputs[0];
  c->clamp_lo = lo;
  c->clamp_hi = hi;
}

// Where the candidate's output is quantized. As ONNX Runtime's quantizer does with a Relu/Clip it
// quantizes (QDQRemovableActivation): Conv -> Relu -> Q(r) -> DQ instead of Conv -> Q(y) -> DQ -> Relu ->
// Q(r) -> DQ, when Q(r)'s parameters (from r's calibrated range) saturate where the activation clamps;
// then Q(Relu(y)) == Q(y) bitwise and fuse-qdq-conv folds the activation into QLinearConv. Unlike ONNX
// Runtime, the activation stays in the graph (it removes it, exact only under the same condition) and the
// pair goes after it only when the condition holds: with symmetric activations (zero point 128), or a
// Clip whose bounds lie inside r's quantization range, Q(y) stays.
void ChooseOutputQuantization(const QuantizeOptions& options, Candidate* c) {
  if (c->clamped.empty()) return;
  auto range = options.ranges.find(c->clamped);
  if (range == options.ranges.end()) return;
  float scale = 1;
  uint8_t zero_point = 0;
  ActivationScaleZeroPoint(range->second.min, range->second.max, options.symmetric_activations, &scale, &zero_point);
  if (QuantizeSaturatesAt(c->clamp_lo, c->clamp_hi, scale, zero_point, /*is_signed=*/false))
    c->activations.back() = c->clamped;
}

// The candidates of the main graph, in node order; `skipped` gets the
// Conv/MatMul/Gemm nodes left in float and why.
Status FindCandidates(GraphEditor& ed, const QuantizeOptions& options, bool need_ranges,
                      std::vector<Candidate>* out, std::vector<std::string>* skipped) {
  const std::unordered_set<std::string> excluded(options.exclude.begin(), options.exclude.end());
  const Graph& graph = ed.graph();
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    const Node& node = graph.nodes[index];
    const bool conv = opt::IsOp(node, "Conv"), matmul = opt::IsOp(node, "MatMul"), gemm = opt::IsOp(node, "Gemm");
    if (!conv && !matmul && !gemm) continue;
    const std::string label = node.Describe();
    auto skip = [&](const std::string& why) { skipped->push_back(label + ": " + why); };
    if (const std::string why = WhyNotCandidateNode(node, excluded); !why.empty()) {
      skip(why);
      continue;
    }
    Candidate c;
    c.index = index;
    const std::string a = node.inputs[0], b = node.inputs[1], y = node.outputs[0];
    if (ed.Constant(a).defined()) {
      skip("input '" + a + "' is a constant");
      continue;
    }
    if (!IsFloat32(ed, a) || !IsFloat32(ed, y)) {
      skip("not a float32 computation");
      continue;
    }
    c.activations.push_back(a);
    c.activation_slots.push_back(0);
    const Tensor w = ed.Constant(b);
    if (w.defined()) {
      if (w.dtype() != DataType::kFloat) {
        skip("weight '" + b + "' is " + w.Describe() + ", not float32");
        continue;
      }
      if ((matmul || gemm) && w.rank() != 2) {
        skip("weight '" + b + "' is " + w.Describe() + ", not a matrix");
        continue;
      }
      if (conv && w.rank() < 3) {
        skip("weight '" + b + "' has rank " + std::to_string(w.rank()));
        continue;
      }
      c.weight = b;
      if (options.per_channel) {
        if (conv) {
          c.axis = 0;
        } else if (matmul) {
          c.axis = 1;
        } else {
          NEE_ASSIGN_OR_RETURN(int64_t trans_b, node.GetInt("transB", 0));
          c.axis = trans_b != 0 ? 0 : 1;
        }
      }
    } else if (matmul && IsFloat32(ed, b)) {
      c.activations.push_back(b);  // a product of two activations: both uint8
      c.activation_slots.push_back(1);
    } else {
      skip("weight '" + b + "' is not a constant float32 initializer");
      continue;
    }
    // The bias: Conv's B ([M]) or Gemm's C with beta 1 ([N]).
    if ((conv || gemm) && node.HasInput(2) && !c.weight.empty()) {
      const Tensor bias = ed.Constant(node.inputs[2]);
      float beta = 1.0f;
      if (gemm) {
        NEE_ASSIGN_OR_RETURN(beta, node.GetFloat("beta", 1.0f));
      }
      int64_t trans_b = 0;
      if (gemm) {
        NEE_ASSIGN_OR_RETURN(trans_b, node.GetInt("transB", 0));
      }
      const int64_t channels = conv || trans_b != 0 ? w.dim(0) : w.dim(1);
      if (opt::IsFloatTensor(bias) && bias.rank() == 1 && bias.dim(0) == channels && beta == 1.0f) {
        c.bias = node.inputs[2];
        c.bias_slot = 2;
      }
    }
    c.activations.push_back(y);
    FindClampingReader(ed, y, &c);
    if (need_ranges) {
      ChooseOutputQuantization(options, &c);
      std::string missing;
      for (const std::string& t : c.activations)
        if (!options.ranges.count(t)) missing = t;
      if (!missing.empty()) {
        skip("no calibrated range for '" + missing + "'");
        continue;
      }
    }
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

Status CheckOpset(const Model& model, const QuantizeOptions& options) {
  const int64_t opset = model.OpsetVersion("");
  const int64_t needed = options.per_channel ? kPerAxisQdqOpset : kQdqOpset;
  if (opset >= needed) return Status::Ok();
  return InvalidArgument(
      std::string("static quantization writes QuantizeLinear/DequantizeLinear") +
      (options.per_channel ? " with a per-channel axis, which needs default-domain opset 13; "
                           : ", which need default-domain opset 10; ") +
      (opset < 0 ? "the model does not import the default domain"
                 : "the model imports opset " + std::to_string(opset) + " (convert it first: nee convert MODEL --opset " +
                       std::to_string(needed) + " -o OUT.onnx)"));
}

bool IsGraphOutput(const Graph& graph, const std::string& name) {
  for (const ValueInfo& vi : graph.outputs)
    if (vi.name == name) return true;
  return false;
}

}  // namespace

void ActivationScaleZeroPoint(float min, float max, bool symmetric, float* scale, uint8_t* zero_point) {
  double lo = std::min(static_cast<double>(min), 0.0), hi = std::max(static_cast<double>(max), 0.0);
  if (symmetric) {
    const double m = std::max(-lo, hi);
    lo = -m;
    hi = m;
  }
  const double s = (hi - lo) / 255.0;
  if (!(s >= static_cast<double>(std::numeric_limits<float>::min())) || !std::isfinite(s)) {
    *scale = 1.0f;
    *zero_point = 0;
    return;
  }
  *scale = static_cast<float>(s);
  // round((qmin + qmax) / 2) = round(127.5), half to even: 128.
  const double zp = symmetric ? 128.0 : std::nearbyint(-lo / s);
  *zero_point = static_cast<uint8_t>(std::min(std::max(zp, 0.0), 255.0));
}

Status QuantizeWeightsPerAxis(const Tensor& w, int64_t axis, bool reduce_range, Tensor* quantized, Tensor* scales) {
  if (!w.defined() || w.dtype() != DataType::kFloat)
    return InvalidArgument("weights to quantize must be float32, got " + w.Describe());
  if (axis >= w.rank()) return InvalidArgument("axis " + std::to_string(axis) + " is beyond " + w.Describe());
  // [outer, groups, inner] around the axis.
  int64_t outer = 1, groups = 1, inner = 1;
  if (axis >= 0) {
    for (int64_t d = 0; d < axis; ++d) outer *= w.dim(d);
    groups = w.dim(axis);
    for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  } else {
    inner = w.num_elements();
  }
  const float* src = w.data<float>();
  std::vector<float> absmax(static_cast<size_t>(groups), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < inner; ++i) {
        const float v = src[(o * groups + g) * inner + i];
        if (!std::isfinite(v)) return InvalidArgument("a weight is NaN or infinite");
        absmax[static_cast<size_t>(g)] = std::max(absmax[static_cast<size_t>(g)], std::fabs(v));
      }
  const double qmax = reduce_range ? 64.0 : 127.0;
  const float qmax_f = static_cast<float>(qmax);
  std::vector<int64_t> scale_dims;
  if (axis >= 0) scale_dims.push_back(groups);
  NEE_ASSIGN_OR_RETURN(*scales, Tensor::Allocate(DataType::kFloat, scale_dims));
  float* scale = scales->data<float>();
  for (int64_t g = 0; g < groups; ++g) {
    // (2 max) / 254 in double, stored as float (ONNX Runtime's symmetric int8;
    // reduce_range: (2 max) / 128, values in [-64, 64]).
    const double s = static_cast<double>(absmax[static_cast<size_t>(g)]) / qmax;
    scale[g] = s < static_cast<double>(std::numeric_limits<float>::min()) ? 1.0f : static_cast<float>(s);
  }
  NEE_ASSIGN_OR_RETURN(*quantized, Tensor::Allocate(DataType::kInt8, w.dims()));
  int8_t* dst = quantized->data<int8_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * groups + g) * inner + i;
        float q = std::nearbyint(src[k] / scale[g]);
        q = std::min(std::max(q, -qmax_f), qmax_f);
        dst[k] = static_cast<int8_t>(q);
      }
  return Status::Ok();
}

bool ConstantFloatScalar(GraphEditor& ed, const std::string& name, float* value) {
  Tensor t = ed.Constant(name);
  if (!t.defined()) {
    const int64_t p = ed.Producer(name);
    if (p < 0 || !opt::IsOp(ed.node(static_cast<size_t>(p)), "Constant")) return false;
    const Attribute* a = ed.node(static_cast<size_t>(p)).FindAttr("value");
    if (!a) return false;
    t = a->t;
  }
  if (!t.defined() || t.dtype() != DataType::kFloat || t.num_elements() != 1) return false;
  *value = t.data<float>()[0];
  return true;
}

bool ClampInterval(GraphEditor& ed, size_t index, float* lo, float* hi) {
  const Node& n = ed.node(index);
  const int64_t opset = ed.checked().opsets[index];
  if (n.inputs.empty() || n.outputs.size() != 1 || !n.attributes.empty()) return false;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (opt::IsOp(n, "Relu") && opset >= 6 && n.inputs.size() == 1) {
    *lo = 0.0f;
    *hi = kInf;
    return true;
  }
  if (!opt::IsOp(n, "Clip") || opset < 11 || n.inputs.size() > 3) return false;
  *lo = -kInf;
  *hi = kInf;
  if (n.HasInput(1) && !ConstantFloatScalar(ed, n.inputs[1], lo)) return false;
  if (n.HasInput(2) && !ConstantFloatScalar(ed, n.inputs[2], hi)) return false;
  return true;
}

bool QuantizeScalar(float v, float scale, int32_t zero_point, bool is_signed, int32_t* q) {
  const float r = std::nearbyint(v / scale);
  if (std::isnan(r)) return false;
  const double lowest = is_signed ? -128.0 : 0.0, highest = is_signed ? 127.0 : 255.0;
  *q = static_cast<int32_t>(std::clamp(static_cast<double>(r) + zero_point, lowest, highest));
  return true;
}

bool QuantizeSaturatesAt(float lo, float hi, float scale, int32_t zero_point, bool is_signed) {
  int32_t q_lo, q_hi;
  return QuantizeScalar(lo, scale, zero_point, is_signed, &q_lo) && q_lo == (is_signed ? -128 : 0) &&
         QuantizeScalar(hi, scale, zero_point, is_signed, &q_hi) && q_hi == (is_signed ? 127 : 255);
}

Result<std::vector<std::string>> StaticCalibrationTensors(Model& model, const QuantizeOptions& options) {
  NEE_RETURN_IF_ERROR(InlineModelFunctions(model));
  {
    std::unordered_set<std::string> names;
    for (const Node& node : model.graph.nodes) names.insert(node.name);
    for (const std::string& name : options.exclude)
      if (name.empty() || !names.count(name))
        return InvalidArgument("--exclude: the model has no node named '" + name + "'");
  }
  NEE_RETURN_IF_ERROR(CheckOpset(model, options));
  BindAttrDeclarations(model);
  NEE_ASSIGN_OR_RETURN(CheckedGraph checked, CheckModel(model, OpRegistry::Global()));
  GraphEditor ed(model.graph, checked);
  std::vector<Candidate> candidates;
  std::vector<std::string> skipped;
  NEE_RETURN_IF_ERROR(FindCandidates(ed, options, /*need_ranges=*/false, &candidates, &skipped));
  std::vector<std::string> names;
  std::unordered_set<std::string> seen;
  for (const Candidate& c : candidates) {
    // Both the output and its clamping activation's output: which of them is quantized depends on the
    // latter's range (ChooseOutputQuantization).
    std::vector<std::string> tensors = c.activations;
    if (!c.clamped.empty()) tensors.push_back(c.clamped);
    for (const std::string& t : tensors)
      if (seen.insert(t).second) names.push_back(t);
  }
  return names;
}

Status QuantizeStatic(Model& model, const QuantizeOptions& options, QuantizeReport* report) {
  NEE_RETURN_IF_ERROR(CheckOpset(model, options));
  BindAttrDeclarations(model);
  NEE_ASSIGN_OR_RETURN(CheckedGraph checked, CheckModel(model, OpRegistry::Global()));
  GraphEditor ed(model.graph, checked);
  std::vector<Candidate> candidates;
  NEE_RETURN_IF_ERROR(FindCandidates(ed, options, /*need_ranges=*/true, &candidates, &report->skipped));
  for (const auto& [name, range] : options.ranges)
    if (!std::isfinite(range.min) || !std::isfinite(range.max) || range.min > range.max)
      return InvalidArgument("the calibrated range of '" + name + "' is not a finite interval");

  // Weights first (their float values are needed before anything is renamed).
  struct QWeight {
    std::string dq_output, scale;
  };
  std::unordered_map<std::string, QWeight> weights;  // by initializer name + "@axis"
  std::vector<std::string> replaced;                 // float initializers a DequantizeLinear replaced
  std::vector<Candidate> kept;
  for (Candidate& c : candidates) {
    const Node& node = ed.node(c.index);
    if (c.weight.empty()) {
      kept.push_back(c);
      continue;
    }
    const std::string key = c.weight + "@" + std::to_string(c.axis);
    if (!weights.count(key)) {
      Tensor q, scales;
      Status st = QuantizeWeightsPerAxis(ed.Constant(c.weight), c.axis, options.reduce_range, &q, &scales);
      if (!st.ok()) {
        report->skipped.push_back(node.Describe() + ": weight '" + c.weight + "': " + st.message());
        continue;
      }
      NEE_ASSIGN_OR_RETURN(Tensor zp, Tensor::Allocate(DataType::kInt8, scales.dims()));
      QWeight qw;
      const std::string values = ed.AddInitializer(c.weight + "_quantized", std::move(q));
      qw.scale = ed.AddInitializer(c.weight + "_scale", std::move(scales));
      const std::string zero_point = ed.AddInitializer(c.weight + "_zero_point", std::move(zp));
      qw.dq_output = ed.FreshName(c.weight + "_DequantizeLinear_Output");
      std::vector<Attribute> attrs;
      if (c.axis >= 0) attrs.push_back(opt::IntAttr("axis", c.axis));
      ed.InsertBefore(c.index, MakeNode(ed.FreshName(c.weight + "_DequantizeLinear"), "DequantizeLinear",
                                        {values, qw.scale, zero_point}, {qw.dq_output}, std::move(attrs)));
      weights.emplace(key, qw);
    }
    kept.push_back(c);
  }

  // Activation parameters, one pair of nodes per distinct tensor.
  struct QActivation {
    std::string scale;
    float scale_value = 1;
  };
  std::unordered_map<std::string, QActivation> activations;
  for (const Candidate& c : kept)
    for (const std::string& t : c.activations) {
      if (activations.count(t)) continue;
      const QuantizeOptions::Range& r = options.ranges.at(t);
      float scale = 1;
      uint8_t zero_point = 0;
      ActivationScaleZeroPoint(r.min, r.max, options.symmetric_activations, &scale, &zero_point);
      NEE_ASSIGN_OR_RETURN(Tensor s, Tensor::Allocate(DataType::kFloat, {}));
      s.data<float>()[0] = scale;
      NEE_ASSIGN_OR_RETURN(Tensor z, Tensor::Allocate(DataType::kUint8, {}));
      z.data<uint8_t>()[0] = zero_point;
      QActivation qa;
      qa.scale = ed.AddInitializer(t + "_scale", std::move(s));
      qa.scale_value = scale;
      const std::string zp = ed.AddInitializer(t + "_zero_point", std::move(z));
      // Placement: after the producer, or before the first reader of a graph input.
      const int64_t producer = ed.Producer(t);
      std::vector<opt::Use> uses = ed.Uses(t);
      size_t first_use = model.graph.nodes.size();
      for (const opt::Use& u : uses) first_use = std::min(first_use, u.node);
      std::string q_input = t, dq_output;
      if (producer >= 0 && IsGraphOutput(model.graph, t)) {
        // The graph output keeps its name, now written by the DequantizeLinear.
        const Node& p = ed.node(static_cast<size_t>(producer));
        size_t slot = 0;
        while (slot < p.outputs.size() && p.outputs[slot] != t) ++slot;
        q_input = ed.FreshName(t + "_QuantizeLinear_Input");
        ed.RenameOutput(static_cast<size_t>(producer), slot, q_input);
        ed.ReplaceUses(q_input, t);
        dq_output = t;
      } else {
        dq_output = ed.FreshName(t + "_DequantizeLinear_Output");
        ed.ReplaceUses(t, dq_output);
      }
      const std::string q_output = ed.FreshName(t + "_QuantizeLinear_Output");
      Node qn = MakeNode(ed.FreshName(t + "_QuantizeLinear"), "QuantizeLinear", {q_input, qa.scale, zp}, {q_output});
      Node dqn = MakeNode(ed.FreshName(t + "_DequantizeLinear"), "DequantizeLinear", {q_output, qa.scale, zp},
                          {dq_output});
      if (producer >= 0) {
        ed.InsertAfter(static_cast<size_t>(producer), std::move(qn));
        ed.InsertAfter(static_cast<size_t>(producer), std::move(dqn));
      } else {
        ed.InsertBefore(first_use, std::move(qn));
        ed.InsertBefore(first_use, std::move(dqn));
      }
      activations.emplace(t, qa);
    }

  // Weights and biases into the nodes.
  for (const Candidate& c : kept) {
    Node& node = ed.node(c.index);
    const std::string name = node.name.empty() ? node.outputs[0] : node.name;
    if (!c.weight.empty()) {
      const QWeight& qw = weights.at(c.weight + "@" + std::to_string(c.axis));
      ed.SetInput(c.index, c.weight_slot, qw.dq_output);
      replaced.push_back(c.weight);
      if (!c.bias.empty()) {
        // scale = input_scale * weight_scale (float), values in double.
        const Tensor bias = ed.Constant(c.bias);
        const Tensor wscale = ed.Constant(qw.scale);
        const float in_scale = activations.at(c.activations[0]).scale_value;
        const int64_t n = bias.dim(0);
        NEE_ASSIGN_OR_RETURN(Tensor bscale, Tensor::Allocate(DataType::kFloat, wscale.dims()));
        NEE_ASSIGN_OR_RETURN(Tensor bq, Tensor::Allocate(DataType::kInt32, {n}));
        bool fits = true;
        for (int64_t i = 0; i < wscale.num_elements(); ++i)
          bscale.data<float>()[i] = in_scale * wscale.data<float>()[i];
        for (int64_t i = 0; i < n && fits; ++i) {
          const double s = bscale.data<float>()[wscale.num_elements() == 1 ? 0 : i];
          const double v = std::nearbyint(static_cast<double>(bias.data<float>()[i]) / s);
          if (!std::isfinite(v) || v < -2147483648.0 || v > 2147483647.0) fits = false;
          else bq.data<int32_t>()[i] = static_cast<int32_t>(v);
        }
        if (!fits) {
          report->skipped.push_back(node.Describe() + ": bias '" + c.bias + "' kept float (beyond int32 at its scale)");
        } else {
          NEE_ASSIGN_OR_RETURN(Tensor bzp, Tensor::Allocate(DataType::kInt32, wscale.dims()));
          const std::string values = ed.AddInitializer(c.bias + "_quantized", std::move(bq));
          const std::string scale = ed.AddInitializer(c.bias + "_quantized_scale", std::move(bscale));
          const std::string zp = ed.AddInitializer(c.bias + "_quantized_zero_point", std::move(bzp));
          const std::string out = ed.FreshName(c.bias + "_DequantizeLinear_Output");
          std::vector<Attribute> attrs;
          if (c.axis >= 0) attrs.push_back(opt::IntAttr("axis", 0));
          ed.InsertBefore(c.index, MakeNode(ed.FreshName(c.bias + "_DequantizeLinear"), "DequantizeLinear",
                                            {values, scale, zp}, {out}, std::move(attrs)));
          ed.SetInput(c.index, c.bias_slot, out);
          replaced.push_back(c.bias);
        }
      }
    }
    report->converted.push_back(name);
  }

  ed.CommitDroppingInitializers(replaced);
  return Status::Ok();
}

}  // namespace nee::quant
