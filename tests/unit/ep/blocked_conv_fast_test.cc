// The channel-blocked ops (ops/blocked_conv.cc, ep/cpu/blocked_conv_fast.cc):
//  - the reference BlockedConv equals com.microsoft FusedConv's reference run
//    on the NCHW tensors, reordered through the ToBlocked / FromBlocked references;
//  - the fast kernels agree with those references on pointwise and depthwise
//    geometries with ragged pixel counts, every activation, with and without
//    bias and residual, and give the same bits at 1, 2 and 3 threads and on
//    AVX-512 (the pointwise pair tiles) and AVX2;
//  - the fast reorders are exact.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "ep/cpu/blocked_pointwise_avx512.h"
#include "ep/cpu/conv_winograd43.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "blocked_test_util.h"
#include "ep_test_util.h"
#include "ops/blocked_conv.h"
#include "ops/op_registry.h"

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

const std::vector<Act> kActs = {{"", {}},         {"Relu", {}},       {"Clip", {0.f, 6.f}},
                                {"HardSwish", {}}, {"LeakyRelu", {0.1f}}, {"Sigmoid", {}},
                                {"Silu", {}},      {"Tanh", {}},       {"HardSigmoid", {0.3f, 0.4f}}};

struct Geometry {
  const char* name;
  std::vector<int64_t> x, w;  // NCHW input, OIHW weights
  int64_t group, stride, pad;
};

