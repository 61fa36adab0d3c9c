// The blocked layout's stems and MaxPool (ops/blocked_conv.cc,
// ep/cpu/blocked_stem_avx512.cc, blocked_stem_avx2.cc, blocked_pool_fast.cc):
//  - the reference BlockedConv on an NCHW input (input_layout = "nchw")
//    equals com.microsoft FusedConv's reference on the same tensors, its
//    output reordered by the FromBlocked reference;
//  - the AVX-512 and AVX2 stem kernels agree with that reference on the three zoo
//    stems' windows (6x6 s2 p2, 7x7 s2 p3, 3x3 s2 p1) and awkward ones (odd
//    sizes, stride 1, windows past both edges), M = 8/16/24/64, every
//    activation, with and without bias and residual, and gives the same bits
//    at 1, 2 and 3 threads;
//  - the reference BlockedMaxPool is MaxPool's reference through the
//    reorders, bitwise, NaN and -0 included; the fast kernel is bitwise the
//    reference at any thread count;
//  - the reference BlockedGlobalAveragePool is GlobalAveragePool's reference on
//    the NCHW tensor, bitwise; the fast kernel is bitwise that reference at any
//    thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "blocked_test_util.h"
#include "ep_test_util.h"

namespace nee {
namespace {

using testing::FloatsAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::ExpectClose;
using testing::Reorder;
using testing::StringAttr;

struct Act {
  std::string name;
  std::vector<float> params;
};

const std::vector<Act> kActs = {{"", {}},   {"Relu", {}}, {"Clip", {0.f, 6.f}}, {"Silu", {}},
                                {"Tanh", {}}, {"HardSwish", {}}};  // the last two: the reference runs them

struct Stem {
  const char* name;
  std::vector<int64_t> x, w;  // NCHW input, OIHW weights
  int64_t stride, pad;
};

const std::vector<Stem> kStems = {
    {"yolo 6x6 s2 p2", {1, 3, 22, 27}, {16, 3, 6, 6}, 2, 2},
    {"resnet 7x7 s2 p3", {2, 3, 19, 20}, {64, 3, 7, 7}, 2, 3},
    {"mobilenet 3x3 s2 p1", {1, 3, 23, 17}, {32, 3, 3, 3}, 2, 1},
    {"odd blocks", {1, 3, 9, 31}, {24, 3, 3, 3}, 2, 1},  // a pair with one block
    {"eight outputs", {1, 4, 7, 8}, {8, 4, 5, 5}, 1, 2},
    {"one channel s1", {2, 1, 6, 40}, {16, 1, 3, 3}, 1, 1},  // 40 columns: 12 + 12 + 8 + 6 tiles
    {"windows past both edges", {1, 5, 4, 3}, {16, 5, 6, 6}, 2, 2},  // no interior column
    {"no padding", {1, 3, 11, 13}, {40, 3, 3, 3}, 2, 0},
    // YOLO's stem on an even width (640 there): the last column's window reaches two columns past the right
    // edge, the first two past the left; AVX2 reads the input where it lies (no padded copy), as it does for
    // all of the above but the 7x7 p3 and 5x5 s1 p2 windows.
    {"yolo even width", {2, 3, 16, 20}, {32, 3, 6, 6}, 2, 2},
};

std::vector<Attribute> WindowAttrs(const Stem& s, const Act& act) {
  std::vector<Attribute> attrs = {IntsAttr("strides", {s.stride, s.stride}),
                                  IntsAttr("pads", {s.pad, s.pad, s.pad, s.pad})};
  if (!act.name.empty()) attrs.push_back(StringAttr("activation", act.name));
  if (!act.params.empty()) attrs.push_back(FloatsAttr("activation_params", act.params));
  return attrs;
}

Node StemNode(const Stem& s, const Act& act, size_t inputs) {
  std::vector<Attribute> attrs = WindowAttrs(s, act);
  attrs.push_back(IntAttr("channels", s.x[1]));
  attrs.push_back(StringAttr("input_layout", "nchw"));
  return testing::MakeNode("BlockedConv", inputs, 1, attrs, "ai.nee");
}

void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const float a = got.data<float>()[i], b = want.data<float>()[i];
    if (std::isnan(b)) ASSERT_TRUE(std::isnan(a)) << what << " at " << i;
    else ASSERT_EQ(std::signbit(a), std::signbit(b)) << what << " at " << i;
    if (!std::isnan(b)) ASSERT_EQ(a, b) << what << " at " << i;
  }
}

