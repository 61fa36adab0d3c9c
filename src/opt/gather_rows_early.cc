// Level-2 pass: a Gather that keeps a few rows of a computation whose rows
// are independent moves up to the inputs of that computation, so the rows
// nobody reads are never computed. ViT's classifier reads only the class
// token, x[:, 0], of the last encoder layer's output: its final LayerNorm, its
// MLP (two GEMMs of 197 x 768 x 3072) and the LayerNorm before it then run on
// one row instead of 197.
//
// A node is row-wise when each row of its outputs (one index along all axes
// but the last) is computed from the same row of its row inputs alone, every
// other input being per column:
//   - com.microsoft SkipLayerNormalization: rows x and skip (one shape),
//   - LayerNormalization over axis -1: row x,
//   - MatMul and ai.nee FusedMatMul by a constant 2-D B: row A.
// Conditions: the Gather's indices a constant of rank <= 1, its axis not the
// last; the nodes taken are row-wise, all of rank R with static dims, the same
// dims as their row inputs before the last axis, and every reader of what
// they write is the Gather or another node taken (at a row input); none
// writes a graph output. A Gather then reads each row input coming from
// outside, and the original Gather goes. Each row is computed as before, by
// the same kernels, so the kept rows do not change.
//
// Flat form: when every leading axis of the Gather's data but `axis` has size
// 1 (one image), the Gather keeps the flat rows `indices` (rows: all axes but
// the last, in order), and so does a Gather along the one leading axis of
// size != 1 of any tensor with those rows, whatever its rank. The nodes taken
// may then differ in rank and also be
//   - Reshape by a constant shape keeping the last axis (rows stay in order),
//   - Transpose keeping the last axis last (one leading axis is not 1, so the
//     rows' order does not change),
//   - Gemm, transA = 0, of a constant B and a C constant per column:
// ViT's last out-projection (a Gemm between Reshapes and a Transpose, as
// nn.MultiheadAttention writes it) then runs on the class row, the Gather
// moving up to the attention's output. Every value taken keeps its rank, its
// rows axis shrunk to the rows kept, a Reshape gets the shape that says so,
// and the original Gather becomes a Reshape to its own output's shape. A Gemm
// of one row reads B in place (a dot product per column), so its row is not
// bitwise the 197-row product's; the other nodes' are.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ops/attention_sdpa.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// What the Gather keeps: its indices (a constant) along `axis` of rank-`rank` data.
struct RowPick {
  std::string indices;
  int64_t axis = 0;
  int64_t rank = 0;
  bool scalar = false;  // a scalar index drops the axis
  bool flat = false;    // the flat form (see above)
  int64_t rows = 0;     // flat: the data's rows, all along `axis`
  int64_t kept = 0;     // flat: how many rows the Gather keeps
};

// Flat form: the one leading axis of `dims` holding all `rows` rows (the
// others of size 1); -1 when there is none or dims has rank < 2.
int64_t RowsAxis(const std::vector<int64_t>& dims, int64_t rows) {
  if (dims.size() < 2) return -1;
  int64_t axis = -1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (axis >= 0 || dims[i] != rows) return -1;
    axis = static_cast<int64_t>(i);
  }
  return axis;
}

// Flat form: the static dims of `name` and its rows axis; false when it has none.
bool FlatRows(GraphEditor& ed, const std::string& name, const RowPick& pick, std::vector<int64_t>* dims,
              int64_t* axis) {
  if (!opt::StaticDims(ed.TensorType(name), dims)) return false;
  *axis = RowsAxis(*dims, pick.rows);
  return *axis >= 0;
}

// Flat form's extra row-wise nodes (see above): their row inputs, or empty.
std::vector<size_t> FlatRowInputs(GraphEditor& ed, size_t index, const RowPick& pick) {
  const Node& n = ed.node(index);
  if (n.outputs.size() != 1 || n.inputs.empty()) return {};
  const int64_t opset = ed.checked().opsets[index];
  std::vector<int64_t> in, out;
  int64_t in_axis = 0, out_axis = 0;
  if (!FlatRows(ed, n.inputs[0], pick, &in, &in_axis) || !FlatRows(ed, n.outputs[0], pick, &out, &out_axis))
    return {};
  if (opt::IsOp(n, "Reshape") && opset >= 5) {
    if (n.inputs.size() != 2 || opt::HasOtherAttributes(n, {"allowzero"}) || !ed.Constant(n.inputs[1]).defined() ||
        in.back() != out.back())
      return {};
    return {0};
  }
  if (opt::IsOp(n, "Transpose")) {
    auto perm = n.GetInts("perm", {});
    if (n.inputs.size() != 1 || opt::HasOtherAttributes(n, {"perm"}) || !perm.ok() ||
        perm.value().size() != in.size() || perm.value().back() != static_cast<int64_t>(in.size()) - 1)
      return {};
    return {0};
  }
  if (opt::IsOp(n, "Gemm")) {
    auto trans_a = n.GetInt("transA", 0);
    if (n.inputs.size() < 2 || !trans_a.ok() || trans_a.value() != 0 || in.size() != 2) return {};
    if (!ed.Constant(n.inputs[1]).defined()) return {};
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      const Tensor c = ed.Constant(n.inputs[2]);
      if (!c.defined() || c.rank() > 2 || (c.rank() == 2 && c.dim(0) != 1)) return {};
    }
    return {0};
  }
  return {};
}

