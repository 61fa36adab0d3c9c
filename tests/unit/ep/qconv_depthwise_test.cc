// Depthwise QLinearConv (ep/cpu/qconv_depthwise.cc, reached through QLinearConvFast) against the reference
// kernel of ops/quantize.cc: every output byte equal, at one, two and three threads, on the AVX-512 VNNI path
// (qconv_depthwise_vnni.cc, where the CPU has VNNI and VBMI and the weights fit it; the others fall back to
// the AVX2 kernel there), the AVX2 path and the portable one. The cases are the depthwise path's awkward ones: every width from 1 to 40 (flat runs
// whose rows end anywhere in a vector, planes shorter than a vector, the last row's copy-out), strides
// 1, 2 and 3 (phase planes), asymmetric and wide padding, dilation, 5x5 and 1x1 kernels, batches,
// uint8 and int8 inputs, weights and outputs, weight zero points, large multipliers (the clamped
// requantization) and weights at the extremes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::IntsAttr;

constexpr DataType kU8 = DataType::kUint8, kS8 = DataType::kInt8;

struct DwCase {
  std::string name;
  int64_t n = 1, c = 4, h = 5, w = 7;
  int64_t kh = 3, kw = 3;
  std::vector<int64_t> strides{1, 1}, pads{1, 1, 1, 1}, dilations{1, 1};
  DataType xt = kU8, wt = kS8, yt = kU8;
  bool per_channel = true;
  bool weight_zero_points = false;  // random ones (else 0, or 128 for uint8 weights: symmetric)
  float y_scale = 0.05f;            // 1e-5: multipliers far above 1/2 (the clamped requantization)
  bool one_d = false;               // a 1-D conv (x [n, c, w], kernel [kw])
};

// The reference's output size along one axis; 0 or less when the conv has no output.
int64_t OutSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  const int64_t room = in + p0 + p1 - ((k - 1) * d + 1);
  return room < 0 ? 0 : room / s + 1;
}

bool HasOutput(const DwCase& c) {
  if (c.one_d) return OutSize(c.w, c.kw, c.strides[0], c.dilations[0], c.pads[0], c.pads[1]) > 0;
  return OutSize(c.h, c.kh, c.strides[0], c.dilations[0], c.pads[0], c.pads[2]) > 0 &&
         OutSize(c.w, c.kw, c.strides[1], c.dilations[1], c.pads[1], c.pads[3]) > 0;
}

Tensor Scalar8(DataType t, int v) {
  return t == kU8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(v)) : Tensor::Scalar<int8_t>(static_cast<int8_t>(v));
}

// QLinearConv's nine inputs for a depthwise conv (group = channels), x and w random unless given.
std::vector<Value> Inputs(const DwCase& c, std::mt19937& rng, const Tensor* x_given = nullptr,
                          const Tensor* w_given = nullptr) {
  const std::vector<int64_t> x_dims = c.one_d ? std::vector<int64_t>{c.n, c.c, c.w}
                                              : std::vector<int64_t>{c.n, c.c, c.h, c.w};
  const std::vector<int64_t> w_dims = c.one_d ? std::vector<int64_t>{c.c, 1, c.kw}
                                              : std::vector<int64_t>{c.c, 1, c.kh, c.kw};
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  const int64_t per = c.per_channel ? c.c : 1;
  std::vector<float> w_scales(static_cast<size_t>(per));
  for (float& s : w_scales) s = scale(rng);
  Tensor w_zp = testing::Random8(c.wt, c.per_channel ? std::vector<int64_t>{c.c} : std::vector<int64_t>{}, rng);
  if (!c.weight_zero_points) {
    const uint8_t symmetric = c.wt == kU8 ? 128 : 0;
    std::memset(w_zp.raw_data(), symmetric, w_zp.byte_size());
  }
  std::uniform_int_distribution<int32_t> bias(-20000, 20000);
  std::vector<int32_t> b(static_cast<size_t>(c.c));
  for (int32_t& v : b) v = bias(rng);
  return {Value(x_given ? *x_given : testing::Random8(c.xt, x_dims, rng)),
          Value(Tensor::Scalar<float>(scale(rng))),
          Value(testing::Random8(c.xt, {}, rng)),
          Value(w_given ? *w_given : testing::Random8(c.wt, w_dims, rng)),
          Value(per == 1 ? Tensor::Scalar<float>(w_scales[0]) : Tensor::FromVector(w_scales, {per})),
          Value(w_zp),
          Value(Tensor::Scalar<float>(c.y_scale)),
          Value(testing::Random8(c.yt, {}, rng)),
          Value(Tensor::FromVector(b, {c.c}))};
}

