// QLinearConv (1-D and 2-D, any group): bitwise the reference kernel
// (ops/quantize.cc). (QLinearAdd and QLinearLeakyRelu: qlinear_fast.cc.)
//
// QLinearConv as a GEMM per (image, group): C[m][p] = sum_k W[m][k] X[k][p]
// over K = C/group * kh * kw, output channels m as rows and output pixels p as
// columns, so that the result lands in NCHW order. On AVX2 the products are
// vpmaddubsw: X's bytes unsigned (int8 inputs are flipped by 128, their zero
// point with them), W's signed (uint8 weights are shifted down by 128, their
// zero point with them), each pair of products summed in int16, then
// vpmaddwd by ones and vpaddd into int32 — three instructions per 32
// multiply-adds. A pair sum saturates only when two weights of one sign have
// |w0| + |w1| > 128 (255 * 128 fits int16): such pairs are packed clamped
// to 128 and the remainders kept per row and k quad, multiplied by their
// quads of X (vpmaddwd) and added to the tile's sums, so the result is
// exact (7-bit weights, as --reduce-range writes them, never need one).
// Where few remainders result, the weights are cut further so that two k
// quads' pair sums add exactly in int16, and the whole tile widens them with
// one vpmaddwd per two quads (qconv_weights.cc, qconv_tile_avx2.cc).
// On AVX-512 VNNI (qconv_vnni.cc) vpdpbusd sums the four products in int32
// without saturating: the weights are packed as they are, no remainders, and
// the tiles are 12 channels x 32 pixels (TilesVnni). The zero points are
// applied afterwards, exactly, modulo 2^32 like the reference's int64 sums:
//
//   acc = bias[m] + S - zx * sum_k W[m][k] - zw[m] * sum_k X[k][p] + K * zx * zw[m]
//
// with padding read as zx (it then contributes nothing). The first three
// terms are one constant per channel; the pixel sums are formed only when a
// weight zero point is nonzero. Requantization gives the reference's double
// arithmetic's bytes (double(acc) * multiplier + y_zero_point, clamped, half to
// even; whole AVX2 tiles in registers by a proven float shortcut: qconv_tile_avx2.cc).
//
// Layouts: W in panels of kRows rows, [k quads][kRows][4] bytes, packed once
// per session; X per task, panels of kCols pixels, [k quads][kCols][4] bytes
// (pixel-major quads: the two halves of a panel are two vectors), gathered
// straight into that layout on AVX2 (GatherPackPanelAvx2, qconv_gather.cc), from x itself when
// no tap leaves the image and otherwise from a zero-point-padded copy. A last
// panel of at most 8 pixels runs on a half-width tile, one of at most 3 pixel
// by pixel, so a 7x7 image costs a little over 3 panels' work, not 4.
// Tasks are blocks of pixel panels of one (image, group); every output element
// is computed by the same instructions whatever the blocking (the narrower
// tiles form each sum from the same pairs of products), so results do not
// depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/qconv_common.h"
#include "ep/cpu/qconv_direct.h"
#include "ep/cpu/qconv_gather.h"
#include "ep/cpu/qconv_tile_avx2.h"
#include "ep/cpu/qconv_vnni.h"
#include "ep/cpu/qconv_weights.h"
#include "ops/nn_util.h"
#include "ops/op_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QCONV_X86 1
#endif

namespace nee::cpu {

namespace {

using qconv::GatherPanelRows;
using qconv::kCols;  // output pixels per tile (two vectors of eight quads)
using qconv::PackPanelPortable;
using qconv::PadImage;
using qconv::QConvGeometry;
using qconv::Requant;
using qconv::RequantRowPortable;
using qconv::PlanGeometry;
#ifdef NEE_QCONV_X86
using qconv::FinishTileAvx2;
using qconv::GatherPackPanelAvx2;
using qconv::PanelSource;
using qconv::RequantRowAvx2;
#endif

constexpr int64_t kRows = 6;    // output channels per tile
constexpr int64_t kQuadA = kRows * 4;
constexpr int64_t kQuadB = kCols * 4;
// Last panels of up to this many pixels run pixel by pixel (PixelTileAvx2, qconv_tile_avx2.cc); from 4 on the
// half tile was faster (14x14 images: 4 pixels left over).
constexpr int64_t kFewPixels = 3;
static_assert(kFewPixels <= qconv::kMaxPixelTile, "the pixel tiles' widths");
// The tile is igemm's (IgemmQuadTile: weights broadcast, pixels in vectors).
static_assert(kRows == kIgemmRows && kCols == kIgemmCols, "QLinearConv runs igemm's quad tile");
static_assert(kRows == qconv::kRowsPerPanel && kQuadB == qconv::kPanelQuadBytes, "and the VNNI tiles on its panels");

// ---- weights, packed once (qconv_weights.cc) ---------------------------------------------
using qconv::PackWeights;
using qconv::PackWeightsAvx2;
using qconv::QConvWeights;

// ---- the tile --------------------------------------------------------------------------

// Raw sums S[r][j] = sum_k W'[r][k] X'[k][j] (packed W, so clamped pairs
// without their remainders) of one tile into s (kRows x kCols), modulo 2^32.
void TilePortable(int64_t rows, const int8_t* w, const uint8_t* x, int64_t kquads, int32_t* s) {
  uint32_t acc[kRows][kCols] = {};
  for (int64_t q = 0; q < kquads; ++q)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < kCols; ++j) {
        int32_t sum = 0;
        for (int t = 0; t < 4; ++t) sum += static_cast<int32_t>(w[q * kQuadA + r * 4 + t]) * x[q * kQuadB + j * 4 + t];
        acc[r][j] += static_cast<uint32_t>(sum);
      }
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t j = 0; j < kCols; ++j) s[r * kCols + j] = static_cast<int32_t>(acc[r][j]);
}

