// QLinearConv, QLinearAdd, QLinearLeakyRelu and QuantizeLinear fast kernels (ep/cpu/qconv_fast.cc,
// quant_fast.cc) against the reference kernels of ops/quantize.cc and ops/quantize_contrib.cc: every
// output bitwise equal, on the dispatched (AVX-512 VNNI where the CPU has it), AVX2 and portable paths, at
// one, two and three threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/qconv_common.h"
#include "ep/cpu/qconv_direct.h"
#include "ep/cpu/qconv_weights.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using testing::FloatAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

Result<Tensor> RunFast(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                       int threads) {
  return testing::RunKernelOmitting(kernel, node, opset, inputs, threads);
}

void ExpectFastMatchesReference(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                                const std::string& name) {
  auto ref = testing::RunOp(node, opset, inputs);
  ASSERT_TRUE(ref.ok()) << name << ": " << ref.status().ToString();
  const Tensor& want = ref->outputs[0].tensor();
  for (int threads : {1, 2, 3}) {
    auto got = RunFast(kernel, node, opset, inputs, threads);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().ToString();
    ASSERT_EQ(got->dtype(), want.dtype()) << name;
    ASSERT_EQ(got->dims(), want.dims()) << name;
    ASSERT_EQ(0, std::memcmp(got->raw_data(), want.raw_data(), want.byte_size()))
        << name << " threads=" << threads;
  }
}

Node MsNode(const std::string& op, size_t inputs, std::vector<Attribute> attrs = {}) {
  Node n = testing::MakeNode(op, inputs, 1, std::move(attrs));
  n.domain = "com.microsoft";
  return n;
}

class QConvFastTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

struct ConvCase {
  std::string name;
  std::vector<int64_t> x_dims, w_dims;
  std::vector<Attribute> attrs;
  DataType xt = DataType::kUint8, wt = DataType::kInt8, yt = DataType::kUint8;
  bool per_channel = true;
  int x_zp = -1, y_zp = -1;  // a fixed zero point (as its type's value), or -1: random
  bool bias = true;
  int weight_bits = 8;  // 7: weights in [-64, 64] (reduce-range); 8: the full int8 range
  float y_scale = 0.05f;  // small: multipliers x_scale * w_scale / y_scale of 1/2 and more (clamped in double)
  // > 0: signed weights as trained ones are, within +-outlier_base except one in 16 of them anywhere in the
  // int8 range, so that the AVX2 tiles' packing pairs k quads (qconv_weights.cc) with a few remainders.
  int outlier_base = 0;
};

Tensor Scalar8(DataType t, int v) {
  return t == DataType::kUint8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(v))
                               : Tensor::Scalar<int8_t>(static_cast<int8_t>(v));
}

std::vector<Value> ConvInputs(const ConvCase& c, std::mt19937& rng) {
  const int64_t m = c.w_dims[0];
  Tensor w = testing::Random8(c.wt, c.w_dims, rng);
  if (c.weight_bits == 7)
    for (int64_t i = 0; i < w.num_elements(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(w.data<int8_t>()[i] / 2);
  if (c.outlier_base > 0) {
    std::uniform_int_distribution<int> small(-c.outlier_base, c.outlier_base), one_in(0, 15), any(-128, 127);
    for (int64_t i = 0; i < w.num_elements(); ++i)
      w.data<int8_t>()[i] = static_cast<int8_t>(one_in(rng) == 0 ? any(rng) : small(rng));
  }
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  auto scales = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& s : v) s = scale(rng);
    return n == 1 ? Tensor::Scalar<float>(v[0]) : Tensor::FromVector(v, {n});
  };
  const int64_t per = c.per_channel ? m : 1;
  Tensor w_zp = c.per_channel ? testing::Random8(c.wt, {m}, rng) : testing::Random8(c.wt, {}, rng);
  // Signed weights: symmetric (zero point 0) as quantizers write them, and also random.
  if (c.wt == DataType::kInt8 && c.name.find("wzp") == std::string::npos)
    std::memset(w_zp.raw_data(), 0, w_zp.byte_size());
  std::vector<Value> in = {Value(testing::Random8(c.xt, c.x_dims, rng)),
                           Value(scales(1)),
                           Value(c.x_zp >= -128 && c.x_zp != -1 ? Scalar8(c.xt, c.x_zp) : testing::Random8(c.xt, {}, rng)),
                           Value(w),
                           Value(scales(per)),
                           Value(w_zp),
                           // y scale small enough that outputs spread over the range and saturate at both ends.
                           Value(Tensor::Scalar<float>(c.y_scale)),
                           Value(c.y_zp != -1 ? Scalar8(c.yt, c.y_zp) : testing::Random8(c.yt, {}, rng))};
  if (c.bias) {
    std::uniform_int_distribution<int32_t> b(-20000, 20000);
    std::vector<int32_t> v(static_cast<size_t>(m));
    for (int32_t& x : v) x = b(rng);
    in.push_back(Value(Tensor::FromVector(v, {m})));
  }
  return in;
}

void ExpectConvCasesMatchReference(const std::vector<ConvCase>& cases, unsigned seed) {
  std::mt19937 rng(seed);
  for (const ConvCase& c : cases) {
    std::vector<Value> inputs = ConvInputs(c, rng);
    Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
    ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
  }
}

