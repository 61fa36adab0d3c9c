// The float32 FusedConv kernel (ep/cpu/fused_conv_fast.cc) against FusedConv's
// reference (Conv's reference, then the activation): every activation, the
// Conv strategies (pointwise, depthwise, im2col, batched, ...), element
// counts that leave vector tails, NaN, 1 and 3 threads; plus the reference itself on
// values computed by hand, and invalid activation attributes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

using testing::FloatsAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

struct ActivationCase {
  std::string name;
  std::vector<float> params;
};

const std::vector<ActivationCase> kActivations = {
    {"Relu", {}},           {"Tanh", {}},         {"Sigmoid", {}},     {"Silu", {}},
    {"LeakyRelu", {0.1f}},  {"Clip", {0.f, 6.f}}, {"Clip", {-0.5f, 0.25f}}, {"HardSigmoid", {0.3f, 0.4f}},
    {"HardSwish", {}},
};

// An empty activation name: no activation attribute (a Conv fused with its residual Add only).
Node FusedConvNode(const ActivationCase& act, std::vector<Attribute> conv_attrs, size_t inputs) {
  if (!act.name.empty()) conv_attrs.push_back(StringAttr("activation", act.name));
  if (!act.params.empty()) conv_attrs.push_back(FloatsAttr("activation_params", act.params));
  return testing::MakeNode("FusedConv", inputs, 1, conv_attrs, "com.microsoft");
}

struct Geometry {
  const char* name;
  std::vector<int64_t> x, w;
  std::vector<Attribute> attrs;
};

