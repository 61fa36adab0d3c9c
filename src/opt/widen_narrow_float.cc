// Level-2 widening of float16 / bfloat16 ("narrow") computation to float32,
// as ONNX Runtime's CPU provider does for types it has no kernel for (its
// InsertCastTransformer): nee's fast kernels are float32 ones, and a narrow
// node otherwise runs the reference kernel.
//
// A node is widened when its op has a fast float32 kernel (WidenedOps(); the
// unit test holds the list to ep/cpu's table) and one of its declaration's
// type-constraint letters binds a narrow type and allows float32: every input
// and output bound to such a letter becomes float32. Narrow inputs are read
// through a Cast to float (one per value, after its producer), narrow
// constant initializers become float32 initializers (one per value; the
// narrow ones are dropped once nothing reads them), and each narrow output is
// written by the node as "<name>_fp32" and cast back to its narrow type under
// its own name. The reference kernels compute narrow types in float and round
// each output once, so a widened node gives the same values up to float32
// accumulation order, and each op's output is still rounded to the narrow
// type: a Cast pair float -> narrow -> float between two widened nodes is that
// rounding and stays, except before Relu, Clip and MaxPool, which commute with the
// rounding: they read the float32 value and their output is rounded once
// (CommutesWithRounding; so Conv + Relu still fuse). The exact pair, narrow ->
// float -> the same narrow type, is bypassed.
//
// The exception: MatMul and Gemm on bfloat16 stay bfloat16 where the CPU
// provider computes them so (ep/cpu/bf16_matmul_fast.cc: vdpbf16ps on CPUs
// with AVX512-BF16, twice float32's multiply-adds per instruction; the same
// float32 sums rounded once): they read their bfloat16 inputs and weights
// directly, without Casts and with half the weight bytes. So do 2-D group-1
// and depthwise Convs (ep/cpu/conv_bf16.cc) with the residual Add
// and Relu after them that fuse-conv-activation folds into an ai.nee
// FusedConv (KeptBf16): a ResNet's convolutions then run in bfloat16 from
// one conv to the next, with half the activation bytes.
//
// float16 MatMul and Gemm by a constant B stay float16 likewise at the AVX2
// level (ep/cpu/f16_matmul_fast.cc): their weights are packed once and kept
// float16, widened in registers as the kernel loads them, so a float16
// model's weights take half a float32 model's memory.
//
// Memory: widened weights are float32 heap initializers, twice the narrow
// bytes; the fast kernels pack them as for a float32 model and drop them
// (GraphRunner's constant dropping), and the narrow bytes of a mapped model
// file are released once read.
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "base/mapped_file.h"
#include "base/cpu_isa.h"
#include "ir/attr_decl.h"
#include "ir/float_formats.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

bool IsNarrow(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

bool AllowsFloat(const TypeConstraint& c) {
  if (!c.allowed) return false;
  for (const std::string& t : *c.allowed)
    if (t == "tensor(float)") return true;
  return false;
}

bool IsWidenedOp(const Node& node) {
  const std::string domain = NormalizeDomain(node.domain);
  for (const auto& [d, op] : WidenedOps())
    if (domain == d && node.op_type == op) return true;
  return false;
}

// Which inputs and outputs of a node get widened, and from which narrow type.
struct WidenPlan {
  std::vector<DataType> inputs, outputs;  // kUndefined: left as it is
  bool any = false;
};

// The letters of `schema` bound to a narrow type at this node that allow
// float32; nullopt when a position bound to such a letter has an unknown type
// (the node is then left alone).
std::optional<WidenPlan> PlanNode(const GraphEditor& ed, const Node& node, const AttrSchema& schema) {
  WidenPlan plan;
  plan.inputs.assign(node.inputs.size(), DataType::kUndefined);
  plan.outputs.assign(node.outputs.size(), DataType::kUndefined);
  std::map<std::string, DataType> letters;  // letter -> the narrow type it binds
  auto visit = [&](const std::string& value, const FormalParam* formal, DataType* slot) {
    if (value.empty() || !formal) return true;
    const TypeConstraint* c = schema.FindConstraint(formal->type);
    if (!c || !AllowsFloat(*c)) return true;
    const TypeInfo* t = ed.TensorType(value);
    if (!t) return false;
    if (!IsNarrow(t->elem_type)) return true;
    auto [it, fresh] = letters.emplace(c->letter, t->elem_type);
    if (!fresh && it->second != t->elem_type) return false;
    *slot = t->elem_type;
    plan.any = true;
    return true;
  };
  for (size_t k = 0; k < node.inputs.size(); ++k)
    if (!visit(node.inputs[k], schema.InputFormal(k), &plan.inputs[k])) return std::nullopt;
  for (size_t k = 0; k < node.outputs.size(); ++k)
    if (!visit(node.outputs[k], schema.OutputFormal(k), &plan.outputs[k])) return std::nullopt;
  // A letter is widened everywhere or nowhere: a value bound to it that is
  // not narrow (float32 already, or unknown) would leave the letter bound to
  // two types.
  for (size_t k = 0; k < node.inputs.size(); ++k) {
    const FormalParam* f = schema.InputFormal(k);
    if (!node.inputs[k].empty() && f && letters.count(f->type) && plan.inputs[k] == DataType::kUndefined)
      return std::nullopt;
  }
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const FormalParam* f = schema.OutputFormal(k);
    if (!node.outputs[k].empty() && f && letters.count(f->type) && plan.outputs[k] == DataType::kUndefined)
      return std::nullopt;
  }
  return plan;
}

