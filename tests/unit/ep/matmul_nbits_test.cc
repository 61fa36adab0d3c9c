// com.microsoft MatMulNBits: the reference kernel (ops/matmul_nbits.cc) against sums written here
// from the op's definition; the fast kernel (ep/cpu/matmul_nbits_fast.cc) against the reference on
// random and awkward shapes (K not a multiple of the block size nor of 16, N odd, M = 1 and the
// SGEMM path, blocks beyond SGEMM's k-block), with and without zero points and bias, bitwise the
// same at 1 and 2 threads; hostile inputs refused by name; the int4 quantizer's bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"
#include "opt/quantize.h"

namespace nee {
namespace {

enum class Zp { kNone, kPacked, kFloat };

struct Case {
  std::vector<int64_t> a_dims;  // [..., K]
  int64_t n, block_size;
  Zp zp = Zp::kPacked;
  bool bias = false;
};

int64_t Blocks(const Case& c) { return (c.a_dims.back() + c.block_size - 1) / c.block_size; }

Tensor RandomBytes(const std::vector<int64_t>& dims, std::mt19937& rng) {
  return testing::Random8(DataType::kUint8, dims, rng);
}

Tensor Uniform(const std::vector<int64_t>& dims, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(testing::ElementCount(dims)));
  for (float& f : v) f = dist(rng);
  return Tensor::FromVector(v, dims);
}

// A, B, scales, zero_points?, g_idx (empty), bias? ; empty Values are omitted inputs.
std::vector<Value> MakeInputs(const Case& c, std::mt19937& rng) {
  const int64_t blocks = Blocks(c);
  std::vector<Value> in = {Value(Uniform(c.a_dims, -1.f, 1.f, rng)),
                           Value(RandomBytes({c.n, blocks, c.block_size / 2}, rng)),
                           Value(Uniform({c.n, blocks}, -0.1f, 0.1f, rng))};
  if (c.zp == Zp::kPacked) in.push_back(Value(RandomBytes({c.n, (blocks + 1) / 2}, rng)));
  else if (c.zp == Zp::kFloat) in.push_back(Value(Uniform({c.n * blocks}, 0.f, 15.f, rng)));
  else in.push_back(Value());
  in.push_back(Value());
  if (c.bias) in.push_back(Value(Uniform({c.n}, -1.f, 1.f, rng)));
  while (!in.back().is_tensor()) in.pop_back();
  return in;
}

Node NBitsNode(const Case& c, const std::vector<Value>& inputs, int64_t bits = 4) {
  Node node = testing::MakeNode("MatMulNBits", inputs.size(), 1,
                                {testing::IntAttr("K", c.a_dims.back()), testing::IntAttr("N", c.n),
                                 testing::IntAttr("bits", bits), testing::IntAttr("block_size", c.block_size)},
                                "com.microsoft");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].is_tensor()) node.inputs[i].clear();
  return node;
}

Result<Tensor> RunFast(const Node& node, const std::vector<Value>& inputs, int threads) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.is_tensor() ? &v : nullptr);
  std::vector<Value> outputs(1);
  ThreadPool pool(threads);
  KernelContext ctx(node, 1, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(cpu::MatMulNBitsFast(ctx));
  return outputs[0].tensor();
}

// W[k, n] from the op's definition: nibble k of column n's bytes (low nibble first), less the
// block's zero point (packed: the even block's in the low nibble; absent: 8), times its scale.
std::vector<double> DequantizedW(const Case& c, const std::vector<Value>& in) {
  const int64_t k = c.a_dims.back(), blocks = Blocks(c);
  const uint8_t* b = in[1].tensor().data<uint8_t>();
  const float* s = in[2].tensor().data<float>();
  std::vector<double> w(static_cast<size_t>(k * c.n));
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t p = 0; p < k; ++p) {
      const int64_t blk = p / c.block_size;
      const uint8_t byte = b[(n * blocks + blk) * (c.block_size / 2) + (p % c.block_size) / 2];
      const int q = p % 2 ? byte >> 4 : byte & 15;
      double zp = 8;
      if (c.zp == Zp::kPacked) {
        const uint8_t z = in[3].tensor().data<uint8_t>()[n * ((blocks + 1) / 2) + blk / 2];
        zp = blk % 2 ? z >> 4 : z & 15;
      } else if (c.zp == Zp::kFloat) {
        zp = in[3].tensor().data<float>()[n * blocks + blk];
      }
      w[static_cast<size_t>(p * c.n + n)] = (q - zp) * static_cast<double>(s[n * blocks + blk]);
    }
  return w;
}

