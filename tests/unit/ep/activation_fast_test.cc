// The vectorized float32 Exp and Sigmoid (ep/cpu/activation_fast.cc) against
// the reference kernels (std::exp), over a sweep that covers overflow,
// underflow through the subnormals, and the special values; plus
// thread-count independence and values computed with numpy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

Result<Tensor> RunKernel(KernelFn kernel, const Node& node, const Tensor& x, int threads) {
  return testing::RunKernel(kernel, node, 13, {Value(x)}, threads);
}

// Every float in [-120, 120] at a fine step, then the specials; an odd count
// so that chunk tails are exercised.
std::vector<float> Sweep() {
  std::vector<float> v;
  for (float x = -120.f; x <= 120.f; x += 0.0137f) v.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.33f, -103.9f, -104.f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN()})
    v.push_back(x);
  return v;
}

void ExpectCloseToReference(const char* op, Status (*kernel)(KernelContext&), float relative = 2e-7f) {
  // (Without AVX2+FMA the kernel defers to the reference and agrees exactly.)
  std::vector<float> values = Sweep();
  Tensor x = Tensor::FromVector(values, {static_cast<int64_t>(values.size())});
  Node node = testing::MakeNode(op, 1, 1, {});
  auto ref = testing::RunOp(node, 13, {Value(x)});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto fast = RunKernel(kernel, node, x, 1);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  const float* r = ref->outputs[0].tensor().data<float>();
  const float* f = fast->data<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(r[i])) {
      EXPECT_TRUE(std::isnan(f[i])) << op << "(" << values[i] << ")";
    } else if (std::isinf(r[i])) {
      EXPECT_EQ(f[i], r[i]) << op << "(" << values[i] << ")";
    } else {
      // ~2 ulp relative; the subnormal range has absolute spacing 1.4e-45.
      EXPECT_NEAR(f[i], r[i], relative * std::fabs(r[i]) + 3e-45f) << op << "(" << values[i] << ")";
    }
  }
}

TEST(FastActivation, ExpAgreesWithStdExp) { ExpectCloseToReference("Exp", cpu::ExpFloat); }
TEST(FastActivation, SigmoidAgreesWithTheReference) { ExpectCloseToReference("Sigmoid", cpu::SigmoidFloat); }
TEST(FastActivation, TanhAgreesWithTheReference) { ExpectCloseToReference("Tanh", cpu::TanhFloat, 3e-7f); }

