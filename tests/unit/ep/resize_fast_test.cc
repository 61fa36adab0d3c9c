// The optimized float32 Resize (ep/cpu/resize_fast.cc) against the reference
// Resize kernel, bitwise, over every mode, coordinate mode and nearest mode,
// upsampling and downsampling, scales and sizes, odd shapes and 1-3 threads;
// and calls it hands to the reference (other ranks, types, resized N or C,
// invalid models) giving the reference's result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep_test_util.h"

namespace nee {
namespace {

using testing::FloatAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

struct ResizeCase {
  std::string name;
  std::vector<int64_t> x_dims;
  std::vector<float> scales;   // empty: none
  std::vector<int64_t> sizes;  // empty: none
  std::vector<Attribute> attrs = {};
  int64_t opset = 19;
  std::vector<float> roi = {};  // empty: none
  DataType type = DataType::kFloat;  // of X
};

// X, roi, scales, sizes (opset >= 11) or X, scales (opset 10); empty Values
// stand for omitted optional inputs.
std::vector<Value> MakeInputs(const ResizeCase& c, std::mt19937& rng) {
  Tensor x = c.type == DataType::kFloat ? testing::RandomTensor(c.x_dims, rng)
                                        : testing::Random8(c.type, c.x_dims, rng);
  // Signed zeros and infinities: the reference's double sums and saturating store.
  if (c.type == DataType::kFloat && x.num_elements() > 3) {
    x.data<float>()[0] = -0.0f;
    x.data<float>()[1] = std::numeric_limits<float>::infinity();
    x.data<float>()[x.num_elements() - 1] = 3e38f;
  }
  auto scales = [&] {
    return Value(Tensor::FromVector(c.scales, {static_cast<int64_t>(c.scales.size())}));
  };
  if (c.opset < 11) return {Value(std::move(x)), scales()};
  std::vector<Value> in(4);
  in[0] = Value(std::move(x));
  if (!c.roi.empty()) in[1] = Value(Tensor::FromVector(c.roi, {static_cast<int64_t>(c.roi.size())}));
  if (!c.scales.empty()) in[2] = scales();
  if (!c.sizes.empty()) in[3] = Value(Tensor::FromVector(c.sizes, {static_cast<int64_t>(c.sizes.size())}));
  return in;
}

// Runs the fast kernel with a pool of `threads` threads; empty Values are
// omitted optional inputs (as testing::RunOp passes them).
Result<Tensor> RunFast(const Node& node, int64_t opset, const std::vector<Value>& inputs, int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(cpu::ResizeFast(ctx));
  return outputs[0].tensor();
}

// Runs the fast kernel as a session does, with the node's PreparedCache.
Result<Tensor> RunFastCached(const Node& node, const std::vector<Value>& inputs, PreparedCache* cache, int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, 19, ptrs, &outputs, nullptr, &pool, nullptr);
  const std::vector<bool> constant = {false, true, true, true};
  ctx.SetPrepared(cache, &constant);
  NEE_RETURN_IF_ERROR(cpu::ResizeFast(ctx));
  return outputs[0].tensor();
}

// Runs the reference and the fast kernel at 1, 2 and 3 threads; expects the
// same status and, on success, the same bits.
void ExpectMatchesReference(const std::string& op, const ResizeCase& c, std::mt19937& rng) {
  const size_t num_inputs = c.opset < 11 ? 2 : 4;
  Node node = testing::MakeNode(op, num_inputs, 1, c.attrs);
  std::vector<Value> inputs = MakeInputs(c, rng);
  auto want = testing::RunOp(node, c.opset, inputs);
  for (int threads : {1, 2, 3}) {
    const std::string what = c.name + " threads=" + std::to_string(threads);
    auto got = RunFast(node, c.opset, inputs, threads);
    ASSERT_EQ(want.ok(), got.ok()) << what << ": " << (want.ok() ? got.status() : want.status()).ToString();
    if (!want.ok()) continue;
    const Tensor& w = want->outputs[0].tensor();
    ASSERT_EQ(got->dtype(), w.dtype()) << what;
    ASSERT_EQ(got->dims(), w.dims()) << what;
    const size_t bytes = static_cast<size_t>(w.num_elements()) * (ElementBits(w.dtype()) / 8);
    if (bytes == 0) continue;
    EXPECT_EQ(0, std::memcmp(got->raw_data(), w.raw_data(), bytes)) << what;
    if (w.dtype() != DataType::kFloat) continue;
    for (int64_t i = 0; i < w.num_elements(); ++i) {  // the first differing element, if any
      uint32_t a = 0, b = 0;
      std::memcpy(&a, w.data<float>() + i, 4);
      std::memcpy(&b, got->data<float>() + i, 4);
      ASSERT_EQ(a, b) << what << " at " << i << ": " << got->data<float>()[i] << " vs " << w.data<float>()[i];
    }
  }
}

// Shapes and scales / sizes every mode runs on: integer and fractional up-
// and downsampling, one axis only, 1x1 planes, one row, several N and C.
std::vector<ResizeCase> Geometries() {
  return {
      {"x2", {1, 3, 5, 7}, {1, 1, 2, 2}, {}, {}},
      {"x2_batch", {2, 3, 4, 6}, {1, 1, 2, 2}, {}, {}},
      {"x3_x4", {1, 2, 3, 5}, {1, 1, 3, 4}, {}, {}},
      {"down_half", {2, 2, 8, 9}, {1, 1, 0.5f, 0.5f}, {}, {}},
      {"fractional_up", {1, 2, 5, 6}, {1, 1, 1.6f, 2.3f}, {}, {}},
      {"fractional_down", {1, 3, 11, 13}, {1, 1, 0.7f, 0.45f}, {}, {}},
      {"w_only", {1, 2, 4, 5}, {1, 1, 1, 2.5f}, {}, {}},
      {"h_only", {1, 2, 5, 4}, {1, 1, 1.5f, 1}, {}, {}},
      {"plane_1x1", {2, 3, 1, 1}, {1, 1, 3, 2}, {}, {}},
      {"one_row", {1, 4, 1, 9}, {1, 1, 1, 1.9f}, {}, {}},
      {"to_one_pixel", {1, 2, 6, 5}, {}, {1, 2, 1, 1}, {}},
      {"sizes_up", {1, 3, 7, 5}, {}, {1, 3, 16, 9}, {}},
      {"sizes_down", {2, 1, 17, 12}, {}, {2, 1, 5, 7}, {}},
      {"identity", {1, 2, 3, 4}, {1, 1, 1, 1}, {}, {}},
  };
}

std::vector<Attribute> With(std::vector<Attribute> base, std::vector<Attribute> more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

const char* const kCoords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                               "half_pixel_symmetric", "tf_half_pixel_for_nn"};

TEST(ResizeFast, NearestMatchesReferenceBitwise) {
  std::mt19937 rng(21);
  for (const char* coord : kCoords)
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
      for (ResizeCase c : Geometries()) {
        c.name += std::string(" ") + coord + " " + nearest;
        c.attrs = {StringAttr("mode", "nearest"), StringAttr("coordinate_transformation_mode", coord),
                   StringAttr("nearest_mode", nearest)};
        ExpectMatchesReference("Resize", c, rng);
      }
}

TEST(ResizeFast, NearestYoloUpsample) {
  std::mt19937 rng(22);
  for (int64_t f : {2, 4}) {
    ResizeCase c{"yolo_x" + std::to_string(f), {1, 16, 10, 12}, {1, 1, float(f), float(f)}, {},
                 {StringAttr("mode", "nearest"), StringAttr("coordinate_transformation_mode", "asymmetric"),
                  StringAttr("nearest_mode", "floor")}};
    for (int64_t opset : {11, 13, 18, 19}) {
      c.opset = opset;
      ExpectMatchesReference("Resize", c, rng);
    }
  }
}

// Nearest on 8-bit tensors (a quantized detector's upsampling) gathers the bytes as the reference does, at
// rank 4 and 5; other modes and tf_crop_and_resize (which extrapolates) go to the reference.
TEST(ResizeFast, NearestOnBytesMatchesReference) {
  std::mt19937 rng(31);
  for (DataType type : {DataType::kUint8, DataType::kInt8}) {
    for (const char* coord : {"asymmetric", "half_pixel", "align_corners"})
      for (ResizeCase c : Geometries()) {
        c.name += std::string(" 8-bit ") + coord;
        c.type = type;
        c.attrs = {StringAttr("mode", "nearest"), StringAttr("coordinate_transformation_mode", coord),
                   StringAttr("nearest_mode", "floor")};
        ExpectMatchesReference("Resize", c, rng);
      }
    const std::vector<ResizeCase> others = {
        {"8-bit rank 5", {1, 2, 3, 4, 8}, {1, 1, 2, 2, 1}, {}, {StringAttr("mode", "nearest")}, 19, {}, type},
        {"8-bit linear", {1, 2, 3, 4}, {1, 1, 2, 2}, {}, {StringAttr("mode", "linear")}, 19, {}, type},
        {"8-bit crop", {1, 1, 4, 4}, {1, 1, 2, 2}, {},
         {StringAttr("mode", "nearest"), StringAttr("coordinate_transformation_mode", "tf_crop_and_resize")}, 19,
         {0, 0, -0.5f, -0.5f, 1, 1, 1.5f, 1.5f}, type},
    };
    for (const ResizeCase& c : others) ExpectMatchesReference("Resize", c, rng);
  }
}

// Rank 5 with the last axis kept (the channel-blocked layout [N, Cb, H, W, 8]
// the layout pass gives a nearest Resize, and other last-axis widths): each
// pixel's lanes copied whole, bitwise the reference, for every coordinate
// and nearest mode, up and down, scales and sizes.
TEST(ResizeFast, NearestRankFiveCopiesWholePixels) {
  std::mt19937 rng(28);
  const std::vector<ResizeCase> shapes = {
      {"blocked_x2", {1, 3, 5, 7, 8}, {1, 1, 2, 2, 1}, {}},
      {"blocked_batch_fractional", {2, 2, 6, 5, 8}, {1, 1, 1.5f, 0.7f, 1}, {}},
      {"blocked_sizes", {1, 2, 7, 9, 8}, {}, {1, 2, 3, 20, 8}},
      {"width_three", {1, 2, 4, 3, 3}, {1, 1, 2.5f, 3, 1}, {}},
      {"width_one", {2, 1, 3, 4, 1}, {1, 1, 0.5f, 2, 1}, {}},
  };
  for (const char* coord : kCoords)
    for (const char* nearest : {"round_prefer_floor", "floor", "ceil"})
      for (ResizeCase c : shapes) {
        c.name += std::string(" ") + coord + " " + nearest;
        c.attrs = {StringAttr("mode", "nearest"), StringAttr("coordinate_transformation_mode", coord),
                   StringAttr("nearest_mode", nearest)};
        ExpectMatchesReference("Resize", c, rng);
      }
  // Interpolating modes on rank 5, and a resized last axis, stay with the reference.
  const std::vector<Attribute> linear = {StringAttr("mode", "linear")};
  ExpectMatchesReference("Resize", {"rank5_linear", {1, 2, 3, 4, 8}, {1, 1, 2, 2, 1}, {}, linear}, rng);
  ExpectMatchesReference("Resize", {"rank5_lanes_resized", {1, 2, 3, 4, 8}, {1, 1, 2, 2, 0.5f}, {}}, rng);
}

// The AVX2 loops (where the CPU has them) and the portable ones.
class ResizeFastPaths : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { cpu::ResizeForcePortable(GetParam()); }
  void TearDown() override { cpu::ResizeForcePortable(false); }
};