TEST_P(QConvFastTest, QLinearConvMatchesReference) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const auto pads1 = IntsAttr("pads", {1, 1, 1, 1});
  const std::vector<ConvCase> cases = {
      {"3x3_pad1", {1, 8, 9, 11}, {16, 8, 3, 3}, {pads1}},
      {"3x3_stride2", {1, 5, 15, 14}, {7, 5, 3, 3}, {pads1, IntsAttr("strides", {2, 2})}},
      {"pointwise", {1, 24, 5, 7}, {13, 24, 1, 1}, {}},
      {"pointwise_odd_channels_per_tensor", {2, 5, 3, 6}, {7, 5, 1, 1}, {}, u8, s8, u8, false},
      {"pointwise_stride2", {1, 16, 9, 9}, {12, 16, 1, 1}, {IntsAttr("strides", {2, 2})}},
      {"pointwise_wide_image", {1, 9, 3, 40}, {6, 9, 1, 1}, {}},
      {"7x7_stem_like", {1, 3, 23, 21}, {8, 3, 7, 7}, {IntsAttr("pads", {3, 3, 3, 3}), IntsAttr("strides", {2, 2})}},
      {"dilation_asym_pads", {1, 3, 14, 12}, {4, 3, 3, 3}, {IntsAttr("dilations", {2, 3}), IntsAttr("pads", {2, 3, 1, 0})}},
      {"groups2", {2, 6, 8, 9}, {4, 3, 3, 3}, {IntAttr("group", 2), pads1}},
      {"depthwise", {1, 8, 10, 13}, {8, 1, 3, 3}, {IntAttr("group", 8), pads1}},
      {"depthwise_stride2_wide", {1, 16, 9, 37}, {16, 1, 3, 3}, {IntAttr("group", 16), pads1, IntsAttr("strides", {2, 2})}},
      {"depthwise_5x5_dilated_wzp", {2, 4, 12, 21}, {4, 1, 5, 5},
       {IntAttr("group", 4), IntsAttr("pads", {4, 4, 4, 4}), IntsAttr("dilations", {2, 2})}, s8, u8, s8},
      {"depthwise_int8_wzp_large_multipliers", {1, 6, 8, 17}, {6, 1, 3, 3}, {IntAttr("group", 6), pads1}, u8, s8, u8,
       true, -1, -1, true, 8, 1e-5f},
      {"depthwise_stride3_to_gemm", {1, 3, 10, 10}, {3, 1, 3, 3}, {IntAttr("group", 3), IntsAttr("strides", {3, 3})}},
      {"channel_multiplier_2", {1, 4, 7, 9}, {8, 1, 3, 3}, {IntAttr("group", 4), pads1}},
      {"same_upper", {1, 3, 10, 9}, {4, 3, 3, 4}, {StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("strides", {2, 2})}},
      {"many_outputs_ragged_deep", {1, 37, 11, 7}, {37, 37, 3, 3}, {pads1}},
      {"x_zp_0_y_zp_0", {1, 8, 6, 6}, {9, 8, 3, 3}, {pads1}, u8, s8, u8, true, 0, 0},
      {"x_zp_128_y_zp_128", {1, 8, 6, 6}, {9, 8, 3, 3}, {pads1}, u8, s8, u8, true, 128, 128},
      {"x_zp_255_y_zp_255", {1, 8, 6, 6}, {9, 8, 3, 3}, {pads1}, u8, s8, u8, true, 255, 255},
      {"no_bias", {1, 4, 7, 5}, {6, 4, 3, 3}, {pads1}, u8, s8, u8, true, -1, -1, false},
      {"reduce_range_weights", {1, 32, 8, 8}, {20, 32, 3, 3}, {pads1}, u8, s8, u8, true, -1, -1, true, 7},
      {"int8_activations", {1, 6, 7, 9}, {5, 6, 3, 3}, {pads1}, s8, s8, s8},
      {"large_multipliers", {1, 6, 7, 9}, {5, 6, 3, 3}, {pads1}, u8, s8, u8, true, -1, -1, true, 8, 1e-5f},
      {"large_multipliers_int8_out", {1, 6, 7, 9}, {5, 6, 3, 3}, {pads1}, u8, s8, s8, false, -1, -1, true, 8, 2e-4f},
      {"uint8_weights", {1, 6, 7, 9}, {5, 6, 3, 3}, {pads1}, u8, u8, u8},
      {"int8_weights_wzp", {1, 6, 7, 9}, {5, 6, 3, 3}, {pads1}, u8, s8, u8},
      {"1d", {2, 3, 20}, {4, 3, 5}, {IntsAttr("pads", {2, 1}), IntsAttr("strides", {2})}},
      {"1d_no_pads_int8", {2, 3, 29}, {4, 3, 5}, {IntsAttr("strides", {2})}, s8, s8, s8},
      {"pointwise_int8_ragged_image", {1, 12, 5, 9}, {10, 12, 1, 1}, {}, s8, s8, u8},
      {"pointwise_stride2_int8_wzp", {1, 16, 13, 9}, {12, 16, 1, 1}, {IntsAttr("strides", {2, 2})}, s8, s8, s8},
      {"deep_7x7_remainders", {1, 96, 7, 7}, {20, 96, 3, 3}, {pads1}},
      {"deep_pointwise_14x14", {1, 200, 14, 14}, {13, 200, 1, 1}, {}},
      // Pointwise convs reading x itself whose last, partial panel's whole-vector reads pass the end of x only
      // in the last image's last channels (those rows gathered byte by byte, the others by vectors).
      {"pointwise_7x7_batch2_int8_last_panel", {2, 40, 7, 7}, {9, 40, 1, 1}, {}, s8, s8, u8},
      {"pointwise_14x14_batch2_last_panel", {2, 24, 14, 14}, {14, 24, 1, 1}, {}},
      {"pointwise_5x5_int8_out_last_panel", {1, 33, 5, 5}, {8, 33, 1, 1}, {}, u8, s8, s8},
      // Four whole panels packed at once from x (VBMI): K not a multiple of 4 (the last quad's rows past K read
      // the zero point), int8 inputs flipped, the last image's last four panels ending at x's last byte; and
      // 9 panels (two fours and one alone) with a weight zero point (pixel sums from the packed bytes).
      {"pointwise_four_panels_int8_k10_batch2", {2, 10, 8, 16}, {14, 10, 1, 1}, {}, s8, s8, u8},
      {"pointwise_four_panels_9_wzp", {1, 33, 9, 16}, {7, 33, 1, 1}, {}, u8, u8, u8},
      {"dilated_no_pads_stride2", {1, 4, 15, 17}, {6, 4, 3, 3}, {IntsAttr("dilations", {2, 2}), IntsAttr("strides", {2, 2})}},
      {"groups3_unpadded_int8_batch2", {2, 9, 7, 7}, {12, 3, 3, 3}, {IntAttr("group", 3)}, s8, s8, u8},
      {"groups2_pointwise_7x7_wzp", {2, 8, 7, 7}, {10, 4, 1, 1}, {IntAttr("group", 2)}, u8, u8, s8},
      {"large_multipliers_7x7_few_pixels", {1, 40, 7, 7}, {9, 40, 1, 1}, {}, u8, s8, u8, true, -1, -1, true, 8, 1e-5f},
      {"large_multipliers_14x14_half_tile", {1, 8, 14, 14}, {7, 8, 3, 3}, {pads1}, s8, s8, s8, false, -1, -1, true, 8, 2e-4f},
      {"3d_to_reference", {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {}},
      {"empty_batch", {0, 3, 5, 5}, {4, 3, 3, 3}, {}},
      // The padded copy's rows (PadImageAvx2): widths under 16, 16-31 (two overlapping 16-byte copies), 32 and
      // more (32-byte copies, the last overlapping), asymmetric and one-sided pads, int8 inputs flipped.
      {"padded_rows_16_int8", {1, 4, 5, 16}, {6, 4, 3, 3}, {IntsAttr("pads", {2, 0, 0, 2})}, s8, s8, u8},
      {"padded_rows_31", {1, 4, 5, 31}, {6, 4, 3, 3}, {pads1}},
      {"padded_rows_32_int8", {1, 4, 5, 32}, {6, 4, 3, 3}, {pads1}, s8, s8, s8},
      {"padded_rows_33", {1, 4, 5, 33}, {6, 4, 3, 3}, {IntsAttr("pads", {0, 1, 2, 0})}},
      {"padded_rows_70_int8", {2, 5, 6, 70}, {7, 5, 3, 3}, {IntsAttr("pads", {1, 2, 0, 1})}, s8, s8, u8},
      {"padded_rows_56_stride2", {1, 6, 9, 56}, {5, 6, 3, 3}, {pads1, IntsAttr("strides", {2, 2})}, u8, s8, s8},
  };
  ExpectConvCasesMatchReference(cases, 5);
}

// Small images (last panels of 1..16 pixels: the half-width tile, many runs per panel), strides 1-3, with
// and without padding (reading x itself, int8 inputs flipped as they are read), 1x1 and 3x3 kernels, full-range
// weights (clamped pairs' remainders), weight zero points, int8 and uint8 everywhere.
TEST_P(QConvFastTest, QLinearConvSmallImagesStridesPads) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  std::mt19937 rng(11);
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1}, {2, 3}, {3, 3}, {4, 4}, {5, 5}, {7, 7},
                                                          {9, 9}, {4, 13}, {1, 37}, {14, 14}, {6, 11}};
  int index = 0;
  for (const auto& [h, w] : sizes)
    for (int64_t k : {1, 3})
      for (int64_t stride : {1, 2, 3})
        for (int64_t pad : {0, 1}) {
          if (k == 1 && pad == 1 && stride != 1) continue;
          if ((h + 2 * pad - k) < 0 || (w + 2 * pad - k) < 0) continue;
          ConvCase c;
          const int v = index++;
          c.name = "img" + std::to_string(h) + "x" + std::to_string(w) + "_k" + std::to_string(k) + "_s" +
                   std::to_string(stride) + "_p" + std::to_string(pad) + (v % 4 == 3 ? "_wzp" : "");
          const int64_t channels = 5 + v % 7, outputs = 7 + 2 * (v % 5);
          c.x_dims = {1 + v % 2, channels, h, w};
          c.w_dims = {outputs, channels, k, k};
          c.attrs = {IntsAttr("strides", {stride, stride}), IntsAttr("pads", {pad, pad, pad, pad})};
          c.xt = v % 3 == 1 ? s8 : u8;
          c.wt = v % 5 == 2 ? u8 : s8;
          c.yt = v % 2 ? s8 : u8;
          std::vector<Value> inputs = ConvInputs(c, rng);
          Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
          ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
        }
  EXPECT_GT(index, 100);
}