const std::vector<Geometry> kGeometries = {
    {"pointwise 7x7", {1, 16, 7, 7}, {24, 16, 1, 1}, 1, 1, 0},        // 49 pixels: tiles 6 x 7 + 4 + 3
    {"pointwise batch", {2, 8, 5, 9}, {40, 8, 1, 1}, 1, 1, 0},        // odd blocks (5): a lone last block
    {"pointwise long", {1, 24, 13, 11}, {8, 24, 1, 1}, 1, 1, 0},      // 143 pixels in several chunks
    {"pointwise pairs", {1, 32, 9, 9}, {48, 32, 1, 1}, 1, 1, 0},      // AVX-512: three pairs, 81 pixels
    {"pointwise odd pairs", {2, 16, 7, 5}, {56, 16, 1, 1}, 1, 1, 0},  // AVX-512: 2 + 2 pairs, the last half
    {"pointwise even tiles", {2, 16, 5, 5}, {32, 16, 1, 1}, 1, 1, 0},  // AVX2: 25 pixels as 5 x 5 tiles
    {"pointwise one pixel", {2, 24, 1, 1}, {120, 24, 1, 1}, 1, 1, 0},   // AVX2: 15 blocks as 12 + 3 of a lone pixel
    {"pointwise one pixel wide", {1, 40, 1, 1}, {208, 40, 1, 1}, 1, 1, 0},  // 26 blocks as 12 + 11 + 3
    {"depthwise s1", {1, 16, 9, 11}, {16, 1, 3, 3}, 16, 1, 1},
    {"depthwise s2 even", {2, 8, 12, 14}, {8, 1, 3, 3}, 8, 2, 1},
    {"depthwise s2 odd", {1, 24, 11, 13}, {24, 1, 3, 3}, 24, 2, 1},
    {"depthwise tiny", {1, 8, 2, 3}, {8, 1, 3, 3}, 8, 1, 1},          // no interior column at all
    // 5x5 and 7x7 depthwise (depthwise_blocked_kxk.cc): rows in tiles of up to eight, kernel rows above
    // and below the image, no interior column at all, no padding at all, strides 1 and 2, pads short of half.
    {"depthwise 5x5 s1", {1, 16, 9, 14}, {16, 1, 5, 5}, 16, 1, 2},
    {"depthwise 5x5 s2", {2, 8, 13, 17}, {8, 1, 5, 5}, 8, 2, 2},
    {"depthwise 5x5 s2 pad 1", {1, 24, 12, 11}, {24, 1, 5, 5}, 24, 2, 1},
    {"depthwise 5x5 tiny", {1, 8, 3, 4}, {8, 1, 5, 5}, 8, 1, 2},
    {"depthwise 5x5 s2 wide", {1, 8, 11, 40}, {8, 1, 5, 5}, 8, 2, 2},  // 20 outputs a row: 8 + 8 + 4
    {"depthwise 5x5 no pads", {1, 16, 9, 13}, {16, 1, 5, 5}, 16, 1, 0},
    {"depthwise 7x7 s1", {1, 16, 10, 21}, {16, 1, 7, 7}, 16, 1, 3},
    {"depthwise 7x7 s2", {1, 8, 15, 16}, {8, 1, 7, 7}, 8, 2, 3},
    {"grouped (reference)", {1, 16, 5, 5}, {16, 8, 3, 3}, 2, 1, 1},   // the fast kernel passes it on
    // k x k: AVX-512 and AVX2 compute them directly (blocked_direct_avx512.cc, blocked_direct_avx2.cc).
    {"3x3 s2", {1, 16, 13, 11}, {24, 16, 3, 3}, 1, 2, 1},             // odd pairs, border columns both sides
    {"3x3 s1 wide", {2, 8, 5, 29}, {40, 8, 3, 3}, 1, 1, 1},           // 27 interior columns: 12 + 12 + 3
    {"1x1 s2", {1, 32, 14, 14}, {64, 32, 1, 1}, 1, 2, 0},             // ResNet's downsample, no border
    {"1x1 s2 odd", {2, 16, 9, 11}, {24, 16, 1, 1}, 1, 2, 0},          // subsampled: 5 x 6 of 9 x 11
    {"1x1 s3", {1, 8, 10, 7}, {40, 8, 1, 1}, 1, 3, 0},                // subsampled: 4 x 3 of 10 x 7
    // Subsampled: 380 output pixels in 8 chunks (output blocks shared out too at 3 threads, not at 2),
    // an odd last row of the strided input; and a strided one whose weights go by output channels first.
    {"1x1 s2 many pixels", {1, 16, 40, 37}, {24, 16, 1, 1}, 1, 2, 0},
    {"1x1 s2 big weights", {2, 512, 5, 7}, {512, 512, 1, 1}, 1, 2, 0},  // 1 MB: output channel groups first
    {"5x5 s1 pad 2", {1, 8, 6, 7}, {16, 8, 5, 5}, 1, 1, 2},           // windows wider than the image
    {"3x3 s2 no pad", {1, 24, 9, 10}, {8, 24, 3, 3}, 1, 2, 0},
    // 3x3 stride 1, 16 channels and more: AVX-512 runs Winograd on the blocked layout (conv_winograd.h).
    {"3x3 s1 Winograd", {1, 16, 9, 13}, {24, 16, 3, 3}, 1, 1, 1},          // odd rows and columns
    {"3x3 s1 Winograd no pad", {2, 24, 8, 7}, {16, 24, 3, 3}, 1, 1, 0},
    // Weights beyond L2 (1 MB, 1.2 MB): tasks by output channels first.
    {"pointwise big weights", {1, 512, 3, 5}, {512, 512, 1, 1}, 1, 1, 0},
    {"3x3 s2 big weights", {1, 256, 3, 35}, {136, 256, 3, 3}, 1, 2, 1},  // 17 blocks: an odd last pair
    // AVX2's direct kernel (blocked_direct_avx2.cc): passes of three input blocks (3, 3, 2), a lone last
    // output block, two images of 5 x 4 outputs (output blocks shared out at 2 and 3 threads); a 7x7
    // stride-2 window (one input block a pass) wider than the padded image's last columns.
    {"3x3 s2 passes", {2, 64, 9, 8}, {40, 64, 3, 3}, 1, 2, 1},
    {"7x7 s2 pad 3", {1, 16, 17, 15}, {16, 16, 7, 7}, 1, 2, 3},
    // Even widths, 3x3 stride 2 pad 1: only the first column reaches past an edge, and AVX2's first tiles
    // skip its left taps on the input as it lies (no padded copy); 7 outputs a row (tiles 4 + 3, a lone
    // last block), and 1 output a row (the first tile is the whole row).
    {"3x3 s2 left pad only", {2, 16, 9, 14}, {24, 16, 3, 3}, 1, 2, 1},
    {"3x3 s2 left pad narrow", {1, 24, 5, 2}, {16, 24, 3, 3}, 1, 2, 1},
    // AVX2's flat tiles across row ends on the padded copy (rows of 7 and 5 outputs, 64 channels and more):
    // ResNet-50's 14x14 -> 7x7 conv's shape, two images; a lone last block, a 5x5 window at stride 1.
    {"3x3 s2 flat rows", {2, 16, 14, 14}, {64, 16, 3, 3}, 1, 2, 1},
    {"5x5 s1 flat rows", {2, 8, 7, 4}, {72, 8, 5, 5}, 1, 1, 2},
    // 295 KiB of weights in two groups (four at 3 threads) beside a larger input: AVX2's tasks go band by
    // band through the groups.
    {"3x3 s2 band by band", {1, 128, 26, 24}, {64, 128, 3, 3}, 1, 2, 1},
    // 288 KiB of weights a unit of two output blocks: the next pass's and unit's weights prefetched.
    {"3x3 s2 weights ahead", {1, 512, 5, 6}, {64, 512, 3, 3}, 1, 2, 1},
};

