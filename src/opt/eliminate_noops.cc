// Level-2 removal of nodes that pass their input through unchanged:
// Identity, inference Dropout, Cast to the input's own type, Reshape to the
// input's own shape, Transpose with the identity permutation, a float32
// product with (or quotient by) a constant 1 of no higher rank than the other
// operand (x * 1 is x, bit for bit; PaddlePaddle's swish is x * Sigmoid(x * 1),
// which fuse-conv-activation then takes as SiLU), and pairs that
// cancel (Transpose+Transpose, Unsqueeze+Squeeze, Squeeze+Unsqueeze on the
// same axes). Two Transposes that do not cancel become one; a chain of
// reshaping ops ending in a Reshape becomes that Reshape. A Transpose that
// only moves axes of size 1 (ViT's [S, 1, D] -> [1, S, D] around attention)
// keeps the elements in order: it becomes a Reshape to its static output
// shape, which the memory planner makes a view instead of a copy.
//
// A removed node's output name is kept alive when something outside this
// graph's nodes sees it (a graph output): the producer of the input is then
// renamed to it instead. When neither name can go, the node stays.
#include <algorithm>
#include <numeric>

#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// Makes `output` (written by node `index`) an alias of `input` and removes
// the node, or does nothing and returns false when names must be kept.
bool Bypass(GraphEditor& ed, size_t index, const std::string& input, const std::string& output) {
  if (!ed.IsPinned(output)) {
    ed.RemoveNode(index);
    ed.ReplaceUses(output, input);
    return true;
  }
  // The output must keep its name: rename the input's producer to it, if the
  // input is a node output nobody else needs under its own name.
  int64_t producer = ed.Producer(input);
  if (producer < 0 || ed.IsPinned(input)) return false;
  const Node& p = ed.node(static_cast<size_t>(producer));
  size_t slot = std::find(p.outputs.begin(), p.outputs.end(), input) - p.outputs.begin();
  ed.RemoveNode(index);
  ed.RenameOutput(static_cast<size_t>(producer), slot, output);
  return true;
}

bool OutputsUnusedFrom(GraphEditor& ed, const Node& node, size_t first) {
  for (size_t k = first; k < node.outputs.size(); ++k) {
    const std::string& o = node.outputs[k];
    if (!o.empty() && (ed.IsPinned(o) || !ed.Uses(o).empty())) return false;
  }
  return true;
}

int64_t RankOf(GraphEditor& ed, const std::string& name) {
  const TypeInfo* t = ed.TensorType(name);
  return t && t->shape ? static_cast<int64_t>(t->shape->size()) : -1;
}

// A Transpose's permutation (the default reverses the axes); empty when unknown.
std::vector<int64_t> PermOf(GraphEditor& ed, const Node& t) {
  int64_t rank = RankOf(ed, t.inputs[0]);
  if (rank < 0) return {};
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) reversed[i] = rank - 1 - i;
  auto perm = t.GetInts("perm", reversed);
  if (!perm.ok() || static_cast<int64_t>(perm.value().size()) != rank) return {};
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm.value()) {
    if (p < 0 || p >= rank || seen[p]) return {};
    seen[p] = true;
  }
  return perm.value();
}

bool IsIdentityPerm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool SimpleNode(const Node& n, size_t max_inputs) {
  return n.inputs.size() >= 1 && n.inputs.size() <= max_inputs && !n.inputs[0].empty() && n.outputs.size() >= 1 &&
         !n.outputs[0].empty();
}

// Whether `perm` keeps the axes of size other than 1 in their order, over a
// fully known input shape (so the transpose moves no element).
bool MovesOnlyUnitAxes(const TypeInfo& in, const std::vector<int64_t>& perm) {
  if (!in.shape || in.shape->size() != perm.size()) return false;
  int64_t last = -1;
  for (int64_t axis : perm) {
    const Dim& d = (*in.shape)[static_cast<size_t>(axis)];
    // A zero dim would be read by Reshape (allowzero 0) as "copy the input's dim".
    if (!d.known() || d.value == 0) return false;
    if (d.value == 1) continue;
    if (axis < last) return false;
    last = axis;
  }
  return true;
}

