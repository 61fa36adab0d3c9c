// com.microsoft FusedConv on float32: the fast Conv kernel (conv_fast.cc)
// with an epilogue (conv_common.h's ConvEpilogue) that it applies to each
// output tile while the tile is in L1: bias, the optional residual Z (Conv +
// Add), then the activation. This file holds that per-run arithmetic.
//
// Every activation is vectorized with AVX2 where the CPU has it (Sigmoid, Tanh
// and Silu over simd_math.h's exponential and tanh), per element otherwise.
// Each element is computed the same way whichever thread gets it and wherever
// its run starts, so results do not depend on the thread count. Other types
// and invalid attributes go to FusedConv's reference kernel.
#include <cmath>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/activation_simd.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_x86.h"
#define NEE_FUSED_CONV_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;

void BiasResidualActivatePortable(const FusedActivation& act, const float* bias, const float* z, int64_t ldz,
                                  float* y, int64_t ldy, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float b = bias ? bias[r] : 0.f;
    float* row = y + r * ldy;
    for (int64_t j = 0; j < cols; ++j) row[j] = ApplyFusedActivation<float>(act, row[j] + b + (z ? z[r * ldz + j] : 0.f));
  }
}

#ifdef NEE_FUSED_CONV_X86

// The sum is (y + bias) + z, as in the portable loop, so both give the same
// bits before the activation.
template <Kind K>
__attribute__((target("avx2,fma"))) void BiasResidualActivateAvx2(const FusedActivation& act, const float* bias,
                                                                   const float* z, int64_t ldz, float* y, int64_t ldy,
                                                                   int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const __m256 b = _mm256_set1_ps(bias ? bias[r] : 0.f);
    float* row = y + r * ldy;
    const float* z_row = z ? z + r * ldz : nullptr;
    int64_t i = 0;
    for (; i + 8 <= cols; i += 8) {
      __m256 v = _mm256_add_ps(_mm256_loadu_ps(row + i), b);
      if (z_row) v = _mm256_add_ps(v, _mm256_loadu_ps(z_row + i));
      _mm256_storeu_ps(row + i, Activate8<K>(act, v));
    }
    if (i == cols) continue;
    // The tail through padded buffers, computed exactly as a full vector.
    alignas(32) float tail[8] = {}, z_tail[8] = {};
    for (int64_t k = i; k < cols; ++k) {
      tail[k - i] = row[k];
      if (z_row) z_tail[k - i] = z_row[k];
    }
    __m256 v = _mm256_add_ps(_mm256_load_ps(tail), b);
    if (z_row) v = _mm256_add_ps(v, _mm256_load_ps(z_tail));
    _mm256_store_ps(tail, Activate8<K>(act, v));
    for (int64_t k = i; k < cols; ++k) row[k] = tail[k - i];
  }
}

// All activations also run sixteen lanes at a time
// (activation_simd.h), reloading the 64-byte stores SGEMM's kernel just made
// at full width (a narrower load of part of a wider store can miss
// store-to-load forwarding and stall).

// One run of up to 16 floats: the vector, its mask and where it goes.
struct TileRun {
  float* y;
  const float* z;  // null: no residual
  float bias;
  __mmask16 mask;
};

// Four runs at a time: the exponential activations are one long chain of
// dependent operations per vector, and four independent chains side by side
// keep both vector pipes busy.
template <Kind K>
__attribute__((target("avx512f"), always_inline)) inline void FinishRuns(const FusedActivation& act,
                                                                          const TileRun* runs, int count) {
  __m512 v[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    if (i >= count) break;
    v[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(runs[i].mask, runs[i].y), _mm512_set1_ps(runs[i].bias));
    if (runs[i].z) v[i] = _mm512_add_ps(v[i], _mm512_maskz_loadu_ps(runs[i].mask, runs[i].z));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    if (i < count) v[i] = Activate16<K>(act, v[i]);
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    if (i < count) _mm512_mask_storeu_ps(runs[i].y, runs[i].mask, v[i]);
}

template <Kind K>
__attribute__((target("avx512f"))) void BiasResidualActivateAvx512(const FusedActivation& act, const float* bias,
                                                                    const float* z, int64_t ldz, float* y, int64_t ldy,
                                                                    int64_t rows, int64_t cols) {
  TileRun runs[4];
  int count = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; i += 16) {
      const __mmask16 mask = cols - i >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (cols - i)) - 1u);
      runs[count++] = {y + r * ldy + i, z ? z + r * ldz + i : nullptr, bias ? bias[r] : 0.f, mask};
      if (count == 4) {
        FinishRuns<K>(act, runs, 4);
        count = 0;
      }
    }
  if (count) FinishRuns<K>(act, runs, count);
}

using RowsFn = void (*)(const FusedActivation&, const float*, const float*, int64_t, float*, int64_t, int64_t, int64_t);

// Null for an activation without a sixteen-lane form (none since Tanh16).
RowsFn SelectAvx512(Kind kind) {
  return ForActivation16(
      kind, [](auto k) -> RowsFn { return BiasResidualActivateAvx512<decltype(k)::value>; }, RowsFn{nullptr});
}

RowsFn SelectAvx2(Kind kind) {
  return ForActivation8(kind, [](auto k) -> RowsFn { return BiasResidualActivateAvx2<decltype(k)::value>; });
}
#endif

}  // namespace

void BiasResidualActivate(const FusedActivation& act, const float* bias, const float* z, int64_t ldz, float* y,
                          int64_t ldy, int64_t rows, int64_t cols) {
#ifdef NEE_FUSED_CONV_X86
  if (SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced())
    if (RowsFn fn = SelectAvx512(act.kind)) return fn(act, bias, z, ldz, y, ldy, rows, cols);
  if (CpuHasAvx2Fma() && !SgemmPortableForced()) return SelectAvx2(act.kind)(act, bias, z, ldz, y, ldy, rows, cols);
#endif
  BiasResidualActivatePortable(act, bias, z, ldz, y, ldy, rows, cols);
}

Status FusedConvFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  auto act = ReadFusedActivation(ctx.node());
  const bool z_usable =
      !ctx.has_input(3) || (ctx.input(3)->is_tensor() && ctx.input(3)->tensor().dtype() == DataType::kFloat);
  if (x->dtype() != DataType::kFloat || !act.ok() || !z_usable) return RunReference(ctx);
  ConvEpilogue epilogue{act.value(), ctx.has_input(3) ? &ctx.input(3)->tensor() : nullptr};
  return ConvFloatWithEpilogue(ctx, &epilogue);
}

}  // namespace nee::cpu
