#include "opt/column_slice.h"

#include "ops/slice_geometry.h"

namespace nee::opt {

bool ConstantInt64s(const GraphEditor& ed, const std::string& name, std::vector<int64_t>* out) {
  Tensor t = ed.Constant(name);
  if (!t.defined() || t.dtype() != DataType::kInt64) return false;
  auto values = t.ToInt64Vector();
  if (!values.ok()) return false;
  *out = values.value();
  return true;
}

bool MatchColumnSlice(const GraphEditor& ed, size_t index, ColumnSlice* out) {
  const Node& n = ed.node(index);
  if (!IsOp(n, "Slice") || ed.checked().opsets[index] < 10 || n.outputs.size() != 1 || n.inputs.size() < 4 ||
      !n.attributes.empty())
    return false;
  std::vector<int64_t> dims;
  SliceParams params;
  if (!StaticDims(ed.TensorType(n.inputs[0]), &dims) || dims.empty()) return false;
  if (!ConstantInt64s(ed, n.inputs[1], &params.starts) || !ConstantInt64s(ed, n.inputs[2], &params.ends) ||
      !ConstantInt64s(ed, n.inputs[3], &params.axes) ||
      (n.inputs.size() > 4 && !ConstantInt64s(ed, n.inputs[4], &params.steps)))
    return false;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (params.axes.size() != 1 || (params.axes[0] != -1 && params.axes[0] != rank - 1) ||
      !(params.steps.empty() || params.steps == std::vector<int64_t>{1}))
    return false;
  auto g = ResolveSliceParams(n, dims, std::move(params));
  if (!g.ok() || g->out_dims.back() == 0) return false;
  out->source = n.inputs[0];
  out->begin = g->base;  // only the last axis moves, by steps of 1
  out->end = g->base + g->out_dims.back();
  return true;
}

}  // namespace nee::opt
