// QLinearMatMul (opsets 10 and 21) on the integer GEMM. The int32 product is
// MatMulInteger's, exact (quant_matmul.h: the constant B packed once per
// session, u8 x s8 on VNNI/AVX2 or widened), then each row is requantized as
// the reference (ops/quantize.cc) does it: v = C * M_j + y_zp in double, with
// M_j = float(float(a_scale * b_scale[j]) / y_scale) (numpy's float32 steps),
// rounded to nearest even and saturated — by one float fma per element where
// RoundingFmaExact proves that the same (rounding_fma.h). So the output is
// bitwise the reference's at any thread count.
//
// Taken: 8-bit a, b and y; float32 scales; a's scale and zero point per
// tensor, b's per tensor or per column; a 2-D b; finite multipliers. Anything
// else (per-row a scales, batched b, other types, malformed inputs) goes to
// the reference, which also reports the errors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ep/cpu/conv_int_geometry.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/quant_matmul.h"
#include "ep/cpu/rounding_fma.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/simd_x86.h"
#define NEE_QLINEAR_MATMUL_X86 1
#endif

namespace nee::cpu {
namespace {

using quant_matmul::GetQuantWeights;
using quant_matmul::QuantProduct;
using quant_matmul::QuantWeights;
using quant_matmul::ReadZeroPoint;

// How one row of C becomes 8-bit output.
struct Requant {
  const double* multiplier;  // per column (n entries)
  double zero_point;
  double lo, hi;             // the output type's range
  bool is_signed;
  const float* multiplier_f = nullptr;  // the same as floats, where one fma is exact for every column (RoundingFma)
};

void RequantRowScalar(const Requant& r, const int32_t* c, int64_t j0, int64_t n, void* y) {
  for (int64_t j = j0; j < n; ++j) {
    const double v = std::clamp(std::nearbyint(static_cast<double>(c[j]) * r.multiplier[j] + r.zero_point), r.lo, r.hi);
    if (r.is_signed) static_cast<int8_t*>(y)[j] = static_cast<int8_t>(v);
    else static_cast<uint8_t*>(y)[j] = static_cast<uint8_t>(v);
  }
}

#ifdef NEE_QLINEAR_MATMUL_X86
// Four columns at a time: the same double multiply, add and round to
// nearest even as the scalar loop (no FMA: the product is rounded first, as
// there), then min/max within the range (already integers, so the narrowing
// packs never saturate).
__attribute__((target("avx2"))) void RequantRowAvx2(const Requant& r, const int32_t* c, int64_t n, void* y) {
  const __m256d zp = _mm256_set1_pd(r.zero_point), lo = _mm256_set1_pd(r.lo), hi = _mm256_set1_pd(r.hi);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const __m256d prod = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + j))),
                                       _mm256_loadu_pd(r.multiplier + j));
    const __m256d v = _mm256_round_pd(_mm256_add_pd(prod, zp), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i q = _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(v, lo), hi));
    const __m128i q16 = _mm_packs_epi32(q, q);
    const __m128i q8 = r.is_signed ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
    const int32_t four = _mm_cvtsi128_si32(q8);
    std::memcpy(static_cast<uint8_t*>(y) + j, &four, sizeof four);
  }
  RequantRowScalar(r, c, j, n, y);
}

// Eight columns at a time by one fma each (RoundingFma8), where planning proved it gives the reference's
// integers (Requant::multiplier_f), then narrowed with saturation: the same bytes as RequantRowAvx2 at a third
// of its work (the double path converts four lanes at a time and rounds, adds, clamps them in double).
__attribute__((target("avx2,fma"))) void RequantRowOneFmaAvx2(const Requant& r, const int32_t* c, int64_t n,
                                                             void* y) {
  const __m256 biased = _mm256_set1_ps(static_cast<float>(r.zero_point) + kRoundingBias);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i v = RoundingFma8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + j)),
                                   _mm256_loadu_ps(r.multiplier_f + j), biased);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i b8 = r.is_signed ? _mm_packs_epi16(w16, w16) : _mm_packus_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + j), b8);
  }
  RequantRowScalar(r, c, j, n, y);
}
#endif

void RequantRow(const Requant& r, const int32_t* c, int64_t n, void* y) {
#ifdef NEE_QLINEAR_MATMUL_X86
  if (CpuHasAvx2Fma() && !SgemmPortableForced())
    return r.multiplier_f ? RequantRowOneFmaAvx2(r, c, n, y) : RequantRowAvx2(r, c, n, y);
#endif
  RequantRowScalar(r, c, 0, n, y);
}

