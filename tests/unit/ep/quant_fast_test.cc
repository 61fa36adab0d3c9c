// The quantized fast kernels (ep/cpu/quant_fast.cc, qlstm_fast.cc, on igemm.cc) against the
// reference kernels (ops/conv.cc, matmul.cc, quantize.cc, rnn.cc): every output bitwise equal, on
// the AVX2 and the portable GEMM, at one and two threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

// Every output of the fast kernel with a pool of `threads` threads.
Result<std::vector<Value>> RunFastAll(KernelFn kernel, const Node& node, int64_t opset,
                                      const std::vector<Value>& inputs, int threads) {
  return testing::RunKernelOmittingAll(kernel, node, opset, inputs, threads);
}

void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), got.byte_size())) << what;
}

// Runs the node through the reference (RunOp) and the fast kernel at 1 and 2 threads; all outputs equal.
void ExpectFastMatchesReference(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                                const std::string& name) {
  auto ref = testing::RunOp(node, opset, inputs);
  ASSERT_TRUE(ref.ok()) << name << ": " << ref.status().ToString();
  for (int threads : {1, 2}) {
    auto got = RunFastAll(kernel, node, opset, inputs, threads);
    ASSERT_TRUE(got.ok()) << name << ": " << got.status().ToString();
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (!node.HasOutput(i)) continue;
      ExpectBitwise(got.value()[i].tensor(), ref->outputs[i].tensor(),
                    name + " output " + std::to_string(i) + " threads=" + std::to_string(threads));
    }
  }
}

// The AVX2 GEMM (where the CPU has it) and the portable loops.
class QuantFastTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

// ---- ConvInteger ----

struct ConvCase {
  std::string name;
  std::vector<int64_t> x_dims, w_dims;
  std::vector<Attribute> attrs;
  DataType xt = DataType::kUint8, wt = DataType::kUint8;
  int zero_points = 2;       // 0: none, 1: x only, 2: both
  bool per_channel = false;  // w's zero point per output channel
};