// Random weights; over many inputs a window (fan-in beyond 256) scaled by
// 1 / sqrt(fan-in), so that the sums keep unit scale and float's rounding
// stays within ExpectClose's bound, as it does for the small geometries.
Tensor Weights(const Geometry& g, std::mt19937& rng) {
  Tensor w = testing::RandomTensor(g.w, rng);
  const int64_t fan_in = g.w[1] * g.w[2] * g.w[3];
  if (fan_in > 256)
    for (int64_t i = 0; i < w.num_elements(); ++i) w.data<float>()[i] /= std::sqrt(static_cast<float>(fan_in));
  return w;
}

Node BlockedConvNode(const Geometry& g, const Act& act, size_t inputs) {
  std::vector<Attribute> attrs = {IntAttr("channels", g.x[1]), IntAttr("group", g.group),
                                  IntsAttr("strides", {g.stride, g.stride}),
                                  IntsAttr("pads", {g.pad, g.pad, g.pad, g.pad})};
  if (!act.name.empty()) attrs.push_back(StringAttr("activation", act.name));
  if (!act.params.empty()) attrs.push_back(FloatsAttr("activation_params", act.params));
  return testing::MakeNode("BlockedConv", inputs, 1, attrs, "ai.nee");
}

Node FusedConvNode(const Geometry& g, const Act& act, size_t inputs) {
  std::vector<Attribute> attrs = {IntAttr("group", g.group), IntsAttr("strides", {g.stride, g.stride}),
                                  IntsAttr("pads", {g.pad, g.pad, g.pad, g.pad})};
  if (!act.name.empty()) attrs.push_back(StringAttr("activation", act.name));
  if (!act.params.empty()) attrs.push_back(FloatsAttr("activation_params", act.params));
  return testing::MakeNode("FusedConv", inputs, 1, attrs, "com.microsoft");
}

void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  for (int64_t i = 0; i < want.num_elements(); ++i)
    ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << what << " at " << i;
}

TEST(BlockedConv, ReferenceIsFusedConvThroughTheReorders) {
  std::mt19937 rng(3);
  for (const Geometry& g : kGeometries) {
    Tensor x = testing::RandomTensor(g.x, rng);
    Tensor w = Weights(g, rng);
    Tensor b = testing::RandomTensor({g.w[0]}, rng);
    for (const Act& act : {kActs[2], kActs[6]}) {
      auto nchw = testing::RunOp(FusedConvNode(g, act, 3), 1, {Value(x), Value(w), Value(b)});
      ASSERT_TRUE(nchw.ok()) << nchw.status().ToString();
      const Tensor& want = nchw->outputs[0].tensor();
      Tensor z = testing::RandomTensor(want.dims(), rng);
      auto with_z = testing::RunOp(FusedConvNode(g, act, 4), 1, {Value(x), Value(w), Value(b), Value(z)});
      ASSERT_TRUE(with_z.ok()) << with_z.status().ToString();
      Tensor xb = Reorder("ToBlocked", x, g.x[1]);
      auto blocked = testing::RunOp(BlockedConvNode(g, act, 3), 1, {Value(xb), Value(w), Value(b)});
      ASSERT_TRUE(blocked.ok()) << blocked.status().ToString();
      ExpectClose(Reorder("FromBlocked", blocked->outputs[0].tensor(), g.w[0]), want, g.name);
      Tensor zb = Reorder("ToBlocked", z, g.w[0]);
      auto blocked_z = testing::RunOp(BlockedConvNode(g, act, 4), 1, {Value(xb), Value(w), Value(b), Value(zb)});
      ASSERT_TRUE(blocked_z.ok()) << blocked_z.status().ToString();
      ExpectClose(Reorder("FromBlocked", blocked_z->outputs[0].tensor(), g.w[0]), with_z->outputs[0].tensor(),
                  std::string(g.name) + " with Z");
    }
  }
}

