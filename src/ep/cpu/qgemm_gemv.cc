// QGemv (qgemm_gemv.h): a few rows of 8-bit A by B packed in 16-column panels of k pairs. Per k pair and
// panel, 32 bytes of B widened by two vpmovsxbw (vpmovzxbw for uint8 B) into int16 (k, k + 1) pairs of 8
// columns each, and per row one vpmaddwd against the broadcast pair (A[k] - za, A[k + 1] - za) into int32
// lanes: every product and pair sum is exact in int32 (at most 2 * 255 * 255), so no byte pattern needs
// clamping, and the int32 adds wrap as the reference's int64 sums narrowed to int32 do. B's zero point comes
// off at the end through each row's sum of (A - za).
#include "ep/cpu/qgemm_gemv.h"

#include <algorithm>
#include <cstring>

#include "ep/cpu/igemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QGEMV_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kMaxRows = 4;        // rows of A a panel pass serves (their accumulators: 2 a row)
constexpr int64_t kPanelBytesPerPair = kQGemvCols * 2;

int64_t KPairs(int64_t k) { return (k + 1) / 2; }

// The rows of A minus za as int16 pairs, one 32-bit word per k pair (low half the even k; an odd k's last pair
// padded with 0), row after row, and each row's sum of A - za (wrapping).
void PrepareRows(const uint8_t* a, bool a_signed, int64_t k, int32_t za, int64_t rows, std::vector<int16_t>* pairs,
                 std::vector<int32_t>* row_sums) {
  const int64_t padded = 2 * KPairs(k);
  pairs->assign(static_cast<size_t>(rows * padded), 0);
  row_sums->assign(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = a + r * k;
    int16_t* out = pairs->data() + r * padded;
    uint32_t sum = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int32_t v = (a_signed ? static_cast<int32_t>(static_cast<int8_t>(row[i])) : row[i]) - za;
      out[i] = static_cast<int16_t>(v);  // within [-255, 255]
      sum += static_cast<uint32_t>(v);
    }
    (*row_sums)[static_cast<size_t>(r)] = static_cast<int32_t>(sum);
  }
}

// Raw sums s[r][j] = sum_k (A[r][k] - za) B[k][j] over one panel, portable.
void PanelPortable(const int16_t* a, int64_t a_stride, int64_t rows, int64_t kpairs, const uint8_t* panel,
                   bool b_signed, int32_t* s) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < kQGemvCols; ++j) {
      uint32_t acc = 0;
      for (int64_t p = 0; p < kpairs; ++p) {
        const uint8_t* pair = panel + p * kPanelBytesPerPair + 2 * j;
        const int32_t b0 = b_signed ? static_cast<int8_t>(pair[0]) : pair[0];
        const int32_t b1 = b_signed ? static_cast<int8_t>(pair[1]) : pair[1];
        acc += static_cast<uint32_t>(a[r * a_stride + 2 * p] * b0 + a[r * a_stride + 2 * p + 1] * b1);
      }
      s[r * kQGemvCols + j] = static_cast<int32_t>(acc);
    }
}

#ifdef NEE_QGEMV_X86
template <bool kSigned>
__attribute__((target("avx2"))) inline __m256i Widen(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return kSigned ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

// The same on AVX2 for kRows rows: per k pair two widened halves of B (columns 0-7, 8-15) and per row one
// broadcast A pair, two vpmaddwd, two vpaddd.
template <int kRows, bool kSigned>
__attribute__((target("avx2"))) void PanelAvx2(const int16_t* a, int64_t a_stride, int64_t kpairs,
                                               const uint8_t* panel, int32_t* s) {
  __m256i acc[kRows][2];
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t p = 0; p < kpairs; ++p) {
    const __m256i b0 = Widen<kSigned>(panel), b1 = Widen<kSigned>(panel + 16);
    for (int r = 0; r < kRows; ++r) {
      int32_t pair;
      std::memcpy(&pair, a + r * a_stride + 2 * p, sizeof pair);
      const __m256i av = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(b0, av));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(b1, av));
    }
    panel += kPanelBytesPerPair;
  }
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + r * kQGemvCols), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + r * kQGemvCols + 8), acc[r][1]);
  }
}

