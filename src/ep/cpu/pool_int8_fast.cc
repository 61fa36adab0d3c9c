// MaxPool on uint8 and int8 NCHW tensors (2-D windows), which the QDQ fusion writes for DQ -> MaxPool -> Q
// with one scale and zero point (opt/fuse_qdq_conv.cc): bitwise the reference kernel (ops/pool.cc), whose
// max over the window's taps inside the input is exact on integers (ties have one value) and whose window
// with no tap inside the input is 0.
//
// Per plane and block of output rows, separably: for each output row the input rows the window's taps reach
// (only those inside the input) are combined by byte max into one row, laid into a buffer whose columns
// outside the input hold the type's lowest value (never above a real one, so a window's max over all its
// column taps is its max over those inside); then each output is the max over its column taps in that row,
// 32 at a time on AVX2 for column strides 1 and 2 (stride 2: the even bytes of the stride-1 maxima, packed),
// one by one otherwise. Windows without a tap inside the input (whole rows or columns of them) are written as
// 0 last. On AVX-512 VBMI, rows of at most 128 input and 64 output bytes stay in registers instead
// (PoolPlaneAvx512). Other ranks, the Indices output and the float types go elsewhere (float32:
// pool_fast.cc's MaxPoolFloat).
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/qconv_requant_avx512.h"
#include "ep/cpu/qconv_vnni.h"
#include "ops/nn_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_POOL8_X86 1
#endif

namespace nee::cpu {

namespace {

// The taps of output position o along one dim that land inside the input: [lo, hi) (empty when equal), and
// the input coordinate of tap 0 (ops/pool.cc's TapsAt).
struct Taps {
  int64_t lo = 0, hi = 0, start = 0;
};

Taps TapsOf(int64_t kernel, int64_t stride, int64_t dilation, int64_t pad, int64_t in, int64_t o) {
  Taps t;
  t.start = o * stride - pad;
  auto first_at_or_after = [&](int64_t x) { return x <= t.start ? 0 : (x - t.start + dilation - 1) / dilation; };
  t.lo = std::min(kernel, first_at_or_after(0));
  t.hi = std::max(t.lo, std::min(kernel, first_at_or_after(in)));
  return t;
}

struct Pool8Geometry {
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t row_len = 0;  // the padded row buffer: pw lowest bytes, iw input maxima, lowest up to the reach, slack
  std::vector<Taps> rows;        // per output row
  std::vector<int64_t> empty_columns;  // output columns whose window has no column tap inside the input
};

bool PlanPool8(const KernelContext& ctx, const Tensor& x, Pool8Geometry& g) {
  if (x.rank() != 4) return false;
  auto spec_or = nn::ReadWindowSpec(ctx.node(), 2, nullptr);
  if (!spec_or.ok()) return false;
  nn::WindowSpec& spec = spec_or.value();
  g.planes = x.dim(0) * x.dim(1);
  g.ih = x.dim(2), g.iw = x.dim(3);
  auto oh = nn::WindowOutputDim(ctx.node(), spec, 0, g.ih);
  auto ow = nn::WindowOutputDim(ctx.node(), spec, 1, g.iw);
  if (!oh.ok() || !ow.ok()) return false;
  g.oh = oh.value(), g.ow = ow.value();
  g.kh = spec.kernel[0], g.kw = spec.kernel[1];
  g.sh = spec.strides[0], g.sw = spec.strides[1];
  g.dh = spec.dilations[0], g.dw = spec.dilations[1];
  g.ph = spec.pad_begin(0), g.pw = spec.pad_begin(1);
  // The buffer's reach: the last window's last column tap (ceil_mode may pass the declared padding).
  const int64_t reach = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  if (g.ow <= 0 || g.oh <= 0 || reach > (int64_t{1} << 26) || g.pw > (int64_t{1} << 26)) return false;
  g.row_len = std::max(g.pw + g.iw, reach) + 64;
  for (int64_t o = 0; o < g.oh; ++o) g.rows.push_back(TapsOf(g.kh, g.sh, g.dh, g.ph, g.ih, o));
  for (int64_t o = 0; o < g.ow; ++o) {
    const Taps t = TapsOf(g.kw, g.sw, g.dw, g.pw, g.iw, o);
    if (t.lo == t.hi) g.empty_columns.push_back(o);
  }
  return true;
}

// Byte max of one type: uint8 or int8.
template <bool kSigned>
inline uint8_t Max8(uint8_t a, uint8_t b) {
  if constexpr (kSigned) return static_cast<int8_t>(a) > static_cast<int8_t>(b) ? a : b;
  return a > b ? a : b;
}

#ifdef NEE_POOL8_X86
template <bool kSigned>
__attribute__((target("avx2"))) inline __m256i Max32(__m256i a, __m256i b) {
  return kSigned ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
}
#endif

#ifdef NEE_POOL8_X86
// RowsMax's first whole vectors; returns how many bytes it did.
template <bool kSigned, int kCount>  // kCount rows, or any count (`count`) when 0
__attribute__((target("avx2"))) inline void RowsMaxLoop(uint8_t* dst, const uint8_t* src, int64_t stride,
                                                       int64_t count, int64_t n) {
  // The last vector ends at n, overlapping the one before it (the same bytes written twice).
  for (int64_t i = 0;; i = std::min(i + 32, n - 32)) {
    __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    if constexpr (kCount > 0) {
      for (int r = 1; r < kCount; ++r)
        m = Max32<kSigned>(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + r * stride + i)));
    } else {
      for (int64_t r = 1; r < count; ++r)
        m = Max32<kSigned>(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + r * stride + i)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), m);
    if (i == n - 32) break;
  }
}

