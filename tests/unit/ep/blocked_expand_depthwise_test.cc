// ai.nee BlockedExpandDepthwise (ops/blocked_conv.cc, ep/cpu/blocked_expand_depthwise_fast.cc):
//  - its reference is the two BlockedConv references one after the other, bit for bit;
//  - the fast kernel gives the bits of the two BlockedConv fast kernels run one after the other (on
//    AVX2 and AVX-512 its bands, elsewhere and for rows too wide for a band those two kernels themselves), whatever
//    the band size (one output row a band up to the whole image) and thread count, and stays close to
//    the reference;
//  - wrong weights are refused with the input named.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "blocked_test_util.h"
#include "ep_test_util.h"
#include "ops/blocked_conv.h"

namespace nee {
namespace {

using testing::FloatsAttr;
using testing::IntAttr;
using testing::IntsAttr;
using testing::StringAttr;

struct Act {
  std::string name;
  std::vector<float> params;
};

void AddActivation(const std::string& prefix, const Act& act, std::vector<Attribute>* attrs) {
  if (!act.name.empty()) attrs->push_back(StringAttr(prefix + "activation", act.name));
  if (!act.params.empty()) attrs->push_back(FloatsAttr(prefix + "activation_params", act.params));
}

struct Case {
  std::vector<int64_t> x;  // NCHW
  int64_t E, stride;
};

Node Pointwise(int64_t C, const Act& act) {
  std::vector<Attribute> attrs = {IntAttr("channels", C)};
  AddActivation("", act, &attrs);
  return testing::MakeNode("BlockedConv", 3, 1, attrs, "ai.nee");
}

std::vector<Attribute> Window(int64_t stride) {
  return {IntsAttr("kernel_shape", {3, 3}), IntsAttr("strides", {stride, stride}), IntsAttr("pads", {1, 1, 1, 1})};
}

Node Depthwise(int64_t E, int64_t stride, const Act& act) {
  std::vector<Attribute> attrs = Window(stride);
  attrs.push_back(IntAttr("channels", E));
  attrs.push_back(IntAttr("group", E));
  AddActivation("", act, &attrs);
  return testing::MakeNode("BlockedConv", 3, 1, attrs, "ai.nee");
}

Node Fused(int64_t C, int64_t stride, const Act& expand, const Act& depthwise) {
  std::vector<Attribute> attrs = Window(stride);
  attrs.push_back(IntAttr("channels", C));
  AddActivation("expand_", expand, &attrs);
  AddActivation("", depthwise, &attrs);
  return testing::MakeNode("BlockedExpandDepthwise", 5, 1, attrs, "ai.nee");
}

Node Projecting(int64_t C, int64_t stride, const Act& expand, const Act& depthwise, const Act& project, bool z) {
  std::vector<Attribute> attrs = Fused(C, stride, expand, depthwise).attributes;
  AddActivation("project_", project, &attrs);
  return testing::MakeNode("BlockedExpandDepthwise", z ? 8 : 7, 1, attrs, "ai.nee");
}

Tensor RunFast(KernelFn kernel, const Node& node, const std::vector<Value>& in, int threads) {
  auto out = testing::RunKernel(kernel, node, 1, in, threads);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : Tensor();
}

// The fused kernel at each band size and at 1-3 threads: close to the reference's `want`, and the bits of
// the BlockedConv fast kernels run one after the other (`unfused`, at the current ISA limit).
void ExpectUnfusedBits(const Node& fused, const std::vector<Value>& in, const Tensor& want, const Tensor& unfused,
                       const std::vector<int64_t>& band_sizes, const std::string& what) {
  for (int64_t band_bytes : band_sizes) {
    cpu::BlockedExpandDepthwiseBandBytes(band_bytes);
    for (int threads : {1, 2, 3}) {
      const std::string at = what + (cpu::SgemmActiveIsa() == cpu::SgemmIsa::kAvx2 ? " AVX2" : "") + " band bytes " +
                             std::to_string(band_bytes) + " threads " + std::to_string(threads);
      const Tensor got = RunFast(cpu::BlockedExpandDepthwiseFloat, fused, in, threads);
      testing::ExpectClose(got, want, at);
      testing::ExpectBitwise(got, unfused, at + " vs unfused fast");
    }
  }
  cpu::BlockedExpandDepthwiseBandBytes(0);
}

TEST(BlockedExpandDepthwise, IsTheTwoBlockedConvsAtEveryBandSizeAndThreadCount) {
  std::mt19937 rng(11);
  const std::vector<Case> cases = {
      {{1, 16, 12, 11}, 96, 2},  // MobileNetV2's first expand shape, small; odd width
      {{1, 24, 9, 10}, 144, 1},  // stride 1: bands overlap by two rows
      {{2, 8, 7, 5}, 24, 1},     // three output blocks (one pair and a half), two images
      {{1, 32, 13, 6}, 40, 2},   // odd rows at stride 2
      {{1, 16, 1, 3}, 16, 1},    // one row
  };
  const std::vector<std::pair<Act, Act>> acts = {
      {{"Clip", {0.f, 6.f}}, {"Clip", {0.f, 6.f}}}, {{"", {}}, {"", {}}}, {{"Silu", {}}, {"Relu", {}}},
      {{"HardSwish", {}}, {"HardSwish", {}}}};
  for (const Case& c : cases) {
    const int64_t C = c.x[1];
    Tensor xb = testing::Reorder("ToBlocked", testing::RandomTensor(c.x, rng), C);
    for (int64_t i = 0; i < xb.num_elements(); ++i) xb.data<float>()[i] *= 3.f;  // reach Clip's bounds
    const Tensor w = testing::RandomTensor({c.E, C, 1, 1}, rng), b = testing::RandomTensor({c.E}, rng);
    const Tensor dw = testing::RandomTensor({c.E, 1, 3, 3}, rng), db = testing::RandomTensor({c.E}, rng);
    for (const auto& [ea, da] : acts) {
      const std::string what = "x " + DimsToString(c.x) + " E " + std::to_string(c.E) + " stride " +
                               std::to_string(c.stride) + " " + ea.name + "/" + da.name;
      const Node pointwise = Pointwise(C, ea), depthwise = Depthwise(c.E, c.stride, da);
      const Node fused = Fused(C, c.stride, ea, da);
      const std::vector<Value> in = {Value(xb), Value(w), Value(b), Value(dw), Value(db)};
      // The references.
      auto expanded = testing::RunOp(pointwise, 1, {Value(xb), Value(w), Value(b)});
      ASSERT_TRUE(expanded.ok()) << expanded.status().ToString();
      auto want = testing::RunOp(depthwise, 1, {expanded->outputs[0], Value(dw), Value(db)});
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      auto ref = testing::RunOp(fused, 1, in);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      testing::ExpectBitwise(ref->outputs[0].tensor(), want->outputs[0].tensor(), what + " reference");
      // At each ISA limit, the fast kernels unfused, then fused.
      for (cpu::SgemmIsa isa : {cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512}) {
        cpu::SgemmLimitIsa(isa);
        const Tensor fast_expanded = RunFast(cpu::BlockedConvFloat, pointwise, {Value(xb), Value(w), Value(b)}, 1);
        const Tensor unfused =
            RunFast(cpu::BlockedConvFloat, depthwise, {Value(fast_expanded), Value(dw), Value(db)}, 1);
        ExpectUnfusedBits(fused, in, want->outputs[0].tensor(), unfused, {1, 8 * 1024, 0, int64_t{1} << 30}, what);
      }
      cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
    }
  }
}

// With the projection (PW, PB, residual Z): the three BlockedConv fast kernels' bits, one image (in strips
// at 2 and 3 threads) and two (whole images a thread at 2 threads, strips at 3).
TEST(BlockedExpandDepthwise, ProjectsAsTheThirdBlockedConv) {
  std::mt19937 rng(13);
  struct Case {
    std::vector<int64_t> x;  // NCHW
    int64_t E, stride, P;
    bool z;
  };
  const std::vector<Case> cases = {{{1, 16, 11, 9}, 96, 1, 16, true},  // MobileNetV2's residual block, small
                                   {{2, 24, 9, 10}, 144, 2, 32, false},
                                   {{2, 8, 7, 6}, 48, 1, 24, true},  // three output blocks
                                   {{1, 16, 5, 13}, 32, 1, 40, false}};
  const Act clip{"Clip", {0.f, 6.f}};
  for (const Case& c : cases) {
    const int64_t C = c.x[1];
    Tensor xb = testing::Reorder("ToBlocked", testing::RandomTensor(c.x, rng), C);
    const Tensor w = testing::RandomTensor({c.E, C, 1, 1}, rng), b = testing::RandomTensor({c.E}, rng);
    const Tensor dw = testing::RandomTensor({c.E, 1, 3, 3}, rng), db = testing::RandomTensor({c.E}, rng);
    const Tensor pw = testing::RandomTensor({c.P, c.E, 1, 1}, rng), pb = testing::RandomTensor({c.P}, rng);
    const int64_t oh = (c.x[2] - 1) / c.stride + 1, ow = (c.x[3] - 1) / c.stride + 1;
    const Tensor z = testing::RandomTensor({c.x[0], ChannelBlocks(c.P), oh, ow, kChannelBlock}, rng);
    for (const Act& project : {Act{"", {}}, Act{"Sigmoid", {}}}) {
      const std::string what = "x " + DimsToString(c.x) + " E " + std::to_string(c.E) + " P " + std::to_string(c.P) +
                               (c.z ? " with Z " : " ") + project.name;
      std::vector<Value> in = {Value(xb), Value(w), Value(b), Value(dw), Value(db), Value(pw), Value(pb)};
      if (c.z) in.push_back(Value(z));
      const Node fused = Projecting(C, c.stride, clip, clip, project, c.z);
      auto want = testing::RunOp(fused, 1, in);
      ASSERT_TRUE(want.ok()) << want.status().ToString();
      Node projection = Pointwise(c.E, project);
      std::vector<Value> project_in = {Value(), Value(pw), Value(pb)};
      if (c.z) {
        projection = testing::MakeNode("BlockedConv", 4, 1, projection.attributes, "ai.nee");
        project_in.push_back(Value(z));
      }
      for (cpu::SgemmIsa isa : {cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512}) {
        cpu::SgemmLimitIsa(isa);
        const Tensor expanded = RunFast(cpu::BlockedConvFloat, Pointwise(C, clip), {Value(xb), Value(w), Value(b)}, 1);
        project_in[0] = Value(RunFast(cpu::BlockedConvFloat, Depthwise(c.E, c.stride, clip),
                                      {Value(expanded), Value(dw), Value(db)}, 1));
        const Tensor unfused = RunFast(cpu::BlockedConvFloat, projection, project_in, 1);
        ExpectUnfusedBits(fused, in, want->outputs[0].tensor(), unfused, {1, 0}, what);
      }
      cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
    }
  }
}

// As a session runs it (the weights constant, packed once into the node's PreparedCache, runs after the
// first reading the packs): the expand and the projection have one shape here (C = E = P = 16), and where
// the kernel runs BlockedConv's convs one after the other (below AVX2) each must keep its own pack.
TEST(BlockedExpandDepthwise, ConvsOfOneShapeKeepTheirOwnPackedWeights) {
  std::mt19937 rng(17);
  const Tensor xb = testing::Reorder("ToBlocked", testing::RandomTensor({1, 16, 9, 7}, rng), 16);
  std::vector<Value> in = {Value(xb)};
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {16, 16, 1, 1}, {16}, {16, 1, 3, 3}, {16}, {16, 16, 1, 1}, {16}, {1, 2, 9, 7, 8}})
    in.push_back(Value(testing::RandomTensor(dims, rng)));
  const Act clip{"Clip", {0.f, 6.f}};
  const Node fused = Projecting(16, 1, clip, clip, {}, true);
  auto want = testing::RunOp(fused, 1, in);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  const std::vector<bool> constant = {false, true, true, true, true, true, true, false};
  for (cpu::SgemmIsa isa : {cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512}) {
    cpu::SgemmLimitIsa(isa);
    const Tensor fresh = RunFast(cpu::BlockedExpandDepthwiseFloat, fused, in, 1);
    PreparedCache cache;
    for (int run = 0; run < 3; ++run) {
      auto got = testing::RunKernelPrepared(cpu::BlockedExpandDepthwiseFloat, fused, 1, in, 1, &cache, &constant);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      testing::ExpectBitwise(*got, fresh, "run " + std::to_string(run));
      testing::ExpectClose(*got, want->outputs[0].tensor(), "run " + std::to_string(run));
    }
  }
  cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
}

