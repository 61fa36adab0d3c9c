// ReduceSum and ReduceMean on float32 (ep/cpu/reduce_fast.cc) against the
// reference kernel (ops/reduce.cc): bitwise equal outputs over middle, first,
// last and multi-axis contiguous blocks, keepdims on and off, odd sizes and
// inner sizes that are not multiples of eight, NaN, infinities and -0, axes
// from the attribute (old opsets) and from the input, 1 to 3 threads; the
// cases it leaves to the reference give the reference's results or errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep_test_util.h"

namespace nee {
namespace {

Value Ints(const std::vector<int64_t>& v) { return Value(Tensor::FromVector(v, {static_cast<int64_t>(v.size())})); }

// `op` through the fast kernel at 1-3 threads against the reference kernel.
void ExpectSameAsReference(KernelFn fast, const std::string& op, int64_t opset, const Node& node,
                           const std::vector<Value>& inputs, const std::string& what) {
  auto schema = OpRegistry::Global().Resolve("", op, opset);
  ASSERT_TRUE(schema.ok()) << what;
  auto want = testing::RunKernelOmitting(schema.value()->kernel, node, opset, inputs, 1);
  for (int threads : {1, 2, 3}) {
    auto got = testing::RunKernelOmitting(fast, node, opset, inputs, threads);
    ASSERT_EQ(got.ok(), want.ok()) << what << ": " << (got.ok() ? want.status() : got.status()).ToString();
    if (!want.ok()) {
      EXPECT_EQ(got.status().code(), want.status().code()) << what;
      continue;
    }
    testing::ExpectBitwise(*got, *want, what + " threads " + std::to_string(threads));
  }
}

Tensor Awkward(const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = testing::UniformFloats(dims, rng, -100.f, 100.f);
  float* p = t.data<float>();
  const int64_t n = t.num_elements();
  if (n > 40) {  // values whose sums depend on the order, and the special ones
    p[3] = 1e30f, p[5] = -1e30f, p[7] = 1e-30f, p[11] = -0.f;
    p[n - 2] = std::numeric_limits<float>::infinity();
    p[n / 2] = std::numeric_limits<float>::quiet_NaN();
  }
  return t;
}

TEST(FastReduce, SumAndMeanBitwiseEqualToTheReference) {
  std::mt19937 rng(21);
  struct Case {
    std::vector<int64_t> dims, axes;
  };
  const std::vector<Case> cases = {
      {{1, 512, 256}, {1}},        // magika's sums
      {{3, 37, 13}, {1}},          // inner not a multiple of 8
      {{2, 5, 7, 9}, {1, 2}},      // a block of two axes
      {{4, 33}, {-1}},             // innermost: runs
      {{19, 3, 5}, {1, 2}},        // innermost block of two
      {{6, 7}, {0}},               // first axis
      {{2, 3, 4}, {0, 1, 2}},      // every axis, given
      {{1, 1, 1}, {1}},
      {{5, 1000}, {1}},            // long runs
      {{2, 3000, 9}, {1}},         // tasks of several outputs groups
  };
  for (const Case& c : cases) {
    for (int64_t keepdims : {0, 1}) {
      Tensor x = Awkward(c.dims, rng);
      const std::string what = DimsToString(c.dims) + " axes " + DimsToString(c.axes) + " keepdims " +
                               std::to_string(keepdims);
      Node sum = testing::MakeNode("ReduceSum", 2, 1, {testing::IntAttr("keepdims", keepdims)});
      ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum, {Value(x), Ints(c.axes)}, "sum " + what);
      Node mean = testing::MakeNode("ReduceMean", 2, 1, {testing::IntAttr("keepdims", keepdims)});
      ExpectSameAsReference(cpu::ReduceMeanFloat, "ReduceMean", 18, mean, {Value(x), Ints(c.axes)}, "mean " + what);
      Node mean13 = testing::MakeNode("ReduceMean", 1, 1,
                                      {testing::IntAttr("keepdims", keepdims), testing::IntsAttr("axes", c.axes)});
      ExpectSameAsReference(cpu::ReduceMeanFloat, "ReduceMean", 13, mean13, {Value(x)}, "mean-13 " + what);
    }
  }
}

TEST(FastReduce, CasesLeftToTheReference) {
  std::mt19937 rng(22);
  Value x(testing::UniformFloats({3, 4, 5}, rng, -1.f, 1.f));
  Node sum = testing::MakeNode("ReduceSum", 2, 1);
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum, {x, Ints({0, 2})}, "axes not contiguous");
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum, {x, Ints({})}, "empty axes: reduce all");
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum, {x, Value()}, "no axes input");
  Node noop = testing::MakeNode("ReduceSum", 2, 1, {testing::IntAttr("noop_with_empty_axes", 1)});
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, noop, {x, Ints({})}, "no-op");
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum, {x, Ints({3})}, "axis out of range");
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum, {x, Ints({1, -2})}, "repeated axis");
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum,
                        {Value(testing::UniformFloats({0, 4}, rng, -1.f, 1.f)), Ints({1})}, "empty input");
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 13, sum,
                        {Value(Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2})), Ints({1})}, "int32");
  Node sum11 = testing::MakeNode("ReduceSum", 1, 1);
  ExpectSameAsReference(cpu::ReduceSumFloat, "ReduceSum", 11, sum11, {x}, "opset 11 without axes: reduce all");
}

}  // namespace
}  // namespace nee
