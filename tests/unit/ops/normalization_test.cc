// BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LpNormalization, LRN,
// MeanVarianceNormalization. Expected values were computed with
// onnx.reference by nn_expected_gen.py; the case name is given beside each.
// The NnSkipLayerNorm tests (ONNX Runtime's contrib forms) use ONNX Runtime's values.
#include "nn_test_util.h"

namespace nee::testing {
namespace {

std::vector<Value> BatchNormInputs() {
  return {Pattern({2, 3, 2, 2}, 11), Pattern({3}, 4, -1), Pattern({3}, 3), Pattern({3}, 5, 3, 0.25),
          Pattern({3}, 4, -1, 0.75)};
}

TEST(NnBatchNorm, InferenceMode) {
  // batchnorm_inference
  for (int opset : {9, 15}) {
    auto r = RunOp(MakeNode("BatchNormalization", 5, 1, {FloatAttr("epsilon", 1e-3f)}), opset, BatchNormInputs());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2, 2}, {-1.93272436, -1.64424145, -1.35575855, -1.06727564, -0.183775485, 0.224336743, 0.632449031, 1.0405612, 2.24938917, 2.74927807, 3.24916697, -1.74972236, -1.64424145, -1.35575855, -1.06727564, -0.778792799, 0.224336743, 0.632449031, 1.0405612, 1.44867349, 2.74927807, 3.24916697, -1.74972236, -1.24983335});
  }
}

TEST(NnBatchNorm, TrainingModeOutputs) {
  // batchnorm_training
  auto r = RunOp(MakeNode("BatchNormalization", 5, 3, {IntAttr("training_mode", 1), FloatAttr("momentum", 0.8f)}), 15,
                 BatchNormInputs());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2, 2}, {-2.31648564, -1.90824282, -1.5, -1.09175718, -2.63297129, -1.81648564, -1, -0.183514357, 0.233983099, 0.57938695, 0.92479074, -2.52924752, -1.90824282, -1.5, -1.09175718, -0.683514357, -1.81648564, -1, -0.183514357, 0.632971287, 0.57938695, 0.92479074, -2.52924752, -2.18384361});
  ExpectTensorNear<float>(r->outputs[1].tensor(), {3}, {-0.700000048, -0.100000024, 0.0874999911});
  ExpectTensorNear<float>(r->outputs[2].tensor(), {3}, {0.675000012, 1.2750001, 2.7429688});
}

TEST(NnBatchNorm, RejectsWrongParameterCount) {
  std::vector<Value> in = BatchNormInputs();
  in[1] = Pattern({4});
  ExpectOpError(MakeNode("BatchNormalization", 5, 1), 15, in, "one per channel");
}

TEST(NnInstanceNorm, Basic) {
  // instancenorm
  auto r = RunOp(MakeNode("InstanceNormalization", 3, 1, {FloatAttr("epsilon", 1e-2f)}), 22,
                 {Pattern({2, 3, 4}, 11), Pattern({3}, 4, -1), Pattern({3}, 3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4}, {-2.16033816, -1.72011268, -1.27988732, -0.839661777, -2.32067633, -1.44022548, -0.559774518, 0.320676446, -0.0272065699, 0.351028144, 0.729262948, -3.05308437, -2.16033816, -1.72011268, -1.27988732, -0.839661777, -2.32067633, -1.44022548, -0.559774518, 0.320676446, 0.823887348, 1.15485907, -2.15485907, -1.82388735});
}

TEST(NnLayerNorm, AxisOneWithStatistics) {
  // layernorm_axis1
  auto r = RunOp(MakeNode("LayerNormalization", 3, 3, {IntAttr("axis", 1)}), 17,
                 {Pattern({2, 3, 4}, 11), Pattern({3, 4}, 5), Pattern({4}, 3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4}, {0.565726519, 0.0766817331, -0.111893773, -1.5, -1.58763695, -1.18779325, -0.925664842, -1.86306703, -1.5, -0.33646363, -2.94131303, -0.122848988, 0.206386089, -0.172661245, -0.241456628, -1.5, -1.4482913, -1.62050414, -1.22392154, -2.01708674, -1.5, -0.172661185, 1.67176437, -0.362409234});
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 1, 1}, {0.791666687, 0.833333313});
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 1, 1}, {0.600938618, 0.620504081});
}

