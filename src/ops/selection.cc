// Operator family: selection by value. TopK, ArgMax, ArgMin, NonZero,
// Compress, Unique: each output is chosen by comparing or testing the input's
// values. Split from indexing.cc to keep each file readable whole.
//
// Every index read from a tensor is normalized (negative counts from the
// end) and range-checked before use; a bad index is an error naming the
// node and input, never an out-of-bounds access.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family

// ---- TopK ----------------------------------------------------------------------------------

// Strict ordering that puts NaN above every number, so sorting is well defined.
template <typename K>
bool KeyLess(const K& a, const K& b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

Status TopKKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  int64_t k = 0;
  if (ctx.opset() < 10) {
    NEE_ASSIGN_OR_RETURN(k, ctx.node().GetInt("k"));
  } else {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> kv, IntInput(ctx, 1));
    if (kv.size() != 1) return ctx.InputError(1, "must hold exactly one value");
    k = kv[0];
  }
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", -1));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, x->rank(), ctx.node()));
  NEE_ASSIGN_OR_RETURN(int64_t largest, ctx.node().GetInt("largest", 1));
  if (ctx.opset() < 11) largest = 1;
  const int64_t n = x->rank() ? x->dim(axis) : 1;
  if (k < 0 || k > n) return ctx.InputError(1, "k = " + std::to_string(k) + " is outside [0, " + std::to_string(n) + "]");
  std::vector<int64_t> out_dims = x->dims();
  if (x->rank()) out_dims[axis] = k;
  NEE_ASSIGN_OR_RETURN(Tensor values, ctx.AllocateOutput(0, x->dtype(), out_dims));
  NEE_ASSIGN_OR_RETURN(Tensor indices, ctx.AllocateOutput(1, DataType::kInt64, out_dims));
  const int64_t outer = ProductOf(x->dims(), 0, axis), inner = ProductOf(x->dims(), axis + 1);
  // Sorted order, ties broken by the lower index (for "sorted=0" too).
  std::vector<int64_t> order(static_cast<size_t>(n));
  NEE_RETURN_IF_ERROR(VisitOrdered(ctx.node(), x->dtype(), false, [&]<typename R>() -> Status {
    R keys(*x);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        std::iota(order.begin(), order.end(), 0);
        auto before = [&](int64_t a, int64_t b) {
          auto ka = keys.Get(base + a * inner), kb = keys.Get(base + b * inner);
          bool a_first = largest ? KeyLess(kb, ka) : KeyLess(ka, kb);
          bool b_first = largest ? KeyLess(ka, kb) : KeyLess(kb, ka);
          return a_first || (!b_first && a < b);
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) indices.data<int64_t>()[(o * k + j) * inner + i] = order[j];
      }
    return Status::Ok();
  }));
  return VisitStorage(ctx.node(), x->dtype(), [&]<typename A>() -> Status {
    A src(*x), dst(values);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          int64_t out_index = (o * k + j) * inner + i;
          dst.Set(out_index, src.Get((o * n + indices.data<int64_t>()[out_index]) * inner + i));
        }
    return Status::Ok();
  });
}

Status TopKInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out = x->shape;
  if (out && !out->empty()) {
    NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ictx.node.GetInt("axis", -1));
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, static_cast<int64_t>(out->size()), ictx.node));
    std::optional<int64_t> k;
    if (ictx.opset < 10) {
      NEE_ASSIGN_OR_RETURN(int64_t attr, ictx.node.GetInt("k"));
      k = attr;
    } else if (auto kv = KnownInts(ictx, 1); kv && kv->size() == 1) {
      k = (*kv)[0];
    }
    Dim& d = (*out)[axis];
    if (k && d.known() && (*k < 0 || *k > d.value))
      return ictx.InputError(1, "k = " + std::to_string(*k) + " exceeds the axis size " + std::to_string(d.value));
    d = k ? Dim::Known(*k) : Dim::Unknown();
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  if (ictx.num_outputs() > 1) ictx.output_types[1] = TypeInfo::Tensor(DataType::kInt64, out);
  return Status::Ok();
}

// ---- ArgMax / ArgMin --------------------------------------------------------------------------

Result<std::vector<int64_t>> ArgReducedDims(const Node& node, const std::vector<int64_t>& dims, int64_t* axis_out) {
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, node.GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t keepdims, node.GetInt("keepdims", 1));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(axis_attr, static_cast<int64_t>(dims.size()), node));
  *axis_out = axis;
  std::vector<int64_t> out = dims;
  if (keepdims) out[axis] = 1;
  else out.erase(out.begin() + axis);
  return out;
}

