// Level-2 fusion into ai.nee TransposeColumnMap (ops/column_map.h): a
// last-axis Concat whose parts are column ranges of one Transpose's output,
// each through a chain of elementwise ops with a constant operand, becomes one
// node reading the Transpose's input:
//   t = Transpose(x)
//   Concat(((Slice(t, 0:2) * 2 - 0.5) + grid) * stride,
//          Pow(Slice(t, 2:4) * 2, 2) * anchors,
//          Slice(t, 4:85), axis = -1)           => TransposeColumnMap(x, 2, 0.5, grid, stride, anchors)
// A YOLO head's box decode (with its Sigmoid moved into the head Conv by
// hoist-activation-to-conv) is this; it was a Transpose, three Slices and a
// Concat each copying the head's output. Bitwise the unfused nodes.
// Conditions: static shapes; the Slices (constant bounds on the last axis,
// step 1) take consecutive ranges covering t's last axis, in the Concat's
// order, and are t's only readers; every op of a chain is Add, Sub, Mul or
// Div (opset 7+) with one float32 constant operand that does not widen the
// part, or Pow by the constant scalar 2; every value on the way is read by the
// next node only and is no graph output.
#include <algorithm>

#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/column_map.h"
#include "opt/column_map_passes.h"
#include "opt/column_slice.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// One part of the Concat: the Slice's source and columns, and the chain's
// steps from the Slice on (constant names; "" for a square).
struct Part {
  std::string source;
  int64_t begin = 0, end = 0;
  std::vector<std::pair<ColumnStep, std::string>> steps;
  std::vector<size_t> nodes;  // the Slice and the chain
};

// The Slice at `index` as one part's column range (opt/column_slice.h).
bool MatchColumnSlice(const GraphEditor& ed, size_t index, Part* part) {
  opt::ColumnSlice slice;
  if (!opt::MatchColumnSlice(ed, index, &slice)) return false;
  part->source = slice.source;
  part->begin = slice.begin;
  part->end = slice.end;
  part->nodes.push_back(index);
  return true;
}

// An elementwise node of the chain reading `value` (its input `slot`) and a
// constant of no larger shape: the step it applies.
bool MatchStep(GraphEditor& ed, size_t index, const std::string& value, std::pair<ColumnStep, std::string>* step) {
  const Node& n = ed.node(index);
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || !n.attributes.empty() || ed.checked().opsets[index] < 7)
    return false;
  const bool first = n.inputs[0] == value;
  if (!first && n.inputs[1] != value) return false;
  const std::string& other = n.inputs[first ? 1 : 0];
  if (other == value || !opt::IsFloatTensor(ed.Constant(other))) return false;
  // The part keeps its shape: the constant broadcasts onto the value.
  std::vector<int64_t> in_dims, out_dims;
  if (!opt::StaticDims(ed.TensorType(value), &in_dims) || !opt::StaticDims(ed.TensorType(n.outputs[0]), &out_dims) ||
      in_dims != out_dims)
    return false;
  if (opt::IsOp(n, "Pow")) {
    float e = 0.f;
    if (!first || !opt::ScalarConstant(ed, other, &e) || e != 2.f) return false;
    *step = {ColumnStep::kSquare, ""};
    return true;
  }
  ColumnStep op;
  if (opt::IsOp(n, "Add")) op = ColumnStep::kAdd;  // v + c and c + v are one IEEE sum
  else if (opt::IsOp(n, "Mul")) op = ColumnStep::kMul;
  else if (opt::IsOp(n, "Sub")) op = first ? ColumnStep::kSub : ColumnStep::kSubFrom;
  else if (opt::IsOp(n, "Div")) op = first ? ColumnStep::kDiv : ColumnStep::kDivInto;
  else return false;
  *step = {op, other};
  return true;
}

