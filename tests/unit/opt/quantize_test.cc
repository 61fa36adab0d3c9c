// `nee quantize`'s rewrites (src/opt/quantize*.cc): the weight quantization's
// arithmetic, the nodes each mode writes, results near the float model's, and
// errors. The comparisons with ONNX Runtime's quantizer and ONNX Runtime
// running the output are in tests/python/test_quantize.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "opt/quantize.h"
#include "opt_test_util.h"

namespace nee {
namespace {

using namespace opt_test;

const Initializer* FindInit(const Model& m, const std::string& name) {
  for (const Initializer& i : m.graph.initializers)
    if (i.name == name) return &i;
  return nullptr;
}

TEST(QuantizeWeights, PerTensorRoundsHalfToEven) {
  // max|w| = 127: scale 1, so the quantized values are the weights rounded half to even.
  Tensor w = Floats({127.0f, -3.5f, 2.5f, 0.4f, -126.5f, 0.5f}, {3, 2});
  Tensor q, s;
  ASSERT_TRUE(quant::QuantizeWeightsSymmetric(w, false, false, &q, &s).ok());
  ASSERT_EQ(s.rank(), 0);
  EXPECT_EQ(s.data<float>()[0], 1.0f);
  const std::vector<int8_t> want = {127, -4, 2, 0, -126, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(q.data<int8_t>()[i], want[i]) << i;
}

TEST(QuantizeWeights, PerChannelScalesEachColumn) {
  Tensor w = Floats({2.0f, -0.5f, -1.0f, 0.25f, 0.0f, 0.0f}, {3, 2});
  Tensor q, s;
  ASSERT_TRUE(quant::QuantizeWeightsSymmetric(w, true, false, &q, &s).ok());
  ASSERT_EQ(s.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(s.data<float>()[0], static_cast<float>(2.0 / 127));
  EXPECT_EQ(s.data<float>()[1], static_cast<float>(0.5 / 127));
  const std::vector<int8_t> want = {127, -127, -64, 64, 0, 0};  // -63.5 -> -64, 63.5 -> 64 (even)
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(q.data<int8_t>()[i], want[i]) << i;
}

TEST(QuantizeWeights, ReduceRangeZerosAndNaN) {
  Tensor q, s;
  ASSERT_TRUE(quant::QuantizeWeightsSymmetric(Floats({64.0f, -64.0f, 31.5f, 1.0f}, {2, 2}), false, true, &q, &s).ok());
  EXPECT_EQ(s.data<float>()[0], 1.0f);
  EXPECT_EQ(q.data<int8_t>()[0], 64);
  EXPECT_EQ(q.data<int8_t>()[1], -64);
  EXPECT_EQ(q.data<int8_t>()[2], 32);
  // All zero: a scale of 1 (none is usable), every value 0.
  ASSERT_TRUE(quant::QuantizeWeightsSymmetric(Floats({0, 0, 0, 0}, {2, 2}), true, false, &q, &s).ok());
  EXPECT_EQ(s.data<float>()[0], 1.0f);
  EXPECT_EQ(s.data<float>()[1], 1.0f);
  Status st = quant::QuantizeWeightsSymmetric(Floats({1, NAN, 0, 0}, {2, 2}), false, false, &q, &s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("NaN"), std::string::npos);
  st = quant::QuantizeWeightsSymmetric(Floats({1, 2}, {2}), false, false, &q, &s);
  EXPECT_FALSE(st.ok());
}

// x[4,8] -> MatMul(W1) -> Relu -> Gemm(transB, alpha 0.5, beta 2, C) -> y
ModelBuilder Mlp() {
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({4, 8}))
      .Init("W1", Random({8, 6}, 3))
      .Init("W2t", Random({5, 6}, 4))
      .Init("C", Random({5}, 5))
      .Op("MatMul", {"x", "W1"}, {"h"})
      .Op("Relu", {"h"}, {"r"})
      .Op("Gemm", {"r", "W2t", "C"}, {"y"},
          {IntAttr("transB", 1), FloatAttr("alpha", 0.5f), FloatAttr("beta", 2.0f)})
      .Output("y");
  return b;
}

TEST(QuantizeDynamic, WritesIntegerProductsAndStaysClose) {
  ModelBuilder b = Mlp();
  Model m = b.model;
  QuantizeOptions options;
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->converted, (std::vector<std::string>{"MatMul0", "Gemm2"}));
  EXPECT_EQ(OpTypes(m), (Ops{"DynamicQuantizeLinear", "Mul", "MatMulInteger", "Cast", "Mul", "Relu",
                             "DynamicQuantizeLinear", "Mul", "MatMulInteger", "Cast", "Mul", "Add"}));
  // The float weights are gone; the transposed Gemm weight is [K, N].
  EXPECT_EQ(FindInit(m, "W1"), nullptr);
  EXPECT_EQ(FindInit(m, "W2t"), nullptr);
  ASSERT_NE(FindInit(m, "W2t_Transposed_quantized"), nullptr);
  EXPECT_EQ(FindInit(m, "W2t_Transposed_quantized")->tensor.dims(), (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(FindInit(m, "W1_quantized")->tensor.dtype(), DataType::kInt8);
  EXPECT_LT(r->weight_bytes_after, r->weight_bytes_before);

  const Tensor x = Random({4, 8}, 9);
  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  const Tensor got = RunAt(m, {{"x", Value(x)}}, 0);
  float scale = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) scale = std::max(scale, std::fabs(want.data<float>()[i]));
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 0.03f * scale) << i;
  // nee's optimized kernels give the reference kernels' answer.
  const Tensor fast = RunAt(m, {{"x", Value(x)}}, 99);
  for (int64_t i = 0; i < want.num_elements(); ++i) EXPECT_NEAR(fast.data<float>()[i], got.data<float>()[i], 1e-5f);
}

TEST(QuantizeDynamic, SharesOneQuantizationPerInputAndSkipsWhatItCannot) {
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 4}))
      .Input("w_in", ShapeFromDims({4, 3}))
      .Init("Wa", Random({4, 3}, 1))
      .Init("Wb", Random({4, 3}, 2))
      .Op("MatMul", {"x", "Wa"}, {"a"})
      .Op("MatMul", {"x", "Wb"}, {"b"})
      .Op("MatMul", {"x", "w_in"}, {"c"})
      .Op("Gemm", {"x", "Wa"}, {"d"}, {IntAttr("transA", 1)})
      .Output("a")
      .Output("b")
      .Output("c");
  b.model.graph.nodes.pop_back();  // (transA would not type-check with these shapes)
  Model m = b.model;
  QuantizeOptions options;
  options.exclude = {"MatMul1"};
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->converted, (std::vector<std::string>{"MatMul0"}));
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_EQ(r->skipped[0], "node 'MatMul1' (MatMul): excluded");
  EXPECT_NE(r->skipped[1].find("B 'w_in' is not a constant initializer"), std::string::npos);
  size_t dql = 0;
  for (const Node& n : m.graph.nodes) dql += n.op_type == "DynamicQuantizeLinear";
  EXPECT_EQ(dql, 1u);
  EXPECT_NE(FindInit(m, "Wb"), nullptr);  // still read by the excluded node
}