TEST_P(QuantFastTest, ConvIntegerMatchesReference) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<ConvCase> cases = {
      {"3x3_pad1", {1, 3, 9, 11}, {5, 3, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"3x3_stride2_ddddocr_stem", {1, 1, 64, 40}, {24, 1, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1}), IntsAttr("strides", {2, 2})}},
      {"3x3_deep_odd_k", {2, 7, 8, 13}, {19, 7, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}, s8, u8},
      {"pointwise", {1, 24, 5, 7}, {13, 24, 1, 1}, {}, u8, s8, 2, true},
      {"pointwise_odd_channels", {2, 5, 3, 6}, {7, 5, 1, 1}, {}, s8, s8, 1},
      {"stride2_asym_pads", {1, 3, 13, 10}, {7, 3, 3, 3}, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 1, 2, 0})}},
      {"stride_hw_differ_5x3", {1, 2, 15, 17}, {3, 2, 5, 3}, {IntsAttr("strides", {3, 2}), IntsAttr("pads", {2, 1, 1, 2})},
       u8, u8, 2, true},
      {"dilation", {1, 3, 14, 12}, {4, 3, 3, 3}, {IntsAttr("dilations", {2, 3}), IntsAttr("pads", {2, 3, 2, 3})}, s8, u8},
      {"groups2", {2, 6, 8, 9}, {4, 3, 3, 3}, {IntAttr("group", 2), IntsAttr("pads", {1, 1, 1, 1})}, u8, u8, 2, true},
      {"depthwise", {1, 8, 10, 13}, {8, 1, 3, 3}, {IntAttr("group", 8), IntsAttr("pads", {1, 1, 1, 1})}},
      // Depthwise (conv_int_depthwise.cc): blocks of eight interior columns, the edges tap by tap.
      {"depthwise_wide_rows_s8", {2, 5, 9, 37}, {5, 1, 3, 3}, {IntAttr("group", 5), IntsAttr("pads", {1, 1, 1, 1})},
       s8, s8, 2, true},
      {"depthwise_stride2", {1, 6, 15, 41}, {6, 1, 3, 3},
       {IntAttr("group", 6), IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 1, 1, 0})}, u8, s8, 2, true},
      {"depthwise_stride3_dilated_5x5", {1, 3, 20, 50}, {3, 1, 5, 5},
       {IntAttr("group", 3), IntsAttr("strides", {3, 3}), IntsAttr("dilations", {2, 1}),
        IntsAttr("pads", {4, 2, 3, 1})},
       u8, u8, 1},
      {"depthwise_kernel_wider_than_input", {1, 2, 4, 3}, {2, 1, 3, 7},
       {IntAttr("group", 2), IntsAttr("pads", {1, 3, 1, 3})}},
      {"depthwise_1d", {2, 4, 30}, {4, 1, 5}, {IntAttr("group", 4), IntsAttr("pads", {2, 2})}, s8, u8, 2, true},
      {"same_upper", {1, 3, 10, 9}, {4, 3, 3, 4}, {StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("strides", {2, 2})}},
      {"valid_no_zero_points", {1, 2, 8, 7}, {3, 2, 3, 2}, {StringAttr("auto_pad", "VALID")}, u8, u8, 0},
      {"kernel_wider_than_input", {1, 2, 4, 3}, {3, 2, 3, 7}, {IntsAttr("pads", {1, 3, 1, 3})}},
      {"many_outputs_ragged", {1, 9, 11, 7}, {37, 9, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}, u8, s8, 2, true},
      {"1d", {2, 3, 20}, {4, 3, 5}, {IntsAttr("pads", {2, 1}), IntsAttr("strides", {2})}},
      // 128 output channels a group and more take the u8 x s8 (VNNI) kernel where the CPU has it:
      {"vnni_channels", {1, 9, 7, 11}, {129, 9, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}, s8, u8, 2, true},
      {"vnni_groups2_stride2", {2, 16, 12, 13}, {256, 8, 3, 3}, {IntAttr("group", 2), IntsAttr("strides", {2, 2})},
       u8, s8, 2, true},
      {"vnni_pointwise", {1, 40, 6, 9}, {130, 40, 1, 1}, {}, u8, u8, 1},
      // An im2col over 4 MB (1152 x 4000): two blocks of pixels, the cut inside an output row.
      {"vnni_pixel_blocks", {1, 128, 50, 80}, {128, 128, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}, u8, s8, 2, true},
      {"1d_pointwise_s8", {1, 5, 9}, {3, 5, 1}, {}, s8, s8},
      {"3d_to_reference", {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {}},
      {"empty_batch", {0, 3, 5, 5}, {4, 3, 3, 3}, {}},
      {"no_output_channels", {1, 3, 5, 5}, {0, 3, 3, 3}, {}, u8, u8, 1},
      {"no_input_channels", {2, 0, 5, 4}, {6, 0, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
  };
  std::mt19937 rng(21);
  for (const ConvCase& c : cases) {
    std::vector<Value> inputs = {Value(testing::Random8(c.xt, c.x_dims, rng)), Value(testing::Random8(c.wt, c.w_dims, rng))};
    if (c.zero_points >= 1) inputs.push_back(Value(testing::Random8(c.xt, {}, rng)));
    if (c.zero_points >= 2) inputs.push_back(Value(testing::Random8(c.wt, c.per_channel ? std::vector<int64_t>{c.w_dims[0]}
                                                                                : std::vector<int64_t>{}, rng)));
    Node node = testing::MakeNode("ConvInteger", inputs.size(), 1, c.attrs);
    ExpectFastMatchesReference(cpu::ConvIntegerFast, node, 10, inputs, c.name);
  }
}

// Extreme values: every product at its largest magnitude, a deep k.
TEST_P(QuantFastTest, ConvIntegerExtremeValues) {
  const std::vector<int64_t> xd{1, 64, 6, 6}, wd{20, 64, 3, 3};
  Tensor x = Tensor::FromVector(std::vector<uint8_t>(static_cast<size_t>(testing::ElementCount(xd)), 255), xd);
  Tensor w = Tensor::FromVector(std::vector<int8_t>(static_cast<size_t>(testing::ElementCount(wd)), -128), wd);
  std::vector<Value> inputs = {Value(x), Value(w), Value(Tensor::Scalar<uint8_t>(0)), Value(Tensor::Scalar<int8_t>(127))};
  Node node = testing::MakeNode("ConvInteger", 4, 1, {IntsAttr("pads", {1, 1, 1, 1})});
  ExpectFastMatchesReference(cpu::ConvIntegerFast, node, 10, inputs, "extreme");
}

// ---- MatMulInteger ----

struct MatMulCase {
  std::vector<int64_t> a_dims, b_dims;
  DataType at = DataType::kUint8, bt = DataType::kUint8;
  int a_zp = 1, b_zp = 1;  // 0: none, 1: scalar, 2: per row (A) / per column (B)
};

TEST_P(QuantFastTest, MatMulIntegerMatchesReference) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<MatMulCase> cases = {
      {{1, 17}, {17, 33}},
      {{7, 64}, {64, 16}, u8, s8, 2, 2},
      {{25, 1024}, {1024, 70}, u8, u8, 1, 1},
      {{13, 5}, {5, 3}, s8, s8, 2, 0},
      {{6, 1}, {1, 19}, s8, u8, 0, 2},
      {{2, 3, 9}, {9, 21}, u8, s8, 2, 2},
      {{9}, {9, 5}, u8, u8, 1, 2},
      {{0, 8}, {8, 4}},
      {{3, 0}, {0, 4}, u8, u8, 1, 1},
      {{4, 8}, {8, 0}},
      {{2, 4, 8}, {2, 8, 3}},  // batched B: the reference
  };
  std::mt19937 rng(22);
  for (size_t i = 0; i < cases.size(); ++i) {
    const MatMulCase& c = cases[i];
    const int64_t m = c.a_dims.size() >= 2 ? c.a_dims[c.a_dims.size() - 2] : 1;
    std::vector<Value> inputs = {Value(testing::Random8(c.at, c.a_dims, rng)), Value(testing::Random8(c.bt, c.b_dims, rng))};
    inputs.push_back(c.a_zp ? Value(testing::Random8(c.at, c.a_zp == 2 ? std::vector<int64_t>{m} : std::vector<int64_t>{}, rng))
                            : Value());
    if (c.b_zp) inputs.push_back(Value(testing::Random8(c.bt, c.b_zp == 2 ? std::vector<int64_t>{c.b_dims.back()}
                                                                    : std::vector<int64_t>{}, rng)));
    Node node = testing::MakeNode("MatMulInteger", inputs.size(), 1);
    ExpectFastMatchesReference(cpu::MatMulIntegerFast, node, 10, inputs, "matmul case " + std::to_string(i));
  }
}

