// ai.nee ConvIntegerToFloat's fast kernel (ep/cpu/quant_conv_fast.cc) against its reference kernel
// (ops/quant_conv.cc), at one and two threads, on every GEMM kernel the machine has: bitwise without an
// activation or with one computed exactly (Relu, Clip), within float rounding of the exponential for SiLU.
// The reference itself is checked against the unfused chain's steps written out over ConvInteger's
// reference output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ops/quant_conv.h"

namespace nee {
namespace {

using testing::FloatsAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

struct Case {
  std::string name;
  std::vector<int64_t> x_dims, w_dims;
  std::vector<Attribute> attrs;
  bool per_channel = false;  // scale and biases one per output channel
  bool bias = true;          // both biases: B (int32) and bias (float32)
  bool residual = false;
};

const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;

std::vector<Case> Cases() {
  return {
      {"3x3_pad1", {1, 3, 9, 11}, {5, 3, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
      {"stride2_per_channel", {2, 4, 13, 10}, {7, 4, 3, 3}, {IntsAttr("strides", {2, 2})}, true},
      {"pointwise_residual", {1, 24, 5, 7}, {13, 24, 1, 1}, {}, true, true, true},
      {"groups_no_bias", {1, 6, 8, 9}, {4, 3, 3, 3}, {IntAttr("group", 2), IntsAttr("pads", {1, 1, 1, 1})}, false,
       false},
      {"1d_residual", {2, 3, 20}, {4, 3, 5}, {IntsAttr("pads", {2, 1}), IntsAttr("strides", {2})}, false, true, true},
      {"vnni_channels", {1, 9, 7, 11}, {129, 9, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}, true},
      {"3d_conv_to_reference", {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {}, true, true, true},
      {"empty_batch", {0, 3, 5, 5}, {4, 3, 3, 3}, {}},
  };
}

// X, W, x_zero_point, w_zero_point (per channel), scale, B, bias, Z as the case asks.
std::vector<Value> Inputs(const Case& c, std::mt19937& rng) {
  const int64_t m = c.w_dims[0];
  std::vector<int64_t> channel_dims(c.x_dims.size() - 1, 1);  // [M, 1, ...]: broadcasts along channels
  channel_dims[0] = m;
  std::vector<Value> in = {Value(testing::Random8(u8, c.x_dims, rng)), Value(testing::Random8(s8, c.w_dims, rng)),
                           Value(testing::Random8(u8, {}, rng)), Value(testing::Random8(s8, {m}, rng))};
  in.push_back(Value(testing::UniformFloats(c.per_channel ? channel_dims : std::vector<int64_t>{}, rng, 1e-4f,
                                            2e-3f)));
  std::uniform_int_distribution<int32_t> bias(-50000, 50000);
  std::vector<int32_t> b(static_cast<size_t>(c.per_channel ? m : 1));
  for (int32_t& v : b) v = bias(rng);
  in.push_back(c.bias ? Value(Tensor::FromVector(b, c.per_channel ? channel_dims : std::vector<int64_t>{}))
                      : Value());
  in.push_back(c.bias ? Value(testing::UniformFloats(c.per_channel ? channel_dims : std::vector<int64_t>{}, rng,
                                                     -2.f, 2.f))
                      : Value());
  if (c.residual) {
    auto y = testing::RunOp(testing::MakeNode("ConvInteger", 4, 1, c.attrs), 10, {in[0], in[1], in[2], in[3]});
    EXPECT_TRUE(y.ok());
    in.push_back(Value(testing::RandomTensor(y->outputs[0].tensor().dims(), rng)));
  }
  return in;
}

Node FusedNode(const Case& c, const std::vector<Attribute>& activation) {
  std::vector<Attribute> attrs = c.attrs;
  attrs.insert(attrs.end(), activation.begin(), activation.end());
  return testing::MakeNode("ConvIntegerToFloat", c.residual ? 8 : 7, 1, attrs, "ai.nee");
}

class ConvIntegerToFloatFast : public testing::IsaLimitedTest {};

TEST_P(ConvIntegerToFloatFast, MatchesReference) {
  const std::vector<std::pair<std::string, std::vector<Attribute>>> activations = {
      {"none", {}},
      {"relu", {StringAttr("activation", "Relu")}},
      {"clip", {StringAttr("activation", "Clip"), FloatsAttr("activation_params", {-0.5f, 0.5f})}},
      {"silu", {StringAttr("activation", "Silu")}},
  };
  std::mt19937 rng(5);
  for (const Case& c : Cases()) {
    const std::vector<Value> inputs = Inputs(c, rng);
    for (const auto& [act_name, act] : activations) {
      const std::string what = c.name + " " + act_name;
      const Node node = FusedNode(c, act);
      auto ref = testing::RunOp(node, 1, inputs);
      ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      for (int threads : {1, 2}) {
        auto got = testing::RunKernelOmitting(cpu::ConvIntegerToFloatFast, node, 1, inputs, threads);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
        if (act_name != "silu") {
          testing::ExpectBitwise(got.value(), want, what + " threads=" + std::to_string(threads));
          continue;
        }
        ASSERT_EQ(got->dims(), want.dims()) << what;
        for (int64_t i = 0; i < want.num_elements(); ++i) {
          const float w = want.data<float>()[i];
          ASSERT_NEAR(got->data<float>()[i], w, 1e-6f + 2e-6f * std::fabs(w)) << what << " element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, ConvIntegerToFloatFast, testing::AllGemmIsas(), testing::IsaName);

// The reference's steps written out over ConvInteger's reference output: (sum + B) as int32, to float,
// times the scale, plus the bias, plus Z, the activation (Relu here, exact).
TEST(ConvIntegerToFloatReference, IsTheChainsArithmetic) {
  std::mt19937 rng(8);
  const Case c{"ref", {1, 4, 6, 7}, {5, 4, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}, true, true, true};
  const std::vector<Value> inputs = Inputs(c, rng);
  auto sums = testing::RunOp(testing::MakeNode("ConvInteger", 4, 1, c.attrs), 10,
                             {inputs[0], inputs[1], inputs[2], inputs[3]});
  ASSERT_TRUE(sums.ok());
  const Tensor& s = sums->outputs[0].tensor();
  auto fused = testing::RunOp(FusedNode(c, {StringAttr("activation", "Relu")}), 1, inputs);
  ASSERT_TRUE(fused.ok()) << fused.status().ToString();
  const Tensor& y = fused->outputs[0].tensor();
  ASSERT_EQ(y.dims(), s.dims());
  const int64_t pixels = s.dim(2) * s.dim(3);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    const int64_t m = i / pixels;
    const int64_t biased = static_cast<int64_t>(s.data<int32_t>()[i]) + inputs[5].tensor().data<int32_t>()[m];
    float v = static_cast<float>(biased) * inputs[4].tensor().data<float>()[m];
    v = v + inputs[6].tensor().data<float>()[m];
    v = v + inputs[7].tensor().data<float>()[i];
    EXPECT_EQ(y.data<float>()[i], v < 0.f ? 0.f : v) << "element " << i;
  }
}

// Inputs the op does not take are errors naming the input, from both kernels.
TEST(ConvIntegerToFloatReference, RejectsAScaleThatBroadcastsAlongPixels) {
  std::mt19937 rng(9);
  Case c{"bad", {1, 2, 4, 5}, {3, 2, 1, 1}, {}};
  std::vector<Value> inputs = Inputs(c, rng);
  inputs[4] = Value(testing::UniformFloats({1, 1, 1, 5}, rng, 0.1f, 0.2f));
  const Node node = FusedNode(c, {});
  auto ref = testing::RunOp(node, 1, inputs);
  ASSERT_FALSE(ref.ok());
  EXPECT_NE(ref.status().message().find("scale"), std::string::npos) << ref.status().ToString();
  auto fast = testing::RunKernelOmitting(cpu::ConvIntegerToFloatFast, node, 1, inputs, 1);
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.status().message().find("scale"), std::string::npos) << fast.status().ToString();
}

}  // namespace
}  // namespace nee
