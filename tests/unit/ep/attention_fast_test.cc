// ai.nee ScaledDotProductAttention: the fast kernel (ep/cpu/attention_fast.cc)
// against the reference kernel (ops/attention_fused.cc), which sums each
// score in double. Random and awkward shapes (one head, one key, odd head
// sizes, S != L, Hv != H, batches) and every bias broadcast form, at 1 and 2
// threads; bitwise equal across 1, 2 and 3 threads; causal attention against
// the reference and bitwise against a masked full row; bad inputs are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep_test_util.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ops/attention_sdpa.h"
#include "ops/op_registry.h"

namespace nee {
namespace {

struct Case {
  int64_t B, S, L, N, H, Hv;
  std::vector<int64_t> bias;  // empty: no bias
};

std::string Describe(const Case& c) {
  return "B" + std::to_string(c.B) + " S" + std::to_string(c.S) + " L" + std::to_string(c.L) + " N" +
         std::to_string(c.N) + " H" + std::to_string(c.H) + " Hv" + std::to_string(c.Hv) + " bias " +
         DimsToString(c.bias);
}

Node SdpaNode(int64_t heads, bool bias, const std::vector<Attribute>& extra = {}) {
  std::vector<Attribute> attrs = {testing::IntAttr("num_heads", heads)};
  attrs.insert(attrs.end(), extra.begin(), extra.end());
  return testing::MakeNode("ScaledDotProductAttention", bias ? 4 : 3, 1, attrs, kNeeDomain);
}

std::vector<Value> Inputs(const Case& c, std::mt19937& rng) {
  std::vector<Value> in = {Value(testing::RandomTensor({c.B, c.S, c.N * c.H}, rng)),
                           Value(testing::RandomTensor({c.B, c.L, c.N * c.H}, rng)),
                           Value(testing::RandomTensor({c.B, c.L, c.N * c.Hv}, rng))};
  if (!c.bias.empty()) in.emplace_back(testing::RandomTensor(c.bias, rng));
  return in;
}

KernelFn Reference() {
  return OpRegistry::Global().Resolve(kNeeDomain, "ScaledDotProductAttention", 1).value()->kernel;
}

void ExpectClose(const Tensor& fast, const Tensor& ref, const std::string& what) {
  ASSERT_EQ(fast.dims(), ref.dims()) << what;
  const float* f = fast.data<float>();
  const float* r = ref.data<float>();
  for (int64_t i = 0; i < ref.num_elements(); ++i) EXPECT_NEAR(f[i], r[i], 1e-5f + 1e-5f * std::fabs(r[i])) << what << " at " << i;
}

TEST(FastAttention, AgreesWithTheReferenceOnRandomAndAwkwardShapes) {
  std::mt19937 rng(11);
  const Case cases[] = {
      {1, 128, 128, 12, 64, 64, {1, 1, 1, 128}},  // BERT-base, padding mask
      {1, 33, 33, 4, 16, 16, {1, 1, 33, 33}},     // causal-style full plane
      {2, 5, 7, 3, 4, 6, {}},                     // cross attention, Hv != H
      {1, 1, 1, 1, 1, 1, {}},                     // one of everything
      {3, 17, 9, 2, 13, 5, {3, 1, 1, 9}},         // per-batch mask, odd head sizes
      {2, 6, 10, 3, 8, 8, {2, 3, 6, 10}},         // full bias
      {2, 6, 10, 3, 8, 8, {3, 1, 10}},            // per-head, broadcast over queries
      {1, 9, 20, 2, 24, 24, {1}},                 // one value
      {1, 12, 12, 2, 8, 8, {12, 1}},              // per-query value
      {1, 197, 197, 3, 64, 64, {}},               // ViT's 197 tokens: ragged keys, 27 padding columns
      {1, 21, 21, 2, 20, 12, {}},                 // ragged keys and head (h8 < H) together
  };
  for (const Case& c : cases) {
    const std::vector<Value> in = Inputs(c, rng);
    const Node node = SdpaNode(c.N, !c.bias.empty());
    auto ref = testing::RunKernel(Reference(), node, 1, in, 1);
    ASSERT_TRUE(ref.ok()) << Describe(c) << ": " << ref.status().message();
    for (int threads : {1, 2}) {
      auto fast = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, threads);
      ASSERT_TRUE(fast.ok()) << Describe(c) << ": " << fast.status().message();
      ExpectClose(fast.value(), ref.value(), Describe(c) + " threads " + std::to_string(threads));
    }
  }
}

TEST(FastAttention, ExplicitScaleAndMaskedRowsAgree) {
  std::mt19937 rng(12);
  const Case c{2, 8, 8, 2, 16, 16, {1, 1, 8, 8}};
  std::vector<Value> in = Inputs(c, rng);
  // A causal mask of -FLT_MAX, as the fusion writes for GPT-2's Where.
  Tensor bias = Tensor::Allocate(DataType::kFloat, {1, 1, 8, 8}).value();
  for (int64_t s = 0; s < 8; ++s)
    for (int64_t l = 0; l < 8; ++l) bias.data<float>()[s * 8 + l] = l > s ? -3.4028234663852886e38f : 0.f;
  in[3] = Value(bias);
  const Node node = SdpaNode(c.N, true, {testing::FloatAttr("scale", 0.3f)});
  auto ref = testing::RunKernel(Reference(), node, 1, in, 1);
  auto fast = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, 2);
  ASSERT_TRUE(ref.ok() && fast.ok());
  ExpectClose(fast.value(), ref.value(), "causal");
  // The first query sees only the first key: its output is that key's value row.
  const float* v = in[2].tensor().data<float>();
  for (int64_t h = 0; h < c.N * c.Hv; ++h) EXPECT_NEAR(fast.value().data<float>()[h], v[h], 1e-6f);
}

