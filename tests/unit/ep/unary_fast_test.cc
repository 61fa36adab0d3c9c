// The float32 activations and unary math (ep/cpu/unary_fast.cc) against the
// reference kernels: bitwise (NaN as NaN) for Relu, LeakyRelu, HardSigmoid,
// HardSwish, Clip, Neg, Sqrt, Reciprocal; within stated bounds for the erf
// and tanh based ones (Erf: 2.5e-7 absolute; the Gelus: 1.5e-7 |x| +
// 2.5e-7 |y|, the error of erf or tanh scaled by x / 2 plus rounding); and
// bitwise equal across 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

using testing::FloatAttr;
using testing::StringAttr;

// [-8, 8) in an uneven step (an odd count: vector tails), then the specials.
Tensor Sweep() {
  std::vector<float> v;
  for (float x = -8.f; x < 8.f; x += 0.00097f) v.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, 1e-40f, -1e-40f, 1e-30f, 3.9f, 3.93f, -3.93f, 0.875f, -0.875f, 50.f, -50.f, inf, -inf,
                  std::numeric_limits<float>::quiet_NaN()})
    v.push_back(x);
  return Tensor::FromVector(v, {static_cast<int64_t>(v.size())});
}

// Runs the reference and the fast kernel; checks thread-count independence.
struct Outputs {
  Tensor ref, fast;
};
Outputs RunBoth(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& in) {
  auto ref = testing::RunOp(node, opset, in);
  auto fast = testing::RunKernel(kernel, node, opset, in, 1);
  EXPECT_TRUE(ref.ok() && fast.ok()) << node.op_type;
  if (!ref.ok() || !fast.ok()) return {};
  for (int threads : {2, 3}) {
    auto many = testing::RunKernel(kernel, node, opset, in, threads);
    EXPECT_TRUE(many.ok());
    if (many.ok())
      EXPECT_EQ(std::memcmp(fast->raw_data(), many->raw_data(), fast->byte_size()), 0) << node.op_type << " " << threads;
  }
  return {ref->outputs[0].tensor(), *fast};
}

void ExpectSameBits(const Outputs& o, const std::string& what) {
  ASSERT_EQ(o.fast.dims(), o.ref.dims()) << what;
  const float* f = o.fast.data<float>();
  const float* r = o.ref.data<float>();
  for (int64_t i = 0; i < o.ref.num_elements(); ++i) {
    if (std::isnan(r[i])) EXPECT_TRUE(std::isnan(f[i])) << what << " at " << i;
    else EXPECT_EQ(std::memcmp(&f[i], &r[i], 4), 0) << what << " at " << i << ": " << f[i] << " vs " << r[i];
  }
}

TEST(FastUnary, ExactOpsAreBitwiseEqualToTheReference) {
  const Tensor x = Sweep();
  struct Case {
    const char* op;
    KernelFn kernel;
    std::vector<Attribute> attrs;
  };
  const std::vector<Case> cases = {
      {"Relu", cpu::ReluFloat, {}},
      {"LeakyRelu", cpu::LeakyReluFloat, {}},
      {"LeakyRelu", cpu::LeakyReluFloat, {FloatAttr("alpha", 0.3f)}},
      {"HardSigmoid", cpu::HardSigmoidFloat, {}},
      {"HardSigmoid", cpu::HardSigmoidFloat, {FloatAttr("alpha", 0.7f), FloatAttr("beta", -0.1f)}},
      {"HardSwish", cpu::HardSwishFloat, {}},
      {"Neg", cpu::NegFloat, {}},
      {"Sqrt", cpu::SqrtFloat, {}},
      {"Reciprocal", cpu::ReciprocalFloat, {}},
      {"Clip", cpu::ClipFloat, {FloatAttr("min", -0.5f), FloatAttr("max", 6.f)}},  // opset 6: attributes
      {"Clip", cpu::ClipFloat, {FloatAttr("min", 0.f)}},
      {"Clip", cpu::ClipFloat, {FloatAttr("max", 1.f)}},
      {"Clip", cpu::ClipFloat, {FloatAttr("min", 2.f), FloatAttr("max", 1.f)}},  // lo > hi: all hi
  };
  for (const Case& c : cases) {
    Node node = testing::MakeNode(c.op, 1, 1, c.attrs);
    const int64_t opset = std::string(c.op) == "Clip" ? 6 : 14;
    ExpectSameBits(RunBoth(c.kernel, node, opset, {Value(x)}), c.op);
  }
}

TEST(FastUnary, ClipWithBoundInputs) {
  const Tensor x = Sweep();
  const Tensor lo = Tensor::FromVector<float>({0.f}, {}), hi = Tensor::FromVector<float>({6.f}, {});
  const std::vector<std::vector<Value>> inputs = {
      {Value(x), Value(lo), Value(hi)}, {Value(x), Value(lo)}, {Value(x), Value(), Value(hi)}, {Value(x)}};
  for (const auto& in : inputs) {
    Node node = testing::MakeNode("Clip", in.size(), 1);
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].kind() == Value::Kind::kEmpty) node.inputs[i].clear();
    std::vector<const Value*> ptrs;
    for (const Value& v : in) ptrs.push_back(v.kind() == Value::Kind::kEmpty ? nullptr : &v);
    std::vector<Value> outputs(1);
    KernelContext ctx(node, 13, ptrs, &outputs, nullptr, nullptr, nullptr);
    ASSERT_TRUE(cpu::ClipFloat(ctx).ok());
    auto ref = testing::RunOp(node, 13, in);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    ExpectSameBits({ref->outputs[0].tensor(), outputs[0].tensor()}, "Clip inputs " + std::to_string(in.size()));
  }
}

