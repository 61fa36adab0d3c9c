// The optimized float32 ConvTranspose (ep/cpu/conv_transpose_fast.cc) against
// the reference kernel over the attributes that decide output size and
// padding, for thread-count independence, and against numpy values.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

using testing::RandomTensor;

Result<Tensor> RunFast(const Node& node, const std::vector<Value>& inputs, int threads) {
  return testing::RunKernel(cpu::ConvTransposeFloat, node, 22, inputs, threads);
}

struct Case {
  std::string name;
  std::vector<int64_t> x_dims, w_dims;  // w: [C, M/group, k...]
  bool bias;
  std::vector<Attribute> attrs;
};

std::vector<Case> Cases() {
  return {
      {"2d_plain", {2, 3, 5, 6}, {3, 4, 3, 3}, true, {}},
      {"2d_stride2_pads", {1, 4, 6, 5}, {4, 2, 3, 3}, true, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_asym_pads_dilation", {1, 2, 7, 6}, {2, 3, 3, 2}, false,
       {IntsAttr("dilations", {2, 3}), IntsAttr("pads", {0, 2, 1, 0}), IntsAttr("strides", {1, 2})}},
      {"2d_output_padding", {1, 3, 4, 4}, {3, 2, 3, 3}, true,
       {IntsAttr("strides", {3, 2}), IntsAttr("output_padding", {1, 1})}},
      {"2d_output_shape", {1, 2, 5, 5}, {2, 3, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("output_shape", {10, 11})}},
      {"2d_output_shape_beyond_full", {1, 2, 3, 3}, {2, 2, 3, 3}, true,
       {IntsAttr("strides", {2, 2}), IntsAttr("output_shape", {9, 10})}},
      {"2d_output_shape_with_n_c", {1, 2, 4, 4}, {2, 2, 2, 2}, false,
       {IntsAttr("strides", {2, 2}), IntsAttr("output_shape", {1, 2, 7, 8})}},
      {"2d_same_upper", {1, 2, 5, 4}, {2, 3, 3, 4}, true, {IntsAttr("strides", {2, 2}), StringAttr("auto_pad", "SAME_UPPER")}},
      {"2d_same_lower", {1, 2, 5, 4}, {2, 3, 3, 4}, true, {IntsAttr("strides", {2, 3}), StringAttr("auto_pad", "SAME_LOWER")}},
      {"2d_valid", {1, 2, 4, 3}, {2, 2, 2, 3}, true, {StringAttr("auto_pad", "VALID"), IntsAttr("strides", {2, 1})}},
      {"2d_groups", {2, 6, 4, 5}, {6, 2, 3, 3}, true, {IntAttr("group", 3), IntsAttr("strides", {2, 1})}},
      {"2d_depthwise_like", {1, 4, 6, 6}, {4, 1, 4, 4}, true,
       {IntAttr("group", 4), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"2d_kernel_shape_attr", {1, 2, 3, 3}, {2, 2, 2, 2}, false, {IntsAttr("kernel_shape", {2, 2})}},
      {"2d_large", {1, 32, 16, 16}, {32, 16, 4, 4}, true, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"1d", {2, 3, 9}, {3, 2, 4}, true, {IntsAttr("strides", {3}), IntsAttr("pads", {1, 2})}},
      {"3d", {1, 2, 3, 4, 3}, {2, 2, 2, 3, 2}, true,
       {IntsAttr("strides", {2, 1, 2}), IntsAttr("pads", {0, 1, 1, 1, 0, 0}), IntsAttr("output_padding", {1, 0, 1})}},
      {"batch4_groups2", {4, 4, 5, 5}, {4, 3, 3, 3}, true, {IntAttr("group", 2), IntsAttr("pads", {1, 1, 1, 1})}},
      // One tap per output (kernel = stride): a 2x2 stride-2 upsampling in bands of 3 input rows (14 bands),
      // one of 3x2 by groups and batches, without bias, and a 1-D one.
      {"2d_one_tap_bands", {1, 8, 40, 300}, {8, 16, 2, 2}, true, {IntsAttr("strides", {2, 2})}},
      {"2d_one_tap_groups", {2, 6, 5, 7}, {6, 2, 3, 2}, false, {IntAttr("group", 3), IntsAttr("strides", {3, 2})}},
      {"1d_one_tap", {2, 3, 10}, {3, 2, 4}, true, {IntsAttr("strides", {4})}},
  };
}

std::vector<Value> Inputs(const Case& c, std::mt19937& rng) {
  std::vector<Value> v = {Value(RandomTensor(c.x_dims, rng)), Value(RandomTensor(c.w_dims, rng))};
  int64_t group = 1;
  for (const Attribute& a : c.attrs)
    if (a.name == "group") group = a.i;
  if (c.bias) v.push_back(Value(RandomTensor({c.w_dims[1] * group}, rng)));
  return v;
}

TEST(ConvTransposeFast, AgreesWithReferenceKernel) {
  std::mt19937 rng(21);
  for (const Case& c : Cases()) {
    Node node = testing::MakeNode("ConvTranspose", c.bias ? 3 : 2, 1, c.attrs);
    std::vector<Value> inputs = Inputs(c, rng);
    auto ref = testing::RunOp(node, 22, inputs);
    ASSERT_TRUE(ref.ok()) << c.name << ": " << ref.status().ToString();
    const Tensor& want = ref->outputs[0].tensor();
    for (int threads : {1, 3}) {
      auto got = RunFast(node, inputs, threads);
      ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
      ASSERT_EQ(got->dims(), want.dims()) << c.name;
      for (int64_t i = 0; i < want.num_elements(); ++i)
        ASSERT_NEAR(got->data<float>()[i], want.data<float>()[i], 2e-5 * (1 + std::abs(want.data<float>()[i])))
            << c.name << " threads=" << threads << " at " << i;
    }
  }
}

TEST(ConvTransposeFast, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(22);
  for (const Case& c : Cases()) {
    Node node = testing::MakeNode("ConvTranspose", c.bias ? 3 : 2, 1, c.attrs);
    std::vector<Value> inputs = Inputs(c, rng);
    auto one = RunFast(node, inputs, 1);
    auto two = RunFast(node, inputs, 2);
    ASSERT_TRUE(one.ok() && two.ok()) << c.name;
    EXPECT_EQ(0, std::memcmp(one->data<float>(), two->data<float>(), sizeof(float) * one->num_elements())) << c.name;
  }
}

TEST(ConvTransposeFast, InvalidInputsGiveTheReferenceError) {
  Node node = testing::MakeNode("ConvTranspose", 2, 1, {IntAttr("group", 2)});
  std::vector<Value> inputs = {Value(Tensor::FromVector(std::vector<float>(3 * 4, 1.f), {1, 3, 2, 2})),
                               Value(Tensor::FromVector(std::vector<float>(3 * 2 * 4, 1.f), {3, 2, 2, 2}))};
  auto got = RunFast(node, inputs, 1);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("group"), std::string::npos) << got.status().ToString();
}

