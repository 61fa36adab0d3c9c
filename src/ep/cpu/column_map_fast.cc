// ai.nee TransposeColumnMap on float32 (ops/column_map.h) when the
// permutation moves one axis to the end and keeps the others in order, as a
// detector head's [1, 3, 85, H, W] -> [1, 3, H, W, 85] does: X is then
// [outer, C, inner] and Y [outer, inner, C]. A task takes a band of output
// rows of one outer index, writes them by 8x8 transposes (as transpose_fast.cc
// does) and applies the steps to the band's ranges while the rows are in L1,
// so the tensor is read once and written once. A permutation that keeps the
// last axis in place (the same head written channels last by its conv:
// [1, H, W, 3, 85] -> [1, 3, H, W, 85], opt/layout_blocked.cc) moves whole
// rows instead: each output row is a copy of one input row. Each element gets the same
// single IEEE operations as in the reference kernel, and a transpose moves
// bits only, so the output is bitwise the reference's at any thread count.
// Other permutations go to the reference.
#include <algorithm>
#include <utility>
#include <vector>

#include "ep/cpu/column_map_fast.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/simd_x86.h"  // CpuHasAvx2Fma
#include "ep/cpu/transpose_band.h"
#include "ops/column_map.h"

namespace nee::cpu {
namespace {

constexpr int64_t kBandRows = 256;  // output rows per task: 256 x 85 floats is 87 KB, in L2

// An offset that follows rows in order: row r's index over `dims` (the last
// fastest) dotted with `strides`, started at row r0 and stepped row by row.
struct RowOdometer {
  RowOdometer(std::vector<int64_t> dims, std::vector<int64_t> strides, int64_t r0)
      : dims_(std::move(dims)), strides_(std::move(strides)), index_(dims_.size(), 0) {
    for (size_t d = dims_.size(), rest = static_cast<size_t>(r0); d-- > 0;) {
      index_[d] = static_cast<int64_t>(rest % static_cast<size_t>(dims_[d]));
      rest /= static_cast<size_t>(dims_[d]);
      offset += index_[d] * strides_[d];
    }
  }
  void Next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      offset += strides_[d];
      if (++index_[d] < dims_[d]) return;
      offset -= index_[d] * strides_[d];
      index_[d] = 0;
    }
  }
  int64_t offset = 0;

 private:
  std::vector<int64_t> dims_, strides_, index_;
};

// Applies `step` (its operation a template argument, so that the row loops
// have no switch) to rows [r0, r1) of y (rows of `columns`).
template <ColumnStep kOp>
void ApplyStepAs(const ColumnMap& m, const ColumnMapStep& step, const float* c, float* y, int64_t r0, int64_t r1) {
  const int64_t begin = m.bounds[step.range], end = m.bounds[step.range + 1], columns = m.out_dims.back();
  const bool scalar = !c || (step.column_stride == 0 &&
                             std::all_of(step.row_strides.begin(), step.row_strides.end(),
                                         [](int64_t s) { return s == 0; }));
  if (scalar) {  // one value for every element (or none): no operand offsets to follow
    const float value = c ? c[0] : 0.f;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t col = begin; col < end; ++col) {
        float& v = y[r * columns + col];
        v = ApplyColumnStep(kOp, v, value);
      }
    return;
  }
  RowOdometer operand(step.row_dims, step.row_strides, r0);
  for (int64_t r = r0; r < r1; ++r, operand.Next()) {
    float* row = y + r * columns;
    for (int64_t col = begin; col < end; ++col)
      row[col] = ApplyColumnStep(kOp, row[col], c[operand.offset + (col - begin) * step.column_stride]);
  }
}

void ApplyStep(const ColumnMap& m, const ColumnMapStep& step, const float* c, float* y, int64_t r0, int64_t r1) {
  switch (step.op) {
    case ColumnStep::kAdd: return ApplyStepAs<ColumnStep::kAdd>(m, step, c, y, r0, r1);
    case ColumnStep::kSub: return ApplyStepAs<ColumnStep::kSub>(m, step, c, y, r0, r1);
    case ColumnStep::kSubFrom: return ApplyStepAs<ColumnStep::kSubFrom>(m, step, c, y, r0, r1);
    case ColumnStep::kMul: return ApplyStepAs<ColumnStep::kMul>(m, step, c, y, r0, r1);
    case ColumnStep::kDiv: return ApplyStepAs<ColumnStep::kDiv>(m, step, c, y, r0, r1);
    case ColumnStep::kDivInto: return ApplyStepAs<ColumnStep::kDivInto>(m, step, c, y, r0, r1);
    case ColumnStep::kSquare: return ApplyStepAs<ColumnStep::kSquare>(m, step, c, y, r0, r1);
  }
}

// Output rows [r0, r1) of a permutation that keeps the last axis: row r's
// index over Y's leading dims, read through X's strides in the permuted order.
void CopyRows(const ColumnMap& m, const std::vector<int64_t>& x_dims, const float* x, float* y, int64_t r0,
              int64_t r1) {
  const size_t lead = m.perm.size() - 1;
  const int64_t columns = m.out_dims.back();
  std::vector<int64_t> x_strides(x_dims.size(), 1), strides(lead);
  for (size_t d = x_dims.size() - 1; d-- > 0;) x_strides[d] = x_strides[d + 1] * x_dims[d + 1];
  for (size_t d = 0; d < lead; ++d) strides[d] = x_strides[static_cast<size_t>(m.perm[d])];
  RowOdometer from({m.out_dims.begin(), m.out_dims.end() - 1}, std::move(strides), r0);
  for (int64_t r = r0; r < r1; ++r, from.Next()) std::copy_n(x + from.offset, columns, y + r * columns);
}