// The clamped weights' remainders times their quads of X (one panel) added to the tile's sums, wrapping as
// the sums do; row r's remainders are [begin[r], begin[r + 1]).
void AddRemaindersPortable(const qconv::TileRemainder* list, const int64_t* begin, const uint8_t* x,
                           int32_t* sums) {
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t e = begin[r]; e < begin[r + 1]; ++e) {
      const int32_t byte = (list[e].offset & qconv::kEvenBytes) ? 0 : 1;
      const uint8_t* xq = x + (list[e].offset & ~qconv::kEvenBytes) + byte;
      const auto low = static_cast<int16_t>(list[e].pair & 0xFFFF);
      const auto high = static_cast<int16_t>(static_cast<uint32_t>(list[e].pair) >> 16);
      for (int64_t j = 0; j < kCols; ++j) {
        const int32_t add = static_cast<int32_t>(xq[j * 4]) * low + static_cast<int32_t>(xq[j * 4 + 2]) * high;
        sums[r * kCols + j] = static_cast<int32_t>(static_cast<uint32_t>(sums[r * kCols + j]) + static_cast<uint32_t>(add));
      }
    }
}

#ifdef NEE_QCONV_X86
// The same with one multiply per eight pixels: a quad's 16-bit halves shifted right by 8 are its bytes 1 and
// 3 (shifted left by 8 first, bytes 0 and 2), multiplied by the two remainders and summed in int32 by vpmaddwd;
// a row's products summed in registers and added to its sums once.
__attribute__((target("avx2"))) void AddRemaindersAvx2(const qconv::TileRemainder* list, const int64_t* begin,
                                                       const uint8_t* x, int32_t* sums) {
  for (int64_t r = 0; r < kRows; ++r) {
    if (begin[r] == begin[r + 1]) continue;
    __m256i lo = _mm256_setzero_si256(), hi = lo;
    for (const auto* e = list + begin[r]; e != list + begin[r + 1]; ++e) {
      const __m256i v = _mm256_set1_epi32(e->pair);
      const uint8_t* xq = x + (e->offset & ~qconv::kEvenBytes);
      const __m128i up = _mm_cvtsi32_si128((e->offset & qconv::kEvenBytes) * 8);
      const __m256i x0 = _mm256_sll_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(xq)), up);
      const __m256i x1 = _mm256_sll_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(xq + 32)), up);
      lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_srli_epi16(x0, 8), v));
      hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_srli_epi16(x1, 8), v));
    }
    __m256i* s = reinterpret_cast<__m256i*>(sums + r * kCols);
    _mm256_storeu_si256(s, _mm256_add_epi32(_mm256_loadu_si256(s), lo));
    _mm256_storeu_si256(s + 1, _mm256_add_epi32(_mm256_loadu_si256(s + 1), hi));
  }
}
#endif


// ---- one task: a block of pixel panels of one (image, group) ------------------------------

struct QConvRun {
  const QConvGeometry* g;
  const QConvWeights* w;
  const Requant* q;
  bool avx2;    // x86 SIMD packing and requantization, AVX2 tiles
  bool vnni;    // with the AVX-512 VNNI tiles instead (weights packed unclamped)
  bool vbmi;    // and AVX-512 VBMI's byte permute packing the panels
  uint8_t pad;  // the (flipped) input zero point
};

// Where a block's panels of X come from: AVX2 packs them straight from `source`; the portable path gathers
// rows from the padded copy, or takes a pointwise conv's rows from x itself.
struct BlockSource {
  const uint8_t* padded;
  const uint8_t* x_direct;
#ifdef NEE_QCONV_X86
  PanelSource source;
#endif
};

// The block's panels of X, packed, and with weight zero points each pixel's sum over k.
void PackBlock(const QConvRun& run, const BlockSource& from, int64_t panel_begin, int64_t npanels, uint8_t* block,
               uint8_t* rows, int32_t* pixel_sums) {
  const QConvGeometry& g = *run.g;
  const int64_t K = g.K(), P = g.P(), kquads = run.w->kquads;
  for (int64_t b = 0, pair_end = -1; b < npanels; ++b) {
    const int64_t p0 = (panel_begin + b) * kCols;
    uint8_t* dst = block + b * kquads * kQuadB;
#ifdef NEE_QCONV_X86
    // Whole pointwise panels several at once: four on VBMI (each row's 64-byte line read once), two on AVX2.
    if (run.avx2 && b >= pair_end) {
      if (run.vbmi && b + 4 <= npanels &&
          qconv::GatherPackFourPanelsVbmi(g, from.source, p0, run.pad, dst, kquads * kQuadB))
        pair_end = b + 4;
      else if (!run.vbmi && b + 1 < npanels &&
          qconv::GatherPackPanelPairAvx2(g, from.source, p0, run.pad, dst, dst + kquads * kQuadB))
        pair_end = b + 2;
      else
        GatherPackPanelAvx2(g, from.source, p0, run.pad, dst, run.vbmi);
    }
#endif
    if (!run.avx2) {
      const uint8_t* src = rows;
      int64_t ld = kCols;
      if (from.x_direct && p0 + kCols <= P) {
        src = from.x_direct + p0;  // a pointwise conv over unflipped input: X's rows are the GEMM's
        ld = P;
      } else {
        GatherPanelRows(g, from.padded, p0, run.pad, rows);
      }
      PackPanelPortable(src, ld, K, run.pad, dst);
    }
    if (!run.q->any_zw) continue;
    // Every byte of the panel less the rows past K (read as the zero point), wrapping like the sums.
    for (int64_t j = 0; j < kCols; ++j) {
      uint32_t sum = 0;
      for (int64_t q = 0; q < kquads; ++q)
        for (int t = 0; t < 4; ++t) sum += dst[q * kQuadB + j * 4 + t];
      pixel_sums[b * kCols + j] = static_cast<int32_t>(sum - static_cast<uint32_t>(4 * kquads - K) * run.pad);
    }
  }
}

