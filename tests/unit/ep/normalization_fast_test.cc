// The float32 LayerNormalization and com.microsoft SkipLayerNormalization
// (ep/cpu/normalization_fast.cc) against the reference kernels. Not bitwise:
// the fast kernels sum in double but in vector lanes, and normalize in float.
// Tolerance per element: 1e-6 * (|y - beta| + |beta|), i.e. 1e-6 relative to
// the two terms that make up the output. Bitwise equal across 1, 2, 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"

namespace nee {
namespace {

// Runs `kernel` with empty Values as omitted inputs; all outputs.
Result<std::vector<Value>> RunAll(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                               int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.kind() == Value::Kind::kEmpty ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs;
}

// A node whose omitted inputs (empty Values) and unwanted outputs have empty names.
Node MakeNode(const std::string& op, const std::string& domain, const std::vector<Value>& inputs,
              const std::vector<bool>& outputs, std::vector<Attribute> attrs = {}) {
  Node node = testing::MakeNode(op, inputs.size(), outputs.size(), std::move(attrs), domain);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].kind() == Value::Kind::kEmpty) node.inputs[i].clear();
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!outputs[i]) node.outputs[i].clear();
  return node;
}

void ExpectClose(const Tensor& fast, const Tensor& ref, const float* beta, int64_t hidden, const std::string& what) {
  ASSERT_EQ(fast.dims(), ref.dims()) << what;
  const float* f = fast.data<float>();
  const float* r = ref.data<float>();
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    if (std::isnan(r[i])) {
      EXPECT_TRUE(std::isnan(f[i])) << what << " at " << i;
      continue;
    }
    const float b = beta ? beta[i % hidden] : 0.f;
    const float tol = 1e-6f * (std::fabs(r[i] - b) + std::fabs(b)) + 1e-30f;
    EXPECT_NEAR(f[i], r[i], tol) << what << " at " << i;
  }
}

void ExpectSameAcrossThreads(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& in,
                             const std::string& what) {
  auto one = RunAll(kernel, node, opset, in, 1);
  ASSERT_TRUE(one.ok());
  for (int threads : {2, 3}) {
    auto many = RunAll(kernel, node, opset, in, threads);
    ASSERT_TRUE(many.ok());
    for (size_t o = 0; o < one->size(); ++o) {
      if (!node.HasOutput(o)) continue;
      const Tensor& a = (*one)[o].tensor();
      const Tensor& b = (*many)[o].tensor();
      EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()), 0) << what << " threads " << threads;
    }
  }
}

// Rows with a large mean, a constant row, and a row holding NaN, besides random ones.
Tensor Input(const std::vector<int64_t>& dims, int64_t inner, std::mt19937& rng) {
  Tensor x = testing::RandomTensor(dims, rng);
  float* p = x.data<float>();
  const int64_t rows = inner > 0 ? x.num_elements() / inner : 0;
  for (int64_t i = 0; rows > 1 && i < inner; ++i) p[i] = 1000.f + p[i] * 1e-2f;  // row 0: mean >> std
  for (int64_t i = 0; rows > 2 && i < inner; ++i) p[inner + i] = 0.75f;          // row 1: constant
  if (rows > 3) p[2 * inner + inner / 2] = std::numeric_limits<float>::quiet_NaN();  // row 2
  return x;
}

struct LayerNormCase {
  std::vector<int64_t> x;
  int64_t axis;
  std::vector<int64_t> scale;
  bool bias;
};