TEST_P(ResizeFastPaths, InterpolationMatchesReferenceBitwise) {
  std::mt19937 rng(23);
  for (const char* mode : {"linear", "cubic"})
    for (const char* coord : kCoords)
      for (ResizeCase c : Geometries()) {
        c.name += std::string(" ") + mode + " " + coord;
        c.attrs = {StringAttr("mode", mode), StringAttr("coordinate_transformation_mode", coord)};
        ExpectMatchesReference("Resize", c, rng);
      }
}

TEST_P(ResizeFastPaths, InterpolationOptionsMatchReference) {
  std::mt19937 rng(24);
  const std::vector<std::pair<std::string, std::vector<Attribute>>> options = {
      {"linear_antialias", {StringAttr("mode", "linear"), IntAttr("antialias", 1)}},
      {"cubic_antialias", {StringAttr("mode", "cubic"), IntAttr("antialias", 1)}},
      {"cubic_exclude_outside", {StringAttr("mode", "cubic"), IntAttr("exclude_outside", 1),
                                 FloatAttr("cubic_coeff_a", -0.5f)}},
      {"linear_exclude_outside", {StringAttr("mode", "linear"), IntAttr("exclude_outside", 1)}},
  };
  for (const auto& [name, attrs] : options)
    for (ResizeCase c : Geometries()) {
      c.name += " " + name;
      c.attrs = attrs;
      ExpectMatchesReference("Resize", c, rng);
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, ResizeFastPaths, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "portable" : "dispatched"; });