TEST(BlockedConvFast, AgreesWithTheReferenceAndIgnoresTheThreadCount) {
  std::mt19937 rng(5);
  for (const Geometry& g : kGeometries) {
    Tensor x = testing::RandomTensor(g.x, rng);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] *= 4.f;  // saturate Clip, HardSigmoid
    Tensor xb = Reorder("ToBlocked", x, g.x[1]);
    Tensor w = Weights(g, rng);
    Tensor b = testing::RandomTensor({g.w[0]}, rng);
    for (const Act& act : kActs) {
      for (size_t inputs : {2, 3, 4}) {
        std::vector<Value> in = {Value(xb), Value(w)};
        if (inputs >= 3) in.push_back(Value(b));
        if (inputs == 4) {
          auto shape = testing::RunOp(BlockedConvNode(g, act, 3), 1, {Value(xb), Value(w), Value(b)});
          ASSERT_TRUE(shape.ok()) << shape.status().ToString();
          in.push_back(Value(testing::RandomTensor(shape->outputs[0].tensor().dims(), rng)));
        }
        const Node node = BlockedConvNode(g, act, inputs);
        auto ref = testing::RunOp(node, 1, in);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        const std::string what = std::string(g.name) + " " + act.name + " inputs " + std::to_string(inputs);
        Tensor first;
        // kAvx512: the best this CPU has (where it has AVX-512, the pointwise pair tiles).
        for (cpu::SgemmIsa isa : {cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512}) {
          cpu::SgemmLimitIsa(isa);
          for (int threads : {1, 2, 3}) {
            auto got = testing::RunKernel(cpu::BlockedConvFloat, node, 1, in, threads);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            ExpectClose(*got, ref->outputs[0].tensor(), what);
            // Across ISAs only the pointwise tiles claim the same bits (the direct kernels pad the border on
            // different conditions, and a padded tap's 0 * w can change a zero's sign).
            const bool pointwise = g.group == 1 && g.w[2] == 1 && g.w[3] == 1 && g.stride == 1 && g.pad == 0;
            if (threads == 1 && (first.num_elements() == 0 || !pointwise)) first = *got;
            else ExpectBitwise(*got, first, what + " threads " + std::to_string(threads) +
                                                (isa == cpu::SgemmIsa::kAvx2 ? " avx2" : " dispatched"));
          }
        }
        cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
      }
    }
  }
}

// An output the plan put on the residual's bytes
// (BlockedConvOverwritableInput): the fast and the reference kernel give
// the bits they give with the output apart, on the paths that read each
// residual vector just before storing over it (pointwise tiles that finish as
// they store, strided ones too) and on those that move it aside first (an
// exponential activation, 3x3 direct and Winograd, the reference).
TEST(BlockedConvFast, OutputOnTheResidualGivesTheSameBits) {
  // Output 0 on the given tensor's bytes, as the arena places it.
  struct OnResidual : KernelContext::OutputAllocator {
    Tensor residual;
    Result<Tensor> Allocate(size_t, DataType type, std::vector<int64_t> dims, bool) override {
      if (type != residual.dtype() || dims != residual.dims()) return RuntimeError("the output is not the residual's");
      return Tensor::View(type, dims, residual.raw_data(), nullptr);
    }
  };
  auto run_on_residual = [](KernelFn kernel, const Node& node, std::vector<Value> in, int threads) -> Result<Tensor> {
    OnResidual on;
    on.residual = in[3].tensor().Clone().value();  // a fresh residual: the run writes over it
    in[3] = Value(on.residual);
    std::vector<const Value*> ptrs;
    for (const Value& v : in) ptrs.push_back(&v);
    std::vector<Value> outputs(1);
    ThreadPool pool(threads);
    KernelContext ctx(node, 1, ptrs, &outputs, &on, &pool, nullptr);
    NEE_RETURN_IF_ERROR(kernel(ctx));
    if (outputs[0].tensor().raw_data() != on.residual.raw_data()) return RuntimeError("the output moved");
    return on.residual.Clone();  // the view's bytes go with `on`
  };
  const std::vector<Geometry> geometries = {
      {"pointwise", {2, 16, 5, 7}, {24, 16, 1, 1}, 1, 1, 0},
      {"pointwise big weights", {1, 512, 3, 5}, {512, 512, 1, 1}, 1, 1, 0},  // groups of output blocks
      {"1x1 s2", {1, 16, 9, 11}, {24, 16, 1, 1}, 1, 2, 0},
      {"3x3 s1", {1, 16, 9, 13}, {24, 16, 3, 3}, 1, 1, 1},
      {"3x3 s1 Winograd", {1, 32, 9, 13}, {32, 32, 3, 3}, 1, 1, 1},
  };
  auto reference = OpRegistry::Global().Resolve("ai.nee", "BlockedConv", 1);
  ASSERT_TRUE(reference.ok());
  std::mt19937 rng(23);
  for (const Geometry& g : geometries) {
    const Tensor xb = Reorder("ToBlocked", testing::RandomTensor(g.x, rng), g.x[1]);
    const Tensor w = Weights(g, rng), b = testing::RandomTensor({g.w[0]}, rng);
    for (const Act& act : {kActs[0], kActs[1], kActs[2], kActs[6]}) {  // none, Relu, Clip, Silu
      const Node node = BlockedConvNode(g, act, 4);
      auto shape = testing::RunOp(BlockedConvNode(g, act, 3), 1, {Value(xb), Value(w), Value(b)});
      ASSERT_TRUE(shape.ok()) << shape.status().ToString();
      const std::vector<Value> in = {Value(xb), Value(w), Value(b),
                                     Value(testing::RandomTensor(shape->outputs[0].tensor().dims(), rng))};
      const std::string what = std::string(g.name) + " " + act.name;
      for (cpu::SgemmIsa isa : {cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512}) {
        cpu::SgemmLimitIsa(isa);
        for (int threads : {1, 2, 3}) {
          auto apart = testing::RunKernel(cpu::BlockedConvFloat, node, 1, in, threads);
          ASSERT_TRUE(apart.ok()) << apart.status().ToString();
          auto on = run_on_residual(cpu::BlockedConvFloat, node, in, threads);
          ASSERT_TRUE(on.ok()) << what << ": " << on.status().ToString();
          ExpectBitwise(*on, *apart, what + " threads " + std::to_string(threads));
        }
      }
      cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
      auto apart = testing::RunKernel((*reference)->kernel, node, 1, in, 1);
      ASSERT_TRUE(apart.ok()) << apart.status().ToString();
      auto on = run_on_residual((*reference)->kernel, node, in, 1);
      ASSERT_TRUE(on.ok()) << what << ": " << on.status().ToString();
      ExpectBitwise(*on, *apart, what + " reference");
    }
  }
}

