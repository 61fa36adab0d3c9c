#include "check/checker.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace nee