const std::vector<Geometry> kGeometries = {
    {"pointwise", {1, 8, 5, 7}, {6, 8, 1, 1}, {}},
    {"depthwise", {1, 4, 9, 9}, {4, 1, 3, 3}, {IntAttr("group", 4), IntsAttr("pads", {1, 1, 1, 1})}},
    {"im2col", {2, 3, 7, 5}, {5, 3, 3, 3}, {IntsAttr("strides", {2, 1})}},  // 9 pixels: now batched
    {"1-D", {1, 3, 11}, {4, 3, 2}, {}},
    // Two k-blocks of SGEMM (40 x 9 = 360 > 256) and ragged tiles (14 output
    // channels, 156 columns): the epilogue runs once, after the last block.
    {"deep", {1, 40, 12, 13}, {14, 40, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
    // Winograd F(2x2, 3x3), odd output width.
    {"winograd", {1, 20, 10, 9}, {18, 20, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
    // The 16-channel blocked depthwise kernel with a partial block.
    {"depthwise_blocked", {1, 21, 9, 11}, {21, 1, 3, 3}, {IntAttr("group", 21), IntsAttr("pads", {1, 1, 1, 1})}},
    // The planar depthwise kernel (rows of 12 or more), stride 1 and 2.
    {"depthwise_planar", {1, 3, 11, 35}, {3, 1, 3, 3}, {IntAttr("group", 3), IntsAttr("pads", {1, 1, 1, 1})}},
    // The flat kernel (AVX2, stride 1, rows under 8 wide as wide as the
    // input's): planes of 49 and 30 outputs, 3x3 and 5x5; a 14x14 beside it.
    {"depthwise_flat", {1, 13, 7, 7}, {13, 1, 3, 3}, {IntAttr("group", 13), IntsAttr("pads", {1, 1, 1, 1})}},
    {"depthwise_flat_5x5", {2, 3, 5, 6}, {3, 1, 5, 5}, {IntAttr("group", 3), IntsAttr("pads", {2, 2, 2, 2})}},
    {"depthwise_flat_14", {1, 4, 14, 14}, {4, 1, 3, 3}, {IntAttr("group", 4), IntsAttr("pads", {1, 1, 1, 1})}},
    // The narrow stride-2 kernel (AVX2, 3x3, pads 1, output rows of at most
    // 8): even and odd input widths, rows of 7 and 8, and 5 planes so that
    // the last one's reads would leave the tensor.
    {"depthwise_narrow", {1, 5, 14, 14}, {5, 1, 3, 3},
     {IntAttr("group", 5), IntsAttr("pads", {1, 1, 1, 1}), IntsAttr("strides", {2, 2})}},
    {"depthwise_narrow_odd", {2, 3, 9, 15}, {3, 1, 3, 3},
     {IntAttr("group", 3), IntsAttr("pads", {1, 1, 1, 1}), IntsAttr("strides", {2, 2})}},
    {"depthwise_planar_stride2", {1, 3, 10, 40}, {3, 1, 5, 5},
     {IntAttr("group", 3), IntsAttr("pads", {2, 2, 2, 2}), IntsAttr("strides", {2, 2})}},
    // The batched path (several images, few output pixels each): 1-D k3 with
    // pads, stride 2 with groups, a small 2-D image, and 70 images of 5
    // pixels (several chunks; 13 channels: a ragged SGEMM row block). Two
    // images of 35 pixels stay on the im2col path.
    {"batched_1d", {5, 9, 4}, {6, 9, 3}, {IntsAttr("pads", {1, 1})}},
    {"batched_1d_stride2_groups2", {7, 8, 4}, {6, 4, 3},
     {IntAttr("group", 2), IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
    {"batched_2d", {3, 4, 3, 3}, {5, 4, 3, 3}, {IntsAttr("pads", {1, 1, 1, 1})}},
    {"batched_many_images", {70, 3, 6}, {13, 3, 3}, {IntsAttr("pads", {0, 1})}},
    {"im2col_two_images", {2, 3, 11, 9}, {5, 3, 3, 3}, {IntsAttr("strides", {2, 1})}},
    // The pixel-major path (AVX2): its transpose finishes whole blocks of 8
    // channels x 8 pixels in registers and the rest after; 19 channels (two
    // blocks and 3 more) and rows of 10 and 13 pixels leave both kinds of rest.
    {"pixel_stride2", {1, 5, 21, 19}, {19, 5, 3, 3}, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
    {"pixel_stem_6x6", {2, 3, 26, 26}, {16, 3, 6, 6}, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}},
    // The small-depth pointwise kernel (AVX2; Sigmoid, SiLU and Tanh after
    // the tiles): 551 pixels (a last tile of 23), 9 channels (4 + 4 + 1).
    {"pointwise_small", {2, 6, 19, 29}, {9, 6, 1, 1}, {}},
    // Its spans: 2173 pixels are two spans of 1008 and one of 157 (six whole
    // tiles, which the first channel block reads in place and copies, and a
    // part tile of 13, copied first); 130 and 256 input channels with at most
    // 64 outputs cut the spans to 504 and 240 pixels (713 = 504 + 209,
    // 272 = 240 + 32).
    {"pointwise_small_spans", {1, 20, 41, 53}, {11, 20, 1, 1}, {}},
    {"pointwise_small_deep", {1, 130, 23, 31}, {37, 130, 1, 1}, {}},
    {"pointwise_small_deeper", {2, 256, 16, 17}, {64, 256, 1, 1}, {}},
    // 300 input channels (spans of 216 pixels: 272 = 216 + 56) and 90
    // outputs: 22 blocks of 4 and one of 2.
    {"pointwise_small_deepest", {1, 300, 16, 17}, {90, 300, 1, 1}, {}},
    // The AVX-512 pointwise kernel (Sigmoid, SiLU and Tanh after each tile):
    // 63 pixels (a full tile of 48 and a tail of 15), 21 channels (8 + 8 +
    // 5); two images of 169 pixels (a last vector of 9) over 70 channels.
    {"pointwise512", {1, 17, 9, 7}, {21, 17, 1, 1}, {}},
    {"pointwise512_two_images", {2, 70, 13, 13}, {9, 70, 1, 1}, {}},
    // Pointwise convs of fewer pixels than a vector, on the pixel-major path
    // (one image: several images of few pixels take the batched path): one
    // pixel (an SE block's or a classifier's 1x1, its transpose skipped; 70
    // channels: four blocks of 16 at a time, then one, 6 left over for the
    // finisher; 300 taps: three depth blocks); two and three pixels (two
    // blocks at a time and one).
    {"pixel_pointwise_one_pixel", {1, 300, 1, 1}, {70, 300, 1, 1}, {}},
    {"pixel_pointwise_two_pixels", {1, 40, 1, 2}, {50, 40, 1, 1}, {}},
    {"pixel_pointwise_three_pixels", {1, 24, 3, 1}, {33, 24, 1, 1}, {}},
};

// The widest kernels the CPU has, then AVX2 at most (the AVX2 kernels on an
// AVX-512 machine).
class FusedConvIsaTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

TEST_P(FusedConvIsaTest, AgreesWithTheReferenceForEveryActivationAndGeometry) {
  std::mt19937 rng(7);
  for (const Geometry& g : kGeometries) {
    // Values in [-4, 4) so that Clip and HardSigmoid saturate on both sides; one NaN.
    Tensor x = testing::RandomTensor(g.x, rng);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] *= 4.f;
    x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    Tensor w = testing::RandomTensor(g.w, rng);
    Tensor b = testing::RandomTensor({g.w[0]}, rng);
    for (const ActivationCase& act : kActivations) {
      Node node = FusedConvNode(act, g.attrs, 3);
      auto ref = testing::RunOp(node, 1, {Value(x), Value(w), Value(b)});
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      for (int threads : {1, 3}) {
        auto got = testing::RunKernel(cpu::FusedConvFloat, node, 1, {Value(x), Value(w), Value(b)}, threads);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(got->dims(), want.dims());
        for (int64_t i = 0; i < want.num_elements(); ++i) {
          const float r = want.data<float>()[i], f = got->data<float>()[i];
          if (std::isnan(r)) {
            EXPECT_TRUE(std::isnan(f)) << g.name << " " << act.name << " at " << i;
          } else {
            EXPECT_NEAR(f, r, 1e-5f + 1e-5f * std::fabs(r)) << g.name << " " << act.name << " at " << i;
          }
        }
      }
    }
  }
}

TEST_P(FusedConvIsaTest, AddsZBeforeTheActivation) {
  std::mt19937 rng(11);
  for (const Geometry& g : kGeometries) {
    Tensor x = testing::RandomTensor(g.x, rng);
    Tensor w = testing::RandomTensor(g.w, rng);
    for (const ActivationCase& act :
         std::vector<ActivationCase>{{"Relu", {}}, {"Silu", {}}, {"Clip", {0.f, 0.5f}}, {"", {}}}) {
      Node probe = FusedConvNode(act, g.attrs, 2);
      auto shape = testing::RunOp(probe, 1, {Value(x), Value(w)});
      ASSERT_TRUE(shape.ok()) << shape.status().ToString();
      Tensor z = testing::RandomTensor(shape->outputs[0].tensor().dims(), rng);
      Node node = FusedConvNode(act, g.attrs, 4);
      Tensor b = testing::RandomTensor({g.w[0]}, rng);
      const std::vector<Value> inputs = {Value(x), Value(w), Value(b), Value(z)};
      auto ref = testing::RunOp(node, 1, inputs);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      auto got = testing::RunKernel(cpu::FusedConvFloat, node, 1, inputs, 3);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      for (int64_t i = 0; i < want.num_elements(); ++i)
        EXPECT_NEAR(got->data<float>()[i], want.data<float>()[i], 1e-5f + 1e-5f * std::fabs(want.data<float>()[i]))
            << g.name << " " << act.name << " at " << i;
    }
  }
  const Geometry& g = kGeometries[2];
  Tensor x = testing::RandomTensor(g.x, rng);
  Tensor w = testing::RandomTensor(g.w, rng);
  // A Z of another shape is an error, not a broadcast.
  Node node = FusedConvNode({"Relu", {}}, g.attrs, 4);
  Tensor b = testing::RandomTensor({g.w[0]}, rng);
  const std::vector<Value> bad = {Value(x), Value(w), Value(b), Value(testing::RandomTensor({1}, rng))};
  EXPECT_FALSE(testing::RunKernel(cpu::FusedConvFloat, node, 1, bad, 1).ok());
}

// The pointwise kernels with every activation and a residual: bitwise the
// same at 1, 2 and 3 threads (the pixels and channel blocks are cut
// differently per thread count), on shapes whose cuts differ: few pixels
// (the output channels cut as well), many (several chunks), partial vectors.
TEST_P(FusedConvIsaTest, PointwiseBitwiseIndependentOfThreadCount) {
  std::mt19937 rng(5);
  const std::vector<Geometry> shapes = {
      {"few_pixels", {1, 40, 5, 7}, {255, 40, 1, 1}, {}},
      {"many_pixels", {1, 12, 75, 71}, {16, 12, 1, 1}, {}},
      {"two_images", {2, 33, 11, 13}, {13, 33, 1, 1}, {}},
      {"small_spans", {1, 20, 41, 53}, {11, 20, 1, 1}, {}},
      {"small_deep", {1, 130, 23, 31}, {37, 130, 1, 1}, {}},
      {"small_deeper", {2, 256, 16, 17}, {64, 256, 1, 1}, {}},
      {"small_deepest", {1, 300, 16, 17}, {90, 300, 1, 1}, {}},
  };
  for (const Geometry& g : shapes) {
    Tensor x = testing::RandomTensor(g.x, rng);
    Tensor w = testing::RandomTensor(g.w, rng);
    Tensor b = testing::RandomTensor({g.w[0]}, rng);
    Tensor z = testing::RandomTensor({g.x[0], g.w[0], g.x[2], g.x[3]}, rng);
    for (const ActivationCase& act : kActivations) {
      Node node = FusedConvNode(act, g.attrs, 4);
      const std::vector<Value> inputs = {Value(x), Value(w), Value(b), Value(z)};
      auto ref = testing::RunOp(node, 1, inputs);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      auto one = testing::RunKernel(cpu::FusedConvFloat, node, 1, inputs, 1);
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      for (int64_t i = 0; i < want.num_elements(); ++i)
        ASSERT_NEAR(one->data<float>()[i], want.data<float>()[i], 1e-5f + 1e-5f * std::fabs(want.data<float>()[i]))
            << g.name << " " << act.name << " at " << i;
      for (int threads : {2, 3}) {
        auto got = testing::RunKernel(cpu::FusedConvFloat, node, 1, inputs, threads);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        EXPECT_EQ(0, std::memcmp(got->data<float>(), one->data<float>(), sizeof(float) * want.num_elements()))
            << g.name << " " << act.name << " threads=" << threads;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, FusedConvIsaTest, ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2),
                         [](const auto& info) { return info.param == cpu::SgemmIsa::kAvx2 ? "avx2" : "dispatched"; });

TEST(FusedConvFast, ConvsTheFastKernelDoesNotTakeGetTheActivationOnce) {
  // Four spatial dims: the fast Conv hands them to Conv's reference kernel, and
  // the activation is applied once (LeakyRelu twice would scale by alpha^2).
  std::mt19937 rng(9);
  Tensor x = testing::RandomTensor({1, 2, 3, 3, 3, 3}, rng);
  Tensor w = testing::RandomTensor({2, 2, 2, 2, 2, 2}, rng);
  Node node = FusedConvNode({"LeakyRelu", {0.5f}}, {}, 2);
  auto ref = testing::RunOp(node, 1, {Value(x), Value(w)});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto got = testing::RunKernel(cpu::FusedConvFloat, node, 1, {Value(x), Value(w)}, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Tensor& want = ref->outputs[0].tensor();
  ASSERT_EQ(got->dims(), want.dims());
  bool negative = false;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    EXPECT_EQ(got->data<float>()[i], want.data<float>()[i]) << i;
    negative |= want.data<float>()[i] < 0;
  }
  EXPECT_TRUE(negative);  // the case actually exercises LeakyRelu's slope
}

TEST(FusedConvFast, ReferenceAppliesTheActivationAfterConvAndBias) {
  // 1x1 conv with weight 1 and bias -1 over [-2, 0, 1, 3]: Conv gives [-3, -1, 0, 2].
  Tensor x = Tensor::FromVector(std::vector<float>{-2.f, 0.f, 1.f, 3.f}, {1, 1, 1, 4});
  Tensor w = Tensor::FromVector(std::vector<float>{1.f}, {1, 1, 1, 1});
  Tensor b = Tensor::FromVector(std::vector<float>{-1.f}, {1});
  auto run = [&](const ActivationCase& act) {
    Node node = FusedConvNode(act, {}, 3);
    auto out = testing::RunOp(node, 1, {Value(x), Value(w), Value(b)});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->outputs[0].tensor() : Tensor();
  };
  testing::ExpectTensorNear<float>(run({"Relu", {}}), {1, 1, 1, 4}, {0.f, 0.f, 0.f, 2.f});
  testing::ExpectTensorNear<float>(run({"LeakyRelu", {0.5f}}), {1, 1, 1, 4}, {-1.5f, -0.5f, 0.f, 2.f});
  testing::ExpectTensorNear<float>(run({"Clip", {-2.f, 1.f}}), {1, 1, 1, 4}, {-2.f, -1.f, 0.f, 1.f});
  testing::ExpectTensorNear<float>(run({"HardSigmoid", {0.25f, 0.5f}}), {1, 1, 1, 4}, {0.f, 0.25f, 0.5f, 1.f});
  testing::ExpectTensorNear<float>(run({"HardSwish", {}}), {1, 1, 1, 4}, {0.f, -1.f / 3.f, 0.f, 2.f * 5.f / 6.f});
  testing::ExpectTensorNear<float>(run({"Silu", {}}), {1, 1, 1, 4},
                                   {-3.f / (1.f + std::exp(3.f)), -1.f / (1.f + std::exp(1.f)), 0.f,
                                    2.f / (1.f + std::exp(-2.f))});
}

TEST(FusedConvFast, RejectsUnknownActivationsAndWrongParameterCounts) {
  Tensor x = Tensor::FromVector(std::vector<float>{1.f, 2.f}, {1, 1, 2});
  Tensor w = Tensor::FromVector(std::vector<float>{1.f}, {1, 1, 1});
  for (const ActivationCase& bad : std::vector<ActivationCase>{{"Gelu", {}}, {"Clip", {0.f}}, {"LeakyRelu", {}}}) {
    Node node = FusedConvNode(bad, {}, 2);
    EXPECT_FALSE(testing::RunOp(node, 1, {Value(x), Value(w)}).ok()) << bad.name;
    EXPECT_FALSE(testing::RunKernel(cpu::FusedConvFloat, node, 1, {Value(x), Value(w)}, 1).ok()) << bad.name;
  }
}

}  // namespace
}  // namespace nee
