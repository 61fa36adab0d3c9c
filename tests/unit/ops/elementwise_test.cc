// Tests for ops/elementwise_math.cc. Unless a comment says otherwise,
// expected values were computed with numpy 2.4 in /work/main/.venv (float32
// arithmetic for float inputs, the same dtype for integer inputs), e.g.
//   a = np.array([[1.5,-2,3.25],[0.5,4,-1]], np.float32); print(a + np.array([10,-.5,2], np.float32))
// and pasted here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectRegisteredVersions;
using testing::ExpectTensorNear;
using testing::FloatAttr;
using testing::IntAttr;
using testing::MakeNode;
using testing::RunError;
using testing::RunOne;
using testing::StringAttr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename T>
Value V(std::vector<int64_t> dims, std::vector<T> values) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

// A float16 or bfloat16 tensor from its raw bits.
Value Bits(DataType type, std::vector<int64_t> dims, const std::vector<uint16_t>& bits) {
  Tensor t = Tensor::Allocate(type, std::move(dims)).value();
  for (size_t i = 0; i < bits.size(); ++i) t.data<uint16_t>()[i] = bits[i];
  return Value(t);
}

std::vector<uint16_t> BitsOf(const Tensor& t) {
  return std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.num_elements());
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// ---- Add, Sub, Mul, Div ------------------------------------------------------

TEST(ElementwiseMath, AddSubBroadcastRow) {
  Value a = V<float>({2, 3}, {1.5f, -2.0f, 3.25f, 0.5f, 4.0f, -1.0f});
  Value b = V<float>({3}, {10.0f, -0.5f, 2.0f});
  ExpectTensorNear<float>(RunOne("Add", 14, {a, b}), {2, 3}, {11.5, -2.5, 5.25, 10.5, 3.5, 1});
  ExpectTensorNear<float>(RunOne("Sub", 14, {a, b}), {2, 3}, {-8.5, -1.5, 1.25, -9.5, 4.5, -3});
  // Every registered version resolves and agrees.
  for (int opset : {7, 13, 14, 21})
    ExpectTensorNear<float>(RunOne("Add", opset, {a, b}), {2, 3}, {11.5, -2.5, 5.25, 10.5, 3.5, 1});
}

TEST(ElementwiseMath, MulBroadcastsBothWays) {
  // x = np.arange(6).reshape(2,1,3)*0.5-1, y = [[2],[-1],[.25],[3]] -> x * y of shape [2,4,3].
  Value x = V<float>({2, 1, 3}, {-1, -0.5, 0, 0.5, 1, 1.5});
  Value y = V<float>({4, 1}, {2, -1, 0.25, 3});
  ExpectTensorNear<float>(RunOne("Mul", 14, {x, y}), {2, 4, 3},
                          {-2, -1, 0, 1, 0.5, -0, -0.25, -0.125, 0, -3, -1.5, 0,
                           1, 2, 3, -0.5, -1, -1.5, 0.125, 0.25, 0.375, 1.5, 3, 4.5});
}

TEST(ElementwiseMath, ScalarsAndEmpty) {
  Value s = V<float>({}, {2.0f});
  Value t = V<float>({3}, {1, 2, 3});
  ExpectTensorNear<float>(RunOne("Sub", 14, {s, t}), {3}, {1, 0, -1});
  ExpectTensorNear<float>(RunOne("Sub", 14, {t, s}), {3}, {-1, 0, 1});
  ExpectTensorNear<float>(RunOne("Mul", 14, {s, s}), {}, {4});
  // [0,3] + [3] -> [0,3]; [0] + [1] -> [0].
  ExpectTensorNear<float>(RunOne("Add", 14, {V<float>({0, 3}, {}), t}), {0, 3}, {});
  ExpectTensorNear<int32_t>(RunOne("Add", 14, {V<int32_t>({0}, {}), V<int32_t>({1}, {5})}), {0}, {});
}

