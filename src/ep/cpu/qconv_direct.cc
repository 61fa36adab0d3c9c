// QLinearConv's direct path (qconv_direct.h).
#include "ep/cpu/qconv_direct.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ep/cpu/qconv_gather.h"  // kQuadTranspose
#include "ep/cpu/qconv_requant_avx512.h"  // NEE_QCONV_AVX512_WARNINGS_OFF
#include "ep/cpu/qconv_vnni.h"
#include "ep/cpu/qconv_vnni_step.h"
#include "ep/cpu/parallel_tasks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QCONV_X86 1
#define NEE_DIRECT_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")))
#endif

namespace nee::cpu::qconv {

namespace {
constexpr int64_t kQuadW = kRowsPerPanel * 4;  // one k quad of a weight panel

// The most output rows a panel (pixels 16b .. 16b + 15 below P) touches, counted up to one past
// kDirectSegments. In general a partial row at each end
// and whole ones between, (kCols - 2) / ow + 2; panels start at multiples of 16, so fewer for some widths
// (14: two, where a panel starting one pixel before a row's end would touch three).
int64_t SegmentsFor(const QConvGeometry& g) {
  if (g.ow >= kCols - 1) return 2;
  int64_t most = 1;
  for (int64_t p0 = 0; p0 < g.P() && most <= kDirectSegments; p0 += kCols) {
    const int64_t last = std::min(p0 + kCols, g.P()) - 1;
    most = std::max(most, last / g.ow - p0 / g.ow + 1);
  }
  return most;
}

// The padded copy's rows: at column stride 2 each row holds its even padded columns, then its odd ones
// (`phases` runs of `run` quads), so that the pixels an output row reads through one tap are again
// contiguous: output column ox, tap column j reads padded column 2 ox + j, run j % 2, quad ox + j / 2.
struct CopyRows {
  int64_t phases, run, quads;  // quads = phases * run, a row's
  explicit CopyRows(const QConvGeometry& g) : phases(g.sw), run((g.wp + g.sw - 1) / g.sw), quads(phases * run) {}
  // Where tap (i, j) of output pixel (0, 0) lies, in quads from the plane's start.
  int64_t Tap(int64_t i, int64_t j) const { return i * quads + (j % phases) * run + j / phases; }
};
}  // namespace

bool DirectQConvApplies(const QConvGeometry& g, const Requant& q, bool vnni, bool vbmi) {
#ifdef NEE_QCONV_X86
  return vnni && vbmi && g.group == 1 && (g.sh == 1 || g.sh == 2) && (g.sw == 1 || g.sw == 2) && g.dh == 1 &&
         g.dw == 1 && g.kh * g.kw > 1 &&
         g.C % 4 == 0 && g.C > 0 && SegmentsFor(g) <= kDirectSegments && !q.any_zw && q.small_multipliers;
#else
  (void)g, (void)q, (void)vnni, (void)vbmi;
  return false;
#endif
}

DirectQConvWeights RepackDirect(const QConvGeometry& g, const int8_t* gemm_packed, int64_t panels, int64_t kquads) {
  DirectQConvWeights out;
  const int64_t taps = g.kh * g.kw, C = g.C, K = C * taps;
  out.kquads = K / 4;  // C is a multiple of four
  out.panels = panels;
  out.data.assign(static_cast<size_t>(panels * out.kquads * kQuadW), 0);
  for (int64_t p = 0; p < panels; ++p) {
    const int8_t* src = gemm_packed + p * kquads * kQuadW;
    int8_t* dst = out.data.data() + p * out.kquads * kQuadW;
    for (int64_t r = 0; r < kRowsPerPanel; ++r)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t k = c * taps + t, kd = t * C + c;
          dst[(kd / 4) * kQuadW + r * 4 + kd % 4] = src[(k / 4) * kQuadW + r * 4 + k % 4];
        }
  }
  return out;
}

