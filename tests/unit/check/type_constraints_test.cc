// Input types against each op version's formal inputs and type constraints
// (ops/attr_spec.h, check/type_constraints.h): a type the constraint does not
// allow, or two types under one letter, is refused naming the node, the input
// (position and formal name) and the allowed types, as ONNX Runtime refuses
// them when it resolves the graph.
#include <gtest/gtest.h>

#include <algorithm>

#include "check/checker.h"
#include "check/type_constraints.h"
#include "../ops/op_test_util.h"
#include "ops/attr_spec.h"
#include "ops/op_registry.h"

namespace nee {
namespace {

Node MakeNode(const std::string& op, std::vector<std::string> in, const std::string& domain = "") {
  Node n;
  n.name = "n";
  n.op_type = op;
  n.domain = domain;
  n.inputs = std::move(in);
  n.outputs = {"y"};
  return n;
}

// One node of the global registry over graph inputs of the given types.
Result<CheckedGraph> CheckOne(Node node, const std::vector<std::pair<std::string, TypeInfo>>& inputs,
                              int64_t opset = 17) {
  Graph g;
  g.name = "g";
  for (const auto& [name, type] : inputs) g.inputs.push_back({name, type, "", {}});
  g.nodes.push_back(std::move(node));
  g.outputs.push_back({"y", TypeInfo{}, "", {}});
  OpsetMap opsets = {{"", opset}, {"com.microsoft", 1}, {"ai.nee", 1}};
  return CheckGraph(g, opsets, OpRegistry::Global(), nullptr, {});
}

TypeInfo T(DataType t) { return TypeInfo::Tensor(t, Shape{Dim::Known(2)}); }

void ExpectRefused(const Result<CheckedGraph>& c, const std::vector<std::string>& parts) {
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidModel);
  for (const std::string& p : parts) EXPECT_NE(c.status().message().find(p), std::string::npos) << c.status().message();
}

TEST(TypeConstraints, DeclarationsCarryFormalsAndConstraints) {
  const AttrSchema* add = FindAttrSchema("", "Add", 17);
  ASSERT_NE(add, nullptr);
  ASSERT_EQ(add->inputs.size(), 2u);
  EXPECT_EQ(add->inputs[0].name, "A");
  EXPECT_EQ(add->inputs[1].type, "T");
  ASSERT_EQ(add->outputs.size(), 1u);
  EXPECT_EQ(add->outputs[0].name, "C");
  const TypeConstraint* t = add->FindConstraint("T");
  ASSERT_NE(t, nullptr);
  EXPECT_NE(std::find(t->allowed->begin(), t->allowed->end(), "tensor(float)"), t->allowed->end());
  EXPECT_EQ(std::find(t->allowed->begin(), t->allowed->end(), "tensor(string)"), t->allowed->end());

  const AttrSchema* reshape = FindAttrSchema("", "Reshape", 17);
  EXPECT_EQ(reshape->inputs[1].type, "tensor(int64)");  // a fixed type, no letter
  EXPECT_EQ(reshape->FindConstraint("tensor(int64)"), nullptr);

  const AttrSchema* concat = FindAttrSchema("", "Concat", 13);
  EXPECT_EQ(concat->inputs[0].option, FormalParam::Option::kVariadic);
  EXPECT_TRUE(concat->inputs[0].homogeneous);
  EXPECT_EQ(concat->InputFormal(5), &concat->inputs[0]);
  const AttrSchema* loop = FindAttrSchema("", "Loop", 21);
  EXPECT_EQ(loop->inputs[0].option, FormalParam::Option::kOptional);
  EXPECT_FALSE(loop->inputs[2].homogeneous);
  EXPECT_EQ(loop->inputs[2].min_arity, 0);
  // com.microsoft from onnxruntime's schemas; ai.nee's by hand.
  EXPECT_EQ(FindAttrSchema("com.microsoft", "FusedConv", 1)->inputs[0].name, "X");
  const AttrSchema* fused = FindAttrSchema("ai.nee", "FusedMatMul", 1);
  EXPECT_EQ(fused->inputs[2].option, FormalParam::Option::kOptional);
  EXPECT_EQ(*fused->FindConstraint("T")->allowed, std::vector<std::string>{"tensor(float)"});
  // A map's value is spelt as TypeInfo::ToString spells it.
  const auto* dv = FindAttrSchema("ai.onnx.ml", "DictVectorizer", 1)->FindConstraint("T1")->allowed;
  EXPECT_NE(std::find(dv->begin(), dv->end(), "map(string,tensor(int64))"), dv->end());
}

TEST(TypeConstraints, AllowedTypesPass) {
  EXPECT_TRUE(CheckOne(MakeNode("Add", {"a", "b"}), {{"a", T(DataType::kInt32)}, {"b", T(DataType::kInt32)}}).ok());
  EXPECT_TRUE(CheckOne(MakeNode("Relu", {"a"}), {{"a", T(DataType::kDouble)}}).ok());
  // Unknown element types are not judged.
  EXPECT_TRUE(CheckOne(MakeNode("Relu", {"a"}), {{"a", TypeInfo{}}}).ok());
}

TEST(TypeConstraints, AMistypedInputIsRefusedNamingNodeInputAndAllowedTypes) {
  ExpectRefused(CheckOne(MakeNode("Relu", {"a"}), {{"a", T(DataType::kString)}}),
                {"node 'n' (Relu)", "input 0 ('X')", "tensor(string)", "Relu-14", "T in tensor(float)"});
  // A fixed-type formal: Reshape's shape is int64 only (ONNX Runtime refuses int32).
  ExpectRefused(CheckOne(MakeNode("Reshape", {"a", "s"}), {{"a", T(DataType::kFloat)}, {"s", T(DataType::kInt32)}}),
                {"node 'n' (Reshape)", "input 1 ('shape')", "has type tensor(int32)", "takes tensor(int64)"});
  // Past the declared inputs of a variadic formal: Concat's fourth input.
  Node concat = MakeNode("Concat", {"a", "a", "a", "s"});
  concat.attributes.push_back(testing::IntAttr("axis", 0));
  ExpectRefused(CheckOne(concat, {{"a", T(DataType::kFloat)}, {"s", T(DataType::kInt64)}}),
                {"input 3 ('inputs')", "tensor(int64)", "input 0 ('inputs') has tensor(float)"});
  // nee's own fused op: float32 only.
  ExpectRefused(CheckOne(MakeNode("FusedMatMul", {"a", "b"}, "ai.nee"),
                         {{"a", T(DataType::kDouble)}, {"b", T(DataType::kDouble)}}),
                {"input 0 ('A')", "ai.nee.FusedMatMul-1 allows T in tensor(float)"});
}

TEST(TypeConstraints, MixedTypesUnderOneLetterAreRefused) {
  ExpectRefused(CheckOne(MakeNode("Add", {"a", "b"}), {{"a", T(DataType::kFloat)}, {"b", T(DataType::kInt64)}}),
                {"node 'n' (Add)", "input 1 ('B') has type tensor(int64) but input 0 ('A') has tensor(float)",
                 "Add-14 binds both to T"});
  // Letters that differ may differ: Where's condition is B, its branches T.
  EXPECT_TRUE(CheckOne(MakeNode("Where", {"c", "a", "a"}), {{"c", T(DataType::kBool)}, {"a", T(DataType::kFloat)}}).ok());
  ExpectRefused(CheckOne(MakeNode("Where", {"c", "a", "b"}),
                         {{"c", T(DataType::kBool)}, {"a", T(DataType::kFloat)}, {"b", T(DataType::kDouble)}}),
                {"input 2 ('Y')", "input 1 ('X')"});
}

TEST(TypeConstraints, AnOptionalFormalTakesItsContents) {
  // A session fed a sequence for an optional(seq) graph input types it by the
  // value: OptionalHasElement-15 (optionals only) then sees the sequence.
  const AttrSchema* has = FindAttrSchema("", "OptionalHasElement", 15);
  Node node = MakeNode("OptionalHasElement", {"s"});
  std::vector<TypeInfo> types = {TypeInfo::Sequence(T(DataType::kFloat))};
  EXPECT_TRUE(CheckInputTypes(node, *has, {&types[0]}).ok());
  types[0] = T(DataType::kFloat);  // the contents of optional(tensor(float))
  EXPECT_TRUE(CheckInputTypes(node, *has, {&types[0]}).ok());
  types[0] = TypeInfo::Sequence(TypeInfo::Sequence(T(DataType::kFloat)));
  EXPECT_FALSE(CheckInputTypes(node, *has, {&types[0]}).ok());
}

TEST(TypeConstraints, ArityErrorsNameTheFormals) {
  ExpectRefused(CheckOne(MakeNode("Gemm", {"a", "a", "a", "a"}), {{"a", T(DataType::kFloat)}}),
                {"node 'n' (Gemm): has 4 inputs, Gemm-13 allows 2 to 3 (A, B, C?)"});
  ExpectRefused(CheckOne(MakeNode("Gemm", {"a", ""}), {{"a", T(DataType::kFloat)}}),
                {"required input 1 ('B') is empty"});
  // One registry entry serves Clip-1 to Clip-13 (1 to 3 inputs); Clip-6 declares its input only.
  ExpectRefused(CheckOne(MakeNode("Clip", {"a", "a", "a"}), {{"a", T(DataType::kFloat)}}, 10),
                {"node 'n' (Clip): has 3 inputs, Clip-6 allows 1 (input)"});
  EXPECT_TRUE(CheckOne(MakeNode("Clip", {"a", "a", "a"}), {{"a", T(DataType::kFloat)}}, 13).ok());
  // Gemm's C is optional from Gemm-11 on.
  ExpectRefused(CheckOne(MakeNode("Gemm", {"a", "a"}), {{"a", T(DataType::kFloat)}}, 9),
                {"has 2 inputs, Gemm-9 allows 3 (A, B, C)"});
  // Loop's M and cond are optional but positional: at least 2 inputs, and at least one output.
  Node loop = MakeNode("Loop", {"a"});
  ExpectRefused(CheckOne(loop, {{"a", T(DataType::kFloat)}}, 17), {"has 1 inputs, Loop-16 allows 2 or more (M?, cond?, v_initial...)"});
}

// A shape rule that gets its output type wrong (int64 for Relu of float).
Status WrongRule(InferenceContext& ctx) {
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kInt64);
  return Status::Ok();
}
Status NoKernel(KernelContext&) { return Status::Ok(); }

