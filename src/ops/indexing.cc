// Operator family: indexing. Slice, Gather, GatherElements, GatherND,
// ScatterElements, Scatter, ScatterND, CumSum, OneHot, Col2Im. The ops that
// select elements by their values (TopK, ArgMax, ArgMin, NonZero, Compress,
// Unique) are in selection.cc.
//
// Every index read from a tensor is normalized (negative counts from the
// end) and range-checked before use; a bad index is an error naming the
// node and input, never an out-of-bounds access.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/slice_geometry.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family

std::string IndexError(int64_t index, int64_t size) {
  return "has index " + std::to_string(index) + " out of range [" + std::to_string(-size) + ", " +
         std::to_string(size - 1) + "]";
}

// ---- Slice ----------------------------------------------------------------------------

// One axis of a slice resolved against its size: first index, step, count.
struct AxisSlice {
  int64_t start = 0, step = 1, count = 0;
};

AxisSlice ResolveAxisSlice(int64_t start, int64_t end, int64_t step, int64_t n) {
  AxisSlice s;
  s.step = step;
  if (start < 0) start += n;
  if (end < 0) end += n;
  // Counts are ceil(span / |step|), computed without overflow for any step.
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    int64_t span = end > start ? end - start : 0;
    s.count = span / step + (span % step != 0 ? 1 : 0);
  } else {
    start = std::clamp<int64_t>(start, 0, n - 1);
    end = std::clamp<int64_t>(end, -1, n - 1);
    uint64_t span = start > end ? static_cast<uint64_t>(start - end) : 0;
    uint64_t magnitude = static_cast<uint64_t>(-(step + 1)) + 1;
    s.count = static_cast<int64_t>(span / magnitude + (span % magnitude != 0 ? 1 : 0));
  }
  s.start = s.count > 0 ? start : 0;
  // With fewer than two elements the step is never applied; keep strides small.
  if (s.count < 2) s.step = 1;
  return s;
}

// Checks lengths, normalizes axes; fills defaults.
Status ValidateSlice(const Node& node, int64_t rank, SliceParams& p) {
  if (p.ends.size() != p.starts.size())
    return InvalidModel(node.Describe() + ": starts and ends have different lengths");
  if (p.axes.empty()) {
    p.axes.resize(p.starts.size());
    std::iota(p.axes.begin(), p.axes.end(), 0);
  }
  if (p.steps.empty()) p.steps.assign(p.starts.size(), 1);
  if (p.axes.size() != p.starts.size() || p.steps.size() != p.starts.size())
    return InvalidModel(node.Describe() + ": starts, ends, axes and steps must have the same length");
  NEE_ASSIGN_OR_RETURN(p.axes, NormalizeAxes(p.axes, rank, node));
  for (int64_t s : p.steps)
    if (s == 0) return InvalidModel(node.Describe() + ": slice step cannot be 0");
  return Status::Ok();
}

}  // namespace

Result<SliceGeometry> ResolveSlice(KernelContext& ctx, const Tensor& x) {
  const Node& node = ctx.node();
  SliceParams p;
  if (ctx.opset() < 10) {
    NEE_ASSIGN_OR_RETURN(p.starts, node.GetInts("starts"));
    NEE_ASSIGN_OR_RETURN(p.ends, node.GetInts("ends"));
    NEE_ASSIGN_OR_RETURN(p.axes, node.GetInts("axes", {}));
  } else {
    NEE_ASSIGN_OR_RETURN(p.starts, IntInput(ctx, 1));
    NEE_ASSIGN_OR_RETURN(p.ends, IntInput(ctx, 2));
    if (ctx.has_input(3)) {
      NEE_ASSIGN_OR_RETURN(p.axes, IntInput(ctx, 3));
    }
    if (ctx.has_input(4)) {
      NEE_ASSIGN_OR_RETURN(p.steps, IntInput(ctx, 4));
    }
  }
  return ResolveSliceParams(node, x.dims(), std::move(p));
}