#ifdef NEE_QCONV_X86
NEE_QCONV_AVX512_WARNINGS_OFF  // GCC 12's false positives inside its intrinsics
namespace {

// Where a panel's sixteen quads of tap 0, channel quad 0 lie: lane i of segment s at ptr[s] + 4 * i (the
// segments' lanes disjoint; lanes in none, past the image's last pixel, read as zero).
struct PanelLoads {
  const uint8_t* ptr[kDirectSegments];
  __mmask16 mask[kDirectSegments];
};

// The quads of pixels p0 .. p0 + 15 (those below P) in the interleaved padded copy `image`.
PanelLoads PlanPanel(const QConvGeometry& g, const CopyRows& rows, const uint8_t* image, int64_t p0) {
  PanelLoads l{};
  const int64_t end = std::min(p0 + kCols, g.P());
  int s = 0;
  for (int64_t p = p0; p < end; ++s) {
    const int64_t oy = p / g.ow, ox = p % g.ow, count = std::min(g.ow - ox, end - p), lane = p - p0;
    l.ptr[s] = image + 4 * (oy * g.sh * rows.quads + ox - lane);  // lane i's quad at ptr + 4 * i
    l.mask[s] = static_cast<__mmask16>(((1u << count) - 1) << lane);
    p += count;
  }
  for (; s < kDirectSegments; ++s) l.ptr[s] = l.ptr[0], l.mask[s] = 0;
  return l;
}

// kR output channels (two weight panels past six) x kP panels, kS segments a panel: the sums over every tap t
// (tap_bytes[t] into the copy) and channel quad (plane bytes apart) added to acc.
template <int kR, int kP, int kS>
NEE_DIRECT_TARGET __attribute__((always_inline)) inline void DirectSums(__m512i (&acc)[kR][kP], const int8_t* w,
                                                                        int64_t w_panel, const PanelLoads* panels,
                                                                        const int64_t* tap_bytes, int64_t taps,
                                                                        int64_t cquads, int64_t plane) {
  const int8_t* w0 = w;
  const int8_t* w1 = w + w_panel;
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t tap = tap_bytes[t];
    for (int64_t c = 0; c < cquads; ++c, w0 += kQuadW, w1 += kQuadW) {
      const int64_t at = tap + c * plane;
      __m512i xv[kP];
#pragma GCC unroll 2
      for (int p = 0; p < kP; ++p) {
        xv[p] = _mm512_maskz_loadu_epi32(panels[p].mask[0], panels[p].ptr[0] + at);
#pragma GCC unroll 4
        for (int sg = 1; sg < kS; ++sg)
          xv[p] = _mm512_mask_loadu_epi32(xv[p], panels[p].mask[sg], panels[p].ptr[sg] + at);
      }
      VnniQuadStep<kR, kP>(acc, xv, w0, w1);
    }
  }
}

// DirectSums into s[panel][row][pixel], as TileVnni.
template <int kR, int kP, int kS>
NEE_DIRECT_TARGET void DirectTile(const int8_t* w, int64_t w_panel, const PanelLoads* panels,
                                  const int64_t* tap_bytes, int64_t taps, int64_t cquads, int64_t plane,
                                  int32_t* s) {
  __m512i acc[kR][kP];
  ZeroVnniAcc<kR, kP>(acc);
  DirectSums<kR, kP, kS>(acc, w, w_panel, panels, tap_bytes, taps, cquads, plane);
  StoreVnniSums<kR, kP>(acc, s);
}

// A whole tile (kVnniRows rows, two full panels): the sums plus the rows' constants requantized in registers
// (RequantStoreVnniTile, as the GEMM path's whole tiles), the bytes DirectTile and FinishTilesAvx512 give
// without the sums' round trip through memory. The constants are added after the k loop: as the loop's starting
// values they made GCC spill the accumulators (twice as slow).
NEE_DIRECT_TARGET void DirectWholeTile(const int8_t* w, int64_t w_panel, const PanelLoads* panels,
                                       const int64_t* tap_bytes, int64_t taps, int64_t cquads, int64_t plane,
                                       const VnniTileOut& out) {
  __m512i acc[kVnniRows][2];
  ZeroVnniAcc<kVnniRows, 2>(acc);
  DirectSums<kVnniRows, 2, kDirectSegments>(acc, w, w_panel, panels, tap_bytes, taps, cquads, plane);
#pragma GCC unroll 12
  for (int r = 0; r < kVnniRows; ++r) {
    const __m512i c = _mm512_set1_epi32(out.q->constant[out.m0 + r]);
    acc[r][0] = _mm512_add_epi32(acc[r][0], c);
    acc[r][1] = _mm512_add_epi32(acc[r][1], c);
  }
  RequantStoreVnniTile<2>(acc, out);
}

