// QLinearConv's GEMM weights packed once (qconv_weights.h).
#include "ep/cpu/qconv_weights.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nee::cpu::qconv {

namespace {

constexpr int64_t kRows = 6;           // output channels per row panel
constexpr int64_t kQuadA = kRows * 4;  // one k quad of a row panel
constexpr int64_t kQuadB = kCols * 4;  // one k quad of a pixel panel (the remainders' offsets)

// Weights of one vpmaddubsw lane (`n` of them, at idx in v) cut so that their positive values sum to at most
// 128, their negative ones too: the lane's int16 sum is then within 255 * 128 for any bytes x. The largest
// weights are cut first, so that few of them leave a remainder.
void ClampLane(int32_t* v, const int64_t* idx, int n) {
  for (int sign : {1, -1}) {
    int32_t total = 0;
    for (int i = 0; i < n; ++i) total += std::max(0, sign * v[idx[i]]);
    while (total > 128) {
      int largest = 0;
      for (int i = 1; i < n; ++i)
        if (sign * v[idx[i]] > sign * v[idx[largest]]) largest = i;
      const int32_t cut = std::min(sign * v[idx[largest]], total - 128);
      v[idx[largest]] -= sign * cut;
      total -= cut;
    }
  }
}

// Whether the lane's weights need no cut (nearly every lane of trained weights): sums of four values' positive
// and negative parts without branches, as a data-dependent branch per weight made the packing slow.
inline bool LaneFits(int32_t a, int32_t b, int32_t c, int32_t d) {
  const int32_t positive = std::max(a, 0) + std::max(b, 0) + std::max(c, 0) + std::max(d, 0);
  const int32_t negative = std::max(-a, 0) + std::max(-b, 0) + std::max(-c, 0) + std::max(-d, 0);
  return (positive | negative) <= 128;
}

// The lane groups of a row's signed weights that need a cut, among the 32 bytes at v: bit 2e (and 2e + 1) set
// where group e's positive or negative parts sum past 128. `paired`: group e (e % 4 < 2) holds bytes
// 8 (e / 4) + 2 (e % 4) + {0, 1, 4, 5} (a vpmaddubsw lane of two k quads), e % 4 >= 2 never set; else group e
// holds bytes 2e and 2e + 1. Sixteen groups a step where checking each lane's four weights in turn made the
// packing a quarter of a ResNet-50 int8 session's first run.
uint32_t MisfitsPortable(const int8_t* v, bool paired) {
  uint32_t bits = 0;
  for (int e = 0; e < 16; ++e) {
    if (paired && e % 4 >= 2) continue;
    const int k = paired ? 8 * (e / 4) + 2 * (e % 4) : 2 * e;
    const bool fits = paired ? LaneFits(v[k], v[k + 1], v[k + 4], v[k + 5]) : LaneFits(v[k], v[k + 1], 0, 0);
    if (!fits) bits |= 3u << (2 * e);
  }
  return bits;
}

// Bit i set: byte i of the 32 at a and b differ.
uint32_t BytesDifferingPortable(const int8_t* a, const int8_t* b) {
  uint32_t bits = 0;
  for (int i = 0; i < 32; ++i)
    if (a[i] != b[i]) bits |= 1u << i;
  return bits;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) uint32_t MisfitsAvx2(const int8_t* v, bool paired) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v)), zero = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi8(1), limit = _mm256_set1_epi16(128);
  // Positive parts 0..127, negative ones 0..128 (abs(-128) is 0x80, 128 unsigned); pair sums in int16.
  __m256i pos = _mm256_maddubs_epi16(_mm256_max_epi8(x, zero), ones);
  __m256i neg = _mm256_maddubs_epi16(_mm256_abs_epi8(_mm256_min_epi8(x, zero)), ones);
  if (paired) {  // each quad pair's lanes: its first quad's pair plus the second's, in elements 0 and 1
    pos = _mm256_add_epi16(pos, _mm256_srli_epi64(pos, 32));
    neg = _mm256_add_epi16(neg, _mm256_srli_epi64(neg, 32));
  }
  __m256i bad = _mm256_or_si256(_mm256_cmpgt_epi16(pos, limit), _mm256_cmpgt_epi16(neg, limit));
  if (paired) bad = _mm256_and_si256(bad, _mm256_set1_epi64x(0xFFFFFFFF));
  return static_cast<uint32_t>(_mm256_movemask_epi8(bad));
}

__attribute__((target("avx2"))) uint32_t BytesDifferingAvx2(const int8_t* a, const int8_t* b) {
  const __m256i same = _mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)),
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
  return ~static_cast<uint32_t>(_mm256_movemask_epi8(same));
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

uint32_t Misfits(const int8_t* v, bool paired) { return HasAvx2() ? MisfitsAvx2(v, paired) : MisfitsPortable(v, paired); }
uint32_t BytesDiffering(const int8_t* a, const int8_t* b) {
  return HasAvx2() ? BytesDifferingAvx2(a, b) : BytesDifferingPortable(a, b);
}
#else
uint32_t Misfits(const int8_t* v, bool paired) { return MisfitsPortable(v, paired); }
uint32_t BytesDiffering(const int8_t* a, const int8_t* b) { return BytesDifferingPortable(a, b); }
#endif

