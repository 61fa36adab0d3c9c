// If / Loop / Scan mechanics, run with a fake SubgraphRunner whose bodies are
// small C++ functions (keyed by the body graph's name). Expected values are
// hand-checkable; the numpy expression giving each is in a comment.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "op_test_util.h"

namespace nee {
namespace {

using testing::ExpectTensorNear;
using testing::IntAttr;
using testing::IntsAttr;
using testing::MakeNode;

using BodyFn = std::function<Result<std::vector<Value>>(const std::vector<Value>&)>;

class FakeRunner : public SubgraphRunner {
 public:
  void Add(const std::string& name, BodyFn fn) { bodies_[name] = std::move(fn); }
  Result<std::vector<Value>> Run(const Graph& body, const std::vector<Value>& inputs) override {
    ++runs;
    auto it = bodies_.find(body.name);
    if (it == bodies_.end()) return RuntimeError("no fake body named " + body.name);
    return it->second(inputs);
  }
  int runs = 0;

 private:
  std::map<std::string, BodyFn> bodies_;
};

ValueInfo Info(const std::string& name, TypeInfo type) { return ValueInfo{name, std::move(type), {}, {}}; }

std::shared_ptr<Graph> MakeBody(const std::string& name, std::vector<TypeInfo> inputs, std::vector<TypeInfo> outputs) {
  auto g = std::make_shared<Graph>();
  g->name = name;
  for (size_t i = 0; i < inputs.size(); ++i) g->inputs.push_back(Info(name + "_in" + std::to_string(i), inputs[i]));
  for (size_t i = 0; i < outputs.size(); ++i)
    g->outputs.push_back(Info(name + "_out" + std::to_string(i), outputs[i]));
  return g;
}

Attribute GraphAttr(const std::string& name, std::shared_ptr<Graph> g) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kGraph;
  a.g = std::move(g);
  return a;
}

TypeInfo FloatT(std::vector<int64_t> dims) { return TypeInfo::Tensor(DataType::kFloat, ShapeFromDims(dims)); }

struct Run {
  std::vector<Value> outputs;
  std::vector<TypeInfo> inferred;
};

// Runs the node's shape rule (with `infer`, possibly null) and its kernel
// with `runner`; inputs may contain empty Values for omitted inputs.
Result<Run> RunWith(const Node& node, int64_t opset, const std::vector<Value>& inputs, SubgraphRunner* runner,
                    SubgraphInferFn infer = nullptr) {
  NEE_ASSIGN_OR_RETURN(const OpSchema* schema, OpRegistry::Global().Resolve("", node.op_type, opset));
  std::vector<TypeInfo> types;
  for (const Value& v : inputs) {
    if (v.is_tensor()) types.push_back(TypeInfo::Tensor(v.tensor().dtype(), ShapeFromDims(v.tensor().dims())));
    else if (v.is_sequence()) types.push_back(TypeInfo::Sequence(v.element_type()));
    else types.push_back(TypeInfo{});
  }
  InferenceContext ictx{node, opset, {}, {}, {}, {}, std::move(infer)};
  for (size_t i = 0; i < inputs.size(); ++i) {
    ictx.input_types.push_back(inputs[i].empty() ? nullptr : &types[i]);
    ictx.input_values.push_back(inputs[i].is_tensor() ? &inputs[i].tensor() : nullptr);
  }
  ictx.output_types.resize(node.outputs.size());
  ictx.output_values.resize(node.outputs.size());
  NEE_RETURN_IF_ERROR(schema->infer(ictx));
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  KernelContext kctx(node, opset, ptrs, &outputs, nullptr, nullptr, runner);
  NEE_RETURN_IF_ERROR(schema->kernel(kctx));
  return Run{std::move(outputs), std::move(ictx.output_types)};
}

Tensor Floats(std::vector<float> v, std::vector<int64_t> dims) { return Tensor::FromVector<float>(v, dims); }

// A fresh tensor: element-wise a + b (same shape), for fake bodies.
Tensor AddF(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::Allocate(DataType::kFloat, a.dims()).value();
  for (int64_t i = 0; i < a.num_elements(); ++i) out.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  return out;
}
Tensor AddScalarF(const Tensor& a, float s) {
  Tensor out = Tensor::Allocate(DataType::kFloat, a.dims()).value();
  for (int64_t i = 0; i < a.num_elements(); ++i) out.data<float>()[i] = a.data<float>()[i] + s;
  return out;
}

// ---- If ----------------------------------------------------------------------

Node IfNode(size_t outputs = 1) {
  return MakeNode("If", 1, outputs,
                  {GraphAttr("then_branch", MakeBody("then", {}, {FloatT({2})})),
                   GraphAttr("else_branch", MakeBody("else", {}, {FloatT({3})}))});
}

FakeRunner BranchRunner() {
  FakeRunner r;
  r.Add("then", [](const std::vector<Value>&) -> Result<std::vector<Value>> {
    return std::vector<Value>{Floats({1, 2}, {2})};
  });
  r.Add("else", [](const std::vector<Value>&) -> Result<std::vector<Value>> {
    return std::vector<Value>{Floats({7, 8, 9}, {3})};
  });
  return r;
}

TEST(ControlFlowIf, RunsTheChosenBranch) {
  FakeRunner runner = BranchRunner();
  for (bool cond : {true, false}) {
    auto run = RunWith(IfNode(), 16, {Tensor::Scalar<bool>(cond)}, &runner);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    if (cond) ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {1, 2});
    else ExpectTensorNear<float>(run->outputs[0].tensor(), {3}, {7, 8, 9});
    // The condition is known to the rule here, so it gives the chosen branch's type.
    EXPECT_EQ(ShapeToString(*run->inferred[0].shape), cond ? "[2]" : "[3]");
  }
  EXPECT_EQ(runner.runs, 2);  // exactly one branch per run
}

