// Tests of the ai.onnx.ml linear and preprocessing operators (ops/ml_linear.cc).
// Unless stated otherwise, expected values were computed by running the same
// single-node model with onnxruntime 1.32 (python), printed with 9 digits
// (map inputs fed as python dicts).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace nee::testing {
namespace {

const char* kMl = "ai.onnx.ml";

Tensor Features() {
  return Tensor::FromVector<float>({1, 2, -1, 0.5f, 0, 0, 3, -2}, {4, 2});
}

std::vector<std::string> Strings(const Tensor& t) {
  return std::vector<std::string>(t.data<std::string>(), t.data<std::string>() + t.num_elements());
}

// ---- LinearClassifier ----

Node MultiClassifier(const std::string& post_transform) {
  return MakeNode("LinearClassifier", 1, 2,
                  {FloatsAttr("coefficients", {0.5f, -0.25f, -1.0f, 0.75f, 0.2f, 0.1f}),
                   FloatsAttr("intercepts", {0.1f, -0.2f, 0.0f}), IntsAttr("classlabels_ints", {5, 6, 7}),
                   StringAttr("post_transform", post_transform)},
                  kMl);
}

TEST(MlLinearClassifierTest, MultiClassNone) {
  auto run = RunOp(MultiClassifier("NONE"), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {7, 6, 5, 5});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 3},
                          {0.100000001f, 0.300000012f, 0.400000006f, -0.524999976f, 1.17499995f, -0.150000006f,
                           0.100000001f, -0.200000003f, 0.f, 2.0999999f, -4.69999981f, 0.400000036f});
}

TEST(MlLinearClassifierTest, MultiClassSoftmax) {
  auto run = RunOp(MultiClassifier("SOFTMAX"), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {7, 6, 5, 5});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 3},
                          {0.280013084f, 0.34200877f, 0.377978146f, 0.126120284f, 0.690375745f, 0.183503926f,
                           0.377978146f, 0.280013084f, 0.34200877f, 0.844739199f, 0.000940849714f, 0.154319957f});
}

TEST(MlLinearClassifierTest, MultiClassLogistic) {
  auto run = RunOp(MultiClassifier("LOGISTIC"), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 3},
                          {0.524979174f, 0.574442506f, 0.598687649f, 0.371683836f, 0.764047623f, 0.462570161f,
                           0.524979174f, 0.450166017f, 0.5f, 0.890903234f, 0.00901329517f, 0.598687649f});
}

TEST(MlLinearClassifierTest, MultiClassSoftmaxZero) {
  // Row 3 has an exact zero score, which SOFTMAX_ZERO leaves at zero.
  auto run = RunOp(MultiClassifier("SOFTMAX_ZERO"), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 3},
                          {0.280013084f, 0.34200877f, 0.377978146f, 0.126120284f, 0.690375745f, 0.183503926f,
                           0.574442506f, 0.425557464f, 0.f, 0.844739199f, 0.000940849714f, 0.154319957f});
}

TEST(MlLinearClassifierTest, MultiClassProbitInsideDomain) {
  // Probit is defined on (0, 1): row 0's scores 0.1, 0.3, 0.4.
  auto run = RunOp(MultiClassifier("PROBIT"), 1, {Tensor::FromVector<float>({1, 2}, {1, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[1].tensor(), {1, 3}, {-1.28171289f, -0.524445891f, -0.253353506f}, 1e-4);
}

TEST(MlLinearClassifierTest, StringLabels) {
  Node node = MakeNode("LinearClassifier", 1, 2,
                       {FloatsAttr("coefficients", {0.5f, -0.25f, -1.0f, 0.75f, 0.2f, 0.1f}),
                        FloatsAttr("intercepts", {0.1f, -0.2f, 0.0f}), StringsAttr("classlabels_strings", {"a", "b", "c"})},
                       kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->outputs[0].tensor().dtype(), DataType::kString);
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"c", "b", "a", "a"}));
}

// One coefficient row and two labels: the binary form of skl2onnx/ORT.
Node BinaryClassifier(const std::string& post_transform) {
  return MakeNode("LinearClassifier", 1, 2,
                  {FloatsAttr("coefficients", {0.5f, -0.25f}), FloatsAttr("intercepts", {0.1f}),
                   IntsAttr("classlabels_ints", {3, 7}), StringAttr("post_transform", post_transform)},
                  kMl);
}

