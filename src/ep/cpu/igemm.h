// Integer GEMM for the quantized ops (ConvInteger, MatMulInteger,
// DynamicQuantizeLSTM): 8-bit operands with zero points, int32 results.
//
//   C[i][j] = sum_k (A[i][k] - za[i]) * (B[k][j] - zb[j])
//
// computed exactly, wrapping modulo 2^32 like the reference kernels' int64
// sums narrowed to int32. A is packed with its zero point already subtracted
// (int16, exact: an 8-bit value minus an 8-bit zero point lies in [-255, 255]);
// B keeps its values and its zero point is applied afterwards as
// - zb[j] * sum_k (A[i][k] - za[i]). B packed per call (ConvInteger's im2col)
// stays 8-bit and is widened in the kernel; a constant B packed once per
// session (IgemmPackedB: weights) is stored already widened to int16, twice
// the bytes, so that the kernel's inner loop is only loads, vpmaddwd and
// vpaddd (on Zen 3 the two in-lane unpacks per k pair were ~10% of it).
// On AVX2 the products are vpmaddwd on int16 pairs (exact, no saturation),
// on other machines plain integer loops over the same layouts. (u8 x s8
// vpmaddubsw would halve the multiplies but saturates its int16 pair sums
// for full-range operands, and these kernels must be exact.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace nee {
class KernelContext;
}

namespace nee::cpu {

constexpr int64_t kIgemmRows = 6;     // rows of A per packed panel (micro-tile height)
constexpr int64_t kIgemmCols = 16;    // columns of B per packed panel (micro-tile width)

inline int64_t IgemmKPairs(int64_t k) { return (k + 1) / 2; }

// A (m x k) minus its zero points: panels of kIgemmRows rows, each
// [k pairs][kIgemmRows rows][2] int16 (rows past m and the odd k's partner are
// 0), plus each row's sum of A - za for B's zero point.
struct IgemmPackedA {
  int64_t m = 0, k = 0;
  std::vector<int16_t> data;
  std::vector<int32_t> row_sums;
};

// Packs 8-bit A (row-major, lda elements between rows; uint8 or int8 as
// `is_signed` says) minus za[i * za_stride] (za_stride 0: one zero point).
void IgemmPackA(int64_t m, int64_t k, const void* a, int64_t lda, bool is_signed, const int32_t* za,
                int64_t za_stride, IgemmPackedA* out);

// B (k x n, 8-bit) in panels of kIgemmCols columns, each [k pairs][32 bytes]:
// a pair (B[2p][j], B[2p+1][j]) per column, columns in the order 0-3, 8-11,
// 4-7, 12-15 (so that in-lane unpacks widen them in order); int8 stored as
// uint8 with the top bit flipped (its zero points are then raised by 128);
// columns past n and the odd k's partner zero. IgemmPackBSize bytes.
inline int64_t IgemmPackBSize(int64_t k, int64_t n) {
  return (n + kIgemmCols - 1) / kIgemmCols * IgemmKPairs(k) * kIgemmCols * 2;
}
void IgemmPackB(int64_t k, int64_t n, const uint8_t* b, int64_t ldb, bool is_signed, uint8_t* dst);
// Packs k pair p alone, from its two rows of n bytes (row1 null: the odd k's
// missing partner), for producers that build B two rows at a time (im2col).
void IgemmPackBPair(int64_t k, int64_t n, int64_t p, const uint8_t* row0, const uint8_t* row1, bool is_signed,
                    uint8_t* dst);

// B (k x n, 8-bit) widened: panels of kIgemmCols columns, each [k pairs][2
// halves][8 columns][2] int16 (half 0: columns 0-7, half 1: 8-15; a column's
// pair (B[2p][j], B[2p+1][j]) adjacent), the values themselves (int8
// sign-extended, no flip), columns past n and the odd k's partner zero.
// IgemmPackBWideSize int16 elements.
inline int64_t IgemmPackBWideSize(int64_t k, int64_t n) {
  return (n + kIgemmCols - 1) / kIgemmCols * IgemmKPairs(k) * kIgemmCols * 2;
}
void IgemmPackBWide(int64_t k, int64_t n, const uint8_t* b, int64_t ldb, bool is_signed, int16_t* dst);

// A packed B and how to read it.
struct IgemmB {
  const uint8_t* data = nullptr;  // int16 elements when `wide`
  int64_t k = 0, n = 0;
  bool is_signed = false;  // int8 (8-bit layout: packed with the top bit flipped)
  bool wide = false;       // IgemmPackBWide's layout
  int64_t panels() const { return (n + kIgemmCols - 1) / kIgemmCols; }
};

// B packed once and kept (a constant operand: weights), widened.
struct IgemmPackedB {
  IgemmPackedB(int64_t k, int64_t n, const uint8_t* b, int64_t ldb, bool is_signed)
      : data(static_cast<size_t>(IgemmPackBWideSize(k, n))), k(k), n(n), is_signed(is_signed) {
    IgemmPackBWide(k, n, b, ldb, is_signed, data.data());
  }
  IgemmB view() const { return {reinterpret_cast<const uint8_t*>(data.data()), k, n, is_signed, true}; }
  std::vector<int16_t> data;
  int64_t k, n;
  bool is_signed;
};

// Optional float epilogue: instead of int32 C, out[i][j] = float(C[i][j]) *
// scale[j * scale_stride] (+ bias[j] when bias is set), each step rounded
// once, in that order: the same float operations as Cast, Mul by the scale,
// Add of the bias (com.microsoft MatMulIntegerToFloat), so the result is that
// of those three ops run one after another.
struct IgemmFloatOut {
  float* out = nullptr;
  int64_t ldo = 0;
  const float* scale = nullptr;
  int64_t scale_stride = 0;
  const float* bias = nullptr;
};

// C's row panels [row_panel_begin, row_panel_end) x B's column panels
// [col_panel_begin, col_panel_end) on the calling thread; zb[j * zb_stride]
// is B's zero point for column j (zb_stride 0: one zero point). Each element
// is computed the same way whichever range holds it.
// With `fout`, C goes through its float epilogue instead (c, ldc unused).
void IgemmRange(const IgemmPackedA& a, const IgemmB& b, const int32_t* zb, int64_t zb_stride, int32_t* c,
                int64_t ldc, int64_t row_panel_begin, int64_t row_panel_end, int64_t col_panel_begin,
                int64_t col_panel_end, const IgemmFloatOut* fout = nullptr);

// All of C, its tiles shared out over the context's threads (null: this thread).
void Igemm(const KernelContext* ctx, const IgemmPackedA& a, const IgemmB& b, const int32_t* zb, int64_t zb_stride,
           int32_t* c, int64_t ldc, const IgemmFloatOut* fout = nullptr);

// Which kernel IgemmRange uses now ("avx2" or "portable"); it follows
// SgemmPortableForced() / SgemmLimitIsa like the float kernels.
const char* IgemmKernelName();

}  // namespace nee::cpu