TEST(ElementwiseMath, IntegerArithmeticWrapsLikeNumpy) {
  ExpectTensorNear<int32_t>(
      RunOne("Add", 14, {V<int32_t>({2}, {2147483647, -2147483647 - 1}), V<int32_t>({2}, {1, -1})}), {2},
      {-2147483647 - 1, 2147483647});
  ExpectTensorNear<uint8_t>(RunOne("Sub", 14, {V<uint8_t>({2}, {3, 250}), V<uint8_t>({2}, {5, 10})}), {2}, {254, 240});
  ExpectTensorNear<int64_t>(
      RunOne("Mul", 14, {V<int64_t>({2}, {int64_t{1} << 62, 3}), V<int64_t>({2}, {4, -5})}), {2}, {0, -15});
  // uint16 * uint16 must not overflow through int promotion: 65535 * 65535 mod 2^16 = 1.
  ExpectTensorNear<uint16_t>(RunOne("Mul", 14, {V<uint16_t>({1}, {65535}), V<uint16_t>({1}, {65535})}), {1}, {1});
}

TEST(ElementwiseMath, DivFloatFollowsIeee) {
  ExpectTensorNear<float>(RunOne("Div", 14, {V<float>({4}, {1, -1, 0, 7}), V<float>({4}, {0, 0, 0, 2})}), {4},
                          {kInf, -kInf, kNaN, 3.5});
  // double: 1/3 exactly as numpy float64.
  ExpectTensorNear<double>(RunOne("Div", 14, {V<double>({1}, {1.0}), V<double>({1}, {3.0})}), {1},
                           {0.33333333333333331}, 1e-15);
}

TEST(ElementwiseMath, IntegerDivTruncatesTowardZero) {
  // C semantics; numpy: np.trunc(a / b).astype(np.int32) -> [3,-3,-3,3].
  ExpectTensorNear<int32_t>(RunOne("Div", 14, {V<int32_t>({4}, {7, -7, 7, -7}), V<int32_t>({4}, {2, 2, -2, -2})}),
                            {4}, {3, -3, -3, 3});
  // INT_MIN / -1 wraps to INT_MIN instead of trapping.
  ExpectTensorNear<int32_t>(RunOne("Div", 14, {V<int32_t>({1}, {-2147483647 - 1}), V<int32_t>({1}, {-1})}), {1},
                            {-2147483647 - 1});
  ExpectTensorNear<uint8_t>(RunOne("Div", 14, {V<uint8_t>({2}, {255, 7}), V<uint8_t>({}, {2})}), {2}, {127, 3});
}

TEST(ElementwiseMath, IntegerDivisionByZeroIsAnError) {
  Status s = RunError("Div", 14, {V<int32_t>({2}, {1, 2}), V<int32_t>({2}, {1, 0})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "zero divisor")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "Div")) << s.message();
  s = RunError("Mod", 13, {V<int64_t>({1}, {1}), V<int64_t>({1}, {0})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ElementwiseMath, Float16AndBFloat16ComputeViaFloat) {
  // h = np.array([0.1,1000,-3.3,65504], np.float16); h2 = np.array([0.2,0.5,1.1,100], np.float16)
  // (h + h2).view(np.uint16) -> [13516, 25553, 49255, 31744] (the last overflows to inf).
  Tensor h = RunOne("Add", 14, {Bits(DataType::kFloat16, {4}, {11878, 25552, 49818, 31743}),
                             Bits(DataType::kFloat16, {4}, {12902, 14336, 15462, 22080})});
  ASSERT_EQ(h.dtype(), DataType::kFloat16);
  EXPECT_EQ(BitsOf(h), (std::vector<uint16_t>{13516, 25553, 49255, 31744}));
  // ml_dtypes.bfloat16: [1.5,-3,0.1,256] * [2.25,0.125,0.2,1] -> bits [16472, 48832, 15524, 17280].
  Tensor b = RunOne("Mul", 14, {Bits(DataType::kBFloat16, {4}, {16320, 49216, 15821, 17280}),
                             Bits(DataType::kBFloat16, {4}, {16400, 15872, 15949, 16256})});
  ASSERT_EQ(b.dtype(), DataType::kBFloat16);
  EXPECT_EQ(BitsOf(b), (std::vector<uint16_t>{16472, 48832, 15524, 17280}));
}

TEST(ElementwiseMath, LegacyBroadcastAttributesBeforeOpset7) {
  // A = np.arange(24).reshape(2,3,4); A + B[None,:,None] with B = [1,10,100].
  std::vector<float> a(24);
  for (int i = 0; i < 24; ++i) a[i] = static_cast<float>(i);
  Value A = V<float>({2, 3, 4}, a);
  ExpectTensorNear<float>(RunOne("Add", 6, {A, V<float>({3}, {1, 10, 100})}, {IntAttr("broadcast", 1), IntAttr("axis", 1)}),
                          {2, 3, 4}, {1,  2,  3,  4,  14, 15, 16, 17, 108, 109, 110, 111,
                                      13, 14, 15, 16, 26, 27, 28, 29, 120, 121, 122, 123});
  // Without axis B matches the trailing dims: A + [1,2,3,4].
  ExpectTensorNear<float>(RunOne("Add", 6, {A, V<float>({4}, {1, 2, 3, 4})}, {IntAttr("broadcast", 1)}), {2, 3, 4},
                          {1, 3, 5, 7, 5, 7, 9, 11, 9, 11, 13, 15, 13, 15, 17, 19, 17, 19, 21, 23, 21, 23, 25, 27});
  // broadcast=0 requires equal shapes.
  EXPECT_FALSE(RunError("Add", 6, {A, V<float>({4}, {1, 2, 3, 4})}).ok());
  // A dim that does not match at the axis is rejected.
  EXPECT_FALSE(RunError("Mul", 1, {A, V<float>({3}, {1, 2, 3})}, {IntAttr("broadcast", 1)}).ok());
}

TEST(ElementwiseMath, BadOperandsGiveErrors) {
  Status s = RunError("Add", 14, {V<float>({2, 3}, {1, 2, 3, 4, 5, 6}), V<float>({4}, {1, 2, 3, 4})});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "broadcast")) << s.message();
  s = RunError("Add", 14, {V<float>({1}, {1}), V<double>({1}, {1})});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "double")) << s.message();
  s = RunError("Add", 14, {V<std::string>({1}, {"a"}), V<std::string>({1}, {"b"})});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "Add")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "string")) << s.message();
  s = RunError("Sqrt", 13, {V<int32_t>({1}, {4})});
  EXPECT_TRUE(Contains(s.message(), "Sqrt") && Contains(s.message(), "int32")) << s.message();
}