Result<SliceGeometry> ResolveSliceParams(const Node& node, const std::vector<int64_t>& dims, SliceParams p) {
  Status valid = ValidateSlice(node, static_cast<int64_t>(dims.size()), p);
  if (!valid.ok()) return InvalidArgument(valid.message());
  std::vector<int64_t> in_strides = StridesOf(dims);
  SliceGeometry g{dims, in_strides, 0};
  for (size_t i = 0; i < p.axes.size(); ++i) {
    int64_t a = p.axes[i];
    AxisSlice s = ResolveAxisSlice(p.starts[i], p.ends[i], p.steps[i], dims[a]);
    g.out_dims[a] = s.count;
    g.base += s.start * in_strides[a];
    g.strides[a] = s.step * in_strides[a];
  }
  return g;
}

namespace {

Status SliceKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(SliceGeometry g, ResolveSlice(ctx, *x));
  // Not zero-filled: every element is written, and the memory planner may
  // have placed the output inside x (a contiguous slice), whose bytes it is.
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, x->dtype(), g.out_dims));
  return StridedCopy(ctx.node(), *x, g.base, g.strides, out);
}

Status SliceInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out = x->shape;
  if (out) {
    SliceParams p;
    bool known = true;
    if (ictx.opset < 10) {
      NEE_ASSIGN_OR_RETURN(p.starts, ictx.node.GetInts("starts"));
      NEE_ASSIGN_OR_RETURN(p.ends, ictx.node.GetInts("ends"));
      NEE_ASSIGN_OR_RETURN(p.axes, ictx.node.GetInts("axes", {}));
    } else {
      auto starts = KnownInts(ictx, 1), ends = KnownInts(ictx, 2);
      std::optional<std::vector<int64_t>> axes, steps;
      if (ictx.has_input(3)) axes = KnownInts(ictx, 3);
      if (ictx.has_input(4)) steps = KnownInts(ictx, 4);
      known = starts && ends && (!ictx.has_input(3) || axes) && (!ictx.has_input(4) || steps);
      if (known) {
        p.starts = *starts;
        p.ends = *ends;
        if (axes) p.axes = *axes;
        if (steps) p.steps = *steps;
      }
    }
    if (known) {
      NEE_RETURN_IF_ERROR(ValidateSlice(ictx.node, static_cast<int64_t>(out->size()), p));
      for (size_t i = 0; i < p.axes.size(); ++i) {
        Dim& d = (*out)[p.axes[i]];
        d = d.known() ? Dim::Known(ResolveAxisSlice(p.starts[i], p.ends[i], p.steps[i], d.value).count)
                      : Dim::Unknown();
      }
    } else {
      for (Dim& d : *out) d = Dim::Unknown();
    }
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  PropagateByRunning(ictx, SliceKernel);
  return Status::Ok();
}

// ---- Gather -----------------------------------------------------------------------------

Status GatherKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* data, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", 0));
  if (data->rank() < 1) return ctx.InputError(0, "must have rank >= 1");
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, data->rank(), ctx.node()));
  const int64_t n = data->dim(axis);
  std::vector<int64_t> idx(static_cast<size_t>(indices->num_elements()));
  for (int64_t i = 0; i < indices->num_elements(); ++i) {
    idx[i] = IndexAt(*indices, i);
    if (!NormalizeIndex(idx[i], n)) return ctx.InputError(1, IndexError(IndexAt(*indices, i), n));
  }
  std::vector<int64_t> out_dims(data->dims().begin(), data->dims().begin() + axis);
  out_dims.insert(out_dims.end(), indices->dims().begin(), indices->dims().end());
  out_dims.insert(out_dims.end(), data->dims().begin() + axis + 1, data->dims().end());
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, data->dtype(), out_dims));
  const int64_t outer = ProductOf(data->dims(), 0, axis);
  const int64_t inner = ProductOf(data->dims(), axis + 1);
  return CopySlicesAlongAxis(ctx.node(), *data, outer, n, inner, idx, out);
}