TEST(QuantizeDynamic, LooksThroughIdentityCopiesOfWeights) {
  // Two layers sharing one weight, the second through Identity (as PyTorch exports it).
  ModelBuilder b(17);
  b.Input("x", ShapeFromDims({2, 4}))
      .Init("W", Random({4, 4}, 1))
      .Op("Identity", {"W"}, {"W_copy"})
      .Op("MatMul", {"x", "W"}, {"h"})
      .Op("MatMul", {"h", "W_copy"}, {"y"})
      .Output("y");
  Model m = b.model;
  auto r = QuantizeModel(m, QuantizeOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->converted.size(), 2u);
  for (const Node& n : m.graph.nodes) EXPECT_NE(n.op_type, "Identity");
  EXPECT_EQ(FindInit(m, "W"), nullptr);
  size_t quantized = 0;
  for (const Initializer& i : m.graph.initializers) quantized += i.tensor.dtype() == DataType::kInt8 && i.tensor.rank() == 2;
  EXPECT_EQ(quantized, 1u);  // one int8 copy, shared
}

TEST(QuantizeDynamic, Errors) {
  Model m = Mlp().model;
  QuantizeOptions options;
  options.exclude = {"no_such_node"};
  auto r = QuantizeModel(m, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no node named 'no_such_node'"), std::string::npos);

  ModelBuilder old(10);
  old.Input("x", ShapeFromDims({2, 4})).Init("W", Random({4, 3}, 1)).Op("MatMul", {"x", "W"}, {"y"}).Output("y");
  r = QuantizeModel(old.model, QuantizeOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("opset 11"), std::string::npos);

  EXPECT_FALSE(ParseQuantizeMode("int3").ok());
  EXPECT_EQ(ParseQuantizeMode("int4").value(), QuantizeMode::kInt4);
  EXPECT_EQ(ParseQuantizeMode("fp16").value(), QuantizeMode::kFloat16);
  auto missing = QuantizeModelFile("/nonexistent/model.onnx", "/tmp/never_written.onnx", QuantizeOptions{});
  EXPECT_FALSE(missing.ok());
}

TEST(QuantizeFloat16, CastsAtTheEdgesOnly) {
  ModelBuilder b = Mlp();
  Model m = b.model;
  QuantizeOptions options;
  options.mode = QuantizeMode::kFloat16;
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(OpTypes(m), (Ops{"Cast", "MatMul", "Relu", "Gemm", "Cast"}));
  EXPECT_EQ(r->casts_added, 2u);
  for (const Initializer& i : m.graph.initializers) EXPECT_EQ(i.tensor.dtype(), DataType::kFloat16) << i.name;
  EXPECT_EQ(m.graph.nodes.back().outputs[0], "y");
  EXPECT_EQ(r->weight_bytes_after * 2, r->weight_bytes_before);

  const Tensor x = Random({4, 8}, 9);
  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  const Tensor got = RunAt(m, {{"x", Value(x)}}, 0);
  ASSERT_EQ(got.dtype(), DataType::kFloat);
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 5e-3f * (1 + std::fabs(want.data<float>()[i])));
}

