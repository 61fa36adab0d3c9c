// ONNX Runtime's com.microsoft QOperator ops, as onnxruntime.quantization writes them (QOperator format).
// Expected values: onnxruntime 1.32 (CPU, optimizations off) on the same inputs; the script that printed
// them (quantize_contrib_expected.py) builds each single-node model from initializers and runs it.
#include <gtest/gtest.h>

#include "op_test_util.h"

namespace nee::testing {
namespace {

Tensor F(float v) { return Tensor::Scalar<float>(v); }
Tensor U8(uint8_t v) { return Tensor::Scalar<uint8_t>(v); }
Tensor I8(int8_t v) { return Tensor::Scalar<int8_t>(v); }

constexpr const char* kMs = "com.microsoft";

TEST(QuantizeContrib, QLinearAddAndMulBroadcast) {
  Tensor a = Tensor::FromVector<uint8_t>({0, 50, 100, 150, 200, 255}, {2, 3});
  Tensor b = Tensor::FromVector<uint8_t>({10, 128, 250}, {3});
  std::vector<Value> in{a, F(0.1f), U8(128), b, F(0.05f), U8(100), F(0.2f), U8(120)};
  auto add = RunOp(MakeNode("QLinearAdd", 8, 1, {}, kMs), 1, in);
  ASSERT_TRUE(add.ok()) << add.status().ToString();
  ExpectTensorNear<uint8_t>(add->outputs[0].tensor(), {2, 3}, {34, 88, 144, 108, 163, 221});
  auto mul = RunOp(MakeNode("QLinearMul", 8, 1, {}, kMs), 1, in);
  ASSERT_TRUE(mul.ok()) << mul.status().ToString();
  ExpectTensorNear<uint8_t>(mul->outputs[0].tensor(), {2, 3}, {255, 65, 15, 70, 170, 255});
}

TEST(QuantizeContrib, QLinearConcatRequantizesEachInput) {
  // The last value, 63.5 + 5, shows the rounding happens before the zero point is added.
  auto r = RunOp(MakeNode("QLinearConcat", 8, 1, {IntAttr("axis", 1)}, kMs), 1,
                 {F(0.1f), U8(5), Tensor::FromVector<uint8_t>({10, 200}, {1, 2}), F(0.2f), U8(3),
                  Tensor::FromVector<uint8_t>({0, 100, 255}, {1, 3}), F(0.05f), U8(128)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<uint8_t>(r->outputs[0].tensor(), {1, 5}, {19, 255, 0, 0, 69});
}

TEST(QuantizeContrib, QLinearGlobalAveragePool) {
  std::vector<uint8_t> nchw, nhwc;
  for (int i = 0; i < 8; ++i) nchw.push_back(static_cast<uint8_t>(i * 30 + 7));
  for (int i = 0; i < 12; ++i) nhwc.push_back(static_cast<uint8_t>(i * 20 + 3));
  auto r = RunOp(MakeNode("QLinearGlobalAveragePool", 5, 1, {IntAttr("channels_last", 0)}, kMs), 1,
                 {Tensor::FromVector<uint8_t>(nchw, {1, 2, 2, 2}), F(0.1f), U8(10), F(0.05f), U8(20)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<uint8_t>(r->outputs[0].tensor(), {1, 2, 1, 1}, {104, 255});
  r = RunOp(MakeNode("QLinearGlobalAveragePool", 5, 1, {IntAttr("channels_last", 1)}, kMs), 1,
            {Tensor::FromVector<uint8_t>(nhwc, {1, 2, 2, 3}), F(0.1f), U8(10), F(0.05f), U8(20)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<uint8_t>(r->outputs[0].tensor(), {1, 1, 1, 3}, {186, 226, 255});
}

TEST(QuantizeContrib, QGemmQuantizedAndFloatOutputs) {
  Tensor a = Tensor::FromVector<uint8_t>({10, 200, 130, 0, 255, 90}, {2, 3});
  Tensor b = Tensor::FromVector<int8_t>({1, -5, 100, 7, -128, 33}, {3, 2});
  Tensor c = Tensor::FromVector<int32_t>({1000, -2000}, {2});
  auto r = RunOp(MakeNode("QGemm", 9, 1, {FloatAttr("alpha", 1.0f)}, kMs), 1,
                 {a, F(0.02f), U8(128), b, F(0.01f), I8(0), c, F(0.05f), U8(100)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<uint8_t>(r->outputs[0].tensor(), {2, 2}, {131, 97, 174, 93});
  // B transposed, per-column scales and zero points, no C, float output.
  Tensor bt = Tensor::FromVector<int8_t>({1, 100, -128, -5, 7, 33}, {2, 3});
  r = RunOp(MakeNode("QGemm", 6, 1, {FloatAttr("alpha", 0.5f), IntAttr("transB", 1)}, kMs), 1,
            {a, F(0.02f), U8(128), bt, Tensor::FromVector<float>({0.01f, 0.03f}, {2}),
             Tensor::FromVector<int8_t>({0, 2}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2}, {0.6826f, 0.3744f, 1.7436f, 0.1059f}, 1e-5);
}

TEST(QuantizeContrib, QLinearSigmoidAndLeakyReluTables) {
  Tensor x = Tensor::FromVector<int8_t>({-128, -60, -1, 0, 1, 50, 127}, {7});
  auto r = RunOp(MakeNode("QLinearSigmoid", 5, 1, {}, kMs), 1, {x, F(0.05f), I8(0), F(1.0f / 256), I8(-128)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int8_t>(r->outputs[0].tensor(), {7}, {-128, -116, -3, 0, 3, 109, 127});
  r = RunOp(MakeNode("QLinearLeakyRelu", 5, 1, {FloatAttr("alpha", 0.1f)}, kMs), 1,
            {x, F(0.05f), I8(3), F(0.04f), I8(-2)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int8_t>(r->outputs[0].tensor(), {7}, {-18, -10, -3, -2, -2, 57, 127});
}

TEST(QuantizeContrib, QLinearAveragePoolPadsAndCountIncludePad) {
  std::vector<uint8_t> values;
  for (int i = 0; i < 16; ++i) values.push_back(static_cast<uint8_t>(i * 15 + 2));
  Tensor x = Tensor::FromVector<uint8_t>(values, {1, 1, 4, 4});
  for (int include : {0, 1}) {
    auto r = RunOp(MakeNode("QLinearAveragePool", 5, 1,
                            {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}),
                             IntsAttr("pads", {1, 1, 1, 1}), IntAttr("count_include_pad", include)}, kMs),
                   1, {x, F(0.1f), U8(10), F(0.05f), U8(20)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<uint8_t>(r->outputs[0].tensor(), {1, 1, 2, 2},
                              include ? std::vector<uint8_t>{46, 89, 179, 255} : std::vector<uint8_t>{79, 124, 255, 255});
  }
}

TEST(QuantizeContrib, QLinearSoftmax) {
  auto r = RunOp(MakeNode("QLinearSoftmax", 5, 1, {IntAttr("axis", -1), IntAttr("opset", 13)}, kMs), 1,
                 {Tensor::FromVector<uint8_t>({10, 200, 130, 0, 255, 90}, {1, 6}), F(0.05f), U8(128), F(1.0f / 256),
                  U8(0)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<uint8_t>(r->outputs[0].tensor(), {1, 6}, {0, 15, 0, 0, 240, 0});
}

TEST(QuantizeContrib, RejectsBadInputs) {
  // A float data input, a scale that is not a scalar, mismatched concat shapes.
  auto r = RunOp(MakeNode("QLinearAdd", 8, 1, {}, kMs), 1,
                 {F(1.0f), F(0.1f), U8(0), U8(1), F(0.1f), U8(0), F(0.1f), U8(0)});
  EXPECT_FALSE(r.ok());
  r = RunOp(MakeNode("QLinearAdd", 8, 1, {}, kMs), 1,
            {U8(1), Tensor::FromVector<float>({0.1f, 0.2f}, {2}), U8(0), U8(1), F(0.1f), U8(0), F(0.1f), U8(0)});
  EXPECT_FALSE(r.ok());
  r = RunOp(MakeNode("QLinearConcat", 8, 1, {IntAttr("axis", 1)}, kMs), 1,
            {F(0.1f), U8(5), Tensor::FromVector<uint8_t>({1, 2}, {1, 2}), F(0.2f), U8(3),
             Tensor::FromVector<uint8_t>({1, 2, 3, 4}, {2, 2}), F(0.05f), U8(128)});
  EXPECT_FALSE(r.ok());
  // The declaration admits 3 or more inputs; the op takes Y's scale and zero
  // point, then whole (tensor, scale, zero point) triples, at least one.
  for (int n : {3, 4, 6}) {
    std::vector<Value> inputs = {F(0.1f), U8(5)};
    for (int k = 2; k < n; ++k) inputs.push_back(k % 3 == 2 ? Tensor::FromVector<uint8_t>({1, 2}, {1, 2})
                                                 : k % 3 == 0 ? F(0.2f) : U8(3));
    r = RunOp(MakeNode("QLinearConcat", n, 1, {IntAttr("axis", 1)}, kMs), 1, inputs);
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(r.status().message().find("triples: got " + std::to_string(n) + " inputs"), std::string::npos)
        << r.status().ToString();
  }
  r = RunOp(MakeNode("QGemm", 6, 1, {}, kMs), 1,
            {Tensor::FromVector<uint8_t>({1, 2, 3}, {1, 3}), F(0.1f), U8(0),
             Tensor::FromVector<int8_t>({1, 2}, {2, 1}), F(0.1f), I8(0)});
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace nee::testing