Node ConvNode(const DwCase& c) {
  std::vector<Attribute> attrs = {IntAttr("group", c.c), IntsAttr("strides", c.strides), IntsAttr("pads", c.pads),
                                  IntsAttr("dilations", c.dilations)};
  if (c.one_d) {
    attrs.push_back(IntsAttr("kernel_shape", {c.kw}));
  } else {
    attrs.push_back(IntsAttr("kernel_shape", {c.kh, c.kw}));
  }
  return testing::MakeNode("QLinearConv", 9, 1, attrs);
}

void ExpectMatchesReference(const DwCase& c, const std::vector<Value>& inputs) {
  const Node node = ConvNode(c);
  auto ref = testing::RunOp(node, 10, inputs);
  ASSERT_TRUE(ref.ok()) << c.name << ": " << ref.status().ToString();
  const Tensor& want = ref->outputs[0].tensor();
  ASSERT_GT(want.num_elements(), 0) << c.name;
  for (int threads : {1, 2, 3}) {
    auto got = testing::RunKernel(cpu::QLinearConvFast, node, 10, inputs, threads);
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
    ASSERT_EQ(got->dtype(), want.dtype()) << c.name;
    ASSERT_EQ(got->dims(), want.dims()) << c.name;
    const auto* g = static_cast<const uint8_t*>(got->raw_data());
    const auto* e = static_cast<const uint8_t*>(want.raw_data());
    const size_t bytes = want.byte_size();
    const size_t first = static_cast<size_t>(std::mismatch(g, g + bytes, e).first - g);
    ASSERT_EQ(first, bytes) << c.name << " threads=" << threads << ": byte " << first << " is "
                            << int{g[first]} << ", the reference's " << int{e[first]};
  }
}

class QConvDepthwiseTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

// Widths 1 to 40 at strides 1 and 2, with the padding, types, zero points and multipliers varying
// from width to width.
TEST_P(QConvDepthwiseTest, EveryWidthFrom1To40) {
  const std::vector<std::vector<int64_t>> pads = {{1, 1, 1, 1}, {0, 0, 0, 0}, {2, 1, 0, 2}, {0, 2, 1, 0}, {2, 2, 2, 2}};
  const DataType types[4][3] = {{kU8, kS8, kU8}, {kS8, kS8, kS8}, {kU8, kU8, kS8}, {kS8, kU8, kU8}};
  std::mt19937 rng(11);
  int ran = 0;
  for (int64_t w = 1; w <= 40; ++w)
    for (int64_t s : {1, 2}) {
      DwCase c;
      c.w = w;
      c.h = 1 + (w * 7 + s) % 9;
      c.c = 1 + (w + s) % 5;
      c.strides = {s, s};
      c.pads = pads[static_cast<size_t>((w + s) % 5)];
      const auto& t = types[(w + 2 * s) % 4];
      c.xt = t[0], c.wt = t[1], c.yt = t[2];
      c.per_channel = w % 3 != 0;
      c.weight_zero_points = w % 4 == 1;
      c.y_scale = w % 5 == 2 ? 1e-5f : 0.05f;
      c.name = "w" + std::to_string(w) + "_s" + std::to_string(s);
      if (!HasOutput(c)) continue;
      ExpectMatchesReference(c, Inputs(c, rng));
      ++ran;
    }
  EXPECT_GT(ran, 70);
}