TEST(FastAttention, BitwiseEqualAcrossThreadCounts) {
  std::mt19937 rng(13);
  const Case c{2, 40, 40, 6, 32, 32, {2, 1, 1, 40}};
  const std::vector<Value> in = Inputs(c, rng);
  const Node node = SdpaNode(c.N, true);
  auto one = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, 1);
  ASSERT_TRUE(one.ok());
  for (int threads : {2, 3}) {
    auto many = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, threads);
    ASSERT_TRUE(many.ok());
    EXPECT_EQ(0, std::memcmp(one.value().raw_data(), many.value().raw_data(), one.value().byte_size()))
        << threads << " threads";
  }
}

// A bias of the causal pattern (0 where key l <= s + L - S, `fill` elsewhere), [1, 1, S, L].
Tensor CausalMask(int64_t S, int64_t L, float fill) {
  Tensor bias = Tensor::Allocate(DataType::kFloat, {1, 1, S, L}).value();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t l = 0; l < L; ++l) bias.data<float>()[s * L + l] = l > s + L - S ? fill : 0.f;
  return bias;
}

// causal = 1 (the kernel skips the masked triangle in blocks of queries) on
// each SGEMM kernel the CPU has: against the reference, which skips the unseen
// keys itself, and bitwise against the same kernel reading the full rows under
// a -FLT_MAX (and -inf) mask, at 1, 2 and 3 threads. Shapes: GPT-2's head,
// fewer queries than keys, odd sizes, one query block and several with a
// ragged last one, a head wider than one SGEMM k-block (K^T not prepacked),
// with and without another bias.
class FastCausalAttention : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