namespace nee::cpu {

// ---- u8 x s8, exact (igemm_u8s8.cc, igemm_vnni.cc) ---------------------------------
//
// On AVX-512 VNNI: vpdpbusd adds the four u8 x s8 products of each int32 lane
// without saturating, so B is packed as it is (IgemmPackedBS8::exact) and the
// tile is 8 rows (kIgemmRowsVnni) x two 16-column panels, zero points and
// the float epilogue applied in registers. On AVX2:
// vpmaddubsw multiplies unsigned bytes by signed bytes and adds each pair of
// products into int16 with saturation; with A's bytes in [0, 255] a pair
// (b0, b1) of B saturates only when both have one sign and |b0| + |b1| > 128
// (255 * 128 = 32640 fits). Such pairs are rare in quantized weights (0.04% of
// BERT's), so B is packed with the second weight of each such pair clamped to
// |b0| + |b1| = 128 and the remainder kept in a short list per column panel,
// added to the tile's sums as scalar products before they leave it: the
// result is exact. Per 32 multiply-adds this is vpmaddubsw, vpmaddwd by ones
// and vpaddd (three ops) instead of two vpmaddwd and two vpaddd. Used for
// uint8 A (DynamicQuantizeLinear's output) times a constant int8 B whose
// remainders are few (IgemmPackBS8 declines otherwise; never for VNNI).

// On AVX-512 VNNI the tile is kIgemmRowsVnni rows x two B panels (32 columns):
// 16 zmm accumulators, and BERT's 128 rows are 16 whole panels.
constexpr int64_t kIgemmRowsVnni = 8;

// A (m x k, uint8, row-major): panels of panel_rows rows (kIgemmRowsVnni when
// packed for the VNNI kernel, else kIgemmRows), each [k quads][rows][4]
// bytes, zero padded; the raw row sums (sum_k A[i][k]).
struct IgemmPackedAU8 {
  int64_t m = 0, k = 0;
  int64_t panel_rows = kIgemmRows;
  std::vector<uint8_t> data;
  std::vector<int32_t> row_sums;
};
// Packs for the kernel IgemmU8S8 would run now (panel_rows follows it).
void IgemmPackAU8(int64_t m, int64_t k, const uint8_t* a, int64_t lda, IgemmPackedAU8* out);

struct IgemmPackedBS8 {
  struct Remainder {
    int32_t k;  // row of B
    int32_t j;  // column within its panel
    int32_t r;  // B[k][j] minus the packed value
  };
  int64_t k = 0, n = 0;
  // Packed for the VNNI kernel: B's bytes as they are, no clamping, no
  // remainders (vpdpbusd cannot saturate). Only the VNNI and the portable
  // kernels may read such a B; IgemmU8S8 picks one of them when the ISA was
  // lowered after packing.
  bool exact = false;
  std::vector<int8_t> data;                  // panels of kIgemmCols columns: [k quads][2 halves][8 columns][4]
  std::vector<int32_t> col_sums;             // sum_k B[k][j] (the original values)
  std::vector<int64_t> remainder_begin;      // per column panel, into remainders (panels + 1)
  std::vector<Remainder> remainders;
};
// Packs int8 B (k x n) for the kernel IgemmU8S8 would run now: exact (no
// remainders, never declined) when it is the VNNI one; else clamped, and
// false (nothing usable) when more than max_remainder_fraction of B's pairs overflow.
bool IgemmPackBS8(int64_t k, int64_t n, const int8_t* b, int64_t ldb, double max_remainder_fraction,
                  IgemmPackedBS8* out);
// Whether the u8 x s8 kernel runs on this machine now (AVX2 or VNNI, not forced portable).
bool IgemmU8S8Available();
// Which u8 x s8 kernel IgemmU8S8 runs now: "vnni", "avx2" or "portable".
const char* IgemmU8S8KernelName();
// C = (A - za[i]) (B - zb[j]) over the context's threads, as Igemm (int32 C, or fout's float epilogue);
// za[i * za_stride], zb[j * zb_stride].
void IgemmU8S8(const KernelContext* ctx, const IgemmPackedAU8& a, const IgemmPackedBS8& b, const int32_t* za,
               int64_t za_stride, const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc,
               const IgemmFloatOut* fout = nullptr);

// ---- u8 x s8 on AVX2, two k quads a chain (igemm_u8s8_paired.cc) -----------------
//
// MatMulInteger's product on AVX2 hosts without VNNI: the int8 weights are
// broadcast and uint8 A is the vector operand (tiles of 4 columns of B x 16
// rows of A), and two k quads' vpmaddubsw pair sums are added in int16 before
// one vpmaddwd by ones: three multiplies per 64 multiply-adds where IgemmU8S8
// takes four. Exact: each int16 lane's four weights are clamped at packing so
// that neither their positive nor their negative parts exceed 128 in
// magnitude, and the excess of each clamped weight is added back per tile in
// registers (remainders, per column).

constexpr int64_t kIgemmPairedCols = 4;  // columns of B per packed panel

// Constant int8 B (k x n) packed for IgemmU8S8Paired: panels of 4 columns,
// each [k octets][2 quads][4 columns][4 bytes] (k padded with zeros to whole
// quads, and by a zero quad to an even count), clamped; an octet holds the two
// k quads the panel pairs (pairs: per panel and octet, the two quad indices,
// chosen at packing so that few groups need clamping); col_sums over the
// original values; the remainders of column j at [rem_begin[j], rem_begin[j + 1]).
struct IgemmPackedS8Paired {
  struct Remainder {
    int32_t k;        // row of B
    int32_t r;        // B[k][j] minus the packed value (an int8)
    int32_t pattern;  // r's byte at byte k % 4, the others 0: what the kernel multiplies A's quad by
  };
  int64_t k = 0, n = 0;
  std::vector<int8_t> data;
  std::vector<int32_t> col_sums;   // panels * 4 (zero past n)
  std::vector<int64_t> rem_begin;  // panels * 4 + 1
  std::vector<uint16_t> pairs;     // panels * octets * 2
  std::vector<Remainder> remainders;
};
// Whether IgemmU8S8Paired's AVX2 kernel runs now (AVX2, no VNNI, not forced
// portable); where it does not, IgemmU8S8Paired runs portable loops.
bool IgemmPairedAvailable();
// Packs B; false (nothing usable) when more than max_remainder_fraction of
// its weights would need a remainder.
bool IgemmPackS8Paired(int64_t k, int64_t n, const int8_t* b, int64_t ldb, double max_remainder_fraction,
                       IgemmPackedS8Paired* out);
// C = (A - za[i]) (B - zb[j]) for uint8 A (m x b.k, row-major, lda), into
// int32 c (ldc) or through fout, over the context's threads (null: this
// thread); za[i * za_stride], zb[j * zb_stride]. Bitwise IgemmU8S8's result.
void IgemmU8S8Paired(const KernelContext* ctx, const uint8_t* a, int64_t m, int64_t lda,
                     const IgemmPackedS8Paired& b, const int32_t* za, int64_t za_stride, const int32_t* zb,
                     int64_t zb_stride, int32_t* c, int64_t ldc, const IgemmFloatOut* fout = nullptr);

// The u8 x s8 tile both IgemmU8S8 and QLinearConv (qconv_fast.cc) run, AVX2
// or AVX-512 VNNI (vpdpbusd, exact for any bytes; chosen when the CPU has it
// and the ISA limit allows AVX-512): raw int32 sums s[r][j] (rows r < `rows` <= kIgemmRows, kIgemmCols
// columns) over `kquads` k quads of a broadcast operand (kIgemmRows rows x 4
// bytes a quad) and a vector operand (kIgemmCols columns x 4 bytes a quad):
// vpmaddubsw (exact only where no int16 pair sum can saturate: the packers'
// job), vpmaddwd by ones, vpaddd. vpmaddubsw takes the unsigned operand
// first, so the function depends on which operand is the uint8 one.
using IgemmQuadTileFn = void (*)(const void* broadcast, const void* vector, int64_t kquads, int32_t* s);
IgemmQuadTileFn IgemmQuadTile(int64_t rows, bool broadcast_unsigned);

}  // namespace nee::cpu