TEST(TypeConstraints, TheOutputAuditRecordsARuleTheDeclarationContradicts) {
  OpRegistry r;
  r.RegisterVersions("", "Relu", {14}, 1, 1, 1, 1, WrongRule, NoKernel);
  r.RegisterVersions("", "Shape", {15}, 1, 1, 1, 1, WrongRule, NoKernel);
  Graph g;
  g.name = "g";
  g.inputs.push_back({"x", T(DataType::kFloat), "", {}});
  g.nodes.push_back(MakeNode("Relu", {"x"}));
  Node shape = MakeNode("Shape", {"x"});
  shape.outputs = {"s"};
  g.nodes.push_back(shape);
  g.outputs.push_back({"y", TypeInfo{}, "", {}});
  g.outputs.push_back({"s", TypeInfo{}, "", {}});
  TakeOutputTypeMismatches();
  SetOutputTypeAudit(true);
  auto checked = CheckGraph(g, {{"", 17}}, r, nullptr, {});
  SetOutputTypeAudit(false);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();  // recorded, not refused
  EXPECT_EQ(TakeOutputTypeMismatches(),
            std::vector<std::string>{"Relu-14 output 0 ('Y'): type tensor(int64), but T is bound to tensor(float)"});
  // Shape's output is int64 as its declaration says: nothing recorded.
  EXPECT_TRUE(CheckGraph(g, {{"", 17}}, r, nullptr, {}).ok());
  EXPECT_TRUE(TakeOutputTypeMismatches().empty());
}

// The registry states no counts for declared ops; that the checker enforces
// each version's declaration is tested in tests/unit/ops/registry_test.cc.

TEST(TypeConstraints, EveryFormalsLetterIsDeclared) {
  // Every formal's type is a letter of its declaration or a fixed type.
  for (const AttrSchema* s : AllAttrSchemas())
    for (const auto* formals : {&s->inputs, &s->outputs})
      for (const FormalParam& f : *formals)
        EXPECT_TRUE(s->FindConstraint(f.type) || f.type.find('(') != std::string::npos)
            << s->Label() << " " << f.name << ":" << f.type;
}

}  // namespace
}  // namespace nee