// One row over two adjacent panels at once (s: their 32 sums): two streams of B and four accumulators, the
// broadcast shared; 25% faster than a panel at a time with B in L3 (58 against 78 us for ResNet-50's
// classifier on Zen 3), 10% from DRAM.
template <bool kSigned>
__attribute__((target("avx2"))) void TwoPanelsAvx2(const int16_t* a, int64_t kpairs, const uint8_t* panel,
                                                   int32_t* s) {
  const uint8_t* panel2 = panel + kpairs * kPanelBytesPerPair;
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0;
  for (int64_t p = 0; p < kpairs; ++p) {
    int32_t pair;
    std::memcpy(&pair, a + 2 * p, sizeof pair);
    const __m256i av = _mm256_set1_epi32(pair);
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(Widen<kSigned>(panel), av));
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(Widen<kSigned>(panel + 16), av));
    c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(Widen<kSigned>(panel2), av));
    c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(Widen<kSigned>(panel2 + 16), av));
    panel += kPanelBytesPerPair;
    panel2 += kPanelBytesPerPair;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s), c0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + 8), c1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + 16), c2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + 24), c3);
}

// out[j] = s[j] - zb[j] * row_sum for `cols` columns (zb null: no zero points), wrapping: the per-column
// tail of every panel pass, eight lanes at a time (written out by the compiler it took ~7% of a quantized
// LSTM's run, a call per 16 or 32 outputs).
__attribute__((target("avx2"))) void SubtractZeroPointsAvx2(const int32_t* s, const int32_t* zb, uint32_t row_sum,
                                                            int64_t cols, int32_t* out) {
  const __m256i sum = _mm256_set1_epi32(static_cast<int32_t>(row_sum));
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + j));
    if (zb) {
      const __m256i zero_points = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(zb + j));
      v = _mm256_sub_epi32(v, _mm256_mullo_epi32(zero_points, sum));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), v);
  }
  for (; j < cols; ++j)
    out[j] = static_cast<int32_t>(static_cast<uint32_t>(s[j]) - (zb ? static_cast<uint32_t>(zb[j]) * row_sum : 0u));
}

template <bool kSigned>
void PanelAvx2Rows(const int16_t* a, int64_t a_stride, int64_t rows, int64_t kpairs, const uint8_t* panel,
                   int32_t* s) {
  switch (rows) {
    case 1: return PanelAvx2<1, kSigned>(a, a_stride, kpairs, panel, s);
    case 2: return PanelAvx2<2, kSigned>(a, a_stride, kpairs, panel, s);
    case 3: return PanelAvx2<3, kSigned>(a, a_stride, kpairs, panel, s);
    default: return PanelAvx2<4, kSigned>(a, a_stride, kpairs, panel, s);
  }
}
#endif

}  // namespace

bool QGemvPreferred() { return IgemmU8S8Available() && std::strcmp(IgemmU8S8KernelName(), "avx2") == 0; }

void QGemvPackB(const uint8_t* b, int64_t k, int64_t n, bool b_signed, bool b_transposed, QGemvPackedB* out) {
  const int64_t kpairs = KPairs(k), panels = (n + kQGemvCols - 1) / kQGemvCols;
  out->k = k;
  out->n = n;
  out->b_signed = b_signed;
  out->data.assign(static_cast<size_t>(panels * kpairs * kPanelBytesPerPair), 0);
  // B[i][j]'s place: panel j / 16, pair i / 2, column j % 16, byte i % 2. The loops follow B's rows.
  auto at = [&](int64_t i, int64_t j) -> uint8_t& {
    return out->data[static_cast<size_t>(((j / kQGemvCols) * kpairs + i / 2) * kPanelBytesPerPair +
                                         2 * (j % kQGemvCols) + i % 2)];
  };
  if (b_transposed) {
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) at(i, j) = b[j * k + i];
  } else {
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) at(i, j) = b[i * n + j];
  }
}