TEST_P(QConvDepthwiseTest, KernelsStridesDilationsAndBatches) {
  std::vector<DwCase> cases;
  auto add = [&](DwCase c) { cases.push_back(std::move(c)); };
  {
    DwCase c;  // MobileNetV2's shapes, smaller: 3x3 pad 1 at strides 1 and 2, even and odd sizes
    c.name = "mnv2_s1", c.c = 9, c.h = 14, c.w = 14;
    add(c);
    c.name = "mnv2_s2", c.strides = {2, 2}, c.h = 28, c.w = 28;
    add(c);
    c.name = "mnv2_7x7", c.strides = {1, 1}, c.c = 17, c.h = 7, c.w = 7;
    add(c);
    c.name = "mnv2_s2_to_7x7", c.strides = {2, 2}, c.h = 14, c.w = 14;
    add(c);
    c.name = "wide_112", c.c = 2, c.h = 6, c.w = 112, c.strides = {1, 1};
    add(c);
    c.name = "wide_113_s2", c.strides = {2, 2}, c.w = 113, c.h = 9;
    add(c);
  }
  {
    DwCase c;
    c.name = "5x5_pad2", c.kh = 5, c.kw = 5, c.pads = {2, 2, 2, 2}, c.h = 11, c.w = 19;
    add(c);
    c.name = "5x5_s2_asym", c.strides = {2, 2}, c.pads = {1, 2, 2, 0}, c.h = 12, c.w = 17;
    add(c);
    c.name = "5x5_dilated_2_3", c.strides = {1, 1}, c.dilations = {2, 3}, c.pads = {4, 6, 3, 5}, c.h = 9, c.w = 21;
    add(c);
    c.name = "5x5_dilated_s2", c.strides = {2, 2}, c.dilations = {2, 2}, c.pads = {4, 4, 4, 4}, c.h = 13, c.w = 16;
    add(c);
  }
  {
    DwCase c;
    c.name = "3x3_dilated_s2_even_phases", c.strides = {2, 2}, c.dilations = {2, 2}, c.pads = {2, 2, 2, 2};
    c.h = 10, c.w = 23;
    add(c);
    c.name = "stride_3", c.strides = {3, 3}, c.dilations = {1, 1}, c.pads = {1, 1, 1, 1}, c.h = 16, c.w = 20;
    add(c);
    c.name = "strides_1_2", c.strides = {1, 2}, c.h = 8, c.w = 19;
    add(c);
    c.name = "strides_2_1", c.strides = {2, 1}, c.h = 9, c.w = 18;
    add(c);
    c.name = "stride_4_kernel_2", c.strides = {4, 4}, c.kh = 2, c.kw = 2, c.pads = {0, 0, 1, 1}, c.h = 13, c.w = 30;
    add(c);
  }
  {
    DwCase c;
    c.name = "1x1", c.kh = 1, c.kw = 1, c.pads = {0, 0, 0, 0}, c.h = 5, c.w = 9;
    add(c);
    c.name = "1x1_s2_pad1", c.strides = {2, 2}, c.pads = {1, 1, 1, 1};
    add(c);
    c.name = "1x3", c.kh = 1, c.kw = 3, c.strides = {1, 1}, c.pads = {0, 1, 0, 1};
    add(c);
    c.name = "3x1", c.kh = 3, c.kw = 1, c.pads = {1, 0, 1, 0};
    add(c);
    c.name = "7x7_pad3", c.kh = 7, c.kw = 7, c.pads = {3, 3, 3, 3}, c.h = 10, c.w = 12;
    add(c);
    c.name = "kernel_larger_than_input", c.kh = 5, c.kw = 5, c.pads = {2, 2, 2, 2}, c.h = 2, c.w = 3;
    add(c);
    c.name = "11x11_121_taps", c.kh = 11, c.kw = 11, c.pads = {5, 5, 5, 5}, c.h = 12, c.w = 13;
    add(c);
    c.name = "12x12_over_127_taps", c.kh = 12, c.kw = 12, c.pads = {6, 5, 5, 6}, c.h = 12, c.w = 13;
    add(c);
  }
  {
    // Small stride-1 images read without a padded plane on VNNI (a vector's rows and their taps within one
    // 64-byte load): dilated, 5x5 (two quads a kernel row), unpadded, asymmetric pads, rows 16 wide.
    DwCase c;
    c.name = "plane_free_3x3_dilated_2", c.dilations = {2, 2}, c.pads = {2, 2, 2, 2}, c.h = 6, c.w = 9;
    add(c);
    c.name = "plane_free_5x5_pad2_two_rows_a_vector", c.kh = 5, c.kw = 5, c.dilations = {1, 1}, c.pads = {2, 2, 2, 2};
    c.h = 5, c.w = 6;
    add(c);
    c.name = "plane_free_unpadded", c.kh = 3, c.kw = 3, c.pads = {0, 0, 0, 0}, c.h = 8, c.w = 7;
    add(c);
    c.name = "plane_free_asym_pads_int8", c.pads = {0, 2, 1, 0}, c.h = 9, c.w = 14, c.xt = kS8, c.yt = kS8;
    add(c);
    c.name = "plane_free_16_wide", c.pads = {1, 1, 1, 1}, c.h = 3, c.w = 16, c.xt = kU8, c.yt = kU8;
    add(c);
    // Stride 2: two output rows a vector over five input rows read by both loads (11 wide: 55 bytes; 25 wide:
    // one row a vector, 75 bytes), asymmetric pads.
    c.name = "plane_free_s2_two_rows", c.strides = {2, 2}, c.pads = {0, 1, 2, 0}, c.h = 11, c.w = 13;
    add(c);
    c.name = "plane_free_s2_both_loads_int8", c.pads = {1, 1, 1, 1}, c.h = 9, c.w = 25, c.xt = kS8;
    add(c);
  }
  {
    DwCase c;
    c.name = "batch_2", c.n = 2, c.c = 5, c.h = 9, c.w = 10;
    add(c);
    c.name = "batch_3_s2_int8", c.n = 3, c.strides = {2, 2}, c.xt = kS8, c.yt = kS8;
    add(c);
    c.name = "batch_2_uint8_weights_zero_points", c.n = 2, c.strides = {1, 1}, c.wt = kU8, c.weight_zero_points = true;
    add(c);
    c.name = "int8_weights_zero_points_large_multipliers", c.n = 1, c.wt = kS8, c.y_scale = 1e-5f;
    add(c);
    c.name = "per_tensor", c.per_channel = false, c.y_scale = 0.05f;
    add(c);
    c.name = "many_channels", c.c = 67, c.h = 3, c.w = 5, c.weight_zero_points = false;
    add(c);
  }
  {
    DwCase c;
    c.name = "1d", c.one_d = true, c.w = 29, c.kw = 3, c.strides = {1}, c.pads = {1, 1}, c.dilations = {1};
    add(c);
    c.name = "1d_s2_dilated", c.strides = {2}, c.pads = {2, 0}, c.dilations = {2}, c.kw = 5;
    add(c);
  }
  std::mt19937 rng(23);
  for (const DwCase& c : cases) ExpectMatchesReference(c, Inputs(c, rng));
}