// The same for one panel's first eight pixels (a last panel of at most eight: half the work), on ymm.
template <int kR, int kS>
NEE_DIRECT_TARGET void DirectHalfTile(const int8_t* w, int64_t w_panel, const PanelLoads* panels,
                                      const int64_t* tap_bytes, int64_t taps, int64_t cquads, int64_t plane,
                                      int32_t* s) {
  __m256i acc[kR];
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r) acc[r] = _mm256_setzero_si256();
  const int8_t* w0 = w;
  const int8_t* w1 = w + w_panel;
  __mmask8 mask[kS];
#pragma GCC unroll 4
  for (int sg = 0; sg < kS; ++sg) mask[sg] = static_cast<__mmask8>(panels->mask[sg]);
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t tap = tap_bytes[t];
    for (int64_t c = 0; c < cquads; ++c, w0 += kQuadW, w1 += kQuadW) {
      const int64_t at = tap + c * plane;
      __m256i xv = _mm256_maskz_loadu_epi32(mask[0], panels->ptr[0] + at);
#pragma GCC unroll 4
      for (int sg = 1; sg < kS; ++sg) xv = _mm256_mask_loadu_epi32(xv, mask[sg], panels->ptr[sg] + at);
#pragma GCC unroll 12
      for (int r = 0; r < kR; ++r) {
        int32_t quad;
        std::memcpy(&quad, r < kRowsPerPanel ? w0 + 4 * r : w1 + 4 * (r - kRowsPerPanel), sizeof quad);
        acc[r] = _mm256_dpbusd_epi32(acc[r], xv, _mm256_set1_epi32(quad));
      }
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kR; ++r) _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + r * kCols), acc[r]);
}

using DirectTileFn = void (*)(const int8_t*, int64_t, const PanelLoads*, const int64_t*, int64_t, int64_t, int64_t,
                              int32_t*);

template <int kP, int kS, int... kR>
DirectTileFn TileByRows(int64_t rows, std::integer_sequence<int, kR...>) {
  static constexpr DirectTileFn kTiles[] = {DirectTile<kR + 1, kP, kS>...};
  return kTiles[rows - 1];
}

template <int kS, int... kR>
DirectTileFn HalfByRows(int64_t rows, std::integer_sequence<int, kR...>) {
  static constexpr DirectTileFn kTiles[] = {DirectHalfTile<kR + 1, kS>...};
  return kTiles[rows - 1];
}

// panels: 2, 1, or 0 for one panel's first eight pixels.
template <int kS>
DirectTileFn TileFor(int64_t rows, int64_t panels) {
  const auto all = std::make_integer_sequence<int, kVnniRows>();
  if (panels == 0) return HalfByRows<kS>(rows, all);
  return panels == 1 ? TileByRows<1, kS>(rows, all) : TileByRows<2, kS>(rows, all);
}

DirectTileFn PickTile(int64_t rows, int64_t panels) { return TileFor<kDirectSegments>(rows, panels); }