// A strided 1x1 BlockedConv with only end pads (a hand-written ai.nee node;
// the layout pass never makes one): its last output row and column lie in
// the padding, so it cannot take the gathered-pointwise path, and the
// kernel's result is the reference's (which reads zeros there).
TEST(BlockedConvFast, StridedPointwiseWithEndPadsReadsNoFurtherThanTheInput) {
  std::mt19937 rng(9);
  Tensor x = testing::RandomTensor({1, 16, 4, 6}, rng);
  Tensor w = testing::RandomTensor({24, 16, 1, 1}, rng);
  const Node node = testing::MakeNode("BlockedConv", 2, 1,
                                      {IntAttr("channels", 16), IntsAttr("strides", {2, 2}), IntsAttr("pads", {0, 0, 1, 1})},
                                      "ai.nee");
  const std::vector<Value> in = {Value(Reorder("ToBlocked", x, 16)), Value(w)};
  auto ref = testing::RunOp(node, 1, in);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  ASSERT_EQ(ref->outputs[0].tensor().dims(), (std::vector<int64_t>{1, 3, 3, 4, 8}));  // 3 x 4 outputs of 4 x 6
  for (int threads : {1, 2}) {
    auto got = testing::RunKernel(cpu::BlockedConvFloat, node, 1, in, threads);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectClose(*got, ref->outputs[0].tensor(), "1x1 s2 end pads");
  }
}

// A k x k conv padded above and below only (pads {1, 0, 1, 0}): no column
// reaches past the left or right edge, so the AVX2 direct kernel reads the
// input where it lies (no padded copy) and its top and bottom rows skip the
// tap rows outside the image; bands of several rows, residual and Relu.
TEST(BlockedConvFast, DirectConvPaddedAboveAndBelowOnly) {
  std::mt19937 rng(10);
  Tensor x = testing::RandomTensor({2, 24, 11, 13}, rng);
  Tensor w = testing::RandomTensor({40, 24, 3, 3}, rng);
  Tensor b = testing::RandomTensor({40}, rng);
  for (int64_t stride : {1, 2}) {
    const int64_t oh = (11 + 2 - 3) / stride + 1, ow = (13 - 3) / stride + 1;
    Tensor z = Reorder("ToBlocked", testing::RandomTensor({2, 40, oh, ow}, rng), 40);
    const Node node = testing::MakeNode("BlockedConv", 4, 1,
                                        {IntAttr("channels", 24), IntsAttr("strides", {stride, stride}),
                                         IntsAttr("pads", {1, 0, 1, 0}), StringAttr("activation", "Relu")},
                                        "ai.nee");
    const std::vector<Value> in = {Value(Reorder("ToBlocked", x, 24)), Value(w), Value(b), Value(z)};
    auto ref = testing::RunOp(node, 1, in);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    Tensor first;
    for (int threads : {1, 2, 3}) {
      auto got = testing::RunKernel(cpu::BlockedConvFloat, node, 1, in, threads);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectClose(*got, ref->outputs[0].tensor(), "pads above and below, stride " + std::to_string(stride));
      if (threads == 1) first = *got;
      else ExpectBitwise(*got, first, "pads above and below, threads " + std::to_string(threads));
    }
  }
}