// Every weight pair at the saturating extremes (255 * (-128 - 128) overflows int16): the remainders keep it exact.
TEST_P(QConvFastTest, QLinearConvSaturatingPairs) {
  const std::vector<int64_t> xd{1, 64, 6, 6}, wd{20, 64, 3, 3};
  Tensor x = Tensor::FromVector(std::vector<uint8_t>(static_cast<size_t>(testing::ElementCount(xd)), 255), xd);
  std::vector<int8_t> wv(static_cast<size_t>(testing::ElementCount(wd)));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<int8_t>(i % 7 == 3 ? 127 : -128);
  std::vector<Value> inputs = {Value(x),
                               Value(Tensor::Scalar<float>(0.01f)),
                               Value(Tensor::Scalar<uint8_t>(0)),
                               Value(Tensor::FromVector(wv, wd)),
                               Value(Tensor::Scalar<float>(0.001f)),
                               Value(Tensor::Scalar<int8_t>(0)),
                               Value(Tensor::Scalar<float>(7.0f)),
                               Value(Tensor::Scalar<uint8_t>(128))};
  Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, {IntsAttr("pads", {1, 1, 1, 1})});
  ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, "saturating");
}

// The VNNI tiles' shapes (qconv_vnni.cc: twelve output channels over two weight panels, pairs of pixel
// panels, half and pixel tiles) and the AVX2 ones alike: channel counts around 6 and 12 (a second weight
// panel partly or not at all used), K not a multiple of 4, pixel counts that end in a pair whose second
// panel is 9-15 pixels full, a half panel (4-8) or 1-3 pixels, full-range weights (pairs that saturate
// vpmaddubsw), per-channel and per-tensor, with and without weight zero points.
TEST_P(QConvFastTest, QLinearConvTileShapes) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  std::mt19937 rng(17);
  int index = 0;
  for (int64_t m : {1, 5, 6, 7, 8, 9, 11, 12, 13, 16, 19, 25})  // last row panels of 1-6 rows
    for (int64_t pixels : {1, 3, 5, 8, 9, 17, 19, 24, 25, 31, 33, 35, 41, 47, 49, 57}) {
      const int v = index++;
      ConvCase c;
      const int64_t channels = 1 + v % 7;  // K = channels * 1 or * 3: 1..21, most not a multiple of 4
      const int64_t kw = v % 2 ? 3 : 1;
      c.name = "m" + std::to_string(m) + "_p" + std::to_string(pixels) + "_c" + std::to_string(channels) + "_k" +
               std::to_string(kw) + (v % 5 == 4 ? "_wzp" : "");
      c.x_dims = {1, channels, 1, pixels + kw - 1};
      c.w_dims = {m, channels, 1, kw};
      c.xt = v % 3 == 1 ? s8 : u8;
      c.yt = v % 2 ? s8 : u8;
      c.per_channel = v % 4 != 3;
      std::vector<Value> inputs = ConvInputs(c, rng);
      Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
      ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
    }
  // Small images with many output channels: on VNNI at two and three threads the channels are split among
  // the threads (RunImageByRows) where one or two threads take the pixels; 7x7 (three panels and a pixel),
  // 5x5, and a weight zero point (pixel sums).
  for (int64_t m : {50, 77, 100})
    for (int64_t side : {5, 7}) {
      ConvCase c{"rows_" + std::to_string(side) + "x" + std::to_string(side) + "_m" + std::to_string(m) +
                     (m == 77 ? "_wzp" : ""),
                 {1, 9, side, side}, {m, 9, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}};
      if (m == 77) c.wt = DataType::kUint8;
      std::vector<Value> inputs = ConvInputs(c, rng);
      Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
      ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
    }
  // The padded copy around the 64-byte row: rows of 63 and 64 bytes written whole (62 and 61 wide, pads 1 and
  // asymmetric), 65 and 72 bytes through the plane fill; int8 input (flipped) and uint8.
  for (int64_t width : {61, 62, 63, 70}) {
    ConvCase c{"pad_row_w" + std::to_string(width), {1, 5, 4, width}, {7, 5, 3, 3},
               {IntsAttr("pads", {1, width == 61 ? 2 : 1, 1, 1})}};
    c.xt = width % 2 ? DataType::kInt8 : DataType::kUint8;
    std::vector<Value> inputs = ConvInputs(c, rng);
    Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
    ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
  }
  // Deep: K = 9 * 61 = 549 (not a multiple of 4), 13 and 26 channels, a 9x9 image (81 pixels: five panels
  // and one pixel), full-range weights.
  for (int64_t m : {13, 26}) {
    ConvCase c{"deep_9x9_m" + std::to_string(m), {2, 61, 9, 9}, {m, 61, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}};
    std::vector<Value> inputs = ConvInputs(c, rng);
    Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
    ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
  }
}

// Multipliers of exactly 2^-4: double(acc) * mult + yzp lands on a half (a tie, rounded to even) for one sum
// in sixteen, where the float shortcut of the requantization cannot decide and the double arithmetic
// must; and on values a hair from halves elsewhere.
// QLinearConv's inputs whose sums land on ties: inputs 0..3 around x_zp 1, scales 0.5 * 0.5 / 4 = 2^-4.
std::vector<Value> TieInputs(const std::vector<int64_t>& xd, const std::vector<int64_t>& wd, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(0, 3);
  std::vector<uint8_t> xv(static_cast<size_t>(testing::ElementCount(xd)));
  for (uint8_t& b : xv) b = static_cast<uint8_t>(small(rng));
  return {Value(Tensor::FromVector(xv, xd)),
          Value(Tensor::Scalar<float>(0.5f)),
          Value(Tensor::Scalar<uint8_t>(1)),
          Value(testing::Random8(DataType::kInt8, wd, rng)),
          Value(Tensor::Scalar<float>(0.5f)),
          Value(Tensor::Scalar<int8_t>(0)),
          Value(Tensor::Scalar<float>(4.0f)),
          Value(Tensor::Scalar<uint8_t>(128))};
}

TEST_P(QConvFastTest, QLinearConvRequantTies) {
  std::vector<Value> inputs = TieInputs({1, 8, 11, 13}, {14, 8, 3, 3}, 23);
  Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, {IntsAttr("pads", {1, 1, 1, 1})});
  ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, "ties");
  inputs[6] = Value(Tensor::Scalar<float>(3.0f));  // 1/12: not a power of two, sums a hair from halves
  ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, "near ties");
}

