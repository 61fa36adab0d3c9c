// com.microsoft MatMulIntegerToFloat (and DequantizeLinear's per-tensor fast path): the fast kernel (ep/cpu/quant_fast.cc, the integer GEMM
// with its float epilogue) against the reference kernel (ops/quant_matmul.cc), bitwise, on the
// AVX2 and the portable GEMM, at one and two threads; the reference against the chain it stands
// for (MatMulInteger, Cast, Mul, Add run by their own reference kernels); bad inputs reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <array>
#include <limits>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

Tensor RandomFloat(const std::vector<int64_t>& dims, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(testing::ElementCount(dims)));
  for (auto& e : v) e = dist(rng);
  return Tensor::FromVector(v, dims);
}

Result<Tensor> RunFast(const Node& node, const std::vector<Value>& inputs, int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.is_tensor() ? &v : nullptr);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, 1, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(cpu::MatMulIntegerToFloatFast(ctx));
  return outputs[0].tensor();
}

void ExpectBitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  ASSERT_EQ(0, std::memcmp(got.raw_data(), want.raw_data(), got.byte_size())) << what;
}

Node MsNode(const std::string& op, size_t inputs, size_t outputs) {
  Node n = testing::MakeNode(op, inputs, outputs);
  n.domain = "com.microsoft";
  return n;
}

struct Case {
  std::vector<int64_t> a_dims;
  int64_t n;
  DataType at = DataType::kUint8, bt = DataType::kInt8;
  bool a_zp = true;
  int b_zp = 1;      // 0: none, 1: one, 2: per column
  bool b_scale_per_column = false;
  bool bias = true;
  bool small_b = false;  // int8 B mostly in [-60, 60] with a few +-127: the u8 x s8 kernel, with remainders
};

// int8 weights as quantized layers have them: small, a few at the extremes (pairs that need a remainder).
Tensor SmallWeights(const std::vector<int64_t>& dims, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-60, 60), pick(0, 999);
  std::vector<int8_t> v(static_cast<size_t>(testing::ElementCount(dims)));
  for (auto& e : v) e = static_cast<int8_t>(pick(rng) == 0 ? (dist(rng) < 0 ? -127 : 127) : dist(rng));
  return Tensor::FromVector(v, dims);
}

// The inputs of one case: A, B, a_scale, b_scale, a_zp?, b_zp?, bias? ("" slots empty values).
std::vector<Value> MakeInputs(const Case& c, std::mt19937& rng) {
  const int64_t k = c.a_dims.back();
  std::vector<Value> in = {Value(testing::Random8(c.at, c.a_dims, rng)),
                           Value(c.small_b ? SmallWeights({k, c.n}, rng) : testing::Random8(c.bt, {k, c.n}, rng)),
                           Value(RandomFloat({}, 0.001f, 0.05f, rng)),
                           Value(RandomFloat(c.b_scale_per_column ? std::vector<int64_t>{c.n} : std::vector<int64_t>{},
                                             0.001f, 0.05f, rng))};
  in.push_back(c.a_zp ? Value(testing::Random8(c.at, {}, rng)) : Value());
  if (c.b_zp == 0) in.push_back(Value());
  else in.push_back(Value(testing::Random8(c.bt, c.b_zp == 2 ? std::vector<int64_t>{c.n} : std::vector<int64_t>{}, rng)));
  if (c.bias) in.push_back(Value(RandomFloat({c.n}, -2.f, 2.f, rng)));
  while (!in.empty() && !in.back().is_tensor()) in.pop_back();
  return in;
}

class QuantMatMulFastTest : public ::testing::TestWithParam<cpu::SgemmIsa> {
 protected:
  void SetUp() override { cpu::SgemmLimitIsa(GetParam()); }
  void TearDown() override { cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512); }
};

