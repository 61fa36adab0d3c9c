// Concat, Split and Slice as byte copies, for every element type whose
// storage is whole bytes (strings and packed sub-byte types go to the
// reference). The reference kernels copy element by element through a type
// dispatch, zero-fill their outputs first and run on one thread; here
//   - Concat and Split see the big tensor as [outer, row] bytes where each
//     row is the concatenation of one run per part; the big tensor's bytes
//     are cut into equal pieces, one task each, so a channel concat
//     (outer 1, runs of megabytes) and a last-axis one (outer 19200, runs of
//     8 bytes) both spread over the threads;
//   - Slice collapses the output to [rows, run] where each row is a
//     contiguous run of the input (step 1 on the innermost moving axis) and
//     hands bands of rows to threads; other slices go to the reference.
// Short runs are copied with fixed-size moves rather than a call to memcpy.
// Copies only move bits, so any split between threads gives the same output.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/op_util.h"
#include "ops/slice_geometry.h"

namespace nee::cpu {
namespace {

constexpr int64_t kPieceBytes = 64 << 10;  // bytes per task
constexpr int64_t kMaxPieces = 256;

// Byte size of one element, or 0 for storage this file does not handle.
size_t ElementBytes(DataType t) {
  if (t == DataType::kString || !IsValidDataType(static_cast<int32_t>(t))) return 0;
  const int bits = ElementBits(t);
  return bits % 8 == 0 ? static_cast<size_t>(bits / 8) : 0;
}

// memcpy for runs of any length; short runs (the 2-float boxes of a detector
// head) inline as 8-byte moves instead of a library call each. A run onto
// itself is skipped: the memory planner puts a Concat's inputs in place.
inline void CopyRun(uint8_t* dst, const uint8_t* src, size_t n) {
  if (dst == src) return;
  if (n >= 64) {
    std::memcpy(dst, src, n);
    return;
  }
  size_t k = 0;
  for (; k + 8 <= n; k += 8) std::memcpy(dst + k, src + k, 8);
  for (; k < n; ++k) dst[k] = src[k];
}

// One side of a Concat/Split: the big tensor's [outer, row] bytes, each row
// made of one run per part (part k's run is runs[k] bytes at row offset at[k]).
struct Rows {
  uint8_t* big;
  int64_t outer, row;
  std::vector<uint8_t*> parts;
  std::vector<int64_t> runs, at;
};

// Copies bytes [begin, end) of the big tensor from (to_big) or to the parts.
void CopyPiece(const Rows& r, int64_t begin, int64_t end, bool to_big) {
  int64_t o = begin / r.row, off = begin % r.row;
  size_t k = static_cast<size_t>(std::upper_bound(r.at.begin(), r.at.end(), off) - r.at.begin()) - 1;
  for (int64_t pos = begin; pos < end;) {
    const int64_t in_run = off - r.at[k];
    const int64_t n = std::min(r.runs[k] - in_run, end - pos);
    uint8_t* part = r.parts[k] + o * r.runs[k] + in_run;
    if (to_big) CopyRun(r.big + pos, part, static_cast<size_t>(n));
    else CopyRun(part, r.big + pos, static_cast<size_t>(n));
    pos += n, off += n;
    if (off == r.at[k] + r.runs[k]) {  // next part's run, or next row
      do {
        if (++k == r.runs.size()) k = 0, off = 0, ++o;
      } while (r.runs[k] == 0 && pos < end);
    }
  }
}

void CopyRows(const KernelContext& ctx, const Rows& r, bool to_big) {
  const int64_t total = r.outer * r.row;
  if (total == 0) return;
  const int64_t pieces = std::clamp<int64_t>(total / kPieceBytes, 1, kMaxPieces);
  const int64_t step = (total + pieces - 1) / pieces;
  ParallelTasks(ctx, (total + step - 1) / step, [&](int64_t t) {
    CopyPiece(r, t * step, std::min(total, (t + 1) * step), to_big);
  });
}

// Runs of an axis split: `sizes` along `axis` of dims, for parts of esize bytes.
void FillRuns(Rows& r, const std::vector<int64_t>& dims, int64_t axis, const std::vector<int64_t>& sizes,
              size_t esize) {
  const int64_t inner = ProductOf(dims, axis + 1) * static_cast<int64_t>(esize);
  r.outer = ProductOf(dims, 0, axis);
  r.row = 0;
  for (int64_t s : sizes) {
    r.at.push_back(r.row);
    r.runs.push_back(s * inner);
    r.row += s * inner;
  }
}

// Output dims with size-1 dims dropped and neighbours that are contiguous in
// the input merged; strides in elements.
void CollapseStrided(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                     std::vector<int64_t>* out_dims, std::vector<int64_t>* out_strides) {
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!out_dims->empty() && out_strides->back() == strides[d] * dims[d]) {
      out_dims->back() *= dims[d];
      out_strides->back() = strides[d];
    } else {
      out_dims->push_back(dims[d]);
      out_strides->push_back(strides[d]);
    }
  }
}

