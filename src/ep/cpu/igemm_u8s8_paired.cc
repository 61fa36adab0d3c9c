// The u8 x s8 GEMM of MatMulInteger / MatMulIntegerToFloat on AVX2 without
// VNNI, two k quads per multiply-add chain (igemm.h, IgemmU8S8Paired).
//
// Orientation: the int8 weights are the broadcast operand and the uint8
// activations the vector one, so a tile is 4 output columns (B's columns, one
// broadcast quad each) x 16 rows of A (two vectors of 8 rows' quads), and the
// int32 sums come out transposed; the epilogue transposes them in registers
// before it stores. Four columns, not six: with both halves' quads in
// registers each column's two broadcasts serve both halves (6 columns x 16
// rows had to broadcast per half, 12 registers of accumulators): half the
// broadcasts, which Zen 3 runs on the vector pipes too. Thread-CPU minimum,
// BERT-base shapes (128 x 768 x 3072, 128 x 3072 x 768, 128 x 768 x 768, its
// weights' spread): 102-106 GMAC/s against 92-96 for 6 x 16 and 85-91 for
// igemm_u8s8.cc's quad tile; 106-112 since A's panels are line-aligned and the
// epilogue stays in registers (bench/igemm_paired_bench.cc). The main loop
// alone, in L1, runs ~13.7 cycles an octet of k against the 12 of its 24
// multiplies on two pipes; three-quad groups (fewer multiplies, more adds and
// loads), 8 x 8 tiles, shuffled instead of loaded broadcasts and ones in a
// register all measured slower or equal. Per octet of k (two quads), row of B and half tile:
//   vpmaddubsw(x quad 0, w quad 0) + vpmaddubsw(x quad 1, w quad 1)   (int16)
//   vpmaddwd by ones, vpaddd                                           (int32)
// three multiplies per 64 multiply-adds where igemm_u8s8.cc's quad tile takes
// four. The int16 add is exact when no lane can leave int16: a lane holds
// a0 w0 + a1 w1 + a4 w4 + a5 w5 (or bytes 2, 3, 6, 7) with a in [0, 255], so
// it is exact when the group's positive weights sum to at most 128 and its
// negative ones to at least -128 (255 * 128 = 32640). Groups beyond that
// (BERT-base int8: ~1.7% of them) are clamped at packing and the excess of
// each clamped weight kept as a remainder, which the tile adds in registers
// for all 16 rows of A at once (one vpmaddwd per half): that is why the
// weights are the broadcast operand here, a remainder costing one vector op
// per 16 outputs instead of a scalar one per output.
//
// The result is the exact product (modulo 2^32), so it equals igemm's and the
// reference's bit for bit, and the float epilogue is Cast, Mul, Add rounded
// one after the other (no FMA: nothing here is compiled for it).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ep/cpu/igemm.h"
#include "ep/cpu/igemm_internal.h"
#include "ep/cpu/no_fp_contract.h"
#include "ops/op_schema.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_PAIRED_X86 1
#endif

