// GridSample, AffineGrid, NonMaxSuppression, RoiAlign, DeformConv. Expected
// values were computed with onnx.reference by misc_expected_gen.py (section
// "vision"); the generator builds its inputs the same way as the helpers here.
#include <cmath>
#include <limits>

#include "ir/float_formats.h"
#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// (arange(n) % mod - mod // 2) * 0.5: the generator's `pattern`.
Value Pattern(std::vector<int64_t> dims, int mod) {
  std::vector<float> v(static_cast<size_t>(Count(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i) % mod - mod / 2) * 0.5f;
  return V<float>(v, std::move(dims));
}

// np.linspace(lo, hi, n).astype(float32).
Value Linspace(double lo, double hi, std::vector<int64_t> dims) {
  const int64_t n = Count(dims);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(n == 1 ? lo : lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(n - 1));
  return V<float>(v, std::move(dims));
}

void ExpectError(const Result<OpRun>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

Value GridSampleGrid() {
  Value grid = Linspace(-1.3, 1.2, {1, 2, 3, 2});
  grid.tensor().data<float>()[10] = 0.77f;  // grid[0, 1, 2] = [0.77, -1.9]
  grid.tensor().data<float>()[11] = -1.9f;
  return grid;
}

TEST(VisionGridSample, ModesPaddingsAndAlignment) {
  struct Case {
    const char* mode;
    const char* padding;
    int align;
    std::vector<float> expected;
  };
  const std::vector<Case> cases = {
      {"linear", "zeros", 0, {0, -1.9050411f, -0.631818175f, 1.18636346f, -0.160330445f, 0, 0, -1.50049579f,
                              -0.131818175f, 0.180909425f, -1.96805811f, 0}},
      {"nearest", "reflection", 0, {-2.5f, -2.5f, 0, 0.5f, -2.5f, 1, -2, -2, 0.5f, 1, -2, 1.5f}},
      {"linear", "reflection", 1, {-2.12954545f, -1.62045455f, -0.37045449f, 0.879545331f, 0.992727399f, 0.627499938f,
                                   -1.62954545f, -1.12045455f, 0.12954554f, 0.426818311f, -1.47045457f, 1.12749994f}},
  };
  for (const Case& c : cases) {
    auto r = RunOp(MakeNode("GridSample", 2, 1,
                            {StringAttr("mode", c.mode), StringAttr("padding_mode", c.padding),
                             IntAttr("align_corners", c.align)}),
                   20, {Pattern({1, 2, 3, 4}, 11), GridSampleGrid()});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 2, 3}, c.expected, 1e-5);
  }
}

// Cubic sampling with border or reflection padding does not move an outside position onto
// the plane first (as nearest and linear do): each of its 4x4 taps takes the padding rule.
// onnx.reference clips the position first; PyTorch (F.grid_sample, mode="bicubic") and
// ONNX Runtime 1.32 do not and agree with each other to 1e-6; these values are PyTorch's.
// Grid points 0 (x = -1.3) and 5 (y = -1.9) lie outside the plane.
TEST(VisionGridSample, CubicPadsEachTap) {
  struct Case {
    const char* padding;
    int align;
    std::vector<float> expected;
  };
  const std::vector<Case> cases = {
      {"border", 1, {-2.6448462f, -1.8109521f, -0.5149928f, 1.2036898f, 1.2137492f, -1.1480068f, -2.1448462f,
                     -1.322462f, -0.040521536f, 0.6451941f, -1.8956196f, -0.6480069f}},
      {"border", 0, {-2.639613f, -2.4375815f, -0.83776313f, 1.6230211f, -0.2283809f, -0.9861761f, -2.139613f,
                     -1.9375815f, -0.40060762f, 0.35025072f, -2.9359334f, -0.48617604f}},
      {"reflection", 0, {-2.8195238f, -2.4486399f, -0.83776313f, 1.6230211f, -0.23738533f, 1.0563841f, -2.319524f,
                         -1.9486394f, -0.40060762f, 0.35025072f, -2.972654f, 1.5435092f}},
      {"reflection", 1, {-2.3554242f, -2.0811174f, -0.5511392f, 1.3203336f, 1.0974861f, 0.88379216f, -1.8571146f,
                         -1.5926274f, -0.0766679f, 0.5849643f, -2.3094726f, 1.4756589f}},
  };
  for (const Case& c : cases) {
    auto r = RunOp(MakeNode("GridSample", 2, 1,
                            {StringAttr("mode", "cubic"), StringAttr("padding_mode", c.padding),
                             IntAttr("align_corners", c.align)}),
                   20, {Pattern({1, 2, 3, 4}, 11), GridSampleGrid()});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 2, 3}, c.expected, 1e-5);
  }
}

