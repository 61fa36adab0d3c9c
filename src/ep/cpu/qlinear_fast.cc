// com.microsoft QLinearAdd (same shapes), QLinearGlobalAveragePool and QGemm, which the QDQ fusion
// (opt/fuse_qdq_conv.cc) writes between quantized convolutions and for a classifier's Gemm: bitwise the
// reference kernels (ops/quantize_contrib.cc). QLinearAdd as the reference's float operations eight lanes at a time,
// without contraction; QGemm as MatMulInteger's exact product (quant_matmul.h), then the reference's float
// requantization of each element. (QLinearMul and the table ops: qlinear_pointwise_fast.cc.)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "ep/cpu/conv_int_geometry.h"  // Is8Bit
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/no_fp_contract.h"
#include "ep/cpu/qlinear_common.h"
#include "ep/cpu/qconv_requant_avx512.h"
#include "ep/cpu/qgemm_gemv.h"
#include "ep/cpu/quant_matmul.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QLINEAR_X86 1
#endif

// The float steps below must round as the reference's separate operations do (NEE_NO_FP_CONTRACT).

namespace nee::cpu {

namespace {

NEE_NO_FP_CONTRACT void AddRangePortable(const uint8_t* a, const uint8_t* b, int64_t n, bool is_signed,
                                         const Quant8& qa, const Quant8& qb, float ra, float rb, int32_t zc,
                                         uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t av = is_signed ? static_cast<int8_t>(a[i]) : a[i], bv = is_signed ? static_cast<int8_t>(b[i]) : b[i];
    const float va = static_cast<float>(av - qa.zero_point), vb = static_cast<float>(bv - qb.zero_point);
    const float prod_a = ra * va, prod_b = rb * vb;
    y[i] = static_cast<uint8_t>(Store8(prod_a + prod_b, zc, is_signed));
  }
}

#ifdef NEE_QLINEAR_X86
// Eight at a time: the same float operations (no FMA in this target), nearest-even rounding, saturation.
__attribute__((target("avx2"))) void AddRangeAvx2(const uint8_t* a, const uint8_t* b, int64_t n, bool is_signed,
                                                  const Quant8& qa, const Quant8& qb, float ra, float rb, int32_t zc,
                                                  uint8_t* y) {
  const __m256i za = _mm256_set1_epi32(qa.zero_point), zb = _mm256_set1_epi32(qb.zero_point);
  const __m256 vra = _mm256_set1_ps(ra), vrb = _mm256_set1_ps(rb), vzc = _mm256_set1_ps(static_cast<float>(zc));
  const __m256 lo = _mm256_set1_ps(is_signed ? -128.0f : 0.0f), hi = _mm256_set1_ps(is_signed ? 127.0f : 255.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i a8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + i));
    const __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + i));
    const __m256i ai = is_signed ? _mm256_cvtepi8_epi32(a8) : _mm256_cvtepu8_epi32(a8);
    const __m256i bi = is_signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8);
    const __m256 va = _mm256_cvtepi32_ps(_mm256_sub_epi32(ai, za)), vb = _mm256_cvtepi32_ps(_mm256_sub_epi32(bi, zb));
    __m256 v = _mm256_add_ps(_mm256_mul_ps(vra, va), _mm256_mul_ps(vrb, vb));
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, vzc), lo), hi);
    const __m256i r = _mm256_cvtps_epi32(v);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    const __m128i b16 = is_signed ? _mm_packs_epi16(w16, w16) : _mm_packus_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), b16);
  }
  AddRangePortable(a + i, b + i, n - i, is_signed, qa, qb, ra, rb, zc, y + i);
}

// AddRangeAvx2 where every |sum| is below 2^30 (AddRangeAvx512<true>'s argument: vcvtps2dq rounds to nearest
// even into int32 exactly, the packs saturate as the clamp does), 32 at a time with fewer operations than
// converting each input by vpmovzxbd + vpsubd + vcvtdq2ps: the bytes (int8 flipped by 128 into 0..255) are
// interleaved with 0x4B00 into the float 2^23 + byte, and one subtraction of 2^23 + zero point (+ 128) gives
// the difference exactly (both lie in [2^23, 2^24), where floats are the integers). The zero point of the
// output is added after narrowing to int16 with saturation: a saturated int16 stays out of the 8-bit range
// after adding |zc| <= 255, so the final pack saturates it as the reference's clamp does. Unpacking and packing
// within 128-bit lanes undo each other, so the bytes come out in order. 15% fewer cycles than the
// vpmovzxbd form (0.15 vs 0.175 ns per element on Zen 3, 800K elements).
struct AddSmallConsts {
  __m256i magic_hi, flip, zc16;
  __m256 offset_a, offset_b, ra, rb;
};