TEST(MlLinearClassifierTest, BinaryOneRowNone) {
  auto run = RunOp(BinaryClassifier("NONE"), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {7, 3, 7, 7});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 2},
                          {0.899999976f, 0.100000001f, 1.52499998f, -0.524999976f, 0.899999976f, 0.100000001f,
                           -1.0999999f, 2.0999999f});
}

TEST(MlLinearClassifierTest, BinaryOneRowLogistic) {
  auto run = RunOp(BinaryClassifier("LOGISTIC"), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {7, 3, 7, 7});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 2},
                          {0.475020826f, 0.524979174f, 0.628316164f, 0.371683836f, 0.475020826f, 0.524979174f,
                           0.109096825f, 0.890903175f});
}

TEST(MlLinearClassifierTest, BinaryOneRowStringLabels) {
  Node node = MakeNode("LinearClassifier", 1, 2,
                       {FloatsAttr("coefficients", {0.5f, -0.25f}), FloatsAttr("intercepts", {0.1f}),
                        StringsAttr("classlabels_strings", {"no", "yes"}), StringAttr("post_transform", "LOGISTIC")},
                       kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"yes", "no", "yes", "yes"}));
}

TEST(MlLinearClassifierTest, OneDimensionalInputIsOneRow) {
  auto run = RunOp(BinaryClassifier("NONE"), 1, {Tensor::FromVector<float>({3, -2}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {1}, {7});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {1, 2}, {-1.0999999f, 2.0999999f});
}

TEST(MlLinearClassifierTest, RejectsCoefficientsNotMatchingWidth) {
  auto run = RunOp(BinaryClassifier("NONE"), 1, {Tensor::FromVector<float>({1, 2, 3}, {1, 3})});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("coefficients"), std::string::npos) << run.status().message();
}

TEST(MlLinearClassifierTest, RejectsLabelCountMismatch) {
  Node node = MakeNode("LinearClassifier", 1, 2,
                       {FloatsAttr("coefficients", {1, 2, 3, 4, 5, 6}), IntsAttr("classlabels_ints", {0, 1})}, kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("classlabels_ints"), std::string::npos) << run.status().message();
}

TEST(MlLinearClassifierTest, RejectsUnknownPostTransform) {
  auto run = RunOp(BinaryClassifier("TANH"), 1, {Features()});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidModel);
}

TEST(MlLinearClassifierTest, RejectsInterceptCountMismatch) {
  Node node = MakeNode("LinearClassifier", 1, 2,
                       {FloatsAttr("coefficients", {1, 2}), FloatsAttr("intercepts", {1, 2, 3}),
                        IntsAttr("classlabels_ints", {0, 1})},
                       kMl);
  EXPECT_FALSE(RunOp(node, 1, {Features()}).ok());
}

// ---- LinearRegressor ----

TEST(MlLinearRegressorTest, TwoTargets) {
  Node node = MakeNode("LinearRegressor", 1, 1,
                       {FloatsAttr("coefficients", {0.5f, -0.25f, 1, 2}), FloatsAttr("intercepts", {1, -1}),
                        IntAttr("targets", 2)},
                       kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {4, 2}, {1, 4, 0.375f, -1, 1, -1, 3, -2});
}

TEST(MlLinearRegressorTest, Int64InputGivesFloat) {
  // By hand: [1,2] -> 0.5 - 0.5 + 1.5 = 1.5; [3,4] -> 1.5 - 1 + 1.5 = 2.
  Node node = MakeNode("LinearRegressor", 1, 1,
                       {FloatsAttr("coefficients", {0.5f, -0.25f}), FloatsAttr("intercepts", {1.5f})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 1}, {1.5f, 2.0f});
}

TEST(MlLinearRegressorTest, RejectsTargetsNotMatchingCoefficients) {
  Node node = MakeNode("LinearRegressor", 1, 1, {FloatsAttr("coefficients", {1, 2, 3, 4}), IntAttr("targets", 3)}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Features()}).ok());
}

// ---- Scaler, Normalizer, Binarizer, Imputer ----