TEST(ControlFlowIf, MergesBranchShapesWhenTheConditionIsUnknown) {
  // Branches declare float[2] and float[3]: the merged type is float of rank 1, dim unknown.
  Node node = IfNode();
  const OpSchema* schema = OpRegistry::Global().Resolve("", "If", 16).value();
  TypeInfo cond_type = TypeInfo::Tensor(DataType::kBool, Shape{});
  InferenceContext ictx{node, 16, {&cond_type}, {nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  ASSERT_TRUE(schema->infer(ictx).ok());
  const TypeInfo& t = ictx.output_types[0];
  ASSERT_TRUE(t.is_tensor());
  EXPECT_EQ(t.elem_type, DataType::kFloat);
  ASSERT_TRUE(t.shape.has_value());
  EXPECT_EQ(ShapeToString(*t.shape), "[?]");
}

TEST(ControlFlowIf, UsesTheInferenceCallbackAndKeepsEqualDims) {
  FakeRunner runner = BranchRunner();
  // A callback saying both branches yield float[2,batch]: dims are kept.
  SubgraphInferFn infer = [](const Graph&, const std::vector<TypeInfo>&) -> Result<std::vector<TypeInfo>> {
    return std::vector<TypeInfo>{TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Known(2), Dim::Symbol("batch")})};
  };
  Node node = IfNode();
  // The kernel's result is float[2] (rank 1) which would disagree; only check the rule here.
  const OpSchema* schema = OpRegistry::Global().Resolve("", "If", 13).value();
  TypeInfo cond_type = TypeInfo::Tensor(DataType::kBool, Shape{});
  InferenceContext ictx{node, 13, {&cond_type}, {nullptr}, {TypeInfo{}}, {std::nullopt}, infer};
  ASSERT_TRUE(schema->infer(ictx).ok());
  ASSERT_TRUE(ictx.output_types[0].shape.has_value());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[2,batch]");
}