// Whole tiles requantized in registers (qconv_vnni.cc's WholeTileVnni: twelve output channels by sixteen full
// pixels, no weight zero points, small multipliers): 1x1 convs over K = 64 (ResNet's) and K = 13 or 6 (not a
// multiple of four), 24 and 36 channels (every row panel pair whole) and 30 (a last pair of six rows), images
// whose panels are all full or end in a partial one, uint8 and int8 outputs, multipliers of 2^-4 whose sums
// land on ties (the double arithmetic's fallback inside the tile), and a weight zero point (not whole: sums).
TEST_P(QConvFastTest, QLinearConvWholeTilesInRegisters) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<ConvCase> cases = {
      {"whole_k64_m24_16x16", {1, 64, 16, 16}, {24, 64, 1, 1}, {}},
      {"whole_k64_m36_int8_out", {1, 64, 8, 10}, {36, 64, 1, 1}, {}, u8, s8, s8},
      {"whole_k13_m30_ragged", {2, 13, 7, 9}, {30, 13, 1, 1}, {}, s8, s8, u8, false},
      {"whole_k6_m24_uint8_weights", {1, 6, 12, 12}, {24, 6, 1, 1}, {}, u8, u8, u8},
      {"whole_k64_m24_wzp", {1, 64, 6, 11}, {24, 64, 1, 1}, {}, u8, u8, u8},
      {"whole_3x3_m48_stride2", {1, 16, 17, 17}, {48, 16, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1}), IntsAttr("strides", {2, 2})}},
  };
  ExpectConvCasesMatchReference(cases, 31);
  std::vector<Value> inputs = TieInputs({1, 20, 8, 12}, {24, 20, 1, 1}, 37);
  Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, {});
  ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, "whole tile ties");
  // The AVX2 whole tile (qconv_tile_avx2.cc: six channels by sixteen pixels) runs only on row panels without
  // clamped pairs: the same convs with 7-bit weights, which never saturate vpmaddubsw, so that every whole
  // six-row tile takes it; 1x1 convs of 7x7 and 14x14 images (a panel's pixels over two or three image rows,
  // read as one run from x).
  std::vector<ConvCase> seven_bit = cases;
  seven_bit.push_back({"whole_k64_m18_7x7", {1, 64, 7, 7}, {18, 64, 1, 1}, {}});
  seven_bit.push_back({"whole_k20_m12_14x14_int8_in", {1, 20, 14, 14}, {12, 20, 1, 1}, {}, s8, s8, s8});
  for (ConvCase& c : seven_bit) {
    c.name += "_7bit";
    if (c.wt == s8) c.weight_bits = 7;
  }
  ExpectConvCasesMatchReference(seven_bit, 41);
  inputs = TieInputs({1, 20, 8, 12}, {24, 20, 1, 1}, 43);
  Tensor& w = inputs[3].tensor();
  for (int64_t i = 0; i < w.num_elements(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(w.data<int8_t>()[i] / 2);
  ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, "whole tile ties, 7-bit weights");
  // Multipliers of 2^-4 (1 - 2^-11): sums of 8 + 16j land (j + 1/2) 2^-11 short of a half, about 1.5 and
  // 2.5 times the AVX2 tile's margin 2^-12 (qconv_tile_avx2.cc), where it now decides alone, and at 2^-12
  // itself; on 7-bit weights (every whole tile in registers) and on paired weights with remainders (K = 520:
  // 130 quads, small weights with a few outliers at -128 and 127), exact ties too, whose fallback forms the
  // pair's sums again quad by quad.
  for (int variant = 0; variant < 3; ++variant) {
    const int64_t channels = variant == 0 ? 20 : 520;
    inputs = TieInputs({1, channels, 8, 12}, {24, channels, 1, 1}, 47 + variant);
    Tensor& wv = inputs[3].tensor();
    for (int64_t i = 0; i < wv.num_elements(); ++i) {
      const int v = wv.data<int8_t>()[i];
      wv.data<int8_t>()[i] = static_cast<int8_t>(variant == 0 ? v / 2 : i % 997 == 0 ? -128 : i % 991 == 0 ? 127 : v / 16);
    }
    if (variant != 1) inputs[6] = Value(Tensor::Scalar<float>(4.0f / (1.0f - 1.0f / 2048)));
    ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs,
                               variant == 0 ? "near ties, 7-bit" : variant == 1 ? "paired ties" : "paired near ties");
  }
}

// Weights as trained ones are (small, a few outliers): the AVX2 packing cuts the outliers so that the whole
// tile adds two k quads' pair sums in int16 (qconv_weights.cc, qconv_tile_avx2.cc: `paired`), their remainders
// at even and odd bytes (a few of these convs leave too many remainders and are packed pair by pair). Every
// row count of a panel (1-6, and more panels), odd and even k quad counts (the paired loop's last single quad;
// and K too short to pair), uint8 and int8 outputs, 1x1 and 3x3 convs, whole panels and the narrower tiles
// (a last panel of 1-15 pixels, which read the same packing), inputs of 255 with the outliers at -128 and
// 127 (the largest pair sums), and weights that need no remainder at all.
TEST_P(QConvFastTest, QLinearConvPairedQuads) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const auto pads1 = IntsAttr("pads", {1, 1, 1, 1});
  std::vector<ConvCase> cases;
  int index = 0;
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 13, 24})
    // K: 29, 64 (1x1, too few quads to pair), 513 (1x1, 129 quads: the paired loop's last quad alone); 261 (3x3,
    // 66 quads, paired), 576 or 4617 (3x3).
    for (int64_t channels : {29, 64, 513}) {
      const int v = index++;
      const int64_t k = v % 2 ? 3 : 1;
      ConvCase c;
      c.name = "m" + std::to_string(m) + "_c" + std::to_string(channels) + "_k" + std::to_string(k);
      c.x_dims = {1, channels, 8, v % 3 == 0 ? 10 : 8};  // 64 pixels (whole panels) or 80 / 8 x 10 at 3x3
      c.w_dims = {m, channels, k, k};
      if (k == 3) c.attrs = {pads1};
      c.xt = v % 3 == 1 ? s8 : u8;
      c.yt = v % 2 ? s8 : u8;
      c.per_channel = v % 4 != 3;
      c.outlier_base = v % 5 == 4 ? 32 : 16;
      c.y_scale = v % 2 ? 0.5f : 0.05f;  // outputs spread over the range, or many saturated
      cases.push_back(c);
    }
  cases.push_back({"ragged_7x7", {1, 64, 7, 7}, {18, 64, 3, 3}, {pads1}, u8, s8, u8});
  cases.push_back({"ragged_14x14_int8", {2, 32, 14, 14}, {12, 32, 1, 1}, {}, s8, s8, s8});
  // Small images with many output channels: on AVX2 at two and three threads the channels are split among the
  // threads (RunImageByRows), paired rows with remainders too; 7x7 (three panels and a pixel) and 14x14 (twelve
  // and a half-tile panel), a last row panel of 2 and 1 rows.
  cases.push_back({"by_rows_7x7_m74", {1, 64, 7, 7}, {74, 64, 3, 3}, {pads1}, u8, s8, u8});
  cases.push_back({"by_rows_14x14_m79_int8", {1, 130, 14, 14}, {79, 130, 2, 2}, {}, s8, s8, s8});
  cases.push_back({"no_remainders", {1, 40, 8, 8}, {12, 40, 3, 3}, {pads1}});
  cases.back().outlier_base = 32;  // no outliers: see below
  for (ConvCase& c : cases)
    if (c.outlier_base == 0) c.outlier_base = 16;
  std::mt19937 rng(53);
  for (const ConvCase& c : cases) {
    std::vector<Value> inputs = ConvInputs(c, rng);
    if (c.name == "no_remainders") {
      Tensor& w = inputs[3].tensor();
      for (int64_t i = 0; i < w.num_elements(); ++i)
        w.data<int8_t>()[i] = static_cast<int8_t>(std::clamp<int>(w.data<int8_t>()[i], -32, 32));
    }
    Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
    ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
  }
  // The largest lane sums: every input 255, four weights of one sign at 32 in each lane of two quads (255 * 128),
  // outliers at the ends of the range cut to that.
  ConvCase c{"extremes", {1, 64, 8, 8}, {12, 64, 3, 3}, {pads1}};
  std::vector<Value> inputs = ConvInputs(c, rng);
  Tensor& x = inputs[0].tensor();
  std::memset(x.raw_data(), 255, x.byte_size());
  Tensor& w = inputs[3].tensor();
  for (int64_t i = 0; i < w.num_elements(); ++i)
    w.data<int8_t>()[i] = static_cast<int8_t>(i % 97 == 0 ? -128 : i % 89 == 0 ? 127 : (i / 2) % 2 ? 32 : -32);
  Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
  ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, "extremes");
}