__attribute__((target("avx2"))) inline __m256 DequantHalf(__m256i words, bool high, __m256 offset, __m256 ratio,
                                                          __m256i magic_hi) {
  const __m256i bits = high ? _mm256_unpackhi_epi16(words, magic_hi) : _mm256_unpacklo_epi16(words, magic_hi);
  return _mm256_mul_ps(ratio, _mm256_sub_ps(_mm256_castsi256_ps(bits), offset));
}

// Sixteen sums of a's and b's words (bytes widened to 16 bits) rounded and narrowed to int16 plus zc.
__attribute__((target("avx2"))) inline __m256i AddSmall16(__m256i a_words, __m256i b_words, const AddSmallConsts& k) {
  const __m256i lo = _mm256_cvtps_epi32(_mm256_add_ps(DequantHalf(a_words, false, k.offset_a, k.ra, k.magic_hi),
                                                      DequantHalf(b_words, false, k.offset_b, k.rb, k.magic_hi)));
  const __m256i hi = _mm256_cvtps_epi32(_mm256_add_ps(DequantHalf(a_words, true, k.offset_a, k.ra, k.magic_hi),
                                                      DequantHalf(b_words, true, k.offset_b, k.rb, k.magic_hi)));
  return _mm256_adds_epi16(_mm256_packs_epi32(lo, hi), k.zc16);
}

__attribute__((target("avx2"))) void AddRangeAvx2Small(const uint8_t* a, const uint8_t* b, int64_t n, bool is_signed,
                                                       const Quant8& qa, const Quant8& qb, float ra, float rb,
                                                       int32_t zc, uint8_t* y) {
  AddSmallConsts k;
  const float base = 8388608.0f + (is_signed ? 128.0f : 0.0f);  // 2^23, plus the flip's 128
  k.magic_hi = _mm256_set1_epi16(0x4B00);
  k.flip = _mm256_set1_epi8(is_signed ? static_cast<char>(0x80) : 0);
  k.zc16 = _mm256_set1_epi16(static_cast<int16_t>(zc));
  k.offset_a = _mm256_set1_ps(base + static_cast<float>(qa.zero_point));
  k.offset_b = _mm256_set1_ps(base + static_cast<float>(qb.zero_point));
  k.ra = _mm256_set1_ps(ra), k.rb = _mm256_set1_ps(rb);
  const __m256i zero = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i av = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)), k.flip);
    const __m256i bv = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)), k.flip);
    const __m256i w0 = AddSmall16(_mm256_unpacklo_epi8(av, zero), _mm256_unpacklo_epi8(bv, zero), k);
    const __m256i w1 = AddSmall16(_mm256_unpackhi_epi8(av, zero), _mm256_unpackhi_epi8(bv, zero), k);
    const __m256i bytes = is_signed ? _mm256_packs_epi16(w0, w1) : _mm256_packus_epi16(w0, w1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), bytes);
  }
  AddRangeAvx2(a + i, b + i, n - i, is_signed, qa, qb, ra, rb, zc, y + i);
}

// Whether the sixteen-lane form runs: AVX-512 F on the CPU and the ISA limit at AVX-512.
bool AddAvx512Active() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && SgemmActiveIsa() == SgemmIsa::kAvx512 && !SgemmPortableForced();
}
// And BW as well, for AddRangeAvx512Small's byte interleaves and packs.
bool AddAvx512BwActive() {
  static const bool has = __builtin_cpu_supports("avx512bw");
  return has && AddAvx512Active();
}