TEST_P(QuantMatMulFastTest, MatchesReferenceBitwise) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<Case> cases = {
      {{128, 768}, 768},                              // a BERT projection
      {{1, 17}, 33},                                  // m = 1, odd k, n past a panel
      {{17}, 5, u8, s8, true, 2, true, false},        // 1-D A, per-column zero points and scales
      {{7, 31}, 16, s8, u8, false, 0, false, true},   // int8 A, uint8 B, no zero points
      {{2, 3, 13}, 40, u8, u8, true, 2, false, true}, // batched A, n not a multiple of 16
      {{6, 1}, 19, u8, s8, true, 1, true, false},     // k = 1
      {{13, 64}, 15, s8, s8, true, 1, false, false},
      {{0, 8}, 4},                                    // no rows
      {{3, 8}, 0, u8, s8, true, 1, false, false},     // no columns
      {{4, 0}, 3},                                    // k = 0: sums are 0, the reference's
      // The u8 x s8 kernel (uint8 A, int8 B with few overflowing pairs), remainders included.
      {{128, 768}, 768, u8, s8, true, 1, false, true, true},
      {{13, 67}, 35, u8, s8, true, 2, true, true, true},
      {{1, 5}, 17, u8, s8, false, 0, false, false, true},
      {{2, 7, 30}, 16, u8, s8, true, 2, true, true, true},
  };
  std::mt19937 rng(31);
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<Value> inputs = MakeInputs(cases[i], rng);
    Node node = MsNode("MatMulIntegerToFloat", inputs.size(), 1);
    auto ref = testing::RunOp(node, 1, inputs);
    ASSERT_TRUE(ref.ok()) << "case " << i << ": " << ref.status().ToString();
    for (int threads : {1, 2}) {
      auto got = RunFast(node, inputs, threads);
      ASSERT_TRUE(got.ok()) << "case " << i << ": " << got.status().ToString();
      ExpectBitwise(got.value(), ref->outputs[0].tensor(), "case " + std::to_string(i) + " threads " +
                                                               std::to_string(threads));
    }
  }
}

// The reference is the chain MatMulInteger -> Cast -> Mul(a_scale * b_scale) -> Add(bias), each
// run by its own reference kernel: bitwise the same, the rewrite's promise.
TEST_P(QuantMatMulFastTest, ReferenceEqualsTheUnfusedChain) {
  std::mt19937 rng(32);
  for (const Case& c : {Case{{9, 70}, 21, DataType::kUint8, DataType::kInt8, true, 2, true, true},
                        Case{{2, 5, 33}, 18}}) {
    std::vector<Value> in = MakeInputs(c, rng);
    auto fused = testing::RunOp(MsNode("MatMulIntegerToFloat", in.size(), 1), 1, in);
    ASSERT_TRUE(fused.ok()) << fused.status().ToString();
    auto mm = testing::RunOp(testing::MakeNode("MatMulInteger", 4, 1), 10, {in[0], in[1], in[4], in[5]});
    ASSERT_TRUE(mm.ok()) << mm.status().ToString();
    Node cast = testing::MakeNode("Cast", 1, 1);
    cast.attributes.push_back(testing::IntAttr("to", static_cast<int64_t>(DataType::kFloat)));
    auto cf = testing::RunOp(cast, 13, {mm->outputs[0]});
    ASSERT_TRUE(cf.ok()) << cf.status().ToString();
    auto scale = testing::RunOp(testing::MakeNode("Mul", 2, 1), 14, {in[2], in[3]});
    ASSERT_TRUE(scale.ok()) << scale.status().ToString();
    auto y = testing::RunOp(testing::MakeNode("Mul", 2, 1), 14, {cf->outputs[0], scale->outputs[0]});
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    auto yb = testing::RunOp(testing::MakeNode("Add", 2, 1), 14, {in[6], y->outputs[0]});
    ASSERT_TRUE(yb.ok()) << yb.status().ToString();
    ExpectBitwise(fused->outputs[0].tensor(), yb->outputs[0].tensor(), "chain");
  }
}

// Inputs the fast kernel does not take go to the reference, which reports them.
TEST_P(QuantMatMulFastTest, BadInputsAreReported) {
  std::mt19937 rng(33);
  Case c{{4, 8}, 5};
  auto expect_error = [&](std::vector<Value> in, const std::string& what) {
    Node node = MsNode("MatMulIntegerToFloat", in.size(), 1);
    auto got = RunFast(node, in, 2);
    EXPECT_FALSE(got.ok()) << what;
  };
  std::vector<Value> in = MakeInputs(c, rng);
  in[1] = Value(testing::Random8(DataType::kInt8, {7, 5}, rng));  // K mismatch
  expect_error(in, "k mismatch");
  in = MakeInputs(c, rng);
  in[3] = Value(RandomFloat({4}, 0.1f, 0.2f, rng));  // b_scale neither 1 nor n
  expect_error(in, "b_scale size");
  in = MakeInputs(c, rng);
  in[4] = Value(testing::Random8(DataType::kUint8, {4}, rng));  // per-row a_zero_point
  expect_error(in, "a_zero_point per row");
  in = MakeInputs(c, rng);
  in[6] = Value(RandomFloat({6}, -1.f, 1.f, rng));  // bias of the wrong length
  expect_error(in, "bias size");
  in = MakeInputs(c, rng);
  in[1] = Value(testing::Random8(DataType::kInt8, {2, 8, 5}, rng));  // batched B
  expect_error(in, "batched B");
}