// RowsMax's first whole vectors; returns how many bytes it did. Two and three rows (3x3 and 2x2 windows)
// unrolled.
template <bool kSigned>
__attribute__((target("avx2"))) int64_t RowsMaxAvx2(uint8_t* dst, const uint8_t* src, int64_t stride, int64_t count,
                                                    int64_t n) {
  if (n < 32) return 0;
  if (count == 3) RowsMaxLoop<kSigned, 3>(dst, src, stride, count, n);
  else if (count == 2) RowsMaxLoop<kSigned, 2>(dst, src, stride, count, n);
  else RowsMaxLoop<kSigned, 0>(dst, src, stride, count, n);
  return n;
}

// The max over a stride-2 window's column taps for 32 byte pairs from r, in the low byte of each 16-bit word:
// kTaps taps 1 apart (the 3x3 stride-2 pools, unrolled), or g.kw taps g.dw apart when 0.
template <bool kSigned, int kTaps>
__attribute__((target("avx2"))) inline __m256i PairMax(const Pool8Geometry& g, const uint8_t* r, __m256i low) {
  __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r));
  if constexpr (kTaps > 0) {
    for (int t = 1; t < kTaps; ++t) m = Max32<kSigned>(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + t)));
  } else {
    for (int64_t t = 1; t < g.kw; ++t)
      m = Max32<kSigned>(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + t * g.dw)));
  }
  return _mm256_and_si256(m, low);
}

// PoolColumnsAvx2 at column stride 2 (g.ow >= 32).
template <bool kSigned, int kTaps>
__attribute__((target("avx2"))) void PoolColumnsStride2(const Pool8Geometry& g, const uint8_t* row, uint8_t* out) {
  const __m256i low = _mm256_set1_epi16(0xFF);
  for (int64_t o = 0;; o = std::min(o + 32, g.ow - 32)) {
    const __m256i packed = _mm256_packus_epi16(PairMax<kSigned, kTaps>(g, row + 2 * o, low),
                                               PairMax<kSigned, kTaps>(g, row + 2 * o + 32, low));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + o), _mm256_permute4x64_epi64(packed, 0xD8));
    if (o == g.ow - 32) break;
  }
}