// GCC 12 warns about the self-initialized _mm512_undefined_* inside its own intrinsics once they are inlined
// here (a false positive, as activation_fast.cc notes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// AddRangeAvx2's operations on sixteen lanes: the same float products and sum (the _round forms, which are
// never contracted into an FMA), nearest-even rounding (vrndscaleps, no fraction bits), zero point and clamp,
// so the same bytes. The clamped values are integers in the output type's range: vpmov(u)sdb narrows them as
// they are.
#define NEE_QLINEAR_AVX512 __attribute__((target("avx512f")))
struct AddAvx512Consts {
  __m512i za, zb, zc_int;
  __m512 ra, rb, zc, lo, hi;
};

NEE_QLINEAR_AVX512 inline __m512 Dequant16(const uint8_t* p, __m512i zp, __m512 ratio, bool is_signed) {
  constexpr int kCur = _MM_FROUND_CUR_DIRECTION;
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m512i wide = is_signed ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
  return _mm512_mul_round_ps(ratio, _mm512_cvtepi32_ps(_mm512_sub_epi32(wide, zp)), kCur);
}

// kSmall: every |sum| is below 2^30 (AddRangeAvx512's caller checks the ratios), so vcvtps2dq rounds it (to
// nearest even, as nearbyint) into int32 exactly, the zero point is added in int32 and the narrowing saturates:
// the reference's float add of the zero point is exact below 2^24, and from there on both land on the same end
// of the range. Two vector operations fewer than rounding, adding, clamping and converting in float.
template <bool kSmall>
NEE_QLINEAR_AVX512 inline void Add16(const uint8_t* a, const uint8_t* b, const AddAvx512Consts& k, bool is_signed,
                                     uint8_t* y) {
  constexpr int kCur = _MM_FROUND_CUR_DIRECTION;
  __m512 v = _mm512_add_round_ps(Dequant16(a, k.za, k.ra, is_signed), Dequant16(b, k.zb, k.rb, is_signed), kCur);
  __m512i r;
  if constexpr (kSmall) {
    r = _mm512_add_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), k.zc_int);
    if (!is_signed) r = _mm512_max_epi32(r, _mm512_setzero_si512());
  } else {
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(_mm512_add_round_ps(v, k.zc, kCur), k.lo), k.hi);
    r = _mm512_cvtps_epi32(v);
  }
  __m128i bytes = is_signed ? _mm512_cvtsepi32_epi8(r) : _mm512_cvtusepi32_epi8(r);
  // vpmovdb into a register, then a store: its store form is far slower on Zen 4 (qconv_vnni.cc).
  __asm__("" : "+v"(bytes));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), bytes);
}

template <bool kSmall>
NEE_QLINEAR_AVX512 void AddRangeAvx512(const uint8_t* a, const uint8_t* b, int64_t n, bool is_signed,
                                       const Quant8& qa, const Quant8& qb, float ra, float rb, int32_t zc,
                                       uint8_t* y) {
  AddAvx512Consts k;
  k.za = _mm512_set1_epi32(qa.zero_point), k.zb = _mm512_set1_epi32(qb.zero_point);
  k.ra = _mm512_set1_ps(ra), k.rb = _mm512_set1_ps(rb), k.zc = _mm512_set1_ps(static_cast<float>(zc));
  k.zc_int = _mm512_set1_epi32(zc);
  k.lo = _mm512_set1_ps(is_signed ? -128.0f : 0.0f), k.hi = _mm512_set1_ps(is_signed ? 127.0f : 255.0f);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    Add16<kSmall>(a + i, b + i, k, is_signed, y + i);
    Add16<kSmall>(a + i + 16, b + i + 16, k, is_signed, y + i + 16);
  }
  for (; i + 16 <= n; i += 16) Add16<kSmall>(a + i, b + i, k, is_signed, y + i);
  AddRangeAvx2(a + i, b + i, n - i, is_signed, qa, qb, ra, rb, zc, y + i);
}

// AddRangeAvx2Small's arithmetic on AVX-512 BW, 64 bytes a step (AddRangeAvx512<true>'s conditions: every |sum|
// below 2^30): each input byte becomes the float 2^23 + byte by two interleaves with zero and 0x4B00, where
// vpmovzxbd and vcvtdq2ps take one operation each per sixteen; the products and the sum by the _round forms
// (never contracted into an FMA); the narrowing by two saturating packs per 32, where vpmovusdb takes two
// operations per sixteen on Zen 4. Interleaves and packs stay within 128-bit lanes and undo each other, so the
// bytes come out in order. The same bits as AddRangeAvx512<true>.
#define NEE_QLINEAR_AVX512BW __attribute__((target("avx512f,avx512bw")))
struct AddSmall64Consts {
  __m512i magic_hi, zc16;
  __m512 offset_a, offset_b, ra, rb;
};