// The AVX2 packing (qconv_weights.cc) against the rules it must keep, checked weight by weight: each packed byte
// plus its listed remainder is the weight (int8, or uint8 shifted by 128); every lane of the packing fits — the
// four weights of a lane of two paired quads, or the two of a pair elsewhere, have positive parts summing to at
// most 128 and negative ones too —; a lane whose weights fit as they are is not cut; the row sums and the
// depthwise taps are the weights'. Full-range, trained-like (small with outliers) and extreme (-128 / 127)
// weights, int8 and uint8, K not a multiple of 4, 8 or 32, panels of 1-6 rows, groups.
TEST(QConvWeights, PackingCutsOnlyLanesThatCouldSaturate) {
  std::mt19937 rng(61);
  int index = 0;
  for (int64_t M : {1, 5, 6, 13, 40})
    for (int64_t K : {1, 4, 7, 9, 31, 64, 130, 513})
      for (int dist = 0; dist < 3; ++dist)
        for (bool paired : {false, true}) {
          const int v = index++;
          const bool u8 = v % 2 == 1;
          const int64_t group = v % 5 == 0 && M % 5 == 0 ? 5 : 1;
          cpu::qconv::QConvGeometry g;
          g.M = M, g.Mg = M / group, g.group = group, g.C = K * group, g.Cg = K, g.kh = 1, g.kw = 1;
          std::vector<uint8_t> bytes(static_cast<size_t>(M * K));
          std::uniform_int_distribution<int> any(-128, 127), small(-24, 24), one_in(0, 11), ends(0, 1);
          for (uint8_t& b : bytes) {
            const int w = dist == 0 ? any(rng) : dist == 1 ? (one_in(rng) ? small(rng) : any(rng)) : (ends(rng) ? 127 : -128);
            b = static_cast<uint8_t>(u8 ? w + 128 : w);
          }
          Tensor w = Tensor::View(u8 ? DataType::kUint8 : DataType::kInt8, {M, K, 1, 1}, bytes.data(), nullptr);
          const auto packed = cpu::qconv::PackWeights(g, w, true, paired);
          const std::string name = "M" + std::to_string(M) + " K" + std::to_string(K) + " dist" + std::to_string(dist) +
                                   (paired ? " paired" : "") + (u8 ? " uint8" : "") + " group" + std::to_string(group);
          const int64_t kquads = (K + 3) / 4, ppg = (g.Mg + 5) / 6;
          ASSERT_EQ(packed->kquads, kquads) << name;
          for (int64_t m = 0; m < M; ++m) {
            const int64_t grp = m / g.Mg, panel = grp * ppg + (m % g.Mg) / 6, r = (m % g.Mg) % 6;
            std::vector<int32_t> full(static_cast<size_t>(kquads * 4), 0), cut(full.size(), 0), rem(full.size(), 0);
            int32_t sum = 0;
            for (int64_t k = 0; k < K; ++k) {
              const uint8_t b = bytes[static_cast<size_t>(m * K + k)];
              full[static_cast<size_t>(k)] = u8 ? static_cast<int32_t>(b) - 128 : static_cast<int8_t>(b);
              sum += full[static_cast<size_t>(k)];
            }
            ASSERT_EQ(packed->row_sums[static_cast<size_t>(m)], sum) << name;
            for (int64_t k = 0; k < kquads * 4; ++k)
              cut[static_cast<size_t>(k)] = packed->data[static_cast<size_t>((panel * kquads + k / 4) * 24 + r * 4 + k % 4)];
            const int64_t row = panel * 6 + r;
            // The row's entries at bytes 0 and 2 (kEvenBytes) before remainder_odd, those at bytes 1 and 3 from it.
            const int64_t odd = packed->remainder_odd[static_cast<size_t>(row)];
            ASSERT_LE(packed->remainder_begin[static_cast<size_t>(row)], odd) << name;
            ASSERT_LE(odd, packed->remainder_begin[static_cast<size_t>(row + 1)]) << name;
            for (int64_t e = packed->remainder_begin[static_cast<size_t>(row)];
                 e < packed->remainder_begin[static_cast<size_t>(row + 1)]; ++e) {
              const auto& entry = packed->remainders[static_cast<size_t>(e)];
              ASSERT_EQ((entry.offset & cpu::qconv::kEvenBytes) != 0, e < odd) << name << " m" << m << " entry " << e;
              const int64_t k = (entry.offset & ~cpu::qconv::kEvenBytes) / 64 * 4 + ((entry.offset & cpu::qconv::kEvenBytes) ? 0 : 1);
              rem[static_cast<size_t>(k)] += static_cast<int16_t>(entry.pair & 0xFFFF);
              rem[static_cast<size_t>(k + 2)] += static_cast<int16_t>(static_cast<uint32_t>(entry.pair) >> 16);
            }
            for (int64_t k = 0; k < kquads * 4; ++k)
              ASSERT_EQ(cut[static_cast<size_t>(k)] + rem[static_cast<size_t>(k)], full[static_cast<size_t>(k)])
                  << name << " m" << m << " k" << k;
            // The lanes: groups of four over the paired quads, pairs after them.
            const int64_t paired_k = packed->paired ? kquads / 2 * 8 : 0;
            auto check = [&](std::vector<int64_t> ks) {
              int32_t pos = 0, neg = 0, full_pos = 0, full_neg = 0;
              for (int64_t k : ks) {
                pos += std::max(0, cut[static_cast<size_t>(k)]), neg += std::max(0, -cut[static_cast<size_t>(k)]);
                full_pos += std::max(0, full[static_cast<size_t>(k)]), full_neg += std::max(0, -full[static_cast<size_t>(k)]);
              }
              EXPECT_LE(pos, 128) << name << " m" << m << " k" << ks[0];
              EXPECT_LE(neg, 128) << name << " m" << m << " k" << ks[0];
              if (full_pos <= 128 && full_neg <= 128)
                for (int64_t k : ks) EXPECT_EQ(rem[static_cast<size_t>(k)], 0) << name << " m" << m << " k" << k;
            };
            for (int64_t k = 0; k < paired_k; k += 8) {
              check({k, k + 1, k + 4, k + 5});
              check({k + 2, k + 3, k + 6, k + 7});
            }
            for (int64_t k = paired_k; k < kquads * 4; k += 2) check({k, k + 1});
          }
          // Paired: each row panel's two passes' slots (rows 0-2, 3-5) hold every row's entries in order, one slot
          // per entry, zero entries (adding nothing) where a row has fewer, and as many slots as its longest row.
          if (!packed->paired) continue;
          const int64_t panels = group * ppg;
          ASSERT_EQ(packed->pass_slot_begin.size(), static_cast<size_t>(2 * panels + 1)) << name;
          for (int64_t pass = 0; pass < 2 * panels; ++pass) {
            const int64_t* begin = packed->remainder_begin.data() + pass * 3;
            const int64_t first = packed->pass_slot_begin[static_cast<size_t>(pass)];
            const int64_t slots = (packed->pass_slot_begin[static_cast<size_t>(pass + 1)] - first) / 3;
            ASSERT_EQ(packed->pass_slot_begin[static_cast<size_t>(pass + 1)] - first, 3 * slots) << name;
            int64_t longest = 0;
            for (int64_t r = 0; r < 3; ++r) longest = std::max(longest, begin[r + 1] - begin[r]);
            ASSERT_EQ(slots, longest) << name << " pass " << pass;
            for (int64_t i = 0; i < slots; ++i)
              for (int64_t r = 0; r < 3; ++r) {
                const auto& slot = packed->pass_slots[static_cast<size_t>(first + 3 * i + r)];
                if (i < begin[r + 1] - begin[r]) {
                  const auto& entry = packed->remainders[static_cast<size_t>(begin[r] + i)];
                  EXPECT_EQ(slot.offset, entry.offset) << name << " pass " << pass << " slot " << i;
                  EXPECT_EQ(slot.pair, entry.pair) << name << " pass " << pass << " slot " << i;
                } else {
                  EXPECT_EQ(slot.pair, 0) << name << " pass " << pass << " slot " << i;
                }
              }
          }
        }
  // Depthwise: the taps are the shifted weights, [M][K].
  cpu::qconv::QConvGeometry g;
  g.M = 20, g.Mg = 1, g.group = 20, g.C = 20, g.Cg = 1, g.kh = 3, g.kw = 3;
  std::vector<uint8_t> bytes(180);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  Tensor w = Tensor::View(DataType::kUint8, {20, 1, 3, 3}, bytes.data(), nullptr);
  const auto packed = cpu::qconv::PackWeights(g, w, true, false);
  ASSERT_EQ(packed->taps.size(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) EXPECT_EQ(packed->taps[i], static_cast<int32_t>(bytes[i]) - 128) << i;
}

// The direct path (qconv_direct.cc, AVX-512 VNNI + VBMI: stride 1 or 2, undilated, group 1, channels a multiple of
// four, panels over at most two output rows, no weight zero points, small multipliers): odd pixel counts (a lone
// last panel, a last one of at most eight pixels on the half tile, one of nine to fifteen), output channels past
// each twelve, pads on some sides only or none, 2x2 / 5x5 / 1x3 kernels, 1-D, int8 inputs (flipped) and zero
// points at both ends (the padding), batches. On the AVX2 and portable runs the same convs take the GEMM path.
TEST_P(QConvFastTest, QLinearConvDirectPathMatchesReference) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const auto pads1 = IntsAttr("pads", {1, 1, 1, 1}), strides2 = IntsAttr("strides", {2, 2});
  const std::vector<ConvCase> cases = {
      {"direct_16_wide_lone_panel", {1, 8, 17, 16}, {12, 8, 3, 3}, {pads1}},
      {"direct_20_wide_half_tile_batch2_m13", {2, 4, 9, 20}, {13, 4, 3, 3}, {pads1}},
      {"direct_31_wide_int8", {1, 12, 6, 31}, {25, 12, 3, 3}, {pads1}, s8, s8, s8},
      {"direct_5x5_per_tensor", {1, 4, 16, 18}, {6, 4, 5, 5}, {IntsAttr("pads", {2, 2, 2, 2})}, u8, s8, u8, false},
      {"direct_1x3_asym_pads", {1, 8, 5, 24}, {7, 8, 1, 3}, {IntsAttr("pads", {0, 1, 0, 0})}},
      {"direct_unpadded", {1, 4, 10, 19}, {7, 4, 3, 3}, {}, u8, s8, s8},
      {"direct_2x2_pads_one_side", {1, 4, 8, 21}, {5, 4, 2, 2}, {IntsAttr("pads", {1, 0, 0, 1})}},
      {"direct_57_wide", {1, 16, 5, 57}, {24, 16, 3, 3}, {pads1}},
      {"direct_deep_16x16", {1, 64, 16, 16}, {30, 64, 3, 3}, {pads1}, u8, s8, u8, true, -1, -1, true, 8},
      {"direct_x_zp_0", {1, 8, 7, 15}, {9, 8, 3, 3}, {pads1}, u8, s8, u8, true, 0, 0},
      {"direct_x_zp_255", {1, 8, 7, 15}, {9, 8, 3, 3}, {pads1}, u8, s8, u8, true, 255, 255},
      {"direct_int8_x_zp_-128", {1, 8, 7, 18}, {9, 8, 3, 3}, {pads1}, s8, s8, u8, true, -128, -1},
      {"direct_1d", {2, 8, 40}, {6, 8, 3}, {IntsAttr("pads", {1, 1})}},
      {"direct_no_bias_uint8_weights", {1, 4, 6, 17}, {5, 4, 3, 3}, {pads1}, u8, u8, u8, true, -1, -1, false},
      {"direct_14x14_half_tile_int8", {1, 20, 14, 14}, {26, 20, 3, 3}, {pads1}, s8, s8, u8},
      {"direct_14_wide_batch3", {3, 8, 5, 14}, {12, 8, 3, 3}, {pads1}},
      // Stride 2: the copy's rows split into even and odd columns (CopyRows), the padded column of the first
      // pixel even or odd, widths odd and even, a stride along one axis only.
      {"direct_s2_56x56", {1, 8, 56, 56}, {12, 8, 3, 3}, {pads1, strides2}},
      {"direct_s2_odd_width_batch2", {2, 8, 9, 33}, {13, 8, 3, 3}, {pads1, strides2}},
      {"direct_s2_unpadded", {1, 4, 11, 37}, {7, 4, 3, 3}, {strides2}, u8, s8, s8},
      {"direct_s2_left_pad_only", {1, 4, 8, 40}, {6, 4, 3, 3}, {IntsAttr("pads", {0, 1, 0, 0}), strides2}},
      {"direct_s2_int8_5x5", {1, 12, 13, 35}, {25, 12, 5, 5}, {IntsAttr("pads", {2, 2, 2, 2}), strides2}, s8, s8, s8},
      {"direct_s2_rows_only", {1, 8, 12, 17}, {9, 8, 3, 3}, {pads1, IntsAttr("strides", {2, 1})}},
      {"direct_s2_columns_only", {1, 8, 6, 31}, {9, 8, 3, 3}, {pads1, IntsAttr("strides", {1, 2})}},
      {"direct_s2_28_to_14", {1, 32, 28, 28}, {30, 32, 3, 3}, {pads1, strides2}, u8, s8, u8, true, -1, -1, true, 8},
  };
  ExpectConvCasesMatchReference(cases, 29);
}