bool Used(const GraphEditor& ed, const Node& n, size_t output) {
  return output < n.outputs.size() && !n.outputs[output].empty() &&
         (ed.IsPinned(n.outputs[output]) || !ed.Uses(n.outputs[output]).empty());
}

// The row inputs of node `index` when it is row-wise (see above); empty otherwise.
std::vector<size_t> RowInputs(GraphEditor& ed, size_t index, const RowPick& pick) {
  const Node& n = ed.node(index);
  if (pick.flat) {
    std::vector<size_t> rows = FlatRowInputs(ed, index, pick);
    if (!rows.empty()) return rows;
  }
  // The flat form keeps every rank; otherwise a scalar index drops an axis.
  const int64_t kept_rank = pick.scalar && !pick.flat ? pick.rank - 1 : pick.rank;
  if (n.domain == opt::kMicrosoftDomain && n.op_type == "SkipLayerNormalization") {
    if (n.inputs.size() < 3 || Used(ed, n, 1) || Used(ed, n, 2) || kept_rank < 2) return {};
    if (!opt::ProvablySameShape(ed.TensorType(n.inputs[0]), ed.TensorType(n.inputs[1]))) return {};
    return {0, 1};
  }
  if (opt::IsOp(n, "LayerNormalization")) {
    auto axis = n.GetInt("axis", -1);
    if (!axis.ok() || axis.value() != -1 || Used(ed, n, 1) || Used(ed, n, 2) || kept_rank < 2) return {};
    return {0};
  }
  const bool fused = n.domain == kNeeDomain && n.op_type == "FusedMatMul";
  if (opt::IsOp(n, "MatMul") || fused) {
    if (n.inputs.size() < 2 || n.outputs.size() != 1 || kept_rank < 2) return {};
    const Tensor b = ed.Constant(n.inputs[1]);
    if (!b.defined() || b.rank() != 2) return {};
    return {0};
  }
  return {};
}

// Whether `name` has rank pick.rank, static dims, and the dims `lead` before
// its last axis; in the flat form, whether it has a rows axis.
bool SameRows(GraphEditor& ed, const std::string& name, const RowPick& pick, std::vector<int64_t>* lead) {
  std::vector<int64_t> dims;
  int64_t axis = 0;
  if (pick.flat) return FlatRows(ed, name, pick, &dims, &axis);
  if (!opt::StaticDims(ed.TensorType(name), &dims) || static_cast<int64_t>(dims.size()) != pick.rank) return false;
  dims.pop_back();
  if (lead->empty()) *lead = dims;
  return dims == *lead;
}