namespace nee::cpu {

namespace {

constexpr int64_t kCols = kIgemmPairedCols;  // B columns a panel (tile rows: broadcast)
constexpr int64_t kRowsA = 16;               // A rows a panel (tile columns: two vectors of 8)
constexpr int64_t kOctetBytesB = 2 * kCols * 4;
constexpr int64_t kQuadBytesA = kRowsA * 4;

inline int64_t EvenQuads(int64_t k) { return ((k + 3) / 4 + 1) / 2 * 2; }

// Clamps one group of four weights (see the top of the file) so that its
// positive ones sum to at most 128 and its negative ones to at least -128;
// returns the clamped values in `packed`. The excess is taken from the
// largest magnitudes first, so that most groups need one remainder.
void ClampGroup(const int32_t w[4], int32_t packed[4]) {
  int order[4] = {0, 1, 2, 3};
  std::sort(order, order + 4, [&](int x, int y) { return std::abs(w[x]) > std::abs(w[y]) || (std::abs(w[x]) == std::abs(w[y]) && x < y); });
  int32_t pos = 0, neg = 0;
  for (int t = 0; t < 4; ++t) {
    packed[t] = w[t];
    (w[t] > 0 ? pos : neg) += w[t];
  }
  int32_t pos_excess = std::max(0, pos - 128), neg_excess = std::max(0, -128 - neg);
  for (int i : order) {
    if (packed[i] > 0 && pos_excess > 0) {
      const int32_t cut = std::min(packed[i], pos_excess);
      packed[i] -= cut;
      pos_excess -= cut;
    } else if (packed[i] < 0 && neg_excess > 0) {
      const int32_t cut = std::min(-packed[i], neg_excess);
      packed[i] += cut;
      neg_excess -= cut;
    }
  }
}

// Whether a group of four weights adds exactly in int16 for any A (see the top of the file). Scalar on
// purpose: GCC's vectorized form loaded the four values just stored one by one (a store-forwarding stall
// per group, most of the packing's time).
inline bool GroupFits(int32_t w0, int32_t w1, int32_t w2, int32_t w3) {
  const int32_t pos = std::max(w0, 0) + std::max(w1, 0) + std::max(w2, 0) + std::max(w3, 0);
  const int32_t neg = std::min(w0, 0) + std::min(w1, 0) + std::min(w2, 0) + std::min(w3, 0);
  return pos <= 128 && neg >= -128;
}

// How many of the panel's groups (cols columns x 2) would need clamping were quads q0 and q1 paired.
int PairCost(const int8_t* columns, size_t column_len, int64_t cols, int64_t q0, int64_t q1) {
  int cost = 0;
  for (int64_t r = 0; r < cols; ++r) {
    const int8_t* c = columns + static_cast<size_t>(r) * column_len;
    for (int g = 0; g < 2; ++g) {
      cost += GroupFits(c[4 * q0 + 2 * g], c[4 * q0 + 2 * g + 1], c[4 * q1 + 2 * g], c[4 * q1 + 2 * g + 1]) ? 0 : 1;
    }
  }
  return cost;
}

// Which quads a panel's octets pair (pairs[2 o], pairs[2 o + 1]): the quads in order, each still unpaired
// one with the first later one whose pairing needs no clamping (most often the next), else the least
// clamping among the next kScan. With ~1.7% of groups over the bound when quads pair in order (BERT-base
// int8), this leaves ~0.1% of them, and as many fewer remainders.
void PairQuads(const int8_t* columns, size_t column_len, int64_t cols, int64_t quads, uint16_t* pairs) {
  constexpr int kScan = 64;
  std::vector<char> used(static_cast<size_t>(quads), 0);
  int64_t o = 0;
  for (int64_t q0 = 0; q0 < quads; ++q0) {
    if (used[static_cast<size_t>(q0)]) continue;
    used[static_cast<size_t>(q0)] = 1;
    int64_t best = -1;
    int best_cost = 0, scanned = 0;
    for (int64_t q1 = q0 + 1; q1 < quads && scanned < kScan; ++q1) {
      if (used[static_cast<size_t>(q1)]) continue;
      ++scanned;
      const int cost = PairCost(columns, column_len, cols, q0, q1);
      if (best < 0 || cost < best_cost) {
        best = q1;
        best_cost = cost;
        if (cost == 0) break;
      }
    }
    used[static_cast<size_t>(best)] = 1;  // quads is even: a partner is left
    pairs[2 * o] = static_cast<uint16_t>(q0);
    pairs[2 * o + 1] = static_cast<uint16_t>(best);
    ++o;
  }
}

// Rows [h, h + rows) of a panel of A, columns [k0, k), byte by byte: all of a panel without AVX2, the ragged
// rest with it.
void PackPanelABytes(const uint8_t* a, int64_t lda, int64_t h, int64_t rows, int64_t k0, int64_t k, uint8_t* panel) {
  for (int64_t i = 0; i < rows; ++i) {
    const uint8_t* row = a + (h + i) * lda;
    for (int64_t kk = k0; kk < k; ++kk) panel[(kk / 4) * kQuadBytesA + (h + i) * 4 + kk % 4] = row[kk];
  }
}

#ifdef NEE_PAIRED_X86
// A panel (16 rows of A, k padded to whole octets) from row-major uint8 A:
// [quads][16 rows][4 bytes]; whole runs of 8 rows x 8 quads by 8x8 transposes
// of four-byte units, the rest byte by byte.
__attribute__((target("avx2"))) void PackPanelAAvx2(const uint8_t* a, int64_t lda, int64_t rows, int64_t k,
                                                    int64_t quads, uint8_t* panel) {
  std::memset(panel, 0, static_cast<size_t>(quads * kQuadBytesA));
  for (int64_t h = 0; h < kRowsA; h += 8) {
    const int64_t hrows = std::min<int64_t>(8, rows - h);
    if (hrows <= 0) break;
    int64_t done = 0;
    if (hrows == 8 && lda % 4 == 0) {
      for (; done + 32 <= k; done += 32) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i)
          r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(a + (h + i) * lda + done));
        __m256 t[8];
        for (int i = 0; i < 8; i += 2) {
          t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
          t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 8; i += 4) {
          r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
          r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
          r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
          r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        uint8_t* d = panel + (done / 4) * kQuadBytesA + h * 4;
        for (int j = 0; j < 4; ++j) {
          _mm256_storeu_ps(reinterpret_cast<float*>(d + j * kQuadBytesA), _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
          _mm256_storeu_ps(reinterpret_cast<float*>(d + (j + 4) * kQuadBytesA),
                           _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
        }
      }
    }
    PackPanelABytes(a, lda, h, hrows, done, k, panel);
  }
}

// sum_k row[k], by vpsadbw over whole 32-byte runs (wrapping like the sums).
__attribute__((target("avx2"))) uint32_t RowSumAvx2(const uint8_t* row, int64_t k) {
  __m256i acc = _mm256_setzero_si256();
  int64_t kk = 0;
  for (; kk + 32 <= k; kk += 32)
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + kk)),
                                                _mm256_setzero_si256()));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  uint32_t sum = static_cast<uint32_t>(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
  for (; kk < k; ++kk) sum += row[kk];
  return sum;
}

