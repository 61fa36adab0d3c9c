// Winograd's cut of an image with fewer blocks of tile rows than threads
// (conv_winograd_common.h, EachThreadReadsWeights): one block a thread while
// the transformed weights fit 1 MiB, else one block with its phases shared
// among the threads. Shapes just under and just over the threshold for
// F(2x2, 3x3) (16 M x C matrices: M * C <= 16384) and F(4x4, 3x3) (36:
// M * C <= 7281), images of one to three tile rows, one and two images, at
// 1-3 threads: within rounding of the reference Conv, and bitwise the same
// at every thread count; on the channel-blocked layout (AVX-512), bitwise
// the NCHW path's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu/conv_winograd.h"
#include "ep/cpu/conv_winograd43.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"
#include "ops/fused_conv.h"

namespace nee {
namespace {

using testing::IntsAttr;

struct SplitShape {
  std::string name;
  int64_t n, c, h, w, m;
};

// [N, C, H, W] as nee's channel-blocked [N, C/8, H, W, 8] (C a multiple of 8).
Tensor ToBlocked(const Tensor& t) {
  const int64_t n = t.dim(0), c = t.dim(1), hw = t.dim(2) * t.dim(3);
  Tensor b = Tensor::Allocate(DataType::kFloat, {n, c / 8, t.dim(2), t.dim(3), 8}).value();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        b.data<float>()[((i * (c / 8) + ch / 8) * hw + p) * 8 + ch % 8] = t.data<float>()[(i * c + ch) * hw + p];
  return b;
}

// Runs Winograd (pads 1; F(4x4, 3x3) or F(2x2, 3x3) as the mode says) on
// `threads` threads, NCHW or (`blocked`) on the channel-blocked layout.
Tensor RunWinograd(const SplitShape& s, const Tensor& x, const Tensor& w, const Tensor& b, int threads,
                   bool blocked = false) {
  const Node node = testing::MakeNode("Conv", 3, 1, {IntsAttr("pads", {1, 1, 1, 1})});
  const Value vx(x), vw(w), vb(b);
  std::vector<Value> outputs(1);
  ThreadPool pool(threads);
  KernelContext ctx(node, 22, {&vx, &vw, &vb}, &outputs, nullptr, &pool, nullptr);
  const cpu::Winograd3x3 g{s.n, s.c, s.h, s.w, s.m, s.h, s.w, 1, 1};
  EXPECT_TRUE(blocked ? cpu::WinogradBlockedApplies(ctx, g) : cpu::WinogradApplies(ctx, g)) << s.name;
  const std::vector<int64_t> dims = blocked ? std::vector<int64_t>{s.n, s.m / 8, s.h, s.w, 8}
                                            : std::vector<int64_t>{s.n, s.m, s.h, s.w};
  Tensor y = Tensor::Allocate(DataType::kFloat, dims).value();
  Status st = blocked ? cpu::ConvWinogradBlocked(ctx, g, x.data<float>(), w.data<float>(), b.data<float>(),
                                                 FusedActivation{}, nullptr, y.data<float>())
                      : cpu::ConvWinograd(ctx, g, x.data<float>(), w.data<float>(), b.data<float>(), nullptr,
                                          nullptr, y.data<float>());
  EXPECT_TRUE(st.ok()) << s.name << ": " << st.ToString();
  return y;
}

void ExpectWithinScale(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  double scale = 1;
  for (int64_t i = 0; i < want.num_elements(); ++i)
    scale = std::max(scale, std::fabs(static_cast<double>(want.data<float>()[i])));
  for (int64_t i = 0; i < want.num_elements(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], tol * scale) << what << " at " << i;
}

class WinogradSplitTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override {
    cpu::SgemmLimitIsa(GetParam());
    if (cpu::SgemmActiveIsa() < cpu::SgemmIsa::kAvx2) GTEST_SKIP() << "no AVX2 (Winograd is x86 SIMD only)";
  }
  void TearDown() override {
    cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAuto);
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
  }
};

