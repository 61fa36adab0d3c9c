// Narrow-float conversion (opt/quantize.h, modes fp16 and bf16): one
// mechanism for both targets, float16 and bfloat16 ("narrow" below), and for
// float64 too (`nee precision --fp64` makes its reference so: the same rules,
// the values widened exactly). Each
// ai.onnx node of the main graph is planned on its own: a type-constraint
// letter of its op's declaration (at the model's opset) that binds float32
// here and allows the narrow type becomes narrow, with every input and output
// it binds; formals of a fixed type (Resize's scales) and letters without the
// narrow type stay float32 (many ops allow bfloat16 only from later opsets).
// Nodes stay float32 as a whole when they are excluded, hold a subgraph, are
// in another domain, take their output type from an attribute
// (ConstantOfShape, Random*, EyeLike, BitCast, Range, ...), quantize or dequantize
// (their scales set the integer grid), or compute shapes (outputs of rank 0
// or 1 that depend on Shape/Size and constants only). Then each value gets one
// type: float32 initializers and Constant nodes read only by narrow inputs
// become narrow (rounded to nearest even; float16 saturates finite values at
// +-65504, bfloat16 has float32's range), a Cast to float whose readers all
// want the narrow type casts to it instead, and a Cast is inserted at every
// remaining boundary (one per value and direction). The graph's inputs and
// outputs, and values a subgraph reads, keep float32: a narrow producer of
// such a value writes "<name>_fp16" (or "_bf16"), and a Cast writes the name.
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "check/checker.h"
#include "ir/attr_decl.h"
#include "ir/float_formats.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"
#include "opt/quantize.h"
#include "opt/rewrite_util.h"

namespace nee::quant {

namespace {

using opt::GraphEditor;

enum class Want : uint8_t { kAny, kFloat, kNarrow };  // kNarrow: the narrow target type

// What differs between the two targets.
struct NarrowTarget {
  DataType type;
  const char* type_name;  // as type constraints spell it
  const char* suffix;     // of renamed values and inserted Casts
};

NarrowTarget TargetOf(DataType type) {
  if (type == DataType::kBFloat16) return {type, "tensor(bfloat16)", "bf16"};
  if (type == DataType::kDouble) return {type, "tensor(double)", "fp64"};
  return {DataType::kFloat16, "tensor(float16)", "fp16"};
}

// Ops whose output element type comes from an attribute or whose float
// inputs are read as counts, kept float32.
const std::unordered_set<std::string>& KeptOps() {
  static const std::unordered_set<std::string> ops = {
      "ConstantOfShape", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "EyeLike",         "Multinomial",  "Bernoulli",     "Range",            "Constant",
      "Cast",            "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"};
  return ops;
}

struct NodePlan {
  bool narrow = false;
  std::vector<Want> inputs;
  std::vector<bool> outputs_narrow;
};

bool LetterAllows(const AttrSchema& schema, const FormalParam* formal, const char* type_name) {
  if (!formal) return false;
  const TypeConstraint* c = schema.FindConstraint(formal->type);
  if (!c || !c->allowed) return false;
  return std::find(c->allowed->begin(), c->allowed->end(), type_name) != c->allowed->end();
}

bool HoldsSubgraph(const Node& node) {
  for (const Attribute& a : node.attributes)
    if (a.type == AttrType::kGraph || a.type == AttrType::kGraphs) return true;
  return false;
}

// float32 -> float16 bits, finite values beyond float16's range saturated.
uint16_t ToHalfSaturated(float v, size_t* clamped) {
  constexpr float kMaxHalf = 65504.0f;
  if (std::isfinite(v) && std::fabs(v) > kMaxHalf) {
    ++*clamped;
    v = v > 0 ? kMaxHalf : -kMaxHalf;
  }
  return FloatToHalf(v);
}

// A float32 tensor in the narrow type, rounded to nearest even (bfloat16
// needs no saturation: its range is float32's); in float64, exactly.
Result<Tensor> ToNarrowTensor(const Tensor& t, DataType narrow, size_t* clamped) {
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(narrow, t.dims()));
  const float* src = t.data<float>();
  if (narrow == DataType::kDouble) {
    std::copy(src, src + t.num_elements(), out.data<double>());
    return out;
  }
  uint16_t* dst = out.data<uint16_t>();
  if (narrow == DataType::kBFloat16) {
    for (int64_t i = 0; i < t.num_elements(); ++i) dst[i] = FloatToBFloat16(src[i]);
  } else {
    for (int64_t i = 0; i < t.num_elements(); ++i) dst[i] = ToHalfSaturated(src[i], clamped);
  }
  return out;
}

}  // namespace