// A float32 scale input with one value or `count` values; null otherwise.
const Tensor* ScaleInput(const KernelContext& ctx, size_t index, int64_t count) {
  const Value* v = ctx.has_input(index) ? ctx.input(index) : nullptr;
  if (!v || !v->is_tensor()) return nullptr;
  const Tensor& t = v->tensor();
  if (t.dtype() != DataType::kFloat || t.rank() > 1) return nullptr;
  return t.num_elements() == 1 || t.num_elements() == count ? &t : nullptr;
}

}  // namespace

Status QLinearMatMulFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(3));
  if (!ctx.has_input(7) || !Is8Bit(a->dtype()) || !Is8Bit(b->dtype()) || a->rank() < 1 || b->rank() != 2)
    return RunReference(ctx);
  const int64_t k = a->dims().back(), n = b->dim(1);
  const Tensor* a_scale = ScaleInput(ctx, 1, 1);
  const Tensor* b_scale = ScaleInput(ctx, 4, n);
  const Tensor* y_scale = ScaleInput(ctx, 6, 1);
  NEE_ASSIGN_OR_RETURN(const Tensor* y_zp, ctx.InputTensor(7));
  if (b->dim(0) != k || !a_scale || !b_scale || !y_scale || !Is8Bit(y_zp->dtype()) || y_zp->num_elements() != 1)
    return RunReference(ctx);
  std::vector<int32_t> za, zb;
  int64_t za_stride = 0, zb_stride = 0;
  if (!ctx.has_input(2) || !ctx.has_input(5) || !ReadZeroPoint(ctx, 2, a->dtype(), 1, false, za, za_stride) ||
      !ReadZeroPoint(ctx, 5, b->dtype(), n, true, zb, zb_stride))
    return RunReference(ctx);
  // M_j as the reference computes it: float32 product, then float32 quotient. One fma a column requantizes
  // where that is exact for every sum the bytes allow: |a - za| and |b - zb| are at most 255.
  const double sa = a_scale->data<float>()[0], sy = y_scale->data<float>()[0], yzp = ReadAsDouble(*y_zp, 0);
  const double largest_sum = 65025.0 * static_cast<double>(k);
  std::vector<double> multiplier(static_cast<size_t>(n));
  std::vector<float> multiplier_f(static_cast<size_t>(n));
  bool one_fma = true;
  for (int64_t j = 0; j < n; ++j) {
    const double sb = b_scale->data<float>()[b_scale->num_elements() == 1 ? 0 : j];
    const double ab = static_cast<float>(sa * sb);
    const double m = static_cast<float>(ab / sy);
    if (!std::isfinite(m)) return RunReference(ctx);
    multiplier[static_cast<size_t>(j)] = m;
    multiplier_f[static_cast<size_t>(j)] = static_cast<float>(m);
    one_fma = one_fma && RoundingFmaExact(m, static_cast<float>(m), yzp, largest_sum);
  }
  std::vector<int64_t> out_dims(a->dims().begin(), a->dims().end() - 1);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, y_zp->dtype(), out_dims));
  const int64_t rows = ProductOf(a->dims(), 0, a->dims().size() - 1);
  if (rows == 0 || n == 0) return Status::Ok();
  const bool y_signed = y_zp->dtype() == DataType::kInt8;
  const Requant r{multiplier.data(), yzp, y_signed ? -128.0 : 0.0, y_signed ? 127.0 : 255.0, y_signed,
                  one_fma ? multiplier_f.data() : nullptr};
  // The calling thread's grow-only buffer (a vector per call was mapped and
  // page-faulted afresh each run). k == 0: every sum is 0.
  thread_local std::vector<int32_t> t_c;
  if (t_c.size() < static_cast<size_t>(rows * n)) t_c.resize(static_cast<size_t>(rows * n));
  int32_t* c = t_c.data();
  if (k == 0) std::fill(c, c + rows * n, 0);
  if (k > 0) {
    std::shared_ptr<const QuantWeights> w = GetQuantWeights(ctx, 3, *b, k, n, a->dtype() == DataType::kUint8);
    QuantProduct(ctx, *a, rows, k, *w, za.data(), 0, zb.data(), zb_stride, c, n, nullptr);
  }
  uint8_t* out = static_cast<uint8_t*>(y.raw_data());
  ctx.ParallelFor(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) RequantRow(r, c + i * n, n, out + i * n);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