// What a tile needs besides its operands.
struct TileArgs {
  const uint8_t* a = nullptr;  // A panel
  const int8_t* w = nullptr;   // B panel
  const uint16_t* pairs = nullptr;  // the A quads of each octet (IgemmPackedS8Paired::pairs)
  int64_t octets = 0;
  const IgemmPackedS8Paired::Remainder* rem = nullptr;  // the panel's, by column
  const int64_t* rem_begin = nullptr;                   // kCols + 1 offsets into rem
  const int32_t* start = nullptr;    // kCols: each column's sums start here (the za * col_sum term, negated)
  const int32_t* zb = nullptr;       // kCols, or null when B's zero points are all 0
  const int32_t* row_term = nullptr; // kRowsA: sum_k (A - za) per row of A (read when zb is set)
  const int32_t* za = nullptr;       // kRowsA per-row za, or null (one za: folded into start)
  const int32_t* col_sum = nullptr;  // kCols (read when za is set)
  const float* scale = nullptr;      // kCols, or null: int32 out
  const float* bias = nullptr;       // kCols, or null
  int32_t* c = nullptr;              // int32 out at [row][column], ldc
  float* out = nullptr;              // float out, ldo
  int64_t ld = 0;
  int64_t rows = 0;                  // rows of A to store (<= 8 * kHalves)
  int64_t cols = 0;                  // columns to store (<= kCols)
};

// Eight rows of A's results for the tile's four columns, v[r] = column r's
// values for rows 0-7, transposed and stored: row i gets columns [0, cols).
__attribute__((target("avx2"), always_inline)) inline void StoreTransposed(const __m256 v[4], float* out, int64_t ld,
                                                                           int64_t rows, int64_t cols) {
  static_assert(kCols == 4, "four columns a tile");
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  // u[i]: row i's four columns in the low half, row i + 4's in the high half.
  const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
                       _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2))};
  if (cols == kCols && rows == 8) {
    for (int i = 0; i < 4; ++i) {
      _mm_storeu_ps(out + i * ld, _mm256_castps256_ps128(u[i]));
      _mm_storeu_ps(out + (i + 4) * ld, _mm256_extractf128_ps(u[i], 1));
    }
    return;
  }
  alignas(32) float row_vals[8][4];
  for (int i = 0; i < 4; ++i) {
    _mm_store_ps(row_vals[i], _mm256_castps256_ps128(u[i]));
    _mm_store_ps(row_vals[i + 4], _mm256_extractf128_ps(u[i], 1));
  }
  for (int64_t i = 0; i < rows; ++i) std::memcpy(out + i * ld, row_vals[i], static_cast<size_t>(cols) * sizeof(float));
}