// The u8 x s8 GEMM against plain sums: full-range int8 B (so many pairs take the remainder path,
// IgemmPackBS8 told to accept them all), per-row and per-column zero points, the panel edges.
TEST_P(QuantMatMulFastTest, IgemmU8S8MatchesPlainSums) {
  std::mt19937 rng(36);
  // m: the 6- and 8-row panels' edges; n: one or two 16-column panels per VNNI tile, ragged or whole.
  for (int64_t m : {1, 5, 6, 7, 8, 9, 13, 17}) {
    for (int64_t n : {1, 15, 16, 17, 32, 33, 40, 48}) {
      for (int64_t k : {1, 2, 3, 5, 31, 64}) {
        Tensor a = testing::Random8(DataType::kUint8, {m, k}, rng);
        Tensor b = testing::Random8(DataType::kInt8, {k, n}, rng);
        std::vector<int32_t> za(static_cast<size_t>(m)), zb(static_cast<size_t>(n));
        for (auto& z : za) z = static_cast<int32_t>(rng() % 256);
        for (auto& z : zb) z = static_cast<int32_t>(rng() % 256) - 128;
        cpu::IgemmPackedAU8 pa;
        cpu::IgemmPackAU8(m, k, static_cast<const uint8_t*>(a.raw_data()), k, &pa);
        cpu::IgemmPackedBS8 pb;
        ASSERT_TRUE(cpu::IgemmPackBS8(k, n, static_cast<const int8_t*>(b.raw_data()), n, 1.0, &pb));
        std::vector<int32_t> c(static_cast<size_t>(m * n));
        cpu::IgemmU8S8(nullptr, pa, pb, za.data(), 1, zb.data(), 1, c.data(), n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            int64_t want = 0;
            for (int64_t p = 0; p < k; ++p)
              want += (a.data<uint8_t>()[i * k + p] - za[static_cast<size_t>(i)]) *
                      (b.data<int8_t>()[p * n + j] - zb[static_cast<size_t>(j)]);
            ASSERT_EQ(c[static_cast<size_t>(i * n + j)], static_cast<int32_t>(want))
                << m << "x" << n << "x" << k << " at " << i << "," << j;
          }
      }
    }
  }
  // Too many remainders for the given share: declined, except for the VNNI kernel, which packs B as it is.
  Tensor b = testing::Random8(DataType::kInt8, {64, 64}, rng);
  cpu::IgemmPackedBS8 pb;
  const bool packed = cpu::IgemmPackBS8(64, 64, static_cast<const int8_t*>(b.raw_data()), 64, 0.002, &pb);
  if (std::string(cpu::IgemmU8S8KernelName()) == "vnni") {
    EXPECT_TRUE(packed);
    EXPECT_TRUE(pb.exact);
    EXPECT_TRUE(pb.remainders.empty());
  } else {
    EXPECT_FALSE(packed);
  }
}

// Plain sums of (A - za[i]) (B - zb[j]) for the u8 x s8 tests, as int32 (the reference's wrap).
std::vector<int32_t> PlainSumsU8S8(const Tensor& a, const Tensor& b, int64_t m, int64_t k, int64_t n,
                                   const std::vector<int32_t>& za, const std::vector<int32_t>& zb) {
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < k; ++p)
        want += (a.data<uint8_t>()[i * k + p] - za[static_cast<size_t>(i)]) *
                (b.data<int8_t>()[p * n + j] - zb[static_cast<size_t>(j)]);
      c[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(want);
    }
  return c;
}