// Whether every narrow value of the plan is of type `type`.
bool AllOfType(const WidenPlan& plan, DataType type) {
  for (DataType t : plan.inputs)
    if (t != DataType::kUndefined && t != type) return false;
  for (DataType t : plan.outputs)
    if (t != DataType::kUndefined && t != type) return false;
  return true;
}
bool AllBFloat16(const WidenPlan& plan) { return AllOfType(plan, DataType::kBFloat16); }

// Whether the node is a MatMul or Gemm the CPU provider computes in its
// narrow type itself (see the file comment): bfloat16 with AVX512-BF16;
// float16 by a constant B (weights, which then stay float16) at the AVX2
// level (F16C's vcvtph2ps, which every AVX2 CPU has; the kernel checks it too
// and has a portable form, but only the vector ones come near the widened
// float32 SGEMM). A float16 product of two activations (attention's) is
// widened: SGEMM reads B where it lies, the float16 kernel would pack it on
// every run (1.5x the time of 12 heads' 128 x 64 x 128 products).
bool RunsNarrow(GraphEditor& ed, const Node& node, const WidenPlan& plan) {
  if (!opt::IsOp(node, "MatMul") && !opt::IsOp(node, "Gemm")) return false;
  if (AllBFloat16(plan)) return HostHasAvx512Bf16();
  // The kernel packs a constant 2-D B once; a B of another rank would run the
  // reference kernel (rank 1) or be repacked on every run (rank 3 and more).
  return AllOfType(plan, DataType::kFloat16) && HostIsaLevel() >= CpuIsaLevel::kAvx2 && node.inputs.size() >= 2 &&
         ed.Constant(node.inputs[1]).defined() && ed.Constant(node.inputs[1]).rank() == 2;
}

bool HasRank(const TypeInfo* t, size_t rank) { return t && t->shape && t->shape->size() == rank; }

// Whether W's type is [group, 1, kh, kw]: a depthwise conv's filters, one
// per channel (X then has `group` channels).
bool IsDepthwiseWeight(const TypeInfo* w, int64_t group) {
  return HasRank(w, 4) && (*w->shape)[0].value == group && (*w->shape)[1].value == 1;
}

// A bfloat16 Conv the CPU provider computes in bfloat16 (ep/cpu/conv_bf16.cc:
// 2-D, group 1 or depthwise, on AVX512-BF16): X and W of rank 4.
bool IsBf16KernelConv(const GraphEditor& ed, const Node& node, const WidenPlan& plan) {
  if (!opt::IsOp(node, "Conv") || !HostHasAvx512Bf16() || !AllBFloat16(plan) || node.inputs.size() < 2) return false;
  auto group = node.GetInt("group", 1);
  if (!group.ok() || !HasRank(ed.TensorType(node.inputs[0]), 4)) return false;
  const TypeInfo* w = ed.TensorType(node.inputs[1]);
  return group.value() == 1 ? HasRank(w, 4) : IsDepthwiseWeight(w, group.value());
}