NEE_QLINEAR_AVX512BW inline __m512 DequantQuarter(__m512i words, bool high, __m512 offset, __m512 ratio,
                                                  __m512i magic_hi) {
  constexpr int kCur = _MM_FROUND_CUR_DIRECTION;
  const __m512i bits = high ? _mm512_unpackhi_epi16(words, magic_hi) : _mm512_unpacklo_epi16(words, magic_hi);
  return _mm512_mul_round_ps(ratio, _mm512_sub_round_ps(_mm512_castsi512_ps(bits), offset, kCur), kCur);
}

// 32 sums of a's and b's words (bytes widened to 16 bits), rounded and narrowed to int16 plus zc.
NEE_QLINEAR_AVX512BW inline __m512i AddSmall32(__m512i a_words, __m512i b_words, const AddSmall64Consts& k) {
  constexpr int kCur = _MM_FROUND_CUR_DIRECTION, kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 lo = _mm512_add_round_ps(DequantQuarter(a_words, false, k.offset_a, k.ra, k.magic_hi),
                                        DequantQuarter(b_words, false, k.offset_b, k.rb, k.magic_hi), kCur);
  const __m512 hi = _mm512_add_round_ps(DequantQuarter(a_words, true, k.offset_a, k.ra, k.magic_hi),
                                        DequantQuarter(b_words, true, k.offset_b, k.rb, k.magic_hi), kCur);
  const __m512i packed =
      _mm512_packs_epi32(_mm512_cvt_roundps_epi32(lo, kNearest), _mm512_cvt_roundps_epi32(hi, kNearest));
  return _mm512_adds_epi16(packed, k.zc16);
}

NEE_QLINEAR_AVX512BW void AddRangeAvx512Small(const uint8_t* a, const uint8_t* b, int64_t n, bool is_signed,
                                              const Quant8& qa, const Quant8& qb, float ra, float rb, int32_t zc,
                                              uint8_t* y) {
  AddSmall64Consts k;
  const float base = 8388608.0f + (is_signed ? 128.0f : 0.0f);  // 2^23, plus the flip's 128
  k.magic_hi = _mm512_set1_epi16(0x4B00);
  k.zc16 = _mm512_set1_epi16(static_cast<int16_t>(zc));
  k.offset_a = _mm512_set1_ps(base + static_cast<float>(qa.zero_point));
  k.offset_b = _mm512_set1_ps(base + static_cast<float>(qb.zero_point));
  k.ra = _mm512_set1_ps(ra), k.rb = _mm512_set1_ps(rb);
  const __m512i flip = _mm512_set1_epi8(is_signed ? static_cast<char>(0x80) : 0), zero = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i av = _mm512_xor_si512(_mm512_loadu_si512(a + i), flip);
    const __m512i bv = _mm512_xor_si512(_mm512_loadu_si512(b + i), flip);
    const __m512i w0 = AddSmall32(_mm512_unpacklo_epi8(av, zero), _mm512_unpacklo_epi8(bv, zero), k);
    const __m512i w1 = AddSmall32(_mm512_unpackhi_epi8(av, zero), _mm512_unpackhi_epi8(bv, zero), k);
    _mm512_storeu_si512(y + i, is_signed ? _mm512_packs_epi16(w0, w1) : _mm512_packus_epi16(w0, w1));
  }
  AddRangeAvx512<true>(a + i, b + i, n - i, is_signed, qa, qb, ra, rb, zc, y + i);
}
#undef NEE_QLINEAR_AVX512BW
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

