// com.microsoft QGemm: the fast kernel (ep/cpu/qlinear_fast.cc: MatMulInteger's exact product, C, then the
// reference's float requantization) against the reference kernel (ops/quantize.cc), bitwise, on each GEMM the
// machine has, at one and two threads, B as [k, n] and as [n, k] (transB); what it leaves to the reference (transA, C of other shapes,
// malformed inputs) still gets the reference's results and errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/qgemm_gemv.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

Result<Tensor> RunFast(const Node& node, const std::vector<Value>& inputs, int threads) {
  return testing::RunKernelOmitting(cpu::QGemmFast, node, 1, inputs, threads);
}

const auto Scale = testing::UniformFloats;

Tensor Bias(const std::vector<int64_t>& dims, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(-40000, 40000);
  std::vector<int32_t> v(static_cast<size_t>(testing::ElementCount(dims)));
  for (auto& e : v) e = dist(rng);
  return Tensor::FromVector(v, dims);
}

struct Case {
  int64_t m, k, n;
  DataType at = DataType::kUint8, bt = DataType::kInt8, yt = DataType::kUint8;
  bool per_column = false;          // b's scale and zero point per column
  std::vector<int64_t> c_dims{};    // C's shape; none without
  bool quantized_out = true;        // y_scale and y_zp given, else float output
  bool trans_b = false;             // B given as [n, k]
};

// a, a_scale, a_zp, b, b_scale, b_zp, C, y_scale, y_zp. y_scale is chosen so that outputs land inside the range
// and past both ends.
std::vector<Value> MakeInputs(const Case& c, std::mt19937& rng) {
  const std::vector<int64_t> per = c.per_column ? std::vector<int64_t>{c.n} : std::vector<int64_t>{};
  const std::vector<int64_t> b_dims = c.trans_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  std::vector<Value> in = {Value(testing::Random8(c.at, {c.m, c.k}, rng)), Value(Scale({}, rng, 0.005f, 0.05f)),
                           Value(testing::Random8(c.at, {}, rng)),         Value(testing::Random8(c.bt, b_dims, rng)),
                           Value(Scale(per, rng, 0.005f, 0.05f)),          Value(testing::Random8(c.bt, per, rng)),
                           c.c_dims.empty() ? Value() : Value(Bias(c.c_dims, rng))};
  if (c.quantized_out) {
    in.push_back(Value(Scale({}, rng, 0.02f, 0.4f)));
    in.push_back(Value(testing::Random8(c.yt, {}, rng)));
  }
  return in;
}

using testing::ExpectBitwise;

void ExpectAsReference(const Case& c, const std::vector<Value>& inputs, std::vector<Attribute> attrs,
                       const std::string& what) {
  const Node node = testing::MakeNode("QGemm", inputs.size(), 1, std::move(attrs), "com.microsoft");
  auto ref = testing::RunOp(node, 1, inputs);
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().ToString();
  for (int threads : {1, 2}) {
    auto got = RunFast(node, inputs, threads);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    ExpectBitwise(got.value(), ref->outputs[0].tensor(), what + " threads " + std::to_string(threads));
  }
  (void)c;
}

using QGemmFastTest = testing::IsaLimitedTest;

TEST_P(QGemmFastTest, MatchesReferenceBitwise) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<Case> cases = {
      {1, 2048, 1000, u8, s8, u8, true, {1000}},      // ResNet-50's classifier
      {1, 17, 33, u8, s8, u8, false, {33}},           // odd k, n past a panel
      {3, 64, 19, s8, u8, s8, true, {1, 19}},         // int8 a, uint8 b, int8 y; C as one row
      {7, 31, 16, u8, u8, s8, false},                 // no C
      {5, 100, 40, s8, s8, u8, true, {40}, false},    // float output
      {6, 1, 19},                                     // k = 1
      {9, 70, 3, u8, s8, u8, true, {3}},              // fewer columns than a vector
      {0, 8, 4},                                      // no rows
      {3, 8, 0},                                      // no columns
      {4, 0, 3, u8, s8, u8, false, {3}},              // k = 0: C alone
  };
  std::mt19937 rng(51);
  for (size_t i = 0; i < cases.size(); ++i)
    ExpectAsReference(cases[i], MakeInputs(cases[i], rng), {}, "case " + std::to_string(i));
  // alpha scales the products and C alike.
  ExpectAsReference(cases[1], MakeInputs(cases[1], rng), {testing::FloatAttr("alpha", 0.75f)}, "alpha");
}

