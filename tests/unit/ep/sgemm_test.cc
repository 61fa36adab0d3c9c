// The optimized SGEMM and the MatMul/Gemm kernels built on it, checked
// against plain double-precision loops and against the reference kernels.
#include "ep/cpu/sgemm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

std::vector<float> RandomVector(size_t n, std::mt19937& rng) {
  return testing::RandomFloats(static_cast<int64_t>(n), rng);
}

// C = alpha * op(A) op(B) + beta * C in double, the independent oracle.
std::vector<float> NaiveGemm(int64_t m, int64_t n, int64_t k, float alpha, const std::vector<float>& a, bool ta,
                             const std::vector<float>& b, bool tb, float beta, const std::vector<float>& c) {
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      out[i * n + j] = static_cast<float>(alpha * s + beta * c[i * n + j]);
    }
  return out;
}

class SgemmTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { cpu::SgemmForcePortable(GetParam()); }
  void TearDown() override { cpu::SgemmForcePortable(false); }
};

TEST_P(SgemmTest, MatchesNaiveOnOddShapesTransposesAndThreads) {
  std::mt19937 rng(42);
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {6, 16, 1}, {13, 33, 300}, {100, 17, 64}, {1, 1000, 70}, {150, 70, 513}};
  ThreadPool pool(3);
  for (auto& s : shapes) {
    int64_t m = s[0], n = s[1], k = s[2];
    for (int trans = 0; trans < 4; ++trans) {
      bool ta = trans & 1, tb = trans & 2;
      auto a = RandomVector(m * k, rng), b = RandomVector(k * n, rng), c = RandomVector(m * n, rng);
      float alpha = 0.75f, beta = trans == 3 ? 0.f : 0.5f;
      auto want = NaiveGemm(m, n, k, alpha, a, ta, b, tb, beta, c);
      std::vector<float> got = c;
      cpu::MatrixView av = ta ? cpu::MatrixView{a.data(), 1, m} : cpu::MatrixView{a.data(), k, 1};
      cpu::MatrixView bv = tb ? cpu::MatrixView{b.data(), 1, k} : cpu::MatrixView{b.data(), n, 1};
      cpu::Sgemm(m, n, k, alpha, av, bv, beta, got.data(), n, trans == 1 ? &pool : nullptr);
      for (int64_t i = 0; i < m * n; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << m << "x" << n << "x" << k << " at " << i;
    }
  }
}

TEST_P(SgemmTest, ResultIsIndependentOfThreadCount) {
  std::mt19937 rng(3);
  int64_t m = 200, n = 300, k = 260;
  auto a = RandomVector(m * k, rng), b = RandomVector(k * n, rng);
  std::vector<float> one(m * n), three(m * n);
  ThreadPool pool1(1), pool3(3);
  cpu::Sgemm(m, n, k, 1.f, {a.data(), k, 1}, {b.data(), n, 1}, 0.f, one.data(), n, &pool1);
  cpu::Sgemm(m, n, k, 1.f, {a.data(), k, 1}, {b.data(), n, 1}, 0.f, three.data(), n, &pool3);
  EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Kernels, SgemmTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "portable" : "dispatched"; });

// The optimized MatMul against the reference MatMul kernel, through RunOp's
// machinery (schema rule + reference), on batched and broadcast shapes.
TEST(OptimizedMatMul, AgreesWithReferenceKernel) {
  std::mt19937 rng(5);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{3, 4}, {4, 5}}, {{2, 3, 4}, {4, 6}}, {{2, 1, 3, 4}, {5, 4, 7}}, {{1, 8}, {8, 1}}, {{4, 2, 9}, {4, 9, 3}}};
  for (const auto& [ad, bd] : cases) {
    int64_t an = 1, bn = 1;
    for (auto d : ad) an *= d;
    for (auto d : bd) bn *= d;
    Tensor a = Tensor::FromVector(RandomVector(an, rng), ad);
    Tensor b = Tensor::FromVector(RandomVector(bn, rng), bd);
    Node node = testing::MakeNode("MatMul", 2, 1);
    auto ref = testing::RunOp(node, 13, {Value(a), Value(b)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    std::vector<Value> outputs(1);
    Value va(a), vb(b);
    ThreadPool pool(2);
    KernelContext ctx(node, 13, {&va, &vb}, &outputs, nullptr, &pool, nullptr);
    ASSERT_TRUE(cpu::MatMulFloat(ctx).ok());
    const Tensor& want = ref->outputs[0].tensor();
    const Tensor& got = outputs[0].tensor();
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < want.num_elements(); ++i)
      EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5 * (1 + std::abs(want.data<float>()[i])));
  }
}

TEST(OptimizedGemm, AgreesWithReferenceKernelWithBiasAndTransposes) {
  std::mt19937 rng(6);
  const int64_t m = 5, n = 7, k = 9;
  // Every way C may broadcast to [m, n].
  const std::vector<std::vector<int64_t>> bias_shapes = {{n}, {1, n}, {m, 1}, {m, n}, {1}, {}};
  for (int trial = 0; trial < 4 * static_cast<int>(bias_shapes.size()); ++trial) {
    int trans = trial % 4;
    bool ta = trans & 1, tb = trans & 2;
    const std::vector<int64_t>& c_dims = bias_shapes[trial / 4];
    Tensor a = Tensor::FromVector(RandomVector(m * k, rng), ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
    Tensor b = Tensor::FromVector(RandomVector(k * n, rng), tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
    int64_t c_count = 1;
    for (int64_t d : c_dims) c_count *= d;
    Tensor c = Tensor::FromVector(RandomVector(c_count, rng), c_dims);
    Node node = testing::MakeNode("Gemm", 3, 1,
                                  {testing::IntAttr("transA", ta), testing::IntAttr("transB", tb),
                                   testing::FloatAttr("alpha", 0.5f), testing::FloatAttr("beta", 2.f)});
    auto ref = testing::RunOp(node, 13, {Value(a), Value(b), Value(c)});
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    std::vector<Value> outputs(1);
    Value va(a), vb(b), vc(c);
    KernelContext ctx(node, 13, {&va, &vb, &vc}, &outputs, nullptr, nullptr, nullptr);
    ASSERT_TRUE(cpu::GemmFloat(ctx).ok());
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_NEAR(outputs[0].tensor().data<float>()[i], ref->outputs[0].tensor().data<float>()[i], 1e-5)
          << "C dims " << DimsToString(c_dims) << ", trans " << trans;
  }
}

}  // namespace
}  // namespace nee
