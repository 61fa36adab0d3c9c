// The optimized float32 LSTM, GRU and RNN (ep/cpu/rnn_fast.cc) against the
// reference kernel (ops/rnn.cc, double precision) over a grid of directions,
// batch sizes, sequence lengths, initial states, optional outputs, layouts
// and hidden sizes that are not multiples of 8; bitwise independent of the
// thread count; unsupported attributes give exactly the reference's result.
//
// Tolerance: |fast - reference| <= 1e-5 + 1e-5 * |reference|. The fast path
// rounds each product and sum to float (the reference keeps double until the
// output) and its exp/tanh are within ~1 ulp / 3e-7 relative; over up to 7
// steps of hidden 33 with inputs in [-1, 1) the measured worst case is a few
// 1e-6, and the gates' nonlinearities (slopes <= 1) do not amplify it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/sgemm.h"
#include "ep_test_util.h"

namespace nee {
namespace {

using testing::FloatAttr;
using testing::IntAttr;
using testing::StringAttr;
using testing::StringsAttr;

constexpr double kAbsTol = 1e-5, kRelTol = 1e-5;

struct RnnCase {
  std::string op = "LSTM";
  std::string direction = "forward";
  int64_t batch = 1, seq = 4, input = 3, hidden = 5, layout = 0;
  bool bias = true, lens = false, h0 = false, c0 = false, peepholes = false;
  int outputs = 7;  // bit i: output i wanted
  std::vector<Attribute> attrs;

  int64_t dirs() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t gates() const { return op == "LSTM" ? 4 : op == "GRU" ? 3 : 1; }
  int num_outputs() const { return op == "LSTM" ? 3 : 2; }
  std::string Name() const {
    return op + " " + direction + " b" + std::to_string(batch) + " s" + std::to_string(seq) + " h" +
           std::to_string(hidden) + " layout" + std::to_string(layout) + (lens ? " lens" : "") + (h0 ? " h0" : "") +
           (c0 ? " c0" : "") + (peepholes ? " P" : "") + " out" + std::to_string(outputs);
  }
};

Node MakeRnnNode(const RnnCase& c) {
  std::vector<Attribute> attrs = c.attrs;
  attrs.push_back(StringAttr("direction", c.direction));
  attrs.push_back(IntAttr("hidden_size", c.hidden));
  attrs.push_back(IntAttr("layout", c.layout));
  Node node = testing::MakeNode(c.op, c.op == "LSTM" ? 8 : 6, c.num_outputs(), attrs);
  for (int i = 0; i < c.num_outputs(); ++i)
    if (!(c.outputs & (1 << i))) node.outputs[static_cast<size_t>(i)] = "";
  return node;
}

std::vector<Value> MakeInputs(const RnnCase& c, std::mt19937& rng) {
  const int64_t gh = c.gates() * c.hidden;
  std::vector<int64_t> x_dims = c.layout == 0 ? std::vector<int64_t>{c.seq, c.batch, c.input}
                                              : std::vector<int64_t>{c.batch, c.seq, c.input};
  std::vector<int64_t> state = c.layout == 0 ? std::vector<int64_t>{c.dirs(), c.batch, c.hidden}
                                             : std::vector<int64_t>{c.batch, c.dirs(), c.hidden};
  std::vector<Value> in(c.op == "LSTM" ? 8 : 6);
  in[0] = Value(testing::RandomTensor(x_dims, rng));
  in[1] = Value(testing::RandomTensor({c.dirs(), gh, c.input}, rng));
  in[2] = Value(testing::RandomTensor({c.dirs(), gh, c.hidden}, rng));
  if (c.bias) in[3] = Value(testing::RandomTensor({c.dirs(), 2 * gh}, rng));
  if (c.lens) {
    // Every length in [0, seq], the last entry shorter than seq.
    std::vector<int32_t> lens(static_cast<size_t>(c.batch));
    for (int64_t b = 0; b < c.batch; ++b) lens[static_cast<size_t>(b)] = static_cast<int32_t>(rng() % (c.seq + 1));
    lens.back() = static_cast<int32_t>(c.seq / 2);
    in[4] = Value(Tensor::FromVector(lens, {c.batch}));
  }
  if (c.h0) in[5] = Value(testing::RandomTensor(state, rng));
  if (c.c0 && c.op == "LSTM") in[6] = Value(testing::RandomTensor(state, rng));
  if (c.peepholes) in[7] = Value(testing::RandomTensor({c.dirs(), 3 * c.hidden}, rng));
  return in;
}

// Runs `kernel` with a pool of `threads` threads; every output (empty when not wanted).
Result<std::vector<Value>> RunRnn(KernelFn kernel, const Node& node, const std::vector<Value>& inputs, int threads,
                               int64_t opset = 22) {
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(threads);
  KernelContext ctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  NEE_RETURN_IF_ERROR(kernel(ctx));
  return outputs;
}

KernelFn FastKernel(const std::string& op) {
  return op == "LSTM" ? cpu::LstmFloat : op == "GRU" ? cpu::GruFloat : cpu::RnnFloat;
}

// Largest |got - want| / (kAbsTol + kRelTol * |want|) over the wanted outputs (<= 1 passes).
double WorstError(const std::vector<Value>& got, const std::vector<Value>& want, const std::string& name) {
  double worst = 0;
  EXPECT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    EXPECT_EQ(got[i].empty(), want[i].empty()) << name << " output " << i;
    if (got[i].empty() || want[i].empty()) continue;
    const Tensor& g = got[i].tensor();
    const Tensor& w = want[i].tensor();
    EXPECT_EQ(g.dims(), w.dims()) << name << " output " << i;
    if (g.dims() != w.dims()) continue;
    for (int64_t k = 0; k < g.num_elements(); ++k) {
      const double a = g.data<float>()[k], b = w.data<float>()[k];
      worst = std::max(worst, std::fabs(a - b) / (kAbsTol + kRelTol * std::fabs(b)));
    }
  }
  return worst;
}

bool BitwiseEqual(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].empty() != b[i].empty()) return false;
    if (a[i].empty()) continue;
    const Tensor& x = a[i].tensor();
    const Tensor& y = b[i].tensor();
    if (x.dims() != y.dims() ||
        std::memcmp(x.data<float>(), y.data<float>(), sizeof(float) * static_cast<size_t>(x.num_elements())) != 0)
      return false;
  }
  return true;
}