// B as [n, k] (transB = 1: ONNX Runtime's QOperator classifier), packed transposed by the fast kernel.
TEST_P(QGemmFastTest, TransposedBMatchesReferenceBitwise) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  const std::vector<Case> cases = {
      {1, 2048, 1000, u8, s8, u8, false, {1000}, true, true},  // ResNet-50's classifier, per tensor
      {3, 37, 21, u8, s8, u8, true, {21}, true, true},         // odd sizes, per column
      {2, 5, 1, s8, u8, s8, false, {}, true, true},            // one column, int8 a, uint8 b
      {4, 9, 6, u8, s8, u8, true, {6}, false, true},           // float output
      {0, 4, 3, u8, s8, u8, false, {}, true, true},            // no rows
      {2, 0, 3, u8, s8, u8, false, {3}, true, true},           // k = 0
  };
  std::mt19937 rng(54);
  for (size_t i = 0; i < cases.size(); ++i)
    ExpectAsReference(cases[i], MakeInputs(cases[i], rng), {testing::IntAttr("transB", 1)},
                      "transB case " + std::to_string(i));
}

// Saturation at both ends of each output type and rounding halves to even: products of exactly half-integer
// values after scaling.
TEST_P(QGemmFastTest, SaturatesAndRoundsHalvesToEvenAsTheReference) {
  std::mt19937 rng(52);
  for (DataType yt : {DataType::kUint8, DataType::kInt8}) {
    Case c{5, 24, 37, DataType::kUint8, DataType::kInt8, yt, false, {37}};
    std::vector<Value> in = MakeInputs(c, rng);
    in[1] = Value(Tensor::FromVector(std::vector<float>{0.5f}, {}));
    in[4] = Value(Tensor::FromVector(std::vector<float>{1.f}, {}));
    in[7] = Value(Tensor::FromVector(std::vector<float>{1.f}, {}));  // multiplier 0.5: odd sums end in .5
    ExpectAsReference(c, in, {}, DataTypeName(yt));
  }
}

// A few rows (QGemv on AVX2 hosts without VNNI: B widened to int16 in registers, exact for any bytes): extreme
// bytes whose u8 x s8 pair sums would saturate (A all 255 against B all -128 or 127), uint8 B up to 255 with
// its zero point at 255, int8 A at -128 with a zero point of 127, per-column zero points, odd k, column counts
// around the 16-column panels, one to five rows.
TEST_P(QGemmFastTest, FewRowsMatchReferenceBitwiseOnExtremeBytes) {
  const DataType u8 = DataType::kUint8, s8 = DataType::kInt8;
  std::mt19937 rng(55);
  auto fill = [](Value& v, int byte) {  // every element of the 8-bit tensor v set to `byte`
    const Tensor& t = v.tensor();
    const size_t count = static_cast<size_t>(t.num_elements());
    if (t.dtype() == DataType::kUint8)
      v = Value(Tensor::FromVector(std::vector<uint8_t>(count, static_cast<uint8_t>(byte)), t.dims()));
    else
      v = Value(Tensor::FromVector(std::vector<int8_t>(count, static_cast<int8_t>(byte)), t.dims()));
  };
  int index = 0;
  for (int64_t m : {1, 2, 3, 4, 5})
    for (int64_t n : {1, 15, 17, 33})
      for (bool trans_b : {false, true}) {
        const int64_t k = 2 * m + 2 * n + 7;  // odd
        Case c{m, k, n, u8, s8, u8, n % 2 == 1, {n}, true, trans_b};
        std::vector<Attribute> attrs;
        if (trans_b) attrs.push_back(testing::IntAttr("transB", 1));
        ExpectAsReference(c, MakeInputs(c, rng), attrs, "random " + std::to_string(index));
        std::vector<Value> in = MakeInputs(c, rng);
        fill(in[0], 255);                    // A all 255
        fill(in[2], 0);                      // za 0
        fill(in[3], index % 2 ? 0x80 : 0x7F);  // B all -128 or all 127
        fill(in[5], 0);
        ExpectAsReference(c, in, attrs, "extreme " + std::to_string(index));
        Case d{m, k, n, s8, u8, s8, true, {}, index % 3 != 0, trans_b};
        in = MakeInputs(d, rng);
        fill(in[0], 0x80);  // A all -128 ...
        fill(in[2], 127);   // ... minus 127: -255
        fill(in[5], 255);   // uint8 B's zero points 255
        ExpectAsReference(d, in, attrs, "int8 a " + std::to_string(index));
        ++index;
      }
}

