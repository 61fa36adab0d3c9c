// Session features ONNX Runtime's API exposes, at the C++ level: overridable
// initializers, RunOptions::only_execute_path_to_fetches and the profile's
// session phases. Expected values are small hand-computed products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "../opt/opt_test_util.h"
#include "base/cpu_isa.h"

namespace nee {
namespace {

using namespace opt_test;

// y = x (1x2) . W (2x2), W = [[1, 2], [3, 4]] an initializer that is also a graph input.
Model MatMulModel(int64_t ir_version) {
  ModelBuilder b;
  b.model.ir_version = ir_version;
  b.Input("x", ShapeFromDims({1, 2}))
      .Input("W", ShapeFromDims({2, 2}))
      .Init("W", Floats({1, 2, 3, 4}, {2, 2}))
      .Op("MatMul", {"x", "W"}, {"y"})
      .Output("y");
  return b.model;
}

std::unique_ptr<Session> Make(Model model, SessionOptions options = {}) {
  auto session = Session::Create(std::move(model), options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(session).value() : nullptr;
}

TEST(SessionFeatures, AnOverridableInitializerIsReplacedForOneRunOnly) {
  for (int level : {0, 99}) {
    SessionOptions options;
    options.graph_optimization_level = level;
    auto session = Make(MatMulModel(8), options);
    ASSERT_TRUE(session);
    ASSERT_EQ(session->overridable_initializers().size(), 1u);
    EXPECT_EQ(session->overridable_initializers()[0].name, "W");
    ASSERT_EQ(session->inputs().size(), 1u);
    const Value x = Floats({1, 1}, {1, 2});
    for (int round = 0; round < 2; ++round) {  // the first run also packs constant weights
      auto fed = session->Run({{"x", x}, {"W", Floats({10, 20, 30, 40}, {2, 2})}}, {});
      ASSERT_TRUE(fed.ok()) << fed.status().ToString();
      ExpectNear((*fed)[0].tensor(), {1, 2}, {40, 60});
      auto plain = session->Run({{"x", x}}, {});
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      ExpectNear((*plain)[0].tensor(), {1, 2}, {4, 6});
    }
    auto wrong = session->Run({{"x", x}, {"W", Floats({1, 2, 3}, {3})}}, {});
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(wrong.status().message().find("input 'W'"), std::string::npos) << wrong.status().message();
  }
}

TEST(SessionFeatures, BeforeIr4InitializersListedAsInputsAreConstants) {
  auto session = Make(MatMulModel(3));
  ASSERT_TRUE(session);
  EXPECT_TRUE(session->overridable_initializers().empty());
  auto fed = session->Run({{"x", Floats({1, 1}, {1, 2})}, {"W", Floats({10, 20, 30, 40}, {2, 2})}}, {});
  ASSERT_FALSE(fed.ok());
  EXPECT_NE(fed.status().message().find("'W' is not an input"), std::string::npos) << fed.status().message();
}

// y1 = Relu(x); y2 = Reshape(x, s): a wrong s fails only the branch to y2.
Model BranchModel() {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2, 3}))
      .Input("s", ShapeFromDims({2}), DataType::kInt64)
      .Op("Relu", {"x"}, {"y1"})
      .Op("Reshape", {"x", "s"}, {"y2"})
      .Output("y1")
      .Output("y2");
  return b.model;
}

TEST(SessionFeatures, OnlyExecutePathToFetchesSkipsTheOtherBranches) {
  auto session = Make(BranchModel());
  ASSERT_TRUE(session);
  const std::vector<NamedValue> feed = {{"x", Floats({-1, 2, -3, 4, -5, 6}, {2, 3})}, {"s", Ints({4, 4})}};
  RunOptions all;
  auto failed = session->Run(feed, {"y1"}, &all);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("Reshape"), std::string::npos) << failed.status().message();
  RunOptions path;
  path.only_execute_path_to_fetches = true;
  auto y1 = session->Run(feed, {"y1"}, &path);
  ASSERT_TRUE(y1.ok()) << y1.status().ToString();
  ASSERT_EQ(y1->size(), 1u);
  ExpectNear((*y1)[0].tensor(), {2, 3}, {0, 2, 0, 4, 0, 6});
  EXPECT_FALSE(session->Run(feed, {"y2", "y1"}, &path).ok());  // asked for, the branch runs
}

