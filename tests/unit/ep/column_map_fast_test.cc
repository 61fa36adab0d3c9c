// ai.nee TransposeColumnMap (ep/cpu/column_map_fast.cc) against the reference
// kernel (ops/column_map.cc): bitwise equal at 1 to 3 threads on a detector
// head's shape, awkward sizes (tile edges, bands that do not divide the rows,
// ranges of one column), every step kind and operand broadcast, permutations
// that keep the last axis (whole rows move), those that go to the reference,
// and the errors.
#include <gtest/gtest.h>

#include <string>

#include "ep_test_util.h"
#include "ep/cpu/column_map_fast.h"
#include "ops/column_map.h"

namespace nee {
namespace {

struct Case {
  std::vector<int64_t> x_dims, perm, bounds, program;
  std::vector<std::vector<int64_t>> operand_dims;
};

Node MapNode(const Case& c) {
  std::vector<Attribute> attrs = {testing::IntsAttr("perm", c.perm), testing::IntsAttr("bounds", c.bounds)};
  if (!c.program.empty()) attrs.push_back(testing::IntsAttr("program", c.program));
  return testing::MakeNode("TransposeColumnMap", 1 + c.operand_dims.size(), 1, attrs, "ai.nee");
}

std::vector<Value> Inputs(const Case& c, std::mt19937& rng) {
  std::vector<Value> inputs = {Value(testing::RandomTensor(c.x_dims, rng))};
  // Operands away from 0, so that the divisions stay finite.
  for (const auto& d : c.operand_dims) inputs.emplace_back(testing::UniformFloats(d, rng, 0.5f, 2.f));
  return inputs;
}

void ExpectSameAsReference(const Case& c, std::mt19937& rng) {
  const Node node = MapNode(c);
  const std::vector<Value> inputs = Inputs(c, rng);
  const std::string what = DimsToString(c.x_dims) + " perm " + DimsToString(c.perm);
  auto ref = testing::RunOp(node, 1, inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  for (int threads : {1, 2, 3}) {
    auto fast = testing::RunKernel(cpu::TransposeColumnMapFloat, node, 1, inputs, threads);
    ASSERT_TRUE(fast.ok()) << what << ": " << fast.status().ToString();
    testing::ExpectBitwise(*fast, ref->outputs[0].tensor(), what + " threads " + std::to_string(threads));
  }
}

constexpr int64_t kAdd = 0, kSub = 1, kSubFrom = 2, kMul = 3, kDiv = 4, kDivInto = 5, kSquare = 6;

TEST(FastTransposeColumnMap, BitwiseEqualToTheReference) {
  std::mt19937 rng(5);
  const std::vector<Case> cases = {
      // A YOLO head's decode: xy = (v*2 - 0.5 + grid) * stride, wh = (v*2)^2 * anchors, the rest as is.
      {{1, 3, 85, 9, 31}, {0, 1, 3, 4, 2}, {0, 2, 4, 85},
       {0, kMul, 1, 0, kSub, 2, 0, kAdd, 3, 0, kMul, 4, 1, kMul, 1, 1, kSquare, 0, 1, kMul, 5},
       {{}, {}, {1, 1, 9, 31, 2}, {}, {1, 3, 1, 1, 2}}},
      // Every step kind; operands per row ([7, 1]), per column ([5]), scalar.
      {{2, 13, 7}, {0, 2, 1}, {0, 5, 6, 13},
       {0, kDiv, 1, 0, kSubFrom, 2, 1, kDivInto, 3, 2, kAdd, 1, 2, kSquare, 0, 0, kMul, 3},
       {{7, 1}, {5}, {}}},
      // Bands that do not divide the rows; ranges of one column.
      {{3, 17, 130}, {0, 2, 1}, {0, 1, 2, 17}, {0, kAdd, 1, 1, kMul, 2}, {{3, 130, 1}, {1, 1, 1}}},
      // The first axis moved to the end ([C, inner] -> [inner, C]); no program.
      {{11, 70}, {1, 0}, {0, 11}, {}, {}},
      {{8, 64}, {1, 0}, {0, 3, 8}, {1, kSub, 1}, {{64, 5}}},
      // Not one axis to the end: the reference runs.
      {{4, 5, 6}, {2, 0, 1}, {0, 2, 5}, {1, kMul, 1}, {{3}}},
      {{4, 5, 6}, {1, 2, 0}, {0, 4}, {0, kSquare, 0}, {}},
      // Empty.
      {{2, 3, 0, 4}, {0, 2, 3, 1}, {0, 3}, {}, {}},
      // The last axis kept: whole rows move. The same head written channels last by its conv
      // ([1, H, W, 3, 85] -> [1, 3, H, W, 85]: the last row axis moved forward, bands of 256 rows that do
      // not divide 9 x 31), two images; then other orders of the rows (output-order copies).
      {{1, 9, 31, 3, 85}, {0, 3, 1, 2, 4}, {0, 2, 4, 85},
       {0, kMul, 1, 0, kSub, 2, 0, kAdd, 3, 0, kMul, 4, 1, kMul, 1, 1, kSquare, 0, 1, kMul, 5},
       {{}, {}, {1, 1, 9, 31, 2}, {}, {1, 3, 1, 1, 2}}},
      {{2, 20, 15, 3, 6}, {0, 3, 1, 2, 4}, {0, 1, 6}, {1, kAdd, 1}, {{2, 3, 20, 15, 1}}},
      {{4, 5, 3, 7}, {2, 0, 1, 3}, {0, 3, 7}, {0, kMul, 1}, {{5, 3}}},
      {{4, 5, 3, 7}, {1, 0, 2, 3}, {0, 7}, {0, kSquare, 0}, {}},
      {{6, 9}, {0, 1}, {0, 2, 9}, {1, kSub, 1}, {{6, 7}}},
  };
  for (const Case& c : cases) ExpectSameAsReference(c, rng);
}

TEST(FastTransposeColumnMap, RefusesWhatTheDefinitionDoesNotAllow) {
  std::mt19937 rng(9);
  const std::vector<Case> bad = {
      {{2, 3, 4}, {0, 2, 1}, {0, 2}, {}, {}},                     // bounds stop short of the last dim (3)
      {{2, 3, 4}, {0, 2, 1}, {0, 2, 2, 3}, {}, {}},               // bounds must increase
      {{2, 3, 4}, {0, 2, 2}, {0, 3}, {}, {}},                     // perm repeats an axis
      {{2, 3, 4}, {0, 2, 1}, {0, 3}, {0, kMul, 2}, {{1}}},         // operand 2 does not exist
      {{2, 3, 4}, {0, 2, 1}, {0, 3}, {1, kMul, 1}, {{1}}},         // range 1 does not exist
      {{2, 3, 4}, {0, 2, 1}, {0, 3}, {0, 9, 1}, {{1}}},            // unknown step
      {{2, 3, 4}, {0, 2, 1}, {0, 1, 3}, {1, kMul, 1}, {{3}}},      // [3] does not broadcast onto width 2
      {{2, 3, 4}, {0, 2, 1}, {0, 3}, {0, kMul, 1}, {{1, 1, 1, 1}}},  // operand of a higher rank
  };
  for (const Case& c : bad) {
    const Node node = MapNode(c);
    const std::vector<Value> inputs = Inputs(c, rng);
    EXPECT_FALSE(testing::RunOp(node, 1, inputs).ok()) << DimsToString(c.x_dims) << " " << DimsToString(c.bounds);
    EXPECT_FALSE(testing::RunKernel(cpu::TransposeColumnMapFloat, node, 1, inputs, 2).ok());
  }
}

}  // namespace
}  // namespace nee