// A tile's sums (rows from channel m0) plus the zero-point terms, requantized row by row into out (rows P
// bytes apart, count pixels each).
void RequantTile(const QConvRun& run, int64_t m0, int64_t rows, const int32_t* sums, const int32_t* pixel_sums,
                 int64_t count, uint8_t* out) {
  const Requant& q = *run.q;
  alignas(32) int32_t acc[kCols];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = m0 + r;
    const uint32_t c = static_cast<uint32_t>(q.constant[m]);
    const int32_t* s = sums + r * kCols;
    if (q.any_zw) {
      const uint32_t zw = static_cast<uint32_t>(q.zw[m]);
      for (int64_t j = 0; j < kCols; ++j)
        acc[j] = static_cast<int32_t>(static_cast<uint32_t>(s[j]) + c - zw * static_cast<uint32_t>(pixel_sums[j]));
    } else {
      for (int64_t j = 0; j < kCols; ++j) acc[j] = static_cast<int32_t>(static_cast<uint32_t>(s[j]) + c);
    }
    uint8_t* row = out + r * run.g->P();
#ifdef NEE_QCONV_X86
    if (run.avx2) RequantRowAvx2(acc, count, q.mult[m], q, row);
#endif
    if (!run.avx2) RequantRowPortable(acc, count, q.mult[m], q, row);
  }
}

// A block's last panel, where it holds at most `few` pixels (a 7x7 image's 49th), with its pixels' quads side by
// side (CompactFewPixels) in the calling thread's buffer, once per block: the pixel tiles would read 4 bytes a
// pixel of every 64-byte line of the panel for every row panel. Null where the last panel has more.
const uint8_t* CompactLastFewPixels(const uint8_t* block, int64_t panel_begin, int64_t npanels, int64_t panel_bytes,
                                    int64_t P, int64_t kquads, int64_t few) {
  if (npanels <= 0) return nullptr;
  const int64_t count = std::min(kCols, P - (panel_begin + npanels - 1) * kCols);
  if (count > few) return nullptr;
  thread_local std::vector<uint8_t> t_few;  // grow-only
  if (t_few.size() < static_cast<size_t>(kquads * count * 4)) t_few.resize(static_cast<size_t>(kquads * count * 4));
  qconv::CompactFewPixels(block + (npanels - 1) * panel_bytes, kquads, count, t_few.data());
  return t_few.data();
}

#ifdef NEE_QCONV_X86
// A tile's sums for one pixel panel (rows from channel m0, kCols apart), requantized into y.
void FinishPanel(const QConvRun& run, int64_t m0, int64_t rows, const int32_t* sums, const int32_t* pixel_sums,
                 int64_t p0, uint8_t* y) {
  const int64_t P = run.g->P(), count = std::min(kCols, P - p0);
  if (!run.q->any_zw && run.q->small_multipliers)
    qconv::FinishTileAvx512(sums, rows, count, run.q->constant + m0, run.q->mult + m0, run.q->mult_f + m0, *run.q,
                            y + m0 * P + p0, P);
  else
    RequantTile(run, m0, rows, sums, pixel_sums, count, y + m0 * P + p0);
}

// On several threads, AVX2 convs over images of at most this many pixel panels split their output channels among
// the threads (RunImageByRows) instead of their pixels.
constexpr int64_t kAvx2ByRowsPanels = 16;

// Up to this many k quads a pair of whole pixel panels runs as two whole tiles requantized in registers.
constexpr int64_t kWholePairQuads = 128;

// The block's tiles on VNNI: twelve output channels (two weight panels) at a time, over pairs of full pixel
// panels (32 pixels), then a panel alone, a last one of at most eight pixels on the half tile, of at most
// three pixel by pixel. The weights are unclamped: no remainders.
// Row panels [rp_begin, rp_end) of the group (all of them by default; even bounds).
void TilesVnni(const QConvRun& run, int64_t grp, const uint8_t* block, int64_t panel_begin, int64_t npanels,
               const int32_t* pixel_sums, uint8_t* y, int64_t rp_begin = 0, int64_t rp_end = -1) {
  const QConvGeometry& g = *run.g;
  const QConvWeights& w = *run.w;
  const int64_t P = g.P(), kquads = w.kquads, ppg = w.panels_per_group;
  const int64_t x_panel = kquads * kQuadB, w_panel = kquads * kQuadA;
  alignas(64) int32_t sums[qconv::kVnniSums];
  const bool in_registers = !run.q->any_zw && run.q->small_multipliers;  // whole tiles requantized there
  const uint8_t* few = CompactLastFewPixels(block, panel_begin, npanels, x_panel, P, kquads, qconv::kVnniFewPixels);
  for (int64_t rp = rp_begin; rp < (rp_end < 0 ? ppg : rp_end); rp += 2) {
    const int64_t rows = std::min(qconv::kVnniRows, g.Mg - rp * kRows), m0 = grp * g.Mg + rp * kRows;
    const int8_t* wp = w.data.data() + (grp * ppg + rp) * w_panel;
    const bool whole_rows = in_registers && rows == qconv::kVnniRows;
    for (int64_t b = 0; b < npanels;) {
      const uint8_t* xp = block + b * x_panel;
      const int64_t p0 = (panel_begin + b) * kCols, count = std::min(kCols, P - p0);
      const int32_t* ps = run.q->any_zw ? pixel_sums + b * kCols : nullptr;
      const bool pair = b + 1 < npanels && P - p0 > kCols + kCols / 2;  // the second more than half full
      // A pair of panels too where K is small (at most 512: 1x1 convs over 64 channels ran 7% faster, over 256
      // 3% faster), not where the two-panel tile's halved weight reads matter (K = 4608: 4% slower).
      if (whole_rows && count == kCols && (!pair || (P - p0 >= 2 * kCols && kquads <= kWholePairQuads))) {
        const int64_t n = pair ? 2 : 1;
        for (int64_t i = 0; i < n; ++i)
          qconv::WholeTileVnni(wp, w_panel, xp + i * x_panel, kquads,
                               qconv::VnniTileOut{run.q, m0, y + m0 * P + p0 + i * kCols, P});
        b += n;
        continue;
      }
      if (pair) {
        qconv::VnniTile(rows, 2)(wp, w_panel, xp, x_panel, kquads, sums);
        if (!run.q->any_zw && run.q->small_multipliers) {
          qconv::FinishTilesAvx512(sums, rows, kCols, true, std::min(kCols, P - p0 - kCols), run.q->constant + m0,
                                   run.q->mult + m0, run.q->mult_f + m0, *run.q, y + m0 * P + p0, P);
        } else {
          FinishPanel(run, m0, rows, sums, ps, p0, y);
          FinishPanel(run, m0, rows, sums + qconv::kVnniRows * kCols, ps ? ps + kCols : nullptr, p0 + kCols, y);
        }
        b += 2;
        continue;
      }
      if (count <= qconv::kVnniFewPixels) {
        qconv::VnniPixelTile(count)(rows, wp, w_panel, few, kquads, sums);
      } else if (count <= kCols / 2) {
        qconv::VnniHalfTile(rows)(wp, w_panel, xp, x_panel, kquads, sums);
      } else {
        qconv::VnniTile(rows, 1)(wp, w_panel, xp, x_panel, kquads, sums);
      }
      FinishPanel(run, m0, rows, sums, ps, p0, y);
      ++b;
    }
  }
}
#endif

