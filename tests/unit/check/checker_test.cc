#include "check/checker.h"

#include <gtest/gtest.h>

#include <cmath>

#include "../ops/op_test_util.h"
#include "ops/attr_spec.h"
#include "ops/op_util.h"

namespace nee {
namespace {

Status Noop(KernelContext&) { return Status::Ok(); }

// A registry with one unary op "U" whose rule copies the input type.
OpRegistry TestRegistry() {
  OpRegistry r;
  r.RegisterVersions("", "U", {1}, 1, 1, 1, 1, InferSameAsInput0, Noop);
  r.RegisterVersions("", "B", {1}, 2, 2, 1, 1, InferBroadcast, Noop);
  return r;
}

Node MakeNode(const std::string& name, const std::string& op, std::vector<std::string> in,
              std::vector<std::string> out) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

Graph OneInputGraph(Shape shape) {
  Graph g;
  g.name = "g";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, std::move(shape)), "", {}});
  return g;
}

const OpsetMap kOpsets = {{"", 13}};

TEST(Checker, OrdersNodesAndInfersSymbolicShapes) {
  Graph g = OneInputGraph({Dim::Symbol("batch"), Dim::Known(3)});
  // Listed out of order on purpose: the checker sorts them.
  g.nodes.push_back(MakeNode("second", "B", {"a", "x"}, {"b"}));
  g.nodes.push_back(MakeNode("first", "U", {"x"}, {"a"}));
  g.outputs.push_back({"b", TypeInfo{}, "", {}});
  OpRegistry r = TestRegistry();
  auto checked = CheckGraph(g, kOpsets, r, nullptr, {});
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(checked->order, (std::vector<size_t>{1, 0}));
  const TypeInfo& b = checked->types.at("b");
  ASSERT_TRUE(b.shape.has_value());
  EXPECT_EQ(ShapeToString(*b.shape), "[batch,3]");
}

TEST(Checker, ReportsCyclesNamingANode) {
  Graph g = OneInputGraph({Dim::Known(1)});
  g.nodes.push_back(MakeNode("n1", "U", {"b"}, {"a"}));
  g.nodes.push_back(MakeNode("n2", "U", {"a"}, {"b"}));
  g.outputs.push_back({"a", TypeInfo{}, "", {}});
  OpRegistry r = TestRegistry();
  auto checked = CheckGraph(g, kOpsets, r, nullptr, {});
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(checked.status().message().find("cycle"), std::string::npos);
}

TEST(Checker, ReportsUndefinedInputsDuplicateOutputsAndArity) {
  OpRegistry r = TestRegistry();
  {
    Graph g = OneInputGraph({Dim::Known(1)});
    g.nodes.push_back(MakeNode("n", "U", {"missing"}, {"a"}));
    g.outputs.push_back({"a", TypeInfo{}, "", {}});
    auto c = CheckGraph(g, kOpsets, r, nullptr, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("'missing' is not defined"), std::string::npos) << c.status().message();
  }
  {
    Graph g = OneInputGraph({Dim::Known(1)});
    g.nodes.push_back(MakeNode("n1", "U", {"x"}, {"a"}));
    g.nodes.push_back(MakeNode("n2", "U", {"x"}, {"a"}));
    g.outputs.push_back({"a", TypeInfo{}, "", {}});
    auto c = CheckGraph(g, kOpsets, r, nullptr, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("more than once"), std::string::npos);
  }
  {
    Graph g = OneInputGraph({Dim::Known(1)});
    g.nodes.push_back(MakeNode("n", "B", {"x"}, {"a"}));
    g.outputs.push_back({"a", TypeInfo{}, "", {}});
    auto c = CheckGraph(g, kOpsets, r, nullptr, {});
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("node 'n' (B): has 1 inputs"), std::string::npos) << c.status().message();
  }
}

TEST(Checker, BroadcastViolationNamesTheNode) {
  Graph g;
  g.name = "g";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({2, 3})), "", {}});
  g.inputs.push_back({"y", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({4})), "", {}});
  g.nodes.push_back(MakeNode("add", "B", {"x", "y"}, {"z"}));
  g.outputs.push_back({"z", TypeInfo{}, "", {}});
  OpRegistry r = TestRegistry();
  auto c = CheckGraph(g, kOpsets, r, nullptr, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("node 'add' (B)"), std::string::npos) << c.status().message();
}

TEST(Checker, UnknownDomainAndOp) {
  OpRegistry r = TestRegistry();
  Graph g = OneInputGraph({Dim::Known(1)});
  g.nodes.push_back(MakeNode("n", "Mystery", {"x"}, {"a"}));
  g.outputs.push_back({"a", TypeInfo{}, "", {}});
  auto c = CheckGraph(g, kOpsets, r, nullptr, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotImplemented);
  g.nodes[0].op_type = "U";
  g.nodes[0].domain = "com.example";
  c = CheckGraph(g, kOpsets, r, nullptr, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("imports no opset for domain 'com.example'"), std::string::npos);
}