// QLinearAdd of two tensors of one shape (broadcasting goes to the reference).
Status QLinearAddFast(KernelContext& ctx) {
  const Tensor *pa = nullptr, *pb = nullptr;
  Quant8 qa, qb, qc;
  if (!ReadQLinearBinary(ctx, &pa, &pb, &qa, &qb, &qc) || pa->dims() != pb->dims()) return RunReference(ctx);
  const Tensor& a = *pa;
  const Tensor& b = *pb;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, a.dtype(), a.dims()));
  const float ra = qa.scale / qc.scale, rb = qb.scale / qc.scale;
  // Beyond this a product could overflow to infinity and a sum be NaN, which the vector path rounds differently.
  if (!(std::fabs(ra) < 1e30f) || !(std::fabs(rb) < 1e30f)) return RunReference(ctx);
  const bool is_signed = a.dtype() == DataType::kInt8;
  const auto* ap = static_cast<const uint8_t*>(a.raw_data());
  const auto* bp = static_cast<const uint8_t*>(b.raw_data());
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  const bool avx2 = IgemmU8S8Available();
#ifdef NEE_QLINEAR_X86
  const bool avx512 = avx2 && AddAvx512Active(), avx512bw = avx512 && AddAvx512BwActive();
  // |sum| <= (|ra| + |rb|) * 255 (each difference from a zero point is at most 255), plus its roundings.
  const bool small = (std::fabs(static_cast<double>(ra)) + std::fabs(static_cast<double>(rb))) * 256.0 < 0x1p30;
#endif
  ctx.ParallelFor((a.num_elements() + 4095) / 4096, 4, [&](int64_t begin, int64_t end) {
    const int64_t i0 = begin * 4096, n = std::min(end * 4096, a.num_elements()) - i0;
#ifdef NEE_QLINEAR_X86
    if (avx512bw && small)
      return AddRangeAvx512Small(ap + i0, bp + i0, n, is_signed, qa, qb, ra, rb, qc.zero_point, yp + i0);
    if (avx512 && small)
      return AddRangeAvx512<true>(ap + i0, bp + i0, n, is_signed, qa, qb, ra, rb, qc.zero_point, yp + i0);
    if (avx512) return AddRangeAvx512<false>(ap + i0, bp + i0, n, is_signed, qa, qb, ra, rb, qc.zero_point, yp + i0);
    if (avx2 && small)
      return AddRangeAvx2Small(ap + i0, bp + i0, n, is_signed, qa, qb, ra, rb, qc.zero_point, yp + i0);
    if (avx2) return AddRangeAvx2(ap + i0, bp + i0, n, is_signed, qa, qb, ra, rb, qc.zero_point, yp + i0);
#endif
    AddRangePortable(ap + i0, bp + i0, n, is_signed, qa, qb, ra, rb, qc.zero_point, yp + i0);
  });
  (void)avx2;
  return Status::Ok();
}

namespace {

// The bytes of a plane (flipped by `flip`: int8 made unsigned) summed: 64 at a time by vpsadbw, the last
// ones by a masked load.
#ifdef NEE_QLINEAR_X86
NEE_QCONV_AVX512_WARNINGS_OFF
__attribute__((target("avx512f,avx512bw"))) int64_t SumBytesAvx512(const uint8_t* p, int64_t n, uint8_t flip) {
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip)), zero = _mm512_setzero_si512();
  __m512i acc = zero;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(p + i), f), zero));
  if (i < n) {
    const __mmask64 m = (__mmask64{1} << (n - i)) - 1;
    // Masked-out lanes load as 0 and are flipped like the rest: their flips are taken off below.
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(_mm512_xor_si512(_mm512_maskz_loadu_epi8(m, p + i), f), zero));
    return _mm512_reduce_add_epi64(acc) - static_cast<int64_t>(flip) * (64 - (n - i));
  }
  return _mm512_reduce_add_epi64(acc);
}
NEE_QCONV_AVX512_WARNINGS_ON

// The same on AVX2, 32 bytes a vpsadbw, the last ones by the plain loop.
__attribute__((target("avx2"))) int64_t SumBytesAvx2(const uint8_t* p, int64_t n, uint8_t flip) {
  const __m256i f = _mm256_set1_epi8(static_cast<char>(flip)), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), f), zero));
  if (i < n && n >= 32) {
    // The last n - i bytes as the 32 ending at n with the ones already summed masked off: one vector
    // instead of a byte loop (MobileNetV2's 7x7 planes: 17 of their 49 bytes).
    static constexpr auto kTail = [] {  // from kTail + r: 32 - r zero bytes, then r of 0xFF
      std::array<uint8_t, 64> t{};
      for (size_t k = 32; k < 64; ++k) t[k] = 0xFF;
      return t;
    }();
    const __m256i keep = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTail.data() + (n - i)));
    const __m256i last = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + n - 32)), f);
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_and_si256(last, keep), zero));
    i = n;
  }
  alignas(32) int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  int64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) sum += static_cast<uint8_t>(p[i] ^ flip);
  return sum;
}
#endif

