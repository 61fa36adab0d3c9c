// Custom operators (ops/custom_ops.h, include/nee/custom_op.h): the example
// library (examples/custom_op) loaded per session, ops defined in-process,
// and every way loading or running one can fail. Expected values are the
// ops' formulas evaluated here with std::exp.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>

#include "../paths_util.h"
#include "../opt/opt_test_util.h"
#include "format/onnx_writer.h"
#include "nee/nee.h"

namespace nee {
namespace {

using namespace opt_test;

constexpr const char* kDomain = "nee.example";

Attribute FloatsAttr(const std::string& name, std::vector<float> v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloats;
  a.floats = std::move(v);
  return a;
}

// Marks the last node as one of `domain` (importing the domain at version 1).
void InDomain(ModelBuilder& b, const std::string& domain = kDomain) {
  b.model.graph.nodes.back().domain = domain;
  if (b.model.OpsetVersion(domain) < 0) b.model.opset_imports.push_back({domain, 1});
}

// s = Swish(x, alpha=0.5); y = WeightedSum(s, x, weights=[2, -1]).
Model ExampleModel(std::optional<Shape> shape = ShapeFromDims({2, 3})) {
  ModelBuilder b;
  b.Input("x", shape).Op("Swish", {"x"}, {"s"}, {FloatAttr("alpha", 0.5f)});
  InDomain(b);
  b.Op("WeightedSum", {"s", "x"}, {"y"}, {FloatsAttr("weights", {2, -1})});
  InDomain(b);
  b.Output("y");
  return b.model;
}

std::vector<float> ExampleExpected(const std::vector<float>& x) {
  std::vector<float> y;
  for (float v : x) y.push_back(2 * (v / (1 + std::exp(-0.5f * v))) - v);
  return y;
}

SessionOptions WithExampleLibrary(int level = 99) {
  SessionOptions options;
  options.graph_optimization_level = level;
  options.intra_op_num_threads = 1;
  options.custom_op_libraries = {NEE_EXAMPLE_OPS_LIBRARY};
  return options;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CustomOps, ExampleLibraryRunsAtEveryOptimizationLevel) {
  const std::vector<float> x = {-2, -0.5f, 0, 0.25f, 1, 3};
  for (int level : {0, 1, 2, 99}) {
    auto session = Session::Create(ExampleModel(), WithExampleLibrary(level));
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    for (int run = 0; run < 2; ++run) {
      auto out = (*session)->Run({{"x", Value(Floats(x, {2, 3}))}}, {});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ExpectNear((*out)[0].tensor(), {2, 3}, ExampleExpected(x));
    }
  }
}

TEST(CustomOps, ConstantInputsAreNotFoldedAway) {
  // Swish of an initializer: constant folding must leave the opaque node alone.
  ModelBuilder b;
  b.Init("c", Floats({1, 2}, {2})).Op("Swish", {"c"}, {"y"});
  InDomain(b);
  b.Output("y");
  auto set = CustomOpSet::Create({NEE_EXAMPLE_OPS_LIBRARY}, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  Model model = b.model;
  ASSERT_TRUE(OptimizeModel(model, 99, nullptr, &(*set)->registry()).ok());
  ASSERT_EQ(model.graph.nodes.size(), 1u);
  EXPECT_EQ(model.graph.nodes[0].op_type, "Swish");
  auto session = Session::Create(b.model, WithExampleLibrary());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto out = (*session)->Run({}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear((*out)[0].tensor(), {2}, {1 / (1 + std::exp(-1.f)), 2 / (1 + std::exp(-2.f))});
}

TEST(CustomOps, ShapeRuleKeepsSymbolicDims) {
  auto set = CustomOpSet::Create({NEE_EXAMPLE_OPS_LIBRARY}, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto checked = CheckModel(ExampleModel(Shape{Dim::Symbol("batch"), Dim::Known(3)}), (*set)->registry());
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  const TypeInfo& y = checked->types.at("y");
  EXPECT_EQ(y.elem_type, DataType::kFloat);
  ASSERT_TRUE(y.shape);
  ASSERT_EQ(y.shape->size(), 2u);
  EXPECT_EQ((*y.shape)[0].symbol, "batch");
  EXPECT_EQ((*y.shape)[1].value, 3);
}

TEST(CustomOps, AShapeRuleErrorNamesTheNode) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2})).Op("WeightedSum", {"x", "x"}, {"y"}, {FloatsAttr("weights", {1, 2, 3})});
  InDomain(b);
  b.Output("y");
  auto session = Session::Create(b.model, WithExampleLibrary());
  ASSERT_FALSE(session.ok());
  const std::string& m = session.status().message();
  EXPECT_TRUE(Contains(m, "node 'WeightedSum0' (nee.example.WeightedSum)")) << m;
  EXPECT_TRUE(Contains(m, "3 weights for 2 inputs")) << m;
  EXPECT_TRUE(Contains(m, "libnee_example_ops")) << m;
}

TEST(CustomOps, AComputeErrorFailsTheRunAndTheSessionStaysUsable) {
  auto session = Session::Create(ExampleModel(), WithExampleLibrary());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto bad = (*session)->Run({{"x", Value(Floats({0, 1, NAN, 0, 0, 0}, {2, 3}))}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kRuntime);
  EXPECT_TRUE(Contains(bad.status().message(), "node 'Swish0' (nee.example.Swish)")) << bad.status().message();
  EXPECT_TRUE(Contains(bad.status().message(), "input element 2 is NaN")) << bad.status().message();
  auto good = (*session)->Run({{"x", Value(Floats({0, 0, 0, 0, 0, 1}, {2, 3}))}}, {});
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ExpectNear((*good)[0].tensor(), {2, 3}, ExampleExpected({0, 0, 0, 0, 0, 1}));
}

TEST(CustomOps, AnUnregisteredCustomOpNamesItsDomainAndOp) {
  auto session = Session::Create(ExampleModel(), SessionOptions{});
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().code(), StatusCode::kNotImplemented);
  const std::string& m = session.status().message();
  EXPECT_TRUE(Contains(m, "operator 'Swish' of domain 'nee.example' is not registered")) << m;
  EXPECT_TRUE(Contains(m, "register_custom_ops_library")) << m;
  // The library registers other ops of the domain, not this one.
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2})).Op("Softplus", {"x"}, {"y"});
  InDomain(b);
  b.Output("y");
  auto other = Session::Create(b.model, WithExampleLibrary());
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(Contains(other.status().message(), "operator 'Softplus' of domain 'nee.example' is not registered: "
                                                 "the session's custom ops of that domain do not include it"))
      << other.status().message();
}