TEST(ElementwiseMath, ParallelBroadcastMatchesClosedForm) {
  // a[i,j,k] = i*1000 + k, b[j,1] = j: a + b = i*1000 + k + j, exact in float.
  const int I = 64, J = 33, K = 517;
  std::vector<float> a(static_cast<size_t>(I) * K), b(J);
  for (int i = 0; i < I; ++i)
    for (int k = 0; k < K; ++k) a[static_cast<size_t>(i) * K + k] = static_cast<float>(i * 1000 + k);
  for (int j = 0; j < J; ++j) b[j] = static_cast<float>(j);
  std::vector<float> expected;
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < J; ++j)
      for (int k = 0; k < K; ++k) expected.push_back(static_cast<float>(i * 1000 + k + j));
  for (int threads : {1, 4})
    ExpectTensorNear<float>(RunOne("Add", 14, {V<float>({I, 1, K}, a), V<float>({J, 1}, b)}, {}, threads), {I, J, K},
                            expected, 0);
  // Same-shape fast path, threaded.
  ExpectTensorNear<float>(RunOne("Sub", 14, {V<float>({I, J, K}, expected), V<float>({I, J, K}, expected)}, {}, 4),
                          {I, J, K}, std::vector<float>(expected.size(), 0.0f), 0);
}

// ---- Pow -----------------------------------------------------------------------

TEST(ElementwiseMath, PowMixedTypes) {
  // np.power(float32 [2,4,-8,.5], float32 [3,.5,1/3,-2]) -> [8,2,nan,4].
  ExpectTensorNear<float>(RunOne("Pow", 15, {V<float>({4}, {2, 4, -8, 0.5}), V<float>({4}, {3, 0.5, 1.0f / 3, -2})}),
                          {4}, {8, 2, kNaN, 4});
  // np.power(int32 [2,3,-2,5,7], int64 [3,2,3,0,1]).astype(int32) -> [8,9,-8,1,7].
  ExpectTensorNear<int32_t>(
      RunOne("Pow", 15, {V<int32_t>({5}, {2, 3, -2, 5, 7}), V<int64_t>({5}, {3, 2, 3, 0, 1})}), {5}, {8, 9, -8, 1, 7});
  // np.power(float32 [1.5,-2,3], int64 [2,3,-1]).astype(float32) -> [2.25,-8,0.333333343].
  ExpectTensorNear<float>(RunOne("Pow", 15, {V<float>({3}, {1.5, -2, 3}), V<int64_t>({3}, {2, 3, -1})}), {3},
                          {2.25, -8, 0.333333343f});
  // np.power(int64 [4,9,2], float32 [.5,.5,1.5]).astype(int64) -> [2,3,2].
  ExpectTensorNear<int64_t>(RunOne("Pow", 15, {V<int64_t>({3}, {4, 9, 2}), V<float>({3}, {0.5, 0.5, 1.5})}), {3},
                            {2, 3, 2});
  // Broadcast scalar exponent, opset 7 entry.
  ExpectTensorNear<double>(RunOne("Pow", 7, {V<double>({2, 2}, {1, 2, 3, 4}), V<double>({}, {2})}), {2, 2},
                           {1, 4, 9, 16});
}