TEST(QuantizeFloat16, ShapeComputationsStayFloatButSlicedWeightsDoNot) {
  // Shape -> Cast(float) -> Mul -> Cast(int64) computes a shape (kept float32); a Slice of a float weight
  // whose end comes from a shape is data (float16).
  ModelBuilder b(13);
  b.Input("x", ShapeFromDims({2, 3}))
      .Init("pos", Random({8, 3}, 2))
      .Init("k", Floats({1}, {1}))
      .Init("zero", Ints({0}))
      .Op("Shape", {"x"}, {"s"})
      .Op("Cast", {"s"}, {"sf"}, {IntAttr("to", 1)})
      .Op("Mul", {"sf", "k"}, {"sk"})
      .Op("Cast", {"sk"}, {"si"}, {IntAttr("to", 7)})
      .Op("Slice", {"si", "zero", "k_end"}, {"rows"})
      .Op("Slice", {"pos", "zero", "rows"}, {"p"})
      .Op("Add", {"x", "p"}, {"y"})
      .Output("y");
  b.model.graph.initializers.push_back({"k_end", Ints({1}), ""});
  Model m = b.model;
  QuantizeOptions options;
  options.mode = QuantizeMode::kFloat16;
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FindInit(m, "k")->tensor.dtype(), DataType::kFloat);
  EXPECT_EQ(FindInit(m, "pos")->tensor.dtype(), DataType::kFloat16);
  bool kept_mul = false;
  for (const std::string& s : r->skipped) kept_mul |= s == "node 'Mul2' (Mul): computes a shape";
  EXPECT_TRUE(kept_mul);
  const Tensor x = Random({2, 3}, 4);
  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  const Tensor got = RunAt(m, {{"x", Value(x)}}, 0);
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 2e-3f * (1 + std::fabs(want.data<float>()[i])));
}

