// Conv, ConvTranspose, ConvInteger. Expected values were computed with
// onnx.reference by nn_expected_gen.py (the case name is given beside each).
#include "nn_test_util.h"

namespace nee::testing {
namespace {

TEST(NnConv, TwoDWithPadsStridesAndBias) {
  // conv_2d_pads_strides
  Node node = MakeNode("Conv", 3, 1, {IntsAttr("pads", {1, 0, 1, 1}), IntsAttr("strides", {2, 1})});
  for (int threads : {1, 2}) {
    auto r = RunOp(node, 22, {Pattern({1, 2, 5, 4}), Pattern({3, 2, 3, 3}, 5), Pattern({3}, 3)}, threads);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 3, 3, 3}, {-4.5, -5.5, -4.75, -9.75, -9.75, -2.25, -6.75, -2.75, 5.25, -3.25, 1.75, 5.25, 0.5, 12, -1.75, 5, -1.25, -3.75, 1.75, -2.25, -3.5, -4.25, -8.75, -5, -5.75, -6, -0.25});
  }
}

TEST(NnConv, OneDDilatedSameUpper) {
  // conv_1d_dilated_same_upper
  Node node = MakeNode("Conv", 2, 1, {StringAttr("auto_pad", "SAME_UPPER"), IntsAttr("dilations", {2})});
  auto r = RunOp(node, 11, {Pattern({2, 2, 7}), Pattern({2, 2, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 2, 7}, {1, 3.5, 2, 0.5, -1, -2.5, -2, 2, 1.75, 0.5, -0.75, -2, -3.25, -0.5, 1, 3.5, 2, 0.5, -1, -2.5, -2, 2, 1.75, 0.5, -0.75, -2, -3.25, -0.5});
}

TEST(NnConv, GroupsSameLowerStrided) {
  // conv_2d_groups_same_lower
  Node node = MakeNode("Conv", 2, 1, {StringAttr("auto_pad", "SAME_LOWER"), IntAttr("group", 2),
                                      IntsAttr("strides", {2, 2})});
  auto r = RunOp(node, 22, {Pattern({1, 4, 3, 3}), Pattern({2, 2, 2, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 2, 2}, {0.25, 0.25, -1, 2.5, -2.75, -2.25, -2.25, 1});
}

TEST(NnConv, ThreeDValidInDoubleAndFloat16) {
  // conv_3d_valid
  const std::vector<double> expected = {2.75, 5.25, -2, -3, 0.25, 2.75, -4, 0.25, 5.25, 0.75, -3, -4, -1.25, -3, -1.25, 2.25, 0.5, -1.25, 5.75, 0.5, -3, -3, 2.25, 5.75};
  Node node = MakeNode("Conv", 2, 1, {StringAttr("auto_pad", "VALID")});
  auto r = RunOp(node, 22, {Pattern<double>({1, 1, 3, 4, 3}), Pattern<double>({2, 1, 2, 2, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {1, 2, 2, 3, 2}, expected);
  // The same in float16: inputs and results are exact in half precision.
  r = RunOp(node, 22, {HalfTensor(PatternValues(36), {1, 1, 3, 4, 3}), HalfTensor(PatternValues(16, 5), {2, 1, 2, 2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> got = HalfValues(r->outputs[0].tensor());
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << i;
}

TEST(NnConv, DepthwiseManyGroupsIsThreadCountIndependent) {
  // conv_depthwise
  Node node = MakeNode("Conv", 3, 1, {IntAttr("group", 3), IntsAttr("pads", {1, 1, 0, 0})});
  for (int threads : {1, 4}) {
    auto r = RunOp(node, 22, {Pattern({2, 3, 3, 3}), Pattern({3, 1, 2, 2}, 5), Pattern({3}, 3)}, threads);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 3, 3}, {-1.5, -0.75, -1, 0, 1.75, 0.25, -1.5, -2.75, -2.5, -0.75, -0.5, -1.25, -0.75, -3, -2.5, -2, -1.5, 2.5, -1, -2.25, -3.5, 1.25, 3.25, 2.25, -1.25, -1.5, -2.5, -1.5, -2.25, -0.75, -3, -2, 1.75, -1, -1.25, -2.75, -0.5, 0.25, -0.5, 0.25, -1.75, -3, -1, -0.25, -1.5, -0.5, -1, -2.25, -2, -1, 3.25, 0.75, -0.5, -1.5});
  }
}

TEST(NnConv, RejectsInvalidGeometry) {
  Node node = MakeNode("Conv", 2, 1);
  ExpectOpError(node, 22, {Pattern({1, 3, 4, 4}), Pattern({2, 2, 3, 3})}, "channels");
  ExpectOpError(MakeNode("Conv", 2, 1, {IntAttr("group", 2)}), 22, {Pattern({1, 4, 4, 4}), Pattern({3, 2, 3, 3})},
                "divisible");
  ExpectOpError(node, 22, {Pattern({1, 1, 2, 2}), Pattern({1, 1, 3, 3})}, "bigger than the padded input");
  ExpectOpError(MakeNode("Conv", 2, 1, {IntsAttr("strides", {0, 1})}), 22, {Pattern({1, 1, 4, 4}), Pattern({1, 1, 3, 3})},
                "strides must be positive");
  ExpectOpError(MakeNode("Conv", 2, 1, {IntsAttr("dilations", {1, -1})}), 22,
                {Pattern({1, 1, 4, 4}), Pattern({1, 1, 3, 3})}, "dilations must be positive");
  ExpectOpError(node, 22, {Pattern({1, 1, 4, 4}), Pattern({1, 1, 3})}, "rank");
  ExpectOpError(MakeNode("Conv", 3, 1), 22, {Pattern({1, 1, 4, 4}), Pattern({2, 1, 3, 3}), Pattern({3})}, "bias");
}

TEST(NnConvTranspose, StridesPadsOutputPaddingBias) {
  // conv_transpose_2d
  Node node = MakeNode("ConvTranspose", 3, 1, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 0, 0, 1}),
                                               IntsAttr("output_padding", {1, 0})});
  auto r = RunOp(node, 22, {Pattern({1, 2, 3, 3}), Pattern({2, 3, 3, 3}, 5), Pattern({3}, 3)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 3, 7, 6}, {-0.75, -1.75, 1, -2, -0.75, -2.25, -0.5, -1, -0.75, -1.5, -1.25, -2, -3, -2.5, -4.25, -2.75, -0.75, 0.5, -3.25, -2.5, -2.25, 0.5, -2.75, -1.75, 0, 0.25, -2.5, -1.75, 1, -2, -3, -2.75, 1.5, -1, 0.25, -1, -1.5, -1.5, -1.5, -1.5, -1.5, -1.5, -0.5, -0.25, -0.75, -1, -1, -1.75, 0.5, 0, -0.25, -1.5, 1.5, -1.25, -0.5, -2.5, -1.5, -3.25, -3.5, 1.25, 0.25, -2.75, -3.75, 1, -0.25, -0.5, -2.25, 0.5, 1.25, -0.25, -0.75, -1, -2.75, -2.5, 0.25, 0.5, 1, 0, -1, -1, -1, -1, -1, -1, 1, 0, 1.25, 0, 0, 0, -2.25, 1, -2.25, -0.25, 0.5, 2, -0.5, 0, -2.5, 0, -3.75, -1.75, 0, 0.75, -2.75, -2.25, 3.5, -1.75, -2, -1.75, 2.5, 0, 1.25, 0, 1.25, -2.25, -2.25, 2, 0.5, 1, -0.5, -0.5, -0.5, -0.5, -0.5, -0.5});
}

TEST(NnConvTranspose, OutputShapeAttribute) {
  // conv_transpose_output_shape
  Node node = MakeNode("ConvTranspose", 2, 1, {IntsAttr("strides", {3, 2}), IntsAttr("output_shape", {10, 8})});
  auto r = RunOp(node, 22, {Pattern({1, 1, 3, 3}), Pattern({1, 2, 3, 3}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 10, 8}, {2.25, 1.5, 2.25, 1, 1.25, 0.5, 0.25, 0, 0, -0.75, 2.25, -0.5, 1.5, -0.25, 0.75, 0, 1.5, 0.75, 1, 0.5, 0.5, 0.25, 0, 0, 0, 0, -0.75, -0.5, -1.75, -1, -0.5, 0, 0, 0, 0, 0.25, -0.75, 0.5, -1.5, 0, 0, 0, -0.5, -0.25, -1, -0.5, 0, 0, -2.25, -1.5, 1.5, 1.5, 2.25, 1, 0.5, 0, 0, 0.75, -2.25, -0.75, 2.25, -0.5, 1.5, 0, -1.5, -0.75, 1.5, 0.75, 1, 0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.75, 2.25, 1, 1.5, 0.75, 0.75, 0.5, 0, 0.75, 0, -0.25, 0, -0.25, 0, -0.25, 0, 2.25, 1.5, 2.25, 1, 1.25, 0.5, 0.25, 0, 0, 0, 0.25, -0.75, 0, -1.5, -1, 0, 0, 0, -0.25, 0, -0.25, 0, 0.5, 0, 0, 0, -0.75, -0.5, -1.75, -1, -0.5, 0, 0.75, -2.25, -2.25, 2.25, 1, 1.5, 1, 0, -0.75, 0, 1.5, 0, -0.25, 0, -0.5, 0, -2.25, -1.5, 1.5, 1.5, 2.25, 1, 0.5, 0, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST(NnConvTranspose, OutputShapeBeyondFullResultExtendsAtTheEnd) {
  // x = [1, 2, 3, 4], w = ones(2), strides 3, output_shape 13: the full result has 11 positions, the other
  // two come after it. Expected from onnx.reference and onnxruntime 1.32 (both agree):
  // [1, 1, 0, 2, 2, 0, 3, 3, 0, 4, 4, 0, 0].
  Node node = MakeNode("ConvTranspose", 2, 1, {IntsAttr("strides", {3}), IntsAttr("output_shape", {13})});
  auto r = RunOp(node, 13, {Tensor::FromVector<float>({1, 2, 3, 4}, {1, 1, 4}),
                            Tensor::FromVector<float>({1, 1}, {1, 1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 13}, {1, 1, 0, 2, 2, 0, 3, 3, 0, 4, 4, 0, 0});
}

TEST(NnConvTranspose, GroupsDilationAndSameUpper) {
  // conv_transpose_group_dilation_1d (numpy: per-group onnx.reference runs, concatenated)
  auto r = RunOp(MakeNode("ConvTranspose", 2, 1, {IntAttr("group", 2), IntsAttr("dilations", {2})}), 22,
                 {Pattern({1, 4, 4}), Pattern({4, 1, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 6}, {2, 1, 1.5, 1.75, 0.5, 0, -1.5, -1.75, 2.5, 1.25, 0.75, -0.25});
  // conv_transpose_same_upper
  r = RunOp(MakeNode("ConvTranspose", 2, 1, {IntsAttr("strides", {2}), StringAttr("auto_pad", "SAME_UPPER")}), 22,
            {Pattern({1, 1, 3}), Pattern({1, 1, 3}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 6}, {2.25, 1.5, 2.25, 1, 1.25, 0.5});
}

TEST(NnConvTranspose, RejectsChannelMismatch) {
  ExpectOpError(MakeNode("ConvTranspose", 2, 1), 22, {Pattern({1, 2, 3, 3}), Pattern({3, 1, 2, 2})}, "channels");
}

TEST(NnConvInteger, ZeroPointsAndPadding) {
  // conv_integer: padding counts as the input zero point
  auto r = RunOp(MakeNode("ConvInteger", 4, 1, {IntsAttr("pads", {1, 1, 0, 0})}), 10,
                 {Pattern<uint8_t>({1, 1, 3, 3}, 9, 0, 1), Pattern<int8_t>({2, 1, 2, 2}, 5, 2, 1),
                  Tensor::Scalar<uint8_t>(2), Tensor::FromVector<int8_t>({1, -1}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int32_t>(r->outputs[0].tensor(), {1, 2, 3, 3}, {0, 2, 1, 4, 7, 1, -2, -11, -17, -2, -1, 0, 3, -3, 0, 3, 6, 9});
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

TEST(NnConvShape, SymbolicBatchAndUnknownSpatial) {
  // Output size by the ONNX formula: floor((9 + 2 - 3) / 2) + 1 = 5.
  auto r = InferOnly(MakeNode("Conv", 2, 1, {IntsAttr("pads", {1, 1, 1, 1}), IntsAttr("strides", {2, 2})}), 22,
                     {FloatType({Dim::Symbol("N"), Dim::Known(3), Dim::Known(9), Dim::Unknown()}),
                      FloatType({Dim::Known(8), Dim::Known(3), Dim::Known(3), Dim::Known(3)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[N,8,5,?]");
  // Channels that cannot match the weights are a definite error.
  r = InferOnly(MakeNode("Conv", 2, 1), 22,
                {FloatType({Dim::Symbol("N"), Dim::Known(4), Dim::Known(9), Dim::Known(9)}),
                 FloatType({Dim::Known(8), Dim::Known(3), Dim::Known(3), Dim::Known(3)})});
  EXPECT_FALSE(r.ok());
}

TEST(NnConvTransposeShape, OutputShapeAttribute) {
  auto r = InferOnly(MakeNode("ConvTranspose", 2, 1, {IntsAttr("strides", {3, 2}), IntsAttr("output_shape", {10, 8})}), 22,
                     {FloatType({Dim::Symbol("N"), Dim::Known(1), Dim::Known(3), Dim::Known(3)}),
                      FloatType({Dim::Known(1), Dim::Known(2), Dim::Known(3), Dim::Known(3)})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ShapeToString(*(*r)[0].shape), "[N,2,10,8]");
}

}  // namespace
}  // namespace nee::testing

namespace nee::testing {
namespace {

TEST(NnConv, EmptyBatchAndHostileAttributes) {
  // An empty batch gives an empty output of the right shape.
  auto r = RunOp(MakeNode("Conv", 2, 1), 22, {Pattern({0, 2, 4, 4}), Pattern({3, 2, 3, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->outputs[0].tensor().dims(), (std::vector<int64_t>{0, 3, 2, 2}));
  // Values that would overflow the size arithmetic are rejected, not wrapped.
  ExpectOpError(MakeNode("Conv", 2, 1, {IntsAttr("dilations", {int64_t{1} << 62, 1})}), 22,
                {Pattern({1, 1, 4, 4}), Pattern({1, 1, 3, 3})}, "implausibly large");
  ExpectOpError(MakeNode("ConvTranspose", 2, 1, {IntsAttr("strides", {int64_t{1} << 62, 1})}), 22,
                {Pattern({1, 1, 4, 4}), Pattern({1, 1, 3, 3})}, "out of range");
}

}  // namespace
}  // namespace nee::testing