TEST(NnLayerNorm, LastAxisNoBiasFloat16) {
  // layernorm_last_no_bias
  const std::vector<float> expected = {2.00924873, 0.446499765, -0.223249882, 0, 2.00924873, 0.446499765, -0.223249882, 0, -0.473335445, -0.568002582, -0.41022408, -0};
  Node node = MakeNode("LayerNormalization", 2, 1, {FloatAttr("epsilon", 1e-3f)});
  auto r = RunOp(node, 17, {Pattern({3, 4}, 11), Pattern({4}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {3, 4}, expected);
  r = RunOp(node, 17, {HalfTensor(PatternValues(12, 11), {3, 4}), HalfTensor(PatternValues(4, 5), {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> got = HalfValues(r->outputs[0].tensor());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], 2e-3 * (1 + std::fabs(expected[i]))) << i;
}

TEST(NnLayerNorm, RejectsBadAxisAndScale) {
  ExpectOpError(MakeNode("LayerNormalization", 2, 1, {IntAttr("axis", 3)}), 17, {Pattern({3, 4}), Pattern({4})}, "axis");
  ExpectOpError(MakeNode("LayerNormalization", 2, 1), 17, {Pattern({3, 4}), Pattern({3})}, "broadcast");
}

TEST(NnGroupNorm, PerChannelAffine) {
  // groupnorm_per_channel
  auto r = RunOp(MakeNode("GroupNormalization", 3, 1, {IntAttr("num_groups", 2)}), 21,
                 {Pattern({2, 4, 3}, 11), Pattern({4}, 5), Pattern({4}, 3)}, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 4, 3}, {0.695760012, -0.182543993, -1.060848, -1.292768, -1.878304, -2.46384001, -0.397402346, -0.551298797, -0.705195248, -1.5, -1.5, -1.5, 0.695760012, -0.182543993, -1.060848, -1.292768, -1.878304, -2.46384001, -0.649923325, -0.778429031, -0.906934738, -1.5, -1.5, -1.5});
  ExpectOpError(MakeNode("GroupNormalization", 3, 1, {IntAttr("num_groups", 3)}), 21,
                {Pattern({2, 4, 3}), Pattern({4}), Pattern({4})}, "num_groups");
}

TEST(NnRmsNorm, LastAxis) {
  // rmsnorm
  auto r = RunOp(MakeNode("RMSNormalization", 2, 1), 23, {Pattern({2, 3, 4}, 11), Pattern({4}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4}, {2.40533733, 1.06903887, 0.267259717, 0, -0.547721148, -0.730294824, -0.547721148, 0, -1.37504685, -1.10003746, -0.641688526, -0, 2.44945693, 0.816485643, -0, 0, -0.816495359, -0.816495359, -0.544330239, 0, -1.81827307, -1.41421247, 0.303045511, -0});
}

TEST(NnLpNorm, L1AndL2) {
  // lpnorm (numpy; a zero vector stays zero)
  auto r = RunOp(MakeNode("LpNormalization", 1, 1, {IntAttr("axis", 1), IntAttr("p", 1)}), 22, {Pattern({2, 3, 2}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2}, {-0.6, -0.5, -0.2, 0, 0.2, 0.5, 0.2, 0.307692308, 0.333333333, 0.461538462, 0.466666667, -0.230769231});
  r = RunOp(MakeNode("LpNormalization", 1, 1), 22, {Pattern({2, 3, 2}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2}, {-0.832050294, -0.554700196, -1, 0, 0.447213595, 0.894427191, 0.6, 0.8, 0.6401844, 0.76822128, 0.91914503, -0.393919299});
}

TEST(NnLrn, Basic) {
  // lrn (numpy)
  auto r = RunOp(MakeNode("LRN", 1, 1, {IntAttr("size", 3), FloatAttr("alpha", 0.5f), FloatAttr("beta", 0.6f),
                                        FloatAttr("bias", 2.0f)}),
                 13, {Pattern({1, 5, 2, 2}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 5, 2, 2}, {-0.883407756, -0.601469942, -0.294469252, 0, 0.237492497, 0.446533502, 0.611769382, 1.02603701, 1.23256546, 1.36651372, 1.43552669, -0.76327137, -0.481987454, -0.220404287, 0, 0.237492497, 0.601469942, 0.883407756, 1.11032152, 1.27211895});
}

TEST(NnMeanVarianceNorm, DefaultAxes) {
  // mvn
  auto r = RunOp(MakeNode("MeanVarianceNormalization", 1, 1), 13, {Pattern({2, 3, 2, 2}, 11)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2, 2}, {-1.6329931, -0.816496551, 0, 0.816496551, -1.6329931, -0.816496551, 0, 0.816496551, 0.489322603, 0.719592094, 0.949861526, -1.35283315, -0.816496551, 0, 0.816496551, 1.6329931, -0.816496551, 0, 0.816496551, 1.6329931, 0.719592094, 0.949861526, -1.35283315, -1.1225636});
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

TEST(NnLayerNormShape, StatisticsShapeAndStashType) {
  auto r = InferOnly(MakeNode("LayerNormalization", 2, 3, {IntAttr("axis", -2)}), 17,
                     {TypeInfo::Tensor(DataType::kFloat16, Shape{Dim::Symbol("B"), Dim::Known(3), Dim::Known(4)}),
                      TypeInfo::Tensor(DataType::kFloat16, Shape{Dim::Known(3), Dim::Known(4)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[1].shape), "[B,1,1]");
  EXPECT_EQ((*r)[0].elem_type, DataType::kFloat16);
  EXPECT_EQ((*r)[1].elem_type, DataType::kFloat);  // stash_type defaults to float
}

// ---- ONNX Runtime's normalization ops. Expected values: ONNX Runtime 1.32 on one-node
// models, x = ((arange(16) % 7 - 3) * 0.5) as [2, 2, 4], skip = ((arange(8) % 5 - 2) * 0.25)
// as [2, 4] (broadcast over the batch), gamma [1, 0.5, -1, 2], beta [0.1, 0, -0.2, 0.3],
// bias [0.05, -0.05, 0.1, 0].

Value F32(std::vector<int64_t> dims, std::vector<float> v) { return Value(Tensor::FromVector<float>(v, std::move(dims))); }

std::vector<float> SkipXValues() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 7 - 3) * 0.5f;
  return v;
}
Value SkipX() { return F32({2, 2, 4}, SkipXValues()); }
Value SkipS() {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 5 - 2) * 0.25f;
  return F32({2, 4}, v);
}
Value Gamma() { return F32({4}, {1, 0.5f, -1, 2}); }
Value Beta() { return F32({4}, {0.1f, 0, -0.2f, 0.3f}); }
Value Bias() { return F32({4}, {0.05f, -0.05f, 0.1f, 0}); }

const std::vector<float> kSkipSum = {-1.95f, -1.3f, -0.4f, 0.25f, 1.05f, 0.45f, 1.35f, -1.5f,
                                     -1.45f, -0.8f, 0.1f, 0.75f, 1.55f, 0.95f, -1.65f, -1};

TEST(NnSkipLayerNorm, AllOutputs) {
  auto r = RunOp(MakeNode("SkipLayerNormalization", 5, 4, {FloatAttr("epsilon", 1e-5f)}, "com.microsoft"), 1,
                 {SkipX(), SkipS(), Gamma(), Beta(), Bias()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 4},
                          {-1.20891166f, -0.267731905f, -0.735463858f, 2.91782331f, 0.742314577f, 0.0507090539f,
                           -1.11276293f, -3.01299119f, -1.20891166f, -0.267731935f, -0.735463858f, 2.91782331f,
                           1.29816318f, 0.372657061f, 1.01703179f, -1.15289068f});
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 2, 1}, {-0.85f, 0.3375f, -0.35f, -0.0375f});
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 2, 1}, {1.18991971f, 0.901494205f, 1.18991971f, 0.754748464f});
  ExpectTensorNear<float>(r->outputs[3].tensor(), {2, 2, 4}, kSkipSum);
}

TEST(NnSkipLayerNorm, WithoutBetaAndBiasDefaultEpsilon) {
  auto r = RunOp(MakeNode("SkipLayerNormalization", 3, 1, {}, "com.microsoft"), 1, {SkipX(), SkipS(), Gamma()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 4},
                          {-1.34164083f, -0.223606795f, -0.44721359f, 2.68328166f, 0.636146426f, 0.0867472365f,
                           -0.86747241f, -3.35422659f, -1.34164083f, -0.223606795f, -0.44721359f, 2.68328166f,
                           1.15686202f, 0.393333077f, 1.24941099f, -1.38823438f});
}

TEST(NnSkipLayerNorm, SimplifiedForm) {
  auto r = RunOp(MakeNode("SkipSimplifiedLayerNormalization", 4, 4, {FloatAttr("epsilon", 1e-5f)}, "com.microsoft"), 1,
                 {SkipX(), SkipS(), Gamma(), Bias()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 4},
                          {-1.63137937f, -0.543793082f, 0.334641933f, 0.418302417f, 0.905581295f, 0.194053143f,
                           -1.16431892f, -2.5873754f, -1.59277201f, -0.439385355f, -0.109846339f, 1.64769506f,
                           1.16939175f, 0.358361989f, 1.24483645f, -1.50889266f});
  ExpectTensorNear<float>(r->outputs[1].tensor(), {2, 2, 1}, {0, 0, 0, 0});  // no mean in the RMS form
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 2, 1}, {0.836604834f, 0.862458467f, 1.09846342f, 0.754446328f});
  ExpectTensorNear<float>(r->outputs[3].tensor(), {2, 2, 4}, kSkipSum);
}

TEST(NnSkipLayerNorm, RejectsMismatchedSkipAndGamma) {
  ExpectOpError(MakeNode("SkipLayerNormalization", 3, 1, {}, "com.microsoft"), 1,
                {SkipX(), F32({2, 3}, {1, 2, 3, 4, 5, 6}), Gamma()}, "trailing dimensions");
  ExpectOpError(MakeNode("SkipLayerNormalization", 3, 1, {}, "com.microsoft"), 1,
                {SkipX(), SkipS(), F32({3}, {1, 2, 3})}, "must have shape [4]");
}

// ONNX Runtime accepts LayerNormalization (its contrib version 1) below opset 17 and
// SimplifiedLayerNormalization (RMS norm with the inverse RMS as a second output).
TEST(NnSkipLayerNorm, OnnxRuntimeLayerNormForms) {
  Value x = F32({4, 4}, SkipXValues());
  auto r = RunOp(MakeNode("LayerNormalization", 3, 1, {FloatAttr("epsilon", 1e-5f)}), 13, {x, Gamma(), Beta()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {4, 4},
                          {-1.24161923f, -0.223603219f, -0.647206426f, 2.98323846f, 0.20976384f, 0.274409592f,
                           -1.18787456f, -2.99291515f, -1.24161923f, -0.223603219f, -0.647206426f, 2.98323846f,
                           0.884462118f, 0.588346601f, 0.976693213f, -1.26892424f});
  r = RunOp(MakeNode("SimplifiedLayerNormalization", 2, 2, {FloatAttr("epsilon", 1e-5f)}), 15, {x, Gamma()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {4, 4},
                          {-1.6035583f, -0.534519434f, 0.534519434f, 0, 0.417027354f, 0.417027354f, -1.25108206f,
                           -2.50216413f, -1.63297129f, -0.408242822f, 0, 1.63297129f, 0.784462094f, 0.588346601f,
                           1.1766932f, -1.56892419f});
  ExpectTensorNear<float>(r->outputs[1].tensor(), {4, 1}, {1.06903887f, 0.834054708f, 1.63297129f, 0.784462094f});
}

// EmbedLayerNormalization: expected values from ONNX Runtime 1.32 on a one-node model with
// ids [[1, 5, 0], [3, 3, 2]], segment ids [[0, 1, 1], [1, 0, 0]], tables
// ((arange(n) % mod - mod // 2) * scale): word [6, 4] (7, 0.5), position [5, 4] (5, 0.25),
// segment [2, 4] (3, 0.75); gamma and beta as above; mask [[1, 1, 1], [1, 1, 0]].
Value Table(std::vector<int64_t> dims, int mod, float scale) {
  std::vector<float> v(static_cast<size_t>(dims[0] * dims[1]));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i) % mod - mod / 2) * scale;
  return F32(std::move(dims), v);
}
Value I32(std::vector<int64_t> dims, std::vector<int32_t> v) { return Value(Tensor::FromVector<int32_t>(v, std::move(dims))); }

Result<OpRun> RunEmbed(const std::vector<Value>& inputs, size_t outputs, std::vector<Attribute> attrs = {}) {
  Node node = MakeNode("EmbedLayerNormalization", inputs.size(), outputs, std::move(attrs), "com.microsoft");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].empty()) node.inputs[i] = "";
  return RunOp(node, 1, inputs);
}

