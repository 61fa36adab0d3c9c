// The optimized float32 pools (ep/cpu/pool_fast.cc) against the reference
// pool kernels (bitwise for MaxPool and AveragePool, whose fast paths keep the
// reference's summation order), and against values computed with numpy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"

namespace nee {
namespace {

using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

using testing::RandomTensor;

Result<Tensor> RunFast(KernelFn kernel, const Node& node, int64_t opset, const Value& x, int threads) {
  return testing::RunKernel(kernel, node, opset, {x}, threads);
}

struct PoolCase {
  std::string name;
  std::vector<int64_t> x_dims;
  int64_t opset;
  std::vector<Attribute> attrs;
};

std::vector<PoolCase> Cases() {
  return {
      {"2x2_s2", {2, 3, 8, 9}, 17, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})}},
      {"3x3_s2_pad1", {1, 4, 11, 10}, 17,
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"3x3_s1_pad1", {1, 2, 7, 7}, 17, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"asym_pads", {1, 2, 9, 6}, 17, {IntsAttr("kernel_shape", {3, 2}), IntsAttr("pads", {2, 0, 0, 1})}},
      {"ceil_mode", {1, 3, 10, 11}, 17,
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntAttr("ceil_mode", 1)}},
      {"ceil_mode_padded", {1, 2, 9, 9}, 17,
       {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1}),
        IntAttr("ceil_mode", 1)}},
      {"dilated", {1, 2, 12, 12}, 19,
       {IntsAttr("kernel_shape", {2, 3}), IntsAttr("dilations", {2, 2}), IntsAttr("pads", {1, 2, 1, 2})}},
      {"dilations_before_they_existed", {1, 2, 8, 8}, 11,
       {IntsAttr("kernel_shape", {2, 2}), IntsAttr("dilations", {2, 2})}},
      {"same_upper", {1, 2, 7, 8}, 17,
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), StringAttr("auto_pad", "SAME_UPPER")}},
      {"same_lower", {1, 2, 7, 8}, 17,
       {IntsAttr("kernel_shape", {2, 3}), StringAttr("auto_pad", "SAME_LOWER")}},
      {"valid", {1, 2, 7, 8}, 17, {IntsAttr("kernel_shape", {3, 2}), StringAttr("auto_pad", "VALID")}},
      {"1d", {2, 3, 17}, 17, {IntsAttr("kernel_shape", {3}), IntsAttr("strides", {2}), IntsAttr("pads", {1, 1})}},
      {"3d", {1, 2, 5, 6, 7}, 17,
       {IntsAttr("kernel_shape", {2, 3, 2}), IntsAttr("strides", {2, 1, 2}), IntsAttr("pads", {1, 1, 0, 0, 1, 1})}},
      {"kernel_larger_than_input_padded", {1, 1, 2, 2}, 17,
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"old_opset_7", {1, 2, 6, 6}, 7, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})}},
      // Rows wide enough for the vector kernel (eight and more interior columns).
      {"wide_3x3_s1", {1, 2, 5, 45}, 17, {IntsAttr("kernel_shape", {3, 3}), IntsAttr("pads", {1, 1, 1, 1})}},
      {"wide_2x2_s2", {2, 3, 6, 70}, 17, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})}},
      {"wide_3x3_s2_ceil", {1, 2, 7, 61}, 17,
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}), IntsAttr("pads", {1, 1, 1, 1}),
        IntAttr("ceil_mode", 1)}},
      {"wide_dilated_s2", {1, 2, 9, 50}, 19,
       {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {1, 2}), IntsAttr("dilations", {2, 2}),
        IntsAttr("pads", {2, 2, 2, 2})}},
      {"wide_1d_s1", {2, 2, 100}, 17, {IntsAttr("kernel_shape", {5}), IntsAttr("pads", {2, 2})}},
      {"wide_3d", {1, 2, 3, 4, 40}, 17, {IntsAttr("kernel_shape", {2, 2, 3}), IntsAttr("pads", {0, 1, 1, 1, 0, 1})}},
      // Stride 1 with pads below the kernel: MaxPool's padded-plane path (YOLO's SPPF, odd planes).
      {"sppf_5x5_pad2", {1, 5, 20, 20}, 13, {IntsAttr("kernel_shape", {5, 5}), IntsAttr("pads", {2, 2, 2, 2})}},
      {"5x5_pad2_odd", {2, 3, 13, 37}, 13, {IntsAttr("kernel_shape", {5, 5}), IntsAttr("pads", {2, 2, 2, 2})}},
      {"4x3_asym_pads", {1, 2, 9, 17}, 13, {IntsAttr("kernel_shape", {4, 3}), IntsAttr("pads", {3, 0, 1, 2})}},
      {"pads_as_big_as_the_kernel", {1, 2, 6, 6}, 13, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("pads", {2, 2, 2, 2})}},
      {"5x5_single_column", {1, 2, 7, 1}, 13, {IntsAttr("kernel_shape", {5, 5}), IntsAttr("pads", {2, 2, 2, 2})}},
  };
}

class PoolFastTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PoolFastTest, BitwiseEqualToReference) {
  const std::string op = GetParam();
  auto kernel = op == "MaxPool" ? cpu::MaxPoolFloat : cpu::AveragePoolFloat;
  std::mt19937 rng(7);
  for (const PoolCase& c : Cases()) {
    for (int include_pad = 0; include_pad < (op == "AveragePool" ? 2 : 1); ++include_pad) {
      std::vector<Attribute> attrs = c.attrs;
      if (op == "AveragePool") attrs.push_back(IntAttr("count_include_pad", include_pad));
      Node node = testing::MakeNode(op, 1, 1, attrs);
      Value x(RandomTensor(c.x_dims, rng));
      auto ref = testing::RunOp(node, c.opset, {x});
      ASSERT_TRUE(ref.ok()) << c.name << ": " << ref.status().ToString();
      const Tensor& want = ref->outputs[0].tensor();
      // The SIMD row kernel (where the CPU has it) and the portable loops (SGEMM's switch selects both).
      for (bool portable : {false, true}) {
        cpu::SgemmForcePortable(portable);
        for (int threads : {1, 2}) {
          auto got = RunFast(kernel, node, c.opset, x, threads);
          ASSERT_TRUE(got.ok()) << c.name << ": " << got.status().ToString();
          ASSERT_EQ(got->dims(), want.dims()) << c.name;
          EXPECT_EQ(0, std::memcmp(got->data<float>(), want.data<float>(), sizeof(float) * want.num_elements()))
              << op << " " << c.name << " include_pad=" << include_pad << " threads=" << threads
              << " portable=" << portable;
        }
      }
      cpu::SgemmForcePortable(false);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, PoolFastTest, ::testing::Values("MaxPool", "AveragePool"));

// NaN handling follows the reference: a NaN first tap stays, later NaNs are skipped.
TEST(PoolFast, MaxPoolNaNLikeReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Node node = testing::MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {2, 2}), IntsAttr("strides", {2, 2})});
  Value x(Tensor::FromVector(std::vector<float>{nan, 1, 2, nan, 3, 4, 5, 6, -1, -2, nan, -4, -5, -6, -7, nan},
                             {1, 1, 4, 4}));
  auto ref = testing::RunOp(node, 12, {x});
  ASSERT_TRUE(ref.ok());
  auto got = RunFast(cpu::MaxPoolFloat, node, 12, x, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(0, std::memcmp(got->data<float>(), ref->outputs[0].tensor().data<float>(), 4 * sizeof(float)));
}

TEST(PoolFast, MaxPoolNaNLikeReferenceInVectorKernel) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(3);
  Tensor t = RandomTensor({1, 2, 6, 41}, rng);
  for (int64_t i = 0; i < t.num_elements(); i += 7) t.data<float>()[i] = nan;
  Value x(t);
  for (int64_t stride : {1, 2}) {
    Node node = testing::MakeNode("MaxPool", 1, 1,
                                  {IntsAttr("kernel_shape", {2, 3}), IntsAttr("strides", {1, stride}),
                                   IntsAttr("pads", {0, 1, 1, 1})});
    auto ref = testing::RunOp(node, 12, {x});
    ASSERT_TRUE(ref.ok());
    auto got = RunFast(cpu::MaxPoolFloat, node, 12, x, 1);
    ASSERT_TRUE(got.ok());
    const Tensor& want = ref->outputs[0].tensor();
    ASSERT_EQ(got->dims(), want.dims());
    EXPECT_EQ(0, std::memcmp(got->data<float>(), want.data<float>(), sizeof(float) * want.num_elements()))
        << "stride " << stride;
  }
}