// tf_crop_and_resize: a roi (partly outside the input) and extrapolation_value.
TEST(ResizeFast, CropAndResizeMatchesReference) {
  std::mt19937 rng(25);
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    ResizeCase c{std::string("crop ") + mode, {2, 2, 6, 7}, {}, {2, 2, 5, 9},
                 {StringAttr("mode", mode), StringAttr("coordinate_transformation_mode", "tf_crop_and_resize"),
                  FloatAttr("extrapolation_value", 7.5f)},
                 19, {0, 0, -0.2f, 0.3f, 1, 1, 0.9f, 1.4f}};
    ExpectMatchesReference("Resize", c, rng);
    c.sizes = {2, 2, 1, 1};  // a single output position: the crop's centre
    ExpectMatchesReference("Resize", c, rng);
  }
}

// Opset 18's axes and keep_aspect_ratio_policy, and the pre-11 forms.
TEST(ResizeFast, AxesAspectPolicyAndOldOpsets) {
  std::mt19937 rng(26);
  for (const char* policy : {"stretch", "not_larger", "not_smaller"})
    for (const char* mode : {"nearest", "linear"}) {
      ResizeCase c{std::string(policy) + " " + mode, {1, 3, 6, 8}, {}, {9, 10},
                   {StringAttr("mode", mode), IntsAttr("axes", {2, -1}),
                    StringAttr("keep_aspect_ratio_policy", policy)}, 18};
      ExpectMatchesReference("Resize", c, rng);
    }
  ResizeCase scales_axes{"axes_scales", {2, 2, 5, 5}, {2.5f, 0.6f}, {},
                         {StringAttr("mode", "linear"), IntsAttr("axes", {3, 2})}, 19};
  ExpectMatchesReference("Resize", scales_axes, rng);
  for (const char* mode : {"nearest", "linear"}) {
    ResizeCase c10{std::string("opset10 ") + mode, {1, 2, 5, 4}, {1, 1, 1.6f, 0.5f}, {}, {StringAttr("mode", mode)}, 10};
    ExpectMatchesReference("Resize", c10, rng);
    ResizeCase up9{std::string("upsample9 ") + mode, {1, 2, 3, 4}, {1, 1, 2, 3}, {}, {StringAttr("mode", mode)}, 9};
    ExpectMatchesReference("Upsample", up9, rng);
  }
}