// PoolColumns' outputs, 32 at a time (the last 32 overlapping the ones before: the same values written twice),
// for column strides 1 and 2 and at least 32 outputs; returns how many it did. Stride 2:
// the stride-1 maxima of 64 columns, then their even bytes (16-bit words masked to their low byte and packed;
// vpackuswb packs within 128-bit lanes, vpermq puts the quarters in order).
template <bool kSigned>
__attribute__((target("avx2"))) int64_t PoolColumnsAvx2(const Pool8Geometry& g, const uint8_t* row, uint8_t* out) {
  if (g.ow < 32 || g.sw > 2) return 0;
  auto next = [&](int64_t o) { return o + 32 >= g.ow ? g.ow : std::min(o + 32, g.ow - 32); };
  if (g.sw == 1) {
    for (int64_t o = 0; o < g.ow; o = next(o)) {
      __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + o));
      for (int64_t t = 1; t < g.kw; ++t)
        m = Max32<kSigned>(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + o + t * g.dw)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + o), m);
    }
  } else if (g.sw == 2 && g.kw == 3 && g.dw == 1) {
    PoolColumnsStride2<kSigned, 3>(g, row, out);
  } else if (g.sw == 2) {
    PoolColumnsStride2<kSigned, 0>(g, row, out);
  }
  return g.ow;
}
#endif

// dst[i] = the max over r < count of src[r * stride + i], for n bytes.
template <bool kSigned, bool kAvx2>
void RowsMax(uint8_t* dst, const uint8_t* src, int64_t stride, int64_t count, int64_t n) {
  int64_t i = 0;
#ifdef NEE_POOL8_X86
  if constexpr (kAvx2) i = RowsMaxAvx2<kSigned>(dst, src, stride, count, n);
#endif
  for (; i < n; ++i) {
    uint8_t m = src[i];
    for (int64_t r = 1; r < count; ++r) m = Max8<kSigned>(m, src[r * stride + i]);
    dst[i] = m;
  }
}

// out[o] for o in [0, ow): the max over the kw column taps of row (the padded buffer) at o * sw + t * dw.
template <bool kSigned, bool kAvx2>
void PoolColumns(const Pool8Geometry& g, const uint8_t* row, uint8_t* out) {
  int64_t o = 0;
#ifdef NEE_POOL8_X86
  if constexpr (kAvx2) o = PoolColumnsAvx2<kSigned>(g, row, out);
#endif
  for (; o < g.ow; ++o) {
    const uint8_t* r = row + o * g.sw;
    uint8_t m = r[0];
    for (int64_t t = 1; t < g.kw; ++t) m = Max8<kSigned>(m, r[t * g.dw]);
    out[o] = m;
  }
}

// One plane: x (ih x iw) into y (oh x ow), in blocks of output rows: first each row's window rows maxed into
// its own padded row of `buffer` (block_rows rows of g.row_len bytes, their columns outside the input holding
// the lowest value: written once per buffer, never overwritten), then the block's column maxima from them. The
// rows are stored a whole block before the column pass reads them at byte offsets, so no load waits on a store
// it only partly overlaps (a row stored and at once read back at offsets 1 and 2 stalled store forwarding:
// 2.5x slower on ResNet-50's 3x3 stride-2 pool on Zen 3: 202 against 81 us; unrolling the 2- and 3-row
// maxima and the 3-tap stride-2 columns then took it to 55 us).
template <bool kSigned, bool kAvx2>
void PoolPlane8(const Pool8Geometry& g, const uint8_t* x, uint8_t* y, uint8_t* buffer, int64_t block_rows) {
  for (int64_t oy0 = 0; oy0 < g.oh; oy0 += block_rows) {
    const int64_t rows = std::min(block_rows, g.oh - oy0);
    for (int64_t r = 0; r < rows; ++r) {
      const Taps& t = g.rows[static_cast<size_t>(oy0 + r)];
      if (t.lo == t.hi) continue;  // no row of the window inside the input: written as 0 below
      RowsMax<kSigned, kAvx2>(buffer + r * g.row_len + g.pw, x + (t.start + t.lo * g.dh) * g.iw, g.dh * g.iw,
                              t.hi - t.lo, g.iw);
    }
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* out = y + (oy0 + r) * g.ow;
      const Taps& t = g.rows[static_cast<size_t>(oy0 + r)];
      if (t.lo == t.hi) {
        std::memset(out, 0, static_cast<size_t>(g.ow));
        continue;
      }
      PoolColumns<kSigned, kAvx2>(g, buffer + r * g.row_len, out);
      for (int64_t o : g.empty_columns) out[o] = 0;
    }
  }
}