TEST_P(FastCausalAttention, AgreesWithTheReferenceAndIsBitwiseTheMaskedRows) {
  std::mt19937 rng(15);
  const Case cases[] = {
      {1, 128, 128, 12, 64, 64, {}},        // GPT-2
      {2, 49, 49, 3, 16, 16, {}},           // three blocks, the last ragged
      {1, 7, 30, 2, 13, 5, {}},             // S < L: the keys before the queries are all seen
      {1, 1, 1, 1, 1, 1, {}},               // one of everything
      {2, 25, 25, 2, 8, 8, {2, 2, 25, 25}}, // another bias on the visible keys
      {1, 30, 33, 2, 24, 24, {1, 1, 1, 33}},
      {1, 26, 26, 1, 260, 7, {}},           // H > 256: K^T row-major, not prepacked
  };
  for (const Case& c : cases) {
    const std::vector<Value> in = Inputs(c, rng);
    const bool has_bias = !c.bias.empty();
    const Node causal = SdpaNode(c.N, has_bias, {testing::IntAttr("causal", 1)});
    auto ref = testing::RunKernel(Reference(), causal, 1, in, 1);
    ASSERT_TRUE(ref.ok()) << Describe(c) << ": " << ref.status().message();
    auto one = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, causal, 1, in, 1);
    ASSERT_TRUE(one.ok()) << Describe(c) << ": " << one.status().message();
    ExpectClose(one.value(), ref.value(), "causal " + Describe(c));
    for (float fill : {-3.4028234663852886e38f, -std::numeric_limits<float>::infinity()}) {
      // The same scores under a mask, as the unfused graph's Where gives them: the
      // causal mask plus the other bias where the query sees the key.
      std::vector<Value> masked = in;
      Tensor mask = CausalMask(c.S, c.L, fill);
      if (has_bias) {
        Tensor full = Tensor::Allocate(DataType::kFloat, {c.B, c.N, c.S, c.L}).value();
        const Tensor& extra = in[3].tensor();
        const std::vector<int64_t> d = extra.dims();  // {B or 1, N or 1, S or 1, L}
        for (int64_t b = 0; b < c.B; ++b)
          for (int64_t n = 0; n < c.N; ++n)
            for (int64_t s = 0; s < c.S; ++s)
              for (int64_t l = 0; l < c.L; ++l) {
                const int64_t e = ((b % d[0] * d[1] + n % d[1]) * d[2] + s % d[2]) * d[3] + l;
                full.data<float>()[((b * c.N + n) * c.S + s) * c.L + l] =
                    mask.data<float>()[s * c.L + l] + extra.data<float>()[e];
              }
        mask = full;
      }
      if (has_bias) masked[3] = Value(mask);
      else masked.emplace_back(mask);
      auto full = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, SdpaNode(c.N, true), 1, masked, 1);
      ASSERT_TRUE(full.ok()) << Describe(c);
      EXPECT_EQ(0, std::memcmp(one.value().raw_data(), full.value().raw_data(), one.value().byte_size()))
          << Describe(c) << " fill " << fill;
    }
    for (int threads : {2, 3}) {
      auto many = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, causal, 1, in, threads);
      ASSERT_TRUE(many.ok());
      EXPECT_EQ(0, std::memcmp(one.value().raw_data(), many.value().raw_data(), one.value().byte_size()))
          << Describe(c) << " threads " << threads;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, FastCausalAttention,
                         ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable));

// With an FMA SGEMM (AVX2 or AVX-512) the kernel runs its block path (blocks
// of 12 queries on its own 6x16 / 12x8 tiles reading the queries and
// probabilities where they lie); with portable SGEMM, or forced, the SGEMM
// path. The block path must give the SGEMM path's bits with either FMA
// kernel, at either ISA limit: shapes
// with 7 and 8 queries left after the blocks (4 + 3, 4 + 4 rows), Hv not a
// multiple of 16 (a last run of 4 or 8 columns), a last run of at most 8
// keys and keys within half a run, H > 256 and L > 256 (the products in
// SGEMM's k-blocks of 256), causal heads, every bias form; scores spread far
// enough that e^(x - max) underflows below -87 (queries scaled by 12); a
// mask of -inf, -FLT_MAX and -100, one row of it all -inf (a NaN row both
// ways). At 1, 2 and 3 threads, and against the reference.
class FastAttentionBlockPath : public ::testing::Test {
 protected:
  void TearDown() override {
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
    cpu::AttentionForceSgemmPath(false);
  }
};