Status ArgKernel(KernelContext& ctx, bool is_max) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->rank() < 1) return ctx.InputError(0, "must have rank >= 1");
  int64_t axis = 0;
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, ArgReducedDims(ctx.node(), x->dims(), &axis));
  NEE_ASSIGN_OR_RETURN(int64_t select_last, ctx.node().GetInt("select_last_index", 0));
  if (ctx.opset() < 12) select_last = 0;
  const int64_t n = x->dim(axis);
  if (n == 0 && x->num_elements() == 0 && ProductOf(out_dims) > 0)
    return ctx.InputError(0, "cannot reduce an empty axis");
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kInt64, out_dims));
  const int64_t outer = ProductOf(x->dims(), 0, axis), inner = ProductOf(x->dims(), axis + 1);
  return VisitOrdered(ctx.node(), x->dtype(), false, [&]<typename R>() -> Status {
    R keys(*x);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        int64_t best = 0;
        auto best_key = keys.Get(base);
        for (int64_t j = 1; j < n; ++j) {
          auto key = keys.Get(base + j * inner);
          // NaN wins (numpy returns the first NaN); otherwise strict or, with
          // select_last_index, non-strict improvement.
          bool better;
          if constexpr (std::is_floating_point_v<decltype(key)>) {
            if (std::isnan(best_key)) better = select_last && std::isnan(key);
            else if (std::isnan(key)) better = true;
            else better = is_max ? (key > best_key || (select_last && key == best_key))
                                 : (key < best_key || (select_last && key == best_key));
          } else {
            better = is_max ? (key > best_key || (select_last && key == best_key))
                            : (key < best_key || (select_last && key == best_key));
          }
          if (better) {
            best = j;
            best_key = key;
          }
        }
        out.data<int64_t>()[o * inner + i] = best;
      }
    return Status::Ok();
  });
}
Status ArgMaxKernel(KernelContext& ctx) { return ArgKernel(ctx, true); }
Status ArgMinKernel(KernelContext& ctx) { return ArgKernel(ctx, false); }

Status ArgInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out;
  if (x->shape) {
    if (x->shape->empty()) return ictx.InputError(0, "must have rank >= 1");
    NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ictx.node.GetInt("axis", 0));
    NEE_ASSIGN_OR_RETURN(int64_t keepdims, ictx.node.GetInt("keepdims", 1));
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, static_cast<int64_t>(x->shape->size()), ictx.node));
    Shape s = *x->shape;
    if (keepdims) s[axis] = Dim::Known(1);
    else s.erase(s.begin() + axis);
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, out);
  return Status::Ok();
}

// ---- NonZero ------------------------------------------------------------------------------------

Status NonZeroKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x->num_elements(); ++i) {
    bool nonzero = x->dtype() == DataType::kString ? !x->data<std::string>()[i].empty() : ReadAsDouble(*x, i) != 0;
    if (nonzero) hits.push_back(i);
  }
  // A scalar is treated as a 1-element vector.
  std::vector<int64_t> dims = x->rank() ? x->dims() : std::vector<int64_t>{1};
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t nnz = static_cast<int64_t>(hits.size());
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kInt64, {rank, nnz}));
  std::vector<int64_t> strides = StridesOf(dims);
  for (int64_t j = 0; j < nnz; ++j)
    for (int64_t d = 0; d < rank; ++d) out.data<int64_t>()[d * nnz + j] = hits[j] / strides[d] % dims[d];
  return Status::Ok();
}

Status NonZeroInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  Dim rank = x->shape ? Dim::Known(std::max<int64_t>(1, static_cast<int64_t>(x->shape->size()))) : Dim::Unknown();
  ictx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, Shape{rank, Dim::Unknown()});
  return Status::Ok();
}

// ---- Compress -------------------------------------------------------------------------------------

// Compress and Unique work along the "axis" attribute, or over the flattened
// input when it is absent: the dims they see the input as, and the axis in them.
struct AxisView {
  std::vector<int64_t> dims;
  int64_t axis = 0;
};

Result<AxisView> ViewAlongOptionalAxis(KernelContext& ctx, const Tensor& x) {
  if (!ctx.node().HasAttr("axis")) return AxisView{{x.num_elements()}, 0};
  NEE_ASSIGN_OR_RETURN(int64_t a, ctx.node().GetInt("axis"));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(a, x.rank(), ctx.node()));
  return AxisView{x.dims(), axis};
}

Status CompressKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* cond, ctx.InputTensor(1));
  if (cond->rank() != 1) return ctx.InputError(1, "must be 1-D, got " + cond->Describe());
  NEE_ASSIGN_OR_RETURN(AxisView axis_view, ViewAlongOptionalAxis(ctx, *x));
  const std::vector<int64_t>& view = axis_view.dims;
  const int64_t axis = axis_view.axis;
  const int64_t n = view[axis];
  std::vector<int64_t> selected;
  for (int64_t i = 0; i < cond->num_elements(); ++i) {
    if (ReadAsDouble(*cond, i) == 0) continue;
    if (i >= n) return ctx.InputError(1, "selects index " + std::to_string(i) + " beyond the axis size " + std::to_string(n));
    selected.push_back(i);
  }
  std::vector<int64_t> out_dims = view;
  out_dims[axis] = static_cast<int64_t>(selected.size());
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  const int64_t outer = ProductOf(view, 0, axis), inner = ProductOf(view, axis + 1);
  return CopySlicesAlongAxis(ctx.node(), *x, outer, n, inner, selected, out);
}