// v<r> -= rows * per_column[r] for the four columns (a zero-point term: rows holds eight rows' values).
__attribute__((target("avx2"), always_inline)) inline void SubtractProducts(const int32_t* rows,
                                                                            const int32_t* per_column, __m256i& v0,
                                                                            __m256i& v1, __m256i& v2, __m256i& v3) {
  const __m256i r = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows));
  v0 = _mm256_sub_epi32(v0, _mm256_mullo_epi32(r, _mm256_set1_epi32(per_column[0])));
  v1 = _mm256_sub_epi32(v1, _mm256_mullo_epi32(r, _mm256_set1_epi32(per_column[1])));
  v2 = _mm256_sub_epi32(v2, _mm256_mullo_epi32(r, _mm256_set1_epi32(per_column[2])));
  v3 = _mm256_sub_epi32(v3, _mm256_mullo_epi32(r, _mm256_set1_epi32(per_column[3])));
}

// The end of a tile for half h (rows 8 h to 8 h + 7): v<r> holds column r's sums for those rows.
// Zero points: v = S - zb[j] * row_term[i] - za[i] * col_sum[j] (one za: already in start). Then int32
// out, or Cast, Mul by the column's scale, Add of its bias (rounded one after the other), stored transposed.
__attribute__((target("avx2"), always_inline)) inline void FinishHalf(const TileArgs& t, int h, __m256i v0, __m256i v1,
                                                                      __m256i v2, __m256i v3) {
  const int64_t rows = std::min<int64_t>(8, t.rows - 8 * h);
  if (rows <= 0) return;
  if (t.zb) SubtractProducts(t.row_term + 8 * h, t.zb, v0, v1, v2, v3);
  if (t.za) SubtractProducts(t.za + 8 * h, t.col_sum, v0, v1, v2, v3);
  if (!t.scale) {
    const __m256 f[kCols] = {_mm256_castsi256_ps(v0), _mm256_castsi256_ps(v1), _mm256_castsi256_ps(v2),
                             _mm256_castsi256_ps(v3)};
    StoreTransposed(f, reinterpret_cast<float*>(t.c + 8 * h * t.ld), t.ld, rows, t.cols);
    return;
  }
  __m256 f[kCols] = {_mm256_mul_ps(_mm256_cvtepi32_ps(v0), _mm256_broadcast_ss(t.scale + 0)),
                     _mm256_mul_ps(_mm256_cvtepi32_ps(v1), _mm256_broadcast_ss(t.scale + 1)),
                     _mm256_mul_ps(_mm256_cvtepi32_ps(v2), _mm256_broadcast_ss(t.scale + 2)),
                     _mm256_mul_ps(_mm256_cvtepi32_ps(v3), _mm256_broadcast_ss(t.scale + 3))};
  if (t.bias) {
    f[0] = _mm256_add_ps(f[0], _mm256_broadcast_ss(t.bias + 0));
    f[1] = _mm256_add_ps(f[1], _mm256_broadcast_ss(t.bias + 1));
    f[2] = _mm256_add_ps(f[2], _mm256_broadcast_ss(t.bias + 2));
    f[3] = _mm256_add_ps(f[3], _mm256_broadcast_ss(t.bias + 3));
  }
  StoreTransposed(f, t.out + 8 * h * t.ld, t.ld, rows, t.cols);
}

// One tile: kHalves vectors of 8 rows of A x 4 columns of B.
template <int kHalves>
__attribute__((target("avx2"))) void TileAvx2(const TileArgs& t) {
  // vpmaddwd reads the ones from memory: eight accumulators, four x vectors, two broadcasts and two products
  // fill the registers.
  alignas(32) static constexpr int16_t kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  const int8_t* w = t.w;
  const uint16_t* pairs = t.pairs;
  __m256i c00 = _mm256_set1_epi32(t.start[0]), c01 = c00, c10 = _mm256_set1_epi32(t.start[1]), c11 = c10;
  __m256i c20 = _mm256_set1_epi32(t.start[2]), c21 = c20, c30 = _mm256_set1_epi32(t.start[3]), c31 = c30;
  for (int64_t o = 0; o < t.octets; ++o) {
    const uint8_t* xa = t.a + static_cast<int64_t>(pairs[2 * o]) * kQuadBytesA;
    const uint8_t* xb = t.a + static_cast<int64_t>(pairs[2 * o + 1]) * kQuadBytesA;
    // Both quads of both halves in registers (four), each column's two quads broadcast once for both halves:
    // with eight accumulators and two products that is all sixteen registers. vbroadcastss by volatile asm:
    // a load on its own, in this order.
    const __m256i x00 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa));
    const __m256i x10 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb));
    __m256i x01 = x00, x11 = x10;
    if constexpr (kHalves > 1) {
      x01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa + 32));
      x11 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 32));
    }
