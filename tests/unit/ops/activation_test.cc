// Tests for ops/activation.cc. Expected values come from onnx 1.23.2's
// reference implementation (onnx.reference.ReferenceEvaluator on a one-node
// model at the opset named in each call) run on float32 numpy inputs in
// /work/main/.venv, or from numpy directly where a comment says so; printed
// with %.9g and pasted here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectRegisteredVersions;
using testing::ExpectTensorNear;
using testing::FloatAttr;
using testing::MakeNode;
using testing::RunError;
using testing::RunOne;
using testing::RunOp;
using testing::StringAttr;

template <typename T>
Value V(std::vector<int64_t> dims, std::vector<T> values) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

// The shared input of the float activation tests.
Value X() { return V<float>({7}, {-3, -1, -0.25, 0, 0.5, 2, 4}); }

TEST(Activation, ReluFamily) {
  ExpectTensorNear<float>(RunOne("Relu", 14, {X()}), {7}, {0, 0, 0, 0, 0.5, 2, 4});
  ExpectTensorNear<float>(RunOne("Relu", 6, {X()}), {7}, {0, 0, 0, 0, 0.5, 2, 4});
  ExpectTensorNear<int8_t>(RunOne("Relu", 14, {V<int8_t>({5}, {-128, -1, 0, 5, 127})}), {5}, {0, 0, 0, 5, 127});
  ExpectTensorNear<float>(RunOne("LeakyRelu", 16, {X()}), {7},
                          {-0.0299999993f, -0.00999999978f, -0.00249999994f, 0, 0.5, 2, 4});
  ExpectTensorNear<float>(RunOne("LeakyRelu", 16, {X()}, {FloatAttr("alpha", 0.2f)}), {7},
                          {-0.600000024f, -0.200000003f, -0.0500000007f, 0, 0.5, 2, 4});
  ExpectTensorNear<float>(RunOne("ThresholdedRelu", 22, {X()}), {7}, {0, 0, 0, 0, 0, 2, 4});
  ExpectTensorNear<float>(RunOne("ThresholdedRelu", 10, {X()}, {FloatAttr("alpha", 0.5f)}), {7},
                          {0, 0, 0, 0, 0, 2, 4});
  // Relu keeps NaN (np.maximum(nan, 0) is nan).
  ExpectTensorNear<float>(RunOne("Relu", 14, {V<float>({1}, {std::nanf("")})}), {1}, {std::nanf("")});
}

TEST(Activation, Float16ComputesViaFloat) {
  // np.array([-2,-.5,0,1,3], np.float16).view(np.uint16) = [49152,47104,0,15360,16896];
  // reference Relu / Sigmoid outputs viewed as uint16.
  Tensor h = Tensor::Allocate(DataType::kFloat16, {5}).value();
  const uint16_t bits[] = {49152, 47104, 0, 15360, 16896};
  for (int i = 0; i < 5; ++i) h.data<uint16_t>()[i] = bits[i];
  auto bits_of = [](const Tensor& t) {
    return std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.num_elements());
  };
  Tensor relu = RunOne("Relu", 14, {Value(h)});
  ASSERT_EQ(relu.dtype(), DataType::kFloat16);
  EXPECT_EQ(bits_of(relu), (std::vector<uint16_t>{0, 0, 0, 15360, 16896}));
  Tensor sigmoid = RunOne("Sigmoid", 13, {Value(h)});
  ASSERT_EQ(sigmoid.dtype(), DataType::kFloat16);
  EXPECT_EQ(bits_of(sigmoid), (std::vector<uint16_t>{12193, 13834, 14336, 14809, 15263}));
}