// Rewrites Transpose node `index` as a Reshape to its output shape when it
// moves only axes of size 1.
bool TryTransposeAsReshape(GraphEditor& ed, size_t index, const std::vector<int64_t>& perm) {
  const Node& t = ed.node(index);
  const TypeInfo* in = ed.TensorType(t.inputs[0]);
  if (!in || ed.checked().opsets[index] < 5 || !MovesOnlyUnitAxes(*in, perm)) return false;
  std::vector<int64_t> out_dims;
  for (int64_t axis : perm) out_dims.push_back((*in->shape)[static_cast<size_t>(axis)].value);
  const int64_t rank = static_cast<int64_t>(out_dims.size());
  const std::string shape = ed.AddInitializer(t.outputs[0] + "_shape", Tensor::FromVector<int64_t>(out_dims, {rank}));
  const std::string source = t.inputs[0];
  ed.RewriteAs(index, "", "Reshape", {source, shape}, {});
  return true;
}

bool TryTranspose(GraphEditor& ed, size_t index) {
  const Node& t2 = ed.node(index);
  if (!SimpleNode(t2, 1) || t2.outputs.size() != 1 || opt::HasOtherAttributes(t2, {"perm"})) return false;
  std::vector<int64_t> perm2 = PermOf(ed, t2);
  if (perm2.empty() && RankOf(ed, t2.inputs[0]) != 0) return false;
  if (IsIdentityPerm(perm2)) return Bypass(ed, index, t2.inputs[0], t2.outputs[0]);
  int64_t producer = ed.Producer(t2.inputs[0]);
  if (producer < 0 || !ed.OnlyUsedBy(t2.inputs[0], index)) return TryTransposeAsReshape(ed, index, perm2);
  const Node& t1 = ed.node(static_cast<size_t>(producer));
  if (!opt::IsOp(t1, "Transpose") || !SimpleNode(t1, 1) || t1.outputs.size() != 1 ||
      opt::HasOtherAttributes(t1, {"perm"}))
    return TryTransposeAsReshape(ed, index, perm2);
  std::vector<int64_t> perm1 = PermOf(ed, t1);
  if (perm1.size() != perm2.size()) return false;
  // Output axis i of the pair is input axis perm1[perm2[i]].
  std::vector<int64_t> combined(perm2.size());
  for (size_t i = 0; i < perm2.size(); ++i) combined[i] = perm1[perm2[i]];
  std::string source = t1.inputs[0];
  if (IsIdentityPerm(combined)) {
    if (!ed.IsPinned(t2.outputs[0]) || (ed.Producer(source) >= 0 && !ed.IsPinned(source))) {
      ed.RemoveNode(static_cast<size_t>(producer));
      return Bypass(ed, index, source, t2.outputs[0]);
    }
  }
  ed.RemoveNode(static_cast<size_t>(producer));
  ed.SetInput(index, 0, source);
  Node& merged = ed.node(index);
  merged.attributes.clear();
  Attribute perm;
  perm.name = "perm";
  perm.type = AttrType::kInts;
  perm.ints = combined;
  merged.attributes.push_back(std::move(perm));
  return true;
}

// Squeeze/Unsqueeze axes, normalized against `rank`, sorted; false when not
// statically known (no axes, non-constant axes, out of range).
bool AxesOf(GraphEditor& ed, size_t index, int64_t rank, std::vector<int64_t>* axes) {
  const Node& n = ed.node(index);
  std::vector<int64_t> raw;
  if (ed.checked().opsets[index] >= 13) {
    if (n.inputs.size() != 2 || n.inputs[1].empty() || !n.attributes.empty()) return false;
    Tensor t = ed.Constant(n.inputs[1]);
    if (!t.defined()) return false;
    auto values = t.ToInt64Vector();
    if (!values.ok()) return false;
    raw = values.value();
  } else {
    if (n.inputs.size() != 1 || opt::HasOtherAttributes(n, {"axes"})) return false;
    auto values = n.GetInts("axes");
    if (!values.ok()) return false;
    raw = values.value();
  }
  if (raw.empty() || rank < 0) return false;
  for (int64_t& a : raw) {
    if (a < -rank || a >= rank) return false;
    if (a < 0) a += rank;
  }
  std::sort(raw.begin(), raw.end());
  if (std::adjacent_find(raw.begin(), raw.end()) != raw.end()) return false;
  *axes = raw;
  return true;
}