int64_t SumBytesPortable(const uint8_t* p, int64_t n, uint8_t flip) {
  uint32_t sum = 0;  // at most 2^24 bytes a plane, 255 each: no wrap (larger planes go to the reference)
  for (int64_t i = 0; i < n; ++i) sum += static_cast<uint8_t>(p[i] ^ flip);
  return sum;
}

}  // namespace

// com.microsoft QLinearGlobalAveragePool on NCHW planes (channels_last = 0), as the reference: each plane's
// int64 sum minus zx * image, times one float multiplier x_scale / (y_scale * image), stored as Store8
// rounds. Sums formed by vpsadbw on AVX-512 and AVX2 (int8 as its bytes flipped by 128, 128 * image taken off
// after), else a plain loop; planes split among the threads.
Status QLinearGlobalAveragePoolFast(KernelContext& ctx) {
  for (size_t i : {0, 1, 3})
    if (!ctx.has_input(i) || !ctx.input(i)->is_tensor()) return RunReference(ctx);
  const Tensor& x = ctx.input(0)->tensor();
  Quant8 qx, qy;
  auto channels_last = ctx.node().GetInt("channels_last", 0);
  if (!Is8Bit(x.dtype()) || x.rank() < 3 || !channels_last.ok() || channels_last.value() != 0 ||
      !ReadQuant8(ctx, 1, 2, x.dtype(), &qx) || !ReadQuant8(ctx, 3, 4, x.dtype(), &qy))
    return RunReference(ctx);
  int64_t image = 1;
  for (int64_t d = 2; d < x.rank(); ++d) image *= x.dim(d);
  if (image == 0 || image > (int64_t{1} << 24)) return RunReference(ctx);  // the reference reports empty planes
  std::vector<int64_t> out = x.dims();
  for (int64_t d = 2; d < x.rank(); ++d) out[static_cast<size_t>(d)] = 1;
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), out));
  const bool is_signed = x.dtype() == DataType::kInt8;
  const uint8_t flip = is_signed ? 0x80 : 0;
  const float multiplier = qx.scale / (qy.scale * static_cast<float>(image));
  const int64_t planes = x.dim(0) * x.dim(1), offset = (is_signed ? 128 : 0) + qx.zero_point;
  const auto* xp = static_cast<const uint8_t*>(x.raw_data());
  auto* yp = static_cast<uint8_t*>(y.raw_data());
#ifdef NEE_QLINEAR_X86
  const bool avx512 = AddAvx512Active() && __builtin_cpu_supports("avx512bw");
  const bool avx2 = !avx512 && IgemmU8S8Available();
#else
  const bool avx512 = false;
#endif
  const int64_t per_task = std::max<int64_t>(1, 16384 / image);
  ctx.ParallelFor((planes + per_task - 1) / per_task, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin * per_task; p < std::min(planes, end * per_task); ++p) {
      const uint8_t* plane = xp + p * image;
#ifdef NEE_QLINEAR_X86
      int64_t sum = avx512 ? SumBytesAvx512(plane, image, flip)
                    : avx2 ? SumBytesAvx2(plane, image, flip) : SumBytesPortable(plane, image, flip);
#else
      int64_t sum = SumBytesPortable(plane, image, flip);
#endif
      sum -= offset * image;  // the flips, then the zero point
      yp[p] = static_cast<uint8_t>(Store8(static_cast<float>(sum) * multiplier, qy.zero_point, is_signed));
    }
  });
  return Status::Ok();
}

