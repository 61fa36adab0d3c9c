#include "plan/part_offsets.h"

#include "ops/slice_geometry.h"
#include "plan/memory_plan.h"

namespace nee {

namespace {
bool IsOnnxOp(const PlannedNode& pn, const char* op) {
  const std::string& d = pn.node->domain;
  return (d.empty() || d == "ai.onnx") && pn.node->op_type == op;
}

// Bytes per element, or 0 for packed sub-byte storage (a part may start mid-byte).
size_t WholeElementBytes(DataType t) {
  const size_t one = StorageBytes(t, 1);
  return StorageBytes(t, 2) == 2 * one ? one : 0;
}

// The axis attribute normalized against `rank`, or -1 when it is invalid.
int64_t NormalizedAxis(const Node& node, int64_t default_axis, size_t rank) {
  auto axis = node.GetInt("axis", default_axis);
  if (!axis.ok()) return -1;
  const int64_t r = static_cast<int64_t>(rank);
  const int64_t a = axis.value() < 0 ? axis.value() + r : axis.value();
  return a >= 0 && a < r ? a : -1;
}

bool LeadingDimsAreOne(const std::vector<int64_t>& dims, int64_t axis) {
  for (int64_t i = 0; i < axis; ++i)
    if (dims[static_cast<size_t>(i)] != 1) return false;
  return true;
}

// Whether `a` and `b` agree on every dim but `axis`.
bool SameDimsOffAxis(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t axis) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d)
    if (static_cast<int64_t>(d) != axis && a[d] != b[d]) return false;
  return true;
}

// Integer input i of a Slice as known for this signature: false when it is
// needed (starts, ends) or given (axes, steps) and its value is not known.
bool KnownSliceInput(const PlannedNode& pn, const ExecutionPlan& plan,
                     const std::unordered_map<std::string, Tensor>* constants, size_t i, std::vector<int64_t>* out) {
  if (i >= pn.inputs.size() || pn.inputs[i] < 0) return i >= 3;  // axes and steps may be left out
  if (!constants) return false;
  auto it = constants->find(plan.slot_names[static_cast<size_t>(pn.inputs[i])]);
  if (it == constants->end()) return false;
  const Tensor& t = it->second;
  if (!t.defined() || (t.num_elements() > 0 && t.raw_data() == nullptr)) return false;  // a dropped constant
  auto values = t.ToInt64Vector();
  if (!values.ok()) return false;
  *out = std::move(values).value();
  return true;
}
}  // namespace

bool IsViewNode(const PlannedNode& pn) {
  return IsOnnxOp(pn, "Reshape") || IsOnnxOp(pn, "Flatten") || IsOnnxOp(pn, "Squeeze") ||
         IsOnnxOp(pn, "Unsqueeze") || IsOnnxOp(pn, "Identity");
}

bool IsConcatNode(const PlannedNode& pn) { return IsOnnxOp(pn, "Concat"); }

std::vector<size_t> ConcatPartOffsets(const PlannedNode& pn, const SlotLayout& slots) {
  if (!IsConcatNode(pn) || pn.outputs.size() != 1) return {};
  const int out = pn.outputs[0];
  if (out < 0 || slots.bytes[out] == 0 || WholeElementBytes(slots.type[out]) == 0) return {};
  const std::vector<int64_t>& dims = slots.dims[out];
  const int64_t axis = NormalizedAxis(*pn.node, 1, dims.size());
  if (axis < 0 || !LeadingDimsAreOne(dims, axis)) return {};
  std::vector<size_t> at;
  size_t next = 0;
  for (int in : pn.inputs) {
    at.push_back(next);
    if (in < 0 || slots.bytes[in] == 0) return {};
    next += slots.bytes[in];
  }
  if (next != slots.bytes[out]) return {};
  return at;
}

std::vector<std::pair<int, size_t>> SliceViewOffset(const PlannedNode& pn, const ExecutionPlan& plan,
                                                    const SlotLayout& slots,
                                                    const std::unordered_map<std::string, Tensor>* constants) {
  if (!IsOnnxOp(pn, "Slice") || pn.inputs.empty() || pn.outputs.size() != 1) return {};
  const int in = pn.inputs[0], out = pn.outputs[0];
  if (in < 0 || out < 0 || slots.bytes[in] == 0 || slots.bytes[out] == 0 || slots.type[in] != slots.type[out])
    return {};
  const size_t esize = WholeElementBytes(slots.type[in]);
  if (esize == 0) return {};
  SliceParams p;
  if (pn.opset < 10) {
    auto starts = pn.node->GetInts("starts"), ends = pn.node->GetInts("ends"), axes = pn.node->GetInts("axes", {});
    if (!starts.ok() || !ends.ok() || !axes.ok()) return {};
    p.starts = starts.value(), p.ends = ends.value(), p.axes = axes.value();
  } else if (!KnownSliceInput(pn, plan, constants, 1, &p.starts) ||
             !KnownSliceInput(pn, plan, constants, 2, &p.ends) ||
             !KnownSliceInput(pn, plan, constants, 3, &p.axes) ||
             !KnownSliceInput(pn, plan, constants, 4, &p.steps)) {
    return {};
  }
  auto g = ResolveSliceParams(*pn.node, slots.dims[in], std::move(p));
  if (!g.ok() || g->out_dims != slots.dims[out]) return {};
  // One contiguous run: every dim that moves steps over exactly the elements
  // of the output dims inside it.
  int64_t inner = 1;
  for (size_t d = g->out_dims.size(); d-- > 0;) {
    if (g->out_dims[d] != 1 && g->strides[d] != inner) return {};
    inner *= g->out_dims[d];
  }
  const size_t at = static_cast<size_t>(g->base) * esize;
  if (at % MemoryPlan::kAlignment != 0 || at + slots.bytes[out] > slots.bytes[in]) return {};
  return {{out, at}};
}

std::vector<std::pair<int, size_t>> SplitViewOffsets(const PlannedNode& pn, const SlotLayout& slots) {
  if (!IsOnnxOp(pn, "Split") || pn.inputs.empty()) return {};
  const int in = pn.inputs[0];
  if (in < 0 || slots.bytes[in] == 0 || WholeElementBytes(slots.type[in]) == 0) return {};
  const std::vector<int64_t>& dims = slots.dims[in];
  const int64_t axis = NormalizedAxis(*pn.node, 0, dims.size());
  if (axis < 0 || !LeadingDimsAreOne(dims, axis)) return {};
  std::vector<std::pair<int, size_t>> parts;
  size_t next = 0;
  for (int out : pn.outputs) {
    if (out < 0 || slots.bytes[out] == 0 || slots.type[out] != slots.type[in] ||
        !SameDimsOffAxis(slots.dims[out], dims, axis))
      break;
    if (next % MemoryPlan::kAlignment == 0) parts.emplace_back(out, next);
    next += slots.bytes[out];
  }
  if (next > slots.bytes[in]) return {};
  return parts;
}

}  // namespace nee