// The tiles of row panels [rp_begin, rp_end) of the group (all of them by default) over a block's packed
// panels of X (AVX2 or portable): each row panel's weights stay in L1 while its tiles run over the block.
void Tiles(const QConvRun& run, int64_t grp, const uint8_t* block, int64_t panel_begin, int64_t npanels,
           const int32_t* pixel_sums, uint8_t* y, int64_t rp_begin = 0, int64_t rp_end = -1) {
  const QConvGeometry& g = *run.g;
  const QConvWeights& w = *run.w;
  const int64_t P = g.P(), kquads = w.kquads;
  const int64_t ppg = w.panels_per_group, panel_bytes = kquads * kQuadB;
  alignas(32) int32_t sums[kRows * kCols];
  const uint8_t* few = run.avx2 ? CompactLastFewPixels(block, panel_begin, npanels, panel_bytes, P, kquads, kFewPixels)
                                : nullptr;
  for (int64_t rp = rp_begin; rp < (rp_end < 0 ? ppg : rp_end); ++rp) {
    const int64_t panel = grp * ppg + rp;
    const int64_t rows_here = std::min(kRows, g.Mg - rp * kRows), m0 = grp * g.Mg + rp * kRows;
    const int8_t* wp = w.data.data() + panel * kquads * kQuadA;
    const int64_t* rem_begin = w.remainder_begin.data() + panel * kRows;  // per row, into w.remainders
    const bool any_remainders = rem_begin[0] != rem_begin[kRows];
    int64_t b = 0;
#ifdef NEE_QCONV_X86
    if (run.avx2 && !run.q->any_zw && run.q->small_multipliers) {
      // The block's whole pixel panels in one call (sums kept in registers), the tile chosen once.
      const int64_t whole = std::min(npanels, P / kCols - panel_begin);
      if (whole > 0)
        qconv::WholeTilesRequantAvx2(rows_here, w.paired, wp, block, panel_bytes, whole, kquads, w.remainders.data(),
                                     rem_begin, w.remainder_odd.data() + panel * kRows, w.pass_slots.data(),
                                     w.paired ? w.pass_slot_begin.data() + 2 * panel : nullptr, *run.q, m0,
                                     y + m0 * P + panel_begin * kCols, P);
      b = std::max<int64_t>(0, whole);
    }
#endif
    for (; b < npanels; ++b) {
      const uint8_t* xp = block + b * panel_bytes;
      const int64_t p0 = (panel_begin + b) * kCols, count = std::min(kCols, P - p0);
      // The tile, its remainders while the end of its panel of X is still in L1, its outputs.
#ifdef NEE_QCONV_X86
      if (run.avx2) {
        if (count <= kFewPixels) {
          qconv::PixelTileAvx2(count, w.paired, rows_here, wp, few, kquads, sums);
        } else if (count <= kCols / 2) {
          qconv::HalfTileAvx2(rows_here, w.paired, wp, xp, kquads, sums);
        } else {
          IgemmQuadTile(rows_here, false)(wp, xp, kquads, sums);
        }
        if (any_remainders) AddRemaindersAvx2(w.remainders.data(), rem_begin, xp, sums);
        if (!run.q->any_zw && run.q->small_multipliers) {
          (count <= kFewPixels ? qconv::FinishFewPixelsAvx2 : FinishTileAvx2)(
              sums, rows_here, count, run.q->constant + m0, run.q->mult + m0, *run.q, y + m0 * P + p0, P);
          continue;
        }
      }
#endif
      if (!run.avx2) {
        TilePortable(rows_here, wp, xp, kquads, sums);
        AddRemaindersPortable(w.remainders.data(), rem_begin, xp, sums);
      }
      RequantTile(run, m0, rows_here, sums, run.q->any_zw ? pixel_sums + b * kCols : nullptr, count,
                  y + m0 * P + p0);
    }
  }
}

void RunBlock(const QConvRun& run, int64_t grp, const BlockSource& from, int64_t panel_begin, int64_t panel_end,
              uint8_t* y, std::vector<uint8_t>& scratch) {
  const QConvGeometry& g = *run.g;
  const QConvWeights& w = *run.w;
  const int64_t K = g.K(), kquads = w.kquads, npanels = panel_end - panel_begin;
  const size_t block_bytes = static_cast<size_t>(npanels * kquads * kQuadB);
  const size_t rows_bytes = run.avx2 ? 0 : static_cast<size_t>((K + 1) * kCols);
  // The panels 64-byte aligned: a quad of pixels is one cache line, and no vector load splits one.
  if (scratch.size() < block_bytes + rows_bytes + 64) scratch.resize(block_bytes + rows_bytes + 64);
  uint8_t* block = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  std::vector<int32_t> pixel_sums(run.q->any_zw ? static_cast<size_t>(npanels * kCols) : 0);
  PackBlock(run, from, panel_begin, npanels, block, block + block_bytes, pixel_sums.data());
#ifdef NEE_QCONV_X86
  if (run.vnni) return TilesVnni(run, grp, block, panel_begin, npanels, pixel_sums.data(), y);
#endif
  Tiles(run, grp, block, panel_begin, npanels, pixel_sums.data(), y);
}