// A graph with four problems (an unknown op, a broadcast violation, an
// undefined input, a duplicate output), nodes downstream of them and one
// valid node.
Graph GraphWithProblems() {
  Graph g;
  g.name = "g";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({2, 3})), "", {}});
  g.inputs.push_back({"y", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({4})), "", {}});
  g.nodes.push_back(MakeNode("mystery", "Mystery", {"x"}, {"m"}));
  g.nodes.push_back(MakeNode("after_mystery", "U", {"m"}, {"m2"}));
  g.nodes.push_back(MakeNode("add", "B", {"x", "y"}, {"z"}));
  g.nodes.push_back(MakeNode("after_add", "B", {"z", "x"}, {"z2"}));
  g.nodes.push_back(MakeNode("dangling", "U", {"nowhere"}, {"d"}));
  g.nodes.push_back(MakeNode("fine", "U", {"x"}, {"f"}));
  g.nodes.push_back(MakeNode("again", "U", {"y"}, {"f"}));
  for (const char* name : {"m2", "z2", "d", "f"}) g.outputs.push_back({name, TypeInfo{}, "", {}});
  return g;
}

TEST(Checker, CollectsEveryProblemOnceWhenAsked) {
  OpRegistry r = TestRegistry();
  Graph g = GraphWithProblems();
  std::vector<Status> problems;
  CheckOptions options;
  options.problems = &problems;
  auto c = CheckGraph(g, kOpsets, r, nullptr, options);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(problems.size(), 4u);
  // Resolution problems first (node order), then undefined inputs, then inference.
  EXPECT_NE(problems[0].message().find("node 'mystery' (Mystery)"), std::string::npos) << problems[0].message();
  EXPECT_NE(problems[1].message().find("node 'again' (U): output 'f' is defined more than once"), std::string::npos)
      << problems[1].message();
  EXPECT_NE(problems[2].message().find("node 'dangling' (U): input 'nowhere'"), std::string::npos)
      << problems[2].message();
  EXPECT_NE(problems[3].message().find("node 'add' (B)"), std::string::npos) << problems[3].message();
  // What a broken node defines, and what reads it, is left untyped; the valid node is typed.
  EXPECT_EQ(c->types.at("m2").kind, TypeInfo::Kind::kUnknown);
  EXPECT_EQ(c->types.at("z2").kind, TypeInfo::Kind::kUnknown);
  ASSERT_TRUE(c->types.at("f").shape.has_value());
  EXPECT_EQ(ShapeToString(*c->types.at("f").shape), "[2,3]");

  // Without `problems` (sessions), the first problem is the error.
  auto first = CheckGraph(g, kOpsets, r, nullptr, {});
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().message(), problems[0].message());
}

// A model whose graph applies U to its input, importing `opsets`.
Model UModel(std::vector<OpsetImport> opsets) {
  Model m;
  m.ir_version = 8;
  m.opset_imports = std::move(opsets);
  m.graph = OneInputGraph({Dim::Known(2)});
  m.graph.nodes.push_back(MakeNode("u", "U", {"x"}, {"y"}));
  m.graph.outputs.push_back({"y", TypeInfo{}, "", {}});
  return m;
}

TEST(Checker, RefusesOpsetsNewerThanNeeSupports) {
  // onnx 1.23.2: onnx.defs.onnx_opset_version() is 28; ai.onnx.ml's newest is 5. ONNX Runtime
  // refuses a model stamped with anything newer.
  EXPECT_EQ(NewestSupportedOpset(""), 28);
  EXPECT_EQ(NewestSupportedOpset("ai.onnx"), 28);
  EXPECT_EQ(NewestSupportedOpset("ai.onnx.ml"), 5);
  EXPECT_EQ(NewestSupportedOpset("com.example"), -1);

  OpRegistry r = TestRegistry();
  EXPECT_TRUE(CheckModel(UModel({{"", 28}}), r).ok());
  EXPECT_TRUE(CheckModel(UModel({{"", 28}, {"ai.onnx.ml", 5}}), r).ok());
  // A custom domain nee does not know is not limited (its nodes fail as unknown ops).
  EXPECT_TRUE(CheckModel(UModel({{"", 13}, {"com.example", 99}}), r).ok());

  struct Case {
    std::vector<OpsetImport> opsets;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {{{"", 29}}, "opset 29 of domain 'ai.onnx', newer than the newest nee supports (28)"},
           {{{"ai.onnx", 9999}}, "opset 9999 of domain 'ai.onnx', newer than the newest nee supports (28)"},
           {{{"", 13}, {"ai.onnx.ml", 99}}, "opset 99 of domain 'ai.onnx.ml', newer than the newest nee supports (5)"},
           {{{"", 13}, {"com.microsoft", 2}},
            "opset 2 of domain 'com.microsoft', newer than the newest nee supports (1)"},
       }) {
    auto checked = CheckModel(UModel(c.opsets), r);
    ASSERT_FALSE(checked.ok()) << c.expected;
    EXPECT_EQ(checked.status().code(), StatusCode::kNotImplemented);
    EXPECT_NE(checked.status().message().find(c.expected), std::string::npos) << checked.status().message();
  }
}