TEST(SessionFeatures, TheProfileHasTheSessionPhasesAndOneEventPerNodeRun) {
  SessionOptions options;
  options.enable_profiling = true;
  options.profile_file_prefix = ::testing::TempDir() + "nee_session_features";
  auto session = Make(BranchModel(), options);
  ASSERT_TRUE(session);
  auto run = session->Run({{"x", Floats({1, 2, 3, 4, 5, 6}, {2, 3})}, {"s", Ints({3, 2})}}, {});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto path = session->EndProfiling();
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  std::FILE* f = std::fopen(path->c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::string trace;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) trace.append(buf, n);
  std::fclose(f);
  std::remove(path->c_str());
  for (const char* name : {"\"function_inlining\"", "\"graph_optimization\"", "\"model_check\"",
                           "\"thread_pool_creation\"", "\"execution_planning\"", "\"session_initialization\"",
                           "\"model_run\"", "\"Relu0_kernel_time\"", "\"Reshape1_kernel_time\""})
    EXPECT_NE(trace.find(name), std::string::npos) << name;
  EXPECT_NE(trace.find("\"input_type_shape\":[{\"float\":[2,3]},{\"int64\":[2]}]"), std::string::npos) << trace;
  EXPECT_NE(trace.find("\"output_type_shape\":[{\"float\":[3,2]}]"), std::string::npos) << trace;
  EXPECT_EQ(session->EndProfiling().value(), "");  // profiling stopped
}

// A constant read only by kernels that packed it (MatMul's B) is let go by
// the session after the run that packed it: the test's own copy of its bytes
// is then their only owner. One also read in place (Gather) or returned as a
// graph output is kept. Outputs stay the same run after run.
TEST(SessionFeatures, PackedConstantsAreDroppedUnlessAnotherReaderNeedsThem) {
  for (int level : {0, 99}) {
    const Tensor w = Floats({1, 2, 3, 4}, {2, 2});      // MatMul only
    const Tensor shared = Floats({0, 1, 1, 0}, {2, 2});  // MatMul and Gather
    const Tensor out = Floats({2, 0, 0, 2}, {2, 2});     // MatMul and a graph output
    ModelBuilder b;
    b.Input("x", Shape{Dim::Symbol("rows"), Dim::Known(2)})
        .Input("idx", ShapeFromDims({1}), DataType::kInt64)  // an input: Gather is not folded away
        .Init("W", w)
        .Init("S", shared)
        .Init("O", out)
        .Op("MatMul", {"x", "W"}, {"a"})
        .Op("MatMul", {"a", "S"}, {"c"})
        .Op("Gather", {"S", "idx"}, {"g"})
        .Op("MatMul", {"c", "O"}, {"y"})
        .Output("y")
        .Output("g")
        .Output("O");
    SessionOptions options;
    options.graph_optimization_level = level;
    auto session = Make(b.model, options);
    b.model = Model{};
    ASSERT_TRUE(session);
    EXPECT_FALSE(w.exclusively_owned());
    const Value x = Floats({1, 0, 0, 1}, {2, 2});
    for (int round = 0; round < 3; ++round) {
      auto r = session->Run({{"x", x}, {"idx", Ints({1})}}, {});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      // a = W; c = a S (columns swapped); y = 2 c.
      ExpectNear((*r)[0].tensor(), {2, 2}, {4, 2, 8, 6});
      ExpectNear((*r)[1].tensor(), {1, 2}, {1, 0});
      ExpectNear((*r)[2].tensor(), {2, 2}, {2, 0, 0, 2});
      EXPECT_TRUE(w.exclusively_owned()) << "level " << level << ", round " << round;
      EXPECT_FALSE(shared.exclusively_owned());
      EXPECT_FALSE(out.exclusively_owned());
    }
    // A new input shape signature plans again over the model's stand-in for W.
    auto wide = session->Run({{"x", Floats({1, 0, 0, 1, 1, 1}, {3, 2})}, {"idx", Ints({0})}}, {});
    ASSERT_TRUE(wide.ok()) << wide.status().ToString();
    ExpectNear((*wide)[0].tensor(), {3, 2}, {4, 2, 8, 6, 12, 8});
  }
}

