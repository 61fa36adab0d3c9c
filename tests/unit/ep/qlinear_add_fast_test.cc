// com.microsoft QLinearAdd's fast kernel (ep/cpu/qlinear_fast.cc) against the reference kernel
// (ops/quantize_contrib.cc), bitwise, on every (a, b) byte pair: the AVX2 form builds each input's float from its byte
// (2^23 + byte, minus 2^23 + zero point) and adds the output zero point in int16 after narrowing, so these
// cases cover every input value with zero points at both ends, ratios that make exact halves (round half to
// even), ratios that saturate, and random ones; on each GEMM ISA the machine has, at one, two and three threads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

// Every (a, b) pair once, then `extra` random pairs, so the length is not a multiple of a vector.
void AllPairs(DataType t, int64_t extra, std::mt19937& rng, Tensor* a, Tensor* b) {
  const int64_t n = 65536 + extra;
  std::vector<uint8_t> av(static_cast<size_t>(n)), bv(static_cast<size_t>(n));
  for (int64_t i = 0; i < 65536; ++i) av[i] = static_cast<uint8_t>(i >> 8), bv[i] = static_cast<uint8_t>(i);
  for (int64_t i = 65536; i < n; ++i) av[i] = static_cast<uint8_t>(rng()), bv[i] = static_cast<uint8_t>(rng());
  auto make = [&](const std::vector<uint8_t>& v) {
    if (t == DataType::kUint8) return Tensor::FromVector(v, {1, n});
    std::vector<int8_t> s(v.size());
    std::memcpy(s.data(), v.data(), v.size());
    return Tensor::FromVector(s, {1, n});
  };
  *a = make(av), *b = make(bv);
}

Tensor ZeroPoint(DataType t, int32_t v) {
  return t == DataType::kUint8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(v))
                               : Tensor::Scalar<int8_t>(static_cast<int8_t>(v));
}

struct AddCase {
  float a_scale, b_scale, y_scale;
  int32_t za, zb, zy;  // uint8 values; int8 cases use them minus 128
};

using QLinearAddFastTest = testing::IsaLimitedTest;

TEST_P(QLinearAddFastTest, EveryBytePairMatchesReferenceBitwise) {
  const std::vector<AddCase> cases = {
      {0.031f, 0.017f, 0.043f, 131, 7, 128},   // ordinary ratios
      {0.5f, 0.25f, 1.0f, 0, 0, 0},            // exact halves and quarters: ties to even
      {1.5f, 0.5f, 1.0f, 255, 128, 255},       // halves, zero points at the top
      {0.02f, 0.02f, 0.01f, 0, 255, 1},        // sums past both ends of the range
      {3.0f, 7.0f, 0.125f, 100, 200, 50},      // far past the range (saturation in int16 first)
      {1e-4f, 2e-4f, 0.3f, 17, 240, 127},      // tiny sums: the output's zero point alone
      {-0.04f, 0.03f, 0.05f, 64, 192, 90},     // a negative scale ratio
  };
  std::mt19937 rng(71);
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (size_t i = 0; i < cases.size(); ++i) {
      const AddCase& c = cases[i];
      const int32_t shift = t == DataType::kInt8 ? 128 : 0;
      Tensor a, b;
      AllPairs(t, 45 + static_cast<int64_t>(i), rng, &a, &b);
      const std::vector<Value> in = {Value(a), Value(Tensor::Scalar<float>(c.a_scale)), Value(ZeroPoint(t, c.za - shift)),
                                     Value(b), Value(Tensor::Scalar<float>(c.b_scale)), Value(ZeroPoint(t, c.zb - shift)),
                                     Value(Tensor::Scalar<float>(c.y_scale)), Value(ZeroPoint(t, c.zy - shift))};
      const Node node = testing::MakeNode("QLinearAdd", in.size(), 1, {}, "com.microsoft");
      auto ref = testing::RunOp(node, 1, in);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      for (int threads : {1, 2, 3}) {
        auto got = testing::RunKernelOmitting(cpu::QLinearAddFast, node, 1, in, threads);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        testing::ExpectBitwise(got.value(), ref->outputs[0].tensor(),
                               "case " + std::to_string(i) + (t == DataType::kInt8 ? " int8" : " uint8") +
                                   " threads " + std::to_string(threads));
      }
    }
}

// Zero points absent (0) and random scales over many draws, on short odd lengths (the scalar and 8-lane tails).
TEST_P(QLinearAddFastTest, RandomScalesAndShortLengthsMatchReference) {
  std::mt19937 rng(72);
  std::uniform_real_distribution<float> scale(0.001f, 0.2f);
  for (DataType t : {DataType::kUint8, DataType::kInt8})
    for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{32}, int64_t{63}, int64_t{95}, int64_t{4097}}) {
      for (int draw = 0; draw < 6; ++draw) {
        std::vector<Value> in = {Value(testing::Random8(t, {n}, rng)), Value(Tensor::Scalar<float>(scale(rng))),
                                 Value(testing::Random8(t, {}, rng)),  Value(testing::Random8(t, {n}, rng)),
                                 Value(Tensor::Scalar<float>(scale(rng))), Value(testing::Random8(t, {}, rng)),
                                 Value(Tensor::Scalar<float>(scale(rng))), Value(testing::Random8(t, {}, rng))};
        if (draw % 2 == 1) in[2] = Value(), in[5] = Value(), in[7] = Value();
        const Node node = testing::MakeNode("QLinearAdd", in.size(), 1, {}, "com.microsoft");
        auto ref = testing::RunOp(node, 1, in);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        for (int threads : {1, 2}) {
          auto got = testing::RunKernelOmitting(cpu::QLinearAddFast, node, 1, in, threads);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          testing::ExpectBitwise(got.value(), ref->outputs[0].tensor(),
                                 "n " + std::to_string(n) + " draw " + std::to_string(draw));
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, QLinearAddFastTest, testing::AllGemmIsas(), testing::IsaName);

}  // namespace
}  // namespace nee