#ifdef NEE_POOL8_X86
NEE_QCONV_AVX512_WARNINGS_OFF
#define NEE_POOL8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

constexpr int64_t kMaxColumnTaps = 16;

// Whether PoolPlaneAvx512 takes a geometry: an input row in two zmm, an output row in one.
bool Avx512RowsApply(const Pool8Geometry& g) { return g.iw <= 128 && g.ow <= 64 && g.kw <= kMaxColumnTaps; }

// Per column tap: which byte of the two-register input row each output reads (vpermt2b), and which outputs'
// taps land inside the input; the outputs with none (the reference's 0).
struct ColumnTaps {
  __m512i index[kMaxColumnTaps];
  __mmask64 inside[kMaxColumnTaps];
  __mmask64 empty = 0;
};

NEE_POOL8_AVX512 ColumnTaps PlanColumnTaps(const Pool8Geometry& g) {
  ColumnTaps c;
  __mmask64 any = 0;
  for (int64_t t = 0; t < g.kw; ++t) {
    alignas(64) uint8_t idx[64] = {};
    __mmask64 inside = 0;
    for (int64_t o = 0; o < g.ow; ++o) {
      const int64_t col = o * g.sw + t * g.dw - g.pw;
      if (col < 0 || col >= g.iw) continue;
      idx[o] = static_cast<uint8_t>(col);
      inside |= __mmask64{1} << o;
    }
    c.index[t] = _mm512_load_si512(idx);
    c.inside[t] = inside;
    any |= inside;
  }
  const __mmask64 outputs = g.ow == 64 ? ~__mmask64{0} : (__mmask64{1} << g.ow) - 1;
  c.empty = outputs & ~any;
  return c;
}

template <bool kSigned>
NEE_POOL8_AVX512 inline __m512i Max64(__m512i a, __m512i b) {
  return kSigned ? _mm512_max_epi8(a, b) : _mm512_max_epu8(a, b);
}

// One plane, a row of outputs at a time, all in registers: the window's input rows (inside the input) maxed
// as two zmm, then each column tap's bytes dealt to the outputs by one vpermt2b and maxed in where the tap
// lies inside the input; outputs whose window has no tap inside set to 0. Where the buffered path stored a
// row and reloaded it at other offsets (store-forwarding stalls), nothing here goes through memory.
template <bool kSigned>
NEE_POOL8_AVX512 void PoolPlaneAvx512(const Pool8Geometry& g, const ColumnTaps& c, const uint8_t* x, uint8_t* y) {
  const __mmask64 low_mask = g.iw >= 64 ? ~__mmask64{0} : (__mmask64{1} << g.iw) - 1;
  const __mmask64 high_mask = g.iw <= 64 ? 0 : g.iw == 128 ? ~__mmask64{0} : (__mmask64{1} << (g.iw - 64)) - 1;
  const __mmask64 store = g.ow == 64 ? ~__mmask64{0} : (__mmask64{1} << g.ow) - 1;
  const __m512i lowest = _mm512_set1_epi8(kSigned ? -128 : 0), zero = _mm512_setzero_si512();
  const int64_t out_size = g.oh * g.ow;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const Taps& t = g.rows[static_cast<size_t>(oy)];
    __m512i acc = zero;
    if (t.lo < t.hi) {
      __m512i lo = lowest, hi = lowest;
      for (int64_t tap = t.lo; tap < t.hi; ++tap) {
        const uint8_t* row = x + (t.start + tap * g.dh) * g.iw;
        lo = Max64<kSigned>(lo, _mm512_maskz_loadu_epi8(low_mask, row));
        if (high_mask) hi = Max64<kSigned>(hi, _mm512_maskz_loadu_epi8(high_mask, row + 64));
      }
      acc = lowest;
      for (int64_t k = 0; k < g.kw; ++k) {
        const __m512i dealt = _mm512_permutex2var_epi8(lo, c.index[k], hi);
        acc = kSigned ? _mm512_mask_max_epi8(acc, c.inside[k], acc, dealt) : _mm512_mask_max_epu8(acc, c.inside[k], acc, dealt);
      }
      acc = _mm512_mask_mov_epi8(acc, c.empty, zero);
    }
    uint8_t* out = y + oy * g.ow;
    // A whole store where its tail stays in this plane (the next row overwrites it), else a masked one.
    if (oy * g.ow + 64 <= out_size)
      _mm512_storeu_si512(out, acc);
    else
      _mm512_mask_storeu_epi8(out, store, acc);
  }
}