#define NEE_PAIRED_COLUMN(r)                                                                \
  {                                                                                         \
    const auto* wq = reinterpret_cast<const int32_t*>(w + 4 * r);                           \
    __m256i p, q;                                                                           \
    __asm__ volatile("vbroadcastss %1, %0" : "=x"(p) : "m"(wq[0]));                         \
    __asm__ volatile("vbroadcastss %1, %0" : "=x"(q) : "m"(wq[kCols]));                     \
    __m256i s0 = _mm256_add_epi16(_mm256_maddubs_epi16(x00, p), _mm256_maddubs_epi16(x10, q)); \
    __asm__("vpmaddwd %1, %0, %0" : "+x"(s0) : "m"(kOnes));                                 \
    c##r##0 = _mm256_add_epi32(c##r##0, s0);                                                \
    if constexpr (kHalves > 1) {                                                            \
      __m256i s1 = _mm256_add_epi16(_mm256_maddubs_epi16(x01, p), _mm256_maddubs_epi16(x11, q)); \
      __asm__("vpmaddwd %1, %0, %0" : "+x"(s1) : "m"(kOnes));                               \
      c##r##1 = _mm256_add_epi32(c##r##1, s1);                                              \
    }                                                                                       \
    __asm__ volatile("" : "+x"(c##r##0), "+x"(c##r##1));                                    \
  }
    NEE_PAIRED_COLUMN(0)
    NEE_PAIRED_COLUMN(1)
    NEE_PAIRED_COLUMN(2)
    NEE_PAIRED_COLUMN(3)
#undef NEE_PAIRED_COLUMN
    w += kOctetBytesB;
  }
  // The clamped weights' remainders, for all rows at once: vpmaddubsw of A's quad k / 4 by the remainder
  // placed at byte k % 4 of each four (its pattern; the other bytes 0, so no pair sum can saturate), then
  // vpmaddwd by ones. Per column, into its named accumulators (an indexed array would live in memory).
  if (t.rem_begin[0] != t.rem_begin[kCols]) {
#define NEE_PAIRED_REMAINDERS(r)                                                                           \
  for (int64_t e = t.rem_begin[r]; e < t.rem_begin[r + 1]; ++e) {                                          \
    const IgemmPackedS8Paired::Remainder& re = t.rem[e];                                                   \
    __m256i pv;                                                                                            \
    __asm__("vbroadcastss %1, %0" : "=x"(pv) : "m"(re.pattern));                                           \
    const uint8_t* xq = t.a + (re.k / 4) * kQuadBytesA;                                                    \
    __m256i p0 = _mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)), pv);       \
    __asm__("vpmaddwd %1, %0, %0" : "+x"(p0) : "m"(kOnes));                                                \
    c##r##0 = _mm256_add_epi32(c##r##0, p0);                                                               \
    if constexpr (kHalves > 1) {                                                                           \
      __m256i p1 = _mm256_maddubs_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)), pv); \
      __asm__("vpmaddwd %1, %0, %0" : "+x"(p1) : "m"(kOnes));                                              \
      c##r##1 = _mm256_add_epi32(c##r##1, p1);                                                             \
    }                                                                                                      \
  }
    NEE_PAIRED_REMAINDERS(0)
    NEE_PAIRED_REMAINDERS(1)
    NEE_PAIRED_REMAINDERS(2)
    NEE_PAIRED_REMAINDERS(3)
#undef NEE_PAIRED_REMAINDERS
  }
  // Per half (8 rows), its four columns' sums: zero points, then int32 out or the float epilogue, stored
  // transposed. Named registers throughout: an indexed array of accumulators went through the stack.
  FinishHalf(t, 0, c00, c10, c20, c30);
  if constexpr (kHalves > 1) FinishHalf(t, 1, c01, c11, c21, c31);
}
#endif