TEST(QuantizeFloat16, ExcludedAndFixedTypeInputsStayFloat) {
  ModelBuilder b(13);
  b.Input("x", ShapeFromDims({1, 1, 2, 2}))
      .Init("scales", Floats({1, 1, 2, 2}, {4}))
      .Init("k", Floats({3}, {}))
      .Op("Resize", {"x", "", "scales"}, {"up"})
      .Op("Mul", {"up", "k"}, {"y"})
      .Output("y");
  Model m = b.model;
  QuantizeOptions options;
  options.mode = QuantizeMode::kFloat16;
  options.exclude = {"Mul1"};
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(FindInit(m, "scales")->tensor.dtype(), DataType::kFloat);
  EXPECT_EQ(FindInit(m, "k")->tensor.dtype(), DataType::kFloat);
  EXPECT_EQ(OpTypes(m), (Ops{"Cast", "Resize", "Cast", "Mul"}));
  const Tensor x = Floats({1, 2, 3, 4}, {1, 1, 2, 2});
  ExpectNear(RunAt(m, {{"x", Value(x)}}, 0), {1, 1, 4, 4},
             {3, 3, 6, 6, 3, 3, 6, 6, 9, 9, 12, 12, 9, 9, 12, 12});
}

}  // namespace
}  // namespace nee