// Walks from a Concat input back to its Slice.
bool MatchPart(GraphEditor& ed, const std::string& input, size_t concat, Part* part) {
  std::string value = input;
  size_t reader = concat;
  std::vector<std::pair<ColumnStep, std::string>> reversed;
  for (int depth = 0; depth < 16; ++depth) {
    if (!ed.OnlyUsedBy(value, reader)) return false;
    const int64_t p = ed.Producer(value);
    if (p < 0) return false;
    const size_t index = static_cast<size_t>(p);
    if (ed.node(index).outputs.size() != 1) return false;
    if (opt::IsOp(ed.node(index), "Slice")) {
      if (!MatchColumnSlice(ed, index, part)) return false;
      part->steps.assign(reversed.rbegin(), reversed.rend());
      return true;
    }
    // Which input continues the chain: the non-constant one.
    const Node& n = ed.node(index);
    if (n.inputs.size() != 2) return false;
    const std::string& chain = ed.Constant(n.inputs[0]).defined() ? n.inputs[1] : n.inputs[0];
    std::pair<ColumnStep, std::string> step;
    if (!MatchStep(ed, index, chain, &step)) return false;
    reversed.push_back(step);
    part->nodes.push_back(index);
    value = chain;
    reader = index;
  }
  return false;
}

void TryFuse(GraphEditor& ed, size_t concat) {
  const Node& cat = ed.node(concat);
  if (!opt::IsOp(cat, "Concat") || cat.outputs.size() != 1 || cat.inputs.empty() || ed.checked().opsets[concat] < 4)
    return;
  std::vector<int64_t> out_dims;
  const TypeInfo* out_type = ed.TensorType(cat.outputs[0]);
  if (!opt::IsFloatWithRank(out_type) || !opt::StaticDims(out_type, &out_dims) || out_dims.empty()) return;
  auto axis = cat.GetInt("axis");
  const int64_t rank = static_cast<int64_t>(out_dims.size());
  if (!axis.ok() || (axis.value() != -1 && axis.value() != rank - 1)) return;
  std::vector<Part> parts(cat.inputs.size());
  for (size_t k = 0; k < cat.inputs.size(); ++k) {
    for (size_t j = 0; j < k; ++j)
      if (cat.inputs[j] == cat.inputs[k]) return;
    if (!MatchPart(ed, cat.inputs[k], concat, &parts[k])) return;
    if (parts[k].source != parts[0].source || parts[k].begin != (k ? parts[k - 1].end : 0)) return;
  }
  const std::string t = parts[0].source;
  if (parts.back().end != out_dims.back() || ed.IsPinned(t) || ed.Uses(t).size() != parts.size()) return;
  const int64_t transpose = ed.Producer(t);
  if (transpose < 0) return;
  const Node& tr = ed.node(static_cast<size_t>(transpose));
  if (!opt::IsOp(tr, "Transpose") || tr.outputs.size() != 1 || tr.inputs.size() != 1 ||
      opt::HasOtherAttributes(tr, {"perm"}))
    return;
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) reversed[static_cast<size_t>(i)] = rank - 1 - i;
  auto perm = tr.GetInts("perm", reversed);
  if (!perm.ok() || static_cast<int64_t>(perm.value().size()) != rank) return;
  // The node: x, then each distinct constant once.
  std::vector<std::string> inputs = {tr.inputs[0]};
  std::vector<int64_t> bounds = {0}, program;
  for (size_t k = 0; k < parts.size(); ++k) {
    bounds.push_back(parts[k].end);
    for (const auto& [op, constant] : parts[k].steps) {
      int64_t operand = 0;
      if (!constant.empty()) {
        auto it = std::find(inputs.begin(), inputs.end(), constant);
        operand = it - inputs.begin();
        if (it == inputs.end()) inputs.push_back(constant);
      }
      program.insert(program.end(), {static_cast<int64_t>(k), static_cast<int64_t>(op), operand});
    }
  }
  std::vector<Attribute> attrs = {opt::IntsAttr("perm", perm.value()), opt::IntsAttr("bounds", bounds)};
  if (!program.empty()) attrs.push_back(opt::IntsAttr("program", program));
  for (const Part& part : parts)
    for (size_t n : part.nodes) ed.RemoveNode(n);
  ed.RemoveNode(static_cast<size_t>(transpose));
  ed.RewriteAs(concat, kNeeDomain, "TransposeColumnMap", inputs, std::move(attrs));
}

}  // namespace

Status FuseTransposeColumnMap(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) TryFuse(ed, index);
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