// Y within `rel` of sum |a w| (the size of the rounding) of the exact sums.
void ExpectNearExact(const Case& c, const std::vector<Value>& in, const Tensor& y, double rel, const std::string& what) {
  const int64_t k = c.a_dims.back(), rows = testing::ElementCount(c.a_dims) / k;
  std::vector<int64_t> want_dims(c.a_dims.begin(), c.a_dims.end() - 1);
  want_dims.push_back(c.n);
  ASSERT_EQ(y.dims(), want_dims) << what;
  const std::vector<double> w = DequantizedW(c, in);
  const float* a = in[0].tensor().data<float>();
  const float* bias = in.size() > 5 ? in[5].tensor().data<float>() : nullptr;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t n = 0; n < c.n; ++n) {
      double sum = 0, size = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += a[i * k + p] * w[static_cast<size_t>(p * c.n + n)];
        size += std::fabs(a[i * k + p] * w[static_cast<size_t>(p * c.n + n)]);
      }
      if (bias) sum += bias[n];
      ASSERT_NEAR(y.data<float>()[i * c.n + n], sum, rel * (size + std::fabs(sum)) + 1e-7)
          << what << " row " << i << " col " << n;
    }
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {{1, 64}, 8, 32},                          // M = 1 (decode), whole blocks
      {{1, 100}, 7, 32, Zp::kPacked, true},      // K % 32 = 4 (and % 16 = 4), N odd, bias
      {{1, 1}, 3, 16, Zp::kNone},                // K = 1: one padded block, default zero point 8
      {{3, 70}, 5, 16, Zp::kNone, true},         // 3 rows, odd block count (packed zero point's last byte half used)
      {{4, 520}, 3, 256},                        // 4 rows x 2 columns at a time; blocks of 256
      {{6, 130}, 11, 64, Zp::kPacked, true},     // 6 rows x 1 column at a time, K % 16 = 2
      {{8, 50}, 5, 16, Zp::kNone},               // the direct path's most rows
      {{9, 33}, 40, 32},                         // the fewest rows the SGEMM path takes
      {{1, 4096}, 37, 32},                       // a long K for the GEMV
      {{2, 5, 300}, 33, 64, Zp::kPacked, true},  // batched A: 10 rows, the SGEMM path
      {{13, 777}, 65, 128},                      // SGEMM: 4 k-blocks, the last 9 deep, two panels and a bit
      {{20, 600}, 9, 512, Zp::kNone},            // block larger than SGEMM's k-block (256)
      {{40, 96}, 70, 32, Zp::kFloat, true},      // float zero points (the reference's)
      {{2, 96}, 4, 32, Zp::kFloat},              // float zero points, few rows
      {{17}, 6, 16},                             // 1-D A: Y is [N]
      {{0, 32}, 4, 32},                          // no rows
  };
  return cases;
}

TEST(MatMulNBitsTest, ReferenceMatchesTheDefinition) {
  std::mt19937 rng(7);
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    std::vector<Value> in = MakeInputs(c, rng);
    auto ref = testing::RunOp(NBitsNode(c, in), 1, in);
    ASSERT_TRUE(ref.ok()) << "case " << i << ": " << ref.status().ToString();
    ExpectNearExact(c, in, ref->outputs[0].tensor(), 1e-6, "reference, case " + std::to_string(i));
  }
}

TEST(MatMulNBitsTest, FastMatchesReferenceAtOneAndTwoThreads) {
  std::mt19937 rng(8);
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case& c = Cases()[i];
    std::vector<Value> in = MakeInputs(c, rng);
    const Node node = NBitsNode(c, in);
    auto one = RunFast(node, in, 1);
    ASSERT_TRUE(one.ok()) << "case " << i << ": " << one.status().ToString();
    ExpectNearExact(c, in, one.value(), 1e-5, "fast, case " + std::to_string(i));
    auto two = RunFast(node, in, 2);
    ASSERT_TRUE(two.ok()) << "case " << i << ": " << two.status().ToString();
    ASSERT_EQ(two->dims(), one->dims());
    EXPECT_EQ(0, std::memcmp(two->raw_data(), one->raw_data(), one->byte_size())) << "case " << i << ": threads";
  }
}