TEST_F(FastAttentionBlockPath, IsBitwiseTheSgemmPath) {
  struct BlockCase {
    Case c;
    bool causal;
    float query_scale;
  };
  const BlockCase cases[] = {
      {{1, 197, 197, 2, 64, 64, {}}, false, 1.f},            // ViT: 16 blocks and 5 queries, 12 runs and 5 keys
      {{1, 128, 128, 2, 64, 64, {1, 1, 1, 128}}, false, 1.f},  // BERT: 10 blocks and 8 queries
      {{1, 128, 128, 2, 64, 64, {}}, true, 1.f},              // GPT-2
      {{2, 19, 19, 3, 16, 20, {2, 1, 1, 19}}, false, 1.f},    // 12 + 7 queries, Hv = 16 + 4
      {{1, 20, 23, 2, 8, 40, {1, 2, 20, 23}}, false, 12.f},   // 12 + 8 queries, Hv = 32 + 8, underflow
      {{1, 5, 5, 1, 3, 5, {}}, false, 12.f},                  // keys within half a run
      {{1, 1, 1, 1, 1, 1, {}}, true, 1.f},
      {{1, 13, 300, 2, 16, 16, {1, 1, 13, 300}}, false, 1.f},  // P V over two k-blocks
      {{1, 20, 20, 1, 300, 24, {}}, false, 1.f},              // scores over two k-blocks
      {{1, 26, 280, 1, 260, 7, {}}, true, 1.f},               // both, causal
      {{1, 30, 33, 2, 24, 24, {1, 1, 1, 33}}, true, 12.f},
      {{2, 40, 40, 3, 32, 32, {3, 1, 40}}, false, 1.f},
      {{1, 24, 24, 2, 16, 16, {1, 2, 24, 24}}, false, 1.f},   // the extreme mask below
  };
  std::mt19937 rng(18);
  for (const BlockCase& bc : cases) {
    const Case& c = bc.c;
    std::vector<Value> in = Inputs(c, rng);
    Tensor query = in[0].tensor();
    for (int64_t i = 0; i < query.num_elements(); ++i) query.data<float>()[i] *= bc.query_scale;
    in[0] = Value(query);
    const bool extreme = c.bias.size() == 4 && c.bias[2] == 24;
    if (extreme) {
      Tensor bias = in[3].tensor();
      float* m = bias.data<float>();
      const float fills[] = {-std::numeric_limits<float>::infinity(), -3.4028234663852886e38f, -100.f};
      for (int64_t i = 0; i < bias.num_elements(); ++i)
        if (rng() % 3 == 0) m[i] = fills[rng() % 3];
      for (int64_t l = 0; l < c.L; ++l) m[5 * c.L + l] = -std::numeric_limits<float>::infinity();
      in[3] = Value(bias);
    }
    const std::vector<Attribute> attrs = {testing::IntAttr("causal", bc.causal ? 1 : 0)};
    const Node node = SdpaNode(c.N, !c.bias.empty(), attrs);
    const std::string what = Describe(c) + (bc.causal ? " causal" : "") + " query x" + std::to_string(bc.query_scale);
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx2);
    cpu::AttentionForceSgemmPath(true);
    auto sgemm = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, 1);
    ASSERT_TRUE(sgemm.ok()) << what << ": " << sgemm.status().message();
    cpu::AttentionForceSgemmPath(false);
    for (int threads : {1, 2, 3}) {
      auto block = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, threads);
      ASSERT_TRUE(block.ok()) << what;
      EXPECT_EQ(0, std::memcmp(block.value().raw_data(), sgemm.value().raw_data(), sgemm.value().byte_size()))
          << what << " threads " << threads;
    }
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);  // the AVX-512 kernel where the CPU has it: the same bits
    cpu::AttentionForceSgemmPath(true);
    auto widest = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, 2);
    cpu::AttentionForceSgemmPath(false);
    ASSERT_TRUE(widest.ok()) << what;
    EXPECT_EQ(0, std::memcmp(widest.value().raw_data(), sgemm.value().raw_data(), sgemm.value().byte_size())) << what;
    auto block_widest = testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, 2);  // block path there
    ASSERT_TRUE(block_widest.ok()) << what;
    EXPECT_EQ(0, std::memcmp(block_widest.value().raw_data(), sgemm.value().raw_data(), sgemm.value().byte_size()))
        << what << " (block path at the widest ISA limit)";
    if (extreme) {  // the all -inf row is NaN, the others finite
      const float* y = sgemm.value().data<float>();
      for (int64_t n = 0; n < c.N; ++n)
        for (int64_t s = 0; s < c.S; ++s)
          for (int64_t h = 0; h < c.Hv; ++h)
            EXPECT_EQ(s == 5 && n == 0, std::isnan(y[s * c.N * c.Hv + n * c.Hv + h])) << what << " query " << s;
      continue;
    }
    auto ref = testing::RunKernel(Reference(), node, 1, in, 1);
    ASSERT_TRUE(ref.ok()) << what;
    ExpectClose(sgemm.value(), ref.value(), what);
  }
}