TEST(VisionGridSample, Opset16SpellingAndVolumes) {
  // Opset 16 calls linear "bilinear"; the result is the same as above.
  auto r = RunOp(MakeNode("GridSample", 2, 1, {StringAttr("mode", "bilinear")}), 16,
                 {Pattern({1, 2, 3, 4}, 11), GridSampleGrid()});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->outputs[0].tensor().data<float>()[1], -1.9050411f, 1e-5);
  r = RunOp(MakeNode("GridSample", 2, 1), 22, {Pattern({1, 1, 2, 3, 2}, 5), Linspace(-1.1, 0.9, {1, 2, 1, 2, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 2, 1, 2}, {-0.190214857f, -0.38247931f, 0.332054853f, -0.266752034f});
  // The grid's last dim must equal the number of spatial dims.
  ExpectError(RunOp(MakeNode("GridSample", 2, 1), 20, {Pattern({1, 2, 3, 4}, 11), Linspace(0, 1, {1, 2, 3, 3})}),
              "input 1");
}

TEST(VisionGridSample, IntegerImageAtNanGridPoint) {
  // run_fuzzer finding: a NaN grid point sampled into an integer output was a
  // static_cast of NaN (undefined); it is stored by Cast's rule now.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto r = RunOp(MakeNode("GridSample", 2, 1), 20,
                 {V<int64_t>({10, 20, 30, 40}, {1, 1, 2, 2}), V<float>({nan, nan, 0, 0}, {1, 1, 2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int64_t* y = r->outputs[0].tensor().data<int64_t>();
  EXPECT_EQ(y[0], std::numeric_limits<int64_t>::min());  // NaN to int64, as Cast (numpy on x86-64)
  EXPECT_EQ(y[1], 25);  // the centre (align_corners=0): the mean of the four
}

TEST(VisionGridSample, Float16InputAndGrid) {
  auto half = [](const std::vector<float>& v, std::vector<int64_t> dims) {
    Tensor t = Tensor::Allocate(DataType::kFloat16, std::move(dims)).value();
    for (size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = FloatToHalf(v[i]);
    return Value(t);
  };
  // pattern((1, 1, 2, 3), 5) in float16
  auto r = RunOp(MakeNode("GridSample", 2, 1, {IntAttr("align_corners", 1)}), 20,
                 {half({-1, -0.5f, 0, 0.5f, 1, -1}, {1, 1, 2, 3}), half({-0.5f, 0.25f, 0.75f, -1}, {1, 1, 2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& y = r->outputs[0].tensor();
  ASSERT_EQ(y.dtype(), DataType::kFloat16);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{1, 1, 1, 2}));
  EXPECT_EQ(HalfToFloat(y.data<uint16_t>()[0]), 0.1875f);
  EXPECT_EQ(HalfToFloat(y.data<uint16_t>()[1]), -0.125f);
}

TEST(VisionAffineGrid, BothAlignments) {
  Value theta = V<float>({1.0f, 0.2f, 0.1f, -0.3f, 0.9f, 0.05f}, {1, 2, 3});
  Value size = V<int64_t>({1, 1, 2, 3}, {4});
  auto r = RunOp(MakeNode("AffineGrid", 2, 1), 20, {theta, size});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 3, 2},
                          {-0.666666687f, -0.199999973f, 0, -0.399999976f, 0.666666687f, -0.600000024f, -0.466666669f,
                           0.699999988f, 0.200000003f, 0.5f, 0.866666675f, 0.299999982f});
  r = RunOp(MakeNode("AffineGrid", 2, 1, {IntAttr("align_corners", 1)}), 20, {theta, size});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 3, 2},
                          {-1.10000002f, -0.549999952f, -0.100000001f, -0.849999964f, 0.899999976f, -1.14999998f,
                           -0.699999988f, 1.25f, 0.300000012f, 0.949999988f, 1.29999995f, 0.649999976f});
  ExpectError(RunOp(MakeNode("AffineGrid", 2, 1), 20, {theta, V<int64_t>({2, 1, 2, 3}, {4})}), "input 0");
}

TEST(VisionNonMaxSuppression, ThresholdsAndLimits) {
  Value boxes = V<float>({0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 1, 1, 0, 0}, {1, 5, 4});
  Value scores = V<float>({0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.1f, 0.2f, 0.3f, 0.4f, 0.8f}, {1, 2, 5});
  auto r = RunOp(MakeNode("NonMaxSuppression", 5, 1), 11,
                 {boxes, scores, V<int64_t>({2}, {1}), V<float>({0.5f}, {1}), V<float>({0.15f}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(r->outputs[0].tensor(), {4, 3}, {0, 0, 3, 0, 0, 0, 0, 1, 4, 0, 1, 3});
  // Without max_output_boxes_per_class nothing is selected.
  r = RunOp(MakeNode("NonMaxSuppression", 2, 1), 10, {boxes, scores});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(r->outputs[0].tensor(), {0, 3}, {});
  ExpectError(RunOp(MakeNode("NonMaxSuppression", 3, 1), 11, {boxes, V<float>({0.5f, 0.1f}, {1, 1, 2}), V<int64_t>({2}, {1})}),
              "input 1");
}

TEST(VisionRoiAlign, AverageAndMaxAcrossVersions) {
  Value feat = Pattern({2, 1, 4, 4}, 9);
  Value rois = V<float>({0.5f, 0.5f, 2.5f, 3.0f, 0, 0, 3, 3}, {2, 4});
  Value batch = V<int64_t>({1, 0}, {2});
  auto r = RunOp(MakeNode("RoiAlign", 3, 1,
                          {IntAttr("output_height", 2), IntAttr("output_width", 2), IntAttr("sampling_ratio", 2)}),
                 16, {feat, rois, batch});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 1, 2, 2},
                          {0.1875f, -0.15625f, 0.578125f, 1.078125f, -1.21875f, -0.5f, 0.49609375f, -0.71875f});
  // Opset 10 has no coordinate_transformation_mode: it behaves as output_half_pixel
  // (no half-pixel shift), the attribute's backward-compatible value.
  r = RunOp(MakeNode("RoiAlign", 3, 1,
                     {IntAttr("output_height", 2), IntAttr("output_width", 2), StringAttr("mode", "max"),
                      FloatAttr("spatial_scale", 0.5f)}),
            10, {feat, rois, batch});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 1, 2, 2}, {0.4375f, 0.875f, 0.140625f, 0.28125f, 0.0703125f, 0.1640625f, 0.1640625f, 0.3828125f});
  // A batch index outside [0, N) is an error naming input 2, not a wild read.
  ExpectError(RunOp(MakeNode("RoiAlign", 3, 1), 16, {feat, rois, V<int64_t>({2, 0}, {2})}), "input 2");
  ExpectError(RunOp(MakeNode("RoiAlign", 3, 1), 22, {feat, rois, V<int64_t>({-1, 0}, {2})}), "batch index");
}

TEST(VisionDeformConv, GroupsOffsetGroupsMaskAndBias) {
  Value x = Pattern({1, 2, 3, 3}, 5);
  Value w = Pattern({2, 1, 2, 2}, 3);
  Value offset = Linspace(-0.6, 0.7, {1, 16, 2, 2});
  Value bias = V<float>({0.5f, -0.5f}, {2});
  Value mask = Linspace(0.2, 1.0, {1, 8, 2, 2});
  auto r = RunOp(MakeNode("DeformConv", 5, 1, {IntAttr("group", 2), IntAttr("offset_group", 2)}), 19,
                 {x, w, offset, bias, mask});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 2, 2},
                          {0.323070139f, 0.897327065f, 0.449549258f, 0.417154372f, -0.618796706f, -0.674483776f,
                           -0.159573555f, -0.264704466f});
  // The offset tensor must match offset_group * kernel taps * 2 channels.
  ExpectError(RunOp(MakeNode("DeformConv", 3, 1, {IntAttr("group", 2)}), 22, {x, w, Linspace(0, 1, {1, 4, 2, 2})}),
              "input 2");
}