// A session packs its weights once, with the kernel of that moment; tests may lower the ISA
// afterwards. B packed for VNNI (exact, unclamped: full-range weights) and read by the AVX2 or
// portable kernel, and B packed clamped with remainders read under the dispatched kernel: the
// right sums either way.
TEST_P(QuantMatMulFastTest, IgemmU8S8PackedUnderAnotherIsa) {
  std::mt19937 rng(39);
  const int64_t m = 19, k = 70, n = 37;
  Tensor a = testing::Random8(DataType::kUint8, {m, k}, rng);
  Tensor b = testing::Random8(DataType::kInt8, {k, n}, rng);  // full range: many pairs saturate vpmaddubsw
  std::vector<int32_t> za(static_cast<size_t>(m)), zb(static_cast<size_t>(n));
  for (auto& z : za) z = static_cast<int32_t>(rng() % 256);
  for (auto& z : zb) z = static_cast<int32_t>(rng() % 256) - 128;
  const std::vector<int32_t> want = PlainSumsU8S8(a, b, m, k, n, za, zb);
  for (cpu::SgemmIsa pack_isa : {cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable}) {
    cpu::SgemmLimitIsa(pack_isa);
    cpu::IgemmPackedBS8 pb;
    ASSERT_TRUE(cpu::IgemmPackBS8(k, n, static_cast<const int8_t*>(b.raw_data()), n, 1.0, &pb));
    cpu::SgemmLimitIsa(GetParam());  // the kernel that runs
    cpu::IgemmPackedAU8 pa;
    cpu::IgemmPackAU8(m, k, static_cast<const uint8_t*>(a.raw_data()), k, &pa);
    std::vector<int32_t> c(static_cast<size_t>(m * n));
    cpu::IgemmU8S8(nullptr, pa, pb, za.data(), 1, zb.data(), 1, c.data(), n);
    ASSERT_EQ(c, want) << "packed under ISA " << static_cast<int>(pack_isa) << (pb.exact ? " (exact)" : "");
  }
}

// The u8 x s8 GEMM with its float epilogue at 1, 2 and 3 threads: bitwise the same, and the
// float steps of Cast, Mul and Add on the plain sums (column blocks or, for the small last case, row panels split
// unevenly among the threads, ragged edges in both).
TEST_P(QuantMatMulFastTest, IgemmU8S8ThreadsBitwise) {
  std::mt19937 rng(40);
  for (auto [m, k, n] : {std::array<int64_t, 3>{37, 130, 150}, {200, 67, 33}, {8, 768, 96}, {20, 20, 40}}) {
    Tensor a = testing::Random8(DataType::kUint8, {m, k}, rng);
    Tensor b = testing::Random8(DataType::kInt8, {k, n}, rng);
    std::vector<int32_t> za(static_cast<size_t>(m), static_cast<int32_t>(rng() % 256)), zb(static_cast<size_t>(n));
    for (auto& z : zb) z = static_cast<int32_t>(rng() % 256) - 128;
    std::vector<float> scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      scale[static_cast<size_t>(j)] = 1e-4f * static_cast<float>(j + 1) / 3.0f;
      bias[static_cast<size_t>(j)] = 0.7f - 0.013f * static_cast<float>(j);
    }
    const std::vector<int32_t> sums = PlainSumsU8S8(a, b, m, k, n, za, zb);
    std::vector<float> want(static_cast<size_t>(m * n));
    for (size_t e = 0; e < want.size(); ++e) {
      volatile float v = static_cast<float>(sums[e]);
      volatile float prod = v * scale[e % static_cast<size_t>(n)];
      want[e] = prod + bias[e % static_cast<size_t>(n)];
    }
    cpu::IgemmPackedBS8 pb;
    ASSERT_TRUE(cpu::IgemmPackBS8(k, n, static_cast<const int8_t*>(b.raw_data()), n, 1.0, &pb));
    for (int threads : {1, 2, 3}) {
      cpu::IgemmPackedAU8 pa;
      cpu::IgemmPackAU8(m, k, static_cast<const uint8_t*>(a.raw_data()), k, &pa);
      std::vector<float> out(static_cast<size_t>(m * n), -1.0f);
      cpu::IgemmFloatOut fo{out.data(), n, scale.data(), 1, bias.data()};  // per-column scale and bias
      testing::WithPoolContext(threads, [&](KernelContext& ctx) {
        cpu::IgemmU8S8(&ctx, pa, pb, za.data(), 1, zb.data(), 1, nullptr, 0, &fo);
      });
      ASSERT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float)))
          << m << "x" << k << "x" << n << " at " << threads << " threads";
    }
  }
}