// Sixteen channels or more on small planes: the channels-innermost kernel (a pixel-major copy by 16x16
// byte transposes, 32 pixels a step, one vector of sixteen channels per output pixel). Channel counts
// that leave a partial last group, planes under 32 pixels (one transpose block, whose stores run into
// the next planes) and ones ending anywhere in a block, strides, dilation, odd and large kernels,
// asymmetric pads, batches (the last group's reads at the tensor's end), types and large multipliers.
TEST_P(QConvDepthwiseTest, ManyChannelsOnSmallPlanes) {
  std::vector<DwCase> cases;
  auto add = [&](DwCase c) { cases.push_back(std::move(c)); };
  const DataType types[4][3] = {{kU8, kS8, kU8}, {kS8, kS8, kS8}, {kU8, kU8, kS8}, {kS8, kU8, kU8}};
  int i = 0;
  for (int64_t channels : {16, 17, 31, 40, 64})
    for (int64_t size : {1, 2, 5, 7, 9, 14}) {
      DwCase c;
      c.c = channels, c.h = size, c.w = size + (i % 3 == 0 ? 3 : 0);
      c.strides = {1 + i % 2, 1 + i % 2};
      const auto& t = types[i % 4];
      c.xt = t[0], c.wt = t[1], c.yt = t[2];
      c.per_channel = i % 5 != 1;
      c.weight_zero_points = i % 4 == 3;
      c.y_scale = i % 7 == 2 ? 1e-5f : 0.05f;
      c.n = i % 6 == 5 ? 2 : 1;
      c.name = "c" + std::to_string(channels) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) + "_s" +
               std::to_string(c.strides[0]) + "_n" + std::to_string(c.n);
      ++i;
      if (HasOutput(c)) add(c);
    }
  {
    DwCase c;
    c.c = 33, c.h = 13, c.w = 11;
    c.name = "5x5_pad2_c33", c.kh = 5, c.kw = 5, c.pads = {2, 2, 2, 2};
    add(c);
    c.name = "5x5_s2_asym_c33", c.strides = {2, 2}, c.pads = {1, 2, 2, 0};
    add(c);
    c.name = "3x3_dilated_2_3_c33", c.kh = 3, c.kw = 3, c.strides = {1, 1}, c.dilations = {2, 3}, c.pads = {2, 3, 2, 3};
    add(c);
    c.name = "stride_3_c33", c.dilations = {1, 1}, c.strides = {3, 3}, c.pads = {1, 1, 1, 1};
    add(c);
    c.name = "strides_1_2_unpadded_c33", c.strides = {1, 2}, c.pads = {0, 0, 0, 0};
    add(c);
    c.name = "pads_past_the_input_c33", c.strides = {2, 2}, c.pads = {3, 0, 0, 4}, c.h = 6, c.w = 5;
    add(c);
    c.name = "7x7_pad3_c20", c.c = 20, c.kh = 7, c.kw = 7, c.strides = {1, 1}, c.pads = {3, 3, 3, 3}, c.h = 8, c.w = 9;
    add(c);
    c.name = "1x1_c20", c.kh = 1, c.kw = 1, c.pads = {0, 0, 0, 0};
    add(c);
    c.name = "batch_3_int8_c24_s2", c.n = 3, c.c = 24, c.kh = 3, c.kw = 3, c.pads = {1, 1, 1, 1}, c.strides = {2, 2};
    c.h = 14, c.w = 14, c.xt = kS8, c.yt = kS8;
    add(c);
    c.name = "1d_c40", c.n = 1, c.c = 40, c.one_d = true, c.w = 37, c.kw = 3, c.strides = {1}, c.pads = {1, 1},
    c.dilations = {1}, c.xt = kU8, c.yt = kU8;
    add(c);
    c.name = "large_plane_c16_falls_back", c.one_d = false, c.c = 16, c.h = 40, c.w = 41, c.strides = {1, 1},
    c.pads = {1, 1, 1, 1}, c.dilations = {1, 1};
    add(c);
  }
  std::mt19937 rng(53);
  for (const DwCase& c : cases) ExpectMatchesReference(c, Inputs(c, rng));
  EXPECT_GT(cases.size(), 35u);
}