// Tables cached per geometry in a session: shapes and scales that differ
// (the same output size from two scales included) never share tables.
TEST(ResizeFast, SessionCacheKeyedByGeometry) {
  std::mt19937 rng(28);
  for (const char* mode : {"nearest", "linear"}) {
    Node node = testing::MakeNode("Resize", 4, 1, {StringAttr("mode", mode)});
    PreparedCache cache;
    const std::vector<std::pair<std::vector<int64_t>, std::vector<float>>> calls = {
        {{1, 2, 5, 6}, {1, 1, 2.1f, 2.1f}}, {{1, 2, 5, 6}, {1, 1, 2.19f, 2.19f}},
        {{2, 1, 7, 3}, {1, 1, 2.1f, 2.1f}}, {{1, 2, 5, 6}, {1, 1, 2.1f, 2.1f}}};
    for (const auto& [dims, scales] : calls)
      for (int threads : {1, 2, 3}) {
        ResizeCase c{"cached", dims, scales};
        std::vector<Value> inputs = MakeInputs(c, rng);
        auto want = testing::RunOp(node, 19, inputs);
        auto got = RunFastCached(node, inputs, &cache, threads);
        ASSERT_TRUE(want.ok() && got.ok()) << mode;
        const Tensor& w = want->outputs[0].tensor();
        ASSERT_EQ(got->dims(), w.dims()) << mode;
        EXPECT_EQ(0, std::memcmp(got->raw_data(), w.raw_data(), sizeof(float) * w.num_elements())) << mode;
      }
    EXPECT_EQ(cache.size(), 3u) << mode;
  }
}