TEST(ControlFlowIf, AFailingBranchOnlyLosesInformationUnlessItIsTheKnownOne) {
  // A callback under which the then-branch is invalid (as a rank-guarded
  // function body can be for the inputs at hand) and the else-branch is float[3].
  SubgraphInferFn infer = [](const Graph& g, const std::vector<TypeInfo>&) -> Result<std::vector<TypeInfo>> {
    if (g.name == "then") return InvalidModel("cannot split an axis of size 5 into 4 outputs");
    return std::vector<TypeInfo>{FloatT({3})};
  };
  Node node = IfNode();
  const OpSchema* schema = OpRegistry::Global().Resolve("", "If", 16).value();
  TypeInfo cond_type = TypeInfo::Tensor(DataType::kBool, Shape{});
  // Unknown condition: the then-branch falls back to its declared float[2]; merged: float[?].
  InferenceContext unknown{node, 16, {&cond_type}, {nullptr}, {TypeInfo{}}, {std::nullopt}, infer};
  ASSERT_TRUE(schema->infer(unknown).ok());
  EXPECT_EQ(ShapeToString(*unknown.output_types[0].shape), "[?]");
  // Known false: only the else-branch counts.
  Tensor no = Tensor::Scalar<bool>(false);
  InferenceContext known_false{node, 16, {&cond_type}, {&no}, {TypeInfo{}}, {std::nullopt}, infer};
  ASSERT_TRUE(schema->infer(known_false).ok());
  EXPECT_EQ(ShapeToString(*known_false.output_types[0].shape), "[3]");
  // Known true: the failing branch will run, so its error is real.
  Tensor yes = Tensor::Scalar<bool>(true);
  InferenceContext known_true{node, 16, {&cond_type}, {&yes}, {TypeInfo{}}, {std::nullopt}, infer};
  Status st = schema->infer(known_true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot split"), std::string::npos);
}

TEST(ControlFlowIf, RejectsBranchesOfDifferentElementTypes) {
  Node node = MakeNode("If", 1, 1,
                       {GraphAttr("then_branch", MakeBody("then", {}, {FloatT({2})})),
                        GraphAttr("else_branch", MakeBody("else", {}, {TypeInfo::Tensor(DataType::kInt64)}))});
  const OpSchema* schema = OpRegistry::Global().Resolve("", "If", 16).value();
  TypeInfo cond_type = TypeInfo::Tensor(DataType::kBool, Shape{});
  InferenceContext ictx{node, 16, {&cond_type}, {nullptr}, {TypeInfo{}}, {std::nullopt}, nullptr};
  Status st = schema->infer(ictx);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("else_branch yields tensor(int64)"), std::string::npos);
}

TEST(ControlFlowIf, RejectsANonBoolConditionAndAMissingRunner) {
  FakeRunner runner = BranchRunner();
  auto bad_cond = RunWith(IfNode(), 16, {Tensor::Scalar<float>(1)}, &runner);
  ASSERT_FALSE(bad_cond.ok());
  EXPECT_NE(bad_cond.status().message().find("cond"), std::string::npos);
  auto no_runner = RunWith(IfNode(), 16, {Tensor::Scalar<bool>(true)}, nullptr);
  ASSERT_FALSE(no_runner.ok());
  EXPECT_NE(no_runner.status().message().find("no subgraph runner"), std::string::npos);
}

// ---- Loop --------------------------------------------------------------------

// Body: (iter, cond, x) -> (cond, x + 1, x + 1): carries x and scans each new x.
std::shared_ptr<Graph> IncrementBody() {
  return MakeBody("inc", {TypeInfo::Tensor(DataType::kInt64, Shape{}), TypeInfo::Tensor(DataType::kBool, Shape{}), FloatT({2})},
                  {TypeInfo::Tensor(DataType::kBool, Shape{}), FloatT({2}), FloatT({2})});
}