// Expected values from numpy: x = np.arange(1*2*2*3).reshape(1, 2, 2, 3) * 0.5 - 1,
// w = (np.arange(2*2*2*2) % 5 - 2).reshape(2, 2, 2, 2) * 0.25, b = [0.5, -1],
// stride 2, pads [1, 0, 0, 1]: y = zeros of the full size, then
// y[n, m, i*2 + kh, j*2 + kw] += x[n, c, i, j] * w[c, m, kh, kw] over all
// indices, then the pads cropped off and the bias added.
TEST(ConvTransposeFast, MatchesNumpy) {
  std::vector<float> xv(12), wv(16);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i) * 0.5f - 1.f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(static_cast<int>(i % 5) - 2) * 0.25f;
  Node node = testing::MakeNode("ConvTranspose", 3, 1, {IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 0, 0, 1})});
  std::vector<Value> inputs = {Value(Tensor::FromVector(xv, {1, 2, 2, 3})), Value(Tensor::FromVector(wv, {2, 2, 2, 2})),
                               Value(Tensor::FromVector(std::vector<float>{0.5f, -1.f}, {2}))};
  auto got = RunFast(node, inputs, 2);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  testing::ExpectTensorNear<float>(got.value(), {1, 2, 3, 5}, {-0.5, -0.25, -0.75, -0.25, -1.0, 1.125, 2.125, 1.0, 2.25, 0.875, -1.25, -0.25, -1.5, -0.25, -1.75,
                                    0.25, -2.0, 0.375, -2.25, 0.5, -0.75, -0.375, -0.5, -0.5, -0.25, 0.625, -2.75, 0.75, -3.0, 0.875});
}

}  // namespace
}  // namespace nee
