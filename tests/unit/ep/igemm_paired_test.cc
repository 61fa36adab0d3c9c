// The paired u8 x s8 GEMM (ep/cpu/igemm_u8s8_paired.cc: int8 weights broadcast, two k quads per
// vpmaddwd, saturating weight groups clamped with remainders) against plain int64 sums and, through
// MatMulIntegerToFloat / MatMulInteger, against the reference kernels: bitwise, under each ISA limit
// (the AVX2 tile and the portable loops), at 1, 2 and 3 threads, around every panel edge. Also the
// rounding of DynamicQuantizeLinear's fast kernel (quant_fast.cc), which feeds it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/quant_matmul.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

class IgemmPairedTest : public testing::IsaLimitedTest {};

// int8 weights as a quantized transformer's: roughly normal with the given spread, clipped to +-127.
std::vector<int8_t> NormalWeights(int64_t count, float sd, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<int8_t> w(static_cast<size_t>(count));
  for (auto& e : w) e = static_cast<int8_t>(std::clamp(std::nearbyint(dist(rng)), -127.0f, 127.0f));
  return w;
}

std::vector<int8_t> FullRangeWeights(int64_t count, std::mt19937& rng) {
  std::vector<int8_t> w(static_cast<size_t>(count));
  for (auto& e : w) e = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  return w;
}

std::vector<int32_t> PlainSums(const std::vector<uint8_t>& a, const std::vector<int8_t>& b, int64_t m, int64_t k,
                               int64_t n, const int32_t* za, int64_t za_stride, const int32_t* zb, int64_t zb_stride) {
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (static_cast<int64_t>(a[static_cast<size_t>(i * k + p)]) - za[i * za_stride]) *
             (static_cast<int64_t>(b[static_cast<size_t>(p * n + j)]) - zb[j * zb_stride]);
      c[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(static_cast<uint32_t>(s));
    }
  return c;
}

TEST_P(IgemmPairedTest, MatchesPlainSums) {
  std::mt19937 rng(51);
  // m: the 8- and 16-row tiles' edges; n: the 6-column panels' edges; k: quads and octets, ragged or whole.
  for (int64_t m : {1, 7, 8, 9, 16, 17, 33}) {
    for (int64_t n : {1, 5, 6, 7, 13}) {
      for (int64_t k : {1, 3, 4, 8, 9, 31, 64}) {
        std::vector<uint8_t> a(static_cast<size_t>(m * k));
        for (auto& e : a) e = static_cast<uint8_t>(rng() % 256);
        // Full-range weights: many groups clamped, remainders everywhere (even the padding octet's partners).
        const std::vector<int8_t> b = FullRangeWeights(k * n, rng);
        std::vector<int32_t> za(static_cast<size_t>(m)), zb(static_cast<size_t>(n));
        for (auto& z : za) z = static_cast<int32_t>(rng() % 256);
        for (auto& z : zb) z = static_cast<int32_t>(rng() % 256) - 128;
        cpu::IgemmPackedS8Paired pb;
        ASSERT_TRUE(cpu::IgemmPackS8Paired(k, n, b.data(), n, 1.0, &pb));
        // Per-row za and per-column zb; then one za and zb 0 (the folded start, no row term).
        const int32_t zero = 0;
        for (bool per_row : {true, false}) {
          const int32_t* zap = za.data();
          const int64_t zas = per_row ? 1 : 0;
          const int32_t* zbp = per_row ? zb.data() : &zero;
          const int64_t zbs = per_row ? 1 : 0;
          const std::vector<int32_t> want = PlainSums(a, b, m, k, n, zap, zas, zbp, zbs);
          std::vector<int32_t> c(static_cast<size_t>(m * n), -7);
          cpu::IgemmU8S8Paired(nullptr, a.data(), m, k, pb, zap, zas, zbp, zbs, c.data(), n);
          ASSERT_EQ(c, want) << m << "x" << k << "x" << n << (per_row ? " per-row za" : " one za");
        }
      }
    }
  }
}