// ---- Mod -------------------------------------------------------------------------

TEST(ElementwiseMath, ModIntegerSignRules) {
  Value a = V<int32_t>({6}, {7, -7, 7, -7, 0, 5});
  Value b = V<int32_t>({6}, {3, 3, -3, -3, 2, 7});
  // np.mod (sign of divisor) and np.fmod (sign of dividend).
  ExpectTensorNear<int32_t>(RunOne("Mod", 13, {a, b}), {6}, {1, 2, -2, -1, 0, 5});
  ExpectTensorNear<int32_t>(RunOne("Mod", 13, {a, b}, {IntAttr("fmod", 1)}), {6}, {1, -1, 1, -1, 0, 5});
  ExpectTensorNear<int32_t>(RunOne("Mod", 13, {V<int32_t>({1}, {-2147483647 - 1}), V<int32_t>({1}, {-1})}), {1}, {0});
  EXPECT_FALSE(RunError("Mod", 13, {a, b}, {IntAttr("fmod", 2)}).ok());
}

TEST(ElementwiseMath, ModFloat) {
  Value a = V<float>({6}, {5.5, -5.5, 5.5, -5.5, 0.0, 3.0});
  Value b = V<float>({6}, {2, 2, -2, -2, -3, kInf});
  // np.mod -> [1.5,0.5,-0.5,-1.5,-0.,3]; np.fmod -> [1.5,-1.5,1.5,-1.5,0,3].
  Tensor m = RunOne("Mod", 28, {a, b});
  ExpectTensorNear<float>(m, {6}, {1.5, 0.5, -0.5, -1.5, -0.0, 3});
  EXPECT_TRUE(std::signbit(m.data<float>()[4]));  // np.signbit(np.mod(0, -3)) is True
  ExpectTensorNear<float>(RunOne("Mod", 10, {a, b}, {IntAttr("fmod", 1)}), {6}, {1.5, -1.5, 1.5, -1.5, 0, 3});
}

// ---- Unary math ------------------------------------------------------------------

TEST(ElementwiseMath, RoundingAndSign) {
  Value u = V<float>({7}, {-2.5, -0.5, 0.0, 0.5, 1.5, 2.5, 3.7f});
  ExpectTensorNear<float>(RunOne("Floor", 13, {u}), {7}, {-3, -1, 0, 0, 1, 2, 3});
  ExpectTensorNear<float>(RunOne("Ceil", 13, {u}), {7}, {-2, -0, 0, 1, 2, 3, 4});
  ExpectTensorNear<float>(RunOne("Round", 22, {u}), {7}, {-2, -0, 0, 0, 2, 2, 4});  // np.round: half to even
  ExpectTensorNear<float>(RunOne("Sign", 13, {u}), {7}, {-1, -1, 0, 1, 1, 1, 1});
  ExpectTensorNear<float>(RunOne("Abs", 13, {u}), {7}, {2.5, 0.5, 0, 0.5, 1.5, 2.5, 3.70000005f});
  ExpectTensorNear<float>(RunOne("Neg", 13, {u}), {7}, {2.5, 0.5, -0, -0.5, -1.5, -2.5, -3.70000005f});
}

TEST(ElementwiseMath, IntegerUnary) {
  // np.abs / np.negative on int8 wrap at -128; np.sign on int and uint.
  ExpectTensorNear<int8_t>(RunOne("Abs", 13, {V<int8_t>({3}, {-128, -5, 7})}), {3}, {-128, 5, 7});
  ExpectTensorNear<int8_t>(RunOne("Neg", 13, {V<int8_t>({3}, {-128, -5, 7})}), {3}, {-128, 5, -7});
  ExpectTensorNear<int64_t>(RunOne("Sign", 13, {V<int64_t>({3}, {-9, 0, 4})}), {3}, {-1, 0, 1});
  ExpectTensorNear<uint16_t>(RunOne("Sign", 13, {V<uint16_t>({2}, {0, 9})}), {2}, {0, 1});
  ExpectTensorNear<uint32_t>(RunOne("Abs", 13, {V<uint32_t>({1}, {4000000000u})}), {1}, {4000000000u});
  EXPECT_FALSE(RunError("Neg", 13, {V<uint8_t>({1}, {1})}).ok());
}

