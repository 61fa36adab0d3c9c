// DFT, STFT, the window generators, MelWeightMatrix, CumProd and Det.
// Expected values were computed with onnx.reference / numpy by
// misc_expected_gen.py (section "signal").
#include <cmath>

#include "op_test_util.h"

namespace nee::testing {
namespace {

template <typename T>
Value V(std::vector<T> values, std::vector<int64_t> dims) {
  return Value(Tensor::FromVector<T>(values, std::move(dims)));
}

// (arange(n) % mod - mod // 2) * 0.5: the generator's `pattern`.
Value Pattern(std::vector<int64_t> dims, int mod) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i) % mod - mod / 2) * 0.5f;
  return V<float>(v, std::move(dims));
}

void ExpectError(const Result<OpRun>& r, const std::string& fragment) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
}

TEST(SignalDft, ForwardRfftAndPadding) {
  Value sig = Pattern({1, 5, 1}, 6);
  auto r = RunOp(MakeNode("DFT", 3, 1), 20, {sig, Value(), V<int64_t>({-2}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 5, 2},
                          {-2.5f, 0, -1.25f, 1.72047734f, -1.25f, 0.406149626f, -1.25f, -0.406149626f, -1.25f, -1.72047734f});
  // dft_length 8 zero-pads; onesided keeps 8 / 2 + 1 bins.
  r = RunOp(MakeNode("DFT", 3, 1, {IntAttr("onesided", 1)}), 20, {sig, V<int64_t>({8}, {}), V<int64_t>({1}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 5, 2},
                          {-2.5f, 0, -2.70710683f, 1.20710683f, -0.5f, 1, -1.29289317f, 0.207106784f, -0.5f, 0});
}

TEST(SignalDft, InverseAndIrfft) {
  // Opset 17: the axis is an attribute.
  auto r = RunOp(MakeNode("DFT", 1, 1, {IntAttr("inverse", 1), IntAttr("axis", 0)}), 17, {Pattern({2, 3, 2}, 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2, 3, 2},
                          {-0.75f, -0.25f, 0.25f, 0.75f, 0, -0.75f, -0.25f, -0.25f, -0.25f, -0.25f, 1, -0.25f});
  // inverse + onesided reads 3 bins and returns 2 * (3 - 1) real samples.
  r = RunOp(MakeNode("DFT", 3, 1, {IntAttr("inverse", 1), IntAttr("onesided", 1)}), 20,
            {Pattern({1, 3, 2}, 5), Value(), V<int64_t>({1}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 4, 1}, {0, -0.75f, 0, -0.25f}, 1e-6);
}

TEST(SignalDft, RejectsBadAxisAndLength) {
  Value sig = Pattern({1, 5, 1}, 6);
  ExpectError(RunOp(MakeNode("DFT", 3, 1), 20, {sig, Value(), V<int64_t>({2}, {})}), "axis");
  ExpectError(RunOp(MakeNode("DFT", 1, 1, {IntAttr("axis", -1)}), 17, {sig}), "axis");
  ExpectError(RunOp(MakeNode("DFT", 2, 1), 20, {sig, V<int64_t>({0}, {})}), "dft_length");
  ExpectError(RunOp(MakeNode("DFT", 2, 1), 20, {sig, V<int64_t>({int64_t{1} << 40}, {})}), "dft_length");
  ExpectError(RunOp(MakeNode("DFT", 1, 1), 20, {Pattern({1, 5, 3}, 6)}), "input 0");
}

TEST(SignalStft, WindowedOnesidedAndFull) {
  Value sig = Pattern({1, 10, 1}, 7);
  auto r = RunOp(MakeNode("STFT", 3, 1), 17, {sig, V<int64_t>({3}, {}), V<float>({0.2f, 0.7f, 1.0f, 0.5f}, {4})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 3, 3, 2},
                          {-1.5f, 0, 0.199999988f, 0.699999988f, -0.100000024f, 0, 2.0999999f, 0, -1, 0.400000006f,
                           -0.099999994f, 0, -2, 0, 1.29999995f, 0.799999952f, 0.599999964f, 0},
                          1e-5);
  r = RunOp(MakeNode("STFT", 4, 1, {IntAttr("onesided", 0)}), 17, {sig, V<int64_t>({4}, {}), Value(), V<int64_t>({3}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {1, 2, 3, 2},
                          {-3, 0, -0.75f, 0.433012694f, -0.75f, -0.433012694f, 3, 0, -0.75f, 0.433012694f, -0.75f, -0.433012694f},
                          1e-5);
  ExpectError(RunOp(MakeNode("STFT", 3, 1), 17, {sig, V<int64_t>({3}, {}), V<float>({1, 1}, {2, 1})}), "input 2");
  ExpectError(RunOp(MakeNode("STFT", 4, 1), 17, {sig, V<int64_t>({3}, {}), Value(), V<int64_t>({11}, {})}), "frame_length");
}

TEST(SignalWindows, HannHammingBlackmanAndMel) {
  auto r = RunOp(MakeNode("HannWindow", 1, 1, {IntAttr("periodic", 0)}), 17, {V<int64_t>({5}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {5}, {0, 0.5f, 1, 0.5f, 0}, 1e-6);
  r = RunOp(MakeNode("HammingWindow", 1, 1, {IntAttr("output_datatype", 11)}), 17, {V<int32_t>({4}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {4}, {0.0869565217, 0.543478261, 1, 0.543478261}, 1e-8);
  r = RunOp(MakeNode("BlackmanWindow", 1, 1), 17, {V<int64_t>({5}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {5}, {0, 0.20077014f, 0.849229872f, 0.849229872f, 0.20077014f}, 1e-6);
  r = RunOp(MakeNode("MelWeightMatrix", 5, 1), 17,
            {V<int64_t>({3}, {}), V<int64_t>({16}, {}), V<int64_t>({8000}, {}), V<float>({100}, {}), V<float>({3000}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> mel(27, 0.0f);
  mel[0] = mel[4] = mel[8] = 1;
  mel[11] = 0.5f;
  ExpectTensorNear<float>(r->outputs[0].tensor(), {9, 3}, mel);
  ExpectError(RunOp(MakeNode("HannWindow", 1, 1), 17, {V<int64_t>({-1}, {})}), "input 0");
  ExpectError(RunOp(MakeNode("HannWindow", 1, 1, {IntAttr("output_datatype", 8)}), 17, {V<int64_t>({3}, {})}),
              "output_datatype");
  // An upper edge beyond the Nyquist frequency would index past the spectrum.
  ExpectError(RunOp(MakeNode("MelWeightMatrix", 5, 1), 17,
                    {V<int64_t>({3}, {}), V<int64_t>({16}, {}), V<int64_t>({8000}, {}), V<float>({100}, {}),
                     V<float>({9000}, {})}),
              "spectrum bins");
}

TEST(SignalCumProd, ExclusiveReverseAndFloat) {
  auto r = RunOp(MakeNode("CumProd", 2, 1, {IntAttr("exclusive", 1), IntAttr("reverse", 1)}), 26,
                 {V<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}), V<int64_t>({1}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<int64_t>(r->outputs[0].tensor(), {2, 3}, {6, 3, 1, 30, 6, 1});
  r = RunOp(MakeNode("CumProd", 2, 1), 26, {V<float>({1.5f, -2, 0.5f, 3, 2, 0.25f}, {3, 2}), V<int32_t>({-2}, {})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {3, 2}, {1.5f, -2, 0.75f, -6, 1.5f, -1.5f});
  ExpectError(RunOp(MakeNode("CumProd", 2, 1), 26, {V<float>({1, 2}, {2}), V<int64_t>({1}, {})}), "input 1");
}

TEST(SignalDet, BatchedAndSingular) {
  // pattern((2, 3, 3), 7) + eye(3)
  std::vector<float> m(18);
  for (int i = 0; i < 18; ++i) m[static_cast<size_t>(i)] = static_cast<float>(i % 7 - 3) * 0.5f + ((i % 9) % 4 == 0 ? 1.0f : 0.0f);
  auto r = RunOp(MakeNode("Det", 1, 1), 22, {V<float>(m, {2, 3, 3})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<float>(r->outputs[0].tensor(), {2}, {-1.125f, 1.875f});
  // By hand: rows (1, 2) and (2, 4) are dependent; a 2-D input gives a scalar.
  r = RunOp(MakeNode("Det", 1, 1), 11, {V<double>({1, 2, 2, 4}, {2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectTensorNear<double>(r->outputs[0].tensor(), {}, {0});
  ExpectError(RunOp(MakeNode("Det", 1, 1), 22, {V<float>({1, 2, 3, 4, 5, 6}, {2, 3})}), "input 0");
}

}  // namespace
}  // namespace nee::testing