namespace nee {
namespace {

using namespace opt_test;

TEST(QuantizeStatic, ActivationParametersAsOrtComputesThem) {
  float s = 0;
  uint8_t z = 0;
  quant::ActivationScaleZeroPoint(-1.0f, 3.0f, false, &s, &z);
  EXPECT_EQ(s, static_cast<float>(4.0 / 255));
  EXPECT_EQ(z, 64);  // round(1 / (4 / 255)) = round(63.75)
  quant::ActivationScaleZeroPoint(0.5f, 2.0f, false, &s, &z);  // widened to [0, 2]
  EXPECT_EQ(s, static_cast<float>(2.0 / 255));
  EXPECT_EQ(z, 0);
  quant::ActivationScaleZeroPoint(-2.0f, -1.0f, false, &s, &z);  // widened to [-2, 0]
  EXPECT_EQ(z, 255);
  quant::ActivationScaleZeroPoint(-1.0f, 3.0f, true, &s, &z);  // [-3, 3]
  EXPECT_EQ(s, static_cast<float>(6.0 / 255));
  EXPECT_EQ(z, 128);
  quant::ActivationScaleZeroPoint(0.0f, 0.0f, false, &s, &z);
  EXPECT_EQ(s, 1.0f);
  EXPECT_EQ(z, 0);
}

TEST(QuantizeStatic, WeightsPerAxis) {
  // [2, 1, 1, 2]: channel 0 max 2, channel 1 max 0.5.
  Tensor w = Floats({2.0f, -1.0f, 0.25f, -0.5f}, {2, 1, 1, 2});
  Tensor q, s;
  ASSERT_TRUE(quant::QuantizeWeightsPerAxis(w, 0, false, &q, &s).ok());
  ASSERT_EQ(s.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(s.data<float>()[0], static_cast<float>(2.0 / 127));
  EXPECT_EQ(s.data<float>()[1], static_cast<float>(0.5 / 127));
  const std::vector<int8_t> want = {127, -64, 64, -127};  // -63.5 -> -64, 63.5 -> 64
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(q.data<int8_t>()[i], want[i]) << i;
  ASSERT_TRUE(quant::QuantizeWeightsPerAxis(w, -1, false, &q, &s).ok());
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(q.data<int8_t>()[2], 16);  // 0.25 / (2 / 127) = 15.875
  EXPECT_FALSE(quant::QuantizeWeightsPerAxis(Floats({1, NAN}, {2}), -1, false, &q, &s).ok());
  EXPECT_FALSE(quant::QuantizeWeightsPerAxis(w, 4, false, &q, &s).ok());
  // reduce_range (ONNX Runtime's: qmax 64): scale max / 64, values in [-64, 64].
  ASSERT_TRUE(quant::QuantizeWeightsPerAxis(w, 0, true, &q, &s).ok());
  EXPECT_EQ(s.data<float>()[0], static_cast<float>(2.0 / 64));
  EXPECT_EQ(s.data<float>()[1], static_cast<float>(0.5 / 64));
  const std::vector<int8_t> want7 = {64, -32, 32, -64};
  for (size_t i = 0; i < want7.size(); ++i) EXPECT_EQ(q.data<int8_t>()[i], want7[i]) << i;
}

// x[4,8] -> MatMul(W1) -> Relu -> Gemm(transB, C) -> y
ModelBuilder StaticMlp() {
  ModelBuilder b(13);
  b.Input("x", ShapeFromDims({4, 8}))
      .Init("W1", Random({8, 6}, 3))
      .Init("W2t", Random({5, 6}, 4))
      .Init("C", Random({5}, 5))
      .Op("MatMul", {"x", "W1"}, {"h"})
      .Op("Relu", {"h"}, {"r"})
      .Op("Gemm", {"r", "W2t", "C"}, {"y"}, {IntAttr("transB", 1)})
      .Output("y");
  return b;
}

TEST(QuantizeStatic, WritesQdqPairsAndStaysClose) {
  ModelBuilder b = StaticMlp();
  Model m = b.model;
  QuantizeOptions options;
  options.mode = QuantizeMode::kStatic;
  options.per_channel = true;
  Model listed = b.model;
  auto tensors = quant::StaticCalibrationTensors(listed, options);
  ASSERT_TRUE(tensors.ok()) << tensors.status().ToString();
  EXPECT_EQ(*tensors, (std::vector<std::string>{"x", "h", "r", "y"}));
  // The ranges on the input used below (MinMax calibration on one sample).
  const Tensor x = Random({4, 8}, 9);
  for (const std::string& name : *tensors) {
    Model probe = b.model;
    probe.graph.outputs = {ValueInfo{name, TypeInfo::Tensor(DataType::kFloat), "", {}}};
    const Tensor t = name == "x" ? x : RunAt(probe, {{"x", Value(x)}}, 0);
    QuantizeOptions::Range range{t.data<float>()[0], t.data<float>()[0]};
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      range.min = std::min(range.min, t.data<float>()[i]);
      range.max = std::max(range.max, t.data<float>()[i]);
    }
    options.ranges[name] = range;
  }
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->converted, (std::vector<std::string>{"MatMul0", "Gemm2"}));
  // The MatMul's output h is read by the Relu alone, and r's zero point is 0: h is not quantized, r is
  // (Q(Relu(h)) == Q(h)), as ONNX Runtime's quantizer does with a Relu it quantizes.
  EXPECT_EQ(OpTypes(m), (Ops{"DequantizeLinear", "QuantizeLinear", "DequantizeLinear", "MatMul", "Relu",
                               "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm",
                               "QuantizeLinear", "DequantizeLinear"}));
  EXPECT_EQ(FindInit(m, "h_scale"), nullptr);
  ASSERT_NE(FindInit(m, "r_zero_point"), nullptr);
  EXPECT_EQ(FindInit(m, "r_zero_point")->tensor.data<uint8_t>()[0], 0);
  // The graph output keeps its name, written by the last DequantizeLinear.
  EXPECT_EQ(m.graph.nodes.back().outputs[0], "y");
  EXPECT_EQ(FindInit(m, "W1"), nullptr);
  EXPECT_EQ(FindInit(m, "C"), nullptr);
  ASSERT_NE(FindInit(m, "C_quantized"), nullptr);
  EXPECT_EQ(FindInit(m, "C_quantized")->tensor.dtype(), DataType::kInt32);
  EXPECT_EQ(FindInit(m, "W1_scale")->tensor.dims(), (std::vector<int64_t>{6}));   // axis 1 of [K, N]
  EXPECT_EQ(FindInit(m, "W2t_scale")->tensor.dims(), (std::vector<int64_t>{5}));  // axis 0 of transB's [N, K]