// A blocked conv's weights, once packed, are dropped where no input shape can
// send the conv down another path that reads them in place: pointwise and
// depthwise convs (on AVX2 and AVX-512), and a 3x3 stride-2 conv on AVX2's
// direct kernel. A 3x3 stride-1 conv keeps them (Winograd, or the direct
// kernel on outputs under two rows, may take it). Runs at batch 2, 0 and 1
// give the unoptimized session's outputs.
// Each of got's elements within `relative` of want's, plus 2e-6 of want's
// largest magnitude: chains of convs over random weights reach 1e5-1e6, and
// the few sums that cancel to single digits are only as exact as float
// rounding of their terms, which depends on the kernel (Winograd or direct).
void ExpectNearAtScale(const Tensor& got, const Tensor& want, float relative, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  float scale = 0.f;
  for (int64_t i = 0; i < want.num_elements(); ++i) scale = std::max(scale, std::fabs(want.data<float>()[i]));
  for (int64_t i = 0; i < got.num_elements(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i],
                relative * (1.f + std::fabs(want.data<float>()[i])) + 2e-6f * scale)
        << what << " element " << i;
}

// The model of BlockedConvWeightsAreDroppedWhereNoShapeReadsThemAgain over
// its five weights, fresh ones from fixed seeds where none are given.
Model ConvChain(std::vector<Tensor> w = {}) {
  if (w.empty())
    w = {Random({32, 16, 1, 1}, 1), Random({32, 32, 3, 3}, 2), Random({32, 1, 3, 3}, 3), Random({32, 32, 3, 3}, 4),
         Random({16, 32, 1, 1}, 5)};
  ModelBuilder b;
  b.Input("x", Shape{Dim::Symbol("N"), Dim::Known(16), Dim::Known(20), Dim::Known(20)})
      .Init("P", w[0])
      .Init("S", w[1])
      .Init("D", w[2])
      .Init("W", w[3])
      .Init("L", w[4])
      .Op("Conv", {"x", "P"}, {"a"})
      .Op("Relu", {"a"}, {"ar"})
      .Op("Conv", {"ar", "S"}, {"c"}, {IntsAttr("pads", {1, 1, 1, 1}), IntsAttr("strides", {2, 2})})
      .Op("Conv", {"c", "D"}, {"d"}, {IntsAttr("pads", {1, 1, 1, 1}), IntAttr("group", 32)})
      .Op("Conv", {"d", "W"}, {"e"}, {IntsAttr("pads", {1, 1, 1, 1})})
      .Op("Relu", {"e"}, {"er"})
      .Op("Conv", {"er", "L"}, {"y"})
      .Output("y");
  return b.model;
}

