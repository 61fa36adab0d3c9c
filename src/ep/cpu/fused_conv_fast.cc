// com.microsoft FusedConv on float32: the fast Conv kernel (conv_fast.cc),
// then the activation applied in place over its output, one pass over memory
// that the Conv just wrote (so mostly still in cache for small layers).
//
// Every activation is vectorized with AVX2 where the CPU has it (Sigmoid, Tanh
// and Silu over simd_math.h's exponential and tanh), per element otherwise.
// Each element is computed the same way whichever thread gets it, so results
// do not depend on the thread count. The optional Z input (the residual of
// Conv + Add) is added before the activation, in the same pass. Other types
// and invalid attributes go to FusedConv's reference kernel.
//
// Next step when it pays: apply the activation per tile inside the Conv, while
// the tile is in L1.
#include <cmath>

#include "ep/cpu/cpu_kernels.h"
#include "ops/fused_conv.h"

#if defined(__x86_64__) || defined(__i386__)
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_x86.h"
#define NEE_FUSED_CONV_X86 1
#endif

namespace nee::cpu {

namespace {

using Kind = FusedActivation::Kind;

void ActivatePortable(const FusedActivation& act, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ApplyFusedActivation<float>(act, y[i]);
}

#ifdef NEE_FUSED_CONV_X86

// max_ps(a, b) returns b when either is NaN, so every bound goes first: NaN
// inputs stay NaN, as in the reference.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 Activate8(const FusedActivation& act, __m256 x) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.f);
  switch (act.kind) {
    case Kind::kRelu: return _mm256_max_ps(zero, x);
    case Kind::kClip: return _mm256_min_ps(_mm256_set1_ps(act.b), _mm256_max_ps(_mm256_set1_ps(act.a), x));
    case Kind::kLeakyRelu:
      return _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(act.a)), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    case Kind::kHardSigmoid: {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(act.a)), _mm256_set1_ps(act.b));
      return _mm256_min_ps(one, _mm256_max_ps(zero, v));
    }
    case Kind::kHardSwish: {
      const __m256 v = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.f / 6.f)), _mm256_set1_ps(0.5f));
      return _mm256_mul_ps(x, _mm256_min_ps(one, _mm256_max_ps(zero, v)));
    }
    case Kind::kSigmoid: return Sigmoid8(x);
    case Kind::kSilu: return _mm256_mul_ps(x, Sigmoid8(x));
    case Kind::kTanh: return Tanh8(x);
    case Kind::kNone: return x;
  }
  return x;
}

__attribute__((target("avx2,fma"))) void ActivateAvx2(const FusedActivation& act, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Activate8(act, _mm256_loadu_ps(y + i)));
  if (i == n) return;
  // The tail through a padded buffer, so that it is computed exactly as a full vector.
  alignas(32) float tail[8] = {};
  for (int64_t k = i; k < n; ++k) tail[k - i] = y[k];
  _mm256_store_ps(tail, Activate8(act, _mm256_load_ps(tail)));
  for (int64_t k = i; k < n; ++k) y[k] = tail[k - i];
}
#endif

void Activate(const FusedActivation& act, float* y, int64_t n) {
#ifdef NEE_FUSED_CONV_X86
  if (CpuHasAvx2Fma()) return ActivateAvx2(act, y, n);
#endif
  ActivatePortable(act, y, n);
}

}  // namespace

Status FusedConvFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  auto act = ReadFusedActivation(ctx.node());
  const bool z_usable =
      !ctx.has_input(3) || (ctx.input(3)->is_tensor() && ctx.input(3)->tensor().dtype() == DataType::kFloat);
  if (x->dtype() != DataType::kFloat || !act.ok() || !z_usable) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor y, RunKeepingOutput(ctx, ConvFloat));
  const float* z = nullptr;
  if (ctx.has_input(3)) {
    const Tensor& zt = ctx.input(3)->tensor();
    if (zt.dims() != y.dims())
      return ctx.InputError(3, "(Z) must have the output's shape " + DimsToString(y.dims()) + ", got " + zt.Describe());
    z = zt.data<float>();
  }
  const FusedActivation activation = act.value();
  if (activation.kind == Kind::kNone && !z) return Status::Ok();
  float* data = y.data<float>();
  ctx.ParallelFor(y.num_elements(), 1 << 14, [&](int64_t begin, int64_t end) {
    if (z)
      for (int64_t i = begin; i < end; ++i) data[i] += z[i];
    if (activation.kind != Kind::kNone) Activate(activation, data + begin, end - begin);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