// The grid: each op x direction x batch x hidden, with the other options
// cycling so that every combination of outputs, layouts and states appears.
std::vector<RnnCase> Grid() {
  std::vector<RnnCase> cases;
  int i = 0;
  for (const char* op : {"LSTM", "GRU", "RNN"})
    for (const char* direction : {"forward", "reverse", "bidirectional"})
      for (int64_t batch : {1, 3})
        for (int64_t hidden : {5, 17, 33}) {
          RnnCase c;
          c.op = op;
          c.direction = direction;
          c.batch = batch;
          c.hidden = hidden;
          c.seq = 1 + i % 7;
          c.input = 1 + (i * 5) % 19;
          c.layout = i % 2;
          c.bias = i % 5 != 0;
          c.lens = batch > 1 && i % 3 != 0;
          c.h0 = (i / 2) % 2 == 0;
          c.c0 = (i / 3) % 2 == 0;
          c.outputs = 1 + i % (c.op == "LSTM" ? 7 : 3);
          cases.push_back(c);
          ++i;
        }
  // Options only some cells have, and clip.
  auto add = [&](RnnCase c) { cases.push_back(c); };
  for (const char* direction : {"forward", "bidirectional"}) {
    RnnCase c;
    c.direction = direction;
    c.batch = 3;
    c.seq = 6;
    c.hidden = 17;
    c.lens = true;
    c.h0 = c.c0 = true;
    c.peepholes = true;
    add(c);
    c.attrs = {IntAttr("input_forget", 1)};
    add(c);
    c.attrs = {FloatAttr("clip", 0.5f)};
    add(c);
    c.attrs = {StringsAttr("activations", {"sigmoid", "TANH", "Tanh"})};  // the defaults, spelled out
    add(c);
    c.op = "GRU";
    c.peepholes = false;
    c.attrs = {IntAttr("linear_before_reset", 1)};
    add(c);
    c.attrs = {IntAttr("linear_before_reset", 1), FloatAttr("clip", 0.3f)};
    add(c);
    c.op = "RNN";
    c.attrs = {FloatAttr("clip", 0.4f)};
    add(c);
  }
  // More entries than one group steps together (4), with sequences ending at different steps.
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    RnnCase c;
    c.op = op;
    c.direction = c.op == "GRU" ? "bidirectional" : "forward";
    c.batch = c.op == "GRU" ? 6 : 8;  // groups of 3; of 4 (one thread), 4 (two) or 3 (three)
    c.seq = 5;
    c.hidden = 33;
    c.lens = true;
    c.h0 = true;
    add(c);
  }
  // Longer than a link of steps (8, rnn_fast.cc): each recurrence runs in
  // several links, which threads may take from each other, with entries
  // ending inside a link.
  for (const char* op : {"LSTM", "GRU"})
    for (int64_t batch : {1, 5}) {
      RnnCase c;
      c.op = op;
      c.direction = "bidirectional";
      c.batch = batch;
      c.seq = batch == 1 ? 19 : 26;
      c.hidden = 17;
      c.lens = batch > 1;
      c.h0 = c.c0 = true;
      c.outputs = c.op == "LSTM" ? 7 : 3;
      add(c);
    }
  return cases;
}