// Squeeze(Unsqueeze(x, a), a) and Unsqueeze(Squeeze(x, a), a) are x.
bool TrySqueezePair(GraphEditor& ed, size_t index) {
  const Node& second = ed.node(index);
  if (!SimpleNode(second, 2) || second.outputs.size() != 1) return false;
  const std::string& middle = second.inputs[0];
  int64_t producer = ed.Producer(middle);
  if (producer < 0 || !ed.OnlyUsedBy(middle, index)) return false;
  const Node& first = ed.node(static_cast<size_t>(producer));
  bool second_squeezes = opt::IsOp(second, "Squeeze");
  if (!opt::IsOp(first, second_squeezes ? "Unsqueeze" : "Squeeze") || !SimpleNode(first, 2) ||
      first.outputs.size() != 1)
    return false;
  // Axes refer to the larger of the two ranks: the unsqueezed one.
  int64_t big_rank = second_squeezes ? RankOf(ed, middle) : RankOf(ed, first.inputs[0]);
  std::vector<int64_t> axes1, axes2;
  if (!AxesOf(ed, static_cast<size_t>(producer), big_rank, &axes1) || !AxesOf(ed, index, big_rank, &axes2) ||
      axes1 != axes2)
    return false;
  std::string source = first.inputs[0];
  std::string output = second.outputs[0];
  if (ed.IsPinned(output) && (ed.Producer(source) < 0 || ed.IsPinned(source))) return false;
  ed.RemoveNode(static_cast<size_t>(producer));
  return Bypass(ed, index, source, output);
}

// Reshape whose constant target shape reproduces the input's shape.
bool ReshapeKeepsShape(GraphEditor& ed, size_t index) {
  const Node& n = ed.node(index);
  if (n.inputs.size() != 2 || ed.checked().opsets[index] < 5) return false;
  if (opt::HasOtherAttributes(n, {"allowzero"})) return false;
  auto allowzero = n.GetInt("allowzero", 0);
  Tensor shape_tensor = ed.Constant(n.inputs[1]);
  const TypeInfo* in = ed.TensorType(n.inputs[0]);
  if (!allowzero.ok() || !shape_tensor.defined() || !in || !in->shape) return false;
  auto target = shape_tensor.ToInt64Vector();
  if (!target.ok() || target.value().size() != in->shape->size()) return false;
  const Shape& dims = *in->shape;
  int64_t unmatched = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t s = target.value()[i];
    bool same = (s == 0 && allowzero.value() == 0) || (dims[i].known() && dims[i].value == s);
    if (same) continue;
    if (s != -1 || unmatched >= 0) return false;
    unmatched = static_cast<int64_t>(i);
  }
  if (unmatched < 0) return true;
  // A single -1 recovers the input's dim only when every other dim is a
  // known non-zero size.
  for (size_t i = 0; i < dims.size(); ++i)
    if (static_cast<int64_t>(i) != unmatched && !(dims[i].known() && dims[i].value > 0)) return false;
  return true;
}