// Rows [begin, end) of a strided copy whose innermost run is contiguous:
// row r's source is base + sum over outer dims of index * stride.
void StridedRows(const uint8_t* x, uint8_t* y, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                 int64_t base, size_t esize, int64_t begin, int64_t end) {
  const size_t outer = dims.size() - 1;
  const size_t run = static_cast<size_t>(dims.back()) * esize;
  if (outer == 1) {  // evenly spaced rows (a last-axis slice): the next rows' sources fetched ahead
    const int64_t step = strides[0] * static_cast<int64_t>(esize);
    const uint8_t* src = x + (base + begin * strides[0]) * static_cast<int64_t>(esize);
    for (int64_t r = begin; r < end; ++r, src += step) {
      if (r + 16 < end) __builtin_prefetch(src + 16 * step);
      CopyRun(y + static_cast<size_t>(r) * run, src, run);
    }
    return;
  }
  std::vector<int64_t> index(outer, 0);
  int64_t offset = base;
  for (size_t k = outer, rest = static_cast<size_t>(begin); k-- > 0;) {
    index[k] = static_cast<int64_t>(rest % static_cast<size_t>(dims[k]));
    rest /= static_cast<size_t>(dims[k]);
    offset += index[k] * strides[k];
  }
  for (int64_t r = begin; r < end; ++r) {
    CopyRun(y + static_cast<size_t>(r) * run, x + offset * static_cast<int64_t>(esize), run);
    for (size_t k = outer; k-- > 0;) {
      offset += strides[k];
      if (++index[k] < dims[k]) break;
      offset -= index[k] * strides[k];
      index[k] = 0;
    }
  }
}

// Split sizes in the plain cases: a split input (opset 13+) or attribute
// (opsets 2-12) of non-negative sizes adding up to the axis, or no split at
// all and an axis that divides evenly. Empty: leave it to the reference,
// which resolves the rest (num_outputs' uneven last part) and words errors.
Result<std::vector<int64_t>> PlainSplitSizes(KernelContext& ctx, int64_t dim) {
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  const bool has_attr = ctx.node().HasAttr("split");
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13 && ctx.has_input(1)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* s, ctx.InputTensor(1));
    if (s->dtype() != DataType::kInt64 || s->num_elements() != n) return sizes;
    const auto* p = static_cast<const int64_t*>(s->raw_data());
    sizes.assign(p, p + n);
  } else if (ctx.opset() >= 2 && ctx.opset() < 13 && has_attr) {
    NEE_ASSIGN_OR_RETURN(sizes, ctx.node().GetInts("split"));
  } else if (ctx.opset() >= 2 && !ctx.has_input(1) && !has_attr && !ctx.node().HasAttr("num_outputs") &&
             dim % n == 0) {
    sizes.assign(static_cast<size_t>(n), dim / n);
  }
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0 || s > dim) return std::vector<int64_t>{};
    sum += s;
  }
  if (static_cast<int64_t>(sizes.size()) != n || sum != dim) sizes.clear();
  return sizes;
}

}  // namespace