TEST(ElementwiseMath, ExpLogFamily) {
  Value p = V<float>({4}, {0.25, 1, 2, 9});
  ExpectTensorNear<float>(RunOne("Sqrt", 13, {p}), {4}, {0.5, 1, 1.41421354f, 3});
  ExpectTensorNear<float>(RunOne("Exp", 13, {p}), {4}, {1.28402555f, 2.71828198f, 7.38905573f, 8103.08398f});
  ExpectTensorNear<float>(RunOne("Log", 13, {p}), {4}, {-1.38629436f, 0, 0.693147182f, 2.19722462f});
  ExpectTensorNear<float>(RunOne("Reciprocal", 13, {p}), {4}, {4, 1, 0.5, 0.111111112f});
  // float64: np.exp([-1.25,0,2]) and math.erf.
  Value d = V<double>({3}, {-1.25, 0.0, 2.0});
  ExpectTensorNear<double>(RunOne("Exp", 13, {d}), {3}, {0.28650479686019009, 1, 7.3890560989306504}, 1e-14);
  ExpectTensorNear<double>(RunOne("Erf", 13, {d}), {3}, {-0.92290012825645817, 0, 0.99532226501895271}, 1e-14);
  // Older registrations still resolve.
  ExpectTensorNear<float>(RunOne("Sqrt", 6, {p}), {4}, {0.5, 1, 1.41421354f, 3});
}

TEST(ElementwiseMath, TrigonometricAndHyperbolic) {
  Value t = V<float>({5}, {-0.9f, -0.3f, 0.0f, 0.4f, 0.8f});
  // np.sin(t) etc. in float32; erf from math.erf rounded to float32.
  ExpectTensorNear<float>(RunOne("Sin", 7, {t}), {5}, {-0.783326924f, -0.295520216f, 0, 0.389418334f, 0.717356086f});
  ExpectTensorNear<float>(RunOne("Cos", 22, {t}), {5}, {0.621609986f, 0.955336511f, 1, 0.921060979f, 0.696706712f});
  ExpectTensorNear<float>(RunOne("Tan", 22, {t}), {5}, {-1.26015806f, -0.309336275f, 0, 0.422793239f, 1.02963853f});
  ExpectTensorNear<float>(RunOne("Asin", 22, {t}), {5}, {-1.11976957f, -0.304692656f, 0, 0.411516845f, 0.927295268f});
  ExpectTensorNear<float>(RunOne("Acos", 22, {t}), {5}, {2.69056582f, 1.875489f, 1.57079637f, 1.15927958f, 0.643501103f});
  ExpectTensorNear<float>(RunOne("Atan", 22, {t}), {5}, {-0.732815087f, -0.291456819f, 0, 0.380506366f, 0.67474097f});
  ExpectTensorNear<float>(RunOne("Sinh", 9, {t}), {5}, {-1.02651668f, -0.304520309f, 0, 0.410752326f, 0.888105989f});
  ExpectTensorNear<float>(RunOne("Cosh", 22, {t}), {5}, {1.4330864f, 1.04533839f, 1, 1.08107245f, 1.33743501f});
  ExpectTensorNear<float>(RunOne("Asinh", 22, {t}), {5}, {-0.808866918f, -0.295673072f, 0, 0.390035331f, 0.732668281f});
  ExpectTensorNear<float>(RunOne("Atanh", 22, {t}), {5}, {-1.47221935f, -0.309519619f, 0, 0.423648924f, 1.09861231f});
  ExpectTensorNear<float>(RunOne("Erf", 13, {t}), {5}, {-0.7969082f, -0.328626782f, 0, 0.428392351f, 0.742100954f});
  ExpectTensorNear<float>(RunOne("Acosh", 22, {V<float>({4}, {1, 1.5, 3, 10})}), {4},
                          {0, 0.962423623f, 1.76274717f, 2.99322295f});
}

// ---- Variadic ----------------------------------------------------------------------