TEST(FastLayerNorm, AgreesWithTheReference) {
  const std::vector<LayerNormCase> cases = {
      {{4, 6, 768}, -1, {768}, true},  {{5, 33}, -1, {33}, true},     {{5, 33}, -1, {33}, false},
      {{4, 1}, -1, {1}, true},         {{3, 4, 5, 7}, 2, {5, 7}, true}, {{3, 4, 5, 7}, -2, {1, 5, 7}, false},
      {{6, 16}, 1, {1, 16}, true},     {{2, 3, 9}, 0, {3, 9}, true},  {{300, 100}, -1, {100}, true},
  };
  std::mt19937 rng(5);
  for (const LayerNormCase& c : cases) {
    const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.x.size()) : c.axis;
    const int64_t inner = ProductOf(c.x, static_cast<size_t>(axis));
    Tensor x = Input(c.x, inner, rng);
    Tensor scale = testing::RandomTensor(c.scale, rng), bias = testing::RandomTensor(c.scale, rng);
    std::vector<Value> in = {Value(x), Value(scale)};
    if (c.bias) in.push_back(Value(bias));
    Node node = MakeNode("LayerNormalization", "", in, {true}, {testing::IntAttr("axis", c.axis)});
    const std::string what = "LayerNorm " + DimsToString(c.x) + " axis " + std::to_string(c.axis);
    auto ref = testing::RunOp(node, 17, in);
    auto fast = RunAll(cpu::LayerNormFloat, node, 17, in, 1);
    ASSERT_TRUE(ref.ok() && fast.ok()) << what;
    // The bias broadcasts over the normalized block from the right: element i
    // reads bias[i % its size] (`inner` overran a bias smaller than the block; ASan).
    ExpectClose((*fast)[0].tensor(), ref->outputs[0].tensor(), c.bias ? bias.data<float>() : nullptr,
                bias.num_elements(), what);
    ExpectSameAcrossThreads(cpu::LayerNormFloat, node, 17, in, what);
  }
}

TEST(FastLayerNorm, StatisticsOutputsAndOtherCasesGoToTheReference) {
  std::mt19937 rng(6);
  Tensor x = testing::RandomTensor({3, 8}, rng), scale = testing::RandomTensor({8}, rng);
  // Mean and InvStdDev requested: the reference fills them.
  Node node = MakeNode("LayerNormalization", "", {Value(x), Value(scale)}, {true, true, true});
  auto fast = RunAll(cpu::LayerNormFloat, node, 17, {Value(x), Value(scale)}, 1);
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ((*fast)[1].tensor().num_elements(), 3);
  // Empty input, and a scale that varies over the outer dims.
  Tensor empty = testing::RandomTensor({0, 8}, rng), big_scale = testing::RandomTensor({3, 8}, rng);
  Node one = MakeNode("LayerNormalization", "", {Value(x), Value(scale)}, {true});
  auto e = RunAll(cpu::LayerNormFloat, one, 17, {Value(empty), Value(scale)}, 1);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ((*e)[0].tensor().num_elements(), 0);
  auto ref = testing::RunOp(one, 17, {Value(x), Value(big_scale)});
  auto b = RunAll(cpu::LayerNormFloat, one, 17, {Value(x), Value(big_scale)}, 1);
  ASSERT_TRUE(ref.ok() && b.ok());
  EXPECT_EQ(std::memcmp((*b)[0].tensor().raw_data(), ref->outputs[0].tensor().raw_data(), 3 * 8 * sizeof(float)), 0);
}

struct SkipCase {
  std::vector<int64_t> x, skip;
  bool beta, bias, sum_output;
};