#ifdef NEE_QCONV_X86
// A small image (few pixel panels; on AVX2 at most kAvx2ByRowsPanels, several threads): its panels packed once
// into one buffer (a task per panel), then the threads split the output channels (VNNI: pairs of row panels),
// each running its rows over every panel. Blocks of
// pixels instead had each block stream all the weights (a 3x3 conv over 512 channels at 7x7: 2.4 MB) over one
// or two panels, and on several threads the lone panel's tiles ran on one thread only.
void RunImageByRows(KernelContext& ctx, const QConvRun& run, int64_t grp, const BlockSource& from, int64_t panels,
                    uint8_t* y, std::vector<uint8_t>& packed) {
  const int64_t kquads = run.w->kquads, panel_bytes = kquads * kQuadB, ppg = run.w->panels_per_group;
  if (packed.size() < static_cast<size_t>(panels * panel_bytes + 64)) packed.resize(static_cast<size_t>(panels * panel_bytes + 64));
  uint8_t* block = packed.data() + (64 - reinterpret_cast<uintptr_t>(packed.data()) % 64) % 64;
  std::vector<int32_t> pixel_sums(run.q->any_zw ? static_cast<size_t>(panels * kCols) : 0);
  ctx.ParallelFor(panels, 1, [&](int64_t begin, int64_t end) {
    PackBlock(run, from, begin, end - begin, block + begin * panel_bytes, nullptr,
              run.q->any_zw ? pixel_sums.data() + begin * kCols : nullptr);
  });
  if (run.vnni) {
    const int64_t pairs = (ppg + 1) / 2;
    ctx.ParallelFor(pairs, 1, [&](int64_t begin, int64_t end) {
      TilesVnni(run, grp, block, 0, panels, pixel_sums.data(), y, 2 * begin, std::min(ppg, 2 * end));
    });
    return;
  }
  // AVX2: a thread's row panels over groups of panels that stay in L2 with them (as PlanPanelBlocks blocks).
  const int64_t fit = std::max<int64_t>(1, (96 * 1024) / panel_bytes);
  ctx.ParallelFor(ppg, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b0 = 0; b0 < panels; b0 += fit)
      Tiles(run, grp, block + b0 * panel_bytes, b0, std::min(fit, panels - b0),
            run.q->any_zw ? pixel_sums.data() + b0 * kCols : nullptr, y, begin, end);
  });
}
#endif

// A per-tensor or per-channel input's value for channel m (already checked to hold 1 or M values).
double ValueAt(const Tensor& t, int64_t m) { return ReadAsDouble(t, t.num_elements() == 1 ? 0 : m); }

// All M values of a per-tensor or per-channel float scale or 8-bit zero point, read in one typed loop
// (ValueAt per channel dispatched on the type for every element: ~20 us a call for 960 channels).
std::vector<double> PerChannel(const Tensor& t, int64_t M) {
  std::vector<double> v(static_cast<size_t>(M));
  const bool one = t.num_elements() == 1;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t i = one ? 0 : m;
    switch (t.dtype()) {
      case DataType::kFloat: v[static_cast<size_t>(m)] = t.data<float>()[i]; break;
      case DataType::kInt8: v[static_cast<size_t>(m)] = t.data<int8_t>()[i]; break;
      case DataType::kUint8: v[static_cast<size_t>(m)] = t.data<uint8_t>()[i]; break;
      default: v[static_cast<size_t>(m)] = ReadAsDouble(t, i);
    }
  }
  return v;
}

// What turns a node's sums into its output bytes (Requant, pointing into this), and where each row of X's
// taps starts: formed once per session when the scales, zero points, weights and bias are constant (forming
// them each call took ~6 us, 1% of ResNet-50 int8).
struct QConvRequantPlan {
  std::vector<double> mult;  // as the reference forms them: float(float(xs * ws) / ys), in double
  std::vector<float> mult_f;
  std::vector<int32_t> constant, zw;
  bool finite = true;  // every multiplier finite (else the reference runs)
  int32_t zx = 0;      // the input zero point, shifted (int8: + 128)
  Requant q;
  // PanelSource::taps for the zero-point-padded copy and for x itself: per row k of X (channel c, tap (i, j)),
  // where its plane starts.
  std::vector<int64_t> taps_padded, taps_direct;
  std::vector<int32_t> depthwise_quads;  // PackDepthwiseQuads: empty unless the VNNI depthwise kernel can run
  qconv::DepthwiseLanes depthwise_lanes;  // PackDepthwiseLanes: empty unless a depthwise conv of 16+ channels
};

std::vector<int64_t> TapOffsets(const QConvGeometry& g, int64_t plane, int64_t row) {
  std::vector<int64_t> taps;
  taps.reserve(static_cast<size_t>(g.K()));
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) taps.push_back(c * plane + i * g.dh * row + j * g.dw);
  return taps;
}