TEST(ElementwiseMath, VariadicWithBroadcasting) {
  Value a = V<float>({2, 3}, {1, 5, -2, 7, 0, 3});
  Value b = V<float>({3}, {4, -1, 2});
  Value c = V<float>({2, 1}, {0.5, 10});
  ExpectTensorNear<float>(RunOne("Max", 13, {a, b, c}), {2, 3}, {4, 5, 2, 10, 10, 10});
  ExpectTensorNear<float>(RunOne("Min", 13, {a, b, c}), {2, 3}, {0.5, -1, -2, 4, -1, 2});
  ExpectTensorNear<float>(RunOne("Sum", 13, {a, b, c}), {2, 3}, {5.5, 4.5, 0.5, 21, 9, 15});
  ExpectTensorNear<float>(RunOne("Mean", 13, {a, b, c}), {2, 3}, {1.83333337f, 1.5, 0.166666672f, 7, 3, 5});
  // One input is a copy; the output shape can come from a later input.
  ExpectTensorNear<float>(RunOne("Sum", 13, {b}), {3}, {4, -1, 2});
  ExpectTensorNear<float>(RunOne("Max", 8, {b, a}), {2, 3}, {4, 5, 2, 7, 0, 3});
}

TEST(ElementwiseMath, MinMaxNaNAndIntegers) {
  // np.maximum propagates NaN from either side.
  ExpectTensorNear<float>(RunOne("Max", 13, {V<float>({3}, {1, kNaN, 3}), V<float>({3}, {kNaN, 2, 1})}), {3},
                          {kNaN, kNaN, 3});
  ExpectTensorNear<float>(RunOne("Min", 13, {V<float>({3}, {1, kNaN, 3}), V<float>({3}, {kNaN, 2, 1})}), {3},
                          {kNaN, kNaN, 1});
  // np.minimum(int16 [5,-3,100], [[2],[-10]]).
  ExpectTensorNear<int16_t>(RunOne("Min", 13, {V<int16_t>({3}, {5, -3, 100}), V<int16_t>({2, 1}, {2, -10})}), {2, 3},
                            {2, -3, 2, -10, -10, -10});
  EXPECT_FALSE(RunError("Sum", 13, {V<int32_t>({1}, {1}), V<int32_t>({1}, {2})}).ok());  // Sum is float-only
  EXPECT_FALSE(RunError("Max", 13, {V<float>({2}, {1, 2}), V<float>({3}, {1, 2, 3})}).ok());
}

// ---- Bit operations ------------------------------------------------------------------

TEST(ElementwiseMath, BitShift) {
  // np.left_shift / np.right_shift in the same dtype.
  ExpectTensorNear<uint8_t>(RunOne("BitShift", 11, {V<uint8_t>({4}, {1, 3, 255, 16}), V<uint8_t>({4}, {1, 2, 1, 4})},
                                {StringAttr("direction", "LEFT")}),
                            {4}, {2, 12, 254, 0});
  ExpectTensorNear<uint32_t>(
      RunOne("BitShift", 11, {V<uint32_t>({4}, {16, 255, 1, 4294967295u}), V<uint32_t>({4}, {2, 4, 1, 31})},
          {StringAttr("direction", "RIGHT")}),
      {4}, {4, 15, 0, 1});
  // Signed (BitShift-28): arithmetic right shift; left shift through the sign bit
  // (np.left_shift on the uint16 view).
  ExpectTensorNear<int8_t>(RunOne("BitShift", 28, {V<int8_t>({4}, {-16, -1, 64, -128}), V<int8_t>({4}, {2, 7, 3, 1})},
                               {StringAttr("direction", "RIGHT")}),
                           {4}, {-4, -1, 8, -64});
  ExpectTensorNear<int16_t>(RunOne("BitShift", 28, {V<int16_t>({4}, {1, -1, 16384, 3}), V<int16_t>({4}, {15, 4, 1, 2})},
                                {StringAttr("direction", "LEFT")}),
                            {4}, {-32768, -16, -32768, 12});
  // Out-of-range amounts (spec of BitShift-28, as onnx.reference): 0, or -1 for a right shift of a negative.
  ExpectTensorNear<int32_t>(RunOne("BitShift", 28, {V<int32_t>({4}, {5, -5, 5, -5}), V<int32_t>({4}, {32, 40, -1, -1})},
                                {StringAttr("direction", "RIGHT")}),
                            {4}, {0, -1, 0, -1});
  ExpectTensorNear<uint64_t>(RunOne("BitShift", 28, {V<uint64_t>({2}, {1, 1}), V<uint64_t>({2}, {63, 64})},
                                 {StringAttr("direction", "LEFT")}),
                             {2}, {uint64_t{1} << 63, 0});
  EXPECT_FALSE(RunError("BitShift", 11, {V<uint8_t>({1}, {1}), V<uint8_t>({1}, {1})},
                        {StringAttr("direction", "UP")}).ok());
}

