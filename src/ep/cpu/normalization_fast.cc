// LayerNormalization over the trailing axes and com.microsoft
// SkipLayerNormalization on float32, one row (the normalized block) per step.
//
// Accuracy: the mean and the centered sum of squares are accumulated in
// double, as the reference does, but in vector lanes, so they differ from the
// reference's by double rounding only. The normalized value is then computed
// in float as ((x - mean_hi) - mean_lo) * inv_std * gamma + beta, with the
// mean split into two floats so that a large mean does not cost accuracy:
// each output is within 1e-6 * (|x - mean| * inv_std * |gamma| + |beta|) of
// the reference (checked in tests/unit/ep/normalization_fast_test.cc).
// A row is never split between threads, so results do not depend on the
// thread count. On AVX-512 the double sums run two accumulators to a zmm, in
// the AVX2 lanes' order, so both give the same bits (1.3x faster for a
// 128 x 768 SkipLayerNormalization with a bias: 66 -> 51 us).
//
// To the reference: other types, affine parameters that vary over the outer
// dims, the optional Mean / InvStdDev outputs, and CPUs without AVX2+FMA.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"
#include "ops/op_util.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kMinChunk = 1 << 14;  // elements per task

// Sum of the float row in double: four accumulators of four lanes, combined
// in a fixed order, then the tail.
__attribute__((target("avx2,fma"))) double SumAvx2(const float* x, int64_t n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 lo = _mm256_loadu_ps(x + i), hi = _mm256_loadu_ps(x + i + 8);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(lo)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(hi)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)));
  }
  const __m256d total = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, total);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i]);
  return sum;
}

// Sum of (x - mean)^2 in double, same shape as SumAvx2.
__attribute__((target("avx2,fma"))) double CenteredSquaresAvx2(const float* x, int64_t n, double mean) {
  const __m256d m = _mm256_set1_pd(mean);
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 lo = _mm256_loadu_ps(x + i), hi = _mm256_loadu_ps(x + i + 8);
    const __m256d d[4] = {_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(lo)), m),
                          _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1)), m),
                          _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(hi)), m),
                          _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1)), m)};
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_pd(d[k], d[k], acc[k]);
  }
  const __m256d total = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, total);
  double sq = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    sq += d * d;
  }
  return sq;
}

// The same two sums on AVX-512, bitwise: a zmm of doubles holds two of the
// AVX2 versions' accumulators side by side (elements 16j..16j+7 and
// 16j+8..16j+15), each lane summing the same elements in the same order, and
// the halves are combined as the AVX2 versions combine them. Fewer
// instructions: no 128-bit extracts, one conversion per eight floats.
#pragma GCC diagnostic push  // GCC 12's false positives on its own extract intrinsics
#ifndef __clang__  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512dq"))) double CombineHalves(__m512d lo8, __m512d hi8) {
  // lo8 = [acc0 | acc1], hi8 = [acc2 | acc3]: (acc0 + acc1) + (acc2 + acc3), then the lanes as SumAvx2.
  const __m256d total = _mm256_add_pd(_mm256_add_pd(_mm512_castpd512_pd256(lo8), _mm512_extractf64x4_pd(lo8, 1)),
                                      _mm256_add_pd(_mm512_castpd512_pd256(hi8), _mm512_extractf64x4_pd(hi8, 1)));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, total);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

__attribute__((target("avx512f,avx512dq"))) double SumAvx512(const float* x, int64_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
  }
  double sum = CombineHalves(lo, hi);
  for (; i < n; ++i) sum += static_cast<double>(x[i]);
  return sum;
}

__attribute__((target("avx512f,avx512dq"))) double CenteredSquaresAvx512(const float* x, int64_t n, double mean) {
  const __m512d m = _mm512_set1_pd(mean);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), m);
    const __m512d d1 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)), m);
    lo = _mm512_fmadd_pd(d0, d0, lo);
    hi = _mm512_fmadd_pd(d1, d1, hi);
  }
  double sq = CombineHalves(lo, hi);
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    sq += d * d;
  }
  return sq;
}

