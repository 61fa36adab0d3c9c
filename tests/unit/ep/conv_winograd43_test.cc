// Winograd F(4x4, 3x3) (ep/cpu/conv_winograd43.cc, AVX2) against the
// reference Conv and FusedConv kernels on awkward shapes, for thread-count
// independence, and its rounding error against a direct convolution in
// double next to F(2x2, 3x3)'s on ResNet-50's and a detector's 3x3 layers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu/conv_winograd43.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

using testing::IntsAttr;
using testing::StringAttr;

// The AVX2 transforms, with SGEMM's AVX2 kernel and (kAvx512: the best this
// CPU has) its AVX-512 one where the CPU has it; skipped without AVX2.
class Winograd43Test : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override {
    cpu::SgemmLimitIsa(GetParam());
    if (cpu::SgemmActiveIsa() < cpu::SgemmIsa::kAvx2) GTEST_SKIP() << "no AVX2";
  }
  void TearDown() override {
    cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAuto);
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
  }
};

struct Shape {
  std::string name;
  std::vector<int64_t> x;  // N, C, H, W
  int64_t m;
  std::vector<int64_t> pads;  // top, left, bottom, right
};

// Tiny images, odd and asymmetric sizes and pads, channels not multiples
// of 8, batches, images two tile rows to a vector (at most 16 wide) and
// wider than one vector, several blocks of tile rows, and input channels
// past one SGEMM depth block (256).
const std::vector<Shape> kShapes = {
    {"tiny_2x2", {1, 16, 2, 2}, 16, {1, 1, 1, 1}},          {"tiny_5x5_batch3", {3, 16, 5, 5}, 17, {1, 1, 1, 1}},
    {"odd_9x11_batch2", {2, 17, 9, 11}, 19, {1, 1, 1, 1}},  {"asymmetric_pads", {1, 16, 8, 12}, 16, {0, 2, 1, 0}},
    {"no_pads_16_wide", {3, 24, 13, 18}, 40, {0, 0, 0, 0}}, {"wide_rows", {1, 20, 7, 70}, 24, {1, 1, 1, 1}},
    {"pads_one_side", {1, 16, 30, 37}, 21, {1, 0, 0, 1}},   {"blocks", {1, 32, 60, 61}, 32, {1, 1, 1, 1}},
    {"deep", {1, 300, 10, 10}, 20, {1, 1, 1, 1}},
    // Transformed weights beyond 1 MiB (1.4 MB): one block, its phases shared among the threads
    // (with less, every thread takes a block of its own).
    {"big_weights_one_block", {1, 96, 6, 7}, 104, {1, 1, 1, 1}},
};

std::vector<int64_t> WeightDims(const Shape& s) { return {s.m, s.x[1], 3, 3}; }

// Within `tol` of the output's scale (its largest magnitude, at least 1):
// how nee states Winograd's error. Where the reference is NaN or infinite
// the result must not be finite (F(2x2, 3x3) may give NaN for an infinity:
// its transforms subtract inputs), and only there.
void ExpectWithinScale(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double scale = 1;
  for (int64_t i = 0; i < want.num_elements(); ++i)
    if (std::isfinite(w[i])) scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (!std::isfinite(w[i])) {
      ASSERT_FALSE(std::isfinite(g[i])) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(g[i], w[i], tol * scale) << what << " at " << i;
  }
}

void ExpectSameBits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dims(), b.dims()) << what;
  EXPECT_EQ(0, std::memcmp(a.data<float>(), b.data<float>(), sizeof(float) * a.num_elements())) << what;
}

// F(4x4, 3x3) on every shape (forced: the selection rule would leave the
// tiny ones to F(2x2, 3x3)) against the reference kernel, at 1 and 2
// threads, and bitwise the same at 1, 2 and 3 threads.
TEST_P(Winograd43Test, ConvAgreesWithReferenceKernel) {
  cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAlways);
  std::mt19937 rng(43);
  for (const Shape& s : kShapes) {
    Node node = testing::MakeNode("Conv", 3, 1, {IntsAttr("pads", s.pads)});
    const std::vector<Value> inputs = {Value(testing::RandomTensor(s.x, rng)),
                                       Value(testing::RandomTensor(WeightDims(s), rng)),
                                       Value(testing::RandomTensor({s.m}, rng))};
    auto ref = testing::RunOp(node, 22, inputs);
    ASSERT_TRUE(ref.ok()) << s.name << ": " << ref.status().ToString();
    std::vector<Tensor> got;
    for (int threads : {1, 2, 3}) {
      auto run = testing::RunKernel(cpu::ConvFloat, node, 22, inputs, threads);
      ASSERT_TRUE(run.ok()) << s.name << ": " << run.status().ToString();
      got.push_back(std::move(run.value()));
    }
    ExpectWithinScale(got[0], ref->outputs[0].tensor(), 1e-5, s.name + " threads=1");
    ExpectWithinScale(got[1], ref->outputs[0].tensor(), 1e-5, s.name + " threads=2");
    ExpectSameBits(got[0], got[1], s.name + " 1 vs 2 threads");
    ExpectSameBits(got[0], got[2], s.name + " 1 vs 3 threads");
  }
}