FakeRunner IncrementRunner() {
  FakeRunner r;
  r.Add("inc", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    Tensor next = AddScalarF(in[2].tensor(), 1);
    return std::vector<Value>{Tensor::Scalar<bool>(true), next, next.Clone().value()};
  });
  return r;
}

TEST(ControlFlowLoop, RunsMTimesAndStacksScanOutputsOnANewAxis) {
  FakeRunner runner = IncrementRunner();
  Node node = MakeNode("Loop", 3, 2, {GraphAttr("body", IncrementBody())});
  auto run = RunWith(node, 16, {Tensor::Scalar<int64_t>(3), Tensor::Scalar<bool>(true), Floats({1, 2}, {2})}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.runs, 3);
  // x = [1, 2]; final x + 3 = [4, 5]
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {4, 5});
  // np.stack([x + 1 + i for i in range(3)]) = [[2,3],[3,4],[4,5]]
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3, 2}, {2, 3, 3, 4, 4, 5});
  // The rule (from the body's declared types): float[2] and float[?,2].
  EXPECT_EQ(ShapeToString(*run->inferred[0].shape), "[2]");
  EXPECT_EQ(ShapeToString(*run->inferred[1].shape), "[?,2]");
}

TEST(ControlFlowLoop, StopsWhenTheBodysCondTurnsFalse) {
  // Body: (iter, cond, n) -> (iter < 1, n + 1): runs for iter = 0 and 1, then stops.
  FakeRunner runner;
  runner.Add("while", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    int64_t iter = in[0].tensor().data<int64_t>()[0];
    return std::vector<Value>{Tensor::Scalar<bool>(iter < 1), AddScalarF(in[2].tensor(), 1)};
  });
  auto body = MakeBody("while", {TypeInfo{}, TypeInfo{}, FloatT({})}, {TypeInfo{}, FloatT({})});
  Node node = MakeNode("Loop", 3, 1, {GraphAttr("body", body)});
  node.inputs[0] = "";  // no trip count: a while loop
  auto run = RunWith(node, 13, {Value(), Tensor::Scalar<bool>(true), Tensor::Scalar<float>(10)}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.runs, 2);
  ExpectTensorNear<float>(run->outputs[0].tensor(), {}, {12});  // 10 + 2 iterations
}

TEST(ControlFlowLoop, IgnoresTheBodysCondWithoutACondInput) {
  // The body says stop after the first iteration, but without the cond input
  // only M bounds the loop (the spec's "for" form).
  FakeRunner runner;
  runner.Add("stop", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    return std::vector<Value>{Tensor::Scalar<bool>(false), AddScalarF(in[2].tensor(), 1)};
  });
  auto body = MakeBody("stop", {TypeInfo{}, TypeInfo{}, FloatT({})}, {TypeInfo{}, FloatT({})});
  Node node = MakeNode("Loop", 3, 1, {GraphAttr("body", body)});
  node.inputs[1] = "";
  auto run = RunWith(node, 13, {Tensor::Scalar<int64_t>(4), Value(), Tensor::Scalar<float>(0)}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {}, {4});  // 0 + 4 iterations
}

TEST(ControlFlowLoop, AKnownTripCountWithoutCondFixesTheScanLength) {
  FakeRunner runner = IncrementRunner();
  Node node = MakeNode("Loop", 3, 2, {GraphAttr("body", IncrementBody())});
  node.inputs[1] = "";
  auto run = RunWith(node, 16, {Tensor::Scalar<int64_t>(3), Value(), Floats({1, 2}, {2})}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(ShapeToString(*run->inferred[1].shape), "[3,2]");
  // np.stack([x + 1 + i for i in range(3)]) with x = [1, 2]
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3, 2}, {2, 3, 3, 4, 4, 5});
}