// The float epilogue (Cast, Mul, Add rounded apart) on BERT-like weights at 1, 2 and 3 threads, into a
// wider output (ldo > n) whose other columns stay untouched.
TEST_P(IgemmPairedTest, FloatEpilogueThreadsBitwise) {
  std::mt19937 rng(52);
  for (auto [m, k, n] : {std::array<int64_t, 3>{128, 768, 60}, {37, 130, 45}, {20, 20, 40}, {1, 64, 13}}) {
    std::vector<uint8_t> a(static_cast<size_t>(m * k));
    for (auto& e : a) e = static_cast<uint8_t>(rng() % 256);
    const std::vector<int8_t> b = NormalWeights(k * n, 26.0f, rng);
    const int32_t za = static_cast<int32_t>(rng() % 256), zb = 0;
    std::vector<float> scale(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      scale[static_cast<size_t>(j)] = 1e-4f * static_cast<float>(j + 1) / 3.0f;
      bias[static_cast<size_t>(j)] = 0.7f - 0.013f * static_cast<float>(j);
    }
    const std::vector<int32_t> sums = PlainSums(a, b, m, k, n, &za, 0, &zb, 0);
    const int64_t ldo = n + 3;
    std::vector<float> want(static_cast<size_t>(m * ldo), -1.0f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        volatile float v = static_cast<float>(sums[static_cast<size_t>(i * n + j)]);
        volatile float prod = v * scale[static_cast<size_t>(j)];
        want[static_cast<size_t>(i * ldo + j)] = prod + bias[static_cast<size_t>(j)];
      }
    cpu::IgemmPackedS8Paired pb;
    ASSERT_TRUE(cpu::IgemmPackS8Paired(k, n, b.data(), n, 1.0, &pb));
    for (int threads : {1, 2, 3}) {
      std::vector<float> out(static_cast<size_t>(m * ldo), -1.0f);
      cpu::IgemmFloatOut fo{out.data(), ldo, scale.data(), 1, bias.data()};  // per-column scale and bias
      // m and k copied: clang 14 (the sanitizer builds) cannot capture structured bindings yet.
      testing::WithPoolContext(threads, [&, rows = m, depth = k](KernelContext& ctx) {
        cpu::IgemmU8S8Paired(&ctx, a.data(), rows, depth, pb, &za, 0, &zb, 0, nullptr, 0, &fo);
      });
      ASSERT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float)))
          << m << "x" << k << "x" << n << " at " << threads << " threads";
    }
  }
}

TEST_P(IgemmPairedTest, DeclinesTooManyRemainders) {
  std::mt19937 rng(53);
  const std::vector<int8_t> b = FullRangeWeights(64 * 64, rng);
  cpu::IgemmPackedS8Paired pb;
  EXPECT_FALSE(cpu::IgemmPackS8Paired(64, 64, b.data(), 64, 0.01, &pb));
  // Small weights need none.
  const std::vector<int8_t> small = NormalWeights(64 * 64, 8.0f, rng);
  ASSERT_TRUE(cpu::IgemmPackS8Paired(64, 64, small.data(), 64, 0.0, &pb));
  EXPECT_TRUE(pb.remainders.empty());
}

