// Concat, Split and Slice byte copies (ep/cpu/copy_fast.cc) against the
// reference kernels: bitwise equal outputs (every output of Split) on odd
// sizes, negative axes, empty parts, tiny and piece-spanning runs, several
// element types, 1 to 3 threads; the same errors where the reference fails.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep_test_util.h"

namespace nee {
namespace {

// Every output of `kernel` run directly with a pool of `threads` threads.
Result<std::vector<Value>> RunAll(KernelFn kernel, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                                  int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs;
}

void ExpectSameAsReference(KernelFn fast, const Node& node, int64_t opset, const std::vector<Value>& inputs,
                           const std::string& what) {
  auto schema = OpRegistry::Global().Resolve("", node.op_type, opset);
  ASSERT_TRUE(schema.ok()) << what;
  auto ref = RunAll(schema.value()->kernel, node, opset, inputs, 1);
  for (int threads : {1, 2, 3}) {
    auto got = RunAll(fast, node, opset, inputs, threads);
    ASSERT_EQ(got.ok(), ref.ok()) << what << ": " << (got.ok() ? ref.status() : got.status()).ToString();
    if (!ref.ok()) {
      EXPECT_EQ(got.status().code(), ref.status().code()) << what;
      continue;
    }
    ASSERT_EQ(got->size(), (*ref).size()) << what;
    for (size_t k = 0; k < got->size(); ++k) {
      const Tensor& r = (*ref)[k].tensor();
      const Tensor& f = (*got)[k].tensor();
      ASSERT_EQ(f.dims(), r.dims()) << what << " output " << k;
      ASSERT_EQ(f.dtype(), r.dtype()) << what << " output " << k;
      if (r.dtype() == DataType::kString) {
        for (int64_t i = 0; i < r.num_elements(); ++i)
          EXPECT_EQ(f.data<std::string>()[i], r.data<std::string>()[i]) << what;
        continue;
      }
      EXPECT_EQ(std::memcmp(f.raw_data(), r.raw_data(), r.byte_size()), 0)
          << what << " output " << k << " threads " << threads;
    }
  }
}

// A tensor of `dims` and `type` whose bytes are random.
Tensor RandomBytes(DataType type, const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = Tensor::Allocate(type, dims).value();
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.byte_size(); ++i) p[i] = static_cast<uint8_t>(rng());
  return t;
}

Value Ints(const std::vector<int64_t>& v) { return Value(Tensor::FromVector(v, {static_cast<int64_t>(v.size())})); }

TEST(FastConcat, BitwiseEqualToTheReference) {
  std::mt19937 rng(5);
  struct Case {
    std::vector<std::vector<int64_t>> shapes;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{{1, 16, 20, 20}, {1, 16, 20, 20}}, 1},                    // channel concat
      {{{1, 3, 8, 8, 2}, {1, 3, 8, 8, 2}, {1, 3, 8, 8, 81}}, -1},  // detector head: tiny runs
      {{{2, 300, 70}, {2, 1, 70}, {2, 299, 70}}, 1},              // runs crossing task pieces
      {{{3, 5}, {4, 5}}, 0},
      {{{3, 0}, {3, 7}, {3, 0}, {3, 1}}, -1},                     // empty parts
      {{{0, 4}, {0, 4}}, 1},                                      // empty output
      {{{7}}, 0},                                                 // one input
      {{{5, 3, 1}, {5, 3, 2}}, 2},
      {{{2, 3}, {2, 4}}, 0},                                      // mismatch: the reference's error
      {{{2, 3}, {2, 3}}, 2},                                      // axis out of range
  };
  for (DataType type : {DataType::kFloat, DataType::kInt64, DataType::kUint8, DataType::kFloat16, DataType::kBool}) {
    for (const Case& c : cases) {
      std::vector<Value> inputs;
      for (const auto& s : c.shapes) inputs.emplace_back(RandomBytes(type, s, rng));
      Node node = testing::MakeNode("Concat", inputs.size(), 1, {testing::IntAttr("axis", c.axis)});
      ExpectSameAsReference(cpu::ConcatFast, node, 13, inputs,
                            std::string(DataTypeName(type)) + " axis " + std::to_string(c.axis) + " first " +
                                DimsToString(c.shapes[0]));
    }
  }
  // Strings and mixed types go to the reference.
  Tensor s = Tensor::FromVector<std::string>({"a", "bc"}, {2});
  ExpectSameAsReference(cpu::ConcatFast, testing::MakeNode("Concat", 2, 1, {testing::IntAttr("axis", 0)}), 13,
                        {Value(s), Value(s)}, "strings");
  ExpectSameAsReference(cpu::ConcatFast, testing::MakeNode("Concat", 2, 1, {testing::IntAttr("axis", 0)}), 13,
                        {Value(RandomBytes(DataType::kFloat, {2}, rng)), Value(RandomBytes(DataType::kInt32, {2}, rng))},
                        "mixed types");
}