// in: QLinearConvFast's eight inputs, checked.
std::shared_ptr<const QConvRequantPlan> PlanRequant(const QConvGeometry& g, const Tensor* const* in,
                                                    const Tensor* bias, const QConvWeights& weights) {
  const Tensor &x = *in[0], &x_scale = *in[1], &x_zp = *in[2], &w = *in[3], &w_scale = *in[4], &w_zp = *in[5],
               &y_scale = *in[6], &y_zp = *in[7];
  auto plan = std::make_shared<QConvRequantPlan>();
  const size_t M = static_cast<size_t>(g.M);
  plan->mult.resize(M);
  const double xs = ValueAt(x_scale, 0), ys = ValueAt(y_scale, 0);
  const std::vector<double> w_scales = PerChannel(w_scale, g.M), w_zero_points = PerChannel(w_zp, g.M);
  for (size_t m = 0; m < M; ++m) {
    const double ab = static_cast<float>(xs * w_scales[m]);
    plan->mult[m] = static_cast<float>(ab / ys);
    plan->finite = plan->finite && std::isfinite(plan->mult[m]);
  }
  plan->mult_f.assign(plan->mult.begin(), plan->mult.end());
  // Zero points in the shifted domains: x' = x ^ 0x80 for int8, w' = w - 128 for uint8.
  const bool x_signed = x.dtype() == DataType::kInt8, w_unsigned = w.dtype() == DataType::kUint8;
  const int32_t zx = static_cast<int32_t>(ValueAt(x_zp, 0)) + (x_signed ? 128 : 0);
  plan->zx = zx;
  plan->constant.resize(M);
  plan->zw.resize(M);
  bool any_zw = false;
  const auto K = static_cast<uint32_t>(g.K());
  for (size_t m = 0; m < M; ++m) {
    const int32_t z = static_cast<int32_t>(w_zero_points[m]) - (w_unsigned ? 128 : 0);
    plan->zw[m] = z;
    any_zw = any_zw || z != 0;
    const uint32_t b = bias ? static_cast<uint32_t>(bias->data<int32_t>()[m]) : 0;
    plan->constant[m] = static_cast<int32_t>(b - static_cast<uint32_t>(zx) * static_cast<uint32_t>(weights.row_sums[m]) +
                                             K * static_cast<uint32_t>(zx) * static_cast<uint32_t>(z));
  }
  Requant& q = plan->q;
  q.mult = plan->mult.data();
  q.mult_f = plan->mult_f.data();
  q.constant = plan->constant.data();
  q.zw = plan->zw.data();
  q.any_zw = any_zw;
  q.y_signed = y_zp.dtype() == DataType::kInt8;
  q.yzp = ValueAt(y_zp, 0);
  q.lo = q.y_signed ? -128 : 0;
  q.hi = q.y_signed ? 127 : 255;
  q.small_multipliers = std::all_of(plan->mult.begin(), plan->mult.end(), [](double v) { return std::fabs(v) < 0.5; });
  // The tiles' one-fma requantization (RoundingFmaExact), decided per channel from the largest sum its
  // weights allow: |x' - zx| <= 255 for every input byte and |W' - zw| <= |W'| + |zw| (the weights tensor
  // itself may be gone: the session drops a constant input once it is packed).
  if (q.small_multipliers) {
    q.float_exact = true;
    for (size_t m = 0; m < M && q.float_exact; ++m) {
      const double weights_abs = weights.row_abs_sums[m] + static_cast<double>(K) * std::abs(plan->zw[m]);
      const double b = bias ? std::fabs(static_cast<double>(bias->data<int32_t>()[m])) : 0.0;
      q.float_exact = RoundingFmaExact(plan->mult[m], plan->mult_f[m], q.yzp, 255.0 * weights_abs + b);
    }
  }
  plan->taps_padded = TapOffsets(g, g.hp * g.wp, g.wp);
  plan->taps_direct = TapOffsets(g, g.ih * g.iw, g.iw);
#ifdef NEE_QCONV_X86
  if (!weights.taps.empty() && q.small_multipliers)
    plan->depthwise_quads = qconv::PackDepthwiseQuads(g, weights.taps, plan->zw.data());
  const bool vnni_depthwise = !plan->depthwise_quads.empty() && qconv::QConvVnniActive() && qconv::QConvHasVbmi();
  if (!weights.taps.empty() && g.Cg == 1 && g.Mg == 1 && g.C >= 16 && !vnni_depthwise)  // the AVX2 kernel's
    plan->depthwise_lanes =
        qconv::PackDepthwiseLanes(g, weights.taps, plan->zw.data(), plan->constant.data(), plan->mult.data());
#endif
  return plan;
}

// How a conv's pixel panels are shared out and run. The threads take units of panels (VNNI: pairs, so that
// no block but an image's last ends on a lone panel, a 12 x 16 tile where the two-panel tile reads each weight
// quad once for both), and the pool cuts each thread's share into chunks that get smaller towards its end
// (base/thread_pool.h), down to one unit: the thread that runs a little faster takes the other's last units
// instead of waiting for them. Fixed blocks, two to four a thread, had the caller wait ~5% of int8
// ResNet-50's two-thread run for the slower worker's last block. Each range a thread takes runs in blocks
// whose packed X stays in L2 (about 96 KB), of equal size in units.
struct PanelBlocks {
  int64_t panels = 0, unit = 1, units_per_block = 1;

  int64_t units() const { return (panels + unit - 1) / unit; }
  // Calls run(first, last) for the blocks of panels that units [begin, end) make.
  template <typename Run>
  void ForEachBlock(int64_t begin, int64_t end, Run&& run) const {
    const int64_t count = end - begin, blocks = (count + units_per_block - 1) / units_per_block;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = (begin + b * count / blocks) * unit;
      const int64_t last = std::min(panels, (begin + (b + 1) * count / blocks) * unit);
      if (first < last) run(first, last);
    }
  }
};

PanelBlocks PlanPanelBlocks(int64_t panels, int64_t K, bool vnni) {
  PanelBlocks b;
  b.panels = panels;
  b.unit = vnni ? qconv::kVnniPanels : 1;
  const int64_t fit = std::max<int64_t>(1, (96 * 1024) / std::max<int64_t>(1, K * kCols));
  b.units_per_block = std::max<int64_t>(1, (fit + b.unit - 1) / b.unit);
  return b;
}