TEST(Activation, BFloat16ComputesViaFloat) {
  // ml_dtypes: x = np.array([-2,-.5,0,1,3], bfloat16); f(x.astype(np.float32)).astype(bfloat16)
  // viewed as uint16, with f = np.tanh and Elu (np.expm1 below 0).
  Tensor x = Tensor::Allocate(DataType::kBFloat16, {5}).value();
  const uint16_t bits[] = {49152, 48896, 0, 16256, 16448};
  for (int i = 0; i < 5; ++i) x.data<uint16_t>()[i] = bits[i];
  auto bits_of = [](const Tensor& t) {
    return std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.num_elements());
  };
  Tensor tanh = RunOne("Tanh", 13, {Value(x)});
  ASSERT_EQ(tanh.dtype(), DataType::kBFloat16);
  EXPECT_EQ(bits_of(tanh), (std::vector<uint16_t>{49015, 48877, 0, 16195, 16255}));
  Tensor elu = RunOne("Elu", 22, {Value(x)});
  ASSERT_EQ(elu.dtype(), DataType::kBFloat16);
  EXPECT_EQ(bits_of(elu), (std::vector<uint16_t>{48989, 48841, 0, 16256, 16448}));
}

TEST(Activation, Sigmoids) {
  ExpectTensorNear<float>(RunOne("Sigmoid", 13, {X()}), {7},
                          {0.0474258736f, 0.268941402f, 0.437823474f, 0.5f, 0.622459352f, 0.880797029f, 0.982013762f});
  ExpectTensorNear<float>(RunOne("HardSigmoid", 22, {X()}), {7},
                          {0, 0.300000012f, 0.449999988f, 0.5, 0.600000024f, 0.899999976f, 1});
  ExpectTensorNear<float>(RunOne("HardSigmoid", 6, {X()}, {FloatAttr("alpha", 0.5f), FloatAttr("beta", 0.6f)}), {7},
                          {0, 0.100000024f, 0.475000024f, 0.600000024f, 0.850000024f, 1, 1});
  ExpectTensorNear<float>(RunOne("HardSwish", 14, {X()}), {7},
                          {-0, -0.333333313f, -0.114583336f, 0, 0.291666657f, 1.66666675f, 4});
  ExpectTensorNear<float>(RunOne("Tanh", 13, {X()}), {7},
                          {-0.995054781f, -0.761594176f, -0.244918659f, 0, 0.462117195f, 0.964027584f, 0.999329329f});
  // No overflow at the extremes: reference Sigmoid([-100, 100]) = [3.78350585e-44, 1].
  Tensor big = RunOne("Sigmoid", 13, {V<float>({2}, {-100, 100})});
  ASSERT_EQ(big.num_elements(), 2);
  EXPECT_NEAR(big.data<float>()[0], 3.78350585e-44f, 1e-45f);
  EXPECT_EQ(big.data<float>()[1], 1.0f);
  // float64: reference Sigmoid([-2,0,1]).
  ExpectTensorNear<double>(RunOne("Sigmoid", 13, {V<double>({3}, {-2, 0, 1})}), {3},
                           {0.11920292202211755, 0.5, 0.7310585786300049}, 1e-14);
}

TEST(Activation, ExponentialLinearUnits) {
  ExpectTensorNear<float>(RunOne("Elu", 22, {X()}), {7}, {-0.950212896f, -0.63212055f, -0.221199214f, 0, 0.5, 2, 4});
  ExpectTensorNear<float>(RunOne("Elu", 6, {X()}, {FloatAttr("alpha", 0.5f)}), {7},
                          {-0.475106448f, -0.316060275f, -0.110599607f, 0, 0.5, 2, 4});
  ExpectTensorNear<float>(RunOne("Selu", 22, {X()}), {7},
                          {-1.6705687f, -1.11133075f, -0.388890177f, 0, 0.525350511f, 2.10140204f, 4.20280409f});
  ExpectTensorNear<float>(RunOne("Celu", 12, {X()}), {7}, {-0.950212896f, -0.63212055f, -0.221199214f, 0, 0.5, 2, 4});
  ExpectTensorNear<float>(RunOne("Celu", 28, {X()}, {FloatAttr("alpha", 2.0f)}), {7},
                          {-1.55373967f, -0.786938667f, -0.235006198f, 0, 0.5, 2, 4});
}