TEST(BlockedConvFast, ReordersAreExact) {
  std::mt19937 rng(8);
  // (23 x 29: several pixel runs a plane, 8-pixel tails.)
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{1, 8, 3, 5}, {2, 24, 7, 7}, {1, 16, 1, 1}, {2, 16, 23, 29}}) {
    Tensor x = testing::RandomTensor(dims, rng);
    Tensor ref = Reorder("ToBlocked", x, dims[1]);
    auto fast = testing::RunKernel(cpu::ToBlockedFloat, testing::MakeNode("ToBlocked", 1, 1, {}, "ai.nee"), 1,
                                   {Value(x)}, 2);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    ExpectBitwise(*fast, ref, "ToBlocked");
    Node back = testing::MakeNode("FromBlocked", 1, 1, {IntAttr("channels", dims[1])}, "ai.nee");
    auto round = testing::RunKernel(cpu::FromBlockedFloat, back, 1, {Value(*fast)}, 2);
    ASSERT_TRUE(round.ok()) << round.status().ToString();
    ExpectBitwise(*round, x, "FromBlocked");
  }
  // Channels that are not a multiple of 8 go through the reference, padding lanes 0.
  Tensor odd = testing::RandomTensor({1, 3, 2, 2}, rng);
  auto fast = testing::RunKernel(cpu::ToBlockedFloat, testing::MakeNode("ToBlocked", 1, 1, {}, "ai.nee"), 1,
                                 {Value(odd)}, 1);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  ASSERT_EQ(fast->dims(), (std::vector<int64_t>{1, 1, 2, 2, 8}));
  for (int64_t p = 0; p < 4; ++p)
    for (int64_t l = 0; l < 8; ++l)
      EXPECT_EQ(fast->data<float>()[p * 8 + l], l < 3 ? odd.data<float>()[l * 4 + p] : 0.f);
}

TEST(BlockedConv, RefusesMismatchedInputsWithTheirNames) {
  std::mt19937 rng(1);
  const Geometry& g = kGeometries[0];
  Tensor xb = Reorder("ToBlocked", testing::RandomTensor(g.x, rng), g.x[1]);
  Tensor w = testing::RandomTensor({24, 8, 1, 1}, rng);  // 8 input channels, the node says 16
  auto out = testing::RunKernel(cpu::BlockedConvFloat, BlockedConvNode(g, kActs[0], 2), 1, {Value(xb), Value(w)}, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("input 1"), std::string::npos) << out.status().message();
}

// Runs the fast kernel as a session does, with the node's PreparedCache
// (weights and bias constant).
Result<Tensor> RunPrepared(const Node& node, const std::vector<Value>& in, PreparedCache& cache, int threads) {
  const std::vector<bool> constant = {false, true, true, false};
  return testing::RunKernelPrepared(cpu::BlockedConvFloat, node, 1, in, threads, &cache, &constant);
}

// In a session the geometry is planned once per input shapes (and the
// weights packed once): runs that find it cached, other input shapes, other
// thread counts and inputs that do not fit give what planning per call gives.
TEST(BlockedConvFast, CachedGeometryGivesWhatPlanningPerCallGives) {
  std::mt19937 rng(11);
  for (const Geometry& g : kGeometries) {
    for (size_t inputs : {2, 4}) {
      const Node node = BlockedConvNode(g, kActs[6], inputs);
      PreparedCache cache;
      const Value w(Weights(g, rng)), b(testing::RandomTensor({g.w[0]}, rng));  // constant
      // Two input sizes through one cache: the second must not reuse the first's geometry.
      for (int64_t grow : {0, 3, 0}) {
        std::vector<int64_t> dims = g.x;
        dims[2] += grow;
        dims[3] += grow;
        std::vector<Value> in = {Value(Reorder("ToBlocked", testing::RandomTensor(dims, rng), g.x[1])), w};
        if (inputs == 4) {
          in.push_back(b);
          auto shape = testing::RunOp(BlockedConvNode(g, kActs[0], 3), 1, {in[0], in[1], in[2]});
          ASSERT_TRUE(shape.ok()) << shape.status().ToString();
          in.push_back(Value(testing::RandomTensor(shape->outputs[0].tensor().dims(), rng)));
        }
        auto want = testing::RunKernel(cpu::BlockedConvFloat, node, 1, in, 1);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        for (int threads : {1, 2, 3})
          for (int repeat = 0; repeat < 2; ++repeat) {
            auto got = RunPrepared(node, in, cache, threads);
            ASSERT_TRUE(got.ok()) << got.status().ToString();
            ExpectBitwise(*got, *want, std::string(g.name) + " grow " + std::to_string(grow));
          }
      }
      if (inputs != 4) continue;
      // A residual of another shape after the geometry is cached: refused, naming it.
      std::vector<Value> in = {Value(Reorder("ToBlocked", testing::RandomTensor(g.x, rng), g.x[1])), w, b,
                               Value(testing::RandomTensor({1, 1, 1, 1, 8}, rng))};
      auto bad = RunPrepared(node, in, cache, 2);
      ASSERT_FALSE(bad.ok()) << g.name;
      EXPECT_NE(bad.status().message().find("input 3"), std::string::npos) << bad.status().message();
    }
  }
}