// PlanGeometry with the node's attributes read once per session and input shapes, as the blocked float conv's
// PlanCached: read by name on every call (kernel, strides, pads, dilations) they cost ~2 us a conv with the
// node's attributes no longer in cache after the previous conv's megabytes, on the calling thread alone while
// the others wait (ResNet-50 int8: 53 convs a run).
bool PlanGeometryCached(KernelContext& ctx, const Tensor& x, const Tensor& w, QConvGeometry& g) {
  if (!ctx.prepared()) return PlanGeometry(ctx, x, w, g);
  PreparedCache::Key key{static_cast<int64_t>(x.dtype()), static_cast<int64_t>(w.dtype()), x.rank(), w.rank()};
  key.insert(key.end(), x.dims().begin(), x.dims().end());
  key.insert(key.end(), w.dims().begin(), w.dims().end());
  auto planned = ctx.prepared()->GetOrBuild<QConvGeometry>(key, [&]() -> Result<std::shared_ptr<const QConvGeometry>> {
    auto built = std::make_shared<QConvGeometry>();
    // Not cached when it fails: every such call runs the reference kernel, which names the problem.
    if (!PlanGeometry(ctx, x, w, *built)) return Status(StatusCode::kNotImplemented, "no fast QLinearConv geometry");
    return std::shared_ptr<const QConvGeometry>(std::move(built));
  });
  if (!planned.ok()) return false;
  g = *planned.value();
  return true;
}

bool IsScalarOrVector(const Tensor& t, int64_t n) {
  return t.num_elements() == 1 ? t.rank() <= 1 : (t.rank() == 1 && t.dim(0) == n);
}

}  // namespace

Status QLinearConvFast(KernelContext& ctx) {
  const Tensor* in[8];
  for (size_t i = 0; i < 8; ++i) {
    if (!ctx.has_input(i) || !ctx.input(i)->is_tensor()) return RunReference(ctx);
    in[i] = &ctx.input(i)->tensor();
  }
  const Tensor &x = *in[0], &x_scale = *in[1], &x_zp = *in[2], &w = *in[3], &w_scale = *in[4], &w_zp = *in[5],
               &y_scale = *in[6], &y_zp = *in[7];
  const Tensor* bias = ctx.has_input(8) && ctx.input(8)->is_tensor() ? &ctx.input(8)->tensor() : nullptr;
  QConvGeometry g;
  if (!Is8Bit(x.dtype()) || !Is8Bit(w.dtype()) || !Is8Bit(y_zp.dtype()) || !PlanGeometryCached(ctx, x, w, g))
    return RunReference(ctx);
  if (x_scale.dtype() != DataType::kFloat || w_scale.dtype() != DataType::kFloat ||
      y_scale.dtype() != DataType::kFloat || x_zp.dtype() != x.dtype() || w_zp.dtype() != w.dtype() ||
      !IsScalarOrVector(x_scale, 1) || !IsScalarOrVector(x_zp, 1) || !IsScalarOrVector(y_scale, 1) ||
      !IsScalarOrVector(y_zp, 1) || !IsScalarOrVector(w_scale, g.M) || !IsScalarOrVector(w_zp, g.M) ||
      (bias && (bias->dtype() != DataType::kInt32 || bias->rank() != 1 || bias->dim(0) != g.M)))
    return RunReference(ctx);
  const int64_t K = g.K(), P = g.P();
  std::vector<int64_t> out_dims{g.N, g.M};
  for (int64_t d = 2; d < x.rank(); ++d) out_dims.push_back(d + 1 == x.rank() ? g.ow : g.oh);

  // Which tiles run decides how the weights are packed: clamped for AVX2's only (part of the cache key, as
  // tests lower the ISA limit between runs).
  const bool avx2 = IgemmU8S8Available(), vnni = avx2 && qconv::QConvVnniActive(), clamp = avx2 && !vnni;
  auto pack = [&]() -> std::shared_ptr<const QConvWeights> {
    return clamp ? PackWeightsAvx2(g, w) : PackWeights(g, w, false, false);
  };
  const PreparedCache::Key key{g.M, g.Cg, g.kh, g.kw, g.group, w.dtype() == DataType::kInt8 ? 1 : 0, clamp ? 1 : 0};
  std::shared_ptr<const QConvWeights> weights;
  if (ctx.prepared() && ctx.input_is_constant(3)) {
    auto built = ctx.prepared()->GetOrBuild<QConvWeights>(key, [&]() -> Result<std::shared_ptr<const QConvWeights>> {
      auto p = pack();
      ctx.DropConstantInput(3);
      return p;
    });
    if (built.ok()) weights = built.value();
  }
  if (!weights) weights = pack();

  // The requantization's per-channel values, once per session when every input they come from is constant.
  bool constant_inputs = ctx.prepared() != nullptr && (!bias || ctx.input_is_constant(8));
  for (size_t i : {1, 2, 3, 4, 5, 6, 7}) constant_inputs = constant_inputs && ctx.input_is_constant(i);
  std::shared_ptr<const QConvRequantPlan> plan;
  if (constant_inputs) {
    PreparedCache::Key plan_key = key;  // the tap offsets depend on the image's size too
    plan_key.insert(plan_key.end(), {g.ih, g.iw, g.hp, g.wp});
    auto built = ctx.prepared()->GetOrBuild<QConvRequantPlan>(
        plan_key, [&]() -> Result<std::shared_ptr<const QConvRequantPlan>> { return PlanRequant(g, in, bias, *weights); });
    if (built.ok()) plan = built.value();
  }
  if (!plan) plan = PlanRequant(g, in, bias, *weights);
  if (!plan->finite) return RunReference(ctx);  // NaN handling is the reference's
  if (g.N == 0 || g.M == 0 || P == 0) return ctx.AllocateOutput(0, y_zp.dtype(), out_dims).status();
  const std::vector<int32_t>& constant = plan->constant;
  const std::vector<int32_t>& zw = plan->zw;
  const std::vector<double>& mult = plan->mult;
  const bool x_signed = x.dtype() == DataType::kInt8;
  const int32_t zx = plan->zx;
  const Requant& q = plan->q;

  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, y_zp.dtype(), out_dims));
  const QConvRun run{&g, weights.get(), &q, avx2, vnni, vnni && qconv::QConvHasVbmi(), static_cast<uint8_t>(zx)};
  const uint8_t flip = x_signed ? 0x80 : 0;
  const auto* xb = static_cast<const uint8_t*>(x.raw_data());
  auto* yb = static_cast<uint8_t*>(y.raw_data());
  const bool direct = g.pointwise() && !x_signed;
  const int64_t panels = (P + kCols - 1) / kCols;
  const int64_t threads = ctx.pool() ? std::max<int64_t>(1, ctx.pool()->num_threads()) : 1;
  const PanelBlocks blocks = PlanPanelBlocks(panels, K, vnni);