  const Tensor want = RunAt(b.model, {{"x", Value(x)}}, 0);
  const Tensor got = RunAt(m, {{"x", Value(x)}}, 0);
  float scale = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) scale = std::max(scale, std::fabs(want.data<float>()[i]));
  for (int64_t i = 0; i < want.num_elements(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 0.03f * scale) << i;
  const Tensor fast = RunAt(m, {{"x", Value(x)}}, 99);
  for (int64_t i = 0; i < want.num_elements(); ++i) EXPECT_NEAR(fast.data<float>()[i], got.data<float>()[i], 1e-4f);
}

// x[1,2,5,5] -> Conv(3 channels, 3x3, pad 1, B) -> c -> `activation` (c -> a) -> Conv(2, 1x1) -> y
ModelBuilder ConvActivationConv(const std::function<void(ModelBuilder&)>& activation) {
  ModelBuilder b(13);
  b.Input("x", ShapeFromDims({1, 2, 5, 5}))
      .Init("W1", Random({3, 2, 3, 3}, 3))
      .Init("B1", Random({3}, 4))
      .Init("W2", Random({2, 3, 1, 1}, 5))
      .Op("Conv", {"x", "W1", "B1"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1})});
  activation(b);
  b.Op("Conv", {"a", "W2"}, {"y"}).Output("y");
  return b;
}

std::function<void(ModelBuilder&)> ClipActivation(float lo, float hi) {
  return [lo, hi](ModelBuilder& b) {
    b.Init("lo", Scalar(lo)).Init("hi", Scalar(hi)).Op("Clip", {"c", "lo", "hi"}, {"a"});
  };
}