TEST(Activation, SoftFunctionsGeluMishSwish) {
  ExpectTensorNear<float>(RunOne("Softplus", 22, {X()}), {7},
                          {0.048587352f, 0.313261688f, 0.575939417f, 0.693147182f, 0.974076986f, 2.12692809f,
                           4.01814985f});
  // Large inputs do not overflow: np.logaddexp(0, [-100, 100]) = [3.78350585e-44, 100].
  Tensor sp = RunOne("Softplus", 1, {V<float>({2}, {-100, 100})});
  ASSERT_EQ(sp.num_elements(), 2);
  EXPECT_NEAR(sp.data<float>()[0], 3.78350585e-44f, 1e-45f);
  EXPECT_EQ(sp.data<float>()[1], 100.0f);
  ExpectTensorNear<float>(RunOne("Softsign", 22, {X()}), {7},
                          {-0.75, -0.5, -0.200000003f, 0, 0.333333343f, 0.666666687f, 0.800000012f});
  ExpectTensorNear<float>(RunOne("Gelu", 20, {X()}), {7},
                          {-0.00404968858f, -0.158655256f, -0.100323416f, 0, 0.345731229f, 1.95449972f, 3.99987316f});
  ExpectTensorNear<float>(RunOne("Gelu", 20, {X()}, {StringAttr("approximate", "tanh")}), {7},
                          {-0.00363734365f, -0.158807993f, -0.100324646f, 0, 0.345714003f, 1.95459771f, 3.9999299f});
  EXPECT_FALSE(RunError("Gelu", 20, {X()}, {StringAttr("approximate", "fast")}).ok());
  ExpectTensorNear<float>(RunOne("Mish", 22, {X()}), {7},
                          {-0.145647466f, -0.30340147f, -0.129926965f, 0, 0.375245184f, 1.94395888f, 3.99741292f});
  ExpectTensorNear<float>(RunOne("Swish", 24, {X()}), {7},
                          {-0.142277628f, -0.268941402f, -0.109455861f, 0, 0.311229676f, 1.76159406f, 3.92805505f});
  ExpectTensorNear<float>(RunOne("Swish", 24, {X()}, {FloatAttr("alpha", 2.0f)}), {7},
                          {-0.00741786975f, -0.119202934f, -0.0943851694f, 0, 0.365529299f, 1.96402752f, 3.99865866f});
  // float64 Gelu; the reference evaluates part of it in float32, hence the tolerance.
  ExpectTensorNear<double>(RunOne("Gelu", 20, {V<double>({3}, {-2, 0, 1})}), {3},
                           {-0.045500278472900391, 0, 0.84134474396705627}, 1e-6);
}

TEST(Activation, SwiGLU) {
  // Reference SwiGLU(alpha=1.5) on a = [[-2,-.5,0],[1,2,3]], b = [[1,2,3],[-1,.5,2]] (opset 28).
  Value a = V<float>({2, 3}, {-2, -0.5, 0, 1, 2, 3});
  Value b = V<float>({2, 3}, {1, 2, 3, -1, 0.5, 2});
  ExpectTensorNear<float>(RunOne("SwiGLU", 28, {a, b}, {FloatAttr("alpha", 1.5f)}), {2, 3},
                          {-0.0948517472f, -0.320821285f, 0, -0.817574501f, 0.952574134f, 5.93407822f});
  // No broadcasting.
  EXPECT_FALSE(RunError("SwiGLU", 28, {a, V<float>({3}, {1, 2, 3})}).ok());
}

TEST(Activation, PReluBroadcastsSlope) {
  // x = np.arange(-6, 6).reshape(2,3,2), slope [[.1],[.2],[.3]].
  std::vector<float> x;
  for (int i = -6; i < 6; ++i) x.push_back(static_cast<float>(i));
  ExpectTensorNear<float>(
      RunOne("PRelu", 16, {V<float>({2, 3, 2}, x), V<float>({3, 1}, {0.1f, 0.2f, 0.3f})}), {2, 3, 2},
      {-0.600000024f, -0.5, -0.800000012f, -0.600000024f, -0.600000024f, -0.300000012f, 0, 1, 2, 3, 4, 5});
  ExpectTensorNear<int32_t>(RunOne("PRelu", 16, {V<int32_t>({3}, {-3, 4, -5}), V<int32_t>({1}, {2})}), {3},
                            {-6, 4, -10});
  // The slope must broadcast to X's shape, not grow it.
  EXPECT_FALSE(RunError("PRelu", 16, {V<float>({3}, {1, 2, 3}), V<float>({2, 3}, {1, 1, 1, 1, 1, 1})}).ok());
}