TEST(FastSkipLayerNorm, AgreesWithTheReference) {
  const std::vector<SkipCase> cases = {
      {{2, 5, 768}, {2, 5, 768}, true, true, false}, {{2, 5, 768}, {5, 768}, true, false, true},
      {{2, 5, 33}, {1, 5, 33}, false, true, true},   {{3, 7}, {3, 7}, false, false, false},
      {{4, 1}, {4, 1}, true, true, true},            {{2, 3, 16}, {16}, true, true, false},
      {{200, 64}, {200, 64}, true, true, true},
  };
  std::mt19937 rng(8);
  for (const SkipCase& c : cases) {
    const int64_t hidden = c.x.back();
    Tensor x = Input(c.x, hidden, rng), skip = testing::RandomTensor(c.skip, rng);
    Tensor gamma = testing::RandomTensor({hidden}, rng), beta = testing::RandomTensor({hidden}, rng);
    Tensor bias = testing::RandomTensor({hidden}, rng);
    std::vector<Value> in = {Value(x), Value(skip), Value(gamma), c.beta ? Value(beta) : Value(),
                             c.bias ? Value(bias) : Value()};
    Node node = MakeNode("SkipLayerNormalization", "com.microsoft", in, {true, false, false, c.sum_output});
    const std::string what = "SkipLayerNorm " + DimsToString(c.x) + " skip " + DimsToString(c.skip);
    auto ref = testing::RunOp(node, 17, in);
    auto fast = RunAll(cpu::SkipLayerNormFloat, node, 17, in, 1);
    ASSERT_TRUE(ref.ok() && fast.ok()) << what << (ref.ok() ? fast.status() : ref.status()).ToString();
    ExpectClose((*fast)[0].tensor(), ref->outputs[0].tensor(), c.beta ? beta.data<float>() : nullptr, hidden, what);
    if (c.sum_output) {  // the sum is rounded as the reference rounds it: bitwise
      const Tensor& s = (*fast)[3].tensor();
      EXPECT_EQ(std::memcmp(s.raw_data(), ref->outputs[3].tensor().raw_data(), s.byte_size()), 0) << what;
    }
    ExpectSameAcrossThreads(cpu::SkipLayerNormFloat, node, 17, in, what);
  }
}

// The AVX-512 sums keep the AVX2 lanes' order: the same bits either way,
// rows of 768 (BERT), 33 (a ragged tail) and 16, with and without a bias.
TEST(FastSkipLayerNorm, Avx512IsBitwiseTheAvx2Path) {
  if (cpu::SgemmActiveIsa() != cpu::SgemmIsa::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU (or NEE_MAX_ISA)";
  std::mt19937 rng(10);
  for (int64_t hidden : {768, 33, 16})
    for (bool bias : {false, true}) {
      Tensor x = Input({3, 5, hidden}, hidden, rng), skip = testing::RandomTensor({3, 5, hidden}, rng);
      std::vector<Value> in = {Value(x), Value(skip), Value(testing::RandomTensor({hidden}, rng)),
                               Value(testing::RandomTensor({hidden}, rng)),
                               bias ? Value(testing::RandomTensor({hidden}, rng)) : Value()};
      Node node = MakeNode("SkipLayerNormalization", "com.microsoft", in, {true, false, false, true});
      auto wide = RunAll(cpu::SkipLayerNormFloat, node, 17, in, 1);
      cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx2);
      auto narrow = RunAll(cpu::SkipLayerNormFloat, node, 17, in, 1);
      cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
      ASSERT_TRUE(wide.ok() && narrow.ok());
      for (size_t o : {size_t{0}, size_t{3}}) {
        const Tensor &a = (*wide)[o].tensor(), &b = (*narrow)[o].tensor();
        EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()), 0)
            << hidden << " bias " << bias << " output " << o;
      }
    }
}

TEST(FastSkipLayerNorm, BadInputsFailAsTheReferenceDoes) {
  std::mt19937 rng(9);
  Tensor x = testing::RandomTensor({2, 8}, rng), skip = testing::RandomTensor({2, 7}, rng);
  Tensor gamma = testing::RandomTensor({8}, rng), short_gamma = testing::RandomTensor({7}, rng);
  std::vector<Value> bad_skip = {Value(x), Value(skip), Value(gamma)};
  std::vector<Value> bad_gamma = {Value(x), Value(x), Value(short_gamma)};
  Node node = MakeNode("SkipLayerNormalization", "com.microsoft", bad_skip, {true});
  EXPECT_FALSE(RunAll(cpu::SkipLayerNormFloat, node, 17, bad_skip, 1).ok());
  EXPECT_FALSE(RunAll(cpu::SkipLayerNormFloat, node, 17, bad_gamma, 1).ok());
}

}  // namespace
}  // namespace nee