// Column stride 2 on planes too large for the sixteen-channel groups: qconv_depthwise_s2.cc's kernel, from a
// byte copy of each plane (MobileNetV2's 112x112 and 56x56 at full size, with few channels and with 20),
// every kernel width it takes (1 to 8: pairs of taps from one load, an odd last column paired across kernel
// rows), kernel heights up to its limit of 16 and past it (the phase planes), row strides and row dilation
// (its columns undilated), rows narrower and wider than a vector, pads wider than the kernel, batches and
// int8 inputs and outputs, large multipliers.
TEST_P(QConvDepthwiseTest, ColumnStrideTwoFromBytes) {
  std::vector<DwCase> cases;
  auto add = [&](DwCase c) { cases.push_back(std::move(c)); };
  {
    DwCase c;
    c.strides = {2, 2};
    c.name = "mnv2_112_c3", c.c = 3, c.h = 112, c.w = 112;
    add(c);
    c.name = "mnv2_56_c20_int8", c.c = 20, c.h = 56, c.w = 56, c.xt = kS8, c.yt = kS8;
    add(c);
    c.name = "odd_57x45_large_multipliers", c.c = 3, c.h = 57, c.w = 45, c.xt = kU8, c.yt = kU8, c.y_scale = 1e-5f;
    add(c);
  }
  const std::vector<std::array<int64_t, 2>> kernels = {{1, 1}, {2, 2}, {1, 4}, {5, 5}, {7, 7}, {3, 8},
                                                       {9, 3}, {16, 5}, {17, 3}, {4, 6}};
  const DataType types[4][3] = {{kU8, kS8, kU8}, {kS8, kS8, kS8}, {kU8, kU8, kS8}, {kS8, kU8, kU8}};
  int i = 0;
  for (const auto& [kh, kw] : kernels) {
    DwCase c;
    c.kh = kh, c.kw = kw, c.c = 2 + i % 3, c.h = 20 + i, c.w = 31 + 7 * i;
    c.pads = {kh / 2, kw / 2, (kh - 1) / 2, i % 2 ? kw + 1 : (kw - 1) / 2};
    c.strides = {1 + i % 3, 2};
    c.dilations = {1 + i % 2, 1};
    const auto& t = types[i % 4];
    c.xt = t[0], c.wt = t[1], c.yt = t[2];
    c.weight_zero_points = i % 3 == 1;
    c.per_channel = i % 4 != 2;
    c.y_scale = i % 5 == 3 ? 1e-5f : 0.05f;
    c.n = i % 4 == 1 ? 2 : 1;
    c.name = "k" + std::to_string(kh) + "x" + std::to_string(kw) + "_w" + std::to_string(c.w) + "_sh" +
             std::to_string(c.strides[0]) + "_dh" + std::to_string(c.dilations[0]);
    ++i;
    if (HasOutput(c)) add(c);
  }
  std::mt19937 rng(61);
  for (const DwCase& c : cases) ExpectMatchesReference(c, Inputs(c, rng));
  EXPECT_GE(cases.size(), 12u);
}

