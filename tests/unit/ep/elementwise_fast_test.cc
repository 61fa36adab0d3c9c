// The float32 Add, Sub, Mul and Div (ep/cpu/elementwise_fast.cc) against the
// reference kernels: bitwise equal (NaN compared as NaN) over every broadcast
// form, with NaN, inf and signed zeros among the operands, at 1, 2 and 3
// threads; and what goes to the reference (legacy broadcast, other types).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

// Random values with specials sprinkled in (NaN, +-inf, +-0, a subnormal).
Tensor Operand(const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = testing::RandomTensor(dims, rng);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 0.f, -0.f, 1e-40f};
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); i += 11) p[i] = specials[(i / 11) % 6];
  return t;
}

void ExpectSameBits(const Tensor& fast, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(fast.dims(), ref.dims()) << what;
  const float* f = fast.data<float>();
  const float* r = ref.data<float>();
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    if (std::isnan(r[i])) {
      EXPECT_TRUE(std::isnan(f[i])) << what << " at " << i;
    } else {
      EXPECT_EQ(std::memcmp(&f[i], &r[i], sizeof(float)), 0) << what << " at " << i << ": " << f[i] << " vs " << r[i];
    }
  }
}

struct ShapePair {
  std::vector<int64_t> a, b;
};

std::vector<ShapePair> Shapes() {
  return {
      {{7}, {7}},                            // equal, odd
      {{1}, {1}},                            // one element
      {{}, {5}},                             // scalar first
      {{5}, {}},                             // scalar second
      {{}, {}},                              // both rank 0
      {{0}, {0}},                            // empty
      {{2, 0, 3}, {3}},                      // empty with broadcast
      {{3, 17}, {17}},                       // bias row
      {{17}, {3, 17}},                       // bias row first
      {{2, 3, 5, 7}, {3, 1, 1}},             // per channel
      {{1, 3, 5, 7}, {1, 3, 1, 1}},          // per channel, 4-D
      {{3, 1, 1}, {2, 3, 5, 7}},             // per channel first
      {{2, 1, 1, 9}, {2, 4, 9, 9}},          // attention mask
      {{2, 4, 9, 9}, {2, 1, 1, 9}},          // attention mask second
      {{4, 1}, {1, 5}},                      // outer product
      {{2, 3, 1, 5}, {3, 4, 1}},             // general
      {{1, 1, 33}, {1, 1, 1}},               // all-ones broadcast
      {{5000, 3}, {3}},                      // many short rows (threads split rows)
      {{40001}, {40001}},                    // one long row (threads split it)
      {{1, 24, 37, 41}, {24, 1, 1}},         // long per-channel rows
      {{2, 12, 40, 40}, {2, 1, 1, 40}},      // mask, several tasks
      // Equal shapes in the blocked layout [N, Cb, H, W, 8] (split by pixel
      // ranges on more than one thread): odd planes, several images and
      // tasks, one block, and a last dim that is not a block (flat split).
      {{2, 3, 5, 7, 8}, {2, 3, 5, 7, 8}},
      {{1, 4, 41, 43, 8}, {1, 4, 41, 43, 8}},
      {{3, 1, 1, 1, 8}, {3, 1, 1, 1, 8}},
      {{1, 2, 40, 40, 4}, {1, 2, 40, 40, 4}},
      // One operand repeating eight values along a row (a blocked tensor by
      // per-channel values: an SE block's scale), either operand, a batch
      // broadcast too, and rows that merge into one long row (split across
      // threads at whole periods).
      {{1, 2, 40, 40, 8}, {1, 2, 40, 1, 8}},
      {{1, 4, 7, 9, 8}, {1, 4, 1, 1, 8}},
      {{1, 4, 1, 1, 8}, {2, 4, 6, 5, 8}},
      {{45, 8}, {1, 8}},
      {{3001, 8}, {8}},
  };
}