TEST(ControlFlowLoop, ZeroIterationsGiveInitialValuesAndEmptyScans) {
  FakeRunner runner = IncrementRunner();
  Node node = MakeNode("Loop", 3, 2, {GraphAttr("body", IncrementBody())});
  auto run = RunWith(node, 16, {Tensor::Scalar<int64_t>(0), Tensor::Scalar<bool>(true), Floats({1, 2}, {2})}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(runner.runs, 0);
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {1, 2});
  // The scan element is declared float[2]: the empty output is float[0,2].
  ExpectTensorNear<float>(run->outputs[1].tensor(), {0, 2}, {});
  // A declared element float[N,2] (N unknown) keeps its rank: float[0,0,2].
  auto symbolic = MakeBody("inc", {TypeInfo{}, TypeInfo{}, FloatT({2})},
                           {TypeInfo{}, FloatT({2}), TypeInfo::Tensor(DataType::kFloat, Shape{Dim::Symbol("N"), Dim::Known(2)})});
  Node sym_node = MakeNode("Loop", 3, 2, {GraphAttr("body", symbolic)});
  auto sym = RunWith(sym_node, 16, {Tensor::Scalar<int64_t>(0), Tensor::Scalar<bool>(true), Floats({1, 2}, {2})}, &runner);
  ASSERT_TRUE(sym.ok()) << sym.status().ToString();
  ExpectTensorNear<float>(sym->outputs[1].tensor(), {0, 0, 2}, {});
  EXPECT_EQ(ShapeToString(*sym->inferred[1].shape), "[?,N,2]");
  // cond false from the start also runs nothing.
  auto run2 = RunWith(node, 16, {Tensor::Scalar<int64_t>(5), Tensor::Scalar<bool>(false), Floats({1, 2}, {2})}, &runner);
  ASSERT_TRUE(run2.ok());
  EXPECT_EQ(runner.runs, 0);
}

TEST(ControlFlowLoop, RejectsANegativeTripCountAndBadCarriedCounts) {
  FakeRunner runner = IncrementRunner();
  Node node = MakeNode("Loop", 3, 2, {GraphAttr("body", IncrementBody())});
  auto run = RunWith(node, 16, {Tensor::Scalar<int64_t>(-1), Tensor::Scalar<bool>(true), Floats({1, 2}, {2})}, &runner);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("non-negative"), std::string::npos);
  // Two loop-carried values but the body takes only one.
  Node two = MakeNode("Loop", 4, 2, {GraphAttr("body", IncrementBody())});
  auto run2 = RunWith(two, 16, {Tensor::Scalar<int64_t>(1), Tensor::Scalar<bool>(true), Floats({1, 2}, {2}),
                               Floats({1, 2}, {2})}, &runner);
  ASSERT_FALSE(run2.ok());
}

TEST(ControlFlowLoop, CarriesASequence) {
  // Body: (iter, cond, seq) -> (cond, seq + [float(iter)]); 3 iterations build [0, 1, 2].
  FakeRunner runner;
  runner.Add("append", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    std::vector<Value> elements = in[2].elements();
    elements.push_back(Tensor::Scalar<float>(static_cast<float>(in[0].tensor().data<int64_t>()[0])));
    return std::vector<Value>{in[1], Value::Sequence(elements, TypeInfo::Tensor(DataType::kFloat))};
  });
  TypeInfo seq = TypeInfo::Sequence(TypeInfo::Tensor(DataType::kFloat));
  auto body = MakeBody("append", {TypeInfo{}, TypeInfo{}, seq}, {TypeInfo{}, seq});
  Node node = MakeNode("Loop", 3, 1, {GraphAttr("body", body)});
  auto run = RunWith(node, 13, {Tensor::Scalar<int64_t>(3), Tensor::Scalar<bool>(true),
                                Value::Sequence({}, TypeInfo::Tensor(DataType::kFloat))}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(run->outputs[0].is_sequence());
  ASSERT_EQ(run->outputs[0].elements().size(), 3u);
  for (int i = 0; i < 3; ++i) ExpectTensorNear<float>(run->outputs[0].elements()[i].tensor(), {}, {float(i)});
  EXPECT_EQ(run->inferred[0].kind, TypeInfo::Kind::kSequence);
}