// MatMulIntegerToFloat and MatMulInteger on BERT-like weights (the paired kernel where it runs: AVX2
// without VNNI; the weights' packing says which) against the reference kernels, at 1, 2 and 3 threads.
TEST_P(IgemmPairedTest, MatMulOpsMatchReference) {
  std::mt19937 rng(54);
  for (auto [m, k, n] : {std::array<int64_t, 3>{128, 768, 96}, {19, 72, 30}, {1, 40, 7}}) {
    const std::vector<int8_t> wb = NormalWeights(k * n, 26.0f, rng);
    Tensor b = Tensor::FromVector(wb, {k, n});
    auto packed = cpu::quant_matmul::PackQuantWeights(reinterpret_cast<const uint8_t*>(wb.data()), k, n, true, true,
                                                      true);
    // BERT's shape: ~0.55% of the weights need a remainder, under the 1% the packing allows (the small
    // shapes may go either way).
    if (k == 768) EXPECT_EQ(packed->paired != nullptr, cpu::IgemmPairedAvailable());
    Tensor a = testing::Random8(DataType::kUint8, {m, k}, rng);
    Tensor a_scale = Tensor::FromVector(std::vector<float>{0.02f}, {});
    Tensor b_scale = Tensor::FromVector(std::vector<float>{0.003f}, {});
    Tensor a_zp = testing::Random8(DataType::kUint8, {}, rng);
    Tensor b_zp = Tensor::FromVector(std::vector<int8_t>{0}, {});
    std::vector<float> bias_v(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) bias_v[static_cast<size_t>(j)] = 0.25f - 0.01f * static_cast<float>(j);
    Tensor bias = Tensor::FromVector(bias_v, {n});
    struct Op {
      const char* name;
      const char* domain;
      std::vector<Value> inputs;
      Status (*fast)(KernelContext&);
    };
    const std::vector<Op> ops = {
        {"MatMulIntegerToFloat", "com.microsoft",
         {Value(a), Value(b), Value(a_scale), Value(b_scale), Value(a_zp), Value(b_zp), Value(bias)},
         cpu::MatMulIntegerToFloatFast},
        {"MatMulInteger", "", {Value(a), Value(b), Value(a_zp), Value(b_zp)}, cpu::MatMulIntegerFast},
    };
    for (const Op& op : ops) {
      Node node = testing::MakeNode(op.name, op.inputs.size(), 1);
      node.domain = op.domain;
      auto ref = testing::RunOp(node, 10, op.inputs);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      for (int threads : {1, 2, 3}) {
        std::vector<const Value*> ptrs;
        for (const Value& v : op.inputs) ptrs.push_back(&v);
        std::vector<Value> outputs(1);
        ThreadPool pool(threads);
        KernelContext ctx(node, 10, ptrs, &outputs, nullptr, &pool, nullptr);
        ASSERT_TRUE(op.fast(ctx).ok());
        testing::ExpectBitwise(outputs[0].tensor(), ref->outputs[0].tensor(),
                               std::string(op.name) + " " + std::to_string(m) + "x" + std::to_string(k) + "x" +
                                   std::to_string(n) + " threads " + std::to_string(threads));
      }
    }
  }
}

// QuantizeToUint8 (DynamicQuantizeLinear's and QuantizeLinear's rounding, which feeds the paired GEMM) against
// the scalar formula, on quotients at and around half-integers, large ones, NaN, infinities, and scales whose
// reciprocal is not a normal float (the cases a faster rounding by x * (1 / scale) would have to get right).
TEST_P(IgemmPairedTest, QuantizeToUint8MatchesDivision) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(55);
  std::uniform_real_distribution<float> dist(-300.0f, 300.0f);
  for (float scale : {0.0123f, 0.5f, 3.0f, 1e-30f, 3e38f, 1e-39f, -0.02f}) {
    for (float zero_point : {0.0f, 128.0f, 255.0f}) {
      std::vector<float> x;
      for (int h = -300; h <= 300; ++h) {
        const float center = (static_cast<float>(h) + 0.5f) * scale;
        x.push_back(center);
        float up = center, down = center;
        for (int step = 0; step < 40; ++step) {  // the neighbours of each half, a few ulps and further out
          up = std::nextafter(up, inf);
          down = std::nextafter(down, -inf);
          x.push_back(up);
          x.push_back(down);
        }
        x.push_back(center * (1.0f + 1.0f / 4096));
        x.push_back(center * (1.0f - 1.0f / 4096));
      }
      for (int r = 0; r < 2000; ++r) x.push_back(dist(rng) * scale);
      const float specials[] = {nan, inf, -inf, 0.0f, -0.0f, 1e30f, -1e30f, 3e9f, -3e9f, 70000.0f, -70000.0f};
      for (float special : specials) x.push_back(special);
      // And inside the 32-value steps of the AVX2 loop, at varied lanes (quotients beyond int32 and beyond
      // its 65536 cap among them, scaled so that they stay so).
      for (size_t e = 0; e < std::size(specials); ++e) x[e * 41 + 3] = specials[e] * std::max(1.0f, std::fabs(scale));
      std::vector<uint8_t> got(x.size());
      cpu::QuantizeToUint8(x.data(), static_cast<int64_t>(x.size()), scale, zero_point, got.data());
      for (size_t i = 0; i < x.size(); ++i) {
        volatile float quotient = x[i] / scale;
        const float q = std::nearbyint(static_cast<float>(quotient)) + zero_point;
        const uint8_t want = static_cast<uint8_t>(std::isnan(q) ? zero_point : std::clamp(q, 0.0f, 255.0f));
        ASSERT_EQ(got[i], want) << "x " << x[i] << " scale " << scale << " zero point " << zero_point;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, IgemmPairedTest, testing::AllGemmIsas(), testing::IsaName);

}  // namespace
}  // namespace nee