// The largest |sum + bias| a channel of QLinearConv's inputs allows (|x - x_zp| <= 255), over the channels:
// what planning bounds the one-fma requantization by.
double LargestSum(const std::vector<Value>& inputs) {
  const Tensor &w = inputs[3].tensor(), &w_zp = inputs[5].tensor();
  const int64_t M = w.dims()[0], K = w.num_elements() / M;
  double largest = 0;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t zi = w_zp.num_elements() == 1 ? 0 : m;
    const int zw = w.dtype() == DataType::kUint8 ? w_zp.data<uint8_t>()[zi] : w_zp.data<int8_t>()[zi];
    double sum = inputs.size() > 8 ? std::fabs(static_cast<double>(inputs[8].tensor().data<int32_t>()[m])) : 0.0;
    for (int64_t k = 0; k < K; ++k) {
      const int v = w.dtype() == DataType::kUint8 ? w.data<uint8_t>()[m * K + k] : w.data<int8_t>()[m * K + k];
      sum += 255.0 * std::abs(v - zw);
    }
    largest = std::max(largest, sum);
  }
  return largest;
}

// The one-fma requantization (Requant::float_exact: planning proved, RoundingFmaExact, that one float fma with
// the rounding bias gives the reference's byte for every sum the node's weights allow) on each path that takes
// it: the AVX-512 VNNI whole tiles, two-panel and narrow tiles, direct 3x3 tiles and depthwise rows (flat,
// grouped and by rows), the AVX2 tiles and depthwise kernels; and the bracketing float shortcut the same paths
// take where the proof refuses. Per-tensor scales from several seeds: multipliers of int8 ResNet-50's size (1e-3
// to 1e-2: 30,000 to 260,000 sums near the output range), which the proof covers, and multipliers below 2^-20,
// which it does not, with biases of up to 200 / multiplier so that their outputs spread over the range too.
TEST_P(QConvFastTest, QLinearConvOneFmaRequantizationMatchesReference) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const auto pads1 = IntsAttr("pads", {1, 1, 1, 1});
  std::vector<ConvCase> cases = {
      {"one_fma_1x1_whole", {1, 64, 16, 16}, {24, 64, 1, 1}, {}, u8, s8, u8, false},
      {"one_fma_1x1_ragged_int8_out", {1, 32, 7, 9}, {30, 32, 1, 1}, {}, u8, s8, s8, false},
      {"one_fma_1x1_7x7", {1, 128, 7, 7}, {36, 128, 1, 1}, {}, u8, s8, u8, false},
      {"one_fma_3x3_direct", {1, 16, 14, 14}, {24, 16, 3, 3}, {pads1}, u8, s8, u8, false},
      {"one_fma_3x3_stride2", {1, 16, 15, 15}, {24, 16, 3, 3}, {pads1, IntsAttr("strides", {2, 2})}, u8, s8, u8, false},
      {"one_fma_depthwise_14x14", {1, 32, 14, 14}, {32, 1, 3, 3}, {pads1, IntAttr("group", 32)}, u8, s8, u8, false},
      {"one_fma_depthwise_7x7", {1, 32, 7, 7}, {32, 1, 3, 3}, {pads1, IntAttr("group", 32)}, u8, s8, u8, false},
      {"one_fma_depthwise_28x28_s2", {1, 16, 28, 28}, {16, 1, 3, 3}, {pads1, IntAttr("group", 16), IntsAttr("strides", {2, 2})}, u8, s8, u8, false},
  };
  int proven = 0, refused = 0;
  for (unsigned seed = 0; seed < 8; ++seed)
    for (ConvCase c : cases) {
      const bool tiny = seed % 2 == 1;
      c.name += (tiny ? "_tiny_seed" : "_seed") + std::to_string(seed);
      std::mt19937 rng(100 + seed);
      std::vector<Value> inputs = ConvInputs(c, rng);
      // x_scale * w_scale / y_scale between 1e-3 and 1e-2 (or 2^-24 and 2^-21), formed as the kernel forms it.
      const float xs = std::uniform_real_distribution<float>(0.01f, 0.05f)(rng);
      const float ws = std::uniform_real_distribution<float>(0.01f, 0.05f)(rng);
      const float mult_f = tiny ? std::exp2(std::uniform_real_distribution<float>(-24.0f, -21.0f)(rng))
                                : std::exp2(std::uniform_real_distribution<float>(-10.0f, -6.6f)(rng));
      const float ys = static_cast<float>(static_cast<double>(xs) * ws / mult_f);
      inputs[1] = Value(Tensor::Scalar<float>(xs));
      inputs[4] = Value(Tensor::Scalar<float>(ws));
      inputs[6] = Value(Tensor::Scalar<float>(ys));
      if (tiny) {
        std::uniform_real_distribution<double> value(-200, 200);
        std::vector<int32_t> bias(static_cast<size_t>(c.w_dims[0]));
        for (int32_t& b : bias) b = static_cast<int32_t>(value(rng) / mult_f);
        inputs[8] = Value(Tensor::FromVector(bias, {c.w_dims[0]}));
      }
      const double yzp = c.yt == s8 ? inputs[7].tensor().data<int8_t>()[0] : inputs[7].tensor().data<uint8_t>()[0];
      const double mult = static_cast<float>(static_cast<float>(static_cast<double>(xs) * ws) / static_cast<double>(ys));
      (cpu::RoundingFmaExact(mult, static_cast<float>(mult), yzp, LargestSum(inputs)) ? proven : refused)++;
      Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
      ExpectFastMatchesReference(cpu::QLinearConvFast, node, 10, inputs, c.name);
    }
  EXPECT_EQ(proven, 4 * static_cast<int>(cases.size()));
  EXPECT_EQ(refused, 4 * static_cast<int>(cases.size()));
}

