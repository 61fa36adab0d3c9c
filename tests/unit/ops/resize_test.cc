// Resize family tests. Most cases are ONNX backend node tests (onnx 1.23.2):
// their inputs and expected outputs, computed by onnx's numpy reference
// implementation, are pasted below with the test's name. The others say how
// their expected values were computed (numpy / onnx.reference).
#include <cmath>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectTensorNear;
using testing::FloatAttr;
using testing::FloatsAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::MakeNode;
using testing::RunOp;
using testing::StringAttr;

TEST(Resize, ResizeDownsampleScalesCubic) {
  // onnx node test test_resize_downsample_scales_cubic
  Node node = MakeNode("Resize", 3, 1, {StringAttr("mode", "cubic")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Tensor::FromVector<float>({1.0f, 1.0f, 0.800000012f, 0.800000012f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 3, 3}, {1.47119141f, 2.78125f, 4.08251953f, 6.71142578f, 8.02148438f, 9.32275391f, 11.9165039f, 13.2265625f, 14.527832f}, 1e-4);
}

TEST(Resize, ResizeDownsampleScalesCubicAN0p5ExcludeOutside) {
  // onnx node test test_resize_downsample_scales_cubic_A_n0p5_exclude_outside
  Node node = MakeNode("Resize", 3, 1, {FloatAttr("cubic_coeff_a", -0.5f), IntAttr("exclude_outside", 1), StringAttr("mode", "cubic")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Tensor::FromVector<float>({1.0f, 1.0f, 0.800000012f, 0.800000012f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 3, 3}, {1.36812675f, 2.6695013f, 4.01333666f, 6.57362509f, 7.875f, 9.21883488f, 11.948966f, 13.2503414f, 14.5941763f}, 1e-4);
}

TEST(Resize, ResizeUpsampleScalesLinearAlignCorners) {
  // onnx node test test_resize_upsample_scales_linear_align_corners
  Node node = MakeNode("Resize", 3, 1, {StringAttr("coordinate_transformation_mode", "align_corners"), StringAttr("mode", "linear")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f}, {1, 1, 2, 2}), Value(), Tensor::FromVector<float>({1.0f, 1.0f, 2.0f, 2.0f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 4, 4}, {1.0f, 1.33333337f, 1.66666663f, 2.0f, 1.66666663f, 2.0f, 2.33333325f, 2.66666675f, 2.33333325f, 2.66666675f, 3.0f, 3.33333325f, 3.0f, 3.33333325f, 3.66666675f, 4.0f}, 1e-4);
}

TEST(Resize, ResizeDownsampleScalesLinearHalfPixelSymmetric) {
  // onnx node test test_resize_downsample_scales_linear_half_pixel_symmetric
  Node node = MakeNode("Resize", 3, 1, {StringAttr("coordinate_transformation_mode", "half_pixel_symmetric"), StringAttr("mode", "linear")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f}, {1, 1, 1, 4}), Value(), Tensor::FromVector<float>({1.0f, 1.0f, 1.0f, 0.600000024f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 1, 2}, {1.66666675f, 3.33333325f}, 1e-4);
}

TEST(Resize, ResizeTfCropAndResizeExtrapolationValue) {
  // onnx node test test_resize_tf_crop_and_resize_extrapolation_value
  Node node = MakeNode("Resize", 4, 1, {StringAttr("coordinate_transformation_mode", "tf_crop_and_resize"), FloatAttr("extrapolation_value", 10.0f), StringAttr("mode", "linear")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Tensor::FromVector<float>({0.0f, 0.0f, 0.400000006f, 0.600000024f, 1.0f, 1.0f, 1.20000005f, 1.70000005f}, {8}), Value(), Tensor::FromVector<int64_t>({1, 1, 3, 3}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 3, 3}, {7.60000038f, 10.0f, 10.0f, 12.4000006f, 10.0f, 10.0f, 10.0f, 10.0f, 10.0f}, 1e-4);
}

TEST(Resize, ResizeTfCropAndResizeAxes32) {
  // onnx node test test_resize_tf_crop_and_resize_axes_3_2
  Node node = MakeNode("Resize", 4, 1, {IntsAttr("axes", {3, 2}), StringAttr("coordinate_transformation_mode", "tf_crop_and_resize"), StringAttr("mode", "linear")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Tensor::FromVector<float>({0.600000024f, 0.400000006f, 0.800000012f, 0.600000024f}, {4}), Value(), Tensor::FromVector<int64_t>({3, 3}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 3, 3}, {7.60000038f, 7.9000001f, 8.19999981f, 8.80000019f, 9.10000038f, 9.40000057f, 10.0f, 10.3000002f, 10.6000004f}, 1e-4);
}

TEST(Resize, ResizeDownsampleSizesNearestNotLarger) {
  // onnx node test test_resize_downsample_sizes_nearest_not_larger
  Node node = MakeNode("Resize", 4, 1, {IntsAttr("axes", {2, 3}), StringAttr("keep_aspect_ratio_policy", "not_larger"), StringAttr("mode", "nearest")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f}, {1, 1, 2, 4}), Value(), Value(), Tensor::FromVector<int64_t>({1, 3}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 1, 2}, {1.0f, 3.0f}, 1e-4);
}

TEST(Resize, ResizeDownsampleScalesLinearAntialias) {
  // onnx node test test_resize_downsample_scales_linear_antialias
  Node node = MakeNode("Resize", 3, 1, {IntAttr("antialias", 1), StringAttr("mode", "linear")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Tensor::FromVector<float>({1.0f, 1.0f, 0.600000024f, 0.600000024f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 2, 2}, {2.875f, 4.5f, 9.375f, 11.0f}, 1e-4);
}

TEST(Resize, ResizeDownsampleSizesCubicAntialias) {
  // onnx node test test_resize_downsample_sizes_cubic_antialias
  Node node = MakeNode("Resize", 4, 1, {IntAttr("antialias", 1), StringAttr("mode", "cubic")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Value(), Tensor::FromVector<int64_t>({1, 1, 3, 3}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 3, 3}, {1.77500916f, 3.12000728f, 4.4650054f, 7.15500164f, 8.5f, 9.84499836f, 12.5349941f, 13.8799925f, 15.2249908f}, 1e-4);
}

TEST(Resize, ResizeUpsampleSizesNearestRoundPreferCeilAsymmetric) {
  // onnx node test test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric
  Node node = MakeNode("Resize", 4, 1, {StringAttr("coordinate_transformation_mode", "asymmetric"), StringAttr("mode", "nearest"), StringAttr("nearest_mode", "round_prefer_ceil")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Value(), Tensor::FromVector<int64_t>({1, 1, 8, 8}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 8, 8}, {1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f}, 1e-4);
}

TEST(Resize, ResizeUpsampleSizesNearestFloorAlignCorners) {
  // onnx node test test_resize_upsample_sizes_nearest_floor_align_corners
  Node node = MakeNode("Resize", 4, 1, {StringAttr("coordinate_transformation_mode", "align_corners"), StringAttr("mode", "nearest"), StringAttr("nearest_mode", "floor")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Value(), Tensor::FromVector<int64_t>({1, 1, 8, 8}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 8, 8}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 5.0f, 5.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 5.0f, 5.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 9.0f, 9.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 9.0f, 9.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 13.0f, 13.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f}, 1e-4);
}

TEST(Resize, ResizeDownsampleSizesLinearPytorchHalfPixel) {
  // onnx node test test_resize_downsample_sizes_linear_pytorch_half_pixel
  Node node = MakeNode("Resize", 4, 1, {StringAttr("coordinate_transformation_mode", "pytorch_half_pixel"), StringAttr("mode", "linear")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Value(), Tensor::FromVector<int64_t>({1, 1, 3, 1}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 3, 1}, {1.66666663f, 7.0f, 12.333333f}, 1e-4);
}

TEST(Resize, ResizeUpsampleSizesNearestCeilHalfPixel) {
  // onnx node test test_resize_upsample_sizes_nearest_ceil_half_pixel
  Node node = MakeNode("Resize", 4, 1, {StringAttr("coordinate_transformation_mode", "half_pixel"), StringAttr("mode", "nearest"), StringAttr("nearest_mode", "ceil")});
  auto run = RunOp(node, 19, {Tensor::FromVector<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f, 16.0f}, {1, 1, 4, 4}), Value(), Value(), Tensor::FromVector<int64_t>({1, 1, 8, 8}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {1, 1, 8, 8}, {1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f}, 1e-4);
}

TEST(Resize, Uint8LinearRoundsHalfToEven) {
  // onnx.reference Resize(mode=linear) on uint8 [[0,10,255],[7,100,3]], scales [1,1,2,1.5]
  Node node = MakeNode("Resize", 3, 1, {StringAttr("mode", "linear")});
  auto run = RunOp(node, 13, {Tensor::FromVector<uint8_t>({0, 10, 255, 7, 100, 3}, {1, 1, 2, 3}), Value(),
                              Tensor::FromVector<float>({1, 1, 2, 1.5f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {1, 1, 4, 4},
                            {0, 5, 51, 214, 2, 17, 59, 165, 5, 41, 76, 68, 7, 54, 84, 19});
}

TEST(Resize, Uint8CubicOvershootSaturates) {
  // onnx.reference Resize(mode=cubic) on uint8 [[0,255,0,255],[255,0,255,0]], scales [1,1,1,1.5]:
  // the cubic kernel overshoots below 0 and above 255, and saturate_cast clamps.
  Node node = MakeNode("Resize", 3, 1, {StringAttr("mode", "cubic")});
  auto run = RunOp(node, 13, {Tensor::FromVector<uint8_t>({0, 255, 0, 255, 255, 0, 255, 0}, {1, 1, 2, 4}), Value(),
                              Tensor::FromVector<float>({1, 1, 1, 1.5f}, {4})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<uint8_t>(run->outputs[0].tensor(), {1, 1, 2, 6},
                            {0, 151, 236, 19, 104, 255, 255, 104, 19, 236, 151, 0});
}

// np.repeat(np.repeat([[1,2],[3,4]], 2, axis=0), 3, axis=1)
const std::vector<float> kRepeated = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};

TEST(Resize, UpsampleSevenAndNineAreRepeats) {
  auto x = Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  auto v7 = RunOp(MakeNode("Upsample", 1, 1, {FloatsAttr("scales", {2, 3})}), 7, {x});
  ASSERT_TRUE(v7.ok()) << v7.status().ToString();
  ExpectTensorNear<float>(v7->outputs[0].tensor(), {4, 6}, kRepeated);
  auto v9 = RunOp(MakeNode("Upsample", 2, 1), 9, {x, Tensor::FromVector<float>({2, 3}, {2})});
  ASSERT_TRUE(v9.ok()) << v9.status().ToString();
  ExpectTensorNear<float>(v9->outputs[0].tensor(), {4, 6}, kRepeated);
  auto r10 = RunOp(MakeNode("Resize", 2, 1), 10, {x, Tensor::FromVector<float>({2, 3}, {2})});
  ASSERT_TRUE(r10.ok()) << r10.status().ToString();
  ExpectTensorNear<float>(r10->outputs[0].tensor(), {4, 6}, kRepeated);
}

TEST(Resize, NearestCopiesInt64Exactly) {
  const int64_t big = (int64_t{1} << 60) + 1;
  auto run = RunOp(MakeNode("Resize", 4, 1), 13,
                   {Tensor::FromVector<int64_t>({big, -big}, {1, 2}), Value(), Value(),
                    Tensor::FromVector<int64_t>({1, 4}, {2})});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<int64_t>(run->outputs[0].tensor(), {1, 4}, {big, big, -big, -big});
}

TEST(Resize, InvalidArgumentsAreErrors) {
  auto x = Tensor::FromVector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  // Both scales and sizes.
  auto both = RunOp(MakeNode("Resize", 4, 1), 13,
                    {x, Value(), Tensor::FromVector<float>({1, 1, 2, 2}, {4}),
                     Tensor::FromVector<int64_t>({1, 1, 4, 4}, {4})});
  EXPECT_FALSE(both.ok());
  // Wrong number of scales.
  auto count = RunOp(MakeNode("Resize", 3, 1), 13, {x, Value(), Tensor::FromVector<float>({2, 2}, {2})});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("node 'test'"), std::string::npos);
  // Non-positive scale.
  EXPECT_FALSE(RunOp(MakeNode("Resize", 3, 1), 13, {x, Value(), Tensor::FromVector<float>({1, 1, 0, 2}, {4})}).ok());
  // Axis out of range.
  auto axes = RunOp(MakeNode("Resize", 3, 1, {IntsAttr("axes", {4})}), 18,
                    {x, Value(), Tensor::FromVector<float>({2}, {1})});
  ASSERT_FALSE(axes.ok());
  EXPECT_NE(axes.status().message().find("out of range"), std::string::npos);
  // Sizes beyond any tensor (run_fuzzer finding: near INT64_MAX they overflowed sums of dims).
  auto huge = RunOp(MakeNode("Resize", 4, 1), 13,
                    {x, Value(), Value(), Tensor::FromVector<int64_t>({1, 1, 2, 0x4444444444444444}, {4})});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos) << huge.status().ToString();
  // Unknown mode.
  EXPECT_FALSE(RunOp(MakeNode("Resize", 3, 1, {StringAttr("mode", "bicubic")}), 13,
                     {x, Value(), Tensor::FromVector<float>({1, 1, 2, 2}, {4})}).ok());
}

TEST(Resize, ShapeRuleUsesKnownSizes) {
  Node node = MakeNode("Resize", 4, 1);
  TypeInfo x = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(3), Dim::Known(4), Dim::Known(4)});
  TypeInfo sizes_type = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(4)});
  Tensor sizes = Tensor::FromVector<int64_t>({2, 3, 8, 6}, {4});
  InferenceContext ictx{node, 13, {&x, nullptr, nullptr, &sizes_type}, {nullptr, nullptr, nullptr, &sizes},
                        {TypeInfo{}}, {}, nullptr};
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Resize", 13).value();
  ASSERT_TRUE(schema->infer(ictx).ok());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[2,3,8,6]");
}

// With scales and a partly unknown input: a known dim is scaled, an unknown
// one kept, symbol and all, where its scale is 1, else left unknown (a
// dynamic batch keeps its name and the channels stay known, which the
// blocked layout pass needs; the unknown height is not guessed).
TEST(Resize, ShapeRuleScalesTheKnownDimsOfAPartlyUnknownInput) {
  Node node = MakeNode("Resize", 3, 1);
  TypeInfo x = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(8), Dim::Unknown(), Dim::Known(5)});
  TypeInfo scales_type = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Known(4)});
  Tensor scales = Tensor::FromVector<float>({1.f, 1.f, 2.f, 1.5f}, {4});
  InferenceContext ictx{node, 13, {&x, nullptr, &scales_type}, {nullptr, nullptr, &scales}, {TypeInfo{}}, {}, nullptr};
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Resize", 13).value();
  ASSERT_TRUE(schema->infer(ictx).ok());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[N,8,?,7]");
}

}  // namespace
}  // namespace nee