// Clip (opset 11 on) with constant bounds, if any: like Relu, monotone and
// mapping narrow values to narrow values (a narrow bound is one), so it
// commutes with rounding too; FusedConv takes it with constant bounds.
bool ClipOfConstantBounds(GraphEditor& ed, const Node& node) {
  if (!opt::IsOp(node, "Clip") || !node.attributes.empty() || node.inputs.empty()) return false;
  for (size_t k = 1; k < node.inputs.size(); ++k)
    if (!node.inputs[k].empty() && !ed.Constant(node.inputs[k]).defined()) return false;
  return true;
}

// The bfloat16 nodes kept narrow around such Convs: the Conv itself, and the
// residual Add and Relu or Clip that fuse-conv-activation will fold into it
// (ai.nee FusedConv): an Add reading a kept Conv's output, which nothing else
// reads, and a value of its shape; a Relu or Clip (constant bounds) reading,
// alone, a kept Conv's or Add's output. Kept, they read and write bfloat16 with no Casts between them.
class KeptBf16 {
 public:
  explicit KeptBf16(GraphEditor& ed) : ed_(ed) {}

  bool Keep(const Node& node, const WidenPlan& plan) {
    if (!Decide(node, plan)) return false;
    kept_.insert(node.outputs[0]);
    return true;
  }

 private:
  bool Decide(const Node& node, const WidenPlan& plan) const {
    if (node.outputs.size() != 1 || !AllBFloat16(plan)) return false;
    if (IsBf16KernelConv(ed_, node, plan)) return true;
    if (opt::IsOp(node, "Relu") || ClipOfConstantBounds(ed_, node)) return FusableInto(node.inputs[0]);
    if (!opt::IsOp(node, "Add") || node.inputs.size() != 2) return false;
    for (int k = 0; k < 2; ++k) {
      const std::string& c = node.inputs[k];
      const std::string& z = node.inputs[1 - k];
      if (c != z && FusableInto(c) && IsConvOutput(c) &&
          opt::ProvablySameShape(ed_.TensorType(c), ed_.TensorType(z), DataType::kBFloat16))
        return true;
    }
    return false;
  }

  // `v` is a kept node's output that only one node reads.
  bool FusableInto(const std::string& v) const {
    return kept_.count(v) && !ed_.IsPinned(v) && ed_.Uses(v).size() == 1;
  }
  bool IsConvOutput(const std::string& v) const {
    const int64_t p = ed_.Producer(v);
    return p >= 0 && opt::IsOp(ed_.node(static_cast<size_t>(p)), "Conv");
  }

  GraphEditor& ed_;
  std::unordered_set<std::string> kept_;
};

// Every float16 pattern's float value: widening BERT-base's 110M weights
// element by element through HalfToFloat's branches took ~0.4 s of session
// creation; a table read is exact and a fraction of that.
const std::vector<float>& HalfTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

Result<Tensor> WidenTensor(const Tensor& t) {
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DataType::kFloat, t.dims()));
  const uint16_t* src = t.data<uint16_t>();
  float* dst = out.data<float>();
  const int64_t n = t.num_elements();
  if (t.dtype() == DataType::kFloat16) {
    const float* table = HalfTable().data();
    for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
  } else {
    // bfloat16 is float32's upper half (BFloat16ToFloat, inlined).
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
      std::memcpy(dst + i, &bits, 4);
    }
  }
  return out;
}

// Relu, Clip (ClipOfConstantBounds) and MaxPool (without Indices) commute
// with rounding to a narrow type (monotone, and mapping narrow values to
// narrow values): reading their input before its rounding and rounding their
// output once gives the same values (only a zero's sign may differ: Relu(-0)
// is -0, Relu of a tiny negative float +0). So a Conv + Relu or Clip stays a
// pair FusedConv can take.
bool CommutesWithRounding(GraphEditor& ed, const Node& node) {
  if (opt::IsOp(node, "Relu") || ClipOfConstantBounds(ed, node)) return true;
  return opt::IsOp(node, "MaxPool") && (node.outputs.size() == 1 || node.outputs[1].empty());
}