// Products large enough for the direct path to split columns among threads and for SGEMM to run
// tasks on both: still bitwise one thread's result.
TEST(MatMulNBitsTest, FastIsIndependentOfThreadsOnLargeProducts) {
  std::mt19937 rng(9);
  for (const Case& c : {Case{{1, 768}, 2304, 32, Zp::kPacked, true}, Case{{3, 1000}, 515, 64},
                        Case{{7, 300}, 301, 128}, Case{{64, 768}, 600, 32, Zp::kPacked, true}}) {
    std::vector<Value> in = MakeInputs(c, rng);
    const Node node = NBitsNode(c, in);
    auto one = RunFast(node, in, 1);
    auto two = RunFast(node, in, 2);
    auto three = RunFast(node, in, 3);
    ASSERT_TRUE(one.ok() && two.ok() && three.ok());
    EXPECT_EQ(0, std::memcmp(two->raw_data(), one->raw_data(), one->byte_size()));
    EXPECT_EQ(0, std::memcmp(three->raw_data(), one->raw_data(), one->byte_size()));
    ExpectNearExact(c, in, one.value(), 1e-5, "large");
  }
}

// Weights past K in the last block (the padding) are never summed, even when the block's scale
// makes them infinite: the reference and both fast paths give the finite answer.
TEST(MatMulNBitsTest, PaddingIsNeverSummed) {
  std::mt19937 rng(10);
  for (int64_t rows : {1, 8}) {
    Case c{{rows, 40}, 3, 32, Zp::kPacked};
    std::vector<Value> in = MakeInputs(c, rng);
    Tensor b = in[1].tensor().Clone().value();
    uint8_t* bytes = b.data<uint8_t>();
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t i = 4; i < 16; ++i) bytes[(n * 2 + 1) * 16 + i] = 0xFF;  // padding k 40..63 = 15
    in[1] = Value(b);
    Tensor zp = in[3].tensor().Clone().value();
    for (int64_t n = 0; n < c.n; ++n) zp.data<uint8_t>()[n] = 0x00;  // zero point 0: padding (15 - 0) * s
    in[3] = Value(zp);
    const Node node = NBitsNode(c, in);
    auto ref = testing::RunOp(node, 1, in);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    ExpectNearExact(c, in, ref->outputs[0].tensor(), 1e-6, "reference");
    auto fast = RunFast(node, in, 1);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    ExpectNearExact(c, in, fast.value(), 1e-5, "fast");
  }
}

void ExpectRefused(const Case& c, std::vector<Value> in, const std::string& needle, int64_t bits = 4,
                   StatusCode code = StatusCode::kInvalidArgument) {
  const Node node = NBitsNode(c, in, bits);
  auto fast = RunFast(node, in, 2);
  ASSERT_FALSE(fast.ok()) << needle;
  EXPECT_EQ(fast.status().code(), code) << fast.status().ToString();
  EXPECT_NE(fast.status().message().find("node 'test' (com.microsoft.MatMulNBits)"), std::string::npos) << fast.status().ToString();
  EXPECT_NE(fast.status().message().find(needle), std::string::npos) << fast.status().ToString();
}