// One row's weights `full` ([kquads * 4] signed, then 32 bytes of zeros) cut into `cut` (a copy) where a lane
// would saturate: lane groups of two quads over the first `paired_bytes`, pairs past them (ClampLane).
void ClampRow(const int8_t* full, int8_t* cut, int64_t paired_bytes, int64_t bytes) {
  auto clamp = [&](int64_t from, int64_t end, bool paired) {
    for (int64_t c0 = from; c0 < end; c0 += 32) {
      for (uint32_t bits = Misfits(full + c0, paired); bits != 0; bits &= bits - 1) {
        const int bit = __builtin_ctz(bits);
        if (bit % 2) continue;
        const int e = bit / 2;
        const int64_t k = c0 + (paired ? 8 * (e / 4) + 2 * (e % 4) : 2 * e);
        if (k >= end) continue;  // past the region (its zeros fit anyway)
        const int n = paired ? 4 : 2;
        const int64_t at[4] = {k, k + 1, k + 4, k + 5};
        int32_t v[4] = {cut[at[0]], cut[at[1]], n == 4 ? cut[at[2]] : 0, n == 4 ? cut[at[3]] : 0};
        const int64_t idx[4] = {0, 1, 2, 3};
        ClampLane(v, idx, n);
        for (int i = 0; i < n; ++i) cut[at[i]] = static_cast<int8_t>(v[i]);
      }
    }
  };
  clamp(0, paired_bytes, true);
  clamp(paired_bytes, bytes, false);
}

}  // namespace

std::shared_ptr<QConvWeights> PackWeights(const QConvGeometry& g, const Tensor& w, bool clamp, bool paired) {
  auto out = std::make_shared<QConvWeights>();
  const int64_t K = g.K(), kquads = (K + 3) / 4, ppg = (g.Mg + kRows - 1) / kRows, bytes_per_row = kquads * 4;
  out->K = K;
  out->kquads = kquads;
  out->panels_per_group = ppg;
  out->paired = clamp && paired;
  // 32 bytes of slack: PixelTileAvx2 reads a 32-byte vector at each 24-byte quad.
  out->data.assign(static_cast<size_t>(g.group * ppg * kquads * kQuadA + 32), 0);
  out->row_sums.assign(static_cast<size_t>(g.M), 0);
  out->row_abs_sums.assign(static_cast<size_t>(g.M), 0);
  out->remainder_begin.assign(static_cast<size_t>(g.group * ppg * kRows + 1), 0);
  out->remainder_odd.assign(out->remainder_begin.size(), 0);
  const uint8_t flip = w.dtype() == DataType::kUint8 ? 0x80 : 0;  // uint8 w - 128 as a signed byte is w ^ 0x80
  const auto* bytes = static_cast<const uint8_t*>(w.raw_data());
  // A row's signed weights and their cut copy, zeros past K and 32 bytes of slack for whole-vector reads.
  std::vector<int8_t> full(static_cast<size_t>(bytes_per_row + 64), 0), cut(full.size(), 0);
  const int64_t paired_bytes = out->paired ? kquads / 2 * 8 : 0;
  for (int64_t grp = 0; grp < g.group; ++grp)
    for (int64_t q = 0; q < ppg; ++q) {
      const int64_t panel = grp * ppg + q;
      int8_t* dst = out->data.data() + panel * kquads * kQuadA;
      for (int64_t r = 0; r < kRows && q * kRows + r < g.Mg; ++r) {
        out->remainder_begin[static_cast<size_t>(panel * kRows + r)] = static_cast<int64_t>(out->remainders.size());
        const int64_t m = grp * g.Mg + q * kRows + r;
        const uint8_t* row = bytes + m * K;
        int32_t sum = 0, abs_sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          full[static_cast<size_t>(k)] = static_cast<int8_t>(row[k] ^ flip);
          sum += full[static_cast<size_t>(k)];
          abs_sum += std::abs(static_cast<int32_t>(full[static_cast<size_t>(k)]));
        }
        out->row_sums[static_cast<size_t>(m)] = sum;
        out->row_abs_sums[static_cast<size_t>(m)] = abs_sum;
        if (g.Cg == 1 && g.Mg == 1)
          for (int64_t k = 0; k < K; ++k) out->taps.push_back(full[static_cast<size_t>(k)]);
        std::memcpy(cut.data(), full.data(), static_cast<size_t>(bytes_per_row));
        if (clamp) ClampRow(full.data(), cut.data(), paired_bytes, bytes_per_row);
        for (int64_t quad = 0; quad < kquads; ++quad) std::memcpy(dst + quad * kQuadA + r * 4, cut.data() + 4 * quad, 4);
        if (!clamp) continue;
        // The cut quads' remainders as int16 pairs: bytes 0 and 2, bytes 1 and 3.
        for (int64_t c0 = 0; c0 < bytes_per_row; c0 += 32)
          for (uint32_t bits = BytesDiffering(full.data() + c0, cut.data() + c0); bits != 0;
               bits &= ~(0xFu << (__builtin_ctz(bits) & ~3))) {
            const int64_t quad = (c0 + (__builtin_ctz(bits) & ~3)) / 4;
            if (quad >= kquads) break;
            const int8_t* f = full.data() + 4 * quad;
            const int8_t* c = cut.data() + 4 * quad;
            auto rem = [&](int b) { return static_cast<uint32_t>(static_cast<uint16_t>(f[b] - c[b])); };
            const uint32_t even = rem(0) | rem(2) << 16, odd = rem(1) | rem(3) << 16;
            const auto offset = static_cast<int32_t>(quad * kQuadB);
            if (even != 0) out->remainders.push_back({offset | kEvenBytes, static_cast<int32_t>(even)});
            if (odd != 0) out->remainders.push_back({offset, static_cast<int32_t>(odd)});
          }
        // The row's entries at bytes 0 and 2 first (in k order either kind), then those at bytes 1 and 3.
        const auto first = out->remainders.begin() + out->remainder_begin[static_cast<size_t>(panel * kRows + r)];
        const auto odd = std::stable_partition(first, out->remainders.end(),
                                               [](const TileRemainder& e) { return (e.offset & kEvenBytes) != 0; });
        out->remainder_odd[static_cast<size_t>(panel * kRows + r)] = odd - out->remainders.begin();
      }
      for (int64_t r = std::min(kRows, g.Mg - q * kRows); r < kRows; ++r)  // rows past Mg: none
        out->remainder_begin[static_cast<size_t>(panel * kRows + r)] =
            out->remainder_odd[static_cast<size_t>(panel * kRows + r)] = static_cast<int64_t>(out->remainders.size());
    }
  out->remainder_begin.back() = out->remainder_odd.back() = static_cast<int64_t>(out->remainders.size());
  if (out->paired) {
    const int64_t panels = g.group * ppg;
    out->pass_slot_begin.reserve(static_cast<size_t>(2 * panels + 1));
    for (int64_t panel = 0; panel < panels; ++panel)
      for (int64_t pass = 0; pass < 2; ++pass) {
        out->pass_slot_begin.push_back(static_cast<int64_t>(out->pass_slots.size()));
        const int64_t* begin = out->remainder_begin.data() + panel * kRows + 3 * pass;
        int64_t slots = 0;
        for (int64_t r = 0; r < 3; ++r) slots = std::max(slots, begin[r + 1] - begin[r]);
        for (int64_t i = 0; i < slots; ++i)
          for (int64_t r = 0; r < 3; ++r)
            out->pass_slots.push_back(i < begin[r + 1] - begin[r] ? out->remainders[static_cast<size_t>(begin[r] + i)]
                                                                  : TileRemainder{0, 0});
      }
    out->pass_slot_begin.push_back(static_cast<int64_t>(out->pass_slots.size()));
  }
  return out;
}

