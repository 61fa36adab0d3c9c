// The 256-entry byte lookup (ep/cpu/byte_lookup.h) and ai.nee TableLookup's fast kernel.
//
// AVX2 has no byte gather; vpshufb looks up 16 entries at a time (by an index's low four bits, or gives 0 where
// the index's top bit is set). A table of 256 is two halves of eight 16-entry rows T_0..T_7, each row stored as
// its difference from the one before, D_k = T_k ^ T_(k-1). For an index x below 128, the shuffle of D_k by
// x - 16k gives D_k[x & 15] while x >= 16k and 0 once x - 16k is negative, so the eight shuffles XORed together
// telescope to T_(x >> 4)[x & 15]. The upper half the same with x - 128, and the index's top bit picks the half.
#include "ep/cpu/byte_lookup.h"

#include <algorithm>
#include <cstring>

#include "ep/cpu/conv_int_geometry.h"  // Is8Bit
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/simd_x86.h"
#define NEE_BYTE_LOOKUP_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kPiece = 16384;  // bytes per task

void LookupBytesPortable(const uint8_t* __restrict table, const uint8_t* __restrict src, uint8_t* __restrict dst,
                         int64_t n, uint8_t flip) {
  for (int64_t i = 0; i < n; ++i) dst[i] = table[static_cast<uint8_t>(src[i] ^ flip)];
}

#ifdef NEE_BYTE_LOOKUP_X86
__attribute__((target("avx2"))) inline __m256i Row(const ByteTable& table, int k) {
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table.delta_rows[k])));
}

__attribute__((target("avx2"))) void LookupBytesAvx2(const ByteTable& table, const uint8_t* src, uint8_t* dst,
                                                     int64_t n, uint8_t flip) {
  __m256i low[8], high[8];
  for (int k = 0; k < 8; ++k) {
    low[k] = Row(table, k);
    high[k] = Row(table, 8 + k);
  }
  const __m256i flip_v = _mm256_set1_epi8(static_cast<char>(flip));
  const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i sixteen = _mm256_set1_epi8(16);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i x = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)), flip_v);
    __m256i lo_index = x;                          // the lower half's row index, valid where x < 128
    __m256i hi_index = _mm256_xor_si256(x, top);  // x - 128, valid where x >= 128
    __m256i lo = _mm256_shuffle_epi8(low[0], lo_index);
    __m256i hi = _mm256_shuffle_epi8(high[0], hi_index);
    for (int k = 1; k < 8; ++k) {
      lo_index = _mm256_sub_epi8(lo_index, sixteen);
      hi_index = _mm256_sub_epi8(hi_index, sixteen);
      lo = _mm256_xor_si256(lo, _mm256_shuffle_epi8(low[k], lo_index));
      hi = _mm256_xor_si256(hi, _mm256_shuffle_epi8(high[k], hi_index));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_blendv_epi8(lo, hi, x));
  }
  LookupBytesPortable(table.entries, src + i, dst + i, n - i, flip);
}
#endif

}  // namespace

ByteTable::ByteTable(const uint8_t* table) {
  std::memcpy(entries, table, sizeof entries);
  // Rows 0-7 the lower half's, 8-15 the upper half's, each the difference from the row before in its half.
  for (int half = 0; half < 2; ++half)
    for (int k = 0; k < 8; ++k)
      for (int j = 0; j < 16; ++j) {
        const int at = 128 * half + 16 * k + j;
        delta_rows[8 * half + k][j] = static_cast<uint8_t>(table[at] ^ (k ? table[at - 16] : 0));
      }
}

void LookupBytes(const ByteTable& table, const uint8_t* src, uint8_t* dst, int64_t n, uint8_t flip) {
#ifdef NEE_BYTE_LOOKUP_X86
  if (n >= 32 && CpuHasAvx2Fma() && !SgemmPortableForced()) return LookupBytesAvx2(table, src, dst, n, flip);
#endif
  LookupBytesPortable(table.entries, src, dst, n, flip);
}

void MapThroughTable(const KernelContext& ctx, const Tensor& x, const ByteTable& table, Tensor& y) {
  const auto* xp = static_cast<const uint8_t*>(x.raw_data());
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  const uint8_t flip = x.dtype() == DataType::kInt8 ? 0x80 : 0;
  const int64_t total = x.num_elements();
  ctx.ParallelFor((total + kPiece - 1) / kPiece, 1, [&](int64_t begin, int64_t end) {
    const int64_t stop = std::min(end * kPiece, total);
    LookupBytes(table, xp + begin * kPiece, yp + begin * kPiece, stop - begin * kPiece, flip);
  });
}

Status TableLookupFast(KernelContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.input(0)->is_tensor() || !ctx.input(1)->is_tensor())
    return RunReference(ctx);
  const Tensor& x = ctx.input(0)->tensor();
  const Tensor& entries = ctx.input(1)->tensor();
  if (!Is8Bit(x.dtype()) || !Is8Bit(entries.dtype()) || entries.rank() != 1 || entries.dim(0) != 256)
    return RunReference(ctx);
  const ByteTable table(static_cast<const uint8_t*>(entries.raw_data()));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, entries.dtype(), x.dims()));
  MapThroughTable(ctx, x, table, y);
  return Status::Ok();
}

}  // namespace nee::cpu