// SkipSumAvx2 with a bias, eight at a time: the same double additions.
__attribute__((target("avx512f,avx512dq"))) void SkipBiasSumAvx512(const float* x, const float* skip,
                                                                   const float* bias, float* s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d sum = _mm512_add_pd(
        _mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), _mm512_cvtps_pd(_mm256_loadu_ps(skip + i))),
        _mm512_cvtps_pd(_mm256_loadu_ps(bias + i)));
    _mm256_storeu_ps(s + i, _mm512_cvtpd_ps(sum));
  }
  for (; i < n; ++i)
    s[i] = static_cast<float>(static_cast<double>(x[i]) + static_cast<double>(skip[i]) + static_cast<double>(bias[i]));
}
#pragma GCC diagnostic pop

// The CPU's level capped by NEE_MAX_ISA and by tests (SgemmLimitIsa), which
// compare the two paths bit for bit.
bool UseAvx512() { return SgemmActiveIsa() == SgemmIsa::kAvx512; }

// y = ((x - mean_hi) - mean_lo) * inv * gamma (+ beta). beta may be null.
__attribute__((target("avx2,fma"))) void NormalizeRowAvx2(const float* x, float* y, int64_t n, double mean,
                                                          double inv_std, const float* gamma, const float* beta) {
  const float mean_hi = static_cast<float>(mean);
  const float mean_lo = static_cast<float>(mean - static_cast<double>(mean_hi));
  const float inv = static_cast<float>(inv_std);
  const __m256 vhi = _mm256_set1_ps(mean_hi), vlo = _mm256_set1_ps(mean_lo), vinv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vhi), vlo);
    const __m256 s = _mm256_mul_ps(d, vinv);
    const __m256 b = beta ? _mm256_loadu_ps(beta + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(s, _mm256_loadu_ps(gamma + i), b));
  }
  for (; i < n; ++i) y[i] = std::fma(((x[i] - mean_hi) - mean_lo) * inv, gamma[i], beta ? beta[i] : 0.f);
}

// Normalizes one row of n floats into y; returns nothing the caller needs.
void LayerNormRow(const float* x, float* y, int64_t n, double epsilon, const float* gamma, const float* beta) {
  const bool wide = UseAvx512();
  const double mean = (wide ? SumAvx512(x, n) : SumAvx2(x, n)) / static_cast<double>(n);
  const double squares = wide ? CenteredSquaresAvx512(x, n, mean) : CenteredSquaresAvx2(x, n, mean);
  const double var = squares / static_cast<double>(n);
  NormalizeRowAvx2(x, y, n, mean, 1.0 / std::sqrt(var + epsilon), gamma, beta);
}

// Whether affine parameter p applies one value per position of the
// normalized block `inner` (its dims, leading 1s aside, equal the block's).
bool IsPerInnerElement(const Tensor& p, const std::vector<int64_t>& inner) {
  if (p.dtype() != DataType::kFloat) return false;
  auto strip = [](std::vector<int64_t> d) {
    while (!d.empty() && d.front() == 1) d.erase(d.begin());
    return d;
  };
  return strip(p.dims()) == strip(inner);
}

// The optional input i as a float pointer when it is a per-channel vector of
// `hidden` values ([H] or [1, H]); `ok` false when present but unusable.
const float* ChannelVector(const KernelContext& ctx, size_t i, int64_t hidden, bool* ok) {
  if (!ctx.has_input(i)) return nullptr;
  const Value* v = ctx.input(i);
  if (!v->is_tensor()) return *ok = false, nullptr;
  const Tensor& t = v->tensor();
  if (t.dtype() != DataType::kFloat || t.num_elements() != hidden || (t.rank() != 1 && !(t.rank() == 2 && t.dim(0) == 1)))
    return *ok = false, nullptr;
  return t.data<float>();
}

// s = x + skip (+ bias), rounded to float as the reference rounds it: with a
// bias, the two additions are done in double.
__attribute__((target("avx2,fma"))) void SkipSumAvx2(const float* x, const float* skip, const float* bias, float* s,
                                                     int64_t n) {
  int64_t i = 0;
  if (!bias) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(s + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(skip + i)));
    for (; i < n; ++i) s[i] = x[i] + skip[i];
    return;
  }
  if (UseAvx512()) return SkipBiasSumAvx512(x, skip, bias, s, n);
  for (; i + 4 <= n; i += 4) {
    const __m256d sum = _mm256_add_pd(_mm256_add_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), _mm256_cvtps_pd(_mm_loadu_ps(skip + i))),
                                      _mm256_cvtps_pd(_mm_loadu_ps(bias + i)));
    _mm_storeu_ps(s + i, _mm256_cvtpd_ps(sum));
  }
  for (; i < n; ++i)
    s[i] = static_cast<float>(static_cast<double>(x[i]) + static_cast<double>(skip[i]) + static_cast<double>(bias[i]));
}

}  // namespace