// What the fast path leaves alone still gives the reference's answer (or error).
TEST(ResizeFast, UnhandledCallsGiveReferenceResult) {
  std::mt19937 rng(27);
  const std::vector<Attribute> linear = {StringAttr("mode", "linear")};
  const std::vector<ResizeCase> cases = {
      {"resized_channels", {1, 2, 3, 3}, {1, 2, 2, 2}, {}, linear},
      {"resized_batch_nearest", {2, 1, 3, 3}, {1.5f, 1, 2, 2}, {}, {}},
      {"rank3", {2, 5, 6}, {1, 2, 0.5f}, {}, linear},
      {"rank5", {1, 1, 2, 3, 4}, {1, 1, 2, 2, 2}, {}, {}},
      {"empty_out", {1, 2, 3, 3}, {}, {1, 2, 0, 3}, linear},
      {"scales_and_sizes", {1, 1, 2, 2}, {1, 1, 2, 2}, {1, 1, 4, 4}, linear},
      {"negative_scale", {1, 1, 2, 2}, {1, 1, -2, 2}, {}, {}},
      {"bad_mode", {1, 1, 2, 2}, {1, 1, 2, 2}, {}, {StringAttr("mode", "quadratic")}},
      // Sizes whose sum overflows int64 (run_fuzzer finding): an error, as in the reference.
      {"huge_sizes", {1, 1, 4, 4}, {}, {1, 1, int64_t{1} << 59, 0x4444444444444444}, {}},
  };
  for (const ResizeCase& c : cases) ExpectMatchesReference("Resize", c, rng);
  // Another element type: the reference's gather.
  Node node = testing::MakeNode("Resize", 3, 1, {});
  std::vector<Value> in = {Value(Tensor::FromVector<int32_t>({1, 2, 3, 4}, {1, 1, 2, 2})), Value(),
                           Value(Tensor::FromVector<float>({1, 1, 2, 2}, {4}))};
  auto want = testing::RunOp(node, 19, in);
  auto got = RunFast(node, 19, in, 2);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(0, std::memcmp(got->raw_data(), want->outputs[0].tensor().raw_data(), 16 * sizeof(int32_t)));
}

}  // namespace
}  // namespace nee