TEST(NnEmbedLayerNorm, SegmentsMaskAndSum) {
  auto r = RunEmbed({I32({2, 3}, {1, 5, 0, 3, 3, 2}), I32({2, 3}, {0, 1, 1, 1, 0, 0}), Table({6, 4}, 7, 0.5f),
                     Table({5, 4}, 5, 0.25f), Table({2, 4}, 3, 0.75f), Gamma(), Beta(), I32({2, 3}, {1, 1, 1, 1, 1, 0})},
                    3, {FloatAttr("epsilon", 1e-5f)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.409509212f, 0.215561569f, -1.57175553f, -2.28673887f, 1.72078121f, -0.270130187f,
                           0.838962257f, 0.216883034f, -0.532450438f, 0.632450461f, 1.06490088f, 1.56490088f,
                           0.49904263f, 0.678372502f, 1.15674496f, -0.49808526f, 0.962659001f, 0.539161861f,
                           0.446994245f, -2.28797698f, -1.48524046f, 0.326373041f, -1.22574389f, 0.113501132f});
  ExpectTensorNear<int32_t>(r->outputs[1].tensor(), {2}, {3, 2});
  ExpectTensorNear<float>(r->outputs[2].tensor(), {2, 3, 4},
                          {-0.75f, 0.75f, 2.25f, -2, 2, -1.25f, -2, -0.5f, -1.25f, 0.25f, -1.75f, -0.25f,
                           0.5f, 2, -2.25f, -0.75f, 0.75f, 1, -1, -1.75f, -1.5f, 0, 0.25f, -0.5f});
}