Status LayerNormFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || !CpuHasAvx2Fma() || ctx.wants_output(1) || ctx.wants_output(2) ||
      !ctx.has_input(1) || !ctx.input(1)->is_tensor() || x->num_elements() == 0)
    return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().GetInt("axis", -1));
  if (axis_attr < -x->rank() || axis_attr >= x->rank()) return RunReference(ctx);
  const int64_t axis = axis_attr < 0 ? axis_attr + x->rank() : axis_attr;
  const std::vector<int64_t> inner_dims(x->dims().begin() + axis, x->dims().end());
  const Tensor& scale = ctx.input(1)->tensor();
  const Tensor* bias = ctx.has_input(2) && ctx.input(2)->is_tensor() ? &ctx.input(2)->tensor() : nullptr;
  if (ctx.has_input(2) && !bias) return RunReference(ctx);
  if (!IsPerInnerElement(scale, inner_dims) || (bias && !IsPerInnerElement(*bias, inner_dims))) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-5f));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const int64_t inner = ProductOf(inner_dims);
  const float* px = x->data<float>();
  const float* gamma = scale.data<float>();
  const float* beta = bias ? bias->data<float>() : nullptr;
  float* py = y.data<float>();
  ctx.ParallelFor(x->num_elements() / inner, std::max<int64_t>(1, kMinChunk / inner), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) LayerNormRow(px + r * inner, py + r * inner, inner, epsilon, gamma, beta);
  });
  return Status::Ok();
}

Status SkipLayerNormFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* skip, ctx.InputTensor(1));
  if (x->dtype() != DataType::kFloat || skip->dtype() != DataType::kFloat || !CpuHasAvx2Fma() ||
      ctx.wants_output(1) || ctx.wants_output(2) || x->rank() < 1 || x->num_elements() == 0)
    return RunReference(ctx);
  const int64_t hidden = x->dims().back();
  // skip: x's shape or its trailing dims (leading 1s aside), repeated over the rest.
  std::vector<int64_t> skip_dims = skip->dims();
  while (skip_dims.size() > 1 && skip_dims.front() == 1) skip_dims.erase(skip_dims.begin());
  if (skip_dims.size() > x->dims().size() || skip->num_elements() == 0 ||
      !std::equal(skip_dims.begin(), skip_dims.end(), x->dims().end() - static_cast<std::ptrdiff_t>(skip_dims.size())) ||
      skip_dims.empty() || skip_dims.back() != hidden)
    return RunReference(ctx);
  bool ok = ctx.has_input(2);
  const float* gamma = ChannelVector(ctx, 2, hidden, &ok);
  const float* beta = ChannelVector(ctx, 3, hidden, &ok);
  const float* bias = ChannelVector(ctx, 4, hidden, &ok);
  if (!ok) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(float epsilon, ctx.node().GetFloat("epsilon", 1e-12f));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  float* sums = nullptr;
  if (ctx.wants_output(3)) {
    NEE_ASSIGN_OR_RETURN(Tensor s, ctx.AllocateOutputForOverwrite(3, DataType::kFloat, x->dims()));
    sums = s.data<float>();
  }
  const float* px = x->data<float>();
  const float* pskip = skip->data<float>();
  const int64_t skip_count = skip->num_elements();
  float* py = y.data<float>();
  ctx.ParallelFor(x->num_elements() / hidden, std::max<int64_t>(1, kMinChunk / hidden), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(sums ? 0 : static_cast<size_t>(hidden));
    for (int64_t r = begin; r < end; ++r) {
      float* s = sums ? sums + r * hidden : scratch.data();
      SkipSumAvx2(px + r * hidden, pskip + (r * hidden) % skip_count, bias, s, hidden);
      LayerNormRow(s, py + r * hidden, hidden, epsilon, gamma, beta);
    }
  });
  return Status::Ok();
}

#else
Status LayerNormFloat(KernelContext& ctx) { return RunReference(ctx); }
Status SkipLayerNormFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