Status GatherInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* data, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* indices, InputTensorType(ictx, 1));
  std::optional<Shape> out;
  if (data->shape && indices->shape) {
    const Shape& d = *data->shape;
    if (d.empty()) return ictx.InputError(0, "must have rank >= 1");
    NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ictx.node.GetInt("axis", 0));
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, static_cast<int64_t>(d.size()), ictx.node));
    Shape s(d.begin(), d.begin() + axis);
    s.insert(s.end(), indices->shape->begin(), indices->shape->end());
    s.insert(s.end(), d.begin() + axis + 1, d.end());
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(data->elem_type, out);
  PropagateByRunning(ictx, GatherKernel);
  return Status::Ok();
}

// ---- GatherElements / ScatterElements ------------------------------------------------------

// For each element of `indices` (same rank as data), the linear offset into
// data with the axis coordinate replaced by the (normalized) index.
Result<std::vector<int64_t>> ElementOffsets(KernelContext& ctx, const Tensor& data, const Tensor& indices,
                                            int64_t axis, size_t indices_input) {
  if (indices.rank() != data.rank())
    return ctx.InputError(indices_input, "must have the same rank as the data (" + std::to_string(data.rank()) +
                                             "), got " + indices.Describe());
  const int64_t rank = data.rank();
  std::vector<int64_t> strides = StridesOf(data.dims());
  std::vector<int64_t> offsets(static_cast<size_t>(indices.num_elements()));
  std::vector<int64_t> pos(static_cast<size_t>(rank), 0);
  for (int64_t i = 0; i < indices.num_elements(); ++i) {
    int64_t offset = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t c = pos[d];
      if (d == axis) {
        c = IndexAt(indices, i);
        if (!NormalizeIndex(c, data.dim(d))) return ctx.InputError(indices_input, IndexError(IndexAt(indices, i), data.dim(d)));
      } else if (c >= data.dim(d)) {
        return ctx.InputError(indices_input, "shape " + DimsToString(indices.dims()) + " exceeds the data shape " +
                                                 DimsToString(data.dims()) + " outside the axis");
      }
      offset += c * strides[d];
    }
    offsets[i] = offset;
    for (int64_t d = rank; d-- > 0;) {
      if (++pos[d] < indices.dim(d)) break;
      pos[d] = 0;
    }
  }
  return offsets;
}

Status GatherElementsKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* data, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, ctx.InputTensor(1));
  if (data->rank() < 1) return ctx.InputError(0, "must have rank >= 1");
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, data->rank(), ctx.node()));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, ElementOffsets(ctx, *data, *indices, axis, 1));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, data->dtype(), indices->dims()));
  return VisitStorage(ctx.node(), data->dtype(), [&]<typename A>() -> Status {
    A src(*data), dst(out);
    for (size_t i = 0; i < offsets.size(); ++i) dst.Set(static_cast<int64_t>(i), src.Get(offsets[i]));
    return Status::Ok();
  });
}

Status GatherElementsInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* data, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* indices, InputTensorType(ictx, 1));
  ictx.output_types[0] = TypeInfo::Tensor(data->elem_type, indices->shape);
  return Status::Ok();
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> ReductionAttr(const Node& node) {
  NEE_ASSIGN_OR_RETURN(std::string r, node.GetString("reduction", "none"));
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return InvalidModel(node.Describe() + ": unknown reduction '" + r + "'");
}

template <typename T>
T Combine(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::kAdd: return static_cast<T>(a + b);
    case Reduction::kMul: return static_cast<T>(a * b);
    case Reduction::kMax: return std::max(a, b);
    case Reduction::kMin: return std::min(a, b);
    default: return b;
  }
}