// The GEMM itself against a plain int64 sum, narrowed to int32: sizes around the panel edges.
TEST_P(QuantFastTest, IgemmMatchesPlainSums) {
  std::mt19937 rng(23);
  for (int64_t m : {1, 5, 6, 7, 13}) {
    for (int64_t n : {1, 15, 16, 17, 40}) {
      for (int64_t k : {1, 2, 3, 31, 64}) {
        for (bool b_signed : {false, true}) {
          Tensor a = testing::Random8(DataType::kUint8, {m, k}, rng);
          Tensor b = testing::Random8(b_signed ? DataType::kInt8 : DataType::kUint8, {k, n}, rng);
          std::vector<int32_t> za(static_cast<size_t>(m)), zb(static_cast<size_t>(n));
          for (auto& z : za) z = static_cast<int32_t>(rng() % 256);
          for (auto& z : zb) z = b_signed ? static_cast<int32_t>(rng() % 256) - 128 : static_cast<int32_t>(rng() % 256);
          cpu::IgemmPackedA pa;
          cpu::IgemmPackA(m, k, a.raw_data(), k, false, za.data(), 1, &pa);
          cpu::IgemmPackedB pb(k, n, static_cast<const uint8_t*>(b.raw_data()), n, b_signed);
          std::vector<int32_t> c(static_cast<size_t>(m * n));
          cpu::Igemm(nullptr, pa, pb.view(), zb.data(), 1, c.data(), n);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              int64_t want = 0;
              for (int64_t p = 0; p < k; ++p) {
                const int64_t av = a.data<uint8_t>()[i * k + p];
                const int64_t bv = b_signed ? b.data<int8_t>()[p * n + j] : b.data<uint8_t>()[p * n + j];
                want += (av - za[static_cast<size_t>(i)]) * (bv - zb[static_cast<size_t>(j)]);
              }
              ASSERT_EQ(c[static_cast<size_t>(i * n + j)], static_cast<int32_t>(want))
                  << m << "x" << n << "x" << k << " at " << i << "," << j;
            }
        }
      }
    }
  }
}

