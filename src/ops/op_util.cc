#include "ops/op_util.h"

#include <algorithm>
#include <cmath>

#include "ir/convert.h"

namespace nee {

Result<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const Node& node, const char* what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    return InvalidModel(node.Describe() + ": " + what + " " + std::to_string(axis) +
                        " is out of range for rank " + std::to_string(rank));
  // (Rank 0 takes axis 0 or -1, both 0; a caller that indexes dims by the axis
  // must refuse rank 0 itself.)
  return axis < 0 ? std::max<int64_t>(axis + rank, 0) : axis;
}

Result<int64_t> NormalizeDimAxis(int64_t axis, int64_t rank, const Node& node, const char* what) {
  if (rank == 0)
    return InvalidModel(node.Describe() + ": " + what + " " + std::to_string(axis) +
                        " names a dimension, but the input is a scalar (rank 0)");
  return NormalizeAxis(axis, rank, node, what);
}

Result<std::vector<int64_t>> BroadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else
      return InvalidArgument("shapes " + DimsToString(a) + " and " + DimsToString(b) +
                             " cannot be broadcast together");
  }
  return out;
}

Result<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Dim da = i < rank - a.size() ? Dim::Known(1) : a[i - (rank - a.size())];
    Dim db = i < rank - b.size() ? Dim::Known(1) : b[i - (rank - b.size())];
    if (da.known() && db.known()) {
      if (da.value == db.value || db.value == 1) out[i] = da;
      else if (da.value == 1) out[i] = db;
      else
        return InvalidModel("shapes " + ShapeToString(a) + " and " + ShapeToString(b) +
                            " cannot be broadcast together");
    } else if (da.known() && da.value == 1) {
      out[i] = db;
    } else if (db.known() && db.value == 1) {
      out[i] = da;
    } else if (!da.known() && !db.known() && da == db && !da.symbol.empty()) {
      out[i] = da;
    } else if (da.known()) {
      out[i] = da;  // the other side must be da or 1: either way the result is da
    } else if (db.known()) {
      out[i] = db;
    } else {
      out[i] = Dim::Unknown();
    }
  }
  return out;
}

std::vector<int64_t> StridesOf(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

int64_t ProductOf(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < std::min(end, dims.size()); ++i) p *= dims[i];
  return p;
}

void ForEachBroadcastBlock(const std::vector<int64_t>& out_dims,
                           const std::vector<std::vector<int64_t>>& in_dims,
                           const BroadcastBlockFn& fn) {
  const size_t rank = out_dims.size();
  const size_t n_in = in_dims.size();
  int64_t total = ProductOf(out_dims);
  if (total == 0) return;
  // Per input, strides aligned to the output rank, 0 on broadcast dims.
  std::vector<std::vector<int64_t>> strides(n_in, std::vector<int64_t>(rank, 0));
  for (size_t k = 0; k < n_in; ++k) {
    const auto& d = in_dims[k];
    std::vector<int64_t> s = StridesOf(d);
    size_t off = rank - d.size();
    for (size_t i = 0; i < d.size(); ++i) strides[k][off + i] = d[i] == 1 ? 0 : s[i];
  }
  // Merge trailing dims into one block while every input's pattern allows it:
  // the innermost dim is the run; each input advances by its stride (0 or 1).
  int64_t inner = rank ? out_dims[rank - 1] : 1;
  std::vector<int64_t> steps(n_in);
  for (size_t k = 0; k < n_in; ++k) steps[k] = rank ? strides[k][rank - 1] : 0;
  size_t outer_rank = rank ? rank - 1 : 0;
  // Fold more dims into the run when every input is either fully contiguous
  // or fully broadcast across them.
  while (outer_rank > 0) {
    size_t d = outer_rank - 1;
    bool ok = true;
    for (size_t k = 0; k < n_in && ok; ++k) {
      if (steps[k] == 1) ok = strides[k][d] == inner;
      else ok = strides[k][d] == 0;
    }
    if (!ok) break;
    inner *= out_dims[d];
    outer_rank = d;
  }
  std::vector<int64_t> index(outer_rank, 0);
  std::vector<int64_t> offsets(n_in, 0);
  int64_t out_offset = 0;
  for (;;) {
    fn(out_offset, offsets.data(), steps.data(), inner);
    out_offset += inner;
    if (out_offset >= total) break;
    // Increment the outer multi-index and update offsets.
    for (size_t d = outer_rank; d-- > 0;) {
      ++index[d];
      for (size_t k = 0; k < n_in; ++k) offsets[k] += strides[k][d];
      if (index[d] < out_dims[d]) break;
      for (size_t k = 0; k < n_in; ++k) offsets[k] -= strides[k][d] * index[d];
      index[d] = 0;
    }
  }
}

Result<const TypeInfo*> InputTensorType(const InferenceContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return ctx.InputError(i, "is required");
  const TypeInfo& t = ctx.input_type(i);
  if (t.kind != TypeInfo::Kind::kTensor && t.kind != TypeInfo::Kind::kUnknown)
    return ctx.InputError(i, "expected a tensor, got " + t.ToString());
  return &t;
}

Status InferSameAsInput0(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, 0));
  if (ctx.num_outputs() > 0) ctx.output_types[0] = *t;
  return Status::Ok();
}

static Status InferBroadcastWithType(InferenceContext& ctx, DataType out_type) {
  std::optional<Shape> shape = Shape{};
  DataType first = DataType::kUndefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ctx, i));
    if (i == 0) first = t->elem_type;
    if (!t->shape || !shape) {
      shape.reset();
      continue;
    }
    auto b = BroadcastShapes(*shape, *t->shape);
    if (!b.ok()) return ctx.Error(b.status().message());
    shape = std::move(b).value();
  }
  if (ctx.num_outputs() > 0)
    ctx.output_types[0] = TypeInfo::Tensor(out_type == DataType::kUndefined ? first : out_type, shape);
  return Status::Ok();
}

Status InferBroadcast(InferenceContext& ctx) { return InferBroadcastWithType(ctx, DataType::kUndefined); }
Status InferBroadcastBool(InferenceContext& ctx) { return InferBroadcastWithType(ctx, DataType::kBool); }

double ReadAsDouble(const Tensor& t, int64_t i) { return ElementAsDouble(t, i); }

void WriteFromDouble(Tensor& t, int64_t i, double v) { StoreDoubleElement(t, i, v); }

Result<const Tensor*> OptionalInputTensor(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return static_cast<const Tensor*>(nullptr);
  return ctx.InputTensor(i);
}

}  // namespace nee