// Key and value absent: q, k and v read side by side from one [B, S, 3*N*H]
// tensor. Fast and reference kernels against themselves on the three
// separate tensors (bitwise: the same values, only read with another row
// stride), causal or not, with and without a bias, at 1 and 2 threads.
TEST(FastAttention, PackedQkvIsTheSeparateTensors) {
  std::mt19937 rng(17);
  const Case cases[] = {{1, 128, 128, 12, 64, 64, {}}, {2, 13, 13, 3, 8, 8, {2, 1, 1, 13}}, {1, 30, 30, 2, 5, 5, {}}};
  for (const Case& c : cases)
    for (int64_t causal : {0, 1}) {
      const int64_t D = c.N * c.H;
      const Tensor packed = testing::RandomTensor({c.B, c.S, 3 * D}, rng);
      std::vector<Value> separate;
      for (int64_t part = 0; part < 3; ++part) {
        Tensor t = Tensor::Allocate(DataType::kFloat, {c.B, c.S, D}).value();
        for (int64_t row = 0; row < c.B * c.S; ++row)
          std::memcpy(t.data<float>() + row * D, packed.data<float>() + row * 3 * D + part * D,
                      D * sizeof(float));
        separate.emplace_back(t);
      }
      std::vector<Value> one = {Value(packed), Value(), Value()};  // key and value omitted
      const bool has_bias = !c.bias.empty();
      if (has_bias) {
        separate.emplace_back(testing::RandomTensor(c.bias, rng));
        one.push_back(separate[3]);
      }
      const std::vector<Attribute> attrs = {testing::IntAttr("causal", causal)};
      const Node split_node = SdpaNode(c.N, has_bias, attrs);
      Node packed_node = split_node;
      packed_node.inputs[1] = packed_node.inputs[2] = "";
      const std::string what = Describe(c) + " causal " + std::to_string(causal);
      for (KernelFn kernel : {Reference(), KernelFn(cpu::ScaledDotProductAttentionFloat)})
        for (int threads : {1, 2}) {
          auto want = testing::RunKernel(kernel, split_node, 1, separate, threads);
          auto got = testing::RunKernelOmitting(kernel, packed_node, 1, one, threads);
          ASSERT_TRUE(want.ok() && got.ok()) << what << ": " << got.status().message();
          ASSERT_EQ(got.value().dims(), want.value().dims()) << what;
          EXPECT_EQ(0, std::memcmp(got.value().raw_data(), want.value().raw_data(), want.value().byte_size()))
              << what << " threads " << threads;
        }
    }
}

// The reference's causal attribute against its own full rows under a -inf mask.
TEST(FastCausalAttentionReference, SkipsWhatAnInfiniteMaskRemoves) {
  std::mt19937 rng(16);
  const Case c{2, 9, 12, 3, 8, 4, {}};
  std::vector<Value> in = Inputs(c, rng);
  auto causal = testing::RunKernel(Reference(), SdpaNode(c.N, false, {testing::IntAttr("causal", 1)}), 1, in, 1);
  in.emplace_back(CausalMask(c.S, c.L, -std::numeric_limits<float>::infinity()));
  auto masked = testing::RunKernel(Reference(), SdpaNode(c.N, true), 1, in, 1);
  ASSERT_TRUE(causal.ok() && masked.ok());
  ExpectClose(causal.value(), masked.value(), "reference causal");
}

TEST(FastAttention, BadInputsAreErrorsNotCrashes) {
  std::mt19937 rng(14);
  auto run = [&](const Node& node, const std::vector<Value>& in) {
    EXPECT_FALSE(testing::RunKernel(cpu::ScaledDotProductAttentionFloat, node, 1, in, 2).ok());
    EXPECT_FALSE(testing::RunKernel(Reference(), node, 1, in, 1).ok());
  };
  const Case c{1, 4, 4, 2, 4, 4, {1, 1, 3, 4}};  // bias rows 3 != S = 4
  run(SdpaNode(2, true), Inputs(c, rng));
  run(SdpaNode(3, false), Inputs({1, 4, 4, 2, 4, 4, {}}, rng));  // 8 columns, 3 heads
  run(SdpaNode(0, false), Inputs({1, 4, 4, 2, 4, 4, {}}, rng));  // no heads
  std::vector<Value> in = Inputs({1, 4, 4, 2, 4, 4, {}}, rng);
  in[1] = Value(testing::RandomTensor({1, 4, 6}, rng));  // key width != query width
  run(SdpaNode(2, false), in);
  in = Inputs({1, 4, 4, 2, 4, 4, {}}, rng);
  in[0] = Value(testing::RandomTensor({4, 8}, rng));  // 2-D query
  run(SdpaNode(2, false), in);
  in = Inputs({1, 4, 4, 2, 4, 4, {1, 1, 1, 1, 4}}, rng);  // bias of rank 5
  run(SdpaNode(2, true), in);
  run(SdpaNode(2, false, {testing::IntAttr("causal", 2)}), Inputs({1, 4, 4, 2, 4, 4, {}}, rng));
  run(SdpaNode(2, false, {testing::IntAttr("causal", 1)}), Inputs({1, 5, 4, 2, 4, 4, {}}, rng));  // S > L
  // Packed q | k | v of width 8, not a multiple of 3 * 2 heads; then only one of key and value given.
  for (const bool give_key : {false, true}) {
    Node packed = SdpaNode(2, false);
    packed.inputs[2] = "";
    if (!give_key) packed.inputs[1] = "";
    std::vector<Value> in = {Value(testing::RandomTensor({1, 4, give_key ? 24 : 8}, rng)),
                             give_key ? Value(testing::RandomTensor({1, 4, 24}, rng)) : Value(), Value()};
    EXPECT_FALSE(testing::RunKernelOmitting(cpu::ScaledDotProductAttentionFloat, packed, 1, in, 2).ok());
    EXPECT_FALSE(testing::RunKernelOmitting(Reference(), packed, 1, in, 1).ok());
  }
}

}  // namespace
}  // namespace nee