// Channels [4c, 4c + 4) of x's rows side by side: the padded copy [C / 4][hp][rows.quads][4] (CopyRows), the
// border `pad`, every input byte flipped by `flip`; padded rows [r_begin, r_end) of every channel quad.
// Sixteen pixels at a time: four channels' sixteen bytes in one zmm, interleaved by one vpermb; at column
// stride 2 one vpermd more puts the even pixels' quads in the low half and the odd ones' in the high half,
// each half stored in its run.
NEE_DIRECT_TARGET void InterleaveImage(const QConvGeometry& g, const CopyRows& rows, const uint8_t* x, uint8_t flip,
                                       uint8_t pad, int64_t r_begin, int64_t r_end, uint8_t* dst) {
  const __m512i index = _mm512_load_si512(kQuadTranspose), flip_bytes = _mm512_set1_epi8(static_cast<char>(flip));
  const __m512i even_odd = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m512i pad_row = _mm512_set1_epi8(static_cast<char>(pad));
  const int64_t row_bytes = rows.quads * 4, plane = g.hp * row_bytes;
  auto fill = [&](uint8_t* p, int64_t bytes) NEE_DIRECT_TARGET {
    for (; bytes >= 64; bytes -= 64, p += 64) _mm512_storeu_si512(p, pad_row);
    if (bytes > 0) _mm512_mask_storeu_epi8(p, (~__mmask64{0}) >> (64 - bytes), pad_row);
  };
  const int64_t cquads = g.C / 4;
  for (int64_t cq = 0; cq < cquads; ++cq) {
    uint8_t* out = dst + cq * plane;
    const uint8_t* src = x + 4 * cq * g.ih * g.iw;
    for (int64_t r = r_begin; r < r_end; ++r) {
      uint8_t* row = out + r * row_bytes;
      const int64_t y = r - g.ph;  // the input row, or padding
      if (y < 0 || y >= g.ih) {
        fill(row, row_bytes);
        continue;
      }
      if (rows.phases == 1) {
        fill(row, g.pw * 4);
        fill(row + (g.pw + g.iw) * 4, row_bytes - (g.pw + g.iw) * 4);
      } else {
        fill(row, row_bytes);  // both runs' borders; the pixels overwrite the rest
      }
      const uint8_t* s0 = src + y * g.iw;
      const int64_t cs = g.ih * g.iw;  // channel stride
      for (int64_t i = 0; i < g.iw; i += 16) {
        const int64_t n = std::min<int64_t>(16, g.iw - i);
        const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
        __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(m, s0 + i));
        v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(m, s0 + cs + i), 1);
        v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(m, s0 + 2 * cs + i), 2);
        v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(m, s0 + 3 * cs + i), 3);
        v = _mm512_xor_si512(_mm512_permutexvar_epi8(index, v), flip_bytes);
        const int64_t c = g.pw + i;  // pixel i's padded column
        if (rows.phases == 1) {
          _mm512_mask_storeu_epi8(row + c * 4, (~__mmask64{0}) >> (64 - 4 * n), v);
          continue;
        }
        // Pixels i, i + 2, ..: padded columns c, c + 2, .. (run c % 2 from quad c / 2); the others the other run.
        v = _mm512_permutexvar_epi32(even_odd, v);
        const int64_t first_run = c % 2;
        const auto low = static_cast<__mmask8>((1u << ((n + 1) / 2)) - 1);
        const auto high = static_cast<__mmask8>((1u << (n / 2)) - 1);
        _mm256_mask_storeu_epi32(row + 4 * (first_run * rows.run + c / 2), low, _mm512_castsi512_si256(v));
        _mm256_mask_storeu_epi32(row + 4 * ((1 - first_run) * rows.run + (c + 1) / 2), high,
                                 _mm512_extracti64x4_epi64(v, 1));
      }
    }
  }
}

struct DirectRun {
  const QConvGeometry* g;
  const DirectQConvWeights* w;
  const Requant* q;
  const uint8_t* image;  // the interleaved padded copy
  CopyRows rows;         // its rows' layout
  std::vector<int64_t> tap_bytes;
};

// Row panels [rp_begin, rp_end) (even bounds) of the output over pixel panels [pb, pe), into y.
void RunPanels(const DirectRun& d, int64_t pb, int64_t pe, int64_t rp_begin, int64_t rp_end, uint8_t* y) {
  const QConvGeometry& g = *d.g;
  const Requant& q = *d.q;
  const int64_t P = g.P(), kquads = d.w->kquads, w_panel = kquads * kQuadW;
  const int64_t taps = static_cast<int64_t>(d.tap_bytes.size()), cquads = g.C / 4, plane = g.hp * d.rows.quads * 4;
  alignas(64) int32_t sums[kVnniSums];
  // Each panel's loads, planned once for all the row panels.
  thread_local std::vector<PanelLoads> t_loads;
  t_loads.resize(static_cast<size_t>(pe - pb));
  for (int64_t b = pb; b < pe; ++b) t_loads[static_cast<size_t>(b - pb)] = PlanPanel(g, d.rows, d.image, b * kCols);
  const DirectTileFn pair_tiles[2] = {PickTile(kVnniRows, 2), PickTile(kVnniRows, 1)};
  for (int64_t rp = rp_begin; rp < rp_end; rp += 2) {
    const int64_t rows = std::min(kVnniRows, g.M - rp * kRowsPerPanel), m0 = rp * kRowsPerPanel;
    const int8_t* wp = d.w->data.data() + rp * w_panel;
    const DirectTileFn two = rows == kVnniRows ? pair_tiles[0] : PickTile(rows, 2);
    const DirectTileFn one = rows == kVnniRows ? pair_tiles[1] : PickTile(rows, 1);
    for (int64_t b = pb; b < pe;) {
      const int64_t p0 = b * kCols, count = std::min(kCols, P - p0);
      const bool pair = b + 1 < pe;
      if (pair && rows == kVnniRows && p0 + 2 * kCols <= P) {
        DirectWholeTile(wp, w_panel, &t_loads[static_cast<size_t>(b - pb)], d.tap_bytes.data(), taps, cquads, plane,
                        VnniTileOut{&q, m0, y + m0 * P + p0, P});
        b += 2;
        continue;
      }
      const DirectTileFn tile = pair ? two : count <= kCols / 2 ? PickTile(rows, 0) : one;
      tile(wp, w_panel, &t_loads[static_cast<size_t>(b - pb)], d.tap_bytes.data(), taps, cquads,
                         plane, sums);
      FinishTilesAvx512(sums, rows, count, pair, pair ? std::min(kCols, P - p0 - kCols) : 0, q.constant + m0,
                        q.mult + m0, q.mult_f + m0, q, y + m0 * P + p0, P);
      b += pair ? 2 : 1;
    }
  }
}

}  // namespace
NEE_QCONV_AVX512_WARNINGS_ON
#endif