TEST(ElementwiseMath, BitwiseOps) {
  ExpectTensorNear<int32_t>(RunOne("BitwiseAnd", 18, {V<int32_t>({3}, {12, -1, 255}), V<int32_t>({3}, {10, 7, -256})}),
                            {3}, {8, 7, 0});
  ExpectTensorNear<uint16_t>(RunOne("BitwiseOr", 18, {V<uint16_t>({3}, {12, 1, 0}), V<uint16_t>({1}, {3})}), {3},
                             {15, 3, 3});
  ExpectTensorNear<int64_t>(RunOne("BitwiseXor", 18, {V<int64_t>({3}, {12, -1, 0}), V<int64_t>({3}, {10, 5, -9})}), {3},
                            {6, -6, -9});
  ExpectTensorNear<int8_t>(RunOne("BitwiseNot", 18, {V<int8_t>({4}, {0, -1, 5, 127})}), {4}, {-1, 0, -6, -128});
  ExpectTensorNear<uint8_t>(RunOne("BitwiseNot", 18, {V<uint8_t>({3}, {0, 255, 5})}), {3}, {255, 0, 250});
  EXPECT_FALSE(RunError("BitwiseAnd", 18, {V<float>({1}, {1}), V<float>({1}, {1})}).ok());
}

// ---- IsNaN, IsInf ----------------------------------------------------------------------

TEST(ElementwiseMath, IsNaNIsInf) {
  Value x = V<float>({5}, {1.0, kNaN, kInf, -kInf, -0.0});
  ExpectTensorNear<bool>(RunOne("IsNaN", 20, {x}), {5}, {false, true, false, false, false});
  ExpectTensorNear<bool>(RunOne("IsInf", 20, {x}), {5}, {false, false, true, true, false});
  // np.isneginf / np.isposinf.
  ExpectTensorNear<bool>(RunOne("IsInf", 10, {x}, {IntAttr("detect_positive", 0)}), {5},
                         {false, false, false, true, false});
  ExpectTensorNear<bool>(RunOne("IsInf", 10, {x}, {IntAttr("detect_negative", 0)}), {5},
                         {false, false, true, false, false});
  // float16 bits: 0x7e00 is NaN, 0x7c00 +inf, 0x3c00 1.0.
  ExpectTensorNear<bool>(RunOne("IsNaN", 13, {Bits(DataType::kFloat16, {3}, {0x7e00, 0x7c00, 0x3c00})}), {3},
                         {true, false, false});
  // float8e4m3fn: 0x7f and 0xff are NaN, 0x38 is 1.0, 0x7e is 448 (ml_dtypes.float8_e4m3fn).
  Tensor f8 = Tensor::Allocate(DataType::kFloat8E4M3FN, {4}).value();
  const uint8_t f8_bits[] = {0x7f, 0xff, 0x38, 0x7e};
  for (int i = 0; i < 4; ++i) f8.data<uint8_t>()[i] = f8_bits[i];
  ExpectTensorNear<bool>(RunOne("IsNaN", 20, {Value(f8)}), {4}, {true, true, false, false});
  ExpectTensorNear<bool>(RunOne("IsInf", 20, {Value(f8)}), {4}, {false, false, false, false});
}

// ---- Shape rules ------------------------------------------------------------------------

