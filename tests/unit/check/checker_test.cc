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

}  // namespace
}  // namespace nee