TEST(Checker, NewestSupportedOpsetCoversEveryRegisteredVersion) {
  // Every domain the registry has ops in is limited, and no registered since-version lies beyond
  // the limit (it could never be used): adopting a newer opset is a deliberate change of the table.
  for (const auto& [qualified, versions] : OpRegistry::Global().List()) {
    size_t dot = qualified.rfind('.');
    std::string domain = dot == std::string::npos ? "" : qualified.substr(0, dot);
    int64_t newest = NewestSupportedOpset(domain);
    ASSERT_GT(newest, 0) << "domain '" << domain << "' of " << qualified << " has no newest opset";
    for (int v : versions) EXPECT_LE(v, newest) << qualified << " is registered at opset " << v;
  }
}

// ---- Attributes against the op version's declaration (ops/attr_spec.h) ----

// A graph applying one real operator (the global registry) to float input x.
Result<CheckedGraph> CheckOneNode(const std::string& op, std::vector<Attribute> attrs, int64_t opset = 17,
                                  const std::string& domain = "", std::vector<std::string> inputs = {"x"}) {
  Graph g = OneInputGraph({Dim::Known(2), Dim::Known(2)});
  Node n = MakeNode("n", op, std::move(inputs), {"y"});
  n.domain = domain;
  n.attributes = std::move(attrs);
  g.nodes.push_back(std::move(n));
  g.outputs.push_back({"y", TypeInfo{}, "", {}});
  OpsetMap opsets = {{"", opset}};
  if (!domain.empty()) opsets[domain] = 1;
  return CheckGraph(g, opsets, OpRegistry::Global(), nullptr, {});
}

void ExpectRefused(const Result<CheckedGraph>& c, const std::string& expected) {
  ASSERT_FALSE(c.ok()) << expected;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(c.status().message().find(expected), std::string::npos) << c.status().message();
}

TEST(CheckerAttributes, DeclarationsResolveByOpset) {
  const AttrSchema* relu = FindAttrSchema("", "Relu", 5);
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->Label(), "Relu-1");
  ASSERT_NE(relu->Find("consumed_inputs"), nullptr);
  EXPECT_EQ(relu->Find("consumed_inputs")->type, AttrType::kInts);
  const AttrSchema* relu14 = FindAttrSchema("ai.onnx", "Relu", 17);
  ASSERT_NE(relu14, nullptr);
  EXPECT_EQ(relu14->Label(), "Relu-14");
  EXPECT_TRUE(relu14->attrs.empty());
  const AttrSchema* cast = FindAttrSchema("", "Cast", 21);
  ASSERT_NE(cast, nullptr);
  ASSERT_NE(cast->Find("to"), nullptr);
  EXPECT_TRUE(cast->Find("to")->required);
  EXPECT_FALSE(cast->Find("saturate")->required);
  EXPECT_NE(FindAttrSchema("com.microsoft", "FusedConv", 1), nullptr);
  EXPECT_NE(FindAttrSchema("ai.nee", "FusedMatMul", 1), nullptr);
  EXPECT_EQ(FindAttrSchema("", "Relu", 0), nullptr);         // before its first version
  EXPECT_EQ(FindAttrSchema("com.example", "Relu", 1), nullptr);  // an undeclared domain
}