// ---- ai.nee FusedMatMul (ep/cpu/fused_matmul_fast.cc) ----
// Outside a session the kernel multiplies by B unpacked; B packed once per
// session is compared in tests/python/test_attention_fusion.py through sessions.
namespace nee {
namespace {

Node FusedMatMulNode(bool bias, const std::string& activation) {
  std::vector<Attribute> attrs;
  if (!activation.empty()) {
    Attribute a;
    a.name = "activation";
    a.type = AttrType::kString;
    a.s = activation;
    attrs.push_back(a);
  }
  return testing::MakeNode("FusedMatMul", bias ? 3 : 2, 1, attrs, kNeeDomain);
}

TEST(FastFusedMatMul, AgreesWithTheReference) {
  std::mt19937 rng(21);
  KernelFn ref = OpRegistry::Global().Resolve(kNeeDomain, "FusedMatMul", 1).value()->kernel;
  const std::vector<std::vector<int64_t>> a_dims = {{1, 1}, {7, 5}, {2, 13, 33}, {3, 1, 40, 17}};
  const int64_t widths[] = {1, 9, 64, 70};
  for (const auto& ad : a_dims)
    for (int64_t n : widths)
      for (const char* act : {"", "Gelu", "FastGelu"})
        for (bool bias : {false, true}) {
          std::vector<Value> in = {Value(testing::RandomTensor(ad, rng)), Value(testing::RandomTensor({ad.back(), n}, rng))};
          if (bias) in.emplace_back(testing::RandomTensor({n}, rng));
          const Node node = FusedMatMulNode(bias, act);
          const std::string what = DimsToString(ad) + " n " + std::to_string(n) + " " + act + (bias ? " bias" : "");
          auto want = testing::RunKernel(ref, node, 1, in, 1);
          ASSERT_TRUE(want.ok()) << what << ": " << want.status().message();
          for (int threads : {1, 2}) {
            auto got = testing::RunKernel(cpu::FusedMatMulFloat, node, 1, in, threads);
            ASSERT_TRUE(got.ok()) << what;
            ExpectClose(got.value(), want.value(), what + " threads " + std::to_string(threads));
          }
        }
}

TEST(FastFusedMatMul, BadInputsAreErrorsNotCrashes) {
  std::mt19937 rng(22);
  KernelFn ref = OpRegistry::Global().Resolve(kNeeDomain, "FusedMatMul", 1).value()->kernel;
  auto run = [&](const Node& node, const std::vector<Value>& in) {
    EXPECT_FALSE(testing::RunKernel(cpu::FusedMatMulFloat, node, 1, in, 2).ok());
    EXPECT_FALSE(testing::RunKernel(ref, node, 1, in, 1).ok());
  };
  run(FusedMatMulNode(false, ""), {Value(testing::RandomTensor({3, 4}, rng)), Value(testing::RandomTensor({5, 2}, rng))});
  run(FusedMatMulNode(false, ""), {Value(testing::RandomTensor({4}, rng)), Value(testing::RandomTensor({4, 2}, rng))});
  run(FusedMatMulNode(true, ""), {Value(testing::RandomTensor({3, 4}, rng)), Value(testing::RandomTensor({4, 2}, rng)),
                                  Value(testing::RandomTensor({3}, rng))});
  run(FusedMatMulNode(false, "Relu"), {Value(testing::RandomTensor({3, 4}, rng)), Value(testing::RandomTensor({4, 2}, rng))});
}

}  // namespace
}  // namespace nee