// As a session runs it: B packed once in a PreparedCache for the first run's row count, then serving runs of
// another row count (the GEMV's packing many rows, the GEMM's one row), bitwise the reference each time.
TEST_P(QGemmFastTest, PackedOnceServesOtherRowCounts) {
  std::mt19937 rng(56);
  for (int64_t first_rows : {1, 9}) {
    PreparedCache cache;
    const Node node = testing::MakeNode("QGemm", 9, 1, {testing::IntAttr("transB", 1)}, "com.microsoft");
    Case c{first_rows, 300, 37, DataType::kUint8, DataType::kInt8, DataType::kUint8, true, {37}, true, true};
    std::vector<Value> in = MakeInputs(c, rng);
    const Value b = in[3];
    for (int64_t rows : {first_rows, first_rows == 1 ? int64_t{9} : int64_t{1}, int64_t{3}}) {
      in[0] = Value(testing::Random8(DataType::kUint8, {rows, 300}, rng));
      in[3] = b;
      auto ref = testing::RunOp(node, 1, in);
      ASSERT_TRUE(ref.ok()) << ref.status().ToString();
      for (int threads : {1, 2}) {
        std::vector<const Value*> ptrs;
        for (const Value& v : in) ptrs.push_back(&v);
        std::vector<Value> outputs(1);
        ThreadPool pool(threads);
        KernelContext ctx(node, 1, ptrs, &outputs, nullptr, &pool, nullptr);
        std::vector<bool> constant(in.size(), false);
        constant[3] = true;
        ctx.SetPrepared(&cache, &constant);
        ASSERT_TRUE(cpu::QGemmFast(ctx).ok());
        ExpectBitwise(outputs[0].tensor(), ref->outputs[0].tensor(),
                      "first " + std::to_string(first_rows) + " rows " + std::to_string(rows));
      }
    }
    EXPECT_EQ(cache.size(), 1u);
  }
}