// The spec's defaults, as onnx.defs (onnxruntime's schemas for com.microsoft)
// give them; tests/python/test_cli_ops_check.py compares every one.
TEST(CheckerAttributes, DeclarationsCarryTheSpecsDefaults) {
  const AttrDecl* alpha = FindAttrSchema("", "LeakyRelu", 17)->Find("alpha");
  ASSERT_TRUE(alpha->has_default);
  EXPECT_EQ(alpha->default_value.type, AttrType::kFloat);
  EXPECT_EQ(alpha->default_value.f, 0.01f);
  const AttrSchema* clip6 = FindAttrSchema("", "Clip", 6);
  EXPECT_EQ(clip6->Find("max")->default_value.f, 3.4028234663852886e38f);  // FLT_MAX, exactly
  EXPECT_EQ(clip6->Find("min")->default_value.f, -3.4028234663852886e38f);
  const AttrDecl* mvn = FindAttrSchema("", "MeanVarianceNormalization", 13)->Find("axes");
  EXPECT_EQ(mvn->default_value.ints, (std::vector<int64_t>{0, 2, 3}));
  const AttrSchema* rnn = FindAttrSchema("", "RNN", 22);
  EXPECT_EQ(rnn->Find("activations")->default_value.strings, (std::vector<std::string>{"Tanh", "Tanh"}));
  EXPECT_EQ(rnn->Find("direction")->default_value.s, "forward");
  EXPECT_FALSE(rnn->Find("hidden_size")->has_default);
  EXPECT_FALSE(FindAttrSchema("", "Cast", 21)->Find("to")->has_default);
  EXPECT_EQ(FindAttrSchema("", "Cast", 21)->Find("saturate")->default_value.i, 1);
  const AttrDecl* neg_zero = FindAttrSchema("ai.onnx.ml", "LabelEncoder", 4)->Find("default_float");
  ASSERT_TRUE(neg_zero->has_default);
  EXPECT_EQ(neg_zero->default_value.f, 0.0f);
  EXPECT_TRUE(std::signbit(neg_zero->default_value.f));  // onnx declares -0.0
  const AttrDecl* empty = FindAttrSchema("com.microsoft", "PagedAttention", 1)->Find("k_cache_dtype");
  ASSERT_TRUE(empty->has_default);
  EXPECT_EQ(empty->default_value.s, "");
  EXPECT_EQ(FindAttrSchema("com.microsoft", "PagedAttention", 1)->Find("kv_cache_layout")->default_value.s, "SEPARATE");
}

TEST(CheckerAttributes, OmittedOptionalAttributesPass) {
  auto c = CheckOneNode("LeakyRelu", {});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  c = CheckOneNode("LeakyRelu", {testing::FloatAttr("alpha", 0.2f)});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  c = CheckOneNode("Cast", {testing::IntAttr("to", 1)});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  // onnx reserves "__" names for internal use and lets them through.
  c = CheckOneNode("Relu", {testing::IntAttr("__internal", 1)});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

TEST(CheckerAttributes, RefusesUnknownAttributes) {
  ExpectRefused(CheckOneNode("Relu", {testing::FloatAttr("foo", 1)}),
                "node 'n' (Relu): unknown attribute 'foo' (Relu-14 has no attributes)");
  ExpectRefused(CheckOneNode("LeakyRelu", {testing::FloatAttr("beta", 1)}),
                "unknown attribute 'beta' (LeakyRelu-16 has alpha)");
  // An attribute an older version had is unknown to a newer one.
  ExpectRefused(CheckOneNode("Relu", {testing::IntsAttr("consumed_inputs", {0})}), "unknown attribute 'consumed_inputs'");
  EXPECT_TRUE(CheckOneNode("Relu", {testing::IntsAttr("consumed_inputs", {0})}, 5).ok());
  ExpectRefused(CheckOneNode("FusedMatMul", {testing::IntAttr("bogus", 1)}, 17, "ai.nee", {"x", "x"}),
                "unknown attribute 'bogus' (ai.nee.FusedMatMul-1 has activation)");
}

TEST(CheckerAttributes, RefusesMistypedAttributes) {
  ExpectRefused(CheckOneNode("LeakyRelu", {testing::IntAttr("alpha", 1)}), "attribute 'alpha' must be FLOAT, got INT");
  ExpectRefused(CheckOneNode("Cast", {testing::IntsAttr("to", {1})}), "attribute 'to' must be INT, got INTS (Cast-13)");
}

TEST(CheckerAttributes, RefusesMissingRequiredAndRepeatedAttributes) {
  ExpectRefused(CheckOneNode("Cast", {}), "node 'n' (Cast): required attribute 'to' (INT) is missing (Cast-13)");
  ExpectRefused(CheckOneNode("LeakyRelu", {testing::FloatAttr("alpha", 1), testing::FloatAttr("alpha", 2)}),
                "attribute 'alpha' is given more than once");
  ExpectRefused(CheckOneNode("LeakyRelu", {testing::FloatAttr("", 1)}), "an attribute has an empty name");
}

TEST(CheckerAttributes, TestRegistryOpsWithoutDeclarationsAreNotChecked) {
  // Ops no declaration covers (a test registry's, a custom op's) keep whatever attributes they carry.
  OpRegistry r = TestRegistry();
  Graph g = OneInputGraph({Dim::Known(1)});
  g.nodes.push_back(MakeNode("u", "U", {"x"}, {"a"}));
  g.nodes[0].attributes.push_back(testing::IntAttr("anything", 1));
  g.outputs.push_back({"a", TypeInfo{}, "", {}});
  EXPECT_TRUE(CheckGraph(g, kOpsets, r, nullptr, {}).ok());
}

}  // namespace
}  // namespace nee