// No images, and rows so wide that a band's buffer would pass the fast kernel's cap (16 MiB: three rows
// of 64 channels over 22,000 pixels), which it then runs unfused: the two BlockedConv fast kernels' bytes,
// close to the reference's.
TEST(BlockedExpandDepthwise, EmptyAndVeryWideInputsRunTheTwoConvs) {
  std::mt19937 rng(5);
  struct Shape {
    std::vector<int64_t> x;  // NCHW
    int64_t E;
  };
  for (const Shape& shape : {Shape{{0, 16, 4, 5}, 32}, Shape{{1, 8, 3, 22000}, 64}}) {
    const int64_t C = shape.x[1], E = shape.E;
    const Tensor xb = testing::Reorder("ToBlocked", testing::RandomTensor(shape.x, rng), C);
    const Tensor w = testing::RandomTensor({E, C, 1, 1}, rng), b = testing::RandomTensor({E}, rng);
    const Tensor dw = testing::RandomTensor({E, 1, 3, 3}, rng), db = testing::RandomTensor({E}, rng);
    const std::vector<Value> in = {Value(xb), Value(w), Value(b), Value(dw), Value(db)};
    const Act relu{"Relu", {}}, clip{"Clip", {0.f, 6.f}};
    const std::string what = "x " + DimsToString(shape.x) + " E " + std::to_string(E);
    auto want = testing::RunOp(Fused(C, 1, relu, clip), 1, in);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const Tensor expanded = RunFast(cpu::BlockedConvFloat, Pointwise(C, relu), {Value(xb), Value(w), Value(b)}, 1);
    const Tensor unfused =
        RunFast(cpu::BlockedConvFloat, Depthwise(E, 1, clip), {Value(expanded), Value(dw), Value(db)}, 1);
    const Tensor got = RunFast(cpu::BlockedExpandDepthwiseFloat, Fused(C, 1, relu, clip), in, 1);
    testing::ExpectBitwise(got, unfused, what);
    testing::ExpectClose(got, want->outputs[0].tensor(), what);
  }
}