// The pass's bookkeeping: the float32 value standing for each narrow value
// the widened nodes read, and the Casts it adds. Casts that follow a widened
// node are held back until Flush(), so that a Cast back nothing reads any
// more (its reader took the value before rounding) is never added.
class Widening {
 public:
  explicit Widening(GraphEditor& ed) : ed_(ed) {}

  // The float32 name of narrow value `v`.
  Result<std::string> FloatOf(const std::string& v) {
    auto it = twins_.find(v);
    if (it != twins_.end()) return it->second;
    std::string name;
    Tensor constant = ed_.Constant(v);
    if (constant.defined() && IsNarrow(constant.dtype())) {
      NEE_ASSIGN_OR_RETURN(Tensor wide, WidenTensor(constant));
      // The narrow bytes are read once: pages of a mapped model file go back
      // to the page cache (no-op for heap bytes; a later read re-reads the file).
      ReleaseFileBackedPages(constant.raw_data(), constant.byte_size());
      name = ed_.AddInitializer(v + "_fp32", std::move(wide));
      replaced_initializers_.push_back(v);
    } else {
      name = ed_.FreshName(v + "_fp32");
      Node cast = opt::CastNode(name, v, name, DataType::kFloat);
      auto back = cast_backs_.find(v);
      const int64_t producer = ed_.Producer(v);
      if (back != cast_backs_.end()) pending_[back->second.anchor].push_back(std::move(cast));  // after the Cast back
      else if (producer >= 0) ed_.InsertAfter(static_cast<size_t>(producer), std::move(cast));
      else ed_.InsertBefore(0, std::move(cast));  // a graph input: before every node
    }
    twins_.emplace(v, name);
    return name;
  }

  // Node `anchor`, widened, writes `wide`; a Cast to `type` writes `narrow`.
  void AddCastBack(size_t anchor, const std::string& wide, const std::string& narrow, DataType type) {
    pending_[anchor].push_back(opt::CastNode(narrow, wide, narrow, type));
    cast_backs_[narrow] = {anchor, wide};
  }

  // The float32 value `v` was rounded from, when `v` is a widened node's
  // output that node `reader` (input `input`) alone reads; empty otherwise.
  std::string BeforeRounding(const std::string& v, size_t reader, size_t input) const {
    auto back = cast_backs_.find(v);
    if (back == cast_backs_.end() || twins_.count(v) || ed_.IsPinned(v)) return "";
    const std::vector<opt::Use> uses = ed_.Uses(v);
    if (uses.size() != 1 || uses[0].node != reader || uses[0].input != input) return "";
    return back->second.wide;
  }

  // Adds the held-back Casts, but no Cast back that nothing reads.
  void Flush() {
    for (auto& [anchor, nodes] : pending_)
      for (Node& node : nodes) {
        const std::string& out = node.outputs[0];
        const bool cast_back = cast_backs_.count(out) > 0;
        if (cast_back && ed_.Uses(out).empty() && !ed_.IsPinned(out) && !twins_.count(out)) continue;
        ed_.InsertAfter(anchor, std::move(node));
      }
    pending_.clear();
  }

  const std::vector<std::string>& replaced_initializers() const { return replaced_initializers_; }

 private:
  struct CastBack {
    size_t anchor;
    std::string wide;
  };
  GraphEditor& ed_;
  std::unordered_map<std::string, std::string> twins_;
  std::unordered_map<std::string, CastBack> cast_backs_;  // by the narrow name
  std::map<size_t, std::vector<Node>> pending_;            // by widened node, in the order made
  std::vector<std::string> replaced_initializers_;
};

Status Widen(GraphEditor& ed, size_t i, const WidenPlan& plan, Widening& widening) {
  const bool commutes = CommutesWithRounding(ed, ed.node(i));
  for (size_t k = 0; k < plan.inputs.size(); ++k) {
    if (plan.inputs[k] == DataType::kUndefined) continue;
    const std::string v = ed.node(i).inputs[k];
    std::string wide = commutes ? widening.BeforeRounding(v, i, k) : "";
    if (wide.empty()) {
      NEE_ASSIGN_OR_RETURN(wide, widening.FloatOf(v));
    }
    ed.SetInput(i, k, wide);
  }
  for (size_t k = 0; k < plan.outputs.size(); ++k) {
    if (plan.outputs[k] == DataType::kUndefined) continue;
    const std::string narrow = ed.node(i).outputs[k];
    const std::string wide = ed.FreshName(narrow + "_fp32");
    // The node writes the float32 value; its readers keep the narrow name,
    // which the Cast back now writes.
    ed.RenameOutput(i, k, wide);
    ed.ReplaceUses(wide, narrow);
    widening.AddCastBack(i, wide, narrow, plan.outputs[k]);
  }
  return Status::Ok();
}