// MatMulInteger through the u8 x s8 kernel (small weights) against the reference.
TEST_P(QuantMatMulFastTest, MatMulIntegerU8S8MatchesReference) {
  std::mt19937 rng(37);
  for (auto [m, k, n] : {std::array<int64_t, 3>{128, 768, 64}, {7, 33, 19}, {1, 4, 16}}) {
    std::vector<Value> in = {Value(testing::Random8(DataType::kUint8, {m, k}, rng)), Value(SmallWeights({k, n}, rng)),
                             Value(testing::Random8(DataType::kUint8, {m}, rng)), Value(testing::Random8(DataType::kInt8, {n}, rng))};
    Node node = testing::MakeNode("MatMulInteger", 4, 1);
    auto ref = testing::RunOp(node, 10, in);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (int threads : {1, 2}) {
      std::vector<const Value*> ptrs;
      for (const Value& v : in) ptrs.push_back(&v);
      std::vector<Value> outputs(1);
      ThreadPool pool(threads);
      KernelContext ctx(node, 10, ptrs, &outputs, nullptr, &pool, nullptr);
      ASSERT_TRUE(cpu::MatMulIntegerFast(ctx).ok());
      ExpectBitwise(outputs[0].tensor(), ref->outputs[0].tensor(), "u8s8 matmul");
    }
  }
}

// Widened B (IgemmPackedB) and the float epilogue against plain sums, around the panel edges.
TEST_P(QuantMatMulFastTest, IgemmFloatEpilogueMatchesPlainSums) {
  std::mt19937 rng(34);
  for (int64_t m : {1, 6, 7, 13}) {
    for (int64_t n : {1, 16, 17, 40}) {
      for (int64_t k : {1, 3, 64}) {
        Tensor a = testing::Random8(DataType::kUint8, {m, k}, rng);
        Tensor b = testing::Random8(DataType::kInt8, {k, n}, rng);
        const int32_t za = static_cast<int32_t>(rng() % 256);
        std::vector<int32_t> zb(static_cast<size_t>(n));
        for (auto& z : zb) z = static_cast<int32_t>(rng() % 256) - 128;
        std::vector<float> scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) {
          scale[static_cast<size_t>(j)] = 0.01f + 0.001f * static_cast<float>(j);
          bias[static_cast<size_t>(j)] = 0.5f - 0.03f * static_cast<float>(j);
        }
        cpu::IgemmPackedA pa;
        cpu::IgemmPackA(m, k, a.raw_data(), k, false, &za, 0, &pa);
        cpu::IgemmPackedB pb(k, n, static_cast<const uint8_t*>(b.raw_data()), n, true);
        std::vector<float> out(static_cast<size_t>(m * n));
        cpu::IgemmFloatOut fo{out.data(), n, scale.data(), 1, bias.data()};  // per-column scale and bias
        testing::WithPoolContext(2, [&](KernelContext& ctx) {
          cpu::Igemm(&ctx, pa, pb.view(), zb.data(), 1, nullptr, 0, &fo);
        });
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            int64_t want = 0;
            for (int64_t p = 0; p < k; ++p)
              want += (a.data<uint8_t>()[i * k + p] - za) * (b.data<int8_t>()[p * n + j] - zb[static_cast<size_t>(j)]);
            volatile float v = static_cast<float>(static_cast<int32_t>(want));
            volatile float prod = v * scale[static_cast<size_t>(j)];
            const float expect = prod + bias[static_cast<size_t>(j)];
            ASSERT_EQ(out[static_cast<size_t>(i * n + j)], expect) << m << "x" << n << "x" << k << " at " << i << "," << j;
          }
      }
    }
  }
}