TEST(CustomOps, LibraryErrorsNameThePath) {
  struct Case {
    std::string path, want;
  } cases[] = {
      {"/nonexistent/libnothing.so", "cannot load the library '/nonexistent/libnothing.so'"},
      {"libm.so.6", "the library 'libm.so.6' does not export 'nee_custom_ops_abi_version'"},
      {NEE_BAD_ABI_OPS_LIBRARY, "was built for custom-op ABI version 99; this nee implements version 1"},
      {"", "the path is empty"},
  };
  for (const Case& c : cases) {
    SessionOptions options;
    options.custom_op_libraries = {c.path};
    auto session = Session::Create(ExampleModel(), options);
    ASSERT_FALSE(session.ok()) << c.path;
    EXPECT_EQ(session.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(session.status().message(), c.want)) << session.status().message();
    EXPECT_TRUE(Contains(session.status().message(), c.path)) << session.status().message();
  }
  SessionOptions twice = WithExampleLibrary();
  twice.custom_op_libraries.push_back(NEE_EXAMPLE_OPS_LIBRARY);
  auto session = Session::Create(ExampleModel(), twice);
  ASSERT_FALSE(session.ok());
  EXPECT_TRUE(Contains(session.status().message(), "nee.example.Swish (since 1) is registered twice"))
      << session.status().message();
}

