// Dynamic int8 quantization of MatMul and Gemm (opt/quantize.h). For a node
// y = MatMul(a, W) with W a constant float32 [K, N] initializer:
//
//   a_q, a_scale, a_zp = DynamicQuantizeLinear(a)        (one per distinct a)
//   s = Mul(a_scale, W_scale)                            (W_scale [] or [N])
//   p = MatMulInteger(a_q, W_q, a_zp, W_zp)              (uint8 x int8 -> int32)
//   y = Mul(Cast<float>(p), s)
//
// A Gemm (transA 0) is the same product over W, or W transposed offline when
// transB is 1, with alpha folded into the scale and beta * C added after:
//   y = Add(Mul(Cast<float>(p), s * alpha), beta * C)   (beta * C precomputed;
// a Gemm whose C is computed and beta is not 1 stays float32).
// B may reach the initializer through Identity nodes (a weight PyTorch
// shares between layers), which are dropped once nothing reads them. (ONNX
// Runtime's quantizer leaves such products in float.) The weights are
// symmetric int8: W_q = round_half_even(w / scale) with
// scale = max|w| / 127 (reduce_range: / 64), zero point 0, which is what ONNX
// Runtime's quantize_dynamic(weight_type=QInt8) writes, so both tools give the
// same bytes for the same model.
//
// A Gather whose data is a constant float32 initializer (an embedding table)
// reads that table quantized once to uint8, asymmetric per tensor (scale and
// zero point from its range widened to include 0, as for an activation), and
// writes uint8: a quantized MatMul reading its output takes it as its A with
// the table's scale and zero point (no DynamicQuantizeLinear); any other
// reader gets it back through a DequantizeLinear. This too is what
// quantize_dynamic writes (its default operator list includes Gather), and
// it is most of a transformer's weight bytes left in float otherwise (BERT's
// word embeddings: 94 of its 110 MB once the MatMuls are int8).
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "check/checker.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"
#include "opt/quantize.h"
#include "opt/rewrite_util.h"

namespace nee::quant {

namespace {

using opt::GraphEditor;
using opt::MakeNode;

constexpr int64_t kDynamicQuantizeLinearOpset = 11;

struct QuantizedWeight {
  std::string values, scale, zero_point;
};

struct QuantizedInput {
  std::string values, scale, zero_point;
};

// W [K, N] as [N, K]^T, i.e. B of a Gemm with transB = 1 turned into [K, N].
Result<Tensor> Transposed(const Tensor& w) {
  const int64_t rows = w.dim(0), cols = w.dim(1);
  NEE_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DataType::kFloat, {cols, rows}));
  const float* src = w.data<float>();
  float* dst = t.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  return t;
}

Result<Tensor> Scaled(const Tensor& t, float factor) {
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DataType::kFloat, t.dims()));
  const float* src = t.data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) dst[i] = src[i] * factor;
  return out;
}

// The value `name` is a copy of through Identity nodes (PyTorch exports a
// weight shared by two layers as Identity(W)), recording those nodes.
std::string ThroughIdentities(GraphEditor& ed, std::string name, std::vector<size_t>* identities) {
  for (int depth = 0; depth < 64; ++depth) {
    const int64_t producer = ed.Producer(name);
    if (producer < 0) break;
    const Node& node = ed.graph().nodes[static_cast<size_t>(producer)];
    if (!opt::IsOp(node, "Identity") || !node.HasInput(0)) break;
    identities->push_back(static_cast<size_t>(producer));
    name = node.inputs[0];
  }
  return name;
}

// A table quantized for Gather (see the header): values, scale, zero point.
struct QuantizedTable {
  std::string values, scale, zero_point;
};

