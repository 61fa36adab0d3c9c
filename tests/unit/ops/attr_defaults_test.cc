// Declared attribute defaults (ops/attr_spec.h, ir/attr_decl.h) as Node::Get*
// answers them: every declared default is what a bound node without the
// attribute reads; unbound nodes read the caller's fallback; the audit records
// a fallback that disagrees. The values themselves are compared with onnx's
// schemas in tests/python/test_cli_ops_check.py.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "ir/attr_decl.h"
#include "ir/graph.h"
#include "ops/attr_spec.h"
#include "op_test_util.h"

namespace nee {
namespace {

Node BoundNode(const AttrSchema& spec) {
  Node n;
  n.name = "n";
  n.op_type = spec.op;
  n.domain = spec.domain;
  n.declaration = &spec;
  return n;
}

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

TEST(AttrDefaults, EveryDeclaredDefaultIsWhatABoundNodeReads) {
  size_t checked = 0;
  for (const AttrSchema* spec : AllAttrSchemas()) {
    const Node node = BoundNode(*spec);
    for (const AttrDecl& d : spec->attrs) {
      if (!d.has_default) continue;
      const Attribute& want = d.default_value;
      SCOPED_TRACE(spec->Label() + " " + d.name);
      ++checked;
      switch (d.type) {
        case AttrType::kInt:
          EXPECT_EQ(node.GetInt(d.name, want.i + 12345).value(), want.i);
          EXPECT_EQ(node.GetInt(d.name).value(), want.i);
          break;
        case AttrType::kFloat: {
          const float got = node.GetFloat(d.name, want.f + 1.5f).value();
          EXPECT_EQ(std::memcmp(&got, &want.f, sizeof got), 0) << got << " vs " << want.f;
          break;
        }
        case AttrType::kString:
          EXPECT_EQ(node.GetString(d.name, want.s + "x").value(), want.s);
          break;
        case AttrType::kInts:
          EXPECT_EQ(node.GetInts(d.name, {}).value(), want.ints);
          break;
        case AttrType::kFloats:
          EXPECT_TRUE(SameFloats(node.GetFloats(d.name, {}).value(), want.floats));
          break;
        case AttrType::kStrings:
          EXPECT_EQ(node.GetStrings(d.name, {}).value(), want.strings);
          break;
        default:
          ADD_FAILURE() << "a default of type " << AttrTypeSpecName(d.type);
      }
      // Asked for as another type, the attribute is not the declared one:
      // the caller's fallback stands.
      if (d.type != AttrType::kStrings) EXPECT_EQ(node.GetStrings(d.name, {"fallback"}).value()[0], "fallback");
    }
  }
  EXPECT_GT(checked, 800u);
}

TEST(AttrDefaults, UnboundStaleAndPresentAttributes) {
  const AttrSchema* leaky = FindAttrSchema("", "LeakyRelu", 17);
  ASSERT_NE(leaky, nullptr);
  Node n = BoundNode(*leaky);
  EXPECT_EQ(n.GetFloat("alpha", 0.5f).value(), 0.01f);
  // Given, the attribute's own value; of the wrong type, an error.
  n.attributes = {testing::FloatAttr("alpha", 0.25f)};
  EXPECT_EQ(n.GetFloat("alpha", 0.5f).value(), 0.25f);
  n.attributes = {testing::IntAttr("alpha", 1)};
  EXPECT_FALSE(n.GetFloat("alpha", 0.5f).ok());
  n.attributes.clear();
  // Not bound: the caller's fallback, and the required form fails.
  Node unbound = n;
  unbound.declaration = nullptr;
  EXPECT_EQ(unbound.GetFloat("alpha", 0.5f).value(), 0.5f);
  EXPECT_FALSE(unbound.GetFloat("alpha").ok());
  // Bound, then rewritten to another op in place: the stale declaration is ignored.
  Node stale = n;
  stale.op_type = "Elu";
  EXPECT_EQ(stale.GetFloat("alpha", 1.0f).value(), 1.0f);
  // An attribute the declaration has no default for: the fallback.
  const AttrSchema* cast = FindAttrSchema("", "Cast", 21);
  EXPECT_EQ(BoundNode(*cast).GetInt("to", 7).value(), 7);
}

TEST(AttrDefaults, BindingFollowsTheModelsOpsetAndSubgraphs) {
  Model m;
  m.opset_imports = {{"", 11}, {"ai.onnx.ml", 3}};
  m.graph.nodes.push_back(testing::MakeNode("Softmax", 1, 1));
  m.graph.nodes.push_back(testing::MakeNode("Relu", 1, 1, {}, "com.example"));
  Node if_node = testing::MakeNode("If", 1, 1);
  auto body = std::make_shared<Graph>();
  body->nodes.push_back(testing::MakeNode("Softmax", 1, 1));
  Attribute branch;
  branch.name = "then_branch";
  branch.type = AttrType::kGraph;
  branch.g = body;
  if_node.attributes.push_back(branch);
  m.graph.nodes.push_back(if_node);
  BindAttrDeclarations(m);
  ASSERT_NE(m.graph.nodes[0].declaration, nullptr);
  EXPECT_EQ(m.graph.nodes[0].declaration->Label(), "Softmax-11");
  EXPECT_EQ(m.graph.nodes[0].GetInt("axis", -1).value(), 1);  // Softmax before 13: axis 1
  EXPECT_EQ(m.graph.nodes[1].declaration, nullptr);           // a domain the model does not import
  ASSERT_NE(body->nodes[0].declaration, nullptr);
  EXPECT_EQ(body->nodes[0].declaration->Label(), "Softmax-11");
  m.opset_imports[0].version = 13;
  BindAttrDeclarations(m);
  EXPECT_EQ(m.graph.nodes[0].GetInt("axis", 1).value(), -1);
}

TEST(AttrDefaults, AuditRecordsFallbacksThatDisagree) {
  const AttrSchema* leaky = FindAttrSchema("", "LeakyRelu", 17);
  const Node n = BoundNode(*leaky);
  TakeAttrDefaultMismatches();
  SetAttrDefaultAudit(true);
  EXPECT_EQ(n.GetFloat("alpha", 0.01f).value(), 0.01f);  // agrees: nothing recorded
  EXPECT_EQ(n.GetFloat("alpha", 0.5f).value(), 0.01f);   // the declaration wins, and is recorded
  EXPECT_EQ(n.GetFloat("alpha", 0.5f).value(), 0.01f);   // once
  EXPECT_EQ(n.GetFloat("alpha").value(), 0.01f);         // a reader treating it as required
  SetAttrDefaultAudit(false);
  EXPECT_EQ(n.GetFloat("alpha", 0.7f).value(), 0.01f);  // audit off: not recorded
  const std::vector<std::string> lines = TakeAttrDefaultMismatches();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "LeakyRelu-16 alpha: declared 0.01, reader's fallback 0.5");
  EXPECT_EQ(lines[1], "LeakyRelu-16 alpha: declared 0.01, reader's fallback none (required)");
  EXPECT_TRUE(TakeAttrDefaultMismatches().empty());
}

}  // namespace
}  // namespace nee