// Winograd on the blocked layout reorders per block of tile rows, and
// otherwise runs the NCHW path's transforms and GEMMs: the same bits as the
// NCHW FusedConv kernel reordered, for F(2x2, 3x3) and F(4x4, 3x3), images
// of several blocks, narrow ones (F(4x4, 3x3) packs two tile rows a vector),
// no pads and pads of 2, residuals, activations in and out of registers, at
// 1-3 threads; an input with NaN and infinity (F(4x4, 3x3) declines it,
// F(2x2, 3x3) runs) too.
TEST(BlockedConvFast, WinogradGivesTheNchwWinogradsBits) {
  if (cpu::SgemmActiveIsa() < cpu::SgemmIsa::kAvx2) GTEST_SKIP() << "blocked Winograd needs AVX2 or AVX-512";
  const std::vector<Geometry> geometries = {
      // (32 input channels and more, and planes the 4x4 tiles overrun by less than 40%: on AVX2 the
      // direct kernel takes the others, DirectBeatsWinograd.)
      {"one block", {1, 32, 30, 33}, {24, 32, 3, 3}, 1, 1, 1},
      {"several blocks", {2, 64, 64, 40}, {64, 64, 3, 3}, 1, 1, 1},
      {"narrow", {1, 32, 14, 14}, {40, 32, 3, 3}, 1, 1, 1},
      {"no pad", {1, 40, 11, 10}, {16, 40, 3, 3}, 1, 1, 0},
      {"pad 2", {1, 32, 9, 9}, {16, 32, 3, 3}, 1, 1, 2},  // 11x11 outputs: partial last tiles both ways
      // Transformed weights beyond 1 MiB (1.2 MB, 2.7 MB): one block, its phases shared among the threads.
      {"big weights", {1, 136, 8, 6}, {136, 136, 3, 3}, 1, 1, 1},
  };
  auto same_bits = [](const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.dims(), want.dims()) << what;
    for (int64_t i = 0; i < want.num_elements(); ++i)
      ASSERT_EQ(std::memcmp(got.data<float>() + i, want.data<float>() + i, sizeof(float)), 0)
          << what << " at " << i << ": " << got.data<float>()[i] << " vs " << want.data<float>()[i];
  };
  // The F(4x4, 3x3) mode is process-wide: put back even when an ASSERT leaves the loops early.
  struct RestoreMode {
    ~RestoreMode() { cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAuto); }
  } restore_mode;
  std::mt19937 rng(17);
  for (const Geometry& g : geometries) {
    for (bool non_finite : {false, true}) {
      Tensor x = testing::RandomTensor(g.x, rng);
      if (non_finite) {
        x.data<float>()[x.num_elements() / 3] = std::nanf("");
        x.data<float>()[x.num_elements() / 2] = INFINITY;
      }
      const Tensor w = Weights(g, rng), b = testing::RandomTensor({g.w[0]}, rng);
      const Tensor xb = Reorder("ToBlocked", x, g.x[1]);
      for (const Act& act : {kActs[0], kActs[6], kActs[7]}) {  // none, Silu, Tanh
        for (size_t inputs : {3, 4}) {
          std::vector<Value> nchw = {Value(x), Value(w), Value(b)}, blocked = {Value(xb), Value(w), Value(b)};
          if (inputs == 4) {
            const int64_t OH = g.x[2] + 2 * g.pad - 2, OW = g.x[3] + 2 * g.pad - 2;
            const Tensor z = testing::RandomTensor({g.x[0], g.w[0], OH, OW}, rng);
            nchw.push_back(Value(z));
            blocked.push_back(Value(Reorder("ToBlocked", z, g.w[0])));
          }
          for (cpu::Winograd43Mode mode : {cpu::Winograd43Mode::kNever, cpu::Winograd43Mode::kAlways}) {
            cpu::SetWinograd43Mode(mode);
            for (int threads : {1, 2, 3}) {
              const std::string what = std::string(g.name) + " " + act.name + " inputs " + std::to_string(inputs) +
                                       (mode == cpu::Winograd43Mode::kAlways ? " F(4x4)" : " F(2x2)") + " threads " +
                                       std::to_string(threads) + (non_finite ? " non-finite" : "");
              auto want = testing::RunKernel(cpu::FusedConvFloat, FusedConvNode(g, act, inputs), 1, nchw, threads);
              ASSERT_TRUE(want.ok()) << want.status().ToString();
              auto got = testing::RunKernel(cpu::BlockedConvFloat, BlockedConvNode(g, act, inputs), 1, blocked, threads);
              ASSERT_TRUE(got.ok()) << got.status().ToString();
              same_bits(*got, Reorder("ToBlocked", *want, g.w[0]), what);
            }
          }
        }
      }
    }
  }
}

