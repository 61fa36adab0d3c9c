// Pad row copies (ep/cpu/pad_fast.cc) against the reference kernel
// (ops/pad_tile.cc): bitwise equal outputs for every mode on odd shapes,
// pads wider than the input (several reflections / wraps), pads on one or
// every axis, zero pads, rank 1 to 4, several element types, a constant value
// given, empty or absent, 1 to 3 threads; the same errors (or fallbacks) where
// the fast path does not apply: negative pads, axes, empty inputs, bad pads.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep_test_util.h"

namespace nee {
namespace {

Value Ints(const std::vector<int64_t>& v) { return Value(Tensor::FromVector(v, {static_cast<int64_t>(v.size())})); }

Tensor RandomOf(DataType type, const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = Tensor::Allocate(type, dims).value();
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.byte_size(); ++i) p[i] = static_cast<uint8_t>(rng());
  return t;
}

// Pad with `inputs` (empty Values: omitted) by the fast kernel at 1-3
// threads, against the reference kernel: the same bytes or the same error.
void ExpectSameAsReference(const std::string& mode, int64_t opset, const std::vector<Value>& inputs,
                           const std::string& what) {
  Node node = testing::MakeNode("Pad", inputs.size(), 1, {testing::StringAttr("mode", mode)});
  auto schema = OpRegistry::Global().Resolve("", "Pad", opset);
  ASSERT_TRUE(schema.ok()) << what;
  auto want = testing::RunKernelOmitting(schema.value()->kernel, node, opset, inputs, 1);
  for (int threads : {1, 2, 3}) {
    auto got = testing::RunKernelOmitting(cpu::PadFast, node, opset, inputs, threads);
    ASSERT_EQ(got.ok(), want.ok()) << what << ": " << (got.ok() ? want.status() : got.status()).ToString();
    if (!want.ok()) {
      EXPECT_EQ(got.status().code(), want.status().code()) << what;
      continue;
    }
    if (want->dtype() == DataType::kString) {  // objects: compared by value
      ASSERT_EQ(got->dims(), want->dims()) << what;
      for (int64_t i = 0; i < want->num_elements(); ++i)
        EXPECT_EQ(got->data<std::string>()[i], want->data<std::string>()[i]) << what;
      continue;
    }
    testing::ExpectBitwise(*got, *want, what + " threads " + std::to_string(threads));
  }
}

TEST(FastPad, EveryModeBitwiseEqualToTheReference) {
  std::mt19937 rng(11);
  struct Case {
    std::vector<int64_t> dims, pads;
  };
  const std::vector<Case> cases = {
      {{1, 512}, {0, 64, 0, 64}},                     // silero-vad's STFT reflect pad
      {{1, 3, 7, 5}, {0, 0, 1, 2, 0, 0, 2, 1}},       // spatial pads, odd sizes
      {{2, 3, 4, 5}, {1, 1, 1, 1, 1, 1, 1, 1}},       // every axis
      {{3, 1, 4}, {0, 2, 0, 1, 3, 2}},                // pads over a dim of 1
      {{7}, {13, 11}},                                // wider than the input: several reflections
      {{2, 3}, {0, 0, 0, 0}},                         // no padding
      {{4, 6}, {5, 0, 2, 0}},                         // outer pads wider than the dim
      {{1, 64, 9, 9}, {0, 0, 1, 1, 0, 0, 1, 1}},      // many rows
      {{1, 2, 70, 300}, {0, 0, 3, 4, 0, 0, 5, 6}},    // output over several task pieces
  };
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    for (DataType type : {DataType::kFloat, DataType::kUint8, DataType::kFloat16, DataType::kInt64, DataType::kBool}) {
      for (const Case& c : cases) {
        const std::string what = std::string(mode) + " " + DataTypeName(type) + " " + DimsToString(c.dims) +
                                 " pads " + DimsToString(c.pads);
        ExpectSameAsReference(mode, 19, {Value(RandomOf(type, c.dims, rng)), Ints(c.pads)}, what);
        if (std::string(mode) == "constant")
          ExpectSameAsReference(mode, 19,
                                {Value(RandomOf(type, c.dims, rng)), Ints(c.pads), Value(RandomOf(type, {}, rng))},
                                what + " with a value");
      }
    }
  }
}

TEST(FastPad, ConstantValueEmptyOrOfAnotherTypeAndOldOpsets) {
  std::mt19937 rng(12);
  Value x(RandomOf(DataType::kFloat, {2, 5}, rng));
  ExpectSameAsReference("constant", 11, {x, Ints({1, 2, 3, 4}), Value(RandomOf(DataType::kFloat, {0}, rng))},
                        "empty value");
  ExpectSameAsReference("constant", 13, {x, Ints({1, 2, 3, 4}), Value(RandomOf(DataType::kFloat, {1}, rng))},
                        "value of shape [1]");
  ExpectSameAsReference("constant", 13, {x, Ints({1, 2, 3, 4}), Value(RandomOf(DataType::kInt32, {}, rng))},
                        "value of another type: the reference's error");
  ExpectSameAsReference("reflect", 11, {x, Ints({0, 1, 0, 1})}, "opset 11");
}

TEST(FastPad, CasesLeftToTheReference) {
  std::mt19937 rng(13);
  Value x(RandomOf(DataType::kFloat, {3, 4}, rng));
  ExpectSameAsReference("constant", 19, {x, Ints({-1, 1, 0, -2})}, "negative pads crop");
  ExpectSameAsReference("reflect", 19, {x, Ints({0, 1, 0, 1}), Value(), Ints({1, 0})}, "axes given");
  ExpectSameAsReference("constant", 19, {Value(RandomOf(DataType::kFloat, {0, 4}, rng)), Ints({1, 1, 1, 1})},
                        "empty input, constant");
  ExpectSameAsReference("reflect", 19, {Value(RandomOf(DataType::kFloat, {0, 4}, rng)), Ints({1, 0, 1, 0})},
                        "empty input, reflect: the reference's error");
  ExpectSameAsReference("reflect", 19, {x, Ints({0, 1, 0})}, "pads of the wrong length");
  ExpectSameAsReference("mirror", 19, {x, Ints({0, 1, 0, 1})}, "unknown mode");
  ExpectSameAsReference("constant", 19, {x, Ints({0, int64_t{1} << 60, 0, 0})}, "absurd pad");
  ExpectSameAsReference("edge", 19, {Value(Tensor::FromVector<std::string>({"a", "b"}, {2})), Ints({1, 1})},
                        "strings");
  ExpectSameAsReference("edge", 19, {Value(Tensor::FromVector<float>({1.5f}, {})), Ints({})}, "rank 0");
}

}  // namespace
}  // namespace nee