TEST(CustomOps, CustomOpsRunInsideSubgraphs) {
  auto body = std::make_shared<Graph>();
  body->name = "body";
  Node swish;
  swish.name = "inner_swish";
  swish.op_type = "Swish";
  swish.domain = kDomain;
  swish.inputs = {"x"};
  swish.outputs = {"body_out"};
  body->nodes.push_back(swish);
  body->outputs.push_back({"body_out", TypeInfo::Tensor(DataType::kFloat), "", {}});
  Attribute then_attr;
  then_attr.name = "then_branch";
  then_attr.type = AttrType::kGraph;
  then_attr.g = body;
  Attribute else_attr = then_attr;
  else_attr.name = "else_branch";
  ModelBuilder b;
  b.Input("x", ShapeFromDims({2})).Input("cond", Shape{}, DataType::kBool);
  b.Op("If", {"cond"}, {"y"}, {then_attr, else_attr}).Output("y");
  b.model.opset_imports.push_back({kDomain, 1});
  auto session = Session::Create(b.model, WithExampleLibrary());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto out = (*session)->Run({{"x", Value(Floats({0, 2}, {2}))}, {"cond", Value(Tensor::Scalar(true))}}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear((*out)[0].tensor(), {2}, {0, 2 / (1 + std::exp(-2.f))});
}

// ---- Ops defined in-process ---------------------------------------------------

// Scale(X) -> X * factor, factor from user_data; fails when attribute fail=1.
struct ScaleOp {
  float factor;
  std::atomic<int>* released;
};

int32_t ScaleInfer(const nee_custom_op_api* api, nee_custom_op_context* ctx, void*) {
  int32_t type;
  int64_t rank;
  const int64_t* dims;
  if (api->input_type(ctx, 0, &type, &rank, &dims) != NEE_CUSTOM_OP_OK) return NEE_CUSTOM_OP_FAIL;
  return api->set_output_type(ctx, 0, type, rank, dims);
}

int32_t ScaleCompute(const nee_custom_op_api* api, nee_custom_op_context* ctx, void* user_data) {
  int64_t fail = 0;
  if (api->attr_int(ctx, "fail", &fail) == NEE_CUSTOM_OP_OK && fail) {
    api->set_error(ctx, "asked to fail");
    return NEE_CUSTOM_OP_FAIL;
  }
  int32_t type;
  int64_t rank;
  const int64_t* dims;
  if (api->input_type(ctx, 0, &type, &rank, &dims) != NEE_CUSTOM_OP_OK || type != 1) return NEE_CUSTOM_OP_FAIL;
  void* out;
  if (api->allocate_output(ctx, 0, type, static_cast<size_t>(rank), dims, &out) != NEE_CUSTOM_OP_OK)
    return NEE_CUSTOM_OP_FAIL;
  int64_t n = 1;
  for (int64_t k = 0; k < rank; ++k) n *= dims[k];
  struct Job {
    const float* x;
    float* y;
    float factor;
  } job{static_cast<const float*>(api->input_data(ctx, 0)), static_cast<float*>(out),
        static_cast<ScaleOp*>(user_data)->factor};
  api->parallel_for(ctx, n, 16, [](void* arg, int64_t begin, int64_t end) {
    auto* j = static_cast<Job*>(arg);
    for (int64_t i = begin; i < end; ++i) j->y[i] = j->x[i] * j->factor;
  }, &job);
  return NEE_CUSTOM_OP_OK;
}

void ScaleRelease(void* user_data) {
  auto* op = static_cast<ScaleOp*>(user_data);
  ++*op->released;
  delete op;
}

nee_custom_op_def ScaleDef(float factor, std::atomic<int>* released, const char* domain = "test.ops") {
  return nee_custom_op_def{sizeof(nee_custom_op_def), domain, "Scale", 1, 1, 1, 1, 1, ScaleInfer, ScaleCompute,
                           new ScaleOp{factor, released}, ScaleRelease};
}

Model ScaleModel(int64_t fail = 0, int64_t n = 2) {
  ModelBuilder b;
  b.Input("x", ShapeFromDims({n})).Op("Scale", {"x"}, {"y"}, {IntAttr("fail", fail)});
  InDomain(b, "test.ops");
  b.Output("y");
  return b.model;
}

TEST(CustomOps, SessionsWithDifferentOpsDoNotInterfere) {
  std::atomic<int> released{0};
  {
    SessionOptions twice, thrice;
    auto two = CustomOp::Make(ScaleDef(2, &released), nullptr, "a test");
    auto three = CustomOp::Make(ScaleDef(3, &released), nullptr, "a test");
    ASSERT_TRUE(two.ok() && three.ok());
    twice.custom_ops = {*two};
    thrice.custom_ops = {*three};
    auto a = Session::Create(ScaleModel(), twice);
    auto b = Session::Create(ScaleModel(), thrice);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_FALSE(Session::Create(ScaleModel(), SessionOptions{}).ok());
    const Value x(Floats({1, -2}, {2}));
    auto ya = (*a)->Run({{"x", x}}, {});
    auto yb = (*b)->Run({{"x", x}}, {});
    ASSERT_TRUE(ya.ok() && yb.ok());
    ExpectNear((*ya)[0].tensor(), {2}, {2, -4});
    ExpectNear((*yb)[0].tensor(), {2}, {3, -6});
    EXPECT_EQ(released.load(), 0);
  }
  EXPECT_EQ(released.load(), 2);  // each op's release once, when options and sessions are gone
}

TEST(CustomOps, ComputeMayUseTheSessionThreads) {
  std::atomic<int> released{0};
  SessionOptions options;
  options.intra_op_num_threads = 3;
  options.custom_ops = {CustomOp::Make(ScaleDef(0.5f, &released), nullptr, "a test").value()};
  auto session = Session::Create(ScaleModel(0, 1000), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<float> x(1000), want(1000);
  for (int i = 0; i < 1000; ++i) {
    x[i] = static_cast<float>(i);
    want[i] = 0.5f * static_cast<float>(i);
  }
  auto out = (*session)->Run({{"x", Value(Floats(x, {1000}))}}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear((*out)[0].tensor(), {1000}, want);
}

TEST(CustomOps, BadDefinitionsAreRefused) {
  std::atomic<int> released{0};
  nee_custom_op_def builtin = ScaleDef(1, &released, "ai.onnx");
  auto op = CustomOp::Make(builtin, nullptr, "a test");
  ASSERT_FALSE(op.ok());
  EXPECT_TRUE(Contains(op.status().message(), "nee implements the domain 'ai.onnx'")) << op.status().message();
  nee_custom_op_def no_compute = builtin;
  no_compute.domain = "test.ops";
  no_compute.compute = nullptr;
  EXPECT_FALSE(CustomOp::Make(no_compute, nullptr, "a test").ok());
  nee_custom_op_def wrong_size = builtin;
  wrong_size.domain = "test.ops";
  wrong_size.struct_size = 8;
  EXPECT_FALSE(CustomOp::Make(wrong_size, nullptr, "a test").ok());
  EXPECT_EQ(released.load(), 0);  // a refused definition stays the caller's
  ScaleRelease(builtin.user_data);
}

TEST(CustomOps, TheCApiRegistersOpsAndReportsComputeErrors) {
  std::atomic<int> released{0};
  nee_session_options_t* options = nullptr;
  ASSERT_EQ(nee_session_options_create(&options), nullptr);
  nee_custom_op_def def = ScaleDef(4, &released);
  ASSERT_EQ(nee_session_options_add_custom_op(options, &def), nullptr);
  ASSERT_EQ(nee_session_options_add_custom_ops_library(options, NEE_EXAMPLE_OPS_LIBRARY), nullptr);
  for (int64_t fail : {0, 1}) {
    std::string bytes = SerializeModel(ScaleModel(fail)).value();
    nee_session_t* session = nullptr;
    ASSERT_EQ(nee_session_create_from_memory(bytes.data(), bytes.size(), options, &session), nullptr);
    const float x[2] = {1, 2};
    const int64_t dims[1] = {2};
    nee_value_t* input = nullptr;
    ASSERT_EQ(nee_value_create_tensor(NEE_DTYPE_FLOAT32, dims, 1, x, sizeof x, &input), nullptr);
    const char* names[1] = {"x"};
    const nee_value_t* inputs[1] = {input};
    nee_value_t* output = nullptr;
    nee_status_t st = nee_session_run(session, names, inputs, 1, nullptr, 0, &output);
    if (fail) {
      ASSERT_NE(st, nullptr);
      EXPECT_EQ(nee_status_code(st), NEE_STATUS_RUNTIME_ERROR);
      std::string m = nee_status_message(st);
      EXPECT_TRUE(Contains(m, "node 'Scale0' (test.ops.Scale)")) << m;
      EXPECT_TRUE(Contains(m, "asked to fail")) << m;
      nee_status_free(st);
    } else {
      ASSERT_EQ(st, nullptr) << nee_status_message(st);
      const float* y = static_cast<const float*>(nee_value_data(output));
      EXPECT_EQ(y[0], 4);
      EXPECT_EQ(y[1], 8);
      nee_value_release(output);
    }
    nee_value_release(input);
    nee_session_release(session);
  }
  EXPECT_EQ(released.load(), 0);
  nee_session_options_release(options);
  EXPECT_EQ(released.load(), 1);
}

}  // namespace
}  // namespace nee