void CheckShapes(const std::vector<SplitShape>& shapes, unsigned seed) {
  std::mt19937 rng(seed);
  for (const SplitShape& s : shapes) {
    const Tensor x = testing::RandomTensor({s.n, s.c, s.h, s.w}, rng);
    const Tensor w = testing::RandomTensor({s.m, s.c, 3, 3}, rng);
    const Tensor b = testing::RandomTensor({s.m}, rng);
    const Node node = testing::MakeNode("Conv", 3, 1, {IntsAttr("pads", {1, 1, 1, 1})});
    auto ref = testing::RunOp(node, 22, {Value(x), Value(w), Value(b)});
    ASSERT_TRUE(ref.ok()) << s.name << ": " << ref.status().ToString();
    const Tensor one = RunWinograd(s, x, w, b, 1);
    ExpectWithinScale(one, ref->outputs[0].tensor(), 1e-5, s.name + " threads=1");
    for (int threads : {2, 3}) {
      const Tensor more = RunWinograd(s, x, w, b, threads);
      EXPECT_EQ(0, std::memcmp(one.data<float>(), more.data<float>(), sizeof(float) * one.num_elements()))
          << s.name << ": 1 vs " << threads << " threads";
    }
    if (s.c % 8 != 0 || s.m % 8 != 0) continue;  // the blocked layout: whole blocks of channels
    const Tensor want = ToBlocked(one), xb = ToBlocked(x);
    for (int threads : {1, 2, 3}) {
      const Tensor got = RunWinograd(s, xb, w, b, threads, /*blocked=*/true);
      EXPECT_EQ(0, std::memcmp(got.data<float>(), want.data<float>(), sizeof(float) * want.num_elements()))
          << s.name << ": blocked at " << threads << " threads vs NCHW";
    }
  }
}

// F(2x2, 3x3): 2x2 tiles, so H = 4 is two tile rows and H = 2 one.
TEST_P(WinogradSplitTest, F22AroundTheWeightThreshold) {
  cpu::SetWinograd43Mode(cpu::Winograd43Mode::kNever);
  CheckShapes({{"at threshold 128x128, 3 tile rows", 1, 128, 6, 7, 128},
               {"over threshold 128x129, 3 tile rows", 1, 128, 6, 7, 129},
               {"under, 2 images", 2, 64, 5, 6, 96},
               {"under, one tile row", 1, 32, 2, 9, 48},
               {"under, two tile rows", 1, 40, 4, 5, 24},
               {"over, 2 images", 2, 136, 3, 4, 136},
               {"over threshold 128x136 (blocked too)", 1, 128, 6, 7, 136}},
              71);
}

// F(4x4, 3x3): 4x4 tiles, so H = 8 is two tile rows and H = 4 one.
TEST_P(WinogradSplitTest, F43AroundTheWeightThreshold) {
  cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAlways);
  CheckShapes({{"under threshold 81x89, 3 tile rows", 1, 81, 10, 9, 89},
               {"over threshold 81x90, 3 tile rows", 1, 81, 10, 9, 90},
               {"under, 2 images", 2, 64, 9, 11, 64},
               {"under, one tile row", 1, 48, 4, 13, 40},
               {"under, two tile rows", 1, 24, 8, 21, 16},
               {"over, 2 images", 2, 96, 7, 6, 104},
               {"under threshold 80x88 (blocked too)", 1, 80, 10, 9, 88},
               {"over threshold 80x96 (blocked too)", 1, 80, 10, 9, 96}},
              72);
}

INSTANTIATE_TEST_SUITE_P(Isa, WinogradSplitTest, ::testing::Values(cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kAvx512),
                         [](const ::testing::TestParamInfo<cpu::SgemmIsa>& info) {
                           return info.param == cpu::SgemmIsa::kAvx2 ? std::string("Avx2") : std::string("Avx512");
                         });

}  // namespace
}  // namespace nee
