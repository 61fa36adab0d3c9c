// The bfloat16 Conv and ai.nee FusedConv fast kernel (ep/cpu/conv_bf16.cc,
// vdpbf16ps) against the reference kernels (ops/conv.cc), which compute the
// conv in float32 on the same bfloat16 inputs and round the output once (the
// FusedConv reference then adds Z and applies the activation, rounding each
// step). The two differ only in the order of the float32 sums, so a conv
// output may differ by the rounding of its sum: one bfloat16 ulp of the
// output plus float32's epsilon times the sum of |x w| over the K = C*KH*KW
// terms (at most K + 1 with the bias: inputs lie in [-1, 1]); a FusedConv
// output with Z may carry the intermediate conv value's ulp as well. Every
// result is bitwise the same at 1, 2 and 3 threads and with the weights
// packed once through a PreparedCache.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "base/cpu_isa.h"
#include "bf16_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

using namespace bf16_test;

// Conv attributes and shapes of one case.
struct ConvCase {
  std::vector<int64_t> x, w;
  std::vector<Attribute> attrs;
  bool bias = true;
};

std::string Describe(const ConvCase& c) { return DimsToString(c.x) + " * " + DimsToString(c.w); }

// `got` within the bound of `want` (see the file comment); `inner` (may be
// undefined): the reference plain conv, whose rounding FusedConv's Z step
// carries on.
void ExpectClose(const Tensor& got, const Tensor& want, const Tensor* inner, double abs_sum, const std::string& what) {
  ASSERT_EQ(got.dtype(), DataType::kBFloat16) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  int differing = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double g = At(got, i), w = At(want, i);
    double tol = BfUlp(std::max(std::abs(g), std::abs(w))) + abs_sum * 0x1p-23;
    if (inner) tol += BfUlp(std::abs(At(*inner, i)));
    ASSERT_LE(std::abs(g - w), tol) << what << " element " << i << ": " << g << " vs " << w;
    differing += g != w;
  }
  // Most outputs round alike: a difference is a float32 sum next to a rounding boundary.
  EXPECT_LE(differing, want.num_elements() / 4 + 1) << what;
}