TEST(FastBinary, BitwiseEqualToTheReferenceOnEveryBroadcastForm) {
  std::mt19937 rng(7);
  const std::vector<std::pair<const char*, KernelFn>> ops = {
      {"Add", cpu::AddFloat}, {"Sub", cpu::SubFloat}, {"Mul", cpu::MulFloat}, {"Div", cpu::DivFloat}};
  for (const ShapePair& s : Shapes()) {
    Tensor a = Operand(s.a, rng), b = Operand(s.b, rng);
    for (const auto& [op, kernel] : ops) {
      Node node = testing::MakeNode(op, 2, 1);
      const std::string what = std::string(op) + " " + DimsToString(s.a) + " " + DimsToString(s.b);
      auto ref = testing::RunOp(node, 14, {Value(a), Value(b)});
      ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
      auto one = testing::RunKernel(kernel, node, 14, {Value(a), Value(b)}, 1);
      ASSERT_TRUE(one.ok()) << what << ": " << one.status().ToString();
      ExpectSameBits(*one, ref->outputs[0].tensor(), what);
      for (int threads : {2, 3}) {
        auto many = testing::RunKernel(kernel, node, 14, {Value(a), Value(b)}, threads);
        ASSERT_TRUE(many.ok());
        EXPECT_EQ(std::memcmp(one->raw_data(), many->raw_data(), one->byte_size()), 0) << what << " threads " << threads;
      }
    }
  }
}

TEST(FastBinary, MismatchedShapesFailAsTheReferenceDoes) {
  std::mt19937 rng(1);
  Node node = testing::MakeNode("Add", 2, 1);
  auto r = testing::RunKernel(cpu::AddFloat, node, 14, {Value(Operand({3}, rng)), Value(Operand({4}, rng))}, 1);
  EXPECT_FALSE(r.ok());
}

TEST(FastBinary, LegacyBroadcastAndOtherTypesGoToTheReference) {
  std::mt19937 rng(2);
  // Opset 6 with broadcast=1, axis=0: B [2] aligns with A's first dim.
  Node legacy = testing::MakeNode("Mul", 2, 1, {testing::IntAttr("broadcast", 1), testing::IntAttr("axis", 0)});
  Tensor a = Operand({2, 3}, rng), b = Operand({2}, rng);
  auto ref = testing::RunOp(legacy, 6, {Value(a), Value(b)});
  auto fast = testing::RunKernel(cpu::MulFloat, legacy, 6, {Value(a), Value(b)}, 1);
  ASSERT_TRUE(ref.ok() && fast.ok());
  ExpectSameBits(*fast, ref->outputs[0].tensor(), "legacy");

  Tensor ia = Tensor::FromVector<int32_t>({7, -7}, {2}), ib = Tensor::FromVector<int32_t>({2, 2}, {2});
  auto q = testing::RunKernel(cpu::DivFloat, testing::MakeNode("Div", 2, 1), 14, {Value(ia), Value(ib)}, 1);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->data<int32_t>()[0], 3);
  EXPECT_EQ(q->data<int32_t>()[1], -3);
}

// Pow by a constant 2 or 3 (float or double, shape [] or [1]) is bitwise the
// reference's (float)pow((double)x, e), specials included; other exponents
// are the reference's own result.
TEST(FastPow, SquareAndCubeBitwiseEqualToTheReference) {
  std::mt19937 rng(21);
  for (double e : {2.0, 3.0, 2.5, -1.0}) {
    for (bool as_double : {false, true}) {
      for (const std::vector<int64_t>& e_dims : {std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
        Tensor x = Operand({3, 40001}, rng);
        float* px = x.data<float>();
        for (int64_t i = 5; i < x.num_elements(); i += 97) px[i] = (i % 2 ? 1.f : -1.f) * 3.0e12f;  // cubes overflow
        Tensor exponent = as_double ? Tensor::FromVector<double>({e}, e_dims)
                                    : Tensor::FromVector<float>({static_cast<float>(e)}, e_dims);
        Node node = testing::MakeNode("Pow", 2, 1);
        auto ref = testing::RunOp(node, 15, {Value(x), Value(exponent)});
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        for (int threads : {1, 2}) {
          auto fast = testing::RunKernel(cpu::PowFloat, node, 15, {Value(x), Value(exponent)}, threads);
          ASSERT_TRUE(fast.ok()) << fast.status().ToString();
          ExpectSameBits(*fast, ref->outputs[0].tensor(), "exponent " + std::to_string(e));
        }
      }
    }
  }
}

}  // namespace
}  // namespace nee