namespace {

// QGemm's scales and zero points when the fast path takes them (else the reference runs, and reports errors):
// a per tensor, b per tensor or per column (zero point alike), y per tensor or absent (float output).
struct QGemmQuant {
  float a_scale = 1, y_scale = 1, alpha = 1;
  const float* b_scale = nullptr;
  int64_t b_scale_stride = 0;
  std::vector<int32_t> za, zb;
  int64_t zb_stride = 0;
  bool quantized_out = false;
  Quant8 y;
  DataType out_type = DataType::kFloat;
};

bool FloatScalar(const KernelContext& ctx, size_t index, float* v) {
  if (!ctx.has_input(index) || !ctx.input(index)->is_tensor()) return false;
  const Tensor& t = ctx.input(index)->tensor();
  if (t.dtype() != DataType::kFloat || t.num_elements() != 1) return false;
  *v = t.data<float>()[0];
  return true;
}

bool ReadQGemmQuant(const KernelContext& ctx, const Tensor& a, const Tensor& b, int64_t n, QGemmQuant* q) {
  if (!FloatScalar(ctx, 1, &q->a_scale) || !ctx.input(4)->is_tensor()) return false;
  const Tensor& bs = ctx.input(4)->tensor();
  if (bs.dtype() != DataType::kFloat || (bs.num_elements() != 1 && bs.num_elements() != n)) return false;
  q->b_scale = bs.data<float>();
  q->b_scale_stride = bs.num_elements() == 1 ? 0 : 1;
  int64_t za_stride = 0;
  if (!quant_matmul::ReadZeroPoint(ctx, 2, a.dtype(), 1, false, q->za, za_stride) ||
      !quant_matmul::ReadZeroPoint(ctx, 5, b.dtype(), n, true, q->zb, q->zb_stride))
    return false;
  // The reference wants b's zero point of b_scale's size (n == 1 reads either way).
  if (ctx.has_input(5) && ctx.input(5)->tensor().num_elements() != bs.num_elements()) return false;
  auto alpha = ctx.node().GetFloat("alpha", 1.0f);
  if (!alpha.ok()) return false;
  q->alpha = alpha.value();
  q->quantized_out = ctx.has_input(7);
  if (!q->quantized_out) return true;
  q->out_type = ctx.has_input(8) && ctx.input(8)->is_tensor() ? ctx.input(8)->tensor().dtype() : a.dtype();
  return Is8Bit(q->out_type) && ReadQuant8(ctx, 7, 8, q->out_type, &q->y);
}

// C: absent, or int32 holding one value per column ([n] or [1, n]); nullptr when absent, false otherwise.
bool ReadBiasRow(const KernelContext& ctx, int64_t n, const int32_t** c) {
  *c = nullptr;
  if (!ctx.has_input(6)) return true;
  if (!ctx.input(6)->is_tensor()) return false;
  const Tensor& t = ctx.input(6)->tensor();
  const bool row = t.rank() == 1 || (t.rank() == 2 && t.dim(0) == 1);
  if (t.dtype() != DataType::kInt32 || !row || t.dims().back() != n) return false;
  *c = t.data<int32_t>();
  return true;
}

// One row of the product (plus C) as the reference writes it: float(int32 sum) times, per column,
// float(alpha * a_scale * b_scale) / y_scale rounded and saturated (Store8), or that scale alone for float.
NEE_NO_FP_CONTRACT void QGemmRow(const QGemmQuant& q, const int32_t* sums, const int32_t* c, int64_t n,
                                 void* out) {
  const bool is_signed = q.out_type == DataType::kInt8;
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t sum = static_cast<uint32_t>(sums[j]) + (c ? static_cast<uint32_t>(c[j]) : 0u);
    const float accumulated = static_cast<float>(static_cast<int32_t>(sum));
    const float scale = q.alpha * q.a_scale * q.b_scale[j * q.b_scale_stride];
    if (!q.quantized_out) {
      static_cast<float*>(out)[j] = accumulated * scale;
    } else {
      static_cast<uint8_t*>(out)[j] =
          static_cast<uint8_t>(Store8(accumulated * (scale / q.y.scale), q.y.zero_point, is_signed));
    }
  }
}

}  // namespace


// QGemm's B packed once per session when constant: for QGemv when the first run's A has few rows and QGemv
// is preferred, else for MatMulInteger's product (quant_matmul.h). Either serves any number of rows, exactly.
struct QGemmWeights {
  QGemvPackedB gemv;  // when quant is null
  std::shared_ptr<const quant_matmul::QuantWeights> quant;
};