TEST(NnEmbedLayerNorm, PositionIdsWithoutSegmentsOrMask) {
  auto r = RunEmbed({I32({2, 3}, {1, 5, 0, 3, 3, 2}), Value(), Table({6, 4}, 7, 0.5f), Table({5, 4}, 5, 0.25f), Value(),
                     Gamma(), Beta(), Value(), I32({1, 3}, {4, 0, 2})},
                    2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 4},
                          {-0.146182984f, 0.246182978f, -1.43091488f, -2.65419579f, 1.57709789f, -0.615457416f,
                           0.292365968f, 0.792365968f, -1.16491103f, 0.316227764f, 0.43245554f, 2.82982206f,
                           0.685205758f, 0.643726349f, 1.08745265f, -0.870411456f, 0.685205758f, 0.643726349f,
                           1.08745265f, -0.870411456f, -1.16491103f, 0.316227764f, 0.43245554f, 2.82982206f});
  ExpectTensorNear<int32_t>(r->outputs[1].tensor(), {2}, {0, 0});
}

TEST(NnEmbedLayerNorm, RejectsOutOfRangeIds) {
  auto r = RunEmbed({I32({1, 2}, {1, 6}), Value(), Table({6, 4}, 7, 0.5f), Table({5, 4}, 5, 0.25f), Value(), Gamma(),
                     Beta()},
                    1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside the word table"), std::string::npos) << r.status().message();
  r = RunEmbed({I32({1, 6}, {0, 0, 0, 0, 0, 0}), Value(), Table({6, 4}, 7, 0.5f), Table({5, 4}, 5, 0.25f), Value(),
                Gamma(), Beta()},
               1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("position 5"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace nee::testing