// The padded-plane path (stride 1, 5x5 pad 2): NaN, infinities and signed
// zeros as the reference treats them (planes with a NaN take the general path;
// a -inf border must not change which of equal values wins).
TEST(PoolFast, MaxPoolSpecialValuesLikeReferenceInPaddedPath) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(4);
  Tensor t = RandomTensor({1, 4, 9, 21}, rng);
  float* p = t.data<float>();
  const int64_t plane = 9 * 21;
  for (int64_t i = 0; i < plane; ++i) p[i] = (i % 3 == 0) ? 0.f : -0.f;            // plane 0: signed zeros
  for (int64_t i = plane; i < 2 * plane; ++i) p[i] = (i % 5 == 0) ? -inf : -1e30f;  // plane 1: -inf
  p[2 * plane + 10] = nan;                                                          // plane 2: one NaN
  p[3 * plane + 4] = inf;                                                           // plane 3: +inf
  Value x(t);
  Node node = testing::MakeNode("MaxPool", 1, 1, {IntsAttr("kernel_shape", {5, 5}), IntsAttr("pads", {2, 2, 2, 2})});
  auto ref = testing::RunOp(node, 12, {x});
  ASSERT_TRUE(ref.ok());
  for (int threads : {1, 2}) {
    auto got = RunFast(cpu::MaxPoolFloat, node, 12, x, threads);
    ASSERT_TRUE(got.ok());
    const Tensor& want = ref->outputs[0].tensor();
    EXPECT_EQ(0, std::memcmp(got->data<float>(), want.data<float>(), sizeof(float) * want.num_elements()));
  }
}

// MaxPool with an Indices output goes to the reference kernel.
TEST(PoolFast, MaxPoolWithIndicesUsesReference) {
  Node node = testing::MakeNode("MaxPool", 1, 2, {IntsAttr("kernel_shape", {2, 2})});
  Value x(Tensor::FromVector(std::vector<float>{1, 5, 3, 2}, {1, 1, 2, 2}));
  std::vector<Value> outputs(2);
  KernelContext ctx(node, 12, {&x}, &outputs, nullptr, nullptr, nullptr);
  ASSERT_TRUE(cpu::MaxPoolFloat(ctx).ok());
  testing::ExpectTensorNear<float>(outputs[0].tensor(), {1, 1, 1, 1}, {5.f});
  testing::ExpectTensorNear<int64_t>(outputs[1].tensor(), {1, 1, 1, 1}, {1});
}

// Expected values from numpy: x = (np.arange(2*5*6) % 11 - 5) * 0.5 reshaped to
// [1, 2, 5, 6]; MaxPool 3x3 stride 2 pads 1 (np.pad with -inf, window max);
// AveragePool 3x3 stride 2 pads 1 excluding the padding (window sum / count of
// non-padding taps); GlobalAveragePool = x.mean(axis=(2, 3)).
Tensor NumpyPatternInput() {
  std::vector<float> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.5f;
  return Tensor::FromVector(v, {1, 2, 5, 6});
}