TEST(ElementwiseMath, ShapeRuleBroadcastsSymbolicDims) {
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Add", 14).value();
  Node node = MakeNode("Add", 2, 1);
  TypeInfo a = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(1), Dim::Known(4)});
  TypeInfo b = TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Known(3), Dim::Known(1)});
  InferenceContext ictx{node, 14, {&a, &b}, {nullptr, nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(schema->infer(ictx).ok());
  const TypeInfo& out = ictx.output_types[0];
  EXPECT_EQ(out.elem_type, DataType::kFloat);
  ASSERT_TRUE(out.shape.has_value());
  EXPECT_EQ(ShapeToString(*out.shape), "[N,3,4]");

  // Mismatched element types and disallowed types are definite errors.
  TypeInfo i = TypeInfo::Tensor(DataType::kInt32, Shape{Dim::Known(3), Dim::Known(1)});
  InferenceContext bad{node, 14, {&a, &i}, {nullptr, nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  EXPECT_FALSE(schema->infer(bad).ok());
  TypeInfo s = TypeInfo::Tensor(DataType::kString, std::nullopt);
  InferenceContext strings{node, 14, {&s, &s}, {nullptr, nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  EXPECT_FALSE(schema->infer(strings).ok());
}

// Shape arithmetic folds at check time: Mul(Gather(Shape(x)), [4]) style
// values (numpy: np.array([2, 3]) * 4 and np.array([12]) // 5).
TEST(ElementwiseMath, ShapeRulesPropagateSmallIntegerValues) {
  Tensor dims = Tensor::FromVector<int64_t>({2, 3}, {2});
  Tensor four = Tensor::FromVector<int64_t>({4}, {1});
  TypeInfo t2 = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(2)});
  TypeInfo t1 = TypeInfo::Tensor(DataType::kInt64, Shape{Dim::Known(1)});
  Node mul = MakeNode("Mul", 2, 1);
  InferenceContext m{mul, 14, {&t2, &t1}, {&dims, &four}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Mul", 14).value()->infer(m).ok());
  ASSERT_TRUE(m.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*m.output_values[0], {2}, {8, 12});

  Tensor twelve = Tensor::FromVector<int64_t>({12}, {1});
  Tensor five = Tensor::FromVector<int64_t>({5}, {1});
  Node div = MakeNode("Div", 2, 1);
  InferenceContext d{div, 14, {&t1, &t1}, {&twelve, &five}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Div", 14).value()->infer(d).ok());
  ASSERT_TRUE(d.output_values[0].has_value());
  ExpectTensorNear<int64_t>(*d.output_values[0], {1}, {2});

  // A zero divisor is left for the run to report: no value, no rule error.
  Tensor zero = Tensor::FromVector<int64_t>({0}, {1});
  InferenceContext z{div, 14, {&t1, &t1}, {&twelve, &zero}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(OpRegistry::Global().Resolve("", "Div", 14).value()->infer(z).ok());
  EXPECT_FALSE(z.output_values[0].has_value());
}

// Since-versions of each op as onnx 1.23.2 lists them:
//   sorted(s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op and s.domain == "")
TEST(ElementwiseMath, RegistersEveryOnnxVersion) {
  const std::vector<std::pair<std::string, std::vector<int>>> kVersions = {
      {"Add", {1, 6, 7, 13, 14}}, {"Sub", {1, 6, 7, 13, 14}}, {"Mul", {1, 6, 7, 13, 14}},
      {"Div", {1, 6, 7, 13, 14}}, {"Pow", {1, 7, 12, 13, 15}}, {"Mod", {10, 13, 28}}, {"Neg", {1, 6, 13}},
      {"Abs", {1, 6, 13}}, {"Sqrt", {1, 6, 13}}, {"Exp", {1, 6, 13}}, {"Log", {1, 6, 13}},
      {"Reciprocal", {1, 6, 13}}, {"Floor", {1, 6, 13}}, {"Ceil", {1, 6, 13}}, {"Round", {11, 22}},
      {"Sign", {9, 13}}, {"Erf", {9, 13}}, {"Sin", {7, 22}}, {"Cos", {7, 22}}, {"Tan", {7, 22}},
      {"Asin", {7, 22}}, {"Acos", {7, 22}}, {"Atan", {7, 22}}, {"Sinh", {9, 22}}, {"Cosh", {9, 22}},
      {"Asinh", {9, 22}}, {"Acosh", {9, 22}}, {"Atanh", {9, 22}}, {"Min", {1, 6, 8, 12, 13}},
      {"Max", {1, 6, 8, 12, 13}}, {"Mean", {1, 6, 8, 13}}, {"Sum", {1, 6, 8, 13}}, {"BitShift", {11, 28}},
      {"BitwiseAnd", {18}}, {"BitwiseOr", {18}}, {"BitwiseXor", {18}}, {"BitwiseNot", {18}},
      {"IsNaN", {9, 13, 20}}, {"IsInf", {10, 20}},
  };
  ExpectRegisteredVersions(kVersions);
}

}  // namespace
}  // namespace nee