// Whether the AVX-512 VBMI rows run: the CPU has them and the ISA limit is at AVX-512.
bool Pool8Avx512Active() { return qconv::QConvVnniActive() && qconv::QConvHasVbmi(); }
NEE_QCONV_AVX512_WARNINGS_ON
#endif

using PlaneFn = void (*)(const Pool8Geometry&, const uint8_t*, uint8_t*, uint8_t*, int64_t);

PlaneFn PickPlane(bool is_signed, bool avx2) {
#ifdef NEE_POOL8_X86
  if (avx2) return is_signed ? PoolPlane8<true, true> : PoolPlane8<false, true>;
#endif
  (void)avx2;
  return is_signed ? PoolPlane8<true, false> : PoolPlane8<false, false>;
}

}  // namespace

Status MaxPool8(KernelContext& ctx) {
  const Value* in = ctx.input(0);
  if (!in || !in->is_tensor()) return RunReference(ctx);
  const Tensor& x = in->tensor();
  if (x.dtype() != DataType::kUint8 && x.dtype() != DataType::kInt8) return MaxPoolFloat(ctx);
  if (ctx.wants_output(1)) return RunReference(ctx);  // Indices: the reference computes them
  auto order = ctx.node().GetInt("storage_order", 0);
  if (!order.ok() || (order.value() != 0 && order.value() != 1)) return RunReference(ctx);
  Pool8Geometry g;
  if (!PlanPool8(ctx, x, g)) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), {x.dim(0), x.dim(1), g.oh, g.ow}));
  const PlaneFn plane = PickPlane(x.dtype() == DataType::kInt8, IgemmU8S8Available());
  const auto* xp = static_cast<const uint8_t*>(x.raw_data());
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  const int64_t in_size = g.ih * g.iw, out_size = g.oh * g.ow;
#ifdef NEE_POOL8_X86
  if (Avx512RowsApply(g) && Pool8Avx512Active()) {
    const ColumnTaps columns = PlanColumnTaps(g);
    const auto pool = x.dtype() == DataType::kInt8 ? PoolPlaneAvx512<true> : PoolPlaneAvx512<false>;
    ctx.ParallelFor(g.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in_size)), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) pool(g, columns, xp + p * in_size, yp + p * out_size);
    });
    return Status::Ok();
  }
#endif
  // Blocks of output rows whose padded rows take about 16 KiB (L1).
  const int64_t block_rows = std::clamp<int64_t>(16384 / g.row_len, 1, g.oh);
  const uint8_t lowest = x.dtype() == DataType::kInt8 ? 0x80 : 0x00;
  ctx.ParallelFor(g.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, in_size)), [&](int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> buffer;
    buffer.assign(static_cast<size_t>(block_rows * g.row_len), lowest);
    for (int64_t p = begin; p < end; ++p) plane(g, xp + p * in_size, yp + p * out_size, buffer.data(), block_rows);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