// ---- DynamicQuantizeLinear ----

TEST_P(QuantFastTest, DynamicQuantizeLinearMatchesReference) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(24);
  std::vector<std::vector<float>> cases = {
      testing::RandomFloats(1000, rng),
      testing::RandomFloats(13, rng),
      {},
      std::vector<float>(37, 0.0f),
      {-0.0f, 0.0f, -0.0f},
      {-3.0f, -1.5f, -2.25f, -0.5f, -7.0f, -1.0f, -3.5f, -2.0f, -9.0f},  // all negative: zero point 255
      {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f},   // all positive: zero point 0
      {0.5f, nan, -0.25f, 1.0f, nan, 2.0f, -1.0f, 0.0f, 3.0f, nan, 0.75f},
      {1.0f, inf, -2.0f, 0.5f, 0.25f, -0.5f, 3.0f, 2.0f, 1.5f},
      {-inf, inf, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f},
  };
  // Halfway values: x / scale exactly at .5 for scale 1 (range 255), ties to even.
  std::vector<float> ties = {0.0f, 255.0f};
  for (int i = 0; i < 40; ++i) ties.push_back(static_cast<float>(i) + 0.5f);
  cases.push_back(ties);
  // The extremes at every lane position of the AVX2 range scan's 8-float
  // steps and in its scalar tail, several steps apart.
  for (int p : {0, 9, 17, 31, 40, 63, 64, 95, 99, 102}) {
    std::vector<float> v = testing::RandomFloats(103, rng);
    v[static_cast<size_t>(p)] = 7.5f;
    v[static_cast<size_t>((p + 37) % 103)] = -6.25f;
    cases.push_back(v);
  }
  // The same over 50 values: one 32-value step of the four running pairs, two 8-value steps after it
  // and a scalar tail of two.
  for (int p : {3, 12, 22, 30, 33, 44, 48, 49}) {
    std::vector<float> v = testing::RandomFloats(50, rng);
    v[static_cast<size_t>(p)] = -9.5f;
    v[static_cast<size_t>((p + 19) % 50)] = 8.75f;
    cases.push_back(v);
  }
  // Zeros of both signs, NaNs and all-negative values over many steps.
  std::vector<float> signed_zeros(70, -0.0f);
  for (size_t i = 0; i < signed_zeros.size(); i += 3) signed_zeros[i] = 0.0f;
  signed_zeros[45] = nan;
  cases.push_back(signed_zeros);
  std::vector<float> negatives(66);
  for (size_t i = 0; i < negatives.size(); ++i) negatives[i] = -1.0f - 0.125f * static_cast<float>(i % 11);
  negatives[20] = nan;
  cases.push_back(negatives);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<float>& v = cases[i];
    std::vector<Value> inputs = {Value(Tensor::FromVector(v, {static_cast<int64_t>(v.size())}))};
    Node node = testing::MakeNode("DynamicQuantizeLinear", 1, 3);
    ExpectFastMatchesReference(cpu::DynamicQuantizeLinearFast, node, 11, inputs, "dql case " + std::to_string(i));
  }
}