// QGemv's int32 sums against a plain int64 loop narrowed to int32 (wrapping, as the reference's sums): on the
// AVX2 kernels (one row: two panels a pass, here with a ragged third panel) and, with the ISA limited to
// portable, the portable loop over the same packing; k past the point where 255 * 127 * k leaves int32, so
// the sums wrap; int8 and uint8 A and B, per-column zero points, one and three rows.
TEST_P(QGemmFastTest, GemvSumsWrapAsInt64SumsNarrowedToInt32) {
  std::mt19937 rng(57);
  for (int64_t k : {int64_t{1}, int64_t{9}, int64_t{70001}})
    for (bool a_signed : {false, true})
      for (bool b_signed : {false, true})
        for (int64_t m : {int64_t{1}, int64_t{3}}) {  // one row: two panels a pass
          const int64_t n = 21 + 16 * m;
          const DataType at = a_signed ? DataType::kInt8 : DataType::kUint8;
          const DataType bt = b_signed ? DataType::kInt8 : DataType::kUint8;
          Tensor a = testing::Random8(at, {m, k}, rng), b = testing::Random8(bt, {k, n}, rng);
          if (k > 1000) {  // the largest products: A at its top, B at its top (uint8) or bottom (int8)
            std::memset(a.raw_data(), a_signed ? 0x80 : 0xFF, static_cast<size_t>(a.byte_size()));
            std::memset(b.raw_data(), b_signed ? 0x80 : 0xFF, static_cast<size_t>(b.byte_size()));
          }
          const auto* ab = static_cast<const uint8_t*>(a.raw_data());
          const auto* bb = static_cast<const uint8_t*>(b.raw_data());
          auto value = [](const uint8_t* p, int64_t i, bool is_signed) {
            return is_signed ? int64_t{static_cast<int8_t>(p[i])} : int64_t{p[i]};
          };
          const int32_t za = a_signed ? 100 : 3;
          std::vector<int32_t> zb(static_cast<size_t>(n));
          for (int64_t j = 0; j < n; ++j) zb[static_cast<size_t>(j)] = static_cast<int32_t>(b_signed ? j - 10 : 2 * j);
          std::vector<int32_t> want(static_cast<size_t>(m * n));
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              int64_t acc = 0;
              for (int64_t p = 0; p < k; ++p)
                acc += (value(ab, i * k + p, a_signed) - za) *
                       (value(bb, p * n + j, b_signed) - zb[static_cast<size_t>(j)]);
              want[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(static_cast<uint32_t>(acc));
            }
          cpu::QGemvPackedB packed;
          cpu::QGemvPackB(bb, k, n, b_signed, false, &packed);
          for (int threads : {1, 2})
            testing::WithPoolContext(threads, [&](KernelContext& ctx) {
              std::vector<int32_t> got(static_cast<size_t>(m * n), -1);
              cpu::QGemv(&ctx, ab, a_signed, m, za, packed, zb.data(), 1, got.data(), n);
              EXPECT_EQ(got, want) << "k " << k << " a_signed " << a_signed << " b_signed " << b_signed << " m " << m;
            });
        }
}

// What the fast kernel leaves to the reference: a transposed A and a C of [m, n]; malformed inputs, which the
// reference reports.
TEST_P(QGemmFastTest, OtherCasesGoToTheReference) {
  std::mt19937 rng(53);
  Case c{4, 8, 5, DataType::kUint8, DataType::kInt8, DataType::kUint8, true, {4, 5}};
  ExpectAsReference(c, MakeInputs(c, rng), {}, "C of [m, n]");
  c.c_dims = {5};
  std::vector<Value> in = MakeInputs(c, rng);
  in[0] = Value(testing::Random8(DataType::kUint8, {8, 4}, rng));  // A as [k, m]
  ExpectAsReference(c, in, {testing::IntAttr("transA", 1)}, "transA");

  const Node node = testing::MakeNode("QGemm", 9, 1, {}, "com.microsoft");
  in = MakeInputs(c, rng);
  in[3] = Value(testing::Random8(DataType::kInt8, {7, 5}, rng));  // k mismatch
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  in = MakeInputs(c, rng);
  in[4] = Value(Scale({4}, rng, 0.01f, 0.02f));  // b_scale neither 1 nor n
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  in = MakeInputs(c, rng);
  in[6] = Value(Bias({6}, rng));  // C not broadcastable
  EXPECT_FALSE(RunFast(node, in, 2).ok());
  const Node trans_node = testing::MakeNode("QGemm", 9, 1, {testing::IntAttr("transB", 1)}, "com.microsoft");
  in = MakeInputs(c, rng);
  in[3] = Value(testing::Random8(DataType::kInt8, {5, 7}, rng));  // transposed B's k mismatch
  EXPECT_FALSE(RunFast(trans_node, in, 2).ok());
}

INSTANTIATE_TEST_SUITE_P(Isa, QGemmFastTest, testing::AllGemmIsas(), testing::IsaName);

}  // namespace
}  // namespace nee