TEST(VisionHostile, NonFiniteAndFarPositionsStayInBounds) {
  // By construction: positions far outside (or NaN) read padding, never memory
  // outside the input; with zeros padding a far position yields exactly 0.
  const float kInf = std::numeric_limits<float>::infinity(), kNan = std::numeric_limits<float>::quiet_NaN();
  Value grid = V<float>({1e30f, -1e30f, kInf, -kInf, kNan, 0.0f, 3e9f, -7e12f}, {1, 2, 2, 2});
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* padding : {"zeros", "border", "reflection"})
      for (int align : {0, 1}) {
        auto r = RunOp(MakeNode("GridSample", 2, 1,
                                {StringAttr("mode", mode), StringAttr("padding_mode", padding), IntAttr("align_corners", align)}),
                       20, {Pattern({1, 1, 3, 4}, 11), grid});
        ASSERT_TRUE(r.ok()) << mode << " " << padding << ": " << r.status().ToString();
        if (std::string(padding) == "zeros") EXPECT_EQ(r->outputs[0].tensor().data<float>()[0], 0.0f) << mode;
      }
  // RoiAlign: NaN or huge regions sample nothing or are refused, never read outside.
  Value feat = Pattern({1, 1, 4, 4}, 9);
  auto r = RunOp(MakeNode("RoiAlign", 3, 1, {IntAttr("sampling_ratio", 2)}), 16,
                 {feat, V<float>({kNan, 0, 1e30f, 2, -1e30f, -1e30f, 1e30f, 1e30f}, {2, 4}), V<int64_t>({0, 0}, {2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectError(RunOp(MakeNode("RoiAlign", 3, 1), 16, {feat, V<float>({0, 0, 1e30f, 1e30f}, {1, 4}), V<int64_t>({0}, {1})}),
              "too many samples");
  // NonMaxSuppression: a NaN score is never selected.
  r = RunOp(MakeNode("NonMaxSuppression", 3, 1), 11,
            {V<float>({0, 0, 1, 1, 5, 5, 6, 6}, {1, 2, 4}), V<float>({kNan, 0.5f}, {1, 1, 2}), V<int64_t>({5}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(r->outputs[0].tensor(), {1, 3}, {0, 0, 1});
  // DeformConv: NaN offsets sample nothing, leaving the bias.
  std::vector<float> offsets(16, kNan);
  r = RunOp(MakeNode("DeformConv", 4, 1), 19,
            {Pattern({1, 1, 3, 3}, 5), Pattern({1, 1, 2, 2}, 3), V<float>(offsets, {1, 8, 1, 1}), V<float>({0.25f}, {1})});
  ASSERT_FALSE(r.ok());  // a 3x3 input with a 2x2 kernel has 2x2 outputs: offsets [1, 8, 1, 1] are refused
  std::vector<float> offsets4(32, kNan);
  r = RunOp(MakeNode("DeformConv", 4, 1), 19,
            {Pattern({1, 1, 3, 3}, 5), Pattern({1, 1, 2, 2}, 3), V<float>(offsets4, {1, 8, 2, 2}), V<float>({0.25f}, {1})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 1, 2, 2}, {0.25f, 0.25f, 0.25f, 0.25f});
}

}  // namespace
}  // namespace nee::testing