TEST(FastSplit, BitwiseEqualToTheReference) {
  std::mt19937 rng(6);
  Tensor x = RandomBytes(DataType::kFloat, {2, 9, 5, 7}, rng);
  Tensor big = RandomBytes(DataType::kFloat, {1, 3, 40, 40, 85}, rng);
  auto split13 = [&](const Tensor& in, int64_t axis, const std::vector<int64_t>& sizes, const std::string& what) {
    Node node = testing::MakeNode("Split", 2, sizes.size(), {testing::IntAttr("axis", axis)});
    ExpectSameAsReference(cpu::SplitFast, node, 13, {Value(in), Ints(sizes)}, what);
  };
  split13(x, 1, {2, 0, 7}, "split input, empty part");
  split13(x, -1, {1, 1, 5}, "negative axis");
  split13(x, 0, {1, 1}, "outer axis");
  split13(big, -1, {2, 2, 81}, "detector head");
  split13(x, 1, {2, 8}, "sizes do not add up: the reference's error");
  split13(x, 1, {-1, 10}, "negative size");
  // No split: equal parts (opset 13), or the reference's error when uneven.
  ExpectSameAsReference(cpu::SplitFast, testing::MakeNode("Split", 1, 3, {testing::IntAttr("axis", 1)}), 13,
                        {Value(x)}, "equal parts");
  ExpectSameAsReference(cpu::SplitFast, testing::MakeNode("Split", 1, 2, {testing::IntAttr("axis", 1)}), 13,
                        {Value(x)}, "uneven without sizes");
  // The split attribute (opset 11) and num_outputs (opset 18, uneven last part).
  ExpectSameAsReference(cpu::SplitFast,
                        testing::MakeNode("Split", 1, 2, {testing::IntAttr("axis", 2), testing::IntsAttr("split", {4, 1})}),
                        11, {Value(x)}, "attribute");
  ExpectSameAsReference(
      cpu::SplitFast, testing::MakeNode("Split", 1, 2, {testing::IntAttr("axis", 3), testing::IntAttr("num_outputs", 2)}),
      18, {Value(x)}, "num_outputs");
  Tensor bytes = RandomBytes(DataType::kInt8, {3, 11}, rng);
  split13(bytes, 1, {3, 3, 5}, "int8");
}

TEST(FastSlice, BitwiseEqualToTheReference) {
  std::mt19937 rng(7);
  struct Case {
    std::vector<int64_t> dims, starts, ends, axes, steps;
  };
  const std::vector<Case> cases = {
      {{1, 3, 8, 8, 85}, {0}, {2}, {4}, {1}},         // detector head boxes: runs of 2
      {{1, 3, 8, 8, 85}, {4}, {85}, {-1}, {1}},        // the rest
      {{1, 3, 8, 8, 85}, {4}, {INT64_MAX}, {4}, {}},   // open end, default step
      {{6, 7, 9}, {1, 2}, {5, -1}, {0, 2}, {1, 1}},    // two axes, negative end
      {{6, 7, 9}, {1}, {6}, {1}, {2}},                 // step on an outer axis
      {{6, 7, 9}, {-1}, {-100}, {2}, {-1}},            // reversed innermost: reference
      {{6, 7, 9}, {5}, {0}, {0}, {-2}},                // reversed outer axis
      {{6, 7, 9}, {3}, {3}, {1}, {1}},                 // empty
      {{6, 7, 9}, {0, 0, 0}, {6, 7, 9}, {0, 1, 2}, {}},  // everything: one run
      {{6, 1, 9}, {0}, {1}, {1}, {1}},                 // size-1 dims
      {{5}, {2}, {3}, {0}, {1}},                       // one element
      {{4, 4}, {0}, {2}, {3}, {1}},                    // bad axis: the reference's error
      {{4, 4}, {0}, {2}, {0}, {0}},                    // zero step: the reference's error
  };
  for (DataType type : {DataType::kFloat, DataType::kInt8, DataType::kDouble}) {
    for (const Case& c : cases) {
      std::vector<Value> inputs = {Value(RandomBytes(type, c.dims, rng)), Ints(c.starts), Ints(c.ends), Ints(c.axes)};
      if (!c.steps.empty()) inputs.push_back(Ints(c.steps));
      Node node = testing::MakeNode("Slice", inputs.size(), 1);
      ExpectSameAsReference(cpu::SliceFast, node, 13, inputs,
                            std::string(DataTypeName(type)) + " " + DimsToString(c.dims) + " starts " +
                                DimsToString(c.starts) + " axes " + DimsToString(c.axes));
    }
  }
  // Opset 1: attributes.
  Node old = testing::MakeNode("Slice", 1, 1,
                               {testing::IntsAttr("starts", {1}), testing::IntsAttr("ends", {3}), testing::IntsAttr("axes", {1})});
  ExpectSameAsReference(cpu::SliceFast, old, 1, {Value(RandomBytes(DataType::kFloat, {3, 5}, rng))}, "opset 1");
  Tensor s = Tensor::FromVector<std::string>({"a", "bc", "d"}, {3});
  ExpectSameAsReference(cpu::SliceFast, testing::MakeNode("Slice", 3, 1), 13, {Value(s), Ints({1}), Ints({3})}, "strings");
}

}  // namespace
}  // namespace nee