Status CompressInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out;
  if (!ictx.node.HasAttr("axis")) {
    out = Shape{Dim::Unknown()};
  } else if (x->shape) {
    NEE_ASSIGN_OR_RETURN(int64_t a, ictx.node.GetInt("axis"));
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(a, static_cast<int64_t>(x->shape->size()), ictx.node));
    Shape s = *x->shape;
    s[axis] = Dim::Unknown();
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}

// ---- Unique ----------------------------------------------------------------------------------------

Status UniqueKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(int64_t sorted, ctx.node().GetInt("sorted", 1));
  // Items are the slices x[..., j, ...] along the axis (elements when flattened).
  NEE_ASSIGN_OR_RETURN(AxisView axis_view, ViewAlongOptionalAxis(ctx, *x));
  const std::vector<int64_t>& view = axis_view.dims;
  const int64_t axis = axis_view.axis;
  const int64_t n = view[axis];
  const int64_t outer = ProductOf(view, 0, axis), inner = ProductOf(view, axis + 1);
  std::vector<int64_t> first;    // first occurrence of each unique item, in output order
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  NEE_RETURN_IF_ERROR(VisitOrdered(ctx.node(), x->dtype(), true, [&]<typename R>() -> Status {
    R keys(*x);
    // -1, 0, 1 lexicographic comparison of items a and b.
    auto compare = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          auto ka = keys.Get((o * n + a) * inner + i), kb = keys.Get((o * n + b) * inner + i);
          if (KeyLess(ka, kb)) return -1;
          if (KeyLess(kb, ka)) return 1;
        }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });
    // Groups of equal items in sorted order; the first of each group is its first occurrence.
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    std::vector<int64_t> group_first, group_count;
    for (size_t p = 0; p < order.size(); ++p) {
      if (p == 0 || compare(order[p - 1], order[p]) != 0) {
        group_first.push_back(order[p]);
        group_count.push_back(0);
      }
      group_of[order[p]] = static_cast<int64_t>(group_first.size()) - 1;
      ++group_count.back();
    }
    // Output order: sorted groups, or groups by first occurrence.
    std::vector<int64_t> groups(group_first.size());
    std::iota(groups.begin(), groups.end(), 0);
    if (!sorted)
      std::sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) { return group_first[a] < group_first[b]; });
    std::vector<int64_t> position(groups.size());
    for (size_t p = 0; p < groups.size(); ++p) {
      position[groups[p]] = static_cast<int64_t>(p);
      first.push_back(group_first[groups[p]]);
      counts.push_back(group_count[groups[p]]);
    }
    for (int64_t j = 0; j < n; ++j) inverse[j] = position[group_of[j]];
    return Status::Ok();
  }));
  const int64_t unique = static_cast<int64_t>(first.size());
  std::vector<int64_t> y_dims = view;
  y_dims[axis] = unique;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), y_dims));
  NEE_RETURN_IF_ERROR(CopySlicesAlongAxis(ctx.node(), *x, outer, n, inner, first, y));
  auto write = [&](size_t i, const std::vector<int64_t>& v) -> Status {
    if (!ctx.wants_output(i)) return Status::Ok();
    NEE_ASSIGN_OR_RETURN(Tensor t, ctx.AllocateOutput(i, DataType::kInt64, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    return Status::Ok();
  };
  NEE_RETURN_IF_ERROR(write(1, first));
  NEE_RETURN_IF_ERROR(write(2, inverse));
  return write(3, counts);
}

Status UniqueInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> y;
  if (!ictx.node.HasAttr("axis")) {
    y = Shape{Dim::Unknown()};
  } else if (x->shape) {
    NEE_ASSIGN_OR_RETURN(int64_t a, ictx.node.GetInt("axis"));
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeDimAxis(a, static_cast<int64_t>(x->shape->size()), ictx.node));
    Shape s = *x->shape;
    s[axis] = Dim::Unknown();
    y = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, y);
  for (size_t i = 1; i < ictx.num_outputs(); ++i)
    ictx.output_types[i] = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Unknown()});
  return Status::Ok();
}

}  // namespace

void RegisterSelectionOps(OpRegistry& r) {
  r.RegisterVersions("", "TopK", {1, 10, 11, 24}, TopKInfer, TopKKernel);
  r.RegisterVersions("", "ArgMax", {1, 11, 12, 13}, ArgInfer, ArgMaxKernel);
  r.RegisterVersions("", "ArgMin", {1, 11, 12, 13}, ArgInfer, ArgMinKernel);
  r.RegisterVersions("", "NonZero", {9, 13}, NonZeroInfer, NonZeroKernel);
  r.RegisterVersions("", "Compress", {9, 11, 28}, CompressInfer, CompressKernel);
  r.RegisterVersions("", "Unique", {11, 28}, UniqueInfer, UniqueKernel);
}

}  // namespace nee