TEST(RnnFast, AgreesWithReferenceKernel) {
  std::mt19937 rng(7);
  double worst = 0;
  for (const RnnCase& c : Grid()) {
    const Node node = MakeRnnNode(c);
    const std::vector<Value> inputs = MakeInputs(c, rng);
    auto want = RunRnn(cpu::RunReference, node, inputs, 1);
    ASSERT_TRUE(want.ok()) << c.Name() << ": " << want.status().ToString();
    auto got = RunRnn(FastKernel(c.op), node, inputs, 1);
    ASSERT_TRUE(got.ok()) << c.Name() << ": " << got.status().ToString();
    const double err = WorstError(*got, *want, c.Name());
    EXPECT_LE(err, 1.0) << c.Name();
    worst = std::max(worst, err);
  }
  std::printf("worst error / tolerance: %.3g\n", worst);
}

TEST(RnnFast, BitwiseIndependentOfThreadCount) {
  std::mt19937 rng(8);
  for (const RnnCase& c : Grid()) {
    const Node node = MakeRnnNode(c);
    const std::vector<Value> inputs = MakeInputs(c, rng);
    auto one = RunRnn(FastKernel(c.op), node, inputs, 1);
    ASSERT_TRUE(one.ok()) << c.Name();
    for (int threads : {2, 3}) {
      auto more = RunRnn(FastKernel(c.op), node, inputs, threads);
      ASSERT_TRUE(more.ok()) << c.Name();
      EXPECT_TRUE(BitwiseEqual(*one, *more)) << c.Name() << " threads=" << threads;
    }
  }
}

// Before opset 14 there is no layout attribute: it is ignored, as the reference does.
TEST(RnnFast, Opset7IgnoresLayout) {
  std::mt19937 rng(9);
  RnnCase c;
  c.batch = 2;
  c.hidden = 9;
  c.layout = 0;
  const std::vector<Value> inputs = MakeInputs(c, rng);
  c.layout = 1;
  const Node node = MakeRnnNode(c);
  auto want = RunRnn(cpu::RunReference, node, inputs, 1, 7);
  auto got = RunRnn(cpu::LstmFloat, node, inputs, 2, 7);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_LE(WorstError(*got, *want, "opset 7"), 1.0);
}

// What the fast path does not handle gives exactly the reference's result.
TEST(RnnFast, UnsupportedCasesGoToTheReference) {
  std::mt19937 rng(10);
  std::vector<RnnCase> cases;
  RnnCase c;
  c.batch = 2;
  c.hidden = 6;
  c.attrs = {StringsAttr("activations", {"HardSigmoid", "Tanh", "Relu"})};
  cases.push_back(c);
  c.op = "GRU";
  c.attrs = {StringsAttr("activations", {"Sigmoid", "Softsign"})};
  cases.push_back(c);
  c.op = "RNN";
  c.attrs = {StringsAttr("activations", {"Relu"})};
  cases.push_back(c);
  for (const RnnCase& u : cases) {
    const Node node = MakeRnnNode(u);
    const std::vector<Value> inputs = MakeInputs(u, rng);
    auto want = RunRnn(cpu::RunReference, node, inputs, 1);
    auto got = RunRnn(FastKernel(u.op), node, inputs, 2);
    ASSERT_TRUE(want.ok() && got.ok()) << u.Name();
    EXPECT_TRUE(BitwiseEqual(*got, *want)) << u.Name();
  }
}