#ifdef NEE_QCONV_X86
  if (vnni && run.vbmi && q.small_multipliers && !plan->depthwise_quads.empty()) {
    qconv::RunDepthwiseQConvVnni(ctx, g, xb, flip, static_cast<uint8_t>(zx), plan->depthwise_quads, q, yb);
    return Status::Ok();
  }
#endif
  if (RunDepthwiseQConv(ctx, g, xb, flip, static_cast<uint8_t>(zx), weights->taps, zw.data(), constant.data(),
                         mult.data(), plan->depthwise_lanes, q, yb))
    return Status::Ok();
  if (qconv::DirectQConvApplies(g, q, vnni, run.vbmi)) {
    // The weights tap-major, from the GEMM packing (its bytes are all that is left of a constant W).
    std::shared_ptr<const qconv::DirectQConvWeights> direct;
    auto repack = [&] {
      return std::make_shared<const qconv::DirectQConvWeights>(
          qconv::RepackDirect(g, weights->data.data(), weights->panels_per_group, weights->kquads));
    };
    if (ctx.prepared() && ctx.input_is_constant(3)) {
      PreparedCache::Key direct_key = key;
      direct_key.push_back(-1);  // apart from the GEMM packing under `key`
      auto built = ctx.prepared()->GetOrBuild<qconv::DirectQConvWeights>(
          direct_key, [&]() -> Result<std::shared_ptr<const qconv::DirectQConvWeights>> { return repack(); });
      if (built.ok()) direct = built.value();
    }
    if (!direct) direct = repack();
    qconv::RunDirectQConv(ctx, g, *direct, q, xb, flip, static_cast<uint8_t>(zx), yb);
    return Status::Ok();
  }
  const int64_t images = g.N * g.group;
  // The calling thread's buffers, grow-only (a few hundred KB: fresh ones cost page faults every run).
  thread_local std::vector<uint8_t> padded, packed;
  // Few pixel panels (at most four, or two per thread) and enough output channels for every thread: all panels
  // packed at once and the channels split (RunImageByRows; one thread then streams the weights once). Eight per
  // thread (a 14x14 image's thirteen on two) measured no different on this shared machine.
  // On AVX2 the same on several threads for images of up to kAvx2ByRowsPanels panels: blocks of pixel panels
  // split a 7x7 image's 3 whole panels and a pixel as 2 | 1 + 1 pixel, a 14x14 image's 12 and a half as 7 | 5.5.
  const bool by_rows = (vnni && panels <= std::max<int64_t>(4, 2 * threads) && weights->panels_per_group >= 4 * threads) ||
                       (!vnni && avx2 && threads > 1 && panels <= kAvx2ByRowsPanels &&
                        weights->panels_per_group >= 4 * threads);
  const int64_t padded_bytes = g.Cg * g.hp * g.wp + 2 * kCols;  // slack for whole-vector reads
  // No tap of any output pixel outside the image: AVX2 reads x itself.
  const bool inside = g.ph == 0 && g.pw == 0 && g.hp == g.ih && g.wp == g.iw;
  for (int64_t img = 0; img < images; ++img) {
    const int64_t n = img / g.group, grp = img % g.group;
    const uint8_t* xg = xb + (n * g.C + grp * g.Cg) * g.ih * g.iw;
    // The portable path reads a pointwise conv's full panels from x itself; a last partial panel, like every
    // panel of the others, from the copy, whose slack the whole-vector reads may run into.
    const bool copy = run.avx2 ? !inside : !direct || P % kCols != 0;
    if (copy) {
      if (padded.size() < static_cast<size_t>(padded_bytes)) padded.resize(static_cast<size_t>(padded_bytes));
#ifdef NEE_QCONV_X86
      if (run.vnni)
        qconv::PadImageAvx512(g, xg, flip, static_cast<uint8_t>(zx), padded.data());
      else if (run.avx2)
        qconv::PadImageAvx2(g, xg, flip, static_cast<uint8_t>(zx), padded.data(), 0, g.Cg);
      else
#endif
        PadImage(g, xg, flip, static_cast<uint8_t>(zx), padded.data());
    }
    BlockSource from{};
    from.padded = copy ? padded.data() : nullptr;
    from.x_direct = direct ? xg : nullptr;
#ifdef NEE_QCONV_X86
    from.source = copy ? PanelSource{padded.data(), padded.data() + padded_bytes, g.hp * g.wp, g.wp, 0, nullptr}
                       : PanelSource{xg, xb + x.byte_size(), g.ih * g.iw, g.iw, flip, nullptr};
    from.source.taps = (copy ? plan->taps_padded : plan->taps_direct).data();
#endif
    uint8_t* y_image = yb + n * g.M * P;
#ifdef NEE_QCONV_X86
    if (by_rows) {
      RunImageByRows(ctx, run, grp, from, panels, y_image, packed);
      continue;
    }
#endif
    ctx.ParallelFor(blocks.units(), 1, [&](int64_t begin, int64_t end) {
      thread_local std::vector<uint8_t> t_scratch;
      blocks.ForEachBlock(begin, end, [&](int64_t first, int64_t last) {
        RunBlock(run, grp, from, first, last, y_image, t_scratch);
      });
    });
  }
  return Status::Ok();
}

}  // namespace nee::cpu