// |fast - ref| <= abs_x * |x| + rel * |ref| + floor (NaN as NaN, infinities equal).
void ExpectWithin(const Outputs& o, const Tensor& x, float abs_x, float rel, float floor, const std::string& what) {
  ASSERT_EQ(o.fast.dims(), o.ref.dims()) << what;
  const float* f = o.fast.data<float>();
  const float* r = o.ref.data<float>();
  const float* px = x.data<float>();
  for (int64_t i = 0; i < o.ref.num_elements(); ++i) {
    if (std::isnan(r[i])) EXPECT_TRUE(std::isnan(f[i])) << what << "(" << px[i] << ")";
    else if (std::isinf(r[i]) || std::isinf(px[i])) EXPECT_EQ(f[i], r[i]) << what << "(" << px[i] << ")";
    else EXPECT_NEAR(f[i], r[i], abs_x * std::fabs(px[i]) + rel * std::fabs(r[i]) + floor) << what << "(" << px[i] << ")";
  }
}

TEST(FastUnary, ErfAndGelusAreWithinTheirBounds) {
  const Tensor x = Sweep();
  ExpectWithin(RunBoth(cpu::ErfFloat, testing::MakeNode("Erf", 1, 1), 13, {Value(x)}), x, 0.f, 0.f, 2.5e-7f, "Erf");
  for (const char* approximate : {"none", "tanh"}) {
    Node node = testing::MakeNode("Gelu", 1, 1, {StringAttr("approximate", approximate)});
    ExpectWithin(RunBoth(cpu::GeluFloat, node, 20, {Value(x)}), x, 1.5e-7f, 2.5e-7f, 1e-30f,
                 std::string("Gelu ") + approximate);
  }
  Node ms = testing::MakeNode("Gelu", 1, 1, {}, "com.microsoft");
  ExpectWithin(RunBoth(cpu::MsGeluFloat, ms, 17, {Value(x)}), x, 1.5e-7f, 2.5e-7f, 1e-30f, "com.microsoft Gelu");
}

TEST(FastUnary, BiasGeluAndFastGeluWithABias) {
  // Rows of 37: a range split between threads starts mid-row.
  std::mt19937 rng(4);
  Tensor x = testing::RandomTensor({3, 500, 37}, rng), bias = testing::RandomTensor({37}, rng);
  float* px = x.data<float>();
  for (int64_t i = 0; i < x.num_elements(); ++i) px[i] *= 6.f;
  std::vector<float> s(static_cast<size_t>(x.num_elements()));  // x + bias, the argument both see
  for (int64_t i = 0; i < x.num_elements(); ++i) s[static_cast<size_t>(i)] = px[i] + bias.data<float>()[i % 37];
  Tensor arg = Tensor::FromVector(s, x.dims());
  Node bias_gelu = testing::MakeNode("BiasGelu", 2, 1, {}, "com.microsoft");
  ExpectWithin(RunBoth(cpu::BiasGeluFloat, bias_gelu, 17, {Value(x), Value(bias)}), arg, 1.5e-7f, 2.5e-7f, 1e-30f,
               "BiasGelu");
  Node fast_gelu = testing::MakeNode("FastGelu", 2, 1, {}, "com.microsoft");
  ExpectWithin(RunBoth(cpu::FastGeluFloat, fast_gelu, 17, {Value(x), Value(bias)}), arg, 1.5e-7f, 2.5e-7f, 1e-30f,
               "FastGelu");
  Node no_bias = testing::MakeNode("FastGelu", 1, 1, {}, "com.microsoft");
  ExpectWithin(RunBoth(cpu::FastGeluFloat, no_bias, 17, {Value(x)}), x, 1.5e-7f, 2.5e-7f, 1e-30f, "FastGelu");
}

TEST(FastUnary, EmptyAndOtherTypes) {
  Tensor empty = Tensor::FromVector<float>({}, {0, 3});
  auto e = testing::RunKernel(cpu::GeluFloat, testing::MakeNode("Gelu", 1, 1), 20, {Value(empty)}, 2);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->num_elements(), 0);
  Tensor ints = Tensor::FromVector<int32_t>({-2, 3}, {2});
  auto r = testing::RunKernel(cpu::ReluFloat, testing::MakeNode("Relu", 1, 1), 14, {Value(ints)}, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->data<int32_t>()[0], 0);
  EXPECT_EQ(r->data<int32_t>()[1], 3);
  Node bad = testing::MakeNode("Gelu", 1, 1, {StringAttr("approximate", "cubic")});
  EXPECT_FALSE(testing::RunKernel(cpu::GeluFloat, bad, 20, {Value(Tensor::FromVector<float>({1.f}, {1}))}, 1).ok());
}

}  // namespace
}  // namespace nee