// Writes runs of `updates` into `out`: visit(apply) calls apply(dst, src,
// count) for each run, in order; reductions combine with what is there.
template <typename Visit>
Status ScatterRuns(const Node& node, Tensor& out, const Tensor& updates, Reduction red, Visit&& visit) {
  if (red == Reduction::kNone) {
    return VisitStorage(node, out.dtype(), [&]<typename A>() -> Status {
      A dst(out), src(updates);
      return visit([&](int64_t d, int64_t s, int64_t n) { dst.CopyRun(d, src, s, n); });
    });
  }
  auto via_float = [&](float (*to)(uint16_t), uint16_t (*from)(float)) {
    uint16_t* dst = out.data<uint16_t>();
    const uint16_t* src = updates.data<uint16_t>();
    return visit([&](int64_t d, int64_t s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) dst[d + k] = from(Combine(to(dst[d + k]), to(src[s + k]), red));
    });
  };
  if (out.dtype() == DataType::kFloat16) return via_float(HalfToFloat, FloatToHalf);
  if (out.dtype() == DataType::kBFloat16) return via_float(BFloat16ToFloat, FloatToBFloat16);
  if (out.dtype() == DataType::kBool && (red == Reduction::kMax || red == Reduction::kMin || red == Reduction::kMul ||
                                         red == Reduction::kAdd)) {
    bool* dst = out.data<bool>();
    const bool* src = updates.data<bool>();
    return visit([&](int64_t d, int64_t s, int64_t n) {
      for (int64_t k = 0; k < n; ++k)
        dst[d + k] = (red == Reduction::kAdd || red == Reduction::kMax) ? (dst[d + k] || src[s + k])
                                                                        : (dst[d + k] && src[s + k]);
    });
  }
  NEE_DISPATCH_NUMERIC(out.dtype(), break, {
    T* dst = out.data<T>();
    const T* src = updates.data<T>();
    return visit([&](int64_t d, int64_t s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) dst[d + k] = Combine<T>(dst[d + k], src[s + k], red);
    });
  });
  return NotImplemented(node.Describe() + ": reduction on element type " + DataTypeName(out.dtype()) +
                        " is not supported");
}

Status ScatterElementsKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* data, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* updates, ctx.InputTensor(2));
  if (data->rank() < 1) return ctx.InputError(0, "must have rank >= 1");
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_attr, data->rank(), ctx.node()));
  Reduction red = Reduction::kNone;
  if (ctx.opset() >= 16 && ctx.node().op_type == "ScatterElements") {
    NEE_ASSIGN_OR_RETURN(red, ReductionAttr(ctx.node()));
  }
  if (updates->dims() != indices->dims())
    return ctx.InputError(2, "shape " + DimsToString(updates->dims()) + " must equal the indices shape " +
                                 DimsToString(indices->dims()));
  if (updates->dtype() != data->dtype()) return ctx.InputError(2, "must have the data's element type");
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, ElementOffsets(ctx, *data, *indices, axis, 1));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, data->dtype(), data->dims()));
  NEE_RETURN_IF_ERROR(CopyElements(ctx.node(), *data, out));
  return ScatterRuns(ctx.node(), out, *updates, red, [&](auto&& apply) {
    for (size_t i = 0; i < offsets.size(); ++i) apply(offsets[i], static_cast<int64_t>(i), 1);
    return Status::Ok();
  });
}

// ---- GatherND / ScatterND -------------------------------------------------------------------

struct NdLayout {
  int64_t batch = 1;          // product of the batch dims
  int64_t tuples_per_batch;   // index tuples in each batch
  int64_t k;                  // length of each index tuple
  int64_t slice;              // elements addressed by one tuple
  int64_t batch_stride;       // data elements per batch
  std::vector<int64_t> tuple_dims, tuple_strides;  // data dims [b, b+k) and their strides
};

Result<NdLayout> NdLayoutOf(KernelContext& ctx, const Tensor& data, const Tensor& indices, int64_t batch_dims) {
  const int64_t r = data.rank(), q = indices.rank();
  if (q < 1) return ctx.InputError(1, "must have rank >= 1");
  if (batch_dims < 0 || batch_dims >= std::min(q, r + 1) || batch_dims > r)
    return ctx.Error("batch_dims " + std::to_string(batch_dims) + " is out of range");
  NdLayout l;
  l.k = indices.dim(q - 1);
  if (l.k < 0 || l.k > r - batch_dims)
    return ctx.InputError(1, "last dimension " + std::to_string(l.k) + " exceeds data rank minus batch_dims");
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (indices.dim(d) != data.dim(d))
      return ctx.InputError(1, "batch dimension " + std::to_string(d) + " differs from the data's");
    l.batch *= data.dim(d);
  }
  l.tuples_per_batch = ProductOf(indices.dims(), batch_dims, q - 1);
  l.slice = ProductOf(data.dims(), batch_dims + l.k);
  l.batch_stride = ProductOf(data.dims(), batch_dims);
  std::vector<int64_t> strides = StridesOf(data.dims());
  for (int64_t d = batch_dims; d < batch_dims + l.k; ++d) {
    l.tuple_dims.push_back(data.dim(d));
    l.tuple_strides.push_back(strides[d]);
  }
  return l;
}

