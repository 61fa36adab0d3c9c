// Cast between float32 and the two 16-bit floats (float16, bfloat16), the
// conversions the widened narrow-float graphs (opt/widen_narrow_float.cc) run
// around every widened node. Bitwise the reference (ir/float_formats.h):
//   float16 <-> float: F16C's vcvtph2ps / vcvtps2ph (round to nearest even,
//     exact widening, subnormals kept). NaN is the one place where F16C and
//     the reference differ (F16C quiets a signalling NaN, the reference keeps
//     numpy's payload), so a block of 8 holding a NaN goes through the scalar
//     conversion.
//   bfloat16 -> float: a 16-bit shift; float -> bfloat16: the reference's
//     integer rounding (add 0x7fff plus the kept lowest bit, shift), its NaN
//     (0x7fc0 with the input's sign) blended in, in AVX2 integer lanes.
// Every other pair of types, and machines without AVX2/F16C, go to the
// reference. Elements are independent, so the split between threads never
// changes a result.
#include <cstring>

#include "base/cpu_isa.h"
#include "ep/cpu/cpu_kernels.h"
#include "ir/float_formats.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nee::cpu {
namespace {

constexpr int64_t kMinChunk = 1 << 15;  // elements per task

enum class CastPath { kHalfToFloat, kFloatToHalf, kBFloat16ToFloat, kFloatToBFloat16 };

void ScalarCast(CastPath path, const void* src, void* dst, int64_t n) {
  const float* f = static_cast<const float*>(src);
  const uint16_t* h = static_cast<const uint16_t*>(src);
  float* fo = static_cast<float*>(dst);
  uint16_t* ho = static_cast<uint16_t*>(dst);
  switch (path) {
    case CastPath::kHalfToFloat:
      for (int64_t i = 0; i < n; ++i) fo[i] = HalfToFloat(h[i]);
      break;
    case CastPath::kFloatToHalf:
      for (int64_t i = 0; i < n; ++i) ho[i] = FloatToHalf(f[i]);
      break;
    case CastPath::kBFloat16ToFloat:
      for (int64_t i = 0; i < n; ++i) fo[i] = BFloat16ToFloat(h[i]);
      break;
    case CastPath::kFloatToBFloat16:
      for (int64_t i = 0; i < n; ++i) ho[i] = FloatToBFloat16(f[i]);
      break;
  }
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,f16c"))) void HalfToFloatAvx2(const uint16_t* x, float* y, int64_t n) {
  const __m128i magnitude = _mm_set1_epi16(0x7fff);
  const __m128i inf = _mm_set1_epi16(0x7c00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    // NaN: magnitude above Inf's (signed compare is right: both are below 0x8000).
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, magnitude), inf);
    if (_mm_movemask_epi8(nan)) {
      ScalarCast(CastPath::kHalfToFloat, x + i, y + i, 8);
      continue;
    }
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  ScalarCast(CastPath::kHalfToFloat, x + i, y + i, n - i);
}

__attribute__((target("avx2,f16c"))) void FloatToHalfAvx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q))) {
      ScalarCast(CastPath::kFloatToHalf, x + i, y + i, 8);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  ScalarCast(CastPath::kFloatToHalf, x + i, y + i, n - i);
}

__attribute__((target("avx2"))) void BFloat16ToFloatAvx2(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_slli_epi32(wide, 16));
  }
  ScalarCast(CastPath::kBFloat16ToFloat, x + i, y + i, n - i);
}

// 8 floats to bfloat16 bits in the low 16 bits of each 32-bit lane.
__attribute__((target("avx2"), always_inline)) inline __m256i RoundToBFloat16(__m256i u) {
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lowest_kept)), 16);
  const __m256i quiet =
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)), _mm256_set1_epi32(0x7fc0));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

__attribute__((target("avx2"))) void FloatToBFloat16Avx2(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = RoundToBFloat16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m256i hi = RoundToBFloat16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)));
    // packus works within 128-bit lanes: lo0 hi0 lo1 hi1 -> reorder the quarters.
    const __m256i packed = _mm256_packus_epi32(lo, hi);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permute4x64_epi64(packed, 0xd8));
  }
  ScalarCast(CastPath::kFloatToBFloat16, x + i, y + i, n - i);
}

void VectorCast(CastPath path, const void* src, void* dst, int64_t n) {
  switch (path) {
    case CastPath::kHalfToFloat:
      return HalfToFloatAvx2(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
    case CastPath::kFloatToHalf:
      return FloatToHalfAvx2(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
    case CastPath::kBFloat16ToFloat:
      return BFloat16ToFloatAvx2(static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
    case CastPath::kFloatToBFloat16:
      return FloatToBFloat16Avx2(static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
  }
}
#endif

// The fast path for (from, to), or false when the reference should run.
bool FindCastPath(DataType from, DataType to, CastPath* path) {
  if (from == DataType::kFloat16 && to == DataType::kFloat) *path = CastPath::kHalfToFloat;
  else if (from == DataType::kFloat && to == DataType::kFloat16) *path = CastPath::kFloatToHalf;
  else if (from == DataType::kBFloat16 && to == DataType::kFloat) *path = CastPath::kBFloat16ToFloat;
  else if (from == DataType::kFloat && to == DataType::kBFloat16) *path = CastPath::kFloatToBFloat16;
  else return false;
  return true;
}

}  // namespace

// bool -> float32 (a one-hot mask before a MatMul: magika's [1, 2048, 257]
// took 1.2 ms through the reference's per-element dispatch): 0 or 1, which is
// what the reference's static_cast gives.
static Status CastBoolToFloat(KernelContext& ctx, const Tensor& x) {
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x.dims()));
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  float* dst = out.data<float>();
  ctx.ParallelFor(x.num_elements(), kMinChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = src[i] != 0 ? 1.f : 0.f;
  });
  return Status::Ok();
}

Status CastFast(KernelContext& ctx) {
  const Attribute* to_attr = ctx.node().FindAttr("to");
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (to_attr && to_attr->type == AttrType::kInt && static_cast<DataType>(to_attr->i) == DataType::kFloat &&
      x->dtype() == DataType::kBool)
    return CastBoolToFloat(ctx, *x);
#if defined(__x86_64__) || defined(__i386__)
  CastPath path;
  // A string-valued 'to' (a nee extension) and every other pair: the reference.
  if (!HostHasF16c() || !to_attr || to_attr->type != AttrType::kInt ||
      !FindCastPath(x->dtype(), static_cast<DataType>(to_attr->i), &path))
    return RunReference(ctx);
  const DataType to = static_cast<DataType>(to_attr->i);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, to, x->dims()));
  const char* src = static_cast<const char*>(x->raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const size_t in_size = x->dtype() == DataType::kFloat ? 4 : 2, out_size = to == DataType::kFloat ? 4 : 2;
  ctx.ParallelFor(x->num_elements(), kMinChunk, [&](int64_t begin, int64_t end) {
    VectorCast(path, src + begin * in_size, dst + begin * out_size, end - begin);
  });
  return Status::Ok();
#else
  return RunReference(ctx);
#endif
}

}  // namespace nee::cpu