TEST(Activation, ClipWithInputsAndAttributes) {
  Value x = V<float>({5}, {-5, -1, 0, 1.5, 7});
  // np.clip(x, -1, 2), np.maximum(x, 0), np.minimum(x, 1).
  ExpectTensorNear<float>(RunOne("Clip", 13, {x, V<float>({}, {-1}), V<float>({}, {2})}), {5}, {-1, -1, 0, 1.5, 2});
  ExpectTensorNear<float>(RunOne("Clip", 13, {x, V<float>({}, {0})}), {5}, {0, 0, 0, 1.5, 7});
  ExpectTensorNear<float>(RunOne("Clip", 11, {x, Value(), V<float>({}, {1})}), {5}, {-5, -1, 0, 1, 1});
  ExpectTensorNear<float>(RunOne("Clip", 13, {x}), {5}, {-5, -1, 0, 1.5, 7});
  // min > max: every value becomes max (reference Clip(x, 3, 1)).
  ExpectTensorNear<float>(RunOne("Clip", 13, {x, V<float>({}, {3}), V<float>({}, {1})}), {5}, {1, 1, 1, 1, 1});
  // Opset 6: attributes.
  ExpectTensorNear<float>(RunOne("Clip", 6, {x}, {FloatAttr("min", -1), FloatAttr("max", 2)}), {5},
                          {-1, -1, 0, 1.5, 2});
  ExpectTensorNear<float>(RunOne("Clip", 6, {x}, {FloatAttr("max", 1)}), {5}, {-5, -1, 0, 1, 1});
  // Integer types (opset 12+).
  ExpectTensorNear<int32_t>(
      RunOne("Clip", 13, {V<int32_t>({5}, {-100, -3, 0, 3, 100}), V<int32_t>({}, {-5}), V<int32_t>({}, {5})}), {5},
      {-5, -3, 0, 3, 5});
  ExpectTensorNear<uint8_t>(
      RunOne("Clip", 12, {V<uint8_t>({4}, {0, 100, 200, 255}), V<uint8_t>({}, {50}), V<uint8_t>({}, {210})}), {4},
      {50, 100, 200, 210});
  // Bounds must be one element of X's type.
  EXPECT_FALSE(RunError("Clip", 13, {x, V<float>({2}, {0, 1})}).ok());
  EXPECT_FALSE(RunError("Clip", 13, {x, V<double>({}, {0})}).ok());
}

TEST(Activation, Shrink) {
  ExpectTensorNear<float>(RunOne("Shrink", 9, {X()}), {7}, {-3, -1, 0, 0, 0, 2, 4});
  ExpectTensorNear<float>(RunOne("Shrink", 9, {X()}, {FloatAttr("bias", 1.5f), FloatAttr("lambd", 1.0f)}), {7},
                          {-1.5, 0, 0, 0, 0, 0.5, 2.5});
  // Integers: computed in floating point and truncated (reference -> [-3,0,0,0,3]).
  ExpectTensorNear<int32_t>(RunOne("Shrink", 9, {V<int32_t>({5}, {-5, -1, 0, 1, 5})},
                                   {FloatAttr("bias", 1.5f), FloatAttr("lambd", 1.0f)}),
                            {5}, {-3, 0, 0, 0, 3});
}

TEST(Activation, UnsupportedTypesNameOpAndType) {
  Status s = RunError("Sigmoid", 13, {V<int32_t>({1}, {1})});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Sigmoid"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s.message();
  EXPECT_FALSE(RunError("Relu", 14, {V<uint8_t>({1}, {1})}).ok());
}

TEST(Activation, EmptyInput) {
  ExpectTensorNear<float>(RunOne("Gelu", 20, {V<float>({0, 4}, {})}), {0, 4}, {});
  ExpectTensorNear<float>(RunOne("Clip", 13, {V<float>({0}, {}), V<float>({}, {0})}), {0}, {});
}