// Double inputs and malformed shapes: the reference runs (and reports the error).
TEST(RnnFast, OtherTypesAndErrorsGoToTheReference) {
  RnnCase c;
  Node node = MakeRnnNode(c);
  std::vector<Value> inputs(8);
  inputs[0] = Value(Tensor::FromVector(std::vector<double>(4 * 3, 0.5), {4, 1, 3}));
  inputs[1] = Value(Tensor::FromVector(std::vector<double>(20 * 3, 0.1), {1, 20, 3}));
  inputs[2] = Value(Tensor::FromVector(std::vector<double>(20 * 5, 0.2), {1, 20, 5}));
  auto want = RunRnn(cpu::RunReference, node, inputs, 1);
  auto got = RunRnn(cpu::LstmFloat, node, inputs, 1);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(0, std::memcmp(got->at(0).tensor().data<double>(), want->at(0).tensor().data<double>(),
                           sizeof(double) * 20));
  std::mt19937 rng(11);
  inputs = MakeInputs(c, rng);
  inputs[2] = Value(testing::RandomTensor({1, 20, 4}, rng));  // R's last dim is not hidden_size
  auto bad = RunRnn(cpu::LstmFloat, node, inputs, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ToString(), RunRnn(cpu::RunReference, node, inputs, 1).status().ToString());
}

// In a session (constant weights) they are prepared once per node; the result
// is bitwise what preparing per call gives, for any thread count.
TEST(RnnFast, ConstantWeightsPreparedOncePerSession) {
  std::mt19937 rng(12);
  RnnCase c;
  c.direction = "bidirectional";
  c.batch = 2;
  c.hidden = 17;
  c.peepholes = true;
  const Node node = MakeRnnNode(c);
  const std::vector<Value> inputs = MakeInputs(c, rng);
  auto want = RunRnn(cpu::LstmFloat, node, inputs, 1);
  ASSERT_TRUE(want.ok());
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  const std::vector<bool> constant = {false, true, true, true, false, false, false, true};
  PreparedCache cache;
  for (int threads : {1, 2, 3}) {
    std::vector<Value> outputs(node.outputs.size());
    ThreadPool pool(threads);
    KernelContext ctx(node, 22, ptrs, &outputs, nullptr, &pool, nullptr);
    ctx.SetPrepared(&cache, &constant);
    ASSERT_TRUE(cpu::LstmFloat(ctx).ok());
    EXPECT_TRUE(BitwiseEqual(outputs, *want)) << "threads=" << threads;
  }
  EXPECT_EQ(cache.size(), 1u);
}

// A NaN in X reaches the outputs, as in the reference (no clamp turns it into a bound).
TEST(RnnFast, NanPropagates) {
  std::mt19937 rng(13);
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    RnnCase c;
    c.op = op;
    c.hidden = 9;
    c.outputs = 3;
    const Node node = MakeRnnNode(c);
    std::vector<Value> inputs = MakeInputs(c, rng);
    std::vector<float> x(inputs[0].tensor().data<float>(), inputs[0].tensor().data<float>() + 12);
    x[0] = std::nanf("");
    inputs[0] = Value(Tensor::FromVector(x, inputs[0].tensor().dims()));
    auto got = RunRnn(FastKernel(op), node, inputs, 1);
    ASSERT_TRUE(got.ok()) << op;
    EXPECT_TRUE(std::isnan(got->at(1).tensor().data<float>()[0])) << op;
  }
}

// The per-step product's AVX-512 and AVX2 versions run each column's sum in
// the same order (one FMA chain per column), and so does the SGEMM: the same bits.
TEST(RnnFast, Avx2AndAvx512StepsAgree) {
  std::mt19937 rng(14);
  for (const RnnCase& c : Grid()) {
    const Node node = MakeRnnNode(c);
    const std::vector<Value> inputs = MakeInputs(c, rng);
    auto wide = RunRnn(FastKernel(c.op), node, inputs, 1);
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx2);
    auto narrow = RunRnn(FastKernel(c.op), node, inputs, 1);
    cpu::SgemmLimitIsa(cpu::SgemmIsa::kAvx512);
    ASSERT_TRUE(wide.ok() && narrow.ok()) << c.Name();
    EXPECT_TRUE(BitwiseEqual(*wide, *narrow)) << c.Name();
  }
}

}  // namespace
}  // namespace nee