TEST(ControlFlowLoop, WidensCarriedShapesThatChangeAcrossIterations) {
  // A body whose carried output grows by one along dim 0 each iteration
  // (like a Concat): starting from float[0, 3] the rule must give float[?, 3].
  SubgraphInferFn infer = [](const Graph&, const std::vector<TypeInfo>& in) -> Result<std::vector<TypeInfo>> {
    TypeInfo next = in[2];
    if (next.shape && (*next.shape)[0].known()) (*next.shape)[0] = Dim::Known((*next.shape)[0].value + 1);
    return std::vector<TypeInfo>{TypeInfo::Tensor(DataType::kBool, Shape{}), next};
  };
  auto body = MakeBody("grow", {TypeInfo{}, TypeInfo{}, FloatT({0, 3})}, {TypeInfo{}, FloatT({0, 3})});
  Node node = MakeNode("Loop", 3, 1, {GraphAttr("body", body)});
  const OpSchema* schema = OpRegistry::Global().Resolve("", "Loop", 16).value();
  TypeInfo m = TypeInfo::Tensor(DataType::kInt64, Shape{}), c = TypeInfo::Tensor(DataType::kBool, Shape{});
  TypeInfo x = FloatT({0, 3});
  InferenceContext ictx{node, 16, {&m, &c, &x}, {nullptr, nullptr, nullptr}, {TypeInfo{}}, {std::nullopt}, infer};
  ASSERT_TRUE(schema->infer(ictx).ok());
  EXPECT_EQ(ShapeToString(*ictx.output_types[0].shape), "[?,3]");
}

// ---- Scan (opset 9+) -------------------------------------------------------------

// Body: (s, x) -> (s + x, s + x): a running sum that also scans each new sum.
std::shared_ptr<Graph> SumBody() { return MakeBody("sum", {FloatT({2}), FloatT({2})}, {FloatT({2}), FloatT({2})}); }

FakeRunner SumRunner() {
  FakeRunner r;
  r.Add("sum", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    Tensor s = AddF(in[0].tensor(), in[1].tensor());
    return std::vector<Value>{s, s.Clone().value()};
  });
  return r;
}

Tensor X32() { return Floats({1, 2, 3, 4, 5, 6}, {3, 2}); }  // [[1,2],[3,4],[5,6]]

TEST(ControlFlowScan, CumulativeSumForward) {
  FakeRunner runner = SumRunner();
  Node node = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1)});
  auto run = RunWith(node, 11, {Floats({0, 0}, {2}), X32()}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {9, 12});  // X.sum(0)
  // np.cumsum(X, 0) = [[1,2],[4,6],[9,12]]
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3, 2}, {1, 2, 4, 6, 9, 12});
  EXPECT_EQ(ShapeToString(*run->inferred[1].shape), "[3,2]");
}

TEST(ControlFlowScan, ReverseInputDirection) {
  FakeRunner runner = SumRunner();
  Node node = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1),
                                      IntsAttr("scan_input_directions", {1})});
  auto run = RunWith(node, 11, {Floats({0, 0}, {2}), X32()}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // np.cumsum(X[::-1], 0) = [[5,6],[8,10],[9,12]]
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3, 2}, {5, 6, 8, 10, 9, 12});
}

TEST(ControlFlowScan, ReverseOutputDirection) {
  FakeRunner runner = SumRunner();
  Node node = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1),
                                      IntsAttr("scan_output_directions", {1})});
  auto run = RunWith(node, 11, {Floats({0, 0}, {2}), X32()}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // np.cumsum(X, 0)[::-1] = [[9,12],[4,6],[1,2]]
  ExpectTensorNear<float>(run->outputs[1].tensor(), {3, 2}, {9, 12, 4, 6, 1, 2});
}

