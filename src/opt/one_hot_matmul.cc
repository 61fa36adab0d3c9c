// Level-2 pass: a one-hot encoding multiplied by a constant matrix becomes a
// row lookup. jax2tf writes jax.nn.one_hot(x, K) @ W (magika's byte
// embedding: 2048 tokens, K = 257, 64 columns) as
//   MatMul(Cast(Equal(x, arange(K))), W)        x [..., 1], arange [1.., K]
// a product that is zero but for one term per row, and the Equal and Cast
// before it write a [2048, 257] float matrix. The rewrite reads W's rows:
//   Gather(W', Clip(x[..., 0], -1, K))
// where W' is W with a row of zeros appended (row K). A value of x outside
// 0..K-1 equals no column, so its product row is zero: Clip sends it to -1 or
// K, and Gather reads both (-1 counts from the end) as the zero row.
//
// Exactness: product row i is 1 * W[x_i] plus terms 0 * w, each +-0 for a
// finite w, so it equals W[x_i] exactly, up to the sign of a zero (a -0 in W
// sums to +0 beside a +0 term; W' stores such zeros as +0). W must be finite:
// 0 * inf is NaN. Conditions: W a constant float32 [K, N]; the Cast to
// float32; Equal of an int32/int64 x whose last axis repeats one value (its
// dim is 1, or x expands such a value) and a constant of the
// same type with every dim 1 but the last, holding 0..K-1 in order, and of a
// rank no higher than x's (so the one-hot keeps x's leading dims); opset 13+
// (Clip on integers).
#include <cmath>
#include <cstring>

#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// Whether `c` holds 0, 1, ..., K-1 along its last axis, every other dim 1.
template <typename T>
bool IsColumnArange(const Tensor& c) {
  const auto& dims = c.dims();
  if (dims.empty()) return false;
  for (size_t d = 0; d + 1 < dims.size(); ++d)
    if (dims[d] != 1) return false;
  const T* values = c.data<T>();
  for (int64_t k = 0; k < c.num_elements(); ++k)
    if (values[k] != static_cast<T>(k)) return false;
  return c.num_elements() >= 1;
}

// Whether every entry along the last axis of `x` is the same value: its last
// dim is 1, or it is an Expand of a value whose last dim is 1 (jax2tf's
// broadcast, whose target shape inference cannot read when the batch is symbolic).
bool LastAxisRepeats(GraphEditor& ed, const std::string& x) {
  auto last_dim_is_one = [&](const std::string& name) {
    const TypeInfo* t = ed.TensorType(name);
    return t && t->shape && !t->shape->empty() && t->shape->back().value == 1;
  };
  if (last_dim_is_one(x)) return true;
  const int64_t p = ed.Producer(x);
  return p >= 0 && opt::IsOp(ed.node(p), "Expand") && !ed.node(p).inputs.empty() && last_dim_is_one(ed.node(p).inputs[0]);
}

// The index input x of an Equal(x, arange) / Equal(arange, x) one-hot, with
// the arange's length in *depth; "" when node `index` is not one.
std::string OneHotIndices(GraphEditor& ed, size_t index, int64_t* depth) {
  const Node& eq = ed.node(index);
  if (!opt::IsOp(eq, "Equal") || eq.inputs.size() != 2) return "";
  for (int side = 0; side < 2; ++side) {
    const Tensor c = ed.Constant(eq.inputs[1 - side]);
    const std::string& x = eq.inputs[side];
    const TypeInfo* xt = ed.TensorType(x);
    if (!c.defined() || !xt || !xt->shape || xt->elem_type != c.dtype()) continue;
    const bool arange = (c.dtype() == DataType::kInt64 && IsColumnArange<int64_t>(c)) ||
                        (c.dtype() == DataType::kInt32 && IsColumnArange<int32_t>(c));
    const Shape& xdims = *xt->shape;
    if (!arange || xdims.empty() || xdims.size() < c.dims().size() || !LastAxisRepeats(ed, x)) continue;
    *depth = c.num_elements();
    return x;
  }
  return "";
}

// W as the lookup table: its rows, then a row of zeros; -0 stored as +0.
// Undefined when W holds a non-finite value.
Tensor TableWithZeroRow(const Tensor& w) {
  const int64_t rows = w.dims()[0], cols = w.dims()[1];
  Tensor table = Tensor::Allocate(DataType::kFloat, {rows + 1, cols}).value();
  const float* from = w.data<float>();
  float* to = table.data<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (!std::isfinite(from[i])) return Tensor();
    to[i] = from[i] == 0.f ? 0.f : from[i];
  }
  std::memset(to + rows * cols, 0, sizeof(float) * cols);
  return table;
}

Tensor IndexScalar(DataType type, int64_t value) {
  return type == DataType::kInt64 ? Tensor::Scalar<int64_t>(value) : Tensor::Scalar<int32_t>(static_cast<int32_t>(value));
}

// Rewrites MatMul node `index` when it multiplies a one-hot by a constant.
bool TryRewrite(GraphEditor& ed, size_t index) {
  const Node& mm = ed.node(index);
  if (!opt::IsOp(mm, "MatMul") || mm.inputs.size() != 2 || ed.checked().opsets[index] < 13) return false;
  const Tensor w = ed.Constant(mm.inputs[1]);
  if (!opt::IsFloatTensor(w) || w.rank() != 2 || w.dims()[0] < 1) return false;
  const int64_t cast = ed.Producer(mm.inputs[0]);
  if (cast < 0 || !opt::IsOp(ed.node(cast), "Cast") || ed.node(cast).inputs.size() != 1) return false;
  auto to = ed.node(cast).GetInt("to", 0);
  if (!to.ok() || to.value() != static_cast<int64_t>(DataType::kFloat)) return false;
  const int64_t equal = ed.Producer(ed.node(cast).inputs[0]);
  int64_t depth = 0;
  if (equal < 0) return false;
  const std::string x = OneHotIndices(ed, static_cast<size_t>(equal), &depth);
  if (x.empty() || depth != w.dims()[0]) return false;
  Tensor table = TableWithZeroRow(w);
  if (!table.defined()) return false;

  const DataType index_type = ed.TensorType(x)->elem_type;
  const std::string table_name = ed.AddInitializer(mm.inputs[1] + "_rows", std::move(table));
  const std::string first = ed.AddInitializer(x + "_first", Tensor::Scalar<int64_t>(0));
  const std::string low = ed.AddInitializer(x + "_low", IndexScalar(index_type, -1));
  const std::string high = ed.AddInitializer(x + "_high", IndexScalar(index_type, depth));
  const std::string value = ed.FreshName(x + "_value"), rows = ed.FreshName(x + "_row");
  ed.InsertBefore(index, opt::MakeNode(value, "Gather", {x, first}, {value}, {opt::IntAttr("axis", -1)}));
  ed.InsertBefore(index, opt::MakeNode(rows, "Clip", {value, low, high}, {rows}));
  ed.RewriteAs(index, "", "Gather", {table_name, rows}, {opt::IntAttr("axis", 0)});
  return true;
}

}  // namespace

Status OneHotMatMulAsGather(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  std::vector<std::string> replaced;
  for (size_t index : checked.order) {
    if (ed.removed(index)) continue;
    const std::string weights = ed.node(index).inputs.size() == 2 ? ed.node(index).inputs[1] : "";
    if (TryRewrite(ed, index)) replaced.push_back(weights);
  }
  *changed = ed.CommitDroppingInitializers(replaced);
  return Status::Ok();
}

}  // namespace nee