// FusedConv: the activation in the output transform, or with a residual Z
// added before the activation in a pass after it; NaN inputs stay NaN.
TEST_P(Winograd43Test, FusedConvAgreesWithReference) {
  cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAlways);
  std::mt19937 rng(44);
  const std::vector<std::vector<Attribute>> activations = {
      {StringAttr("activation", "Relu")}, {StringAttr("activation", "Silu")}, {StringAttr("activation", "Tanh")}, {}};
  for (const Shape& s : {kShapes[2], kShapes[4], kShapes[6]}) {
    Tensor x = testing::RandomTensor(s.x, rng);
    x.data<float>()[5] = std::nanf("");
    const Tensor w = testing::RandomTensor(WeightDims(s), rng), b = testing::RandomTensor({s.m}, rng);
    for (const auto& act : activations)
      for (bool residual : {false, true}) {
        std::vector<Attribute> attrs = act;
        attrs.push_back(IntsAttr("pads", s.pads));
        const std::string what = s.name + (act.empty() ? " none" : " act") + (residual ? " +z" : "");
        std::vector<Value> inputs = {Value(x), Value(w), Value(b)};
        if (residual) {
          auto shape = testing::RunOp(testing::MakeNode("FusedConv", 3, 1, attrs, "com.microsoft"), 1, inputs);
          ASSERT_TRUE(shape.ok()) << shape.status().ToString();
          inputs.push_back(Value(testing::RandomTensor(shape->outputs[0].tensor().dims(), rng)));
        }
        Node node = testing::MakeNode("FusedConv", inputs.size(), 1, attrs, "com.microsoft");
        auto ref = testing::RunOp(node, 1, inputs);
        ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
        auto one = testing::RunKernel(cpu::FusedConvFloat, node, 1, inputs, 1);
        auto two = testing::RunKernel(cpu::FusedConvFloat, node, 1, inputs, 2);
        ASSERT_TRUE(one.ok() && two.ok()) << what;
        ExpectWithinScale(one.value(), ref->outputs[0].tensor(), 1e-5, what + " threads=1");
        ExpectSameBits(one.value(), two.value(), what + " 1 vs 2 threads");
      }
  }
}

// In a session (constant weights, transformed once): bitwise what
// transforming per call gives at 1-3 threads; and a later run whose input
// holds NaN and infinity falls back to F(2x2, 3x3) through the same cache,
// keeping them to the outputs whose windows hold them, as the reference.
TEST_P(Winograd43Test, SessionCacheAndNonFiniteFallback) {
  cpu::SetWinograd43Mode(cpu::Winograd43Mode::kAlways);
  std::mt19937 rng(46);
  const Shape& s = kShapes[6];
  Node node = testing::MakeNode("Conv", 3, 1, {IntsAttr("pads", s.pads)});
  std::vector<Value> inputs = {Value(testing::RandomTensor(s.x, rng)), Value(testing::RandomTensor(WeightDims(s), rng)),
                               Value(testing::RandomTensor({s.m}, rng))};
  Tensor bad = testing::RandomTensor(s.x, rng);
  bad.data<float>()[40] = std::nanf("");
  bad.data<float>()[300] = INFINITY;
  const std::vector<Value> bad_inputs = {Value(bad), inputs[1], inputs[2]};
  auto want = testing::RunKernel(cpu::ConvFloat, node, 22, inputs, 1);
  auto ref_bad = testing::RunOp(node, 22, bad_inputs);
  ASSERT_TRUE(want.ok() && ref_bad.ok());
  PreparedCache cache;
  const std::vector<bool> constant = {false, true, true};
  auto run = [&](const std::vector<Value>& in, int threads) {
    auto out = testing::RunKernelPrepared(cpu::ConvFloat, node, 22, in, threads, &cache, &constant);
    EXPECT_TRUE(out.ok());
    return out.ok() ? *out : Tensor();
  };
  for (int threads : {1, 2, 3}) ExpectSameBits(run(inputs, threads), want.value(), "session");
  const Tensor got_bad = run(bad_inputs, 2);
  ExpectWithinScale(got_bad, ref_bad->outputs[0].tensor(), 1e-5, "non-finite input");
  ExpectSameBits(run(bad_inputs, 1), got_bad, "non-finite input, 1 vs 2 threads");
  ExpectSameBits(run(inputs, 1), want.value(), "session after the fallback");
}