TEST(BlockedStem, ReferenceIsFusedConvOnTheNchwInput) {
  std::mt19937 rng(13);
  for (const Stem& s : kStems) {
    Tensor x = testing::RandomTensor(s.x, rng);
    Tensor w = testing::RandomTensor(s.w, rng);
    Tensor b = testing::RandomTensor({s.w[0]}, rng);
    for (const Act& act : {kActs[0], kActs[2], kActs[3]}) {
      auto want = testing::RunOp(testing::MakeNode("FusedConv", 3, 1, WindowAttrs(s, act), "com.microsoft"), 1,
                                 {Value(x), Value(w), Value(b)});
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      auto got = testing::RunOp(StemNode(s, act, 3), 1, {Value(x), Value(w), Value(b)});
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectClose(Reorder("FromBlocked", got->outputs[0].tensor(), s.w[0]), want->outputs[0].tensor(),
                  std::string(s.name) + " " + act.name);
    }
  }
}

TEST(BlockedStemFast, AgreesWithTheReferenceAndIgnoresTheThreadCount) {
  if (cpu::SgemmActiveIsa() < cpu::SgemmIsa::kAvx2) GTEST_SKIP() << "this CPU lacks avx2 and fma";
  std::mt19937 rng(17);
  for (const Stem& s : kStems) {
    Tensor x = testing::RandomTensor(s.x, rng);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] *= 4.f;  // saturate Clip
    Tensor w = testing::RandomTensor(s.w, rng);
    Tensor b = testing::RandomTensor({s.w[0]}, rng);
    for (const Act& act : kActs) {
      for (size_t inputs : {2, 3, 4}) {
        std::vector<Value> in = {Value(x), Value(w)};
        if (inputs >= 3) in.push_back(Value(b));
        if (inputs == 4) {
          auto shape = testing::RunOp(StemNode(s, act, 3), 1, {Value(x), Value(w), Value(b)});
          ASSERT_TRUE(shape.ok()) << shape.status().ToString();
          in.push_back(Value(testing::RandomTensor(shape->outputs[0].tensor().dims(), rng)));
        }
        const Node node = StemNode(s, act, inputs);
        auto ref = testing::RunOp(node, 1, in);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        const std::string what = std::string(s.name) + " " + act.name + " inputs " + std::to_string(inputs);
        // kAvx2: blocked_stem_avx2; kAvx512: the best this CPU has (blocked_stem_avx512 where it has AVX-512).
        testing::ExpectFastCloseAtEveryIsaAndThreadCount(node, in, ref->outputs[0].tensor(), what);
      }
    }
  }
}