// The Gather at `index` as a RowPick; false when it does not qualify.
bool PickOf(GraphEditor& ed, size_t index, RowPick* pick) {
  const Node& g = ed.node(index);
  if (!opt::IsOp(g, "Gather") || g.inputs.size() != 2 || g.outputs.size() != 1) return false;
  const Tensor indices = ed.Constant(g.inputs[1]);
  std::vector<int64_t> dims;
  if (!indices.defined() || indices.rank() > 1 || indices.num_elements() == 0 ||
      (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32) ||
      !opt::StaticDims(ed.TensorType(g.inputs[0]), &dims) || dims.size() < 2)
    return false;
  auto axis = g.GetInt("axis", 0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (!axis.ok() || axis.value() < -rank || axis.value() >= rank) return false;
  pick->indices = g.inputs[1];
  pick->axis = axis.value() < 0 ? axis.value() + rank : axis.value();
  pick->rank = rank;
  pick->scalar = indices.rank() == 0;
  if (pick->axis >= rank - 1) return false;
  pick->rows = dims[static_cast<size_t>(pick->axis)];
  pick->kept = indices.num_elements();
  // The flat form ends in a Reshape taking its shape as an input (opset 5).
  pick->flat = pick->rows > 1 && RowsAxis(dims, pick->rows) == pick->axis && ed.checked().opsets[index] >= 5 &&
               opt::StaticDims(ed.TensorType(g.outputs[0]), &dims);
  return true;
}

// The row-wise nodes the Gather at `gather` can move above, in reverse node order.
std::vector<size_t> NodesToShrink(GraphEditor& ed, size_t gather, const RowPick& pick) {
  std::unordered_map<size_t, std::vector<size_t>> taken;  // node -> its row inputs
  std::vector<size_t> order;
  std::vector<int64_t> lead;
  SameRows(ed, ed.node(gather).inputs[0], pick, &lead);  // the Gather's data sets the rows' dims
  const std::vector<size_t>& nodes = ed.checked().order;
  auto at = std::find(nodes.begin(), nodes.end(), gather);
  for (auto it = std::make_reverse_iterator(at); it != nodes.rend(); ++it) {
    const size_t index = *it;
    if (ed.removed(index)) continue;
    std::vector<size_t> rows = RowInputs(ed, index, pick);
    if (rows.empty()) continue;
    const Node& n = ed.node(index);
    bool ok = true, read = false;
    for (const std::string& out : n.outputs) {
      if (out.empty()) continue;
      if (ed.IsPinned(out) || !SameRows(ed, out, pick, &lead)) ok = false;
      for (const opt::Use& u : ed.Uses(out)) {
        read = true;
        auto reader = taken.find(u.node);
        const bool row_read = reader != taken.end() && std::count(reader->second.begin(), reader->second.end(), u.input);
        if (!(u.node == gather && u.input == 0) && !row_read) ok = false;
      }
    }
    for (size_t r : rows) ok = ok && SameRows(ed, n.inputs[r], pick, &lead);
    if (!ok || !read) continue;
    taken.emplace(index, rows);
    order.push_back(index);
  }
  return order;
}

// Flat form: `dims` with its rows axis holding the `kept` rows instead.
std::vector<int64_t> KeptDims(std::vector<int64_t> dims, const RowPick& pick) {
  dims[static_cast<size_t>(RowsAxis(dims, pick.rows))] = pick.kept;
  return dims;
}

// Flat form: the indices as a rank-1 constant (a scalar one would drop the axis).
std::string FlatIndices(GraphEditor& ed, const RowPick& pick) {
  const Tensor indices = ed.Constant(pick.indices);
  if (indices.rank() == 1) return pick.indices;
  Result<std::vector<int64_t>> values = indices.ToInt64Vector();
  if (!values.ok()) return "";
  return ed.AddInitializer(pick.indices + "_rows", Tensor::FromVector<int64_t>(values.value(), {pick.kept}));
}

// Moves the Gather at `gather` above the row-wise nodes it can; false when none.
bool TryMove(GraphEditor& ed, size_t gather) {
  RowPick pick;
  if (!PickOf(ed, gather, &pick)) return false;
  const Node& g = ed.node(gather);
  const int64_t producer = ed.Producer(g.inputs[0]);
  if (producer < 0) return false;
  std::vector<size_t> shrink = NodesToShrink(ed, gather, pick);
  std::unordered_set<size_t> taken(shrink.begin(), shrink.end());
  if (!taken.count(static_cast<size_t>(producer))) return false;
  const std::string indices = pick.flat ? FlatIndices(ed, pick) : pick.indices;
  if (indices.empty()) return false;
  // Topological order: a row input read by several taken nodes gets one
  // Gather, placed before its first reader.
  std::unordered_map<std::string, std::string> gathered;
  for (auto it = shrink.rbegin(); it != shrink.rend(); ++it) {
    const size_t index = *it;
    for (size_t r : RowInputs(ed, index, pick)) {
      const std::string input = ed.node(index).inputs[r];
      const int64_t from = ed.Producer(input);
      if (from >= 0 && taken.count(static_cast<size_t>(from))) continue;
      auto found = gathered.find(input);
      if (found == gathered.end()) {
        int64_t axis = pick.axis;
        std::vector<int64_t> dims;
        if (pick.flat) FlatRows(ed, input, pick, &dims, &axis);
        const std::string name = ed.FreshName(input + "_rows");
        ed.InsertBefore(index, opt::MakeNode(name, "Gather", {input, indices}, {name}, {opt::IntAttr("axis", axis)}));
        found = gathered.emplace(input, name).first;
      }
      ed.SetInput(index, r, found->second);
    }
    const Node& n = ed.node(index);
    if (pick.flat && opt::IsOp(n, "Reshape")) {  // its shape now keeps the rows kept
      std::vector<int64_t> dims;
      opt::StaticDims(ed.TensorType(n.outputs[0]), &dims);
      const std::vector<int64_t> kept = KeptDims(dims, pick);
      ed.SetInput(index, 1, ed.AddInitializer(n.outputs[0] + "_rows_shape",
                                              Tensor::FromVector<int64_t>(kept, {static_cast<int64_t>(kept.size())})));
    }
  }
  const std::string source = g.inputs[0], output = g.outputs[0];
  if (pick.flat) {  // the Gather becomes a Reshape of the rows kept to its own output's shape
    std::vector<int64_t> dims;
    opt::StaticDims(ed.TensorType(output), &dims);
    const std::string shape = ed.AddInitializer(
        output + "_shape", Tensor::FromVector<int64_t>(dims, {static_cast<int64_t>(dims.size())}));
    ed.RewriteAs(gather, "", "Reshape", {source, shape}, {});
    return true;
  }
  ed.RemoveNode(gather);
  if (ed.IsPinned(output)) {  // a graph output keeps its name: the producer writes it
    const Node& p = ed.node(static_cast<size_t>(producer));
    ed.RenameOutput(static_cast<size_t>(producer), std::find(p.outputs.begin(), p.outputs.end(), source) - p.outputs.begin(),
                    output);
  } else {
    ed.ReplaceUses(output, source);
  }
  return true;
}

}  // namespace

Status GatherRowsEarly(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  // One Gather per run: a move changes the shapes the next one would check.
  bool moved = false;
  for (size_t index : checked.order)
    if (!moved && !ed.removed(index)) moved = TryMove(ed, index);
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