// The same tile without SIMD, from the same packings (any rows <= 16); the
// float epilogue's multiply and add rounded apart (no contraction into an FMA).
NEE_NO_FP_CONTRACT void TilePortable(const TileArgs& t) {
  uint32_t acc[kCols][kRowsA];
  for (int64_t r = 0; r < kCols; ++r)
    for (int64_t i = 0; i < kRowsA; ++i) acc[r][i] = static_cast<uint32_t>(t.start[r]);
  for (int64_t p = 0; p < 2 * t.octets; ++p) {
    const uint8_t* xq = t.a + static_cast<int64_t>(t.pairs[p]) * kQuadBytesA;
    const int8_t* wq = t.w + (p / 2) * kOctetBytesB + (p % 2) * kCols * 4;
    for (int64_t r = 0; r < kCols; ++r)
      for (int64_t i = 0; i < t.rows; ++i) {
        int32_t s = 0;
        for (int b = 0; b < 4; ++b) s += static_cast<int32_t>(xq[i * 4 + b]) * wq[r * 4 + b];
        acc[r][i] += static_cast<uint32_t>(s);
      }
  }
  for (int64_t r = 0; r < kCols; ++r)
    for (int64_t e = t.rem_begin[r]; e < t.rem_begin[r + 1]; ++e) {
      const uint8_t* xq = t.a + (t.rem[e].k / 4) * kQuadBytesA + t.rem[e].k % 4;
      for (int64_t i = 0; i < t.rows; ++i)
        acc[r][i] += static_cast<uint32_t>(xq[i * 4]) * static_cast<uint32_t>(t.rem[e].r);
    }
  for (int64_t r = 0; r < t.cols; ++r)
    for (int64_t i = 0; i < t.rows; ++i) {
      uint32_t v = acc[r][i];
      if (t.zb) v -= static_cast<uint32_t>(t.zb[r]) * static_cast<uint32_t>(t.row_term[i]);
      if (t.za) v -= static_cast<uint32_t>(t.za[i]) * static_cast<uint32_t>(t.col_sum[r]);
      if (t.scale) {
        const float y = static_cast<float>(static_cast<int32_t>(v)) * t.scale[r];
        t.out[i * t.ld + r] = t.bias ? y + t.bias[r] : y;
      } else {
        t.c[i * t.ld + r] = static_cast<int32_t>(v);
      }
    }
}

}  // namespace

bool IgemmPairedAvailable() { return IgemmUseAvx2() && !IgemmUseVnni(); }