TEST(SessionFeatures, BlockedConvWeightsAreDroppedWhereNoShapeReadsThemAgain) {
  if (HostIsaLevel() < CpuIsaLevel::kAvx2) GTEST_SKIP() << "no blocked convs below AVX2";
  const Tensor pointwise = Random({32, 16, 1, 1}, 1), strided = Random({32, 32, 3, 3}, 2);
  const Tensor depthwise = Random({32, 1, 3, 3}, 3), winograd = Random({32, 32, 3, 3}, 4);
  auto session = Make(ConvChain({pointwise, strided, depthwise, winograd, Random({16, 32, 1, 1}, 5)}));
  ASSERT_TRUE(session);
  const bool direct_avx2 = HostIsaLevel() == CpuIsaLevel::kAvx2;
  for (int64_t batch : {2, 0, 1}) {
    const std::vector<NamedValue> feed = {{"x", Random({batch, 16, 20, 20}, 7)}};
    auto r = session->Run(feed, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Tensor want = RunAt(ConvChain(), feed, 0);
    ExpectNearAtScale((*r)[0].tensor(), want, 1e-3f, "batch " + std::to_string(batch));
    EXPECT_TRUE(pointwise.exclusively_owned()) << "batch " << batch;
    EXPECT_TRUE(depthwise.exclusively_owned()) << "batch " << batch;
    EXPECT_EQ(strided.exclusively_owned(), direct_avx2) << "batch " << batch;
    EXPECT_FALSE(winograd.exclusively_owned()) << "batch " << batch;
  }
}

// A blocked 3x3 conv (after a run of three pointwise ones) whose plane
// changes between runs changes kernel on AVX2 (the direct kernel on 10x10,
// which Winograd's 4x4 tiles overrun by 44%; Winograd on 20x20) and back;
// each run gives the unoptimized session's outputs.
TEST(SessionFeatures, AConvWhosePlaneChangesKernelKeepsItsWeights) {
  ModelBuilder b;
  b.Input("x", Shape{Dim::Known(1), Dim::Known(32), Dim::Symbol("H"), Dim::Symbol("W")})
      .Init("P1", Random({32, 32, 1, 1}, 10))
      .Init("P2", Random({32, 32, 1, 1}, 11))
      .Init("P3", Random({32, 32, 1, 1}, 12))
      .Init("K", Random({32, 32, 3, 3}, 8))
      .Op("Conv", {"x", "P1"}, {"a"})
      .Op("Conv", {"a", "P2"}, {"b"})
      .Op("Conv", {"b", "P3"}, {"c"})
      .Op("Conv", {"c", "K"}, {"d"}, {IntsAttr("pads", {1, 1, 1, 1})})
      .Op("Relu", {"d"}, {"y"})
      .Output("y");
  const Model model = b.model;
  auto session = Make(b.model);
  ASSERT_TRUE(session);
  for (int64_t side : {10, 20, 10, 20}) {
    const std::vector<NamedValue> feed = {{"x", Random({1, 32, side, side}, 9 + side)}};
    auto r = session->Run(feed, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Tensor want = RunAt(model, feed, 0);
    ExpectNearAtScale((*r)[0].tensor(), want, 1e-4f, std::to_string(side) + "x" + std::to_string(side));
  }
}

// MatMul's constant B, when nothing outside the session holds it, is packed
// over its own bytes: they live on with the session (no new pages), and are
// freed with it. One the caller still holds is never written: its bytes
// keep their values and are the caller's alone after the first run. The
// products are exact (multiples of 1/32 well inside float's range), so the
// expected values are exact too.
TEST(SessionFeatures, AConstantNothingElseHoldsIsPackedOverItsOwnBytes) {
  const int64_t k = 300, n = 64;  // n a whole number of panels; k deeper than one depth block
  std::vector<float> wv(static_cast<size_t>(k * n));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<float>(static_cast<int64_t>(i * 37 % 23) - 11) / 8.f;
  auto x_of = [&](int64_t rows) {
    std::vector<float> xv(static_cast<size_t>(rows * k));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(static_cast<int64_t>(i % 5) - 2) / 4.f;
    return xv;
  };
  auto product = [&](const std::vector<float>& xv, int64_t rows) {
    std::vector<float> y(static_cast<size_t>(rows * n));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += double(xv[i * k + p]) * wv[p * n + j];
        y[i * n + j] = static_cast<float>(acc);
      }
    return y;
  };
  for (int level : {0, 99})
    for (bool caller_keeps_w : {false, true}) {
      const std::string what = "level " + std::to_string(level) + (caller_keeps_w ? ", W kept" : ", W given");
      bool freed = false;
      float* bytes = new (std::align_val_t(64)) float[wv.size()];  // as the loader's copies are
      std::copy(wv.begin(), wv.end(), bytes);
      std::shared_ptr<void> owner(bytes, [&freed](void* p) {
        freed = true;
        ::operator delete[](p, std::align_val_t(64));
      });
      Tensor w = Tensor::View(DataType::kFloat, {k, n}, bytes, std::move(owner));
      const Tensor kept = caller_keeps_w ? w : Tensor();
      ModelBuilder b;
      b.Input("x", Shape{Dim::Symbol("rows"), Dim::Known(k)}).Init("W", w).Op("MatMul", {"x", "W"}, {"y"}).Output("y");
      w = Tensor();
      SessionOptions options;
      options.graph_optimization_level = level;
      auto session = Make(std::move(b.model), options);
      ASSERT_TRUE(session) << what;
      for (int64_t rows : {3, 3, 5, 3}) {  // a second shape signature too
        const std::vector<float> xv = x_of(rows);
        auto r = session->Run({{"x", Floats(xv, {rows, k})}}, {});
        ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
        ExpectNear((*r)[0].tensor(), {rows, n}, product(xv, rows));
      }
      if (caller_keeps_w) {
        EXPECT_TRUE(kept.exclusively_owned()) << what;
        EXPECT_TRUE(std::equal(wv.begin(), wv.end(), kept.data<float>())) << what;
      } else {
        EXPECT_FALSE(freed) << what << ": B was packed into new memory";
        session.reset();
        EXPECT_TRUE(freed) << what;
      }
    }
}

// y = If(c, then: Relu(x), else: Neg(x)): the branches are subgraphs, which
// copies of a Model share.
Model IfModel() {
  auto branch = [](const char* op, const char* name) {
    auto g = std::make_shared<Graph>();
    g->name = name;
    Node n;
    n.name = std::string(name) + "_op";
    n.op_type = op;
    n.inputs = {"x"};
    n.outputs = {std::string(name) + "_y"};
    g->nodes.push_back(n);
    g->outputs.push_back({std::string(name) + "_y", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({2})), "", {}});
    Attribute a;
    a.name = std::string(name) + "_branch";
    a.type = AttrType::kGraph;
    a.g = g;
    return a;
  };
  ModelBuilder b;
  b.Input("c", ShapeFromDims({}), DataType::kBool)
      .Input("x", ShapeFromDims({2}))
      .Op("If", {"c"}, {"y"}, {branch("Relu", "then"), branch("Neg", "else")})
      .Output("y");
  b.model.graph.nodes[0].attributes[0].name = "then_branch";
  b.model.graph.nodes[0].attributes[1].name = "else_branch";
  return b.model;
}

TEST(SessionFeatures, SessionsMadeAtOnceFromOneModelDoNotWriteItsSubgraphs) {
  const Model model = IfModel();
  const Graph& then_body = *model.graph.nodes[0].attributes[0].g;
  std::unique_ptr<Session> a, b;
  std::thread other([&] { a = Make(model); });  // each takes a copy; the copies share the bodies
  b = Make(model);
  other.join();
  ASSERT_TRUE(a && b);
  // Binding the declarations went into each session's own bodies, not the caller's.
  EXPECT_EQ(then_body.nodes[0].declaration, nullptr);
  const Tensor cond = Tensor::Scalar(true);
  for (Session* s : {a.get(), b.get()}) {
    auto out = s->Run({{"c", Value(cond)}, {"x", Floats({-1, 2}, {2})}}, {});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectNear((*out)[0].tensor(), {2}, {0, 2});
  }
}

}  // namespace
}  // namespace nee