// ---- DynamicQuantizeLSTM ----

struct LstmCase {
  std::string name;
  int64_t seq = 4, batch = 1, input = 5, hidden = 3;
  std::string direction = "forward";
  DataType wt = DataType::kInt8;
  bool per_column = false, bias = true, lens = false, initial = false, peephole = false, want_y = true;
  std::vector<Attribute> extra;
};

std::vector<Value> LstmInputs(const LstmCase& c, std::mt19937& rng) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1, H = c.hidden, N = 4 * H;
  auto floats = [&](std::vector<int64_t> dims, float scale) {
    std::vector<float> v = testing::RandomFloats(testing::ElementCount(dims), rng);
    for (float& f : v) f *= scale;
    return Value(Tensor::FromVector(v, dims));
  };
  auto scales = [&](float base) {
    std::vector<int64_t> dims = c.per_column ? std::vector<int64_t>{dirs, N} : std::vector<int64_t>{dirs};
    std::vector<float> v(static_cast<size_t>(testing::ElementCount(dims)));
    for (float& f : v) f = base * (1.0f + 0.5f * static_cast<float>(rng() % 100) / 100.0f);
    return Value(Tensor::FromVector(v, dims));
  };
  auto zero_points = [&]() {
    std::vector<int64_t> dims = c.per_column ? std::vector<int64_t>{dirs, N} : std::vector<int64_t>{dirs};
    return Value(testing::Random8(c.wt, dims, rng));
  };
  std::vector<Value> in(12);
  in[0] = floats({c.seq, c.batch, c.input}, 2.0f);
  in[1] = Value(testing::Random8(c.wt, {dirs, c.input, N}, rng));
  in[2] = Value(testing::Random8(c.wt, {dirs, H, N}, rng));
  if (c.bias) in[3] = floats({dirs, 2 * N}, 0.5f);
  if (c.lens) {
    std::vector<int32_t> lens(static_cast<size_t>(c.batch));
    for (size_t b = 0; b < lens.size(); ++b) lens[b] = static_cast<int32_t>((b * 3 + 1) % (c.seq + 1));
    if (!lens.empty()) lens[0] = 0;  // a sequence that never runs
    in[4] = Value(Tensor::FromVector(lens, {c.batch}));
  }
  if (c.initial) {
    in[5] = floats({dirs, c.batch, H}, 0.8f);
    in[6] = floats({dirs, c.batch, H}, 1.5f);
  }
  if (c.peephole) in[7] = floats({dirs, 3 * H}, 0.3f);
  in[8] = scales(0.004f);
  in[9] = zero_points();
  in[10] = scales(0.006f);
  in[11] = zero_points();
  return in;
}