// Quantizes with hand-given ranges (the choice depends on them alone); the op types written.
Ops QuantizedOps(ModelBuilder b, std::map<std::string, QuantizeOptions::Range> ranges, bool symmetric = false) {
  QuantizeOptions options;
  options.mode = QuantizeMode::kStatic;
  options.symmetric_activations = symmetric;
  options.ranges = std::move(ranges);
  Model m = b.model;
  auto r = QuantizeModel(m, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return OpTypes(m);
}

// DQ(W1), Q/DQ(x), DQ(B1), Conv, ...
const Ops kActivationQuantized = {"DequantizeLinear", "QuantizeLinear", "DequantizeLinear", "DequantizeLinear",
                                  "Conv",             "ACT",            "QuantizeLinear",   "DequantizeLinear",
                                  "DequantizeLinear", "Conv",           "QuantizeLinear",   "DequantizeLinear"};
const Ops kBothQuantized = {"DequantizeLinear", "QuantizeLinear",   "DequantizeLinear", "DequantizeLinear",
                            "Conv",             "QuantizeLinear",   "DequantizeLinear", "ACT",
                            "QuantizeLinear",   "DequantizeLinear", "DequantizeLinear", "Conv",
                            "QuantizeLinear",   "DequantizeLinear"};
Ops WithActivation(Ops ops, const std::string& act) {
  std::replace(ops.begin(), ops.end(), std::string("ACT"), act);
  return ops;
}

TEST(QuantizeStatic, QuantizesAfterTheActivationWhenQClampsAsItDoes) {
  const std::map<std::string, QuantizeOptions::Range> ranges = {
      {"x", {-3, 3}}, {"c", {-8, 9}}, {"a", {0, 6}}, {"y", {-4, 5}}};
  auto relu = [](ModelBuilder& b) { b.Op("Relu", {"c"}, {"a"}); };
  // Calibration measures both c and a: which one is quantized depends on a's range.
  Model listed = ConvActivationConv(ClipActivation(0, 6)).model;
  QuantizeOptions options;
  options.mode = QuantizeMode::kStatic;
  auto tensors = quant::StaticCalibrationTensors(listed, options);
  ASSERT_TRUE(tensors.ok()) << tensors.status().ToString();
  EXPECT_EQ(*tensors, (std::vector<std::string>{"x", "c", "a", "y"}));

  EXPECT_EQ(QuantizedOps(ConvActivationConv(relu), ranges), WithActivation(kActivationQuantized, "Relu"));
  // Relu6 with a's range [0, 6]: scale 6/255, Q(0) = 0, Q(6) = 255.
  EXPECT_EQ(QuantizedOps(ConvActivationConv(ClipActivation(0, 6)), ranges),
            WithActivation(kActivationQuantized, "Clip"));
  // A range that never reaches the bound: Q(6) saturates anyway.
  auto narrow = ranges;
  narrow["a"] = {0, 4};
  EXPECT_EQ(QuantizedOps(ConvActivationConv(ClipActivation(0, 6)), narrow),
            WithActivation(kActivationQuantized, "Clip"));
}

TEST(QuantizeStatic, KeepsTheOutputsPairWhenQCannotStandForTheActivation) {
  const std::map<std::string, QuantizeOptions::Range> ranges = {
      {"x", {-3, 3}}, {"c", {-8, 9}}, {"a", {1, 6}}, {"y", {-4, 5}}};
  auto relu = [](ModelBuilder& b) { b.Op("Relu", {"c"}, {"a"}); };
  // Clip(1, 6): a's range widened to [0, 6] puts 1 at 43, not 0.
  EXPECT_EQ(QuantizedOps(ConvActivationConv(ClipActivation(1, 6)), ranges), WithActivation(kBothQuantized, "Clip"));
  // Symmetric activations: zero point 128, Q(0) = 128.
  EXPECT_EQ(QuantizedOps(ConvActivationConv(relu), ranges, /*symmetric=*/true),
            WithActivation(kBothQuantized, "Relu"));
  // c read by the Relu and a Neg; c a graph output.
  ModelBuilder two = ConvActivationConv(relu);
  two.Op("Neg", {"c"}, {"n"}).Output("n");
  Ops ops = QuantizedOps(two, ranges);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizeLinear"), 4) << ::testing::PrintToString(ops);
  ModelBuilder out = ConvActivationConv(relu);
  out.Output("c");
  ops = QuantizedOps(out, ranges);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizeLinear"), 4) << ::testing::PrintToString(ops);
  // No range for a: c's pair, the old placement (a is still the second Conv's input: no range, not quantized).
  auto no_a = ranges;
  no_a.erase("a");
  ops = QuantizedOps(ConvActivationConv(relu), no_a);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QuantizeLinear"), 2) << ::testing::PrintToString(ops);
}

TEST(QuantizeStatic, MissingRangesExclusionAndOpset) {
  ModelBuilder b = StaticMlp();
  QuantizeOptions options;
  options.mode = QuantizeMode::kStatic;
  options.exclude = {"Gemm2"};
  options.ranges = {{"x", {-3, 3}}};  // no range for h: MatMul0 stays float
  Model m = b.model;
  auto r = QuantizeModel(m, options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->converted.empty());
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_NE(r->skipped[0].find("no calibrated range for 'h'"), std::string::npos) << r->skipped[0];
  EXPECT_NE(r->skipped[1].find("excluded"), std::string::npos);
  EXPECT_EQ(OpTypes(m), (Ops{"MatMul", "Relu", "Gemm"}));

  ModelBuilder old(12);
  old.Input("x", ShapeFromDims({2, 3})).Init("W", Random({3, 2}, 1)).Op("MatMul", {"x", "W"}, {"y"}).Output("y");
  options = QuantizeOptions();
  options.mode = QuantizeMode::kStatic;
  options.per_channel = true;
  Model om = old.model;
  auto st = QuantizeModel(om, options);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("opset 13"), std::string::npos) << st.status().message();
  options.ranges = {{"x", {-1, 1}}, {"y", {-1, 1}}, {"bad", {1, -1}}};
  options.per_channel = false;
  om = old.model;
  st = QuantizeModel(om, options);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("'bad'"), std::string::npos);
}

}  // namespace
}  // namespace nee