// Reshape(Reshape/Flatten/Squeeze/Unsqueeze(x), s) is Reshape(x, s) when `s`
// copies no dim from its input (no 0 entries, or allowzero): only the element
// count matters, and every op in the chain keeps it.
bool TryCollapseReshapeChain(GraphEditor& ed, size_t index) {
  const Node& n = ed.node(index);
  if (n.inputs.size() != 2 || ed.checked().opsets[index] < 5 || opt::HasOtherAttributes(n, {"allowzero"}))
    return false;
  auto allowzero = n.GetInt("allowzero", 0);
  Tensor shape_tensor = ed.Constant(n.inputs[1]);
  if (!allowzero.ok() || !shape_tensor.defined()) return false;
  auto target = shape_tensor.ToInt64Vector();
  if (!target.ok()) return false;
  if (allowzero.value() == 0 && std::find(target.value().begin(), target.value().end(), 0) != target.value().end())
    return false;
  const std::string& middle = n.inputs[0];
  int64_t producer = ed.Producer(middle);
  if (producer < 0 || !ed.OnlyUsedBy(middle, index)) return false;
  const Node& p = ed.node(static_cast<size_t>(producer));
  bool shape_only = opt::IsOp(p, "Reshape") || opt::IsOp(p, "Flatten") || opt::IsOp(p, "Squeeze") ||
                    opt::IsOp(p, "Unsqueeze");
  if (!shape_only || p.inputs.empty() || p.inputs[0].empty() || p.outputs.size() != 1) return false;
  if (!ed.TensorType(p.inputs[0])) return false;
  std::string source = p.inputs[0];
  ed.RemoveNode(static_cast<size_t>(producer));
  ed.SetInput(index, 0, source);
  return true;
}

// Mul(x, 1) or Mul(1, x) or Div(x, 1), x float32 and 1 a constant of one element.
bool TryTimesOne(GraphEditor& ed, size_t index) {
  const Node& n = ed.node(index);
  if (!opt::IsBinary(ed, static_cast<int64_t>(index), n.op_type.c_str())) return false;
  for (size_t side = 0; side < 2; ++side) {
    if (n.op_type == "Div" && side == 0) continue;  // 1 / x is not x
    // A one of size-1 dims, no more of them than x has, broadcasts to x's shape whatever x's dims are.
    const Tensor one = ed.Constant(n.inputs[side]);
    if (!opt::IsFloatTensor(one) || one.num_elements() != 1 || one.data<float>()[0] != 1.f) continue;
    const std::string& x = n.inputs[1 - side];
    const TypeInfo* type = ed.TensorType(x);
    if (!type || type->elem_type != DataType::kFloat || !type->shape ||
        static_cast<size_t>(one.rank()) > type->shape->size())
      continue;
    return Bypass(ed, index, x, n.outputs[0]);
  }
  return false;
}

bool TryEliminate(GraphEditor& ed, size_t index) {
  const Node& n = ed.node(index);
  if (!NormalizeDomain(n.domain).empty() || n.inputs.empty() || n.outputs.empty() || n.inputs[0].empty() ||
      n.outputs[0].empty())
    return false;
  const std::string& op = n.op_type;
  int64_t opset = ed.checked().opsets[index];
  if (op == "Identity") return n.inputs.size() == 1 && Bypass(ed, index, n.inputs[0], n.outputs[0]);
  if (op == "Dropout") {
    if (!OutputsUnusedFrom(ed, n, 1)) return false;
    if (opset >= 12 && n.HasInput(2)) {
      // training_mode must be a constant false.
      Tensor mode = ed.Constant(n.inputs[2]);
      if (!mode.defined() || mode.dtype() != DataType::kBool || mode.num_elements() != 1 ||
          mode.data<bool>()[0])
        return false;
    }
    if (!ed.TensorType(n.inputs[0])) return false;
    return Bypass(ed, index, n.inputs[0], n.outputs[0]);
  }
  if (op == "Cast") {
    const TypeInfo* in = ed.TensorType(n.inputs[0]);
    auto to = n.GetInt("to");
    if (!in || !to.ok() || n.inputs.size() != 1 || in->elem_type == DataType::kUndefined) return false;
    if (static_cast<int64_t>(in->elem_type) != to.value()) return false;
    return Bypass(ed, index, n.inputs[0], n.outputs[0]);
  }
  if (op == "Reshape") {
    while (TryCollapseReshapeChain(ed, index)) {
    }
    return ReshapeKeepsShape(ed, index) && Bypass(ed, index, ed.node(index).inputs[0], ed.node(index).outputs[0]);
  }
  if (op == "Transpose") return TryTranspose(ed, index);
  if (op == "Squeeze" || op == "Unsqueeze") return TrySqueezePair(ed, index);
  if (op == "Mul" || op == "Div") return TryTimesOne(ed, index);
  return false;
}
}  // namespace

Status EliminateNoOps(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) TryEliminate(ed, index);
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