// DequantizeLinear's per-tensor fast path against the reference, bitwise; per-axis scales,
// odd types and bad inputs go to the reference (same result or the same error).
TEST_P(QuantMatMulFastTest, DequantizeLinearMatchesReference) {
  std::mt19937 rng(35);
  struct DqCase {
    DataType type;
    std::vector<int64_t> dims;
    std::vector<int64_t> scale_dims;
    bool zp;
    float scale;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<DqCase> cases = {
      {DataType::kUint8, {128, 768}, {}, true, 0.0173f}, {DataType::kInt8, {3, 5, 7}, {}, true, 1e-3f},
      {DataType::kUint8, {17}, {}, false, 3.5f},         {DataType::kInt8, {0, 4}, {}, true, 0.5f},
      {DataType::kUint8, {9}, {}, true, inf},            {DataType::kInt8, {4, 6}, {6}, true, 0.25f},  // per axis
      {DataType::kUint8, {2, 3}, {1}, true, 0.25f},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const DqCase& c = cases[i];
    std::vector<float> sv(static_cast<size_t>(testing::ElementCount(c.scale_dims)), c.scale);
    std::vector<Value> in = {Value(testing::Random8(c.type, c.dims, rng)), Value(Tensor::FromVector(sv, c.scale_dims))};
    if (c.zp) in.push_back(Value(testing::Random8(c.type, c.scale_dims, rng)));
    Node node = testing::MakeNode("DequantizeLinear", in.size(), 1);
    if (!c.scale_dims.empty()) node.attributes.push_back(testing::IntAttr("axis", static_cast<int64_t>(c.dims.size()) - 1));
    for (int64_t opset : {13, 21}) {
      auto ref = testing::RunOp(node, opset, in);
      for (int threads : {1, 2}) {
        std::vector<const Value*> ptrs;
        for (const Value& v : in) ptrs.push_back(&v);
        std::vector<Value> outputs(1);
        ThreadPool pool(threads);
        KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
        Status st = cpu::DequantizeLinearFast(ctx);
        ASSERT_EQ(st.ok(), ref.ok()) << "case " << i;
        if (st.ok()) ExpectBitwise(outputs[0].tensor(), ref->outputs[0].tensor(), "dq case " + std::to_string(i));
      }
    }
  }
}

// DynamicQuantizeLinear over several range blocks (its range is scanned by blocks over the
// threads): the reference's scale, zero point and values at 1 and 2 threads, with NaNs, -0 and
// one-signed inputs.
TEST_P(QuantMatMulFastTest, DynamicQuantizeLinearBlockedRangeMatchesReference) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(38);
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  for (int variant = 0; variant < 4; ++variant) {
    std::vector<float> v(100003);
    for (auto& e : v) e = dist(rng);
    if (variant == 1) {
      for (auto& e : v) e = -std::fabs(e);  // all negative: zero point 255
      v[70000] = -0.0f;
    }
    if (variant == 2) {
      for (size_t i = 0; i < v.size(); i += 997) v[i] = nan;
      v[99999] = 9.5f;  // the maximum in the last block
    }
    if (variant == 3) {
      for (auto& e : v) e = std::fabs(e) + 1.0f;  // all positive, minimum 0 from the initial range
      v[0] = -0.0f;
    }
    std::vector<Value> in = {Value(Tensor::FromVector(v, {static_cast<int64_t>(v.size())}))};
    Node node = testing::MakeNode("DynamicQuantizeLinear", 1, 3);
    auto ref = testing::RunOp(node, 11, in);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    for (int threads : {1, 2}) {
      std::vector<const Value*> ptrs = {&in[0]};
      std::vector<Value> outputs(3);
      ThreadPool pool(threads);
      KernelContext ctx(node, 11, ptrs, &outputs, nullptr, &pool, nullptr);
      ASSERT_TRUE(cpu::DynamicQuantizeLinearFast(ctx).ok());
      for (int o = 0; o < 3; ++o)
        ExpectBitwise(outputs[static_cast<size_t>(o)].tensor(), ref->outputs[static_cast<size_t>(o)].tensor(),
                      "dql variant " + std::to_string(variant) + " output " + std::to_string(o));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, QuantMatMulFastTest,
                         ::testing::Values(cpu::SgemmIsa::kAvx512, cpu::SgemmIsa::kAvx2, cpu::SgemmIsa::kPortable),
                         // kAvx512: no limit, the best kernel this CPU has (VNNI where it has it).
                         [](const auto& info) {
                           return info.param == cpu::SgemmIsa::kAvx512 ? "dispatched"
                                  : info.param == cpu::SgemmIsa::kAvx2  ? "avx2"
                                                                         : "portable";
                         });

}  // namespace
}  // namespace nee