bool IgemmPackS8Paired(int64_t k, int64_t n, const int8_t* b, int64_t ldb, double max_remainder_fraction,
                       IgemmPackedS8Paired* out) {
  const int64_t quads = EvenQuads(k), octets = quads / 2;
  const int64_t panels = (n + kCols - 1) / kCols;
  out->k = k;
  out->n = n;
  out->data.assign(static_cast<size_t>(panels * octets * kOctetBytesB), 0);
  out->col_sums.assign(static_cast<size_t>(panels * kCols), 0);
  out->rem_begin.assign(static_cast<size_t>(panels * kCols + 1), 0);
  out->pairs.assign(static_cast<size_t>(panels * octets * 2), 0);
  out->remainders.clear();
  if (quads > 65536) return false;  // quad indices are 16-bit
  const double limit = max_remainder_fraction * static_cast<double>(k) * static_cast<double>(n);
  // Columns of B in blocks of kBlock, each copied out column-major first (rows of B read contiguously, which
  // one column at a time would not be: a cache miss per byte on large weights).
  constexpr int64_t kBlock = 10 * kCols;
  const size_t column_len = static_cast<size_t>(quads * 4);
  std::vector<int8_t> columns(static_cast<size_t>(kBlock) * column_len);
  for (int64_t jb = 0; jb < n; jb += kBlock) {
    const int64_t width = std::min(kBlock, n - jb);
    std::fill(columns.begin(), columns.end(), int8_t{0});
    // Runs of 64 rows, so that the columns' lines being written stay in L1.
    for (int64_t k0 = 0; k0 < k; k0 += 64) {
      const int64_t k1 = std::min(k, k0 + 64);
      for (int64_t jj = 0; jj < width; ++jj) {
        int8_t* column = columns.data() + static_cast<size_t>(jj) * column_len;
        for (int64_t kk = k0; kk < k1; ++kk) column[kk] = b[kk * ldb + jb + jj];
      }
    }
    for (int64_t jj = 0; jj < width; ++jj) {
      const int8_t* column = columns.data() + static_cast<size_t>(jj) * column_len;
      uint32_t sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) sum += static_cast<uint32_t>(static_cast<int32_t>(column[kk]));
      out->col_sums[static_cast<size_t>(jb + jj)] = static_cast<int32_t>(sum);
    }
    for (int64_t q = jb / kCols; q * kCols < jb + width; ++q) {
      const int8_t* panel_columns = columns.data() + static_cast<size_t>(q * kCols - jb) * column_len;
      const int64_t cols = std::min(kCols, n - q * kCols);
      uint16_t* pairs = out->pairs.data() + q * octets * 2;
      PairQuads(panel_columns, column_len, cols, quads, pairs);
      int8_t* panel = out->data.data() + q * octets * kOctetBytesB;
      for (int64_t r = 0; r < cols; ++r) {
        const int8_t* column = panel_columns + static_cast<size_t>(r) * column_len;
        out->rem_begin[static_cast<size_t>(q * kCols + r)] = static_cast<int64_t>(out->remainders.size());
        for (int64_t o = 0; o < octets; ++o) {
          const int64_t q0 = pairs[2 * o], q1 = pairs[2 * o + 1];
          int8_t* quad0 = panel + o * kOctetBytesB + r * 4;
          int8_t* quad1 = quad0 + kCols * 4;
          std::memcpy(quad0, column + 4 * q0, 4);
          std::memcpy(quad1, column + 4 * q1, 4);
          for (int g = 0; g < 2; ++g) {  // bytes (0, 1) or (2, 3) of both quads
            const int64_t ks[4] = {4 * q0 + 2 * g, 4 * q0 + 2 * g + 1, 4 * q1 + 2 * g, 4 * q1 + 2 * g + 1};
            if (GroupFits(column[ks[0]], column[ks[1]], column[ks[2]], column[ks[3]])) continue;  // nearly always
            int32_t w[4];
            for (int t = 0; t < 4; ++t) w[t] = column[ks[t]];
            int32_t packed[4];
            ClampGroup(w, packed);
            int8_t* dst[4] = {quad0 + 2 * g, quad0 + 2 * g + 1, quad1 + 2 * g, quad1 + 2 * g + 1};
            for (int t = 0; t < 4; ++t) {
              if (packed[t] == w[t]) continue;
              *dst[t] = static_cast<int8_t>(packed[t]);
              const int32_t rem = w[t] - packed[t];  // |rem| <= |w| <= 128, with w's sign: an int8
              out->remainders.push_back({static_cast<int32_t>(ks[t]), rem,
                                         static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint8_t>(rem))
                                                              << (8 * (ks[t] % 4)))});
              if (static_cast<double>(out->remainders.size()) > limit) return false;
            }
          }
        }
      }
    }
  }
  // Columns past n (the last panel's padding) have none; nor does the end.
  for (int64_t j = n; j <= panels * kCols; ++j)
    out->rem_begin[static_cast<size_t>(j)] = static_cast<int64_t>(out->remainders.size());
  return true;
}