// ---- Rounding error on realistic layers ----------------------------------

struct Layer {
  int64_t channels, size;
};

// y = conv(x, w) + b, pads 1, in double: the exact result to measure against.
std::vector<double> DirectConv(const Layer& l, const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b) {
  const int64_t c_n = l.channels, s = l.size;
  std::vector<double> y(static_cast<size_t>(c_n * s * s));
  std::vector<double> acc(static_cast<size_t>(s * s));
  for (int64_t m = 0; m < c_n; ++m) {
    std::fill(acc.begin(), acc.end(), static_cast<double>(b[m]));
    for (int64_t c = 0; c < c_n; ++c)
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx) {
          const double wv = w[((m * c_n + c) * 3 + ky) * 3 + kx];
          for (int64_t oy = 0; oy < s; ++oy) {
            const int64_t iy = oy + ky - 1;
            if (iy < 0 || iy >= s) continue;
            const float* row = x.data() + (c * s + iy) * s;
            double* out = acc.data() + oy * s;
            for (int64_t ox = std::max<int64_t>(0, 1 - kx); ox < std::min(s, s + 1 - kx); ++ox)
              out[ox] += wv * row[ox + kx - 1];
          }
        }
    std::copy(acc.begin(), acc.end(), y.begin() + m * s * s);
  }
  return y;
}

struct Error {
  double max,
      rms;  // largest and rms error, relative to the largest and rms output
};

Error ErrorOf(const Tensor& got, const std::vector<double>& exact) {
  double max_err = 0, max_y = 0, sq_err = 0, sq_y = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double e = std::fabs(got.data<float>()[i] - exact[i]);
    max_err = std::max(max_err, e), max_y = std::max(max_y, std::fabs(exact[i]));
    sq_err += e * e, sq_y += exact[i] * exact[i];
  }
  return {max_err / max_y, std::sqrt(sq_err / sq_y)};
}

// ReLU outputs as inputs (all positive: the worst case for the transforms'
// cancellations), He-initialized weights. F(4x4, 3x3)'s error stays within
// 1e-5 of the output's scale and its rms within 4x F(2x2, 3x3)'s (the
// measured values are printed).
TEST_P(Winograd43Test, ErrorOnResNetAndDetectorLayers) {
  std::mt19937 rng(45);
  for (const Layer& l : {Layer{64, 56}, Layer{128, 28}, Layer{256, 14}, Layer{32, 160}, Layer{64, 80}}) {
    const int64_t c = l.channels, s = l.size;
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(c * s * s)), w(static_cast<size_t>(c * c * 9)), b(static_cast<size_t>(c));
    for (float& v : x) v = std::fabs(normal(rng));
    for (float& v : w) v = normal(rng) * std::sqrt(2.f / (9.f * c));
    for (float& v : b) v = 0.1f * normal(rng);
    const std::vector<double> exact = DirectConv(l, x, w, b);
    Node node = testing::MakeNode("Conv", 3, 1, {IntsAttr("pads", {1, 1, 1, 1})});
    const std::vector<Value> inputs = {Value(Tensor::FromVector(x, {1, c, s, s})),
                                       Value(Tensor::FromVector(w, {c, c, 3, 3})), Value(Tensor::FromVector(b, {c}))};
    auto run = [&](cpu::Winograd43Mode mode) {
      cpu::SetWinograd43Mode(mode);
      auto y = testing::RunKernel(cpu::ConvFloat, node, 22, inputs, 1);
      EXPECT_TRUE(y.ok());
      return ErrorOf(y.value(), exact);
    };
    const Error f43 = run(cpu::Winograd43Mode::kAlways), f23 = run(cpu::Winograd43Mode::kNever);
    auto ref = testing::RunOp(node, 22, inputs);
    ASSERT_TRUE(ref.ok());
    const Error direct = ErrorOf(ref->outputs[0].tensor(), exact);
    std::printf(
        "%lld@%lld error vs double (max, rms of scale): F(4,3) %.2e "
        "%.2e  F(2,3) %.2e %.2e  reference %.2e %.2e\n",
        static_cast<long long>(c), static_cast<long long>(s), f43.max, f43.rms, f23.max, f23.rms, direct.max,
        direct.rms);
    EXPECT_LT(f43.max, 1e-5) << c << "@" << s;
    EXPECT_LT(f43.rms, 4 * f23.rms) << c << "@" << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Winograd43Test, ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2),
                         [](const auto& info) { return info.param == cpu::SgemmIsa::kAvx512 ? "dispatched" : "avx2"; });

}  // namespace
}  // namespace nee