TEST(PoolFast, MatchesNumpy) {
  const std::vector<Attribute> window = {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {2, 2}),
                                         IntsAttr("pads", {1, 1, 1, 1})};
  Value x(NumpyPatternInput());
  auto max = RunFast(cpu::MaxPoolFloat, testing::MakeNode("MaxPool", 1, 1, window), 17, x, 2);
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  testing::ExpectTensorNear<float>(max.value(), {1, 2, 3, 3}, {1.0, 2.0, 2.5, 1.5, 2.5, 2.5, 1.5, 2.5, 2.5, 2.0, 2.5, 1.5, 2.5, 2.5, 2.0, 2.5, 1.0, 2.0});
  auto avg = RunFast(cpu::AveragePoolFloat, testing::MakeNode("AveragePool", 1, 1, window), 17, x, 2);
  ASSERT_TRUE(avg.ok()) << avg.status().ToString();
  testing::ExpectTensorNear<float>(avg.value(), {1, 2, 3, 3}, {-0.75, 0.0, 0.0833333358, 0.0833333358, 0.833333313, 0.0, 0.0, 0.75, -0.0833333358,
                                    0.5, 0.333333343, -0.5, 0.416666657, -0.0555555560, 0.333333343, -0.125, -0.75, 0.25});
  auto global = RunFast(cpu::GlobalAveragePoolFloat, testing::MakeNode("GlobalAveragePool", 1, 1), 17, x, 2);
  ASSERT_TRUE(global.ok()) << global.status().ToString();
  testing::ExpectTensorNear<float>(global.value(), {1, 2, 1, 1}, {-0.2f, -0.05f});
}

TEST(PoolFast, GlobalAveragePoolCloseToReferenceAndThreadIndependent) {
  std::mt19937 rng(9);
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{2, 3, 7, 9}, {1, 5, 33}, {3, 4, 1, 1}, {1, 2, 3, 4, 5}, {2, 3}}) {
    Node node = testing::MakeNode("GlobalAveragePool", 1, 1);
    Value x(RandomTensor(dims, rng));
    auto ref = testing::RunOp(node, 17, {x});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    auto one = RunFast(cpu::GlobalAveragePoolFloat, node, 17, x, 1);
    auto two = RunFast(cpu::GlobalAveragePoolFloat, node, 17, x, 2);
    ASSERT_TRUE(one.ok() && two.ok());
    const Tensor& want = ref->outputs[0].tensor();
    ASSERT_EQ(one->dims(), want.dims());
    for (int64_t i = 0; i < want.num_elements(); ++i)
      EXPECT_NEAR(one->data<float>()[i], want.data<float>()[i], 1e-5 * (1 + std::fabs(want.data<float>()[i])));
    EXPECT_EQ(0, std::memcmp(one->data<float>(), two->data<float>(), sizeof(float) * want.num_elements()));
  }
}

// GlobalMaxPool against the reference kernel, bitwise, on planes of odd
// sizes, planes holding NaN (first or later), +0 and -0 as the maximum in
// either order, infinities; 1 and 2 threads; other types to the reference.
TEST(PoolFast, GlobalMaxPoolBitwiseEqualToTheReference) {
  std::mt19937 rng(10);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Node node = testing::MakeNode("GlobalMaxPool", 1, 1);
  auto check = [&](const Tensor& x, const std::string& what) {
    auto ref = testing::RunOp(node, 17, {Value(x)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (int threads : {1, 2}) {
      auto got = RunFast(cpu::GlobalMaxPoolFloat, node, 17, Value(x), threads);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      testing::ExpectBitwise(*got, ref->outputs[0].tensor(), what + " threads " + std::to_string(threads));
    }
  };
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {1, 512, 508}, {2, 3, 7, 9}, {1, 5, 33}, {3, 4, 1, 1}, {1, 2, 3, 4, 5}, {2, 3}, {1, 3, 16}, {1, 2, 17}})
    check(RandomTensor(dims, rng), DimsToString(dims));
  std::vector<std::vector<float>> planes = {
      {nan, 1.f, 2.f, 3.f}, {1.f, nan, 2.f, 0.5f}, {-1.f, 0.f, -0.f, -2.f}, {-1.f, -0.f, 0.f, -2.f},
      {-0.f, -3.f, 0.f, -1.f}, {-inf, -inf, -inf, -inf}, {inf, 1.f, nan, inf}, {-5.f, -4.f, -3.f, -2.f}};
  for (const auto& plane : planes) {
    std::vector<float> v;  // the plane repeated past one 16-wide step, so both paths run
    for (int r = 0; r < 5; ++r) v.insert(v.end(), plane.begin(), plane.end());
    check(Tensor::FromVector(v, {1, 1, static_cast<int64_t>(v.size())}), "special values");
  }
}

}  // namespace
}  // namespace nee