std::shared_ptr<const QGemmWeights> PackQGemmWeights(const Tensor& b, int64_t k, int64_t n, bool a_unsigned,
                                                     bool b_transposed, bool gemv) {
  auto w = std::make_shared<QGemmWeights>();
  const auto* bytes = static_cast<const uint8_t*>(b.raw_data());
  const bool b_signed = b.dtype() == DataType::kInt8;
  if (gemv) {
    QGemvPackB(bytes, k, n, b_signed, b_transposed, &w->gemv);
  } else if (!b_transposed) {
    w->quant = quant_matmul::PackQuantWeights(bytes, k, n, b_signed, a_unsigned, true);
  } else {
    // B given as [n, k] (transB): the packing reads [k, n].
    std::vector<uint8_t> kn(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) kn[static_cast<size_t>(i * n + j)] = bytes[j * k + i];
    w->quant = quant_matmul::PackQuantWeights(kn.data(), k, n, b_signed, a_unsigned, true);
  }
  return w;
}

// com.microsoft QGemm without transA and with C absent or one row (what the QDQ fusion and ONNX Runtime's
// QOperator quantizer write; the latter's B is [n, k], transB).
Status QGemmFast(KernelContext& ctx) {
  for (size_t i : {size_t{0}, size_t{3}, size_t{4}})
    if (!ctx.has_input(i) || !ctx.input(i)->is_tensor()) return RunReference(ctx);
  const Tensor& a = ctx.input(0)->tensor();
  const Tensor& b = ctx.input(3)->tensor();
  auto trans_a = ctx.node().GetInt("transA", 0), trans_b = ctx.node().GetInt("transB", 0);
  if (!trans_a.ok() || !trans_b.ok() || trans_a.value() != 0 || (trans_b.value() != 0 && trans_b.value() != 1) ||
      !Is8Bit(a.dtype()) || !Is8Bit(b.dtype()) || a.rank() != 2 || b.rank() != 2)
    return RunReference(ctx);
  const bool b_transposed = trans_b.value() == 1;
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(b_transposed ? 0 : 1);
  if (b.dim(b_transposed ? 1 : 0) != k) return RunReference(ctx);
  QGemmQuant q;
  const int32_t* c = nullptr;
  if (!ReadQGemmQuant(ctx, a, b, n, &q) || !ReadBiasRow(ctx, n, &c)) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, q.out_type, {m, n}));
  if (m == 0 || n == 0) return Status::Ok();
  std::vector<int32_t> sums(static_cast<size_t>(m * n), 0);
  if (k > 0) {
    const bool a_unsigned = a.dtype() == DataType::kUint8, gemv = m <= kQGemvMaxRows && QGemvPreferred();
    std::shared_ptr<const QGemmWeights> w;
    if (ctx.prepared() && ctx.input_is_constant(3)) {
      auto built = ctx.prepared()->GetOrBuild<QGemmWeights>(
          {k, n, b.dtype() == DataType::kInt8 ? 1 : 0, a_unsigned ? 1 : 0, b_transposed ? 1 : 0},
          [&]() -> Result<std::shared_ptr<const QGemmWeights>> {
            auto packed = PackQGemmWeights(b, k, n, a_unsigned, b_transposed, gemv);
            ctx.DropConstantInput(3);  // runs read only the packed copy
            return packed;
          });
      if (built.ok()) w = built.value();
    }
    if (!w) w = PackQGemmWeights(b, k, n, a_unsigned, b_transposed, gemv);
    if (w->quant)
      quant_matmul::QuantProduct(ctx, a, m, k, *w->quant, q.za.data(), 0, q.zb.data(), q.zb_stride, sums.data(), n,
                                 nullptr);
    else
      QGemv(&ctx, static_cast<const uint8_t*>(a.raw_data()), !a_unsigned, m, q.za[0], w->gemv, q.zb.data(),
            q.zb_stride, sums.data(), n);
  }
  const size_t out_bytes = q.quantized_out ? 1 : sizeof(float);
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  ctx.ParallelFor(m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      QGemmRow(q, sums.data() + i * n, c, n, yp + static_cast<size_t>(i * n) * out_bytes);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