void RunDirectQConv(KernelContext& ctx, const QConvGeometry& g, const DirectQConvWeights& w, const Requant& q,
                    const uint8_t* x, uint8_t flip, uint8_t pad, uint8_t* y) {
#ifdef NEE_QCONV_X86
  const CopyRows rows(g);
  const int64_t cquads = g.C / 4, plane = g.hp * rows.quads * 4, P = g.P();
  // The calling thread's copy, grow-only (fresh pages every run cost page faults).
  thread_local std::vector<uint8_t> t_image;
  if (t_image.size() < static_cast<size_t>(cquads * plane)) t_image.resize(static_cast<size_t>(cquads * plane));
  uint8_t* image = t_image.data();  // the tasks on other threads read this thread's copy
  DirectRun d{&g, &w, &q, image, rows, {}};
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) d.tap_bytes.push_back(4 * rows.Tap(i, j));
  const int64_t threads = std::max(1, NumThreads(ctx));
  const int64_t panels = (P + kCols - 1) / kCols, row_pairs = (w.panels + 1) / 2;
  // Few panels (a 14x14 image has 13): the threads split the output channels, each over every panel, so that
  // the weights are streamed once; otherwise blocks of eight panels (about 9 x C x 128 bytes of the copy
  // read per tile row), an even number of them, dealt out in order in equal shares.
  const bool by_rows = panels <= 16 && row_pairs >= 2 * threads;
  constexpr int64_t kBlock = 8;
  for (int64_t n = 0; n < g.N; ++n) {
    // By rows, every channel of each: each thread then copies the rows of the pixels the previous layer's
    // tasks (pixel-major) left in its caches, and the rows its own blocks of panels below read, but for the
    // window's overlap (by channel quads, half of the copy came from the other core's caches and half of
    // what the blocks read went back).
    ctx.ParallelFor(g.hp, 1, [&](int64_t begin, int64_t end) {
      InterleaveImage(g, rows, x + n * g.C * g.ih * g.iw, flip, pad, begin, end, image);
    });
    uint8_t* yn = y + n * g.M * P;
    if (by_rows) {
      ctx.ParallelFor(row_pairs, 1, [&](int64_t begin, int64_t end) {
        RunPanels(d, 0, panels, 2 * begin, std::min(w.panels, 2 * end), yn);
      });
      continue;
    }
    const int64_t blocks = std::max<int64_t>(threads, (panels + kBlock - 1) / kBlock / threads * threads);
    ctx.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t first = 2 * ((blk * panels + blocks) / (2 * blocks));
        const int64_t last = blk + 1 == blocks ? panels : 2 * (((blk + 1) * panels + blocks) / (2 * blocks));
        if (first < last) RunPanels(d, first, last, 0, w.panels, yn);
      }
    });
  }
#else
  (void)ctx, (void)g, (void)w, (void)q, (void)x, (void)flip, (void)pad, (void)y;
#endif
}

}  // namespace nee::cpu::qconv