// For a permutation that keeps the last axis: the position q to which it moves
// the last of the leading (row) axes, the others keeping their order (a head's
// [1, H, W, 3, 85] -> [1, 3, H, W, 85]: q = 1); -1 for any other.
int64_t RowAxisMovedForward(const std::vector<int64_t>& perm) {
  const int64_t lead = static_cast<int64_t>(perm.size()) - 1;
  if (lead < 2) return -1;
  int64_t q = -1;
  for (int64_t k = 0; k < lead; ++k)
    if (perm[static_cast<size_t>(k)] == lead - 1) q = k;
  if (q < 0 || q == lead - 1) return -1;  // in place: not this kind of move
  for (int64_t k = 0, next = 0; k < lead; ++k) {
    if (k == q) continue;
    if (perm[static_cast<size_t>(k)] != next++) return -1;
  }
  return q;
}

}  // namespace

Status TransposeColumnMapFloat(KernelContext& ctx) {
  std::vector<std::vector<int64_t>> dims(ctx.num_inputs());
  std::vector<const float*> data(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
    if (t->dtype() != DataType::kFloat) return RunReference(ctx);
    dims[i] = t->dims();
    data[i] = t->data<float>();
  }
  auto resolved = ResolveColumnMap(ctx.node(), dims[0], dims);
  if (!resolved.ok()) return RunReference(ctx);  // the reference words the error
  const ColumnMap& m = resolved.value();
  const int64_t rank = static_cast<int64_t>(m.perm.size());
  if (m.perm.back() == rank - 1) {  // whole rows move
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, m.out_dims));
    if (out.num_elements() == 0) return Status::Ok();
    const int64_t rows = out.num_elements() / m.out_dims.back(), columns = m.out_dims.back();
    float* y = out.data<float>();
    const int64_t q = RowAxisMovedForward(m.perm);
    if (q < 0) {  // any other order of the rows: output row bands, each row read where it lies
      ParallelTasks(ctx, (rows + kBandRows - 1) / kBandRows, [&](int64_t band) {
        const int64_t r0 = band * kBandRows, r1 = std::min(rows, r0 + kBandRows);
        CopyRows(m, dims[0], data[0], y, r0, r1);
        for (const ColumnMapStep& step : m.steps)
          ApplyStep(m, step, step.operand ? data[step.operand] : nullptr, y, r0, r1);
      });
      return Status::Ok();
    }
    // X's rows are [outer][inner][A], Y's [outer][A][inner]: a band of inner rows is read in X's order (each
    // of X's lines once; Y's order read X three times over for a head's three anchors) and written as A
    // runs of Y's rows, which the steps then finish.
    const int64_t lead = rank - 1, A = dims[0][static_cast<size_t>(lead - 1)];
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < q; ++k) outer *= dims[0][static_cast<size_t>(k)];
    for (int64_t k = q; k < lead - 1; ++k) inner *= dims[0][static_cast<size_t>(k)];
    const int64_t bands = (inner + kBandRows - 1) / kBandRows;
    const float* x = data[0];
    ParallelTasks(ctx, outer * bands, [&](int64_t task) {
      const int64_t o = task / bands, j0 = (task % bands) * kBandRows, j1 = std::min(inner, j0 + kBandRows);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t a = 0; a < A; ++a)
          std::copy_n(x + ((o * inner + j) * A + a) * columns, columns, y + ((o * A + a) * inner + j) * columns);
      for (int64_t a = 0; a < A; ++a)
        for (const ColumnMapStep& step : m.steps)
          ApplyStep(m, step, step.operand ? data[step.operand] : nullptr, y, (o * A + a) * inner + j0,
                    (o * A + a) * inner + j1);
    });
    return Status::Ok();
  }
  // One axis a moved to the end, the others in order.
  const int64_t a = m.perm.back();
  for (int64_t k = 0, next = 0; k + 1 < rank; ++k, ++next) {
    if (next == a) ++next;
    if (m.perm[static_cast<size_t>(k)] != next) return RunReference(ctx);
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, m.out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < a; ++k) outer *= dims[0][static_cast<size_t>(k)];
  for (int64_t k = a + 1; k < rank; ++k) inner *= dims[0][static_cast<size_t>(k)];
  const int64_t columns = dims[0][static_cast<size_t>(a)];
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = CpuHasAvx2Fma();
#else
  const bool avx2 = false;
#endif
  const float* x = data[0];
  float* y = out.data<float>();
  const int64_t bands = (inner + kBandRows - 1) / kBandRows;
  ParallelTasks(ctx, outer * bands, [&](int64_t task) {
    const int64_t o = task / bands, j0 = (task % bands) * kBandRows, j1 = std::min(inner, j0 + kBandRows);
    TransposeBand(reinterpret_cast<const uint32_t*>(x + o * columns * inner),
                  reinterpret_cast<uint32_t*>(y + o * inner * columns), columns, inner, j0, j1, avx2);
    for (const ColumnMapStep& step : m.steps)
      ApplyStep(m, step, step.operand ? data[step.operand] : nullptr, y, o * inner + j0, o * inner + j1);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