// Data offset of index tuple t (counted over all batches).
Result<int64_t> TupleOffset(KernelContext& ctx, const Tensor& indices, const NdLayout& l, int64_t t) {
  int64_t batch = l.tuples_per_batch ? t / l.tuples_per_batch : 0;
  int64_t offset = batch * l.batch_stride;
  for (int64_t j = 0; j < l.k; ++j) {
    int64_t raw = IndexAt(indices, t * l.k + j);
    int64_t c = raw;
    if (!NormalizeIndex(c, l.tuple_dims[j])) return ctx.InputError(1, IndexError(raw, l.tuple_dims[j]));
    offset += c * l.tuple_strides[j];
  }
  return offset;
}

Status GatherNDKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* data, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(int64_t batch_dims, ctx.node().GetInt("batch_dims", 0));
  NEE_ASSIGN_OR_RETURN(NdLayout l, NdLayoutOf(ctx, *data, *indices, batch_dims));
  std::vector<int64_t> out_dims(indices->dims().begin(), indices->dims().end() - 1);
  out_dims.insert(out_dims.end(), data->dims().begin() + batch_dims + l.k, data->dims().end());
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, data->dtype(), out_dims));
  const int64_t tuples = l.batch * l.tuples_per_batch;
  return VisitStorage(ctx.node(), data->dtype(), [&]<typename A>() -> Status {
    A src(*data), dst(out);
    for (int64_t t = 0; t < tuples; ++t) {
      NEE_ASSIGN_OR_RETURN(int64_t offset, TupleOffset(ctx, *indices, l, t));
      dst.CopyRun(t * l.slice, src, offset, l.slice);
    }
    return Status::Ok();
  });
}

Status GatherNDInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* data, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* indices, InputTensorType(ictx, 1));
  std::optional<Shape> out;
  NEE_ASSIGN_OR_RETURN(int64_t batch_dims, ictx.node.GetInt("batch_dims", 0));
  if (data->shape && indices->shape && !indices->shape->empty() && indices->shape->back().known()) {
    int64_t k = indices->shape->back().value;
    int64_t r = static_cast<int64_t>(data->shape->size());
    if (batch_dims >= 0 && batch_dims + k <= r) {
      Shape s(indices->shape->begin(), indices->shape->end() - 1);
      s.insert(s.end(), data->shape->begin() + batch_dims + k, data->shape->end());
      out = s;
    } else {
      return ictx.InputError(1, "last dimension exceeds data rank minus batch_dims");
    }
  }
  ictx.output_types[0] = TypeInfo::Tensor(data->elem_type, out);
  PropagateByRunning(ictx, GatherNDKernel);
  return Status::Ok();
}

Status ScatterNDKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* data, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* updates, ctx.InputTensor(2));
  Reduction red = Reduction::kNone;
  if (ctx.opset() >= 16) {
    NEE_ASSIGN_OR_RETURN(red, ReductionAttr(ctx.node()));
  }
  NEE_ASSIGN_OR_RETURN(NdLayout l, NdLayoutOf(ctx, *data, *indices, 0));
  std::vector<int64_t> expected(indices->dims().begin(), indices->dims().end() - 1);
  expected.insert(expected.end(), data->dims().begin() + l.k, data->dims().end());
  if (updates->dims() != expected)
    return ctx.InputError(2, "has shape " + DimsToString(updates->dims()) + ", expected " + DimsToString(expected));
  if (updates->dtype() != data->dtype()) return ctx.InputError(2, "must have the data's element type");
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, data->dtype(), data->dims()));
  NEE_RETURN_IF_ERROR(CopyElements(ctx.node(), *data, out));
  const int64_t tuples = l.tuples_per_batch;
  return ScatterRuns(ctx.node(), out, *updates, red, [&](auto&& apply) -> Status {
    for (int64_t t = 0; t < tuples; ++t) {
      NEE_ASSIGN_OR_RETURN(int64_t offset, TupleOffset(ctx, *indices, l, t));
      apply(offset, t * l.slice, l.slice);
    }
    return Status::Ok();
  });
}

