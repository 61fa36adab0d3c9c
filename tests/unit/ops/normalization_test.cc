// BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, RMSNormalization, LpNormalization, LRN,
// MeanVarianceNormalization. Expected values were computed with
// onnx.reference by nn_expected_gen.py; the case name is given beside each.
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

}  // namespace
}  // namespace nee::testing
