// PrecisionAccumulator (exec/precision.h): the metrics of `nee precision` on
// tensors small enough to work out by hand (the values in each comment).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "exec/precision.h"
#include "ir/float_formats.h"

namespace nee {
namespace {

TEST(PrecisionAccumulator, HandComputedMetrics) {
  // a = [[1, 2], [3, 4]], r = [[1, 2], [3, 5]]: one element off by 1.
  PrecisionAccumulator acc;
  ASSERT_TRUE(acc.Add(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}), Tensor::FromVector<float>({1, 2, 3, 5}, {2, 2})).ok());
  PrecisionMetrics m = acc.Finish();
  EXPECT_EQ(m.elements, 4);
  EXPECT_EQ(m.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(m.max_rel, 0.2);            // 1 / |5|
  EXPECT_EQ(m.ulp_max, 0x40A00000u - 0x40800000u);  // 5.0f and 4.0f are 2^21 floats apart
  EXPECT_EQ(m.ulp_median, 0.0);                // [0, 0, 0, 2^21]
  EXPECT_DOUBLE_EQ(m.rms, 0.5);                // sqrt(1 / 4)
  EXPECT_DOUBLE_EQ(m.cosine, 34.0 / std::sqrt(30.0 * 39.0));
  EXPECT_EQ(m.top1_rows, 2);                   // both rows' argmax is column 1
  EXPECT_EQ(m.top1_agree, 2);
  EXPECT_EQ(m.ref_max_abs, 5.0);
}

TEST(PrecisionAccumulator, MedianUlpAndTopOne) {
  // a is 1, 2, 3 and 4 floats above 1.0f: median (2 + 3) / 2; argmax of a is
  // column 3, of the all-ones reference column 0.
  std::vector<float> a;
  float x = 1.0f;
  for (int i = 0; i < 4; ++i) a.push_back(x = std::nextafter(x, 2.0f));
  PrecisionAccumulator acc;
  ASSERT_TRUE(acc.Add(Tensor::FromVector<float>(a, {4}), Tensor::FromVector<float>({1, 1, 1, 1}, {4})).ok());
  PrecisionMetrics m = acc.Finish();
  EXPECT_EQ(m.ulp_max, 4u);
  EXPECT_EQ(m.ulp_median, 2.5);
  EXPECT_EQ(m.top1_rows, 1);
  EXPECT_EQ(m.top1_agree, 0);
}

TEST(PrecisionAccumulator, NonFiniteAndFloorAndErrors) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  PrecisionAccumulator acc;
  // NaN/NaN and inf/inf agree, inf/1 is a mismatch; 1e-3 against 0 divides by
  // the floor 1e-6 * max|r| = 1e-6.
  ASSERT_TRUE(acc.Add(Tensor::FromVector<float>({nan, inf, 5, 1e-3f, 1}, {5}),
                      Tensor::FromVector<float>({nan, inf, 1, 0, 1}, {5})).ok());
  PrecisionMetrics m = acc.Finish();
  EXPECT_EQ(m.elements, 5);
  EXPECT_EQ(m.nonfinite_mismatches, 0);
  EXPECT_DOUBLE_EQ(m.max_abs, 4.0);
  EXPECT_DOUBLE_EQ(m.max_rel, static_cast<double>(1e-3f) / 1e-6);
  PrecisionAccumulator other;
  ASSERT_TRUE(other.Add(Tensor::FromVector<float>({inf, 1}, {2}), Tensor::FromVector<float>({1, 1}, {2})).ok());
  EXPECT_EQ(other.Finish().nonfinite_mismatches, 1);
  EXPECT_EQ(other.Finish().max_abs, 0.0);
  EXPECT_FALSE(other.Add(Tensor::FromVector<float>({1, 2, 3}, {3}), Tensor::FromVector<float>({1, 2}, {2})).ok());
}

TEST(PrecisionAccumulator, Float16ComparedInFloat32) {
  // float16 1.0 and 0.333251953125 (the float16 nearest 1/3) against float32 1 and 1/3.
  auto half = Tensor::Allocate(DataType::kFloat16, {2});
  ASSERT_TRUE(half.ok());
  static_cast<uint16_t*>(half->raw_data())[0] = FloatToHalf(1.0f);
  static_cast<uint16_t*>(half->raw_data())[1] = FloatToHalf(1.0f / 3);
  PrecisionAccumulator acc;
  ASSERT_TRUE(acc.Add(*half, Tensor::FromVector<float>({1.0f, 1.0f / 3}, {2})).ok());
  PrecisionMetrics m = acc.Finish();
  EXPECT_NEAR(m.max_abs, 1.0 / 3 - 0.333251953125, 1e-8);
  EXPECT_GT(m.ulp_max, 1000u);  // 13 fewer mantissa bits: about 2^12 float32 steps
}

}  // namespace
}  // namespace nee
