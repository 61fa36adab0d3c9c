// nee's FusedMatMul (ops/fused_matmul.h) on float32: activation(A B + bias)
// with the bias and the activation applied to each tile of the product right
// after SGEMM wrote it, while it is in cache, instead of by a separate
// BiasGelu/Add pass that reads the whole product back from memory.
//
// A constant B is packed once per session (PreparedCache) as column groups,
// each its own SgemmPackedB. A task is one row block x one column group, as
// SGEMM's own tasks are (rows in blocks of at most 144, columns in groups of
// up to 512): a single-threaded SGEMM that applies the epilogue to each row
// block as it finishes it, in L1 (SgemmEpilogueFn). Tasks are
// claimed by threads one at a time and write disjoint tiles, and neither the
// tiling nor the thread changes how an element is computed (SGEMM never splits
// k; the epilogue is per element), so results do not depend on the thread
// count. A B that is not constant, or a run outside a session, multiplies with
// the shared SGEMM, with the same per-tile epilogue. CPUs without
// AVX2+FMA go to the reference kernel.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_x86.h"
#include "ops/fused_matmul.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kMaxTaskRows = 144;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Columns per group: narrower for narrow products, so that 2-4 threads still
// get several tasks each (BERT's 768-wide projections make 6).
int64_t GroupColumns(int64_t n) { return n <= 1024 ? 4 * kSgemmPanelWidth : 16 * kSgemmPanelWidth; }

// B's column groups, each packed for SGEMM.
struct PackedGroups {
  int64_t group_cols = 0;
  std::vector<std::unique_ptr<SgemmPackedB>> groups;
};

std::shared_ptr<const PackedGroups> PackGroups(KernelContext& ctx, const FusedMatMulGeometry& g) {
  if (!ctx.prepared() || !ctx.input_is_constant(1)) return nullptr;
  const int64_t cols = GroupColumns(g.n);
  auto packed = ctx.prepared()->GetOrBuild<PackedGroups>(
      {g.k, g.n, cols}, [&]() -> Result<std::shared_ptr<const PackedGroups>> {
        auto p = std::make_shared<PackedGroups>();
        p->group_cols = cols;
        for (int64_t j0 = 0; j0 < g.n; j0 += cols)
          p->groups.push_back(std::make_unique<SgemmPackedB>(g.k, std::min(cols, g.n - j0), MatrixView{g.b + j0, g.n, 1}));
        // Every later run multiplies by the packed groups (FusedMatMulFloat
        // below), whatever A's shape: B's own bytes are not needed again.
        ctx.DropConstantInput(1);
        return std::shared_ptr<const PackedGroups>(std::move(p));
      });
  return packed.ok() ? packed.value() : nullptr;
}

struct Identity {
  NEE_AVX2_INLINE __m256 operator()(__m256 x) const { return x; }
};

// y = op(y + bias) over a tile of `rows` x `cols` (row stride ld); bias may be
// null. Each element takes the vector path (tails padded), whatever the tile.
template <typename Op>
__attribute__((target("avx2,fma"))) void EpilogueTile(float* y, int64_t ld, int64_t rows, int64_t cols,
                                                      const float* bias, Op op) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
      __m256 x = _mm256_loadu_ps(row + j);
      if (bias) x = _mm256_add_ps(x, _mm256_loadu_ps(bias + j));
      _mm256_storeu_ps(row + j, op(x));
    }
    if (j == cols) continue;
    alignas(32) float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t t = j; t < cols; ++t) tail[t - j] = bias ? row[t] + bias[t] : row[t];
    _mm256_store_ps(tail, op(_mm256_load_ps(tail)));
    for (int64_t t = j; t < cols; ++t) row[t] = tail[t - j];
  }
}

void Epilogue(const FusedMatMulGeometry& g, float* y, int64_t ld, int64_t rows, int64_t cols, const float* bias) {
  switch (g.activation) {
    case FusedActivation::kGelu: return EpilogueTile(y, ld, rows, cols, bias, GeluErfOp{});
    case FusedActivation::kFastGelu: return EpilogueTile(y, ld, rows, cols, bias, GeluTanhOp{});
    case FusedActivation::kNone:
      if (bias) EpilogueTile(y, ld, rows, cols, bias, Identity{});
      return;
  }
}

bool NeedsEpilogue(const FusedMatMulGeometry& g) { return g.bias || g.activation != FusedActivation::kNone; }

// The epilogue as SGEMM calls it; `bias` is the bias of the product's column 0.
SgemmEpilogueFn EpilogueFor(const FusedMatMulGeometry& g, const float* bias) {
  return [&g, bias](int64_t, int64_t j0, int64_t rows, int64_t cols, float* c, int64_t ldc) {
    Epilogue(g, c, ldc, rows, cols, bias ? bias + j0 : nullptr);
  };
}

// A's row blocks are packed first, once each (the tasks of a row block share
// them: packing per task would repeat it for every column group).
void RunTiled(KernelContext& ctx, const FusedMatMulGeometry& g, const PackedGroups& packed, float* y) {
  const int64_t row_blocks = CeilDiv(g.rows, kMaxTaskRows);
  const int64_t task_rows = std::min(g.rows, CeilDiv(CeilDiv(g.rows, row_blocks), kSgemmTileRows) * kSgemmTileRows);
  const int64_t blocks = CeilDiv(g.rows, task_rows);
  std::vector<std::unique_ptr<SgemmPackedA>> packed_a(static_cast<size_t>(blocks));
  ParallelTasks(ctx, blocks, [&](int64_t r) {
    const int64_t i0 = r * task_rows;
    packed_a[static_cast<size_t>(r)] =
        std::make_unique<SgemmPackedA>(std::min(task_rows, g.rows - i0), g.k, 1.f, MatrixView{g.a + i0 * g.k, g.k, 1});
  });
  const int64_t groups = static_cast<int64_t>(packed.groups.size());
  ParallelTasks(ctx, blocks * groups, [&](int64_t t) {
    const SgemmPackedA& a = *packed_a[static_cast<size_t>(t / groups)];
    const int64_t i0 = t / groups * task_rows, j0 = t % groups * packed.group_cols;
    const SgemmPackedB& b = *packed.groups[static_cast<size_t>(t % groups)];
    const SgemmEpilogueFn epilogue = EpilogueFor(g, g.bias ? g.bias + j0 : nullptr);
    Sgemm(a.m(), b.n(), g.k, SgemmA(a), SgemmB(b), 0.f, y + i0 * g.n + j0, g.n, nullptr,
          NeedsEpilogue(g) ? &epilogue : nullptr);
  });
}

}  // namespace

Status FusedMatMulFloat(KernelContext& ctx) {
  Result<FusedMatMulGeometry> geometry = FusedMatMulGeometryOf(ctx);
  if (!geometry.ok() || !CpuHasAvx2Fma()) return RunReference(ctx);  // the reference reports the error
  const FusedMatMulGeometry& g = geometry.value();
  if (g.k == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, g.out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  float* y = out.data<float>();
  if (auto packed = PackGroups(ctx, g)) {
    RunTiled(ctx, g, *packed, y);
    return Status::Ok();
  }
  const SgemmEpilogueFn epilogue = EpilogueFor(g, g.bias);
  Sgemm(g.rows, g.n, g.k, SgemmA({g.a, g.k, 1}), SgemmB(MatrixView{g.b, g.n, 1}), 0.f, y, g.n, ctx.pool(),
        NeedsEpilogue(g) ? &epilogue : nullptr);
  return Status::Ok();
}

#else
Status FusedMatMulFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
