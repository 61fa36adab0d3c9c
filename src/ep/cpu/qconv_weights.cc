// QLinearConv's GEMM weights packed once (qconv_weights.h).
#include "ep/cpu/qconv_weights.h"

#include <algorithm>

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

}  // namespace

std::shared_ptr<QConvWeights> PackWeights(const QConvGeometry& g, const Tensor& w, bool clamp, bool paired) {
  auto out = std::make_shared<QConvWeights>();
  const int64_t K = g.K(), kquads = (K + 3) / 4, ppg = (g.Mg + kRows - 1) / kRows;
  out->K = K;
  out->kquads = kquads;
  out->panels_per_group = ppg;
  out->paired = clamp && paired;
  // 32 bytes of slack: PixelTileAvx2 reads a 32-byte vector at each 24-byte quad.
  out->data.assign(static_cast<size_t>(g.group * ppg * kquads * kQuadA + 32), 0);
  out->row_sums.assign(static_cast<size_t>(g.M), 0);
  out->remainder_begin.assign(static_cast<size_t>(g.group * ppg * kRows + 1), 0);
  const bool shift = w.dtype() == DataType::kUint8;
  const auto* bytes = static_cast<const uint8_t*>(w.raw_data());
  std::vector<int32_t> full(static_cast<size_t>(kquads * 4)), cut(full.size());
  for (int64_t grp = 0; grp < g.group; ++grp)
    for (int64_t q = 0; q < ppg; ++q) {
      const int64_t panel = grp * ppg + q;
      int8_t* dst = out->data.data() + panel * kquads * kQuadA;
      for (int64_t r = 0; r < kRows && q * kRows + r < g.Mg; ++r) {
        out->remainder_begin[static_cast<size_t>(panel * kRows + r)] = static_cast<int64_t>(out->remainders.size());
        const int64_t m = grp * g.Mg + q * kRows + r;
        const uint8_t* row = bytes + m * K;
        int32_t sum = 0;
        if (shift) {
          for (int64_t k = 0; k < K; ++k) full[k] = static_cast<int32_t>(row[k]) - 128;
        } else {
          for (int64_t k = 0; k < K; ++k) full[k] = static_cast<int32_t>(static_cast<int8_t>(row[k]));
        }
        std::fill(full.begin() + K, full.end(), 0);
        for (int64_t k = 0; k < K; ++k) sum += full[k];
        cut = full;
        if (clamp) {
          const int64_t pairs_of_quads = out->paired ? kquads / 2 : 0;
          for (int64_t i = 0; i < pairs_of_quads; ++i)
            for (int64_t lane = 0; lane < 4; lane += 2) {
              const int64_t k = 8 * i + lane, idx[4] = {k, k + 1, k + 4, k + 5};
              if (!LaneFits(cut[k], cut[k + 1], cut[k + 4], cut[k + 5])) ClampLane(cut.data(), idx, 4);
            }
          for (int64_t k = 8 * pairs_of_quads; k < kquads * 4; k += 2) {
            const int64_t idx[2] = {k, k + 1};
            if (!LaneFits(cut[k], cut[k + 1], 0, 0)) ClampLane(cut.data(), idx, 2);
          }
        }
        for (int64_t quad = 0; quad < kquads; ++quad) {
          const int32_t* f = full.data() + 4 * quad;
          const int32_t* c = cut.data() + 4 * quad;
          int8_t* d = dst + quad * kQuadA + r * 4;
          for (int b = 0; b < 4; ++b) d[b] = static_cast<int8_t>(c[b]);
          auto rem = [&](int b) { return static_cast<uint32_t>(static_cast<uint16_t>(f[b] - c[b])); };
          // The quad's remainders as int16 pairs: bytes 0 and 2, bytes 1 and 3.
          const uint32_t even = rem(0) | rem(2) << 16, odd = rem(1) | rem(3) << 16;
          const auto offset = static_cast<int32_t>(quad * kQuadB);
          if (even != 0) out->remainders.push_back({offset | kEvenBytes, static_cast<int32_t>(even)});
          if (odd != 0) out->remainders.push_back({offset, static_cast<int32_t>(odd)});
        }
        out->row_sums[static_cast<size_t>(m)] = sum;
        if (g.Cg == 1 && g.Mg == 1)
          for (int64_t k = 0; k < K; ++k) out->taps.push_back(static_cast<int16_t>(full[k]));
      }
      for (int64_t r = std::min(kRows, g.Mg - q * kRows); r < kRows; ++r)  // rows past Mg: none
        out->remainder_begin[static_cast<size_t>(panel * kRows + r)] = static_cast<int64_t>(out->remainders.size());
    }
  out->remainder_begin.back() = static_cast<int64_t>(out->remainders.size());
  return out;
}

// Paired (two k quads per vpmaddwd in the whole tile) where K spans at least kMinPairedQuads quads and at most
// one remainder results per kMaxPairedRemainders rows' k quads: a remainder costs the tile about eight times
// what pairing saves per row and quad, and over fewer quads the remainder loops' branches ate the saving
// (ResNet-50 in the model, per-node minimums against main: 1x1 convs over 256 channels, 64 quads, 1.037 paired,
// over 64 and 128 channels 1.03-1.14 alone; 3x3 convs 0.94-0.97, 1x1 over 512-2048 channels 0.965-0.97). ResNet-50's int8 weights leave 0.4-12% remainders per conv, most 1-4%; its 3x3
// convs over 64 channels with 5.2% and 6.2% ran 5% and 1% faster paired.
constexpr int64_t kMaxPairedRemainders = 15, kMinPairedQuads = 128;

std::shared_ptr<const QConvWeights> PackWeightsAvx2(const QConvGeometry& g, const Tensor& w) {
  if ((g.K() + 3) / 4 < kMinPairedQuads) return PackWeights(g, w, true, false);
  std::shared_ptr<QConvWeights> paired = PackWeights(g, w, true, true);
  if (static_cast<int64_t>(paired->remainders.size()) * kMaxPairedRemainders <= g.M * paired->kquads) return paired;
  return PackWeights(g, w, true, false);
}

}  // namespace nee::cpu::qconv