// Paired (two k quads per vpmaddwd in the whole tile) where K spans at least kMinPairedQuads quads (or
// kMinPairedQuadsLargeImage on images of more than kLargeImagePixels pixels) and at most one remainder results
// per kMaxPairedRemainders rows' k quads: a remainder costs the tile about ten times what pairing saves per row
// and quad. ResNet-50's int8 weights leave 0.4-12% remainders per conv, most 1-4%; its 3x3 convs over 64
// channels with 5.2% and 6.2% ran 5% and 1% faster paired. Since the tile takes each row's remainders at even
// and odd bytes in their own loops (no per-entry shift count), ResNet-50's 1x1 convs over 128 and 256 channels
// (32 and 64 quads, 3-6% remainders) run 2.6% and 5-6% faster paired at 56x56-14x14 (they had run 3.7% slower
// with the per-entry shifts); MobileNetV2's 7x7 ones over 160 and 320 channels ran 13% and 5% slower in the
// model (per-node minimums; 3% faster alone, weights in cache), so small images keep the 128-quad limit.
constexpr int64_t kMaxPairedRemainders = 15, kMinPairedQuads = 128, kMinPairedQuadsLargeImage = 32;
constexpr int64_t kLargeImagePixels = 64;

std::shared_ptr<const QConvWeights> PackWeightsAvx2(const QConvGeometry& g, const Tensor& w) {
  const int64_t min_quads = g.P() > kLargeImagePixels ? kMinPairedQuadsLargeImage : kMinPairedQuads;
  if ((g.K() + 3) / 4 < min_quads) return PackWeights(g, w, true, false);
  std::shared_ptr<QConvWeights> paired = PackWeights(g, w, true, true);
  if (static_cast<int64_t>(paired->remainders.size()) * kMaxPairedRemainders <= g.M * paired->kquads) return paired;
  return PackWeights(g, w, true, false);
}

}  // namespace nee::cpu::qconv