// ---- CumSum -----------------------------------------------------------------------------------

template <typename T, typename Acc, typename Load, typename Store>
void CumSumTyped(const T* in, T* out, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse,
                 Load load, Store store) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      Acc acc = Acc(0);
      for (int64_t step = 0; step < n; ++step) {
        int64_t j = reverse ? n - 1 - step : step;
        int64_t idx = (o * n + j) * inner + i;
        Acc v = load(in[idx]);
        if (exclusive) {
          out[idx] = store(acc);
          acc = load(store(acc + v));
        } else {
          acc = load(store(acc + v));
          out[idx] = store(acc);
        }
      }
    }
}

Status CumSumKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, IntInput(ctx, 1));
  if (axis_v.size() != 1) return ctx.InputError(1, "must be a scalar");
  NEE_ASSIGN_OR_RETURN(int64_t exclusive, ctx.node().GetInt("exclusive", 0));
  NEE_ASSIGN_OR_RETURN(int64_t reverse, ctx.node().GetInt("reverse", 0));
  auto axis_r = NormalizeAxis(axis_v[0], x->rank(), ctx.node());
  if (!axis_r.ok()) return ctx.InputError(1, axis_r.status().message());
  int64_t axis = axis_r.value();
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), x->dims()));
  const int64_t n = x->rank() ? x->dim(axis) : 1;
  const int64_t outer = ProductOf(x->dims(), 0, axis), inner = ProductOf(x->dims(), axis + 1);
  if (x->dtype() == DataType::kFloat16 || x->dtype() == DataType::kBFloat16) {
    // Accumulate in float, rounding to the narrow type after every addition
    // (as a float16 running sum does).
    bool half = x->dtype() == DataType::kFloat16;
    auto load = [half](uint16_t v) { return half ? HalfToFloat(v) : BFloat16ToFloat(v); };
    auto store = [half](float v) { return half ? FloatToHalf(v) : FloatToBFloat16(v); };
    CumSumTyped<uint16_t, float>(x->data<uint16_t>(), out.data<uint16_t>(), outer, n, inner, exclusive, reverse,
                                 load, store);
    return Status::Ok();
  }
  NEE_DISPATCH_NUMERIC(x->dtype(), break, {
    auto same = [](T v) { return v; };
    CumSumTyped<T, T>(x->data<T>(), out.data<T>(), outer, n, inner, exclusive, reverse, same, same);
    return Status::Ok();
  });
  return NotImplemented(ctx.node().Describe() + ": element type " + DataTypeName(x->dtype()) + " is not supported");
}

// ---- OneHot -------------------------------------------------------------------------------------

Status OneHotKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* indices, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(double depth_value, ScalarInput(ctx, 1));
  NEE_ASSIGN_OR_RETURN(const Tensor* values, ctx.InputTensor(2));
  if (values->num_elements() != 2) return ctx.InputError(2, "must hold [off_value, on_value], got " + values->Describe());
  if (!(depth_value >= 1) || depth_value > 1e15) return ctx.InputError(1, "depth must be positive");
  const int64_t depth = static_cast<int64_t>(depth_value);
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", -1));
  const int64_t r = indices->rank();
  if (axis_attr < -r - 1 || axis_attr > r) return ctx.Error("axis " + std::to_string(axis_attr) + " is out of range");
  const int64_t axis = axis_attr < 0 ? axis_attr + r + 1 : axis_attr;
  std::vector<int64_t> out_dims = indices->dims();
  out_dims.insert(out_dims.begin() + axis, depth);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, values->dtype(), out_dims));
  const int64_t outer = ProductOf(indices->dims(), 0, axis), inner = ProductOf(indices->dims(), axis);
  return VisitStorage(ctx.node(), values->dtype(), [&]<typename A>() -> Status {
    A v(*values), dst(out);
    for (int64_t i = 0; i < out.num_elements(); ++i) dst.Set(i, v.Get(0));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t pos = o * inner + i;
        double raw = indices->dtype() == DataType::kInt64 ? static_cast<double>(indices->data<int64_t>()[pos])
                                                          : ReadAsDouble(*indices, pos);
        if (!(raw >= -static_cast<double>(depth) && raw < static_cast<double>(depth) + 1)) continue;
        int64_t idx = static_cast<int64_t>(raw);
        if (idx < -depth || idx >= depth) continue;
        if (idx < 0) idx += depth;
        dst.Set((o * depth + idx) * inner + i, v.Get(1));
      }
    return Status::Ok();
  });
}

