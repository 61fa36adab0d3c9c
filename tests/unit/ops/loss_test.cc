// SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and the
// ai.onnx.preview.training optimizers. Expected values were computed with
// onnx.reference by misc_expected_gen.py (section "loss").
#include <cmath>

#include "ir/float_formats.h"
#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

// (arange(n) % mod - mod // 2) * 0.5, reshaped: the generator's `pattern`.
Value Pattern(std::vector<int64_t> dims, int mod = 7) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % mod - mod / 2) * 0.5f;
  return V<float>(v, std::move(dims));
}

// np.arange(12).reshape(3, 4) * 0.3 - 1.4 in double.
Value Nll34() {
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = i * 0.3 - 1.4;
  return V<double>(v, {3, 4});
}

void ExpectError(const Result<OpRun>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("node 'test'"), std::string::npos) << r.status().message();
}

TEST(LossSoftmaxCrossEntropy, MeanWithWeightsIgnoreIndexAndLogProb) {
  Value labels = V<int64_t>({0, 2, 1, -1}, {2, 2});
  Value weights = V<float>({0.5f, 1.0f, 2.0f}, {3});
  for (int opset : {12, 13}) {
    auto r = RunOp(MakeNode("SoftmaxCrossEntropyLoss", 3, 2, {IntAttr("ignore_index", -1)}), opset,
                   {Pattern({2, 3, 2}), labels, weights});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {}, {1.36725211f});
    ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 3, 2},
                            {-2.40760589f, -2.40760589f, -1.40760601f, -1.40760601f, -0.407605976f, -0.407605976f,
                             -0.266367882f, -2.40760589f, -2.76636767f, -1.40760601f, -1.76636791f, -0.407605976f});
  }
}

TEST(LossSoftmaxCrossEntropy, NoneKeepsLabelShapeAndZeroesIgnored) {
  auto r = RunOp(MakeNode("SoftmaxCrossEntropyLoss", 2, 1,
                          {IntAttr("ignore_index", -1), StringAttr("reduction", "none")}),
                 13, {Pattern({2, 3, 2}), V<int64_t>({0, 2, 1, -1}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2}, {2.40760589f, 0.407605976f, 2.76636767f, 0.0f});
}

TEST(LossNegativeLogLikelihood, ReductionsAndInt32Labels) {
  Value target = V<int32_t>({3, 0, 1}, {3});
  Value weights = V<double>({1, 2, 3, 4}, {4});
  auto r = RunOp(MakeNode("NegativeLogLikelihoodLoss", 2, 1, {StringAttr("reduction", "none")}), 13, {Nll34(), target});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {3}, {0.5, 0.2, -1.3});
  r = RunOp(MakeNode("NegativeLogLikelihoodLoss", 2, 1), 12, {Nll34(), target});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {}, {-0.2});
  r = RunOp(MakeNode("NegativeLogLikelihoodLoss", 3, 1, {StringAttr("reduction", "sum")}), 22, {Nll34(), target, weights});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {}, {-0.4});
  // mean divides by the weights of the samples that are not ignored.
  r = RunOp(MakeNode("NegativeLogLikelihoodLoss", 3, 1, {IntAttr("ignore_index", 0)}), 13, {Nll34(), target, weights});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {}, {-0.1});
}