TEST(MlScalerTest, PerFeature) {
  Node node = MakeNode("Scaler", 1, 1, {FloatsAttr("offset", {1, 0, -1}), FloatsAttr("scale", {2, 0.5f, 1})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<float>({1, 2, 3, -1, 0.5f, 4}, {2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 3}, {0, 1, 4, -4, 0.25f, 5});
}

TEST(MlScalerTest, SingleValueDoubleInput) {
  Node node = MakeNode("Scaler", 1, 1, {FloatsAttr("offset", {0.5f}), FloatsAttr("scale", {3})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<double>({1, 2, 3, -1, 0.5, 4}, {2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 3}, {1.5f, 4.5f, 7.5f, -4.5f, 0, 10.5f});
}

TEST(MlScalerTest, RejectsWrongOffsetCount) {
  Node node = MakeNode("Scaler", 1, 1, {FloatsAttr("offset", {1, 2}), FloatsAttr("scale", {1})}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<float>({1, 2, 3}, {1, 3})}).ok());
}

Tensor NormalizerInput() { return Tensor::FromVector<float>({1, -4, 2, -1, -2, -0.5f, 0, 0, 0}, {3, 3}); }

TEST(MlNormalizerTest, Max) {
  // ONNX Runtime divides by the row maximum (not the maximum magnitude).
  auto run = RunOp(MakeNode("Normalizer", 1, 1, {StringAttr("norm", "MAX")}, kMl), 1, {NormalizerInput()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 3}, {0.5f, -2, 1, 2, 4, 1, 0, 0, 0});
}

TEST(MlNormalizerTest, L1) {
  auto run = RunOp(MakeNode("Normalizer", 1, 1, {StringAttr("norm", "L1")}, kMl), 1, {NormalizerInput()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 3},
                          {0.14285715f, -0.5714286f, 0.2857143f, -0.2857143f, -0.5714286f, -0.14285715f, 0, 0, 0});
}

TEST(MlNormalizerTest, L2) {
  auto run = RunOp(MakeNode("Normalizer", 1, 1, {StringAttr("norm", "L2")}, kMl), 1, {NormalizerInput()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 3},
                          {0.2182179f, -0.8728716f, 0.4364358f, -0.4364358f, -0.8728716f, -0.2182179f, 0, 0, 0});
}

TEST(MlNormalizerTest, RejectsUnknownNorm) {
  EXPECT_FALSE(RunOp(MakeNode("Normalizer", 1, 1, {StringAttr("norm", "L3")}, kMl), 1, {NormalizerInput()}).ok());
}

TEST(MlBinarizerTest, Threshold) {
  // onnx.reference (x > threshold).
  auto run = RunOp(MakeNode("Binarizer", 1, 1, {FloatAttr("threshold", 1.0f)}, kMl), 1,
                   {Tensor::FromVector<float>({0.5f, 1.0f, 1.5f, -2, 3, 1.0001f}, {2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 3}, {0, 0, 1, 0, 1, 1});
}

TEST(MlImputerTest, ReplacesNaNPerFeature) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Node node = MakeNode("Imputer", 1, 1,
                       {FloatsAttr("imputed_value_floats", {10, 20, 30}), FloatAttr("replaced_value_float", nan)}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<float>({1, nan, 3, nan, 5, nan}, {2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 3}, {1, 20, 3, 10, 5, 30});
}

TEST(MlImputerTest, Int64Marker) {
  Node node = MakeNode("Imputer", 1, 1, {IntsAttr("imputed_value_int64s", {7}), IntAttr("replaced_value_int64", -1)}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<int64_t>({1, -1, -1, 4}, {2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {2, 2}, {1, 7, 7, 4});
}

TEST(MlImputerTest, RejectsWrongValueCount) {
  Node node = MakeNode("Imputer", 1, 1, {FloatsAttr("imputed_value_floats", {1, 2})}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<float>({1, 2, 3}, {1, 3})}).ok());
}

// ---- OneHotEncoder, ArrayFeatureExtractor, FeatureVectorizer ----

TEST(MlOneHotEncoderTest, Strings) {
  Node node = MakeNode("OneHotEncoder", 1, 1, {StringsAttr("cats_strings", {"a", "b", "c"})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<std::string>({"a", "c", "z", "b"}, {2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 2, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});
}

TEST(MlOneHotEncoderTest, Int64) {
  Node node = MakeNode("OneHotEncoder", 1, 1, {IntsAttr("cats_int64s", {4, 2})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<int64_t>({2, 4, 5}, {3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 2}, {0, 1, 1, 0, 0, 0});
}

TEST(MlOneHotEncoderTest, UnknownCategoryWithZerosOffFails) {
  Node node = MakeNode("OneHotEncoder", 1, 1, {IntsAttr("cats_int64s", {4, 2}), IntAttr("zeros", 0)}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<int64_t>({2, 4, 5}, {3})}).ok());
}

TEST(MlArrayFeatureExtractorTest, SelectsLastAxis) {
  Node node = MakeNode("ArrayFeatureExtractor", 2, 1, {}, kMl);
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  auto run = RunOp(node, 1, {Tensor::FromVector<float>(x, {3, 4}), Tensor::FromVector<int64_t>({3, 0}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3, 2}, {3, 0, 7, 4, 11, 8});
}

TEST(MlArrayFeatureExtractorTest, OneDimensionalStrings) {
  Node node = MakeNode("ArrayFeatureExtractor", 2, 1, {}, kMl);
  auto run = RunOp(node, 1,
                   {Tensor::FromVector<std::string>({"p", "q", "r"}, {3}), Tensor::FromVector<int64_t>({2, 2, 1}, {3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->outputs[0].tensor().dims(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"r", "r", "q"}));
}

TEST(MlArrayFeatureExtractorTest, RejectsOutOfRangeIndex) {
  Node node = MakeNode("ArrayFeatureExtractor", 2, 1, {}, kMl);
  std::vector<float> x(12, 1.f);
  for (int64_t bad : {4, -1}) {
    auto run = RunOp(node, 1, {Tensor::FromVector<float>(x, {3, 4}), Tensor::FromVector<int64_t>({bad}, {1})});
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.status().message().find("out of range"), std::string::npos) << run.status().message();
  }
}

TEST(MlFeatureVectorizerTest, CutsAndPads) {
  Node node = MakeNode("FeatureVectorizer", 3, 1, {IntsAttr("inputdimensions", {1, 3, 2})}, kMl);
  auto run = RunOp(node, 1,
                   {Tensor::FromVector<float>({1, 2}, {2, 1}), Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}),
                    Tensor::FromVector<float>({5, 6, 7, 8, 9, 10}, {2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 6}, {1, 1, 2, 0, 5, 6, 2, 3, 4, 0, 8, 9});
}

TEST(MlFeatureVectorizerTest, RejectsRowMismatch) {
  Node node = MakeNode("FeatureVectorizer", 2, 1, {IntsAttr("inputdimensions", {1, 1})}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<float>({1, 2}, {2, 1}), Tensor::FromVector<float>({1}, {1, 1})}).ok());
}

// ---- ZipMap ----

TEST(MlZipMapTest, Int64Labels) {
  Node node = MakeNode("ZipMap", 1, 1, {IntsAttr("classlabels_int64s", {10, 20, 30})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<float>({0.1f, 0.2f, 0.7f, 0.5f, 0.25f, 0.25f}, {2, 3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Value& out = run->outputs[0];
  ASSERT_TRUE(out.is_sequence());
  ASSERT_EQ(out.elements().size(), 2u);
  EXPECT_EQ(run->inferred[0].ToString(), "seq(map(int64,tensor(float)))");
  const Value& second = out.elements()[1];
  ASSERT_TRUE(second.is_map());
  ExpectTensorNear<int64_t>(second.map_keys(), {3}, {10, 20, 30});
  ExpectTensorNear<float>(second.map_values(), {3}, {0.5f, 0.25f, 0.25f});
  ExpectTensorNear<float>(out.elements()[0].map_values(), {3}, {0.1f, 0.2f, 0.7f});
}

TEST(MlZipMapTest, StringLabels) {
  Node node = MakeNode("ZipMap", 1, 1, {StringsAttr("classlabels_strings", {"cat", "dog"})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<float>({0.4f, 0.6f}, {1, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const Value& map = run->outputs[0].elements()[0];
  EXPECT_EQ(Strings(map.map_keys()), (std::vector<std::string>{"cat", "dog"}));
  ExpectTensorNear<float>(map.map_values(), {2}, {0.4f, 0.6f});
}

TEST(MlZipMapTest, RejectsLabelCountMismatch) {
  Node node = MakeNode("ZipMap", 1, 1, {IntsAttr("classlabels_int64s", {1, 2, 3})}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<float>({0.4f, 0.6f}, {1, 2})}).ok());
}

// ---- LabelEncoder ----

Tensor LetterInput() { return Tensor::FromVector<std::string>({"a", "b", "d", "c", "g"}, {5}); }

TEST(MlLabelEncoderTest, V1StringToInt) {
  Node node = MakeNode("LabelEncoder", 1, 1,
                       {StringsAttr("classes_strings", {"a", "b", "c"}), IntAttr("default_int64", 42)}, kMl);
  auto run = RunOp(node, 1, {LetterInput()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {5}, {0, 1, 42, 2, 42});
}

TEST(MlLabelEncoderTest, V1IntToString) {
  Node node = MakeNode("LabelEncoder", 1, 1, {StringsAttr("classes_strings", {"a", "b", "c"})}, kMl);
  auto run = RunOp(node, 1, {Tensor::FromVector<int64_t>({2, 0, 5, -1}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"c", "a", "_Unused", "_Unused"}));
}

TEST(MlLabelEncoderTest, V2FloatToStringNaNKeyDoesNotMatch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Node node = MakeNode("LabelEncoder", 1, 1,
                       {FloatsAttr("keys_floats", {0.5f, nan, 2.0f}), StringsAttr("values_strings", {"half", "nan", "two"}),
                        StringAttr("default_string", "?")},
                       kMl);
  auto run = RunOp(node, 2, {Tensor::FromVector<float>({2.0f, nan, 0.5f, 3}, {2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"two", "?", "half", "?"}));
}

TEST(MlLabelEncoderTest, V4FloatToStringNaNKeyMatches) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Node node = MakeNode("LabelEncoder", 1, 1,
                       {FloatsAttr("keys_floats", {0.5f, nan, 2.0f}), StringsAttr("values_strings", {"half", "nan", "two"}),
                        StringAttr("default_string", "?")},
                       kMl);
  auto run = RunOp(node, 4, {Tensor::FromVector<float>({2.0f, nan, 0.5f, 3}, {2, 2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"two", "nan", "half", "?"}));
}

TEST(MlLabelEncoderTest, V2IntToFloatDefaultIsNegativeZero) {
  Node node = MakeNode("LabelEncoder", 1, 1, {IntsAttr("keys_int64s", {1, 3}), FloatsAttr("values_floats", {0.25f, -1.5f})},
                       kMl);
  auto run = RunOp(node, 2, {Tensor::FromVector<int64_t>({3, 1, 2}, {3})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {3}, {-1.5f, 0.25f, -0.0f});
  EXPECT_TRUE(std::signbit(run->outputs[0].tensor().data<float>()[2]));
}

TEST(MlLabelEncoderTest, V4TensorMapping) {
  // The ONNX node test test_ai_onnx_ml_label_encoder_tensor_mapping.
  Node node = MakeNode("LabelEncoder", 1, 1,
                       {TensorAttr("keys_tensor", Tensor::FromVector<std::string>({"a", "b", "c"}, {3})),
                        TensorAttr("values_tensor", Tensor::FromVector<int16_t>({0, 1, 2}, {3})),
                        TensorAttr("default_tensor", Tensor::FromVector<int16_t>({42}, {1}))},
                       kMl);
  auto run = RunOp(node, 4, {LetterInput()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int16_t>(run->outputs[0].tensor(), {5}, {0, 1, 42, 2, 42});
}

TEST(MlLabelEncoderTest, V4IntToStringDefault) {
  Node node = MakeNode("LabelEncoder", 1, 1, {IntsAttr("keys_int64s", {7}), StringsAttr("values_strings", {"seven"})}, kMl);
  auto run = RunOp(node, 4, {Tensor::FromVector<int64_t>({7, 8}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"seven", "_Unused"}));
}

TEST(MlLabelEncoderTest, RejectsKeyValueCountMismatch) {
  Node node = MakeNode("LabelEncoder", 1, 1, {IntsAttr("keys_int64s", {1, 2}), FloatsAttr("values_floats", {1})}, kMl);
  EXPECT_FALSE(RunOp(node, 2, {Tensor::FromVector<int64_t>({1}, {1})}).ok());
}

TEST(MlLabelEncoderTest, RejectsInputTypeNotMatchingKeys) {
  Node node = MakeNode("LabelEncoder", 1, 1, {IntsAttr("keys_int64s", {1}), FloatsAttr("values_floats", {1})}, kMl);
  EXPECT_FALSE(RunOp(node, 2, {LetterInput()}).ok());
}

TEST(MlLabelEncoderTest, RejectsBadDefaultTensor) {
  Node node = MakeNode("LabelEncoder", 1, 1,
                       {TensorAttr("keys_tensor", Tensor::FromVector<std::string>({"a"}, {1})),
                        TensorAttr("values_tensor", Tensor::FromVector<int16_t>({0}, {1})),
                        TensorAttr("default_tensor", Tensor::FromVector<int64_t>({42}, {1}))},
                       kMl);
  EXPECT_FALSE(RunOp(node, 4, {LetterInput()}).ok());
}

// ---- CategoryMapper, DictVectorizer, CastMap ----

TEST(MlCategoryMapperTest, BothDirections) {
  Node node = MakeNode("CategoryMapper", 1, 1,
                       {StringsAttr("cats_strings", {"a", "b"}), IntsAttr("cats_int64s", {10, 20}), IntAttr("default_int64", -5)},
                       kMl);
  auto to_int = RunOp(node, 1, {Tensor::FromVector<std::string>({"a", "q", "b", "a"}, {2, 2})});
  ASSERT_TRUE(to_int.ok()) << to_int.status().ToString();
  ExpectTensorNear<int64_t>(to_int->outputs[0].tensor(), {2, 2}, {10, -5, 20, 10});
  auto to_string = RunOp(node, 1, {Tensor::FromVector<int64_t>({20, 11}, {2})});
  ASSERT_TRUE(to_string.ok()) << to_string.status().ToString();
  EXPECT_EQ(Strings(to_string->outputs[0].tensor()), (std::vector<std::string>{"b", "_Unused"}));
}

TEST(MlCategoryMapperTest, RejectsUnequalLists) {
  Node node = MakeNode("CategoryMapper", 1, 1, {StringsAttr("cats_strings", {"a", "b"}), IntsAttr("cats_int64s", {10})}, kMl);
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<int64_t>({10}, {1})}).ok());
}

TEST(MlDictVectorizerTest, StringKeys) {
  Node node = MakeNode("DictVectorizer", 1, 1, {StringsAttr("string_vocabulary", {"a", "b", "c", "d"})}, kMl);
  Value map = Value::Map(Tensor::FromVector<std::string>({"c", "a", "z"}, {3}), Tensor::FromVector<float>({2.5f, 1, 9}, {3}));
  auto run = RunOp(node, 1, {map});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 4}, {1, 0, 2.5f, 0});
}

TEST(MlDictVectorizerTest, Int64KeysDoubleValues) {
  // By hand: key 3 is vocabulary entry 1; key 5 is not in the vocabulary.
  Node node = MakeNode("DictVectorizer", 1, 1, {IntsAttr("int64_vocabulary", {7, 3})}, kMl);
  Value map = Value::Map(Tensor::FromVector<int64_t>({3, 5}, {2}), Tensor::FromVector<double>({2.5, 1}, {2}));
  auto run = RunOp(node, 1, {map});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<double>(run->outputs[0].tensor(), {1, 2}, {0, 2.5});
}

TEST(MlDictVectorizerTest, RejectsKeyTypeMismatchAndNonMaps) {
  Node node = MakeNode("DictVectorizer", 1, 1, {IntsAttr("int64_vocabulary", {7, 3})}, kMl);
  Value map = Value::Map(Tensor::FromVector<std::string>({"a"}, {1}), Tensor::FromVector<float>({1}, {1}));
  EXPECT_FALSE(RunOp(node, 1, {map}).ok());
  EXPECT_FALSE(RunOp(node, 1, {Tensor::FromVector<float>({1}, {1})}).ok());
}

Value IntFloatMap() {
  return Value::Map(Tensor::FromVector<int64_t>({5, 2, 9}, {3}), Tensor::FromVector<float>({1.5f, 2.5f, -1}, {3}));
}

TEST(MlCastMapTest, DenseFloat) {
  auto run = RunOp(MakeNode("CastMap", 1, 1, {}, kMl), 1, {IntFloatMap()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 3}, {2.5f, 1.5f, -1});
}

TEST(MlCastMapTest, DenseToStringAndInt64) {
  Value map = Value::Map(Tensor::FromVector<int64_t>({5, 2}, {2}), Tensor::FromVector<float>({1.5f, -2.7f}, {2}));
  auto strings = RunOp(MakeNode("CastMap", 1, 1, {StringAttr("cast_to", "TO_STRING")}, kMl), 1, {map});
  ASSERT_TRUE(strings.ok()) << strings.status().ToString();
  EXPECT_EQ(Strings(strings->outputs[0].tensor()), (std::vector<std::string>{"-2.700000", "1.500000"}));
  auto ints = RunOp(MakeNode("CastMap", 1, 1, {StringAttr("cast_to", "TO_INT64")}, kMl), 1, {map});
  ASSERT_TRUE(ints.ok()) << ints.status().ToString();
  ExpectTensorNear<int64_t>(ints->outputs[0].tensor(), {1, 2}, {-2, 1});
}

TEST(MlCastMapTest, SparseDropsKeysOutsideRange) {
  Node node = MakeNode("CastMap", 1, 1, {StringAttr("map_form", "SPARSE"), IntAttr("max_map", 6)}, kMl);
  auto run = RunOp(node, 1, {IntFloatMap()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 6}, {0, 0, 2.5f, 0, 0, 1.5f});
}

TEST(MlCastMapTest, SparseStringsPadLikeOnnxRuntime) {
  Node node = MakeNode("CastMap", 1, 1,
                       {StringAttr("map_form", "SPARSE"), IntAttr("max_map", 4), StringAttr("cast_to", "TO_STRING")}, kMl);
  Value map = Value::Map(Tensor::FromVector<int64_t>({1}, {1}), Tensor::FromVector<float>({1.5f}, {1}));
  auto run = RunOp(node, 1, {map});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(Strings(run->outputs[0].tensor()), (std::vector<std::string>{"0.f", "1.500000", "0.f", "0.f"}));
}

TEST(MlCastMapTest, RejectsBadAttributes) {
  EXPECT_FALSE(RunOp(MakeNode("CastMap", 1, 1, {StringAttr("cast_to", "TO_BOOL")}, kMl), 1, {IntFloatMap()}).ok());
  EXPECT_FALSE(RunOp(MakeNode("CastMap", 1, 1, {StringAttr("map_form", "SPARSE"), IntAttr("max_map", -1)}, kMl), 1,
                     {IntFloatMap()}).ok());
}

// ---- SVMClassifier, SVMRegressor ----

std::vector<Attribute> ThreeClassSvm() {
  return {IntsAttr("classlabels_ints", {4, 5, 6}),
          StringAttr("kernel_type", "RBF"),
          FloatsAttr("kernel_params", {0.5f, 0, 0}),
          IntsAttr("vectors_per_class", {1, 1, 1}),
          FloatsAttr("support_vectors", {0, 1, 1, -1, 2, 2}),
          FloatsAttr("coefficients", {1, 0.5f, -0.7f, -1, 0.8f, -0.9f}),
          FloatsAttr("rho", {0.1f, -0.2f, 0.3f})};
}

TEST(MlSvmClassifierTest, OneVsOneScoresAndVotes) {
  auto run = RunOp(MakeNode("SVMClassifier", 1, 2, ThreeClassSvm(), kMl), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {6, 4, 4, 4});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 3},
                          {0.473433942f, -0.992450893f, -0.236990362f, 0.6572299f, -0.737786055f, 0.331903666f,
                           0.890470386f, -0.819351614f, 0.577819526f, 0.141165912f, -0.20026584f, 0.365484893f});
}

TEST(MlSvmClassifierTest, CoupledProbabilities) {
  std::vector<Attribute> attrs = ThreeClassSvm();
  attrs.push_back(FloatsAttr("prob_a", {-1.5f, -2.0f, -1.0f}));
  attrs.push_back(FloatsAttr("prob_b", {0.1f, 0.0f, -0.2f}));
  auto run = RunOp(MakeNode("SVMClassifier", 1, 2, attrs, kMl), 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {6, 4, 4, 4});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 3},
                          {0.179505989f, 0.304300725f, 0.51619333f, 0.257342905f, 0.330507487f, 0.412149578f,
                           0.272603095f, 0.324341565f, 0.403055459f, 0.310090214f, 0.384240031f, 0.305669904f},
                          1e-4);
}

// Two classes with probabilities go through the same iterative pairwise coupling as more
// classes (scikit-learn's libsvm, ONNX Runtime, onnx.reference); its early stop leaves them
// up to ~3e-3 away from the plain Platt probability. Expected: ONNX Runtime 1.32 and
// onnx.reference (equal to 1e-7) on this node (tests/models/sklearn/svc_rbf_binary_proba is
// the scikit-learn model that showed it).
TEST(MlSvmClassifierTest, BinaryProbabilitiesAreCoupled) {
  Node node = MakeNode("SVMClassifier", 1, 2,
                       {IntsAttr("classlabels_ints", {4, 5}), StringAttr("kernel_type", "RBF"),
                        FloatsAttr("kernel_params", {0.5f, 0, 0}), IntsAttr("vectors_per_class", {1, 2}),
                        FloatsAttr("support_vectors", {0, 1, 1, -1, 2, 2}), FloatsAttr("coefficients", {1, -0.6f, -0.4f}),
                        FloatsAttr("rho", {0.1f}), FloatsAttr("prob_a", {-1.7f}), FloatsAttr("prob_b", {0.2f})},
                       kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {4}, {4, 4, 4, 4});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {4, 2},
                          {0.5427766f, 0.4572234f, 0.6969206f, 0.30307952f, 0.64648277f, 0.35351723f, 0.4716113f,
                           0.5283887f},
                          1e-6);
}

TEST(MlSvmClassifierTest, RejectsInconsistentSupportVectors) {
  std::vector<Attribute> attrs = ThreeClassSvm();
  attrs[4] = FloatsAttr("support_vectors", {0, 1, 1});
  EXPECT_FALSE(RunOp(MakeNode("SVMClassifier", 1, 2, attrs, kMl), 1, {Features()}).ok());
  attrs = ThreeClassSvm();
  attrs[6] = FloatsAttr("rho", {0.1f});
  EXPECT_FALSE(RunOp(MakeNode("SVMClassifier", 1, 2, attrs, kMl), 1, {Features()}).ok());
  attrs = ThreeClassSvm();
  attrs[3] = IntsAttr("vectors_per_class", {1, 1});
  EXPECT_FALSE(RunOp(MakeNode("SVMClassifier", 1, 2, attrs, kMl), 1, {Features()}).ok());
}

TEST(MlSvmRegressorTest, PolynomialKernel) {
  Node node = MakeNode("SVMRegressor", 1, 1,
                       {StringAttr("kernel_type", "POLY"), FloatsAttr("kernel_params", {0.5f, 1, 2}), IntAttr("n_supports", 2),
                        FloatsAttr("support_vectors", {0, 1, 1, -1}), FloatsAttr("coefficients", {0.7f, -0.3f}),
                        FloatsAttr("rho", {0.25f})},
                       kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {4, 1}, {2.9749999f, 1.32500005f, 0.649999976f, -3.42500019f});
}

TEST(MlSvmRegressorTest, LinearForm) {
  // By hand: x . [0.7, -0.3] + 0.25.
  Node node = MakeNode("SVMRegressor", 1, 1, {FloatsAttr("coefficients", {0.7f, -0.3f}), FloatsAttr("rho", {0.25f})}, kMl);
  auto run = RunOp(node, 1, {Features()});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {4, 1}, {0.35f, -0.6f, 0.25f, 2.95f});
}

TEST(MlSvmRegressorTest, RejectsSupportVectorCountMismatch) {
  Node node = MakeNode("SVMRegressor", 1, 1,
                       {IntAttr("n_supports", 3), FloatsAttr("support_vectors", {0, 1, 1, -1}),
                        FloatsAttr("coefficients", {0.7f, -0.3f}), FloatsAttr("rho", {0.25f})},
                       kMl);
  EXPECT_FALSE(RunOp(node, 1, {Features()}).ok());
}

}  // namespace
}  // namespace nee::testing