// Inputs at 255 (and 0) against weights at -128 and 127: the largest sums a tap pair can make, with
// multipliers large and small.
TEST_P(QConvDepthwiseTest, ExtremeInputsAndWeights) {
  std::mt19937 rng(31);
  for (float y_scale : {0.05f, 1e-5f})
    for (int x_value : {255, 0}) {
      DwCase c;
      c.c = 6, c.h = 9, c.w = 18, c.y_scale = y_scale;
      c.name = "extremes_x" + std::to_string(x_value) + (y_scale < 1e-3f ? "_large_multipliers" : "");
      const std::vector<int64_t> x_dims{c.n, c.c, c.h, c.w}, w_dims{c.c, 1, c.kh, c.kw};
      Tensor x = Tensor::FromVector(std::vector<uint8_t>(static_cast<size_t>(testing::ElementCount(x_dims)),
                                                         static_cast<uint8_t>(x_value)),
                                    x_dims);
      std::vector<int8_t> wv(static_cast<size_t>(testing::ElementCount(w_dims)));
      for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<int8_t>(i % 5 == 2 ? 127 : -128);
      Tensor w = Tensor::FromVector(wv, w_dims);
      std::vector<Value> inputs = Inputs(c, rng, &x, &w);
      inputs[2] = Value(Scalar8(kU8, 255 - x_value));  // the zero point at the other end
      ExpectMatchesReference(c, inputs);
    }
}