// The fast kernel's cell runs in float, the reference's in double (qlstm_fast.cc): outputs within float
// rounding of the reference's, 2e-6 + 2e-6 |reference| (h and c are at most a few units here; measured: at
// most 2.4e-7). A difference can also move h across a rounding boundary of the next step's quantization,
// which changes that level by one; none of these cases has one (the bound would show it: such a level
// moves a gate by about 1e-3). At 1 and 2 threads the fast kernel's outputs are the same bits.
void ExpectLstmNearReference(const Node& node, const std::vector<Value>& inputs, const std::string& name) {
  auto ref = testing::RunOp(node, 1, inputs);
  ASSERT_TRUE(ref.ok()) << name << ": " << ref.status().ToString();
  auto one = RunFastAll(cpu::DynamicQuantizeLstmFast, node, 1, inputs, 1);
  auto two = RunFastAll(cpu::DynamicQuantizeLstmFast, node, 1, inputs, 2);
  ASSERT_TRUE(one.ok() && two.ok()) << name;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (!node.HasOutput(i)) continue;
    const Tensor& got = one.value()[i].tensor();
    const Tensor& want = ref->outputs[i].tensor();
    ExpectBitwise(two.value()[i].tensor(), got, name + " output " + std::to_string(i) + ": 2 threads vs 1");
    ASSERT_EQ(got.dims(), want.dims()) << name;
    for (int64_t e = 0; e < got.num_elements(); ++e) {
      const float g = got.data<float>()[e], w = want.data<float>()[e];
      ASSERT_LE(std::fabs(g - w), 2e-6f + 2e-6f * std::fabs(w)) << name << " output " << i << " element " << e;
    }
  }
}

TEST_P(QuantFastTest, DynamicQuantizeLstmMatchesReference) {
  const std::vector<LstmCase> cases = {
      {"forward", 5, 1, 7, 4},
      {"reverse_batch3_lens", 6, 3, 5, 3, "reverse", DataType::kInt8, false, true, true},
      {"bidirectional_per_column", 4, 2, 9, 5, "bidirectional", DataType::kInt8, true},
      {"bidirectional_all_inputs", 5, 3, 6, 4, "bidirectional", DataType::kInt8, true, true, true, true, true},
      {"uint8_weights_no_bias", 3, 2, 4, 6, "forward", DataType::kUint8, false, false},
      {"no_y_lens_initial", 4, 4, 3, 2, "bidirectional", DataType::kInt8, false, true, true, true, false, false},
      {"clip_input_forget", 5, 2, 8, 3, "forward", DataType::kInt8, true, true, false, true, true, true,
       {testing::FloatAttr("clip", 0.7f), IntAttr("input_forget", 1)}},
      {"wide_hidden", 3, 1, 40, 35, "bidirectional", DataType::kInt8, true},
      // More than four rows a step: h R on igemm (up to four, on AVX2 without VNNI: QGemv).
      {"batch6_per_column", 3, 6, 7, 5, "bidirectional", DataType::kInt8, true},
      {"activations_named_default", 3, 1, 4, 3, "forward", DataType::kInt8, false, true, false, false, false, true,
       {testing::StringsAttr("activations", {"Sigmoid", "TANH", "tanh"})}},
      {"other_activation_to_reference", 3, 1, 4, 3, "forward", DataType::kInt8, false, true, false, false, false, true,
       {testing::StringsAttr("activations", {"HardSigmoid", "Tanh", "Tanh"})}},
      {"empty_batch", 3, 0, 4, 3},
  };
  std::mt19937 rng(25);
  for (const LstmCase& c : cases) {
    std::vector<Attribute> attrs = {IntAttr("hidden_size", c.hidden), StringAttr("direction", c.direction)};
    attrs.insert(attrs.end(), c.extra.begin(), c.extra.end());
    Node node = testing::MakeNode("DynamicQuantizeLSTM", 12, 3, attrs, "com.microsoft");
    std::vector<Value> inputs = LstmInputs(c, rng);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].is_tensor()) node.inputs[i] = "";
    if (!c.want_y) node.outputs[0] = "";
    ExpectLstmNearReference(node, inputs, c.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, QuantFastTest, ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         // kAvx512: no limit, the best kernel this CPU has (VNNI where it has it).
                         [](const auto& info) {
                           return info.param == cpu::SgemmIsa::kAvx512 ? "dispatched"
                                  : info.param == cpu::SgemmIsa::kAvx2  ? "avx2"
                                                                         : "portable";
                         });

}  // namespace
}  // namespace nee