Status ConcatFast(KernelContext& ctx) {
  if (ctx.num_inputs() == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const Tensor* first, ctx.InputTensor(0));
  const size_t esize = ElementBytes(first->dtype());
  auto axis_attr = ctx.node().GetInt("axis", 1);  // opset < 4 defaulted it to 1; later ones require it
  if (esize == 0 || !axis_attr.ok() || (ctx.opset() >= 4 && !ctx.node().HasAttr("axis"))) return RunReference(ctx);
  const int64_t rank = first->rank(), axis = axis_attr.value() < 0 ? axis_attr.value() + rank : axis_attr.value();
  if (axis < 0 || axis >= rank) return RunReference(ctx);  // it words the error
  std::vector<int64_t> out_dims = first->dims(), sizes;
  out_dims[static_cast<size_t>(axis)] = 0;
  std::vector<const Tensor*> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Value* v = ctx.input(i);
    if (!v || !v->is_tensor() || v->tensor().dtype() != first->dtype() || v->tensor().rank() != rank)
      return RunReference(ctx);
    const Tensor& t = v->tensor();
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && t.dim(d) != first->dim(d)) return RunReference(ctx);
    sizes.push_back(t.dim(axis));
    out_dims[static_cast<size_t>(axis)] += t.dim(axis);
    inputs.push_back(&t);
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, first->dtype(), out_dims));
  Rows r{static_cast<uint8_t*>(out.raw_data()), 0, 0, {}, {}, {}};
  FillRuns(r, out_dims, axis, sizes, esize);
  for (const Tensor* t : inputs) r.parts.push_back(static_cast<uint8_t*>(const_cast<void*>(t->raw_data())));
  CopyRows(ctx, r, /*to_big=*/true);
  return Status::Ok();
}

Status SplitFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  const size_t esize = ElementBytes(x->dtype());
  if (esize == 0 || ctx.num_outputs() == 0) return RunReference(ctx);
  auto axis_attr = ctx.node().GetInt("axis", 0);
  if (!axis_attr.ok()) return RunReference(ctx);
  const int64_t rank = x->rank(), axis = axis_attr.value() < 0 ? axis_attr.value() + rank : axis_attr.value();
  if (axis < 0 || axis >= rank) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, PlainSplitSizes(ctx, x->dim(axis)));
  if (sizes.empty()) return RunReference(ctx);
  Rows r{static_cast<uint8_t*>(const_cast<void*>(x->raw_data())), 0, 0, {}, {}, {}};
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims = x->dims();
    dims[static_cast<size_t>(axis)] = sizes[k];
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(k, x->dtype(), dims));
    r.parts.push_back(static_cast<uint8_t*>(out.raw_data()));
  }
  FillRuns(r, x->dims(), axis, sizes, esize);
  CopyRows(ctx, r, /*to_big=*/false);
  return Status::Ok();
}

Status SliceFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  const size_t esize = ElementBytes(x->dtype());
  if (esize == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(SliceGeometry g, ResolveSlice(ctx, *x));
  std::vector<int64_t> dims, strides;
  CollapseStrided(g.out_dims, g.strides, &dims, &strides);
  const bool empty = std::find(g.out_dims.begin(), g.out_dims.end(), 0) != g.out_dims.end();
  if (!empty && !dims.empty() && strides.back() != 1) return RunReference(ctx);  // strided innermost
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, x->dtype(), g.out_dims));
  if (empty) return Status::Ok();
  if (dims.empty()) dims = {1}, strides = {1};  // one element
  const auto* px = static_cast<const uint8_t*>(x->raw_data());
  auto* py = static_cast<uint8_t*>(out.raw_data());
  const int64_t run_bytes = dims.back() * static_cast<int64_t>(esize);
  const int64_t rows = out.num_elements() / dims.back();
  const int64_t per_task = std::max<int64_t>(1, kPieceBytes / run_bytes);
  ParallelTasks(ctx, (rows + per_task - 1) / per_task, [&](int64_t t) {
    StridedRows(px, py, dims, strides, g.base, esize, t * per_task, std::min(rows, (t + 1) * per_task));
  });
  return Status::Ok();
}

}  // namespace nee::cpu