Status ConvertToNarrowFloat(Model& model, const QuantizeOptions& options, DataType narrow, QuantizeReport* report) {
  const NarrowTarget target = TargetOf(narrow);
  BindAttrDeclarations(model);
  NEE_ASSIGN_OR_RETURN(CheckedGraph checked, CheckModel(model, OpRegistry::Global()));
  Graph& graph = model.graph;
  GraphEditor ed(graph, checked);
  const std::unordered_set<std::string> excluded(options.exclude.begin(), options.exclude.end());

  auto is_float = [&](const std::string& name) {
    const TypeInfo* t = ed.TensorType(name);
    return t && t->elem_type == DataType::kFloat;
  };
  auto is_initializer = [&](const std::string& name) { return ed.Constant(name).defined(); };

  // Values computed from shapes: outputs of Shape/Size, and outputs of rank
  // 0 or 1 of nodes reading only those and constants (a Slice of a weight
  // by a length taken from a shape is data, not a shape).
  std::unordered_set<std::string> shape_values;
  auto small_rank = [&](const std::string& name) {
    auto it = checked.types.find(name);
    return it != checked.types.end() && it->second.is_tensor() && it->second.shape && it->second.shape->size() <= 1;
  };
  for (size_t i : checked.order) {
    const Node& node = graph.nodes[i];
    bool derived = opt::IsOp(node, "Shape") || opt::IsOp(node, "Size");
    if (!derived) {
      bool any = false, only_static = true;
      for (const std::string& in : node.inputs) {
        if (in.empty()) continue;
        if (shape_values.count(in)) any = true;
        else if (!checked.constants.count(in)) only_static = false;
      }
      derived = any && only_static;
    }
    for (const std::string& out : node.outputs)
      if (!out.empty() && derived && (opt::IsOp(node, "Shape") || opt::IsOp(node, "Size") || small_rank(out)))
        shape_values.insert(out);
  }

  // Each node's plan.
  std::vector<NodePlan> plans(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    NodePlan& plan = plans[i];
    plan.inputs.assign(node.inputs.size(), Want::kAny);
    plan.outputs_narrow.assign(node.outputs.size(), false);
    bool has_float = false, unknown = false, other_float = false;
    for (const std::string& v : node.inputs) {
      if (v.empty()) continue;
      auto it = checked.types.find(v);
      if (it == checked.types.end()) unknown = true;
      else if (is_float(v)) has_float = true;
      else if (!it->second.is_tensor() && it->second.ToString().find("tensor(float)") != std::string::npos)
        other_float = true;
    }
    for (const std::string& v : node.outputs) {
      if (v.empty()) continue;
      if (is_float(v)) has_float = true;
      else if (!ed.TensorType(v)) {
        auto it = checked.types.find(v);
        if (it == checked.types.end()) unknown = true;
        else if (it->second.ToString().find("tensor(float)") != std::string::npos) other_float = true;
      }
    }
    const bool type_agnostic = opt::IsOp(node, "Shape") || opt::IsOp(node, "Size") || opt::IsOp(node, "Cast");
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (!node.inputs[k].empty() && is_float(node.inputs[k]) && !type_agnostic) plan.inputs[k] = Want::kFloat;
    if (!has_float || type_agnostic) continue;
    const std::string label = node.Describe();
    auto keep = [&](const std::string& why) { report->skipped.push_back(label + ": " + why); };
    if (excluded.count(node.name)) { keep("excluded"); continue; }
    if (!NormalizeDomain(node.domain).empty()) { keep("not an ai.onnx op"); continue; }
    if (HoldsSubgraph(node)) { keep("holds a subgraph"); continue; }
    if (KeptOps().count(node.op_type) || node.HasAttr("dtype") || node.HasAttr("to")) {
      if (!opt::IsOp(node, "Constant")) keep(node.op_type.find("uantizeLinear") != std::string::npos ? "quantization keeps float32 scales" : "its output type comes from an attribute");
      continue;
    }
    if (unknown || other_float) { keep("a float value of unknown or non-tensor type"); continue; }
    bool shape_path = false;
    for (const std::string& out : node.outputs) shape_path |= !out.empty() && shape_values.count(out) > 0;
    if (shape_path) { keep("computes a shape"); continue; }
    const AttrSchema* schema = node.declaration;
    if (!schema) { keep("no declaration"); continue; }
    bool any_narrow = false;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (plan.inputs[k] != Want::kFloat) continue;
      if (LetterAllows(*schema, schema->InputFormal(k), target.type_name)) {
        plan.inputs[k] = Want::kNarrow;
        any_narrow = true;
      }
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      if (node.outputs[k].empty() || !is_float(node.outputs[k])) continue;
      if (LetterAllows(*schema, schema->OutputFormal(k), target.type_name)) {
        plan.outputs_narrow[k] = true;
        any_narrow = true;
      }
    }
    if (!any_narrow) {
      keep(std::string("no ") + DataTypeName(target.type) + " in " + schema->Label() + "'s type constraints");
      continue;
    }
    plan.narrow = true;
    report->converted.push_back(node.name.empty() ? node.outputs[0] : node.name);
  }

  // Whether every reader of `name` wants the narrow type (and nothing else sees it).
  auto only_narrow_readers = [&](const std::string& name) {
    if (ed.IsPinned(name)) return false;
    std::vector<opt::Use> uses = ed.Uses(name);
    if (uses.empty()) return false;
    for (const opt::Use& u : uses)
      if (plans[u.node].inputs[u.input] != Want::kNarrow) return false;
    return true;
  };

  // The type each float32 value will have.
  std::unordered_set<std::string> narrow_values;
  for (size_t i = 0; i < graph.nodes.size(); ++i)
    for (size_t k = 0; k < graph.nodes[i].outputs.size(); ++k)
      if (plans[i].outputs_narrow[k]) narrow_values.insert(graph.nodes[i].outputs[k]);
  std::unordered_set<std::string> narrow_initializers;
  for (const Initializer& init : graph.initializers)
    if (is_initializer(init.name) && init.tensor.dtype() == DataType::kFloat && only_narrow_readers(init.name)) {
      narrow_initializers.insert(init.name);
      narrow_values.insert(init.name);
    }
  size_t clamped = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& node = graph.nodes[i];
    if (node.outputs.size() != 1 || node.outputs[0].empty() || !is_float(node.outputs[0]) ||
        excluded.count(node.name) || !only_narrow_readers(node.outputs[0]))
      continue;
    if (opt::IsOp(node, "Constant")) {
      for (Attribute& a : node.attributes)
        if (a.name == "value" && a.type == AttrType::kTensor && a.t.dtype() == DataType::kFloat) {
          NEE_ASSIGN_OR_RETURN(Tensor narrowed, ToNarrowTensor(a.t, target.type, &clamped));
          a.t = std::move(narrowed);
          narrow_values.insert(node.outputs[0]);
          report->converted.push_back(node.name.empty() ? node.outputs[0] : node.name);
        }
    } else if (opt::IsOp(node, "Cast")) {
      for (Attribute& a : node.attributes)
        if (a.name == "to" && a.i == static_cast<int64_t>(DataType::kFloat)) {
          a.i = static_cast<int64_t>(target.type);
          narrow_values.insert(node.outputs[0]);
          report->converted.push_back(node.name.empty() ? node.outputs[0] : node.name);
        }
    }
  }

  // Narrow values whose name must stay float32: the producer writes a new
  // name, and a Cast back writes the old one.
  std::unordered_map<std::string, std::string> float_twin;  // narrow name -> its float32 copy
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (size_t k = 0; k < graph.nodes[i].outputs.size(); ++k) {
      const std::string name = graph.nodes[i].outputs[k];
      if (name.empty() || !narrow_values.count(name) || !ed.IsPinned(name)) continue;
      const std::string renamed = ed.FreshName(name + "_" + target.suffix);
      ed.RenameOutput(i, k, renamed);
      ed.InsertAfter(i, opt::CastNode(name + "_cast_to_fp32", renamed, name, DataType::kFloat));
      ++report->casts_added;
      narrow_values.erase(name);
      narrow_values.insert(renamed);
      float_twin[renamed] = name;
    }
  }

  // A Cast at every remaining boundary, one per value and direction: after
  // the value's producer, or before its first reader in the node list (for
  // graph inputs and initializers).
  std::map<std::pair<std::string, bool>, std::string> casts;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    Node& node = graph.nodes[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Want want = plans[i].inputs[k];
      const std::string v = node.inputs[k];
      if (want == Want::kAny || v.empty()) continue;
      const bool is_narrow = narrow_values.count(v) > 0;
      if (is_narrow == (want == Want::kNarrow)) continue;
      if (want == Want::kFloat) {
        auto twin = float_twin.find(v);
        if (twin != float_twin.end()) {
          ed.SetInput(i, k, twin->second);
          continue;
        }
      }
      const bool to_narrow = want == Want::kNarrow;
      auto it = casts.find({v, to_narrow});
      if (it == casts.end()) {
        const std::string out = ed.FreshName(v + (to_narrow ? std::string("_to_") + target.suffix : std::string("_to_fp32")));
        Node cast = opt::CastNode(out, v, out, to_narrow ? target.type : DataType::kFloat);
        const int64_t producer = ed.Producer(v);
        if (producer >= 0) ed.InsertAfter(static_cast<size_t>(producer), std::move(cast));
        else ed.InsertBefore(i, std::move(cast));
        ++report->casts_added;
        it = casts.emplace(std::make_pair(v, to_narrow), out).first;
      }
      ed.SetInput(i, k, it->second);
    }
  }
  ed.Commit();

  for (Initializer& init : graph.initializers) {
    if (!narrow_initializers.count(init.name)) continue;
    NEE_ASSIGN_OR_RETURN(init.tensor, ToNarrowTensor(init.tensor, target.type, &clamped));
  }
  for (ValueInfo& vi : graph.value_info)
    if (narrow_values.count(vi.name) && vi.type.is_tensor() && vi.type.elem_type == DataType::kFloat)
      vi.type.elem_type = target.type;
  report->values_clamped = clamped;
  return Status::Ok();
}

}  // namespace nee::quant