Status OneHotInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* indices, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* values, InputTensorType(ictx, 2));
  std::optional<Shape> out;
  if (indices->shape) {
    NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ictx.node.GetInt("axis", -1));
    const int64_t r = static_cast<int64_t>(indices->shape->size());
    if (axis_attr < -r - 1 || axis_attr > r) return ictx.Error("axis " + std::to_string(axis_attr) + " is out of range");
    const int64_t axis = axis_attr < 0 ? axis_attr + r + 1 : axis_attr;
    Dim depth = Dim::Unknown();
    if (const Tensor* d = ictx.input_value(1); d && d->num_elements() == 1 && d->dtype() != DataType::kString) {
      double v = ReadAsDouble(*d, 0);
      if (v >= 1 && v <= 1e15) depth = Dim::Known(static_cast<int64_t>(v));
    }
    Shape s = *indices->shape;
    s.insert(s.begin() + axis, depth);
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(values->elem_type, out);
  return Status::Ok();
}

// ---- Col2Im ------------------------------------------------------------------------------------------

Status Col2ImKernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> image, IntInput(ctx, 1));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> block, IntInput(ctx, 2));
  const size_t nd = image.size();
  if (nd == 0 || block.size() != nd) return ctx.InputError(2, "must have as many entries as image_shape");
  if (x->rank() != 3) return ctx.InputError(0, "must have rank 3 [N, C*prod(block), L], got " + x->Describe());
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, node.GetInts("dilations", std::vector<int64_t>(nd, 1)));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, node.GetInts("strides", std::vector<int64_t>(nd, 1)));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.GetInts("pads", std::vector<int64_t>(2 * nd, 0)));
  if (dilations.size() != nd || strides.size() != nd || pads.size() != 2 * nd)
    return ctx.Error("dilations, strides and pads must match the number of spatial dims");
  int64_t block_size = 1, positions = 1;
  std::vector<int64_t> counts(nd);
  constexpr int64_t kLimit = int64_t{1} << 31;  // keeps every product below overflow
  for (size_t i = 0; i < nd; ++i) {
    if (block[i] <= 0 || image[i] <= 0 || dilations[i] <= 0 || strides[i] <= 0)
      return ctx.Error("image_shape, block_shape, dilations and strides must be positive");
    if (block[i] > kLimit || image[i] > kLimit || dilations[i] > kLimit || strides[i] > kLimit ||
        pads[i] < 0 || pads[i] > kLimit || pads[i + nd] < 0 || pads[i + nd] > kLimit)
      return ctx.Error("image_shape, block_shape, dilations, strides or pads out of the supported range");
    int64_t extent = (block[i] - 1) * dilations[i] + 1;
    int64_t span = image[i] + pads[i] + pads[i + nd] - extent;
    if (span < 0) return ctx.InputError(2, "block does not fit the padded image");
    counts[i] = span / strides[i] + 1;
    block_size *= block[i];
    positions *= counts[i];
    if (block_size > x->dim(1) || positions > x->dim(2))
      return ctx.InputError(0, "shape " + DimsToString(x->dims()) + " does not match the block layout");
  }
  if (x->dim(1) % block_size != 0)
    return ctx.InputError(0, "dimension 1 (" + std::to_string(x->dim(1)) + ") is not a multiple of prod(block_shape)");
  if (x->dim(2) != positions)
    return ctx.InputError(0, "dimension 2 is " + std::to_string(x->dim(2)) + ", expected " + std::to_string(positions) +
                                 " block positions");
  const int64_t batch = x->dim(0), channels = x->dim(1) / block_size;
  std::vector<int64_t> out_dims = {batch, channels};
  out_dims.insert(out_dims.end(), image.begin(), image.end());
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, x->dtype(), out_dims));
  if (!IsFloatingPoint(x->dtype()) && !IsSignedInteger(x->dtype()) && !IsUnsignedInteger(x->dtype()))
    return NotImplemented(node.Describe() + ": element type " + DataTypeName(x->dtype()) + " is not supported");
  const int64_t image_size = ProductOf(image);
  std::vector<double> acc(static_cast<size_t>(image_size));
  std::vector<int64_t> k(nd), l(nd);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t kf = 0; kf < block_size; ++kf) {
        for (int64_t r = kf, i = static_cast<int64_t>(nd) - 1; i >= 0; --i) {
          k[i] = r % block[i];
          r /= block[i];
        }
        for (int64_t lf = 0; lf < positions; ++lf) {
          int64_t offset = 0;
          bool inside = true;
          for (int64_t r = lf, i = static_cast<int64_t>(nd) - 1; i >= 0; --i) {
            l[i] = r % counts[i];
            r /= counts[i];
          }
          for (size_t i = 0; i < nd && inside; ++i) {
            int64_t coord = l[i] * strides[i] - pads[i] + k[i] * dilations[i];
            inside = coord >= 0 && coord < image[i];
            offset = offset * image[i] + coord;
          }
          if (inside) acc[offset] += ReadAsDouble(*x, ((n * channels + c) * block_size + kf) * positions + lf);
        }
      }
      for (int64_t p = 0; p < image_size; ++p) WriteFromDouble(out, (n * channels + c) * image_size + p, acc[p]);
    }
  return Status::Ok();
}