TEST(ControlFlowScan, InputAndOutputAxes) {
  FakeRunner runner = SumRunner();
  Node node = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1),
                                      IntsAttr("scan_input_axes", {-1}), IntsAttr("scan_output_axes", {1})});
  // X.T = [[1,3,5],[2,4,6]] scanned along axis 1; np.cumsum(X.T, 1) = [[1,4,9],[2,6,12]]
  auto run = RunWith(node, 11, {Floats({0, 0}, {2}), Floats({1, 3, 5, 2, 4, 6}, {2, 3})}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {9, 12});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {2, 3}, {1, 4, 9, 2, 6, 12});
  EXPECT_EQ(ShapeToString(*run->inferred[1].shape), "[2,3]");
}

TEST(ControlFlowScan, RejectsBadAxesAndMismatchedLengths) {
  FakeRunner runner = SumRunner();
  Node bad_axis = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1),
                                          IntsAttr("scan_input_axes", {2})});
  EXPECT_FALSE(RunWith(bad_axis, 11, {Floats({0, 0}, {2}), X32()}, &runner).ok());
  Node bad_dir = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1),
                                         IntsAttr("scan_input_directions", {2})});
  EXPECT_FALSE(RunWith(bad_dir, 11, {Floats({0, 0}, {2}), X32()}, &runner).ok());
  // Two scan inputs with 3 and 2 steps.
  auto body2 = MakeBody("sum", {FloatT({2}), FloatT({2}), FloatT({2})}, {FloatT({2}), FloatT({2})});
  Node two = MakeNode("Scan", 3, 2, {GraphAttr("body", body2), IntAttr("num_scan_inputs", 2)});
  EXPECT_FALSE(RunWith(two, 11, {Floats({0, 0}, {2}), X32(), Floats({1, 2, 3, 4}, {2, 2})}, &runner).ok());
}

TEST(ControlFlowScan, ZeroStepsKeepStatesAndGiveEmptyScans) {
  FakeRunner runner = SumRunner();
  Node node = MakeNode("Scan", 2, 2, {GraphAttr("body", SumBody()), IntAttr("num_scan_inputs", 1)});
  auto run = RunWith(node, 11, {Floats({5, 6}, {2}), Floats({}, {0, 2})}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {5, 6});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {0, 2}, {});
}

TEST(ControlFlowLoop, RejectsScanElementsThatChangeShape) {
  // Body: (iter, cond) -> (cond, zeros(iter + 1)): the scan elements grow, which cannot be stacked.
  FakeRunner runner;
  runner.Add("grow", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    int64_t iter = in[0].tensor().data<int64_t>()[0];
    return std::vector<Value>{in[1], Tensor::Allocate(DataType::kFloat, {iter + 1}).value()};
  });
  auto body = MakeBody("grow", {TypeInfo{}, TypeInfo{}}, {TypeInfo{}, TypeInfo::Tensor(DataType::kFloat)});
  Node node = MakeNode("Loop", 2, 1, {GraphAttr("body", body)});
  auto run = RunWith(node, 16, {Tensor::Scalar<int64_t>(2), Tensor::Scalar<bool>(true)}, &runner);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("changed from tensor(float)[1]"), std::string::npos) << run.status().ToString();
}