TEST(BlockedStem, RefusesAnInputThatDoesNotFitTheChannels) {
  std::mt19937 rng(2);
  const Stem& s = kStems[0];
  Tensor x = testing::RandomTensor({1, 4, 8, 8}, rng);  // 4 channels, the node says 3
  Tensor w = testing::RandomTensor(s.w, rng);
  auto out = testing::RunKernel(cpu::BlockedConvFloat, StemNode(s, kActs[0], 2), 1, {Value(x), Value(w)}, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input 0"), std::string::npos) << out.status().message();
  // A blocked (5-D) tensor where the node wants NCHW.
  Tensor xb = Reorder("ToBlocked", testing::RandomTensor({1, 3, 8, 8}, rng), 3);
  out = testing::RunKernel(cpu::BlockedConvFloat, StemNode(s, kActs[0], 2), 1, {Value(xb), Value(w)}, 1);
  ASSERT_FALSE(out.ok());
  // An input_layout that is neither "blocked" nor "nchw".
  Node odd = StemNode(s, kActs[0], 2);
  for (Attribute& a : odd.attributes)
    if (a.name == "input_layout") a.s = "nhwc";
  out = testing::RunKernel(cpu::BlockedConvFloat, odd, 1, {Value(testing::RandomTensor(s.x, rng)), Value(w)}, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input_layout"), std::string::npos) << out.status().message();
}

// ---- BlockedMaxPool --------------------------------------------------------------------

struct Pool {
  const char* name;
  std::vector<int64_t> x;
  int64_t k, stride, pad;
};

const std::vector<Pool> kPools = {
    {"resnet 3x3 s2 p1", {1, 16, 13, 12}, 3, 2, 1},  // odd and even sides
    {"3x3 s2 p1 batch", {2, 24, 8, 9}, 3, 2, 1},
    {"2x2 s2", {1, 8, 7, 10}, 2, 2, 0},
    {"3x3 s1 p1", {1, 8, 5, 6}, 3, 1, 1},
    {"5x5 s1 p2 (SPPF)", {1, 16, 6, 7}, 5, 1, 2},
    // Stride 1: window maxima along each input row shared by the output rows (PoolStrip).
    {"5x5 s1 p2 wider", {2, 24, 9, 13}, 5, 1, 2},
    {"3x3 s1 no pad", {1, 8, 6, 9}, 3, 1, 0},
    {"5x5 s1 p2 fewer rows than the window", {1, 8, 3, 11}, 5, 1, 2},
    {"window wider than the image", {1, 8, 2, 3}, 5, 2, 2},
};

std::vector<Attribute> PoolAttrs(const Pool& p) {
  return {IntsAttr("kernel_shape", {p.k, p.k}), IntsAttr("strides", {p.stride, p.stride}),
          IntsAttr("pads", {p.pad, p.pad, p.pad, p.pad})};
}

Node BlockedPoolNode(const Pool& p, int64_t channels) {
  std::vector<Attribute> attrs = PoolAttrs(p);
  attrs.push_back(IntAttr("channels", channels));
  return testing::MakeNode("BlockedMaxPool", 1, 1, attrs, "ai.nee");
}

// Random values with ties, -0/+0 pairs and a few NaN and infinities: the
// values for which the order of max matters.
Tensor AwkwardTensor(const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = testing::RandomTensor(dims, rng);
  std::uniform_int_distribution<int> pick(0, 19);
  float* v = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (pick(rng)) {
      case 0: v[i] = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: v[i] = -0.f; break;
      case 2: v[i] = 0.f; break;
      case 3: v[i] = -std::numeric_limits<float>::infinity(); break;
      case 4: v[i] = std::round(v[i] * 2.f) / 2.f; break;  // ties
      default: v[i] = -std::fabs(v[i]);  // mostly negative: the padding must never win
    }
  }
  return t;
}

TEST(BlockedMaxPool, ReferenceIsMaxPoolThroughTheReorders) {
  std::mt19937 rng(23);
  for (const Pool& p : kPools) {
    Tensor x = AwkwardTensor(p.x, rng);
    auto want = testing::RunOp(testing::MakeNode("MaxPool", 1, 1, PoolAttrs(p)), 12, {Value(x)});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = testing::RunOp(BlockedPoolNode(p, p.x[1]), 1, {Value(Reorder("ToBlocked", x, p.x[1]))});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectBitwise(Reorder("FromBlocked", got->outputs[0].tensor(), p.x[1]), want->outputs[0].tensor(), p.name);
  }
}

TEST(BlockedMaxPoolFast, IsTheReferenceBitwiseAtAnyThreadCount) {
  std::mt19937 rng(29);
  for (const Pool& p : kPools) {
    Tensor xb = Reorder("ToBlocked", AwkwardTensor(p.x, rng), p.x[1]);
    const Node node = BlockedPoolNode(p, p.x[1]);
    auto ref = testing::RunOp(node, 1, {Value(xb)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (int threads : {1, 2, 3}) {
      auto got = testing::RunKernel(cpu::BlockedMaxPoolFloat, node, 1, {Value(xb)}, threads);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectBitwise(*got, ref->outputs[0].tensor(), std::string(p.name) + " threads " + std::to_string(threads));
    }
  }
}

// Windows of nothing but -inf and NaN: a row of them has no maximum above
// -inf, which the stride-1 path's row maxima must give as -inf itself.
TEST(BlockedMaxPoolFast, WindowsOfMinusInfinityAndNaN) {
  std::mt19937 rng(31);
  std::bernoulli_distribution nan(0.3);
  for (const Pool& p : kPools) {
    Tensor x = testing::RandomTensor(p.x, rng);
    for (int64_t i = 0; i < x.num_elements(); ++i)
      x.data<float>()[i] = nan(rng) ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
    Tensor xb = Reorder("ToBlocked", x, p.x[1]);
    const Node node = BlockedPoolNode(p, p.x[1]);
    auto ref = testing::RunOp(node, 1, {Value(xb)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    auto got = testing::RunKernel(cpu::BlockedMaxPoolFloat, node, 1, {Value(xb)}, 2);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectBitwise(*got, ref->outputs[0].tensor(), p.name);
  }
}

TEST(BlockedMaxPool, RefusesBlocksThatDoNotFitTheChannels) {
  std::mt19937 rng(4);
  Tensor xb = Reorder("ToBlocked", testing::RandomTensor({1, 16, 5, 5}, rng), 16);
  auto out = testing::RunKernel(cpu::BlockedMaxPoolFloat, BlockedPoolNode(kPools[0], 24), 1, {Value(xb)}, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input 0"), std::string::npos) << out.status().message();
}

// Feature maps as CNNs end (7x7, 1x1) and awkward ones (a 1-pixel-wide map, batch 3, a pixel count that is
// not a multiple of anything), more or fewer than four blocks (the fast kernel's four chains, then one at a
// time), large values of both signs so that the summation order shows in the bits.
TEST(BlockedGlobalAveragePool, ReferenceAndFastKernelAreGlobalAveragePoolBitwise) {
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> wide(-1e4f, 1e4f);
  const std::vector<std::vector<int64_t>> shapes = {{1, 1280, 7, 7}, {1, 2048, 1, 1}, {3, 24, 13, 1},
                                                    {2, 40, 5, 9},   {1, 8, 17, 17},   {2, 16, 3, 3}};
  for (const std::vector<int64_t>& shape : shapes) {
    Tensor x = testing::RandomTensor(shape, rng);
    for (int64_t i = 0; i < x.num_elements(); i += 3) x.data<float>()[i] = wide(rng);
    auto want = testing::RunOp(testing::MakeNode("GlobalAveragePool", 1, 1, {}), 1, {Value(x)});
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Node node = testing::MakeNode("BlockedGlobalAveragePool", 1, 1, {IntAttr("channels", shape[1])}, "ai.nee");
    Tensor xb = Reorder("ToBlocked", x, shape[1]);
    auto ref = testing::RunOp(node, 1, {Value(xb)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    const std::string what = "[" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ", " +
                             std::to_string(shape[2]) + ", " + std::to_string(shape[3]) + "]";
    ExpectBitwise(ref->outputs[0].tensor(), want->outputs[0].tensor(), "reference " + what);
    for (int threads : {1, 2, 3}) {
      auto got = testing::RunKernel(cpu::BlockedGlobalAveragePoolFloat, node, 1, {Value(xb)}, threads);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectBitwise(*got, want->outputs[0].tensor(), "fast " + what + " threads " + std::to_string(threads));
    }
  }
}

TEST(BlockedGlobalAveragePool, RefusesBlocksThatDoNotFitTheChannels) {
  std::mt19937 rng(5);
  Tensor xb = Reorder("ToBlocked", testing::RandomTensor({1, 16, 5, 5}, rng), 16);
  const Node node = testing::MakeNode("BlockedGlobalAveragePool", 1, 1, {IntAttr("channels", 24)}, "ai.nee");
  auto out = testing::RunKernel(cpu::BlockedGlobalAveragePoolFloat, node, 1, {Value(xb)}, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input 0"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace nee