void QGemv(const KernelContext* ctx, const uint8_t* a, bool a_signed, int64_t m, int32_t za, const QGemvPackedB& b,
           const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc) {
  const int64_t k = b.k, n = b.n, kpairs = KPairs(k), a_stride = 2 * kpairs;
  const int64_t panels = (n + kQGemvCols - 1) / kQGemvCols;
  if (m <= 0 || panels == 0) return;
  std::vector<int16_t> pairs;
  std::vector<int32_t> row_sums;
  PrepareRows(a, a_signed, k, za, m, &pairs, &row_sums);
#ifdef NEE_QGEMV_X86
  const bool avx2 = IgemmU8S8Available();
#else
  const bool avx2 = false;
#endif
  // Row r's sums over `count` panels from q (s: 16 a panel, panel after panel) less B's zero points, into c.
  auto finish = [&](int64_t i, int64_t q, int64_t count, const int32_t* s) {
    const uint32_t row_sum = static_cast<uint32_t>(row_sums[static_cast<size_t>(i)]);
    const int64_t j0 = q * kQGemvCols, cols = std::min(count * kQGemvCols, n - j0);
    int32_t* out = c + i * ldc + j0;
#ifdef NEE_QGEMV_X86
    if (avx2 && (!zb || zb_stride == 1)) return SubtractZeroPointsAvx2(s, zb ? zb + j0 : nullptr, row_sum, cols, out);
#endif
    for (int64_t j = 0; j < cols; ++j) {
      const uint32_t zbj = static_cast<uint32_t>(zb ? zb[(j0 + j) * zb_stride] : 0);
      out[j] = static_cast<int32_t>(static_cast<uint32_t>(s[j]) - zbj * row_sum);
    }
  };
  auto range = [&](int64_t begin, int64_t end) {
    alignas(32) int32_t s[kMaxRows * kQGemvCols];
    for (int64_t q = begin; q < end; ++q) {
      const uint8_t* panel = b.data.data() + q * kpairs * kPanelBytesPerPair;
#ifdef NEE_QGEMV_X86
      if (avx2 && m == 1 && q + 1 < end) {
        if (b.b_signed) TwoPanelsAvx2<true>(pairs.data(), kpairs, panel, s);
        else TwoPanelsAvx2<false>(pairs.data(), kpairs, panel, s);
        finish(0, q, 2, s);
        ++q;
        continue;
      }
#endif
      for (int64_t i0 = 0; i0 < m; i0 += kMaxRows) {
        const int64_t rows = std::min(kMaxRows, m - i0);
        const int16_t* ap = pairs.data() + i0 * a_stride;
#ifdef NEE_QGEMV_X86
        if (avx2 && b.b_signed) PanelAvx2Rows<true>(ap, a_stride, rows, kpairs, panel, s);
        else if (avx2) PanelAvx2Rows<false>(ap, a_stride, rows, kpairs, panel, s);
#endif
        if (!avx2) PanelPortable(ap, a_stride, rows, kpairs, panel, b.b_signed, s);
        for (int64_t r = 0; r < rows; ++r) finish(i0 + r, q, 1, s + r * kQGemvCols);
      }
    }
  };
  if (!ctx || !ctx->pool()) {
    range(0, panels);
    return;
  }
  // Tasks of at least ~64k multiply-adds (a 2048-deep panel is 32k a row).
  const int64_t work = std::max<int64_t>(1, m * k * kQGemvCols);
  ctx->ParallelFor(panels, std::max<int64_t>(1, 65536 / work), range);
}

}  // namespace nee::cpu