// In a session the geometry is planned once per input shape (with the weights packed and the requantization
// formed once): runs through one PreparedCache with the image growing and shrinking again, each at one, two and
// three threads and twice, give the reference's bytes (the direct, GEMM and by-rows paths: 3x3 and 1x1 convs on
// large and small images).
TEST_P(QConvFastTest, QLinearConvCachedGeometryFollowsTheInputShape) {
  std::mt19937 rng(41);
  const std::vector<ConvCase> cases = {
      {"3x3", {1, 8, 9, 9}, {12, 8, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"1x1", {1, 16, 9, 9}, {30, 16, 1, 1}, {}},
  };
  for (const ConvCase& c : cases) {
    std::vector<Value> inputs = ConvInputs(c, rng);
    const Node node = testing::MakeNode("QLinearConv", inputs.size(), 1, c.attrs);
    PreparedCache cache;
    std::vector<bool> constant(inputs.size(), true);
    constant[0] = false;  // x; every other input is an initializer
    for (const std::vector<int64_t>& hw : {std::vector<int64_t>{9, 9}, {30, 23}, {5, 7}, {9, 9}}) {
      inputs[0] = Value(testing::Random8(c.xt, {1, c.x_dims[1], hw[0], hw[1]}, rng));
      auto ref = testing::RunOp(node, 10, inputs);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      const std::string what = c.name + " " + std::to_string(hw[0]) + "x" + std::to_string(hw[1]);
      for (int threads : {1, 2, 3})
        for (int repeat = 0; repeat < 2; ++repeat) {
          auto got = testing::RunKernelPrepared(cpu::QLinearConvFast, node, 10, inputs, threads, &cache, &constant);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
          testing::ExpectBitwise(*got, want, what + " threads " + std::to_string(threads));
        }
    }
  }
}

// Which convs the direct path takes (a pure function of the geometry, the requantization and the CPU flags).
TEST(QConvDirect, AppliesToStrideOneAndTwoConvsOverChannelQuads) {
  cpu::qconv::QConvGeometry g;
  g.N = 1, g.C = 64, g.M = 64, g.Cg = 64, g.Mg = 64, g.ih = g.iw = g.oh = g.ow = 56, g.kh = g.kw = 3;
  g.ph = g.pw = 1, g.hp = g.wp = 58;
  cpu::qconv::Requant q;
  q.small_multipliers = true;
  EXPECT_TRUE(cpu::qconv::DirectQConvApplies(g, q, true, true));
  EXPECT_FALSE(cpu::qconv::DirectQConvApplies(g, q, false, true));  // no VNNI
  EXPECT_FALSE(cpu::qconv::DirectQConvApplies(g, q, true, false));  // no VBMI
  auto with = [&](auto change) {
    cpu::qconv::QConvGeometry h = g;
    cpu::qconv::Requant r = q;
    change(h, r);
    return cpu::qconv::DirectQConvApplies(h, r, true, true);
  };
  EXPECT_TRUE(with([](auto& h, auto&) { h.sh = h.sw = 2, h.oh = h.ow = 28; }));
  EXPECT_TRUE(with([](auto& h, auto&) { h.sw = 2, h.ow = 28; }));
  EXPECT_FALSE(with([](auto& h, auto&) { h.sh = h.sw = 3, h.oh = h.ow = 19; }));
  EXPECT_FALSE(with([](auto& h, auto&) { h.sh = h.sw = 2, h.oh = h.ow = 7; }));  // 7 wide: up to four rows
  EXPECT_FALSE(with([](auto& h, auto&) { h.dh = 2; }));
  EXPECT_FALSE(with([](auto& h, auto&) { h.kh = h.kw = 1; }));            // pointwise: the GEMM reads x itself
  EXPECT_FALSE(with([](auto& h, auto&) { h.C = h.Cg = 62; }));            // not whole channel quads
  EXPECT_FALSE(with([](auto& h, auto&) { h.group = 2, h.Cg = 32; }));
  EXPECT_FALSE(with([](auto& h, auto&) { h.ow = 13; }));  // pixels 12 + 13k .. : panels over three output rows
  EXPECT_TRUE(with([](auto& h, auto&) { h.ow = 14; }));   // panels start at even pixels: two rows at most
  EXPECT_FALSE(with([](auto& h, auto&) { h.ow = h.oh = h.ih = h.iw = 7; }));  // 7 wide: up to four rows
  EXPECT_FALSE(with([](auto&, auto& r) { r.any_zw = true; }));
  EXPECT_FALSE(with([](auto&, auto& r) { r.small_multipliers = false; }));
}

TEST_P(QConvFastTest, QLinearAddAndLeakyReluMatchReference) {
  std::mt19937 rng(9);
  for (DataType t : {DataType::kUint8, DataType::kInt8}) {
    // AVX-512: 32 a step, then 16, then the AVX2 and scalar tails; 12307 spans four 4096-element tasks.
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}, int64_t{47}, int64_t{9000}, int64_t{12307}}) {
      std::vector<Value> add = {Value(testing::Random8(t, {1, n}, rng)), Value(Tensor::Scalar<float>(0.031f)),
                                Value(testing::Random8(t, {}, rng)),      Value(testing::Random8(t, {1, n}, rng)),
                                Value(Tensor::Scalar<float>(0.017f)),     Value(testing::Random8(t, {}, rng)),
                                Value(Tensor::Scalar<float>(0.043f)),     Value(testing::Random8(t, {}, rng))};
      ExpectFastMatchesReference(cpu::QLinearAddFast, MsNode("QLinearAdd", 8), 1, add, "QLinearAdd");
      for (float alpha : {0.0f, 0.1f}) {
        std::vector<Value> relu = {Value(testing::Random8(t, {2, n}, rng)), Value(Tensor::Scalar<float>(0.05f)),
                                   Value(testing::Random8(t, {}, rng)), Value(Tensor::Scalar<float>(0.02f)),
                                   Value(testing::Random8(t, {}, rng))};
        ExpectFastMatchesReference(cpu::QLinearLeakyReluFast, MsNode("QLinearLeakyRelu", 5, {FloatAttr("alpha", alpha)}),
                                   1, relu, "QLinearLeakyRelu");
      }
    }
  }
  // Sums past 2^24 and past 2^30 (large scale ratios): the float zero point add rounds, and from 2^30 on the
  // sixteen-lane form rounds and clamps in float instead of in int32; both saturate as the reference does.
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (float a_scale : {2e4f, 3e6f, 5e9f}) {
      std::vector<Value> add = {Value(testing::Random8(t, {1, 999}, rng)), Value(Tensor::Scalar<float>(a_scale)),
                                Value(testing::Random8(t, {}, rng)),       Value(testing::Random8(t, {1, 999}, rng)),
                                Value(Tensor::Scalar<float>(0.5f)),        Value(testing::Random8(t, {}, rng)),
                                Value(Tensor::Scalar<float>(0.25f)),       Value(testing::Random8(t, {}, rng))};
      ExpectFastMatchesReference(cpu::QLinearAddFast, MsNode("QLinearAdd", 8), 1, add, "QLinearAdd large");
    }
  // Broadcasting goes to the reference.
  std::vector<Value> bcast = {Value(testing::Random8(DataType::kUint8, {3, 4}, rng)), Value(Tensor::Scalar<float>(0.1f)),
                              Value(Tensor::Scalar<uint8_t>(3)), Value(testing::Random8(DataType::kUint8, {4}, rng)),
                              Value(Tensor::Scalar<float>(0.2f)), Value(Tensor::Scalar<uint8_t>(200)),
                              Value(Tensor::Scalar<float>(0.3f)), Value(Tensor::Scalar<uint8_t>(0))};
  ExpectFastMatchesReference(cpu::QLinearAddFast, MsNode("QLinearAdd", 8), 1, bcast, "QLinearAdd broadcast");
}