// Quantizes `table` to uint8 as quantize_dynamic quantizes a Gather's data:
// the range [min(t, 0), max(t, 0)] over [0, 255] (ActivationScaleZeroPoint),
// each value round_half_even(t / scale) + zero point, clipped.
Status QuantizeTableAsymmetric(const Tensor& table, Tensor* quantized, Tensor* scale, Tensor* zero_point) {
  const float* src = table.data<float>();
  const int64_t n = table.num_elements();
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(src[i])) return InvalidArgument("a value is NaN or infinite");
    lo = std::min(lo, src[i]);
    hi = std::max(hi, src[i]);
  }
  float s = 1.f;
  uint8_t zp = 0;
  ActivationScaleZeroPoint(lo, hi, false, &s, &zp);
  NEE_ASSIGN_OR_RETURN(*scale, Tensor::Allocate(DataType::kFloat, {}));
  NEE_ASSIGN_OR_RETURN(*zero_point, Tensor::Allocate(DataType::kUint8, {}));
  NEE_ASSIGN_OR_RETURN(*quantized, Tensor::Allocate(DataType::kUint8, table.dims()));
  scale->data<float>()[0] = s;
  zero_point->data<uint8_t>()[0] = zp;
  uint8_t* dst = quantized->data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(src[i] / s) + static_cast<float>(zp);  // float division, half to even
    dst[i] = static_cast<uint8_t>(std::min(std::max(q, 0.f), 255.f));
  }
  return Status::Ok();
}

// A Gather rewritten to read its quantized table: its float output, the
// quantized one, and where the node was (for the DequantizeLinear).
struct QuantizedGather {
  size_t index;
  std::string output;
  QuantizedInput quantized;
};

// Rewrites every eligible Gather (see the header) to write uint8, recording
// its output in `inputs` for the MatMuls that read it.
Result<std::vector<QuantizedGather>> QuantizeGathers(GraphEditor& ed, const std::unordered_set<std::string>& excluded,
                                                     std::unordered_map<std::string, QuantizedInput>* inputs,
                                                     std::vector<std::string>* replaced, QuantizeReport* report) {
  std::vector<QuantizedGather> gathers;
  std::unordered_map<std::string, QuantizedTable> tables;  // by float table name
  for (size_t index = 0; index < ed.graph().nodes.size(); ++index) {
    const Node& node = ed.node(index);
    if (!opt::IsOp(node, "Gather") || !node.HasInput(0) || node.outputs.size() != 1 || node.outputs[0].empty())
      continue;
    const Tensor table = ed.Constant(node.inputs[0]);
    if (!opt::IsFloatTensor(table)) continue;  // not an embedding table: nothing to say
    const std::string label = node.Describe();
    if (excluded.count(node.name)) {
      report->skipped.push_back(label + ": excluded");
      continue;
    }
    auto it = tables.find(node.inputs[0]);
    if (it == tables.end()) {
      Tensor q, scale, zero_point;
      const Status st = QuantizeTableAsymmetric(table, &q, &scale, &zero_point);
      if (!st.ok()) {
        report->skipped.push_back(label + ": data '" + node.inputs[0] + "': " + st.message());
        continue;
      }
      const std::string& name = node.inputs[0];
      QuantizedTable t;
      t.scale = ed.AddInitializer(name + "_scale", std::move(scale));
      t.zero_point = ed.AddInitializer(name + "_zero_point", std::move(zero_point));
      t.values = ed.AddInitializer(name + "_quantized", std::move(q));
      it = tables.emplace(name, std::move(t)).first;
    }
    const std::string y = node.outputs[0];
    QuantizedGather g{index, y, {ed.FreshName(y + "_quantized"), it->second.scale, it->second.zero_point}};
    Node rewritten = node;
    rewritten.inputs[0] = it->second.values;
    rewritten.outputs[0] = g.quantized.values;
    replaced->push_back(node.inputs[0]);
    report->converted.push_back(node.name.empty() ? y : node.name);
    ed.RemoveNode(index);
    ed.InsertBefore(index, std::move(rewritten));
    (*inputs)[y] = g.quantized;
    gathers.push_back(std::move(g));
  }
  return gathers;
}