// Cast(to narrow) of a Cast(to float) of a value of that narrow type gives the
// value back bit for bit: its readers read the value itself.
bool BypassExactPair(GraphEditor& ed, size_t i) {
  const Node& outer = ed.node(i);
  if (!opt::IsOp(outer, "Cast") || outer.inputs.size() != 1 || outer.outputs.size() != 1) return false;
  const Attribute* to = outer.FindAttr("to");
  if (!to || to->type != AttrType::kInt || !IsNarrow(static_cast<DataType>(to->i))) return false;
  const int64_t p = ed.Producer(outer.inputs[0]);
  if (p < 0 || ed.removed(static_cast<size_t>(p))) return false;
  const Node& inner = ed.node(static_cast<size_t>(p));
  const Attribute* inner_to = inner.FindAttr("to");
  if (!opt::IsOp(inner, "Cast") || inner.inputs.size() != 1 || !inner_to || inner_to->type != AttrType::kInt ||
      inner_to->i != static_cast<int64_t>(DataType::kFloat))
    return false;
  const TypeInfo* source = ed.TensorType(inner.inputs[0]);
  if (!source || static_cast<int64_t>(source->elem_type) != to->i) return false;
  const std::string out = outer.outputs[0], source_name = inner.inputs[0];
  if (ed.IsPinned(out)) return false;
  ed.RemoveNode(i);
  ed.ReplaceUses(out, source_name);
  return true;
}

}  // namespace

const std::vector<std::pair<const char*, const char*>>& WidenedOps() {
  static const std::vector<std::pair<const char*, const char*>> ops = {
      {"", "MatMul"}, {"", "Gemm"}, {"", "Conv"}, {"", "ConvTranspose"}, {"", "MaxPool"}, {"", "AveragePool"},
      {"", "GlobalAveragePool"}, {"", "Exp"}, {"", "Sigmoid"}, {"", "Tanh"}, {"", "Softmax"}, {"", "Add"},
      {"", "Sub"}, {"", "Mul"}, {"", "Div"}, {"", "Pow"}, {"", "LayerNormalization"}, {"", "Relu"},
      {"", "LeakyRelu"}, {"", "HardSigmoid"}, {"", "HardSwish"}, {"", "Clip"}, {"", "Neg"}, {"", "Sqrt"},
      {"", "Reciprocal"}, {"", "Erf"}, {"", "Gelu"}, {"", "Resize"}, {"", "LSTM"}, {"", "GRU"}, {"", "RNN"},
      {"com.microsoft", "SkipLayerNormalization"}, {"com.microsoft", "Gelu"}, {"com.microsoft", "BiasGelu"},
      {"com.microsoft", "FastGelu"}, {"com.microsoft", "FusedConv"},
  };
  return ops;
}

Status WidenNarrowFloat(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  Widening widening(ed);
  KeptBf16 kept_bf16(ed);
  bool any = false;
  for (size_t i : checked.order) {
    if (!ed.removed(i) && BypassExactPair(ed, i)) {
      any = true;
      continue;
    }
    const Node& node = ed.node(i);
    if (!IsWidenedOp(node) || !node.declaration) continue;
    std::optional<WidenPlan> plan = PlanNode(ed, node, *node.declaration);
    if (!plan || !plan->any || RunsNarrow(ed, node, *plan) || kept_bf16.Keep(node, *plan)) continue;
    NEE_RETURN_IF_ERROR(Widen(ed, i, *plan, widening));
    any = true;
  }
  widening.Flush();
  *changed = ed.CommitDroppingInitializers(widening.replaced_initializers()) || any;
  return Status::Ok();
}

}  // namespace nee