// QLinearGlobalAveragePool: planes of 1, 49 (ResNet's 7x7), 64 (one whole vector), 65 and 70 (a masked
// tail), 2048-channel planes and an empty batch, rank 3 to 5, uint8 and int8, with and without zero points,
// scales that saturate at both ends; channels_last goes to the reference.
TEST_P(QConvFastTest, QLinearGlobalAveragePoolMatchesReference) {
  std::mt19937 rng(17);
  const std::vector<std::vector<int64_t>> shapes = {{1, 2048, 7, 7}, {2, 3, 5, 13}, {1, 4, 8, 8},  {1, 3, 1, 1},
                                                    {2, 5, 70},      {1, 2, 3, 4, 5}, {0, 3, 4, 4}, {1, 2, 300, 7}};
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (const auto& dims : shapes)
      for (float y_scale : {0.02f, 0.0004f}) {
        std::vector<Value> in = {Value(testing::Random8(t, dims, rng)), Value(Tensor::Scalar<float>(0.03f)),
                                 Value(testing::Random8(t, {}, rng)), Value(Tensor::Scalar<float>(y_scale)),
                                 Value(testing::Random8(t, {}, rng))};
        ExpectFastMatchesReference(cpu::QLinearGlobalAveragePoolFast, MsNode("QLinearGlobalAveragePool", 5), 1, in,
                                   "QLinearGlobalAveragePool " + DimsToString(dims));
        in[2] = Value(), in[4] = Value();  // zero points absent
        ExpectFastMatchesReference(cpu::QLinearGlobalAveragePoolFast, MsNode("QLinearGlobalAveragePool", 5), 1, in,
                                   "QLinearGlobalAveragePool no zero points");
      }
  std::vector<Value> nhwc = {Value(testing::Random8(DataType::kUint8, {1, 3, 3, 8}, rng)),
                             Value(Tensor::Scalar<float>(0.03f)), Value(Tensor::Scalar<uint8_t>(7)),
                             Value(Tensor::Scalar<float>(0.02f)), Value(Tensor::Scalar<uint8_t>(9))};
  ExpectFastMatchesReference(cpu::QLinearGlobalAveragePoolFast,
                             MsNode("QLinearGlobalAveragePool", 5, {IntAttr("channels_last", 1)}), 1, nhwc,
                             "QLinearGlobalAveragePool channels_last");
}

TEST_P(QConvFastTest, QuantizeLinearMatchesReference) {
  std::mt19937 rng(3);
  std::vector<float> v = testing::RandomFloats(10001, rng);
  for (float& f : v) f *= 9.0f;
  v[0] = NAN, v[1] = INFINITY, v[2] = -INFINITY, v[3] = -0.0f, v[4] = 0.5f, v[5] = 1.5f, v[6] = -2.5f;
  for (int zp : {0, 128, 255}) {
    std::vector<Value> in = {Value(Tensor::FromVector(v, {1, 10001})), Value(Tensor::Scalar<float>(0.5f)),
                             Value(Tensor::Scalar<uint8_t>(static_cast<uint8_t>(zp)))};
    ExpectFastMatchesReference(cpu::QuantizeLinearFast, testing::MakeNode("QuantizeLinear", 3, 1), 13, in,
                               "QuantizeLinear zp " + std::to_string(zp));
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, QConvFastTest, ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         // kAvx512: no limit, the best kernel this CPU has (VNNI where it has it).
                         [](const auto& info) {
                           return info.param == cpu::SgemmIsa::kAvx512 ? "dispatched"
                                  : info.param == cpu::SgemmIsa::kAvx2  ? "avx2"
                                                                         : "portable";
                         });

}  // namespace
}  // namespace nee
