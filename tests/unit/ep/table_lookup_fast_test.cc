// ai.nee TableLookup's fast kernel (ep/cpu/byte_lookup.cc) against its reference (ops/table_lookup.cc): bitwise,
// at one and two threads, on every ISA level the machine has, for uint8 and int8 inputs and tables, lengths
// around the AVX2 loop's 32-byte step and the threads' 16 KiB pieces, every byte value, and empty tensors. The
// reference is checked against the lookup written out, and a table of the wrong size is an error naming it.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

Node TableNode() { return testing::MakeNode("TableLookup", 2, 1, {}, "ai.nee"); }

class TableLookupFast : public testing::IsaLimitedTest {};

TEST_P(TableLookupFast, MatchesReference) {
  std::mt19937 rng(21);
  for (DataType x_type : {DataType::kUint8, DataType::kInt8})
    for (DataType table_type : {DataType::kUint8, DataType::kInt8})
      for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{256},
                        int64_t{16384 * 2 + 77}}) {
        Tensor x = testing::Random8(x_type, {1, n}, rng);
        // Every byte value once at the start where there is room: each of the sixteen shuffles' rows is hit.
        auto* bytes = static_cast<uint8_t*>(x.raw_data());
        for (int64_t i = 0; i < n && i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
        const std::vector<Value> in = {Value(x), Value(testing::Random8(table_type, {256}, rng))};
        auto ref = testing::RunOp(TableNode(), 1, in);
        ASSERT_TRUE(ref.ok()) << ref.status().ToString();
        for (int threads : {1, 2}) {
          auto got = testing::RunKernel(cpu::TableLookupFast, TableNode(), 1, in, threads);
          ASSERT_TRUE(got.ok()) << got.status().ToString();
          testing::ExpectBitwise(got.value(), ref->outputs[0].tensor(),
                                 "n=" + std::to_string(n) + " threads=" + std::to_string(threads));
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Isas, TableLookupFast, testing::AllGemmIsas(), testing::IsaName);

TEST(TableLookupReference, IndexesByTheByteAboveTheTypesLowest) {
  std::vector<uint8_t> table(256);
  for (int v = 0; v < 256; ++v) table[static_cast<size_t>(v)] = static_cast<uint8_t>(255 - v);
  const Tensor x = Tensor::FromVector(std::vector<int8_t>{-128, -1, 0, 127}, {2, 2});
  auto ref = testing::RunOp(TableNode(), 1, {Value(x), Value(Tensor::FromVector(table, {256}))});
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  const Tensor& y = ref->outputs[0].tensor();
  ASSERT_EQ(y.dtype(), DataType::kUint8);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(y.data<uint8_t>()[0], 255);  // -128 is entry 0
  EXPECT_EQ(y.data<uint8_t>()[1], 128);  // -1 is entry 127
  EXPECT_EQ(y.data<uint8_t>()[2], 127);  // 0 is entry 128
  EXPECT_EQ(y.data<uint8_t>()[3], 0);    // 127 is entry 255
}

TEST(TableLookupReference, NamesATableOfTheWrongSize) {
  const Tensor x = Tensor::FromVector(std::vector<uint8_t>{1, 2}, {2});
  auto run = testing::RunOp(TableNode(), 1, {Value(x), Value(Tensor::FromVector(std::vector<uint8_t>(255), {255}))});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().ToString().find("table"), std::string::npos) << run.status().ToString();
  auto fast = testing::RunKernel(cpu::TableLookupFast, TableNode(), 1,
                                 {Value(x), Value(Tensor::FromVector(std::vector<uint8_t>(255), {255}))}, 1);
  EXPECT_FALSE(fast.ok());
}

}  // namespace
}  // namespace nee