TEST(LossSoftmaxCrossEntropy, Float16ComputesThroughFloat) {
  Tensor x = Tensor::Allocate(DataType::kFloat16, {2, 3}).value();
  const std::vector<float> values = {1, 2, 3, 0.5f, 0, -1};
  for (size_t i = 0; i < values.size(); ++i) x.data<uint16_t>()[i] = FloatToHalf(values[i]);
  auto r = RunOp(MakeNode("SoftmaxCrossEntropyLoss", 2, 1, {StringAttr("reduction", "none")}), 13,
                 {Value(x), V<int64_t>({2, 0}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& loss = r->outputs[0].tensor();
  ASSERT_EQ(loss.dtype(), DataType::kFloat16);
  ASSERT_EQ(loss.dims(), (std::vector<int64_t>{2}));
  // onnx.reference rounds every intermediate to float16; nee rounds once, so
  // the results may differ by a float16 ulp (2^-12 here).
  EXPECT_NEAR(HalfToFloat(loss.data<uint16_t>()[0]), 0.407226562f, 5e-4);
  EXPECT_NEAR(HalfToFloat(loss.data<uint16_t>()[1]), 0.604492188f, 5e-4);
}

TEST(LossNegativeLogLikelihood, RejectsBadLabelsAndShapes) {
  // A label outside [0, C) that is not ignore_index is an error naming input 1.
  ExpectError(RunOp(MakeNode("NegativeLogLikelihoodLoss", 2, 1), 13, {Nll34(), V<int64_t>({3, 4, 0}, {3})}), "input 1");
  ExpectError(RunOp(MakeNode("NegativeLogLikelihoodLoss", 2, 1, {IntAttr("ignore_index", 7)}), 13,
                    {Nll34(), V<int64_t>({3, -1, 0}, {3})}),
              "not a class index");
  ExpectError(RunOp(MakeNode("NegativeLogLikelihoodLoss", 2, 1), 13, {Nll34(), V<int64_t>({0, 1}, {2})}), "input 1");
  ExpectError(RunOp(MakeNode("NegativeLogLikelihoodLoss", 3, 1), 13,
                    {Nll34(), V<int64_t>({0, 1, 2}, {3}), V<double>({1, 2}, {2})}),
              "input 2");
  ExpectError(RunOp(MakeNode("SoftmaxCrossEntropyLoss", 2, 1, {StringAttr("reduction", "avg")}), 13,
                    {Pattern({2, 3}), V<int64_t>({0, 1}, {2})}),
              "reduction");
}

TEST(LossTrainingOptimizers, AdagradAdamMomentum) {
  const char* kDomain = "ai.onnx.preview.training";
  Value r = V<float>({0.1f}, {});
  Value t = V<int64_t>({2}, {});
  Value x = V<float>({1.0f, -2.0f, 3.0f}, {3});
  Value g = V<float>({0.5f, 0.25f, -1.0f}, {3});
  Value v = V<float>({0.1f, 0.2f, 0.3f}, {3});
  Value h = V<float>({0.4f, 0.5f, 0.6f}, {3});
  auto run = RunOp(MakeNode("Adagrad", 5, 2,
                            {FloatAttr("decay_factor", 0.1f), FloatAttr("epsilon", 1e-5f), FloatAttr("norm_coefficient", 0.01f)},
                            kDomain),
                   1, {r, t, x, g, h});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3}, {0.947690725f, -2.02577615f, 3.06511784f});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3}, {0.660099983f, 0.552900016f, 1.54089999f});
  run = RunOp(MakeNode("Adam", 6, 3,
                       {FloatAttr("alpha", 0.9f), FloatAttr("beta", 0.99f), FloatAttr("epsilon", 1e-6f),
                        FloatAttr("norm_coefficient", 0.01f), FloatAttr("norm_coefficient_post", 0.02f)},
                       kDomain),
              1, {r, t, x, g, v, h});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3}, {0.963750222f, -1.98098265f, 2.92379546f});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3}, {0.141000003f, 0.202999994f, 0.172999978f});
  ExpectTensorNear<float>(run->outputs[2].tensor(), {3}, {0.398600996f, 0.495528996f, 0.603409052f});
  run = RunOp(MakeNode("Momentum", 5, 2,
                       {FloatAttr("alpha", 0.9f), FloatAttr("beta", 0.5f), StringAttr("mode", "nesterov"),
                        FloatAttr("norm_coefficient", 0.01f)},
                       kDomain),
              1, {r, t, x, g, v});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3}, {0.917949975f, -2.04955006f, 3.11634994f});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3}, {0.344999999f, 0.294999987f, -0.215000004f});
  // Mismatched state shape is an error naming the input.
  ExpectError(RunOp(MakeNode("Adagrad", 5, 2, {}, kDomain), 1, {r, t, x, g, V<float>({1, 2}, {2})}), "input 4");
}

}  // namespace
}  // namespace nee::testing