TEST(MatMulNBitsTest, HostileInputsAreRefusedByName) {
  std::mt19937 rng(11);
  const Case c{{2, 100}, 7, 32, Zp::kPacked, true};
  std::vector<Value> in = MakeInputs(c, rng);
  auto with = [&](size_t i, Tensor t) {
    std::vector<Value> v = in;
    v[i] = Value(std::move(t));
    return v;
  };
  ExpectRefused(c, with(1, RandomBytes({7, 4, 8}, rng)), "(B) must be uint8 [7, 4, 16]");  // blobs too short
  ExpectRefused(c, with(1, RandomBytes({7 * 4 * 16}, rng)), "(B) must be");                  // flat B
  ExpectRefused(c, with(1, Uniform({7, 4, 16}, 0.f, 1.f, rng)), "(B) must be uint8");
  ExpectRefused(c, with(2, Uniform({7, 3}, 0.f, 1.f, rng)), "(scales) must hold N x blocks = 7 x 4");
  ExpectRefused(c, with(3, RandomBytes({7 * 2 - 1}, rng)), "(zero_points) must hold");
  ExpectRefused(c, with(3, Uniform({7, 2}, 0.f, 1.f, rng)), "(zero_points) must hold N x blocks");
  ExpectRefused(c, with(5, Uniform({6}, 0.f, 1.f, rng)), "(bias) must be [7]");
  ExpectRefused(c, with(0, Uniform({2, 99}, 0.f, 1.f, rng)), "(A) has last dim 99 but K=100");
  ExpectRefused(c, in, "only 4-bit weights", 8, StatusCode::kNotImplemented);
  std::vector<Value> g_idx = in;
  g_idx[4] = Value(Tensor::FromVector(std::vector<int32_t>(100, 0), {100}));
  ExpectRefused(c, g_idx, "g_idx", 4, StatusCode::kNotImplemented);
  // A block size that is not a power of two >= 16 is an invalid model, for the shape rule too.
  const Case odd{{2, 96}, 3, 24};
  std::vector<Value> odd_in = {Value(Uniform({2, 96}, -1.f, 1.f, rng)), Value(RandomBytes({3, 4, 12}, rng)),
                               Value(Uniform({3, 4}, 0.f, 1.f, rng))};
  ExpectRefused(odd, odd_in, "block_size must be a power of two >= 16", 4, StatusCode::kInvalidModel);
  auto ref = testing::RunOp(NBitsNode(odd, odd_in), 1, odd_in);
  ASSERT_FALSE(ref.ok());
  EXPECT_NE(ref.status().message().find("block_size must be a power of two"), std::string::npos);
}

// The quantizer's bytes for a matrix worked by hand: one column, block 16, K = 20 (the second
// block padded with zeros); round half away from zero, the range widened to hold 0.
TEST(MatMulNBitsTest, QuantizerBytesWorkedByHand) {
  std::vector<float> w(20, 0.f);
  // Block 0: values 0..15 scaled by 0.5 then shifted: min -2 (k 0), max 5.5 (k 15): scale 0.5,
  // zero point round(2 / 0.5) = 4, q = round(w / 0.5 + 4) = k.
  for (int k = 0; k < 16; ++k) w[k] = 0.5f * k - 2.f;
  // Block 1: 4 values (k 16..19) and 12 padding zeros: all positive, range [0, 3]: scale 0.2,
  // zero point 0; 0.5 / 0.2 = 2.5 rounds away to 3.
  w[16] = 3.f;
  w[17] = 0.5f;
  w[18] = 0.f;
  w[19] = 1.f;
  quant::Int4Weights q;
  ASSERT_TRUE(quant::QuantizeWeightsInt4(Tensor::FromVector(w, {20, 1}), 16, &q).ok());
  ASSERT_EQ(q.b.dims(), (std::vector<int64_t>{1, 2, 8}));
  ASSERT_EQ(q.scales.dims(), (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(q.zero_points.dims(), (std::vector<int64_t>{1, 1}));
  const uint8_t* b = q.b.data<uint8_t>();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b[i], (2 * i) | ((2 * i + 1) << 4)) << i;
  EXPECT_EQ(b[8], 15 | (3 << 4));  // 3 / 0.2 = 15, 0.5 / 0.2 = 2.5 -> 3
  EXPECT_EQ(b[9], 0 | (5 << 4));   // 0, 1 / 0.2 = 5
  for (int i = 10; i < 16; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_FLOAT_EQ(q.scales.data<float>()[0], 7.5f / 15.f);
  EXPECT_FLOAT_EQ(q.scales.data<float>()[1], 3.f / 15.f);
  EXPECT_EQ(q.zero_points.data<uint8_t>()[0], 4 | (0 << 4));
  EXPECT_FALSE(quant::QuantizeWeightsInt4(Tensor::FromVector(w, {20, 1}), 24, &q).ok());
  w[3] = std::nanf("");
  EXPECT_FALSE(quant::QuantizeWeightsInt4(Tensor::FromVector(w, {20, 1}), 16, &q).ok());
}

}  // namespace
}  // namespace nee
