// nee's FusedMatMul (ops/fused_matmul.h) on float32: activation(A B + bias)
// with the bias and the activation applied to each tile of the product right
// after SGEMM wrote it, while it is in cache, instead of by a separate
// BiasGelu/Add pass that reads the whole product back from memory.
//
// A constant B is packed once per session (PreparedCache) as one
// SgemmPackedB, and the product runs through the shared, parallel SGEMM,
// which calls the epilogue on each row block of a task as it finishes it,
// while that block is in L1 (SgemmEpilogueFn). (It used to run its own tasks
// over column groups of B, each a single-threaded SGEMM with A packed
// serially first; at 2 threads that scaled worse than SGEMM's own split with
// A packed by both threads: BERT's FusedMatMuls 8% faster, BERT -4.5%, ViT
// -4.7%, GPT-2 -2.9% in node sums; at 1 thread -0.5 to -1%.) SGEMM splits
// rows and columns only, never k, and the epilogue is per element, so results
// do not depend on the thread count. A B that is not constant, or a run
// outside a session, multiplies the same way unpacked. CPUs without AVX2+FMA
// go to the reference kernel.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/packed_constant_b.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_x86.h"
#include "ops/fused_matmul.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

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

// EpilogueTile on sixteen lanes, the last few through a masked vector (zero
// lanes past the row, as the eight-lane tail pads): the GELUs' sixteen-lane
// forms give their eight-lane bits, so the result does not depend on the width.
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on _mm512_undefined_ps inside its intrinsics
#endif
template <typename Op>
__attribute__((target("avx512f"))) void EpilogueTile16(float* y, int64_t ld, int64_t rows, int64_t cols,
                                                       const float* bias, Op op) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ld;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
      __m512 x = _mm512_loadu_ps(row + j);
      if (bias) x = _mm512_add_ps(x, _mm512_loadu_ps(bias + j));
      _mm512_storeu_ps(row + j, op(x));
    }
    if (j == cols) continue;
    const __mmask16 m = static_cast<__mmask16>((1u << (cols - j)) - 1);
    __m512 x = _mm512_maskz_loadu_ps(m, row + j);
    if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + j));
    _mm512_mask_storeu_ps(row + j, m, op(x));
  }
}
#pragma GCC diagnostic pop

// The activation's tile on the widest vectors SGEMM runs on (NEE_MAX_ISA and
// the tests' SgemmLimitIsa lower both together).
template <typename Op>
void ActivationTile(float* y, int64_t ld, int64_t rows, int64_t cols, const float* bias, Op op) {
  if (SgemmActiveIsa() == SgemmIsa::kAvx512) EpilogueTile16(y, ld, rows, cols, bias, op);
  else EpilogueTile(y, ld, rows, cols, bias, op);
}

void Epilogue(const FusedMatMulGeometry& g, float* y, int64_t ld, int64_t rows, int64_t cols, const float* bias) {
  switch (g.activation) {
    case FusedActivation::kGelu: return ActivationTile(y, ld, rows, cols, bias, GeluErfOp{});
    case FusedActivation::kFastGelu: return ActivationTile(y, ld, rows, cols, bias, GeluTanhOp{});
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

}  // namespace

Status FusedMatMulFloat(KernelContext& ctx) {
  Result<FusedMatMulGeometry> geometry = FusedMatMulGeometryOf(ctx);
  if (!geometry.ok() || !CpuHasAvx2Fma()) return RunReference(ctx);  // the reference reports the error
  const FusedMatMulGeometry& g = geometry.value();
  if (g.k == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, g.out_dims));
  if (out.num_elements() == 0) return Status::Ok();
  float* y = out.data<float>();
  const SgemmEpilogueFn epilogue = EpilogueFor(g, g.bias);
  const SgemmEpilogueFn* tile_epilogue = NeedsEpilogue(g) ? &epilogue : nullptr;
  if (auto packed = PackedConstantB(ctx, 1, g.k, g.n, MatrixView{g.b, g.n, 1}, false, true))
    Sgemm(g.rows, g.n, g.k, SgemmA({g.a, g.k, 1}), SgemmB(*packed), 0.f, y, g.n, ctx.pool(), tile_epilogue);
  else
    Sgemm(g.rows, g.n, g.k, SgemmA({g.a, g.k, 1}), SgemmB(MatrixView{g.b, g.n, 1}), 0.f, y, g.n, ctx.pool(),
          tile_epilogue);
  return Status::Ok();
}

#else
Status FusedMatMulFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