// [N, C, H, W] <-> [N, H, W, C].
Tensor Nhwc(const Tensor& t) {
  const int64_t N = t.dim(0), C = t.dim(1), P = t.dim(2) * t.dim(3);
  const std::vector<float> zeros(static_cast<size_t>(t.num_elements()));
  Tensor out = Tensor::FromVector<float>(zeros, {N, t.dim(2), t.dim(3), C});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) out.data<float>()[(n * P + p) * C + c] = t.data<float>()[(n * C + c) * P + p];
  return out;
}
Tensor Nchw(const Tensor& t) {
  const int64_t N = t.dim(0), C = t.dim(3), P = t.dim(1) * t.dim(2);
  const std::vector<float> zeros(static_cast<size_t>(t.num_elements()));
  Tensor out = Tensor::FromVector<float>(zeros, {N, C, t.dim(1), t.dim(2)});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) out.data<float>()[(n * C + c) * P + p] = t.data<float>()[(n * P + p) * C + c];
  return out;
}

// A channels-last BlockedConv (output_layout = "nhwc": [N, H, W, M], any M, as the layout pass writes a
// detector head's): the reference gives the blocked reference's values pixel by pixel (residual included,
// laid out as the output); the fast kernel (the AVX-512 pair tiles, their last pair masked past M; on AVX2
// the 6 x 2 tiles through a staging buffer) agrees with it and gives the same bits at 1-3 threads, and
// where M fills whole blocks, the blocked fast kernel's bits.
TEST(BlockedConvFast, ChannelsLastOutputIsTheBlockedOutputPixelByPixel) {
  std::mt19937 rng(7);
  struct Shape {
    std::vector<int64_t> x;
    int64_t M;
  };
  const std::vector<Shape> shapes = {{{1, 16, 7, 7}, 255}, {{2, 8, 5, 9}, 21}, {{1, 32, 9, 9}, 48},
                                     {{1, 16, 13, 11}, 24}, {{2, 24, 4, 3}, 7}, {{1, 64, 6, 5}, 16}};
  for (const Shape& shape : shapes) {
    const Geometry g{"channels last", shape.x, {shape.M, shape.x[1], 1, 1}, 1, 1, 0};
    Tensor x = testing::RandomTensor(g.x, rng);
    for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] *= 4.f;  // saturate Clip, HardSigmoid
    Tensor xb = Reorder("ToBlocked", x, g.x[1]);
    Tensor w = Weights(g, rng);
    Tensor b = testing::RandomTensor({g.w[0]}, rng);
    Tensor z = testing::RandomTensor({g.x[0], g.x[2], g.x[3], shape.M}, rng);  // channels last
    for (const Act& act : kActs) {
      for (size_t inputs : {2, 3, 4}) {
        const std::string what = "M " + std::to_string(shape.M) + " " + act.name + " inputs " + std::to_string(inputs);
        std::vector<Value> blocked_in = {Value(xb), Value(w)}, in = {Value(xb), Value(w)};
        if (inputs >= 3) blocked_in.push_back(Value(b)), in.push_back(Value(b));
        if (inputs == 4) blocked_in.push_back(Value(Reorder("ToBlocked", Nchw(z), shape.M))), in.push_back(Value(z));
        const Node blocked = BlockedConvNode(g, act, inputs);
        Node node = blocked;
        node.attributes.push_back(StringAttr("output_layout", "nhwc"));
        auto blocked_ref = testing::RunOp(blocked, 1, blocked_in);
        ASSERT_TRUE(blocked_ref.ok()) << blocked_ref.status().ToString();
        auto ref = testing::RunOp(node, 1, in);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        const Tensor& want = ref->outputs[0].tensor();
        ExpectBitwise(want, Nhwc(Reorder("FromBlocked", blocked_ref->outputs[0].tensor(), shape.M)),
                      what + " reference");
        const Tensor fast = testing::ExpectFastCloseAtEveryIsaAndThreadCount(node, in, want, what);
        // Where M fills whole blocks both run the tiles (pair tiles, or the AVX2 6 x 2 tiles through the
        // channels-last staging buffer): the same chains, so the same bits.
        if (shape.M % kChannelBlock == 0 && cpu::SgemmActiveIsa() >= cpu::SgemmIsa::kAvx2 &&
            !cpu::SgemmPortableForced()) {
          auto fast_blocked = testing::RunKernel(cpu::BlockedConvFloat, blocked, 1, blocked_in, 1);
          ASSERT_TRUE(fast_blocked.ok()) << fast_blocked.status().ToString();
          ExpectBitwise(fast, Nhwc(Reorder("FromBlocked", *fast_blocked, shape.M)), what + " blocked fast");
        }
      }
    }
  }
}

}  // namespace
}  // namespace nee