TEST(BlockedExpandDepthwise, RefusesWeightsThatDoNotFitWithTheirNames) {
  std::mt19937 rng(3);
  const Tensor xb = testing::Reorder("ToBlocked", testing::RandomTensor({1, 16, 4, 4}, rng), 16);
  const Tensor b = testing::RandomTensor({32}, rng), db = testing::RandomTensor({32}, rng);
  const Node fused = Fused(16, 1, {}, {});
  struct Bad {
    std::vector<int64_t> w, dw;
    const char* names;
  };
  for (const Bad& bad : {Bad{{32, 8, 1, 1}, {32, 1, 3, 3}, "(W)"}, Bad{{32, 16, 3, 3}, {32, 1, 3, 3}, "(W)"},
                         Bad{{0, 16, 1, 1}, {0, 1, 3, 3}, "(W)"},
                         Bad{{32, 16, 1, 1}, {16, 1, 3, 3}, "(DW)"}, Bad{{32, 16, 1, 1}, {32, 2, 3, 3}, "(DW)"}}) {
    const std::vector<Value> in = {Value(xb), Value(testing::RandomTensor(bad.w, rng)), Value(b),
                                   Value(testing::RandomTensor(bad.dw, rng)), Value(db)};
    for (KernelFn kernel : {KernelFn(cpu::BlockedExpandDepthwiseFloat), KernelFn(nullptr)}) {
      const Status st =
          kernel ? testing::RunKernel(kernel, fused, 1, in, 1).status() : testing::RunOp(fused, 1, in).status();
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.ToString().find(bad.names), std::string::npos) << st.ToString();
    }
  }
  // The projection: PW of the wrong input channels, PB without PW, Z of another shape.
  const Tensor w = testing::RandomTensor({32, 16, 1, 1}, rng), dw = testing::RandomTensor({32, 1, 3, 3}, rng);
  const Tensor pb = testing::RandomTensor({24}, rng);
  struct BadProjection {
    Value pw, z;
    const char* names;
  };
  for (const BadProjection& bad :
       {BadProjection{Value(testing::RandomTensor({24, 16, 1, 1}, rng)), Value(), "(PW)"},
        BadProjection{Value(), Value(), "(PW)"},
        BadProjection{Value(testing::RandomTensor({24, 32, 1, 1}, rng)),
                      Value(testing::RandomTensor({1, 4, 4, 4, 8}, rng)), "(Z)"}}) {
    const std::vector<Value> in = {Value(xb), Value(w), Value(b), Value(dw), Value(db), bad.pw, Value(pb), bad.z};
    for (KernelFn kernel : {KernelFn(cpu::BlockedExpandDepthwiseFloat), KernelFn(nullptr)}) {
      const Node node = Projecting(16, 1, {}, {}, {}, true);
      const Status st = kernel ? testing::RunKernelOmitting(kernel, node, 1, in, 1).status()
                               : testing::RunOp(node, 1, in).status();
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.ToString().find(bad.names), std::string::npos) << st.ToString();
    }
  }
}

}  // namespace
}  // namespace nee