void IgemmU8S8Paired(const KernelContext* ctx, const uint8_t* a, int64_t m, int64_t lda,
                     const IgemmPackedS8Paired& b, const int32_t* za, int64_t za_stride, const int32_t* zb,
                     int64_t zb_stride, int32_t* c, int64_t ldc, const IgemmFloatOut* fout) {
  const int64_t k = b.k, n = b.n;
  const int64_t quads = EvenQuads(k), octets = quads / 2;
  const int64_t a_panels = (m + kRowsA - 1) / kRowsA, b_panels = (n + kCols - 1) / kCols;
  if (a_panels == 0 || b_panels == 0) return;
  const bool avx2 = IgemmPairedAvailable();
  // A packed once per call (all threads read it), with each row's sum_k (A - za). The panels start on a
  // 64-byte line: the tile loads A's quads 32 bytes at a time, and from the allocator's 16-byte alignment
  // half of them crossed a line (5% of the tile's time on Zen 3).
  thread_local std::vector<uint8_t> t_a_bytes;
  thread_local std::vector<int32_t> t_row_term, t_za;
  t_a_bytes.resize(static_cast<size_t>(a_panels * quads * kQuadBytesA + 63));
  uint8_t* const a_packed = t_a_bytes.data() + (-reinterpret_cast<uintptr_t>(t_a_bytes.data()) & 63);
  t_row_term.assign(static_cast<size_t>(a_panels * kRowsA), 0);
  t_za.assign(static_cast<size_t>(a_panels * kRowsA), 0);
  for (int64_t p = 0; p < a_panels; ++p) {
    const int64_t i0 = p * kRowsA, rows = std::min(kRowsA, m - i0);
    uint8_t* panel = a_packed + p * quads * kQuadBytesA;
#ifdef NEE_PAIRED_X86
    if (avx2) PackPanelAAvx2(a + i0 * lda, lda, rows, k, quads, panel);
#endif
    if (!avx2) {
      std::memset(panel, 0, static_cast<size_t>(quads * kQuadBytesA));
      PackPanelABytes(a + i0 * lda, lda, 0, rows, 0, k, panel);
    }
    for (int64_t i = 0; i < rows; ++i) {
      const uint8_t* row = a + (i0 + i) * lda;
      uint32_t sum = 0;
#ifdef NEE_PAIRED_X86
      if (avx2) sum = RowSumAvx2(row, k);
#endif
      if (!avx2)
        for (int64_t kk = 0; kk < k; ++kk) sum += row[kk];
      const int32_t zai = za ? za[(i0 + i) * za_stride] : 0;
      t_za[static_cast<size_t>(i0 + i)] = zai;
      t_row_term[static_cast<size_t>(i0 + i)] =
          static_cast<int32_t>(sum - static_cast<uint32_t>(k) * static_cast<uint32_t>(zai));
    }
  }
  const bool one_za = za_stride == 0 || !za;
  const int32_t za0 = za ? za[0] : 0;
  const uint8_t* packed_a = a_packed;
  const int32_t* row_terms = t_row_term.data();
  const int32_t* row_za = t_za.data();
  auto range = [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t j0 = q * kCols, cols = std::min(kCols, n - j0);
      alignas(32) int32_t start[kCols] = {}, zero_points[kCols] = {}, col_sums[kCols] = {};
      alignas(32) float scales[kCols] = {}, biases[kCols] = {};
      bool zb_zero = true;
      for (int64_t r = 0; r < cols; ++r) {
        col_sums[r] = b.col_sums[static_cast<size_t>(j0 + r)];
        zero_points[r] = zb ? zb[(j0 + r) * zb_stride] : 0;
        zb_zero = zb_zero && zero_points[r] == 0;
        if (one_za) start[r] = static_cast<int32_t>(0u - static_cast<uint32_t>(za0) * static_cast<uint32_t>(col_sums[r]));
        if (fout) {
          scales[r] = fout->scale[(j0 + r) * fout->scale_stride];
          if (fout->bias) biases[r] = fout->bias[j0 + r];
        }
      }
      TileArgs t;
      t.w = b.data.data() + q * octets * kOctetBytesB;
      t.pairs = b.pairs.data() + q * octets * 2;
      t.octets = octets;
      t.rem = b.remainders.data();
      t.rem_begin = b.rem_begin.data() + j0;
      t.start = start;
      t.zb = zb_zero ? nullptr : zero_points;
      t.col_sum = col_sums;
      t.scale = fout ? scales : nullptr;
      t.bias = fout && fout->bias ? biases : nullptr;
      t.ld = fout ? fout->ldo : ldc;
      t.cols = cols;
      for (int64_t p = 0; p < a_panels; ++p) {
        const int64_t i0 = p * kRowsA;
        t.a = packed_a + p * quads * kQuadBytesA;
        t.rows = std::min(kRowsA, m - i0);
        t.row_term = row_terms + i0;
        t.za = one_za ? nullptr : row_za + i0;
        if (fout) t.out = fout->out + i0 * fout->ldo + j0;
        else t.c = c + i0 * ldc + j0;
#ifdef NEE_PAIRED_X86
        if (avx2) {
          if (t.rows > 8) TileAvx2<2>(t);
          else TileAvx2<1>(t);
          continue;
        }
#endif
        TilePortable(t);
      }
    }
  };
  if (!ctx || !ctx->pool()) {
    range(0, b_panels);
    return;
  }
  // Tasks are runs of B's column panels (A, packed once, is read by all) of at least ~64k multiply-adds.
  const int64_t work_per_panel = std::max<int64_t>(1, m * k * kCols);
  const int64_t min_panels = std::max<int64_t>(1, 65536 / work_per_panel);
  ctx->ParallelFor(b_panels, min_panels, range);
}

}  // namespace nee::cpu
