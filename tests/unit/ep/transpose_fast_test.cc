// Transpose of 4-, 2- and 1-byte types (ep/cpu/transpose_fast.cc) against the reference
// kernel: bitwise equal over the permutations transformers and CNNs use,
// awkward sizes (tile edges, size-1 dims, empty), 1 to 3 threads; and the
// cases that go to the reference.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"

namespace nee {
namespace {

void ExpectSameAsReference(const Tensor& x, const std::vector<int64_t>& perm, bool with_perm = true) {
  Node node = testing::MakeNode("Transpose", 1, 1, with_perm ? std::vector<Attribute>{testing::IntsAttr("perm", perm)}
                                                               : std::vector<Attribute>{});
  const std::string what = DimsToString(x.dims()) + " perm " + DimsToString(perm);
  auto ref = testing::RunOp(node, 13, {Value(x)});
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  const Tensor& r = ref->outputs[0].tensor();
  for (int threads : {1, 2, 3}) {
    auto fast = testing::RunKernel(cpu::TransposeFast, node, 13, {Value(x)}, threads);
    ASSERT_TRUE(fast.ok()) << what << ": " << fast.status().ToString();
    ASSERT_EQ(fast->dims(), r.dims()) << what;
    ASSERT_EQ(fast->dtype(), r.dtype()) << what;
    EXPECT_EQ(std::memcmp(fast->raw_data(), r.raw_data(), r.byte_size()), 0) << what << " threads " << threads;
  }
}

TEST(FastTranspose, BitwiseEqualToTheReference) {
  std::mt19937 rng(11);
  struct Case {
    std::vector<int64_t> dims, perm;
  };
  const std::vector<Case> cases = {
      {{2, 9, 3, 5}, {0, 2, 1, 3}},     // [B,S,H,D] -> [B,H,S,D]
      {{1, 128, 12, 64}, {0, 2, 1, 3}},  // BERT shape
      {{1, 12, 128, 64}, {0, 1, 3, 2}},  // last-two swap
      {{2, 3, 17, 13}, {0, 1, 3, 2}},    // tile edges
      {{2, 3, 8, 16}, {0, 1, 3, 2}},     // whole tiles
      {{1, 5, 7, 9}, {0, 2, 3, 1}},      // NCHW -> NHWC
      {{1, 7, 9, 5}, {0, 3, 1, 2}},      // NHWC -> NCHW
      {{33, 70}, {1, 0}},                // 2-D
      {{1, 1, 7}, {2, 1, 0}},            // only size-1 dims move: a copy
      {{4, 1, 6}, {2, 1, 0}},            // 2-D after dropping the 1
      {{3, 4, 5}, {0, 1, 2}},            // identity
      {{2, 3, 4, 5}, {3, 1, 2, 0}},      // general: reference
      {{2, 0, 3}, {0, 2, 1}},            // empty
      {{}, {}},                          // scalar
      {{300, 3, 60}, {1, 0, 2}},         // many rows, several tasks
      {{2, 19, 700}, {0, 2, 1}},         // bands narrowed to spread over the threads, ragged last band
      {{1, 3, 85, 9, 31}, {0, 1, 3, 4, 2}},  // detector head: the 85 channels move innermost
      {{37, 600}, {1, 0}},               // 2-D, wider than one band
  };
  for (const Case& c : cases) {
    ExpectSameAsReference(testing::RandomTensor(c.dims, rng), c.perm);
    // The same permutations on bytes (8-bit quantized tensors) and on float16 (two bytes).
    ExpectSameAsReference(testing::Random8(DataType::kUint8, c.dims, rng), c.perm);
    const Tensor f = testing::RandomTensor(c.dims, rng);
    std::vector<uint16_t> halves(static_cast<size_t>(f.num_elements()));
    for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(rng());
    Tensor h = Tensor::Allocate(DataType::kFloat16, c.dims).value();
    if (!halves.empty()) std::memcpy(h.raw_data(), halves.data(), halves.size() * 2);
    ExpectSameAsReference(h, c.perm);
  }
  ExpectSameAsReference(testing::RandomTensor({5, 6, 7}, rng), {2, 1, 0}, false);  // default: reversed
  std::vector<int32_t> ints(6 * 10);
  std::iota(ints.begin(), ints.end(), -20);
  ExpectSameAsReference(Tensor::FromVector(ints, {6, 10}), {1, 0});
  ExpectSameAsReference(Tensor::FromVector<double>({1, 2, 3, 4, 5, 6}, {2, 3}), {1, 0});  // 8-byte: reference
}

TEST(FastTranspose, BadPermFailsAsTheReferenceDoes) {
  Node node = testing::MakeNode("Transpose", 1, 1, {testing::IntsAttr("perm", {0, 0})});
  auto r = testing::RunKernel(cpu::TransposeFast, node, 13, {Value(Tensor::FromVector<float>({1, 2}, {1, 2}))}, 1);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace nee