// Since-versions of each op as onnx 1.23.2 lists them:
//   sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == "")
TEST(Activation, RegistersEveryOnnxVersion) {
  const std::vector<std::pair<std::string, std::vector<int>>> kVersions = {
      {"Relu", {1, 6, 13, 14}}, {"LeakyRelu", {1, 6, 16}}, {"PRelu", {1, 6, 7, 9, 16}}, {"Sigmoid", {1, 6, 13}},
      {"HardSigmoid", {1, 6, 22}}, {"HardSwish", {14, 22}}, {"Tanh", {1, 6, 13}}, {"Elu", {1, 6, 22}},
      {"Selu", {1, 6, 22}}, {"Celu", {12, 28}}, {"Softplus", {1, 22}}, {"Softsign", {1, 22}},
      {"ThresholdedRelu", {10, 22}}, {"Gelu", {20}}, {"Mish", {18, 22}}, {"Clip", {1, 6, 11, 12, 13}},
      {"Shrink", {9}}, {"Swish", {24}}, {"SwiGLU", {28}},
  };
  ExpectRegisteredVersions(kVersions);
}

// ---- com.microsoft Gelu forms: expected values from ONNX Runtime 1.32 (a one-node model,
// com.microsoft opset 1) on A = linspace(-3, 3, 6) as [2, 3] and bias B = [0.5, -1, 0.25].

Tensor RunMs(const std::string& op, const std::vector<Value>& inputs, std::vector<Attribute> attrs = {}) {
  Node node = MakeNode(op, inputs.size(), 1, std::move(attrs), "com.microsoft");
  auto r = RunOp(node, 1, inputs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->outputs[0].is_tensor()) return Tensor();
  return r->outputs[0].tensor();
}

Value GeluA() { return V<float>({2, 3}, {-3, -1.8f, -0.6f, 0.6f, 1.8f, 3}); }
Value GeluB() { return V<float>({3}, {0.5f, -1, 0.25f}); }

TEST(Activation, MicrosoftGeluForms) {
  ExpectTensorNear<float>(RunMs("Gelu", {GeluA()}), {2, 3},
                          {-0.00404968858f, -0.064674601f, -0.164551884f, 0.43544814f, 1.73532534f, 2.99595022f});
  ExpectTensorNear<float>(RunMs("BiasGelu", {GeluA(), GeluB()}), {2, 3},
                          {-0.0155241042f, -0.00715436926f, -0.127109274f, 0.950767398f, 0.630515635f, 3.2481246f});
  ExpectTensorNear<float>(RunMs("FastGelu", {GeluA()}), {2, 3},
                          {-0.00363752246f, -0.064740479f, -0.164584786f, 0.435415238f, 1.73525953f, 2.99636269f});
  ExpectTensorNear<float>(RunMs("FastGelu", {GeluA(), GeluB()}), {2, 3},
                          {-0.0150842965f, -0.00668890448f, -0.127113819f, 0.950581074f, 0.630431592f, 3.24843144f});
  ExpectTensorNear<float>(RunMs("QuickGelu", {GeluA()}), {2, 3},
                          {-0.0180712938f, -0.0803410634f, -0.158876225f, 0.441123813f, 1.71965885f, 2.98192883f});
  ExpectTensorNear<float>(RunMs("QuickGelu", {GeluA()}, {FloatAttr("alpha", 1.0f)}), {2, 3},
                          {-0.142277598f, -0.255331904f, -0.212606236f, 0.387393802f, 1.54466808f, 2.85772228f});
}

TEST(Activation, MicrosoftGeluBiasMustMatchLastAxis) {
  Node node = MakeNode("BiasGelu", 2, 1, {}, "com.microsoft");
  auto r = RunOp(node, 1, {GeluA(), V<float>({2}, {1, 2})});
  EXPECT_FALSE(r.ok());
  // Broadcastable but not 1-D.
  r = RunOp(node, 1, {GeluA(), V<float>({1, 3}, {1, 2, 3})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("last dimension"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace nee