// Puts a DequantizeLinear after each rewritten Gather whose float output
// something other than a quantized MatMul still reads.
void DequantizeGatherOutputs(GraphEditor& ed, const std::vector<QuantizedGather>& gathers) {
  for (const QuantizedGather& g : gathers) {
    if (ed.Uses(g.output).empty() && !ed.IsPinned(g.output)) continue;
    ed.InsertBefore(g.index, MakeNode(g.output + "_DequantizeLinear", "DequantizeLinear",
                                      {g.quantized.values, g.quantized.scale, g.quantized.zero_point}, {g.output}));
  }
}

}  // namespace

std::string WhyNotCandidateNode(const Node& node, const std::unordered_set<std::string>& excluded) {
  if (excluded.count(node.name)) return "excluded";
  if (!node.HasInput(0) || !node.HasInput(1) || node.outputs.size() != 1 || node.outputs[0].empty())
    return "unexpected inputs or outputs";
  return "";
}

std::string WhyNotFloatTimesConstantMatrix(const GraphEditor& ed, const std::string& a, const std::string& b,
                                           Tensor* w) {
  const TypeInfo* a_type = ed.TensorType(a);
  if (!a_type || a_type->elem_type != DataType::kFloat) return "A is not a float32 tensor";
  *w = ed.Constant(b);
  if (!w->defined()) return "B '" + b + "' is not a constant initializer";
  if (w->dtype() != DataType::kFloat || w->rank() != 2)
    return "B '" + b + "' is " + w->Describe() + ", not a float32 matrix";
  return "";
}

Status QuantizeWeightsSymmetric(const Tensor& w, bool per_channel, bool reduce_range, Tensor* quantized,
                                Tensor* scales) {
  if (!w.defined() || w.dtype() != DataType::kFloat || w.rank() != 2)
    return InvalidArgument("weights to quantize must be a float32 matrix, got " + w.Describe());
  const int64_t rows = w.dim(0), cols = w.dim(1);
  const int64_t groups = per_channel ? cols : 1;
  const float* src = w.data<float>();
  std::vector<float> absmax(static_cast<size_t>(groups), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = src[r * cols + c];
      if (!std::isfinite(v)) return InvalidArgument("a weight is NaN or infinite");
      float& m = absmax[static_cast<size_t>(per_channel ? c : 0)];
      m = std::max(m, std::fabs(v));
    }
  // The range [-max|w|, max|w|] over [-qmax, qmax]: 2 max / 254 (or / 128),
  // computed in double and stored as float.
  const double qmax = reduce_range ? 64.0 : 127.0;
  std::vector<int64_t> scale_dims;
  if (per_channel) scale_dims.push_back(cols);
  NEE_ASSIGN_OR_RETURN(*scales, Tensor::Allocate(DataType::kFloat, scale_dims));
  float* scale = scales->data<float>();
  for (int64_t g = 0; g < groups; ++g) {
    const double s = static_cast<double>(absmax[static_cast<size_t>(g)]) / qmax;
    // A zero (or subnormal) range has no usable scale: 1, as every weight is 0.
    scale[g] = s < static_cast<double>(std::numeric_limits<float>::min()) ? 1.0f : static_cast<float>(s);
  }
  NEE_ASSIGN_OR_RETURN(*quantized, Tensor::Allocate(DataType::kInt8, {rows, cols}));
  int8_t* dst = quantized->data<int8_t>();
  const float lo = static_cast<float>(-qmax), hi = static_cast<float>(qmax);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      // float division, rounded half to even (the default rounding mode).
      float q = std::nearbyint(src[r * cols + c] / scale[per_channel ? c : 0]);
      q = std::min(std::max(q, lo), hi);
      dst[r * cols + c] = static_cast<int8_t>(q);
    }
  return Status::Ok();
}