Status Col2ImInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  std::optional<Shape> out;
  auto image = KnownInts(ictx, 1);
  auto block = KnownInts(ictx, 2);
  if (image) {
    Shape s{Dim::Unknown(), Dim::Unknown()};
    if (x->shape && x->shape->size() == 3) {
      s[0] = (*x->shape)[0];
      if (block && (*x->shape)[1].known()) {
        int64_t b = 1;
        for (int64_t v : *block) b *= v;
        if (b > 0) s[1] = Dim::Known((*x->shape)[1].value / b);
      }
    }
    for (int64_t v : *image) s.push_back(Dim::Known(v));
    out = s;
  }
  ictx.output_types[0] = TypeInfo::Tensor(x->elem_type, out);
  return Status::Ok();
}

}  // namespace

void RegisterIndexingOps(OpRegistry& r) {
  r.RegisterVersions("", "Slice", {1, 10, 11, 13}, SliceInfer, SliceKernel);
  r.RegisterVersions("", "Gather", {1, 11, 13}, GatherInfer, GatherKernel);
  r.RegisterVersions("", "GatherElements", {11, 13}, GatherElementsInfer, GatherElementsKernel);
  r.RegisterVersions("", "GatherND", {11, 12, 13}, GatherNDInfer, GatherNDKernel);
  r.RegisterVersions("", "ScatterElements", {11, 13, 16, 18}, InferSameAsInput0, ScatterElementsKernel);
  r.RegisterVersions("", "Scatter", {9, 11}, InferSameAsInput0, ScatterElementsKernel);
  r.RegisterVersions("", "ScatterND", {11, 13, 16, 18}, InferSameAsInput0, ScatterNDKernel);
  r.RegisterVersions("", "CumSum", {11, 14}, InferSameAsInput0, CumSumKernel);
  r.RegisterVersions("", "OneHot", {9, 11, 28}, OneHotInfer, OneHotKernel);
  r.RegisterVersions("", "Col2Im", {18}, Col2ImInfer, Col2ImKernel);
}

}  // namespace nee
