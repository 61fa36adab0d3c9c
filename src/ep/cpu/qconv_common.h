// What QLinearConv's fast paths share (qconv_fast.cc: the GEMM path for any
// group; qconv_depthwise.cc: one channel per group): the geometry with its
// zero-point-padded input copy, and the requantization of int32 sums to
// output bytes as the reference computes it.
#pragma once

#include <cstdint>
#include <vector>

#include "ep/cpu/conv_int_geometry.h"
#include "ep/cpu/rounding_fma.h"
#include "ops/op_schema.h"

namespace nee::cpu::qconv {

constexpr int64_t kCols = 16;  // output pixels per tile or per depthwise step

// ConvInt2D and the zero-point-padded copy of one image's group it reads:
// hp x wp per channel.
struct QConvGeometry : ConvInt2D {
  int64_t hp = 1, wp = 1;
};

bool PlanGeometry(const KernelContext& ctx, const Tensor& x, const Tensor& w, QConvGeometry& g);

// The padded copy of channels [0, Cg) of one image's group: every byte
// flipped by `flip` (0x80 for int8, making it unsigned), the border the zero
// point (flipped too).
void PadImage(const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t pad, uint8_t* dst);
#if defined(__x86_64__) || defined(__i386__)
// The same for channels [c_begin, c_end) (dst and x still channel 0's) on AVX2: each row's bytes copied (and
// flipped) in whole vectors, the border bytes between rows stored one by one, the top and bottom borders
// one memset each, where PadImage makes two memset and one memcpy calls a row (3 calls for 56 bytes).
void PadImageAvx2(const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t pad, uint8_t* dst,
                  int64_t c_begin, int64_t c_end);
#endif

// What turns a channel's int32 sums into output bytes.
struct Requant {
  const double* mult = nullptr;     // per output channel
  const float* mult_f = nullptr;    // the same as floats (exact: the reference forms them as floats)
  const int32_t* constant = nullptr;  // per output channel: bias - zx * row_sum + K * zx * zw
  const int32_t* zw = nullptr;      // per output channel (weights' zero points, shifted)
  bool any_zw = false;
  double yzp = 0, lo = 0, hi = 255;
  bool y_signed = false;
  // Every |multiplier| below 1/2: |double(acc) * mult + yzp| < 2^31 for any int32 acc, so the value
  // converts to int32 (rounding half to even, the default mode, as nearbyint) and the saturating packs
  // clamp it exactly as clamping the double first would.
  bool small_multipliers = false;
  // Proven at planning (RoundingFmaExact) for every channel's multiplier and the sums its weights allow: each
  // int32 sum s gives the reference's byte as the integer RoundingFma forms, one float fma (below), so the
  // tiles (AVX2 and AVX-512 VNNI alike) need not bracket the value between two fmas and compare.
  bool float_exact = false;
};

// A packed pixel panel's ([k quads][16][4]) first `pixels` pixels with their quads side by side, as the pixel
// tiles read them (AVX2 and VNNI): [kquads][pixels][4] at dst. From the panel itself a pixel tile reads 4 bytes
// a pixel of each 64-byte line, for every row panel.
void CompactFewPixels(const uint8_t* panel, int64_t kquads, int64_t pixels, uint8_t* dst);

// The reference's double arithmetic, clamp(double(acc) * mult + yzp) rounded
// half to even, for `count` sums.
void RequantRowPortable(const int32_t* acc, int64_t count, double mult, const Requant& q, uint8_t* out);

#if defined(__x86_64__) || defined(__i386__)
// A whole tile (rows x kCols sums, kCols apart) plus each row's constant, requantized and stored at out
// (rows `ld` bytes apart, count pixels each), for small multipliers (see Requant).
void FinishTileAvx2(const int32_t* sums, int64_t rows, int64_t count, const int32_t* constant, const double* mult,
                    const Requant& q, uint8_t* out, int64_t ld);
// The same for a tile's first `count` pixels only (a last panel of a few pixels, rows <= 8), each pixel's rows
// as the lanes of one vector: the same operations per value as FinishTileAvx2, so the same bytes.
void FinishFewPixelsAvx2(const int32_t* sums, int64_t rows, int64_t count, const int32_t* constant, const double* mult,
                         const Requant& q, uint8_t* out, int64_t ld);
// kCols sums at once (count of them stored).
void RequantRowAvx2(const int32_t* acc, int64_t count, double mult, const Requant& q, uint8_t* out);
#endif

// A depthwise conv's per-channel values for the channels-innermost kernel
// (qconv_depthwise.cc), sixteen channels a group in the lanes its sums have:
// per group, the tap pairs' weights ([pairs][16] int32, each (w[t] - zw,
// w[t + 1] - zw) as int16 halves), the constants and float multipliers (16
// each) and the double multipliers (16, channel order). Formed with the
// requantization plan, once per session when its inputs are constant.
struct DepthwiseLanes {
  int64_t npairs = 0;
  std::vector<int32_t> pairs, constant;
  std::vector<float> mult_f;
  std::vector<double> mult_d;
};
DepthwiseLanes PackDepthwiseLanes(const ConvInt2D& g, const std::vector<int16_t>& taps, const int32_t* zw,
                                  const int32_t* constant, const double* mult);

// A depthwise QLinearConv (one input and one output channel per group) on
// AVX2, strides 1 and 2: false (nothing written) when this path does not
// apply. `taps` holds W' (weights shifted to signed) as [M][kh * kw]; zw,
// constant and mult are per channel as in Requant; lanes (may be empty) the
// same values as PackDepthwiseLanes lays them out.
bool RunDepthwiseQConv(KernelContext& ctx, const QConvGeometry& g, const uint8_t* x, uint8_t flip, uint8_t zx,
                       const std::vector<int16_t>& taps, const int32_t* zw, const int32_t* constant,
                       const double* mult, const DepthwiseLanes& lanes, const Requant& q, uint8_t* y);

}  // namespace nee::cpu::qconv