// The requantization at its edges: multipliers 1/4 and 3/8 (exact halves, which round to even, in
// many lanes), and sums near 2^30 (float(acc) inexact) with tiny multipliers that bring them back into
// range, for uint8 and int8 outputs.
TEST_P(QConvDepthwiseTest, RequantizationTiesAndLargeSums) {
  std::mt19937 rng(41);
  struct Scales {
    std::string name;
    float x_scale, w_scale, y_scale;
    int32_t bias_base;
  };
  const std::vector<Scales> scales = {{"mult_1_4", 0.5f, 0.5f, 1.0f, 0},
                                      {"mult_3_8", 0.5f, 0.75f, 1.0f, 0},
                                      {"mult_1_10", 0.25f, 0.4f, 1.0f, 0},
                                      // 2^-4 (1 - 2^-11): sums of 8 + 16j land (j + 1/2) 2^-11 short of a half,
                                      // at and just past the AVX2 kernels' margin 2^-12 (kFmaDelta)
                                      {"mult_near_1_16", 0.5f, 0.125f * (1.0f - 1.0f / 2048), 1.0f, 0},
                                      {"large_sums", 1.0f / 1024, 1.0f / 8192, 1.0f, 1 << 30},
                                      {"large_negative_sums", 1.0f / 1024, 1.0f / 8192, 1.0f, -(1 << 30)}};
  // 11x23 (rows), 7x7 and 4x5 (the VNNI kernel's flat runs of at most 64 positions: four vectors and two,
  // requantized together) with channels enough that each thread pads one plane while reading another;
  // 20x7x7 and 17x14x14 on the channels-innermost kernel (per-lane multipliers).
  const std::vector<std::array<int64_t, 3>> shapes = {{5, 11, 23}, {9, 7, 7}, {6, 4, 5}, {20, 7, 7}, {17, 14, 14}};
  for (const auto& [channels, h, w] : shapes)
    for (const Scales& sc : scales)
      for (DataType yt : {kU8, kS8}) {
        DwCase c;
        c.c = channels, c.h = h, c.w = w, c.yt = yt, c.per_channel = false;
        c.name = sc.name + (yt == kS8 ? "_int8_out_" : "_") + std::to_string(h) + "x" + std::to_string(w);
        std::vector<Value> inputs = Inputs(c, rng);
        inputs[1] = Value(Tensor::Scalar<float>(sc.x_scale));
        inputs[4] = Value(Tensor::Scalar<float>(sc.w_scale));
        inputs[6] = Value(Tensor::Scalar<float>(sc.y_scale));
        // Small biases spread the ties over the range; large ones put the sums near 2^30, where
        // 2^30 / 2^23 = 128 lands mid-range.
        std::uniform_int_distribution<int32_t> spread(-300, 300);
        std::vector<int32_t> bias(static_cast<size_t>(c.c));
        for (int32_t& b : bias) b = sc.bias_base + spread(rng) * (sc.bias_base != 0 ? 4096 : 1);
        inputs[8] = Value(Tensor::FromVector(bias, {c.c}));
        ExpectMatchesReference(c, inputs);
      }
}

INSTANTIATE_TEST_SUITE_P(Kernels, QConvDepthwiseTest,
                         ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         [](const auto& info) {
                           return info.param == cpu::SgemmIsa::kAvx512 ? "avx512"
                                  : info.param == cpu::SgemmIsa::kAvx2 ? "avx2" : "portable";
                         });

}  // namespace
}  // namespace nee