// The fast kernel at 1 thread against the reference, then at 2 and 3
// threads and with W constant (packed once, two runs): bitwise equal.
void CheckConv(KernelFn kernel, const Node& node, const std::vector<Value>& inputs, const Tensor* inner,
               double abs_sum, const std::string& what) {
  auto ref = testing::RunOp(node, 22, inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  auto one = RunFast(kernel, node, inputs, 1, nullptr, {}, 22);
  ASSERT_TRUE(one.ok()) << what << ": " << one.status().ToString();
  ExpectClose(one.value(), ref->outputs[0].tensor(), inner, abs_sum, what);
  for (int threads : {2, 3}) {
    auto many = RunFast(kernel, node, inputs, threads, nullptr, {}, 22);
    ASSERT_TRUE(many.ok()) << what;
    EXPECT_TRUE(BitwiseEqual(one.value(), many.value())) << what << ", " << threads << " threads";
  }
  PreparedCache cache;
  for (int run = 0; run < 2; ++run) {
    auto packed = RunFast(kernel, node, inputs, 2, &cache, {false, true, true, false}, 22);
    ASSERT_TRUE(packed.ok()) << what;
    EXPECT_TRUE(BitwiseEqual(one.value(), packed.value())) << what << ", W constant, run " << run;
  }
}

// Odd channel counts (the zero channel paired with the last), a pointwise
// conv read in place, strides 1, 2 and 3 (the general gather), dilation,
// asymmetric and SAME padding, kernels wider than the image, images smaller
// than a 32-pixel panel or crossing several, output channels across the
// 12-channel tile, and batches.
std::vector<ConvCase> Cases() {
  using testing::IntsAttr;
  using testing::StringAttr;
  return {
      {{1, 3, 11, 13}, {5, 3, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
      {{2, 4, 9, 7}, {13, 4, 1, 1}, {}},
      {{1, 3, 23, 21}, {16, 3, 7, 7}, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {3, 3, 3, 3})}},
      {{1, 6, 10, 12}, {25, 6, 3, 3}, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}, false},
      {{1, 8, 7, 7}, {30, 8, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
      {{1, 5, 12, 9}, {7, 5, 1, 1}, {IntsAttr("strides", {2, 2})}},
      {{1, 4, 9, 9}, {8, 4, 3, 3}, {IntsAttr("dilations", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}},
      {{1, 2, 5, 40}, {12, 2, 1, 3}, {IntsAttr("strides", {1, 3}), IntsAttr("pads", {0, 1, 0, 1})}},
      {{1, 16, 14, 14}, {40, 16, 5, 5}, {IntsAttr("pads", {1, 2, 2, 1})}},
      {{2, 7, 6, 5}, {9, 7, 3, 2}, {StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("strides", {2, 1})}},
      {{1, 3, 4, 4}, {4, 3, 3, 3}, {IntsAttr("pads", {3, 3, 3, 3})}},
      {{1, 64, 20, 20}, {70, 64, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
      {{1, 33, 1, 1}, {24, 33, 1, 1}, {}},
  };
}

Node ConvNode(const ConvCase& c, const std::string& op = "Conv", const std::string& domain = "",
              std::vector<Attribute> extra = {}, size_t inputs = 0) {
  std::vector<Attribute> attrs = c.attrs;
  for (Attribute& a : extra) attrs.push_back(std::move(a));
  return testing::MakeNode(op, inputs ? inputs : (c.bias ? 3 : 2), 1, attrs, domain);
}

std::vector<Value> ConvInputs(const ConvCase& c, std::mt19937& rng) {
  std::vector<Value> inputs = {Value(RandomBf16(c.x, rng)), Value(RandomBf16(c.w, rng))};
  if (c.bias) inputs.push_back(Value(RandomBf16({c.w[0]}, rng)));
  return inputs;
}

double AbsSum(const ConvCase& c) { return static_cast<double>(c.w[1] * c.w[2] * c.w[3] + 1); }

// Each case as an ai.nee FusedConv with bias, the activations taken in turn,
// without and with Z, against the reference.
void CheckFusedCases(const std::vector<ConvCase>& cases, const std::vector<std::vector<Attribute>>& activations,
                     std::mt19937& rng) {
  for (size_t i = 0; i < cases.size(); ++i) {
    ConvCase c = cases[i];
    c.bias = true;
    const auto& act = activations[i % activations.size()];
    for (bool with_z : {false, true}) {
      std::vector<Value> inputs = ConvInputs(c, rng);
      auto plain = testing::RunOp(ConvNode(c), 22, inputs);
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      const Tensor inner = plain->outputs[0].tensor();
      if (with_z) inputs.push_back(Value(RandomBf16(inner.dims(), rng)));
      const Node node = ConvNode(c, "FusedConv", "ai.nee", act, inputs.size());
      const std::string what = Describe(c) + (act.empty() ? "" : " " + act[0].s) + (with_z ? " + Z" : "");
      CheckConv(cpu::FusedConvBFloat16, node, inputs, &inner, AbsSum(c) + (with_z ? 1 : 0), what);
    }
  }
}

TEST(Bf16Conv, AgreesWithReferenceOnAwkwardShapes) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(31);
  for (const ConvCase& c : Cases())
    CheckConv(cpu::ConvFloatOrBFloat16, ConvNode(c), ConvInputs(c, rng), nullptr, AbsSum(c), Describe(c));
}

// ai.nee FusedConv: Z and each activation the kernel applies itself (Relu,
// Clip, LeakyRelu, none), and one it leaves to the reference (Sigmoid).
TEST(Bf16FusedConv, AgreesWithReferenceWithResidualAndActivations) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(32);
  const std::vector<std::vector<Attribute>> activations = {
      {},
      {testing::StringAttr("activation", "Relu")},
      {testing::StringAttr("activation", "Clip"), testing::FloatsAttr("activation_params", {-0.5f, 0.75f})},
      {testing::StringAttr("activation", "LeakyRelu"), testing::FloatsAttr("activation_params", {0.1f})},
      {testing::StringAttr("activation", "Sigmoid")}};
  CheckFusedCases(Cases(), activations, rng);
}

// Depthwise convs (group = C = M): sixteen channels in float32 lanes, in
// bands of rows. Strides 1, 2 and 3, dilation, kernels of 1x1 to 5x5 and
// 3x1, asymmetric and SAME padding, rows wider than sixteen pixels and
// narrower, a one-pixel image, channel counts below, at and past a group of
// sixteen, a plane tall enough to take several bands, batches, no bias; and a
// channel multiplier of 2 (M = 2C), which the reference computes.
std::vector<ConvCase> DepthwiseCases() {
  using testing::IntAttr;
  using testing::IntsAttr;
  using testing::StringAttr;
  auto group = [](int64_t g) { return IntAttr("group", g); };
  return {
      {{1, 5, 16, 16}, {5, 1, 3, 3}, {group(5), IntsAttr("pads", {1, 1, 1, 1})}},
      {{2, 7, 13, 19}, {7, 1, 3, 3}, {group(7), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {{1, 3, 40, 37}, {3, 1, 5, 5}, {group(3), IntsAttr("pads", {2, 2, 2, 2})}, false},
      {{1, 4, 11, 35}, {4, 1, 3, 3}, {group(4), IntsAttr("strides", {3, 3}), IntsAttr("pads", {1, 0, 1, 2})}},
      {{1, 6, 12, 12}, {6, 1, 3, 3}, {group(6), IntsAttr("dilations", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}},
      {{1, 9, 7, 7}, {9, 1, 3, 1}, {group(9), StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("strides", {2, 1})}},
      {{1, 32, 1, 1}, {32, 1, 3, 3}, {group(32), IntsAttr("pads", {1, 1, 1, 1})}},
      {{1, 8, 6, 6}, {8, 1, 1, 1}, {group(8)}},
      {{1, 20, 9, 18}, {20, 1, 3, 3}, {group(20), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {{2, 35, 6, 6}, {35, 1, 3, 3}, {group(35), IntsAttr("pads", {1, 1, 1, 1})}},
      {{1, 16, 70, 9}, {16, 1, 3, 3}, {group(16), IntsAttr("pads", {1, 1, 1, 1})}},
      {{1, 3, 9, 9}, {6, 1, 3, 3}, {group(3), IntsAttr("pads", {1, 1, 1, 1})}},
  };
}

TEST(Bf16Conv, DepthwiseAgreesWithReference) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(37);
  for (const ConvCase& c : DepthwiseCases())
    CheckConv(cpu::ConvFloatOrBFloat16, ConvNode(c), ConvInputs(c, rng), nullptr, AbsSum(c), Describe(c));
}

TEST(Bf16FusedConv, DepthwiseAgreesWithReferenceWithResidualAndActivations) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(38);
  const std::vector<std::vector<Attribute>> activations = {
      {testing::StringAttr("activation", "Clip"), testing::FloatsAttr("activation_params", {0.0f, 6.0f})},
      {testing::StringAttr("activation", "Relu")},
      {}};
  CheckFusedCases(DepthwiseCases(), activations, rng);
}

// A Z of the wrong shape is an error naming it, not a crash.
TEST(Bf16FusedConv, RejectsAMisshapenResidual) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(33);
  const ConvCase c = Cases()[0];
  std::vector<Value> inputs = ConvInputs(c, rng);
  inputs.push_back(Value(RandomBf16({1, 5, 11, 12}, rng)));
  auto got = RunFast(cpu::FusedConvBFloat16, ConvNode(c, "FusedConv", "ai.nee", {}, 4), inputs, 1, nullptr, {}, 22);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("(Z)"), std::string::npos) << got.status().ToString();
}

// Infinities and NaN propagate as the reference's: inf * 0 in a sum is NaN,
// each NaN output the reference's quiet NaN bit for bit (also after Z and
// Relu), an overflowing sum rounds to infinity.
TEST(Bf16FusedConv, NonFiniteValuesAsTheReference) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(35);
  const ConvCase c = {{1, 6, 9, 8}, {14, 6, 3, 3}, {testing::IntsAttr("pads", {1, 1, 1, 1})}};
  std::vector<Value> inputs = ConvInputs(c, rng);
  uint16_t* x = inputs[0].tensor().data<uint16_t>();
  x[3] = FloatToBFloat16(INFINITY);
  x[72 + 20] = FloatToBFloat16(NAN);
  x[5 * 72 + 40] = FloatToBFloat16(-3e38f);
  inputs[1].tensor().data<uint16_t>()[100] = FloatToBFloat16(3e38f);
  inputs.push_back(Value(RandomBf16({1, 14, 9, 8}, rng)));
  inputs.back().tensor().data<uint16_t>()[7] = FloatToBFloat16(-NAN);
  for (const char* act : {"Relu", "LeakyRelu"}) {
    std::vector<Attribute> attrs = {testing::StringAttr("activation", act)};
    if (std::string(act) == "LeakyRelu") attrs.push_back(testing::FloatsAttr("activation_params", {0.5f}));
    const Node node = ConvNode(c, "FusedConv", "ai.nee", attrs, 4);
    auto ref = testing::RunOp(node, 22, inputs);
    auto fast = RunFast(cpu::FusedConvBFloat16, node, inputs, 2, nullptr, {}, 22);
    ASSERT_TRUE(ref.ok() && fast.ok());
    const Tensor& want = ref->outputs[0].tensor();
    int non_finite = 0;
    for (int64_t i = 0; i < want.num_elements(); ++i) {
      const float w = At(want, i);
      if (std::isfinite(w)) continue;
      ++non_finite;
      EXPECT_EQ(fast.value().data<uint16_t>()[i], want.data<uint16_t>()[i]) << act << " element " << i;
    }
    EXPECT_GT(non_finite, 20) << act;
  }
}

// A later run whose input is smaller than the window goes to the reference
// kernel, which reports it: the weights packed on the first run did not take
// W away from it.
TEST(Bf16Conv, AnInputSmallerThanTheWindowIsAnErrorAfterPacking) {
  SKIP_WITHOUT_AVX512BF16();
  std::mt19937 rng(36);
  const ConvCase c = {{1, 4, 6, 6}, {5, 4, 5, 5}, {}};
  const Node node = ConvNode(c);
  PreparedCache cache;
  auto first = RunFast(cpu::ConvFloatOrBFloat16, node, ConvInputs(c, rng), 1, &cache, {false, true, true}, 22);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<Value> small = ConvInputs(c, rng);
  small[0] = Value(RandomBf16({1, 4, 3, 3}, rng));
  auto second = RunFast(cpu::ConvFloatOrBFloat16, node, small, 1, &cache, {false, true, true}, 22);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("bigger than the padded input"), std::string::npos)
      << second.status().ToString();
}

// The float32 Conv still takes the float32 kernel through the same entry.
TEST(Bf16Conv, Float32InputsKeepTheFloat32Kernel) {
  std::mt19937 rng(34);
  const ConvCase c = Cases()[0];
  std::vector<Value> inputs = {Value(testing::RandomTensor(c.x, rng)), Value(testing::RandomTensor(c.w, rng))};
  auto via = RunFast(cpu::ConvFloatOrBFloat16, ConvNode(c, "Conv", "", {}, 2), inputs, 1);
  auto direct = RunFast(cpu::ConvFloat, ConvNode(c, "Conv", "", {}, 2), inputs, 1);
  ASSERT_TRUE(via.ok() && direct.ok());
  EXPECT_TRUE(BitwiseEqual(via.value(), direct.value()));
}

}  // namespace
}  // namespace nee