TEST(ControlFlowScan, TwoStatesAndTwoScanInputs) {
  // Body: (s, p, x, y) -> (s + x, p + y, s + x): running sums of X scanned forward (x)
  // and backward (y) at once. Final s = p = X.sum(0) = [9, 12].
  FakeRunner runner;
  runner.Add("two", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    Tensor s = AddF(in[0].tensor(), in[2].tensor());
    Tensor p = AddF(in[1].tensor(), in[3].tensor());
    return std::vector<Value>{s, p, s.Clone().value()};
  });
  auto body = MakeBody("two", {FloatT({2}), FloatT({2}), FloatT({2}), FloatT({2})},
                       {FloatT({2}), FloatT({2}), FloatT({2})});
  Node node = MakeNode("Scan", 4, 3, {GraphAttr("body", body), IntAttr("num_scan_inputs", 2),
                                      IntsAttr("scan_input_directions", {0, 1})});
  auto run = RunWith(node, 16, {Floats({0, 0}, {2}), Floats({0, 0}, {2}), X32(), X32()}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2}, {9, 12});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {2}, {9, 12});
  ExpectTensorNear<float>(run->outputs[2].tensor(), {3, 2}, {1, 2, 4, 6, 9, 12});  // np.cumsum(X, 0)
}

// ---- Scan (opset 8: batch axis and sequence_lens) ---------------------------------

TEST(ControlFlowScan8, RunsPerBatchEntryAndPadsShortSequences) {
  // Body: (s, x) -> (s + x, s + x) on float[1] values.
  FakeRunner runner;
  runner.Add("sum1", [](const std::vector<Value>& in) -> Result<std::vector<Value>> {
    Tensor s = AddF(in[0].tensor(), in[1].tensor());
    return std::vector<Value>{s, s.Clone().value()};
  });
  auto body = MakeBody("sum1", {FloatT({1}), FloatT({1})}, {FloatT({1}), FloatT({1})});
  Node node = MakeNode("Scan", 3, 2, {GraphAttr("body", body), IntAttr("num_scan_inputs", 1)});
  // x: batch 0 = [1,2,3], batch 1 = [10,20,30] (shape [2,3,1]); lengths [3, 2].
  // batch 0: cumsum [1,3,6], final 6; batch 1: cumsum of [10,20] = [10,30], padded with 0, final 30.
  auto run = RunWith(node, 8, {Tensor::FromVector<int64_t>({3, 2}, {2}), Floats({0, 0}, {2, 1}),
                               Floats({1, 2, 3, 10, 20, 30}, {2, 3, 1})}, &runner);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectTensorNear<float>(run->outputs[0].tensor(), {2, 1}, {6, 30});
  ExpectTensorNear<float>(run->outputs[1].tensor(), {2, 3, 1}, {1, 3, 6, 10, 30, 0});
  EXPECT_EQ(ShapeToString(*run->inferred[1].shape), "[2,3,1]");

  // Reverse direction within each entry's own length: batch 1 scans [20, 10].
  Node rev = MakeNode("Scan", 3, 2, {GraphAttr("body", body), IntAttr("num_scan_inputs", 1),
                                     IntsAttr("directions", {1})});
  auto run2 = RunWith(rev, 8, {Tensor::FromVector<int64_t>({3, 2}, {2}), Floats({0, 0}, {2, 1}),
                               Floats({1, 2, 3, 10, 20, 30}, {2, 3, 1})}, &runner);
  ASSERT_TRUE(run2.ok()) << run2.status().ToString();
  // batch 0: cumsum([3,2,1]) = [3,5,6]; batch 1: cumsum([20,10]) = [20,30], pad 0.
  ExpectTensorNear<float>(run2->outputs[1].tensor(), {2, 3, 1}, {3, 5, 6, 20, 30, 0});
}

TEST(ControlFlowScan8, RejectsSequenceLengthsOutOfRange) {
  FakeRunner runner;
  auto body = MakeBody("sum1", {FloatT({1}), FloatT({1})}, {FloatT({1}), FloatT({1})});
  Node node = MakeNode("Scan", 3, 2, {GraphAttr("body", body), IntAttr("num_scan_inputs", 1)});
  auto run = RunWith(node, 8, {Tensor::FromVector<int64_t>({4, 2}, {2}), Floats({0, 0}, {2, 1}),
                               Floats({1, 2, 3, 10, 20, 30}, {2, 3, 1})}, &runner);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("sequence_lens"), std::string::npos);
}

}  // namespace
}  // namespace nee
