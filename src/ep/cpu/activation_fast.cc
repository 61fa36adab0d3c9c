// Exp and Sigmoid on float32 with an AVX2 exponential: the reference kernels
// call std::exp per element (~4.5 ns each), which made Sigmoid ~27x slower
// than ONNX Runtime. Other element types, and CPUs without AVX2+FMA, go to the
// reference kernels.
//
// exp(x) = 2^n * e^r with n = round(x / ln 2) and |r| <= ln(2)/2; e^r by a
// degree-7 polynomial (relative error ~1 ulp), 2^n applied as two factors
// 2^(n/2) * 2^(n - n/2) so that results overflow to inf and underflow through
// the subnormals exactly where the true value does. NaN stays NaN.
//
// Every element goes through the vector path — the last few of a chunk via a
// padded 8-lane buffer — so the result does not depend on how the loop was
// cut between threads.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/simd_x86.h"
#include "ops/op_util.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kMinChunk = 1 << 14;

__attribute__((target("avx2,fma"), always_inline)) inline __m256 Pow2(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

__attribute__((target("avx2,fma"), always_inline)) inline __m256 Exp8(__m256 x) {
  const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  // Beyond these exp is 0 or inf in float; clamping keeps n small enough for the two-factor scaling.
  __m256 xc = _mm256_max_ps(x, _mm256_set1_ps(-110.f));  // NaN -> -110 (fixed up at the end)
  xc = _mm256_min_ps(xc, _mm256_set1_ps(100.f));
  const __m256 n_float = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2, with ln2 split in two for an exact first step.
  __m256 r = _mm256_fnmadd_ps(n_float, _mm256_set1_ps(0.693145751953125f), xc);
  r = _mm256_fnmadd_ps(n_float, _mm256_set1_ps(1.42860682030941723212e-6f), r);
  // e^r = 1 + r + r^2/2! + ... + r^7/7!, Horner.
  __m256 p = _mm256_set1_ps(1.f / 5040.f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 720.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256i n = _mm256_cvtps_epi32(n_float);
  const __m256i half = _mm256_srai_epi32(n, 1);
  const __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, Pow2(half)), Pow2(_mm256_sub_epi32(n, half)));
  return _mm256_blendv_ps(result, x, is_nan);
}

struct ExpOp {
  __attribute__((target("avx2,fma"), always_inline)) __m256 operator()(__m256 x) const { return Exp8(x); }
};

// Never exp of a large positive number: with e = e^-|x|, sigmoid is
// 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0 (as the reference computes it).
struct SigmoidOp {
  __attribute__((target("avx2,fma"), always_inline)) __m256 operator()(__m256 x) const {
    const __m256 abs_x = _mm256_andnot_ps(_mm256_set1_ps(-0.f), x);
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_setzero_ps(), abs_x));
    const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 numerator = _mm256_blendv_ps(_mm256_set1_ps(1.f), e, negative);
    return _mm256_div_ps(numerator, _mm256_add_ps(_mm256_set1_ps(1.f), e));
  }
};

template <typename Op>
__attribute__((target("avx2,fma"))) void MapAvx2(const float* x, float* y, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, op(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float tail[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm256_store_ps(tail, op(_mm256_load_ps(tail)));
    std::memcpy(y + i, tail, static_cast<size_t>(n - i) * sizeof(float));
  }
}

template <typename Op>
Status MapFloat(KernelContext& ctx, Op op) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || !CpuHasAvx2Fma()) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kFloat, x->dims()));
  const float* px = x->data<float>();
  float* py = out.data<float>();
  ctx.ParallelFor(x->num_elements(), kMinChunk,
                  [&](int64_t begin, int64_t end) { MapAvx2(px + begin, py + begin, end - begin, op); });
  return Status::Ok();
}

}  // namespace

Status ExpFloat(KernelContext& ctx) { return MapFloat(ctx, ExpOp{}); }
Status SigmoidFloat(KernelContext& ctx) { return MapFloat(ctx, SigmoidOp{}); }

#else
Status ExpFloat(KernelContext& ctx) { return RunReference(ctx); }
Status SigmoidFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