TEST(FastActivation, SoftmaxAgreesWithTheReferenceAlongTheLastAxis) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-30.f, 30.f);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 7, 8, 9, 100, 1000}) {
    std::vector<float> v(static_cast<size_t>(4 * n));
    for (float& f : v) f = dist(rng);
    v[0] = -inf;                                           // row 0: one -inf element
    v[static_cast<size_t>(n)] = std::numeric_limits<float>::quiet_NaN();  // row 1: NaN
    v[static_cast<size_t>(2 * n)] = inf;                   // row 2: +inf
    Tensor x = Tensor::FromVector(v, {2, 2, n});
    for (int64_t opset : {11, 13}) {
      Node node = testing::MakeNode("Softmax", 1, 1, {testing::IntAttr("axis", 2)});
      auto ref = testing::RunOp(node, opset, {Value(x)});
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      std::vector<Value> outputs(1);
      Value in(x);
      KernelContext ctx(node, opset, {&in}, &outputs, nullptr, nullptr, nullptr);
      ASSERT_TRUE(cpu::SoftmaxFloat(ctx).ok());
      const float* r = ref->outputs[0].tensor().data<float>();
      const float* f = outputs[0].tensor().data<float>();
      for (size_t i = 0; i < v.size(); ++i) {
        if (std::isnan(r[i])) EXPECT_TRUE(std::isnan(f[i])) << "n=" << n << " i=" << i;
        else EXPECT_NEAR(f[i], r[i], 2e-6f * r[i] + 1e-37f) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(FastActivation, SoftmaxOnAnotherAxisMatchesNumpy) {
  Tensor x = Tensor::FromVector<float>({1.f, 2.f, 3.f, 4.f}, {2, 2});
  Node node = testing::MakeNode("Softmax", 1, 1, {testing::IntAttr("axis", 0)});
  std::vector<Value> outputs(1);
  Value in(x);
  KernelContext ctx(node, 13, {&in}, &outputs, nullptr, nullptr, nullptr);
  ASSERT_TRUE(cpu::SoftmaxFloat(ctx).ok());
  // numpy: e = np.exp([[1,2],[3,4]]); e / e.sum(axis=0)
  const float expected[] = {0.11920292f, 0.11920292f, 0.88079708f, 0.88079708f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(outputs[0].tensor().data<float>()[i], expected[i], 1e-6f);
}

// Softmax along an axis other than the last (columns `inner` floats apart;
// before opset 13, rows of every dim from the axis on) against the reference,
// on column counts below, at and past a group of 32 and not a multiple of 8,
// with a NaN, a -inf, a +inf and an all -inf column; and 1 vs 3 threads bitwise.
TEST(FastActivation, SoftmaxAlongAnyAxisAgreesWithTheReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-30.f, 30.f);
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const std::vector<Case> cases = {{{3, 5, 7}, 1},    {{2, 16, 33}, 1},  {{1, 16, 4, 70}, 1}, {{4, 3, 2, 32}, -3},
                                   {{2, 9, 1, 8}, 1}, {{5, 1, 40}, 1},   {{6, 11}, 0},        {{2, 3, 4, 5}, 2}};
  for (const Case& c : cases) {
    int64_t count = 1;
    for (int64_t d : c.dims) count *= d;
    std::vector<float> v(static_cast<size_t>(count));
    for (float& f : v) f = dist(rng);
    if (count > 40) {
      v[3] = std::numeric_limits<float>::quiet_NaN();
      v[count / 2] = -inf;
      v[count - 1] = inf;
    }
    Tensor x = Tensor::FromVector(v, c.dims);
    for (int64_t opset : {11, 13}) {
      Node node = testing::MakeNode("Softmax", 1, 1, {testing::IntAttr("axis", c.axis)});
      auto ref = testing::RunOp(node, opset, {Value(x)});
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      auto one = testing::RunKernel(cpu::SoftmaxFloat, node, opset, {Value(x)}, 1);
      auto three = testing::RunKernel(cpu::SoftmaxFloat, node, opset, {Value(x)}, 3);
      ASSERT_TRUE(one.ok() && three.ok());
      EXPECT_EQ(std::memcmp(one->raw_data(), three->raw_data(), one->byte_size()), 0) << c.dims.size();
      const float* r = ref->outputs[0].tensor().data<float>();
      const float* f = one->data<float>();
      for (size_t i = 0; i < v.size(); ++i) {
        if (std::isnan(r[i])) EXPECT_TRUE(std::isnan(f[i])) << "opset " << opset << " i=" << i;
        else EXPECT_NEAR(f[i], r[i], 2e-6f * r[i] + 1e-37f) << "opset " << opset << " i=" << i;
      }
    }
  }
}

TEST(FastActivation, ResultsDoNotDependOnTheThreadCount) {
  std::vector<float> values = Sweep();
  Tensor x = Tensor::FromVector(values, {static_cast<int64_t>(values.size())});
  using Kernel = Status (*)(KernelContext&);
  const std::vector<std::pair<const char*, Kernel>> kernels = {
      {"Exp", cpu::ExpFloat}, {"Sigmoid", cpu::SigmoidFloat}, {"Tanh", cpu::TanhFloat}};
  for (const auto& [op, kernel] : kernels) {
    Node node = testing::MakeNode(op, 1, 1, {});
    auto one = RunKernel(kernel, node, x, 1);
    auto three = RunKernel(kernel, node, x, 3);
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(std::memcmp(one->raw_data(), three->raw_data(), one->byte_size()), 0) << op;
  }
}

TEST(FastActivation, MatchesNumpy) {
  // numpy float32: np.exp(x) and 1 / (1 + np.exp(-x)) for x = [-3, -0.5, 0, 0.25, 2, 10, 50]
  Tensor x = Tensor::FromVector<float>({-3.f, -0.5f, 0.f, 0.25f, 2.f, 10.f, 50.f}, {7});
  const float exp_numpy[] = {0.049787066876888275f, 0.6065306663513184f, 1.f, 1.2840255498886108f,
                             7.3890557289123535f, 22026.466796875f, 5.184705457665547e+21f};
  const float sigmoid_numpy[] = {0.04742587357759476f, 0.3775406777858734f, 0.5f, 0.562176525592804f,
                                 0.8807970285415649f, 0.9999545812606812f, 1.f};
  auto e = RunKernel(cpu::ExpFloat, testing::MakeNode("Exp", 1, 1, {}), x, 1);
  auto s = RunKernel(cpu::SigmoidFloat, testing::MakeNode("Sigmoid", 1, 1, {}), x, 1);
  ASSERT_TRUE(e.ok() && s.ok());
  for (int i = 0; i < 7; ++i) {
    EXPECT_NEAR(e->data<float>()[i], exp_numpy[i], 2e-7f * exp_numpy[i]);
    EXPECT_NEAR(s->data<float>()[i], sigmoid_numpy[i], 2e-7f * sigmoid_numpy[i]);
  }
}

TEST(FastActivation, OtherTypesGoToTheReference) {
  Tensor x = Tensor::FromVector<double>({0.0, 1.0}, {2});
  auto y = RunKernel(cpu::ExpFloat, testing::MakeNode("Exp", 1, 1, {}), x, 1);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->dtype(), DataType::kDouble);
  EXPECT_DOUBLE_EQ(y->data<double>()[1], std::exp(1.0));
}

}  // namespace
}  // namespace nee