Status QuantizeDynamic(Model& model, const QuantizeOptions& options, QuantizeReport* report) {
  const int64_t opset = model.OpsetVersion("");
  if (opset < kDynamicQuantizeLinearOpset)
    return InvalidArgument(
        std::string("dynamic quantization writes DynamicQuantizeLinear, which needs default-domain opset 11; ") +
        (opset < 0 ? "the model does not import the default domain"
                   : "the model imports opset " + std::to_string(opset) +
                         " (convert it first: nee convert MODEL --opset 11 -o OUT.onnx)"));
  BindAttrDeclarations(model);
  NEE_ASSIGN_OR_RETURN(CheckedGraph checked, CheckModel(model, OpRegistry::Global()));
  GraphEditor ed(model.graph, checked);
  const std::unordered_set<std::string> excluded(options.exclude.begin(), options.exclude.end());
  std::unordered_map<std::string, QuantizedInput> inputs;     // by float input name
  std::unordered_map<std::string, QuantizedWeight> weights;  // by initializer name (+ "^T" transposed)
  std::vector<std::string> replaced;  // float initializers a removed node read
  std::vector<size_t> identities;     // Identity nodes between a quantized B and its initializer
  NEE_ASSIGN_OR_RETURN(const std::vector<QuantizedGather> gathers,
                       QuantizeGathers(ed, excluded, &inputs, &replaced, report));

  // In list order, so that a shared DynamicQuantizeLinear goes before the
  // first reader in the written file.
  for (size_t index = 0; index < model.graph.nodes.size(); ++index) {
    const Node& node = ed.node(index);
    const bool is_gemm = opt::IsOp(node, "Gemm");
    if (!opt::IsOp(node, "MatMul") && !is_gemm) continue;
    const std::string label = node.Describe();
    auto skip = [&](const std::string& why) { report->skipped.push_back(label + ": " + why); };
    if (const std::string why = WhyNotCandidateNode(node, excluded); !why.empty()) {
      skip(why);
      continue;
    }
    const std::string a = node.inputs[0], y = node.outputs[0];
    std::vector<size_t> identity_nodes;
    const std::string b = ThroughIdentities(ed, node.inputs[1], &identity_nodes);
    Tensor w;
    if (const std::string why = WhyNotFloatTimesConstantMatrix(ed, a, b, &w); !why.empty()) {
      skip(why);
      continue;
    }
    bool trans_b = false;
    float alpha = 1.0f, beta = 1.0f;
    std::string bias;
    Tensor scaled_bias;  // beta * C, when beta is not 1
    if (is_gemm) {
      NEE_ASSIGN_OR_RETURN(int64_t trans_a, node.GetInt("transA", 0));
      NEE_ASSIGN_OR_RETURN(int64_t tb, node.GetInt("transB", 0));
      NEE_ASSIGN_OR_RETURN(alpha, node.GetFloat("alpha", 1.0f));
      NEE_ASSIGN_OR_RETURN(beta, node.GetFloat("beta", 1.0f));
      if (trans_a != 0) {
        skip("transA = 1");
        continue;
      }
      if (!std::isfinite(alpha) || !std::isfinite(beta)) {
        skip("alpha or beta is not finite");
        continue;
      }
      trans_b = tb != 0;
      if (node.HasInput(2)) {
        bias = node.inputs[2];
        if (beta != 1.0f) {
          const Tensor c = ed.Constant(bias);
          if (!opt::IsFloatTensor(c)) {
            skip("beta is not 1 and C is not a constant float32 initializer");
            continue;
          }
          NEE_ASSIGN_OR_RETURN(scaled_bias, Scaled(c, beta));
        }
      }
    }

    const std::string key = trans_b ? b + "^T" : b;
    auto wit = weights.find(key);
    if (wit == weights.end()) {
      Tensor matrix = w;
      if (trans_b) {
        NEE_ASSIGN_OR_RETURN(matrix, Transposed(w));
      }
      Tensor q, scales;
      Status st = QuantizeWeightsSymmetric(matrix, options.per_channel, options.reduce_range, &q, &scales);
      if (!st.ok()) {
        skip("B '" + b + "': " + st.message());
        continue;
      }
      std::vector<int64_t> zp_dims = scales.dims();
      NEE_ASSIGN_OR_RETURN(Tensor zero_point, Tensor::Allocate(DataType::kInt8, zp_dims));
      const std::string base = trans_b ? b + "_Transposed" : b;
      QuantizedWeight qw;
      qw.scale = ed.AddInitializer(base + "_scale", std::move(scales));
      qw.zero_point = ed.AddInitializer(base + "_zero_point", std::move(zero_point));
      qw.values = ed.AddInitializer(base + "_quantized", std::move(q));
      wit = weights.emplace(key, std::move(qw)).first;
    }
    const QuantizedWeight qw = wit->second;
    if (scaled_bias.defined()) {
      replaced.push_back(bias);
      bias = ed.AddInitializer(bias + "_scaled", std::move(scaled_bias));
    }

    const std::string base = node.name.empty() ? y : node.name;
    auto ait = inputs.find(a);
    if (ait == inputs.end()) {
      QuantizedInput qi{ed.FreshName(a + "_quantized"), ed.FreshName(a + "_scale"), ed.FreshName(a + "_zero_point")};
      ed.InsertBefore(index, MakeNode(a + "_QuantizeLinear", "DynamicQuantizeLinear", {a},
                                      {qi.values, qi.scale, qi.zero_point}));
      ait = inputs.emplace(a, std::move(qi)).first;
    }
    const QuantizedInput qi = ait->second;

    std::string weight_scale = qw.scale;
    if (alpha != 1.0f) {
      Tensor s = ed.Constant(qw.scale);
      NEE_ASSIGN_OR_RETURN(Tensor scaled, Scaled(s, alpha));
      weight_scale = ed.AddInitializer(base + "_alpha_scale", std::move(scaled));
    }
    const std::string scales = ed.FreshName(base + "_quant_scales_mul");
    const std::string product_base = bias.empty() ? y : y + "_MatMul";
    const std::string product = ed.FreshName(product_base + "_output_quantized");
    const std::string as_float = ed.FreshName(product + "_cast_output");
    ed.InsertBefore(index, MakeNode(base + "_quant_scales_mul", "Mul", {qi.scale, weight_scale}, {scales}));
    ed.InsertBefore(index, MakeNode(base + "_quant", "MatMulInteger",
                                    {qi.values, qw.values, qi.zero_point, qw.zero_point}, {product}));
    ed.InsertBefore(index, MakeNode(base + "_quant_cast", "Cast", {product}, {as_float},
                                    {opt::IntAttr("to", static_cast<int64_t>(DataType::kFloat))}));
    if (bias.empty()) {
      ed.InsertBefore(index, MakeNode(base + "_quant_output_scale_mul", "Mul", {as_float, scales}, {y}));
    } else {
      const std::string unbiased = ed.FreshName(product_base);
      ed.InsertBefore(index, MakeNode(base + "_quant_output_scale_mul", "Mul", {as_float, scales}, {unbiased}));
      ed.InsertBefore(index, MakeNode(base + "_bias_add", "Add", {unbiased, bias}, {y}));
    }
    report->converted.push_back(node.name.empty() ? y : node.name);
    replaced.push_back(b);
    identities.insert(identities.end(), identity_nodes.begin(), identity_nodes.end());
    ed.RemoveNode(index);
  }

  DequantizeGatherOutputs(ed, gathers);
  // Identity copies of quantized weights that nothing reads any more (until
  // none is left: dropping one may leave the one before it in a chain unread).
  for (bool again = true; again;) {
    again = false;
    for (size_t n : identities) {
      if (ed.removed(n) || ed.node(n).outputs.size() != 1) continue;
      const std::string out = ed.node(n).outputs[0];
      if (ed.Uses(out).empty() && !ed.IsPinned(out)) {
        ed.RemoveNode(n);
        again = true;
      }
    }
  }
  // The float weights (and pre-scaled biases' originals) nothing reads any more.
  ed.CommitDroppingInitializers(replaced);
  return Status::Ok();
}

}  // namespace nee::quant
