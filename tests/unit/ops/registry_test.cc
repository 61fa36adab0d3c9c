#include <gtest/gtest.h>

#include "ops/op_registry.h"

namespace nee {
namespace {

Status DummyKernel(KernelContext&) { return Status::Ok(); }

TEST(OpRegistry, ResolvesTheVersionInForce) {
  OpRegistry r;
  r.RegisterVersions("", "Foo", {7, 13}, 1, 1, 1, 1, nullptr, DummyKernel);
  auto at12 = r.Resolve("", "Foo", 12);
  ASSERT_TRUE(at12.ok());
  EXPECT_EQ(at12.value()->since_version, 7);
  auto at18 = r.Resolve("ai.onnx", "Foo", 18);
  ASSERT_TRUE(at18.ok());
  EXPECT_EQ(at18.value()->since_version, 13);
  auto at6 = r.Resolve("", "Foo", 6);
  ASSERT_FALSE(at6.ok());
  EXPECT_EQ(at6.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(at6.status().message().find("introduced in opset 7"), std::string::npos);
  auto unknown = r.Resolve("", "Bar", 13);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotImplemented);
}

}  // namespace
}  // namespace nee

namespace nee {
namespace {

TEST(OpRegistry, EveryOpIsRegisteredByExactlyOneFamily) {
  const OpRegistry& r = OpRegistry::Global();
  EXPECT_TRUE(r.duplicates().empty()) << "first duplicate: " << r.duplicates().front();
  // Every entry has a shape rule, and a kernel unless it is a pure decomposition.
  for (const auto& [name, versions] : r.List()) {
    // "ai.onnx.ml.TreeEnsemble", "com.microsoft.QLinearAdd": the domain is all before the last dot.
    std::string domain = name.find('.') != std::string::npos ? name.substr(0, name.rfind('.')) : "";
    std::string op = domain.empty() ? name : name.substr(domain.size() + 1);
    for (int v : versions) {
      auto s = r.Resolve(domain, op, v);
      ASSERT_TRUE(s.ok()) << name << " " << v << ": " << s.status().ToString();
      EXPECT_NE(s.value()->kernel, nullptr) << name << "-" << v;
    }
  }
  EXPECT_GT(r.num_ops(), 200u);
}

}  // namespace
}  // namespace nee

#include <set>

#include "check/checker.h"
#include "ops/attr_spec.h"

namespace nee {
namespace {

// The least and most counts a declaration's formals allow, as onnx's
// OpSchema::Verify counts them (written out here, not taken from the checker,
// so the test states the rule independently).
std::pair<int, int> FormalsArity(const std::vector<FormalParam>& formals) {
  int least = 0, most = 0;
  for (const FormalParam& f : formals) {
    if (f.option == FormalParam::Option::kSingle)
      least = ++most;
    else if (f.option == FormalParam::Option::kOptional)
      ++most;
    else
      least = most + f.min_arity, most = kVariadic;
  }
  return {least, most};
}

std::pair<std::string, std::string> SplitQualified(const std::string& qualified) {
  const size_t dot = qualified.rfind('.');
  if (dot == std::string::npos) return {"", qualified};
  return {qualified.substr(0, dot), qualified.substr(dot + 1)};
}

// An entry registered without counts takes its arity from the declaration,
// so every version it serves must have one (a declaration in force at its
// since-version is in force at every later opset too).
TEST(OpRegistry, EveryEntryWithoutCountsHasADeclaration) {
  const OpRegistry& r = OpRegistry::Global();
  int declared = 0;
  for (const auto& [qualified, versions] : r.List()) {
    const auto [domain, op] = SplitQualified(qualified);
    for (int v : versions) {
      const OpSchema* s = r.Resolve(domain, op, v).value();
      if (!ArityDeclared(*s)) continue;
      ++declared;
      EXPECT_NE(FindAttrSchema(domain, op, v), nullptr) << qualified << "-" << v << " has no declaration";
    }
  }
  EXPECT_GT(declared, 600);
}

// Counts given to a declared op are never read (the checker takes the
// declaration's), so no registration of a declared op states them.
TEST(OpRegistry, DeclaredOpsStateNoCounts) {
  const OpRegistry& r = OpRegistry::Global();
  for (const auto& [qualified, versions] : r.List()) {
    const auto [domain, op] = SplitQualified(qualified);
    for (int v : versions) {
      const OpSchema* s = r.Resolve(domain, op, v).value();
      EXPECT_FALSE(!ArityDeclared(*s) && FindAttrSchema(domain, op, v))
          << qualified << "-" << v << " is declared: register it without counts";
    }
  }
}

// Whether CheckGraph refuses a one-node graph for its arity: "has N inputs,"
// or "has N outputs," (the node's later problems, attributes or types, are
// not what is asked).
bool RefusedForArity(const std::string& domain, const std::string& op, int64_t opset, int n_in, int n_out) {
  Graph g;
  g.name = "g";
  Node n;
  n.name = "n";
  n.op_type = op;
  n.domain = domain;
  for (int k = 0; k < n_in; ++k) {
    n.inputs.push_back("x" + std::to_string(k));
    g.inputs.push_back({"x" + std::to_string(k), TypeInfo::Tensor(DataType::kFloat, Shape{}), "", {}});
  }
  for (int k = 0; k < n_out; ++k) n.outputs.push_back("y" + std::to_string(k));
  g.nodes.push_back(n);
  OpsetMap opsets = {{NormalizeDomain(domain), opset}};
  if (!domain.empty()) opsets[""] = 21;
  auto checked = CheckGraph(g, opsets, OpRegistry::Global(), nullptr, {});
  if (checked.ok()) return false;
  const std::string& m = checked.status().message();
  return m.find("has " + std::to_string(n_in) + " inputs, ") != std::string::npos ||
         m.find("has " + std::to_string(n_out) + " outputs, ") != std::string::npos;
}

// For every registered (domain, op, version) with a declaration, the counts
// the checker admits are exactly the declaration's: its least and most
// (or a few past the least for a variadic formal) admitted, one fewer and one
// more refused. The registry states no counts of its own for these ops, so
// the two cannot drift apart.
TEST(OpRegistry, TheCheckersArityIsTheDeclarations) {
  const OpRegistry& r = OpRegistry::Global();
  int compared = 0;
  for (const AttrSchema* decl : AllAttrSchemas()) {
    const std::string domain = decl->domain;
    const std::string op = decl->op;
    auto entry = r.Resolve(domain, op, decl->since_version);
    if (!entry.ok()) continue;  // declared, not implemented (or not at this version)
    const auto [in_least, in_most] = FormalsArity(decl->inputs);
    const auto [out_least, out_most] = FormalsArity(decl->outputs);
    const int v = decl->since_version;
    // Counts inside the other side's range, so only one side is judged.
    const int out_ok = std::max(out_least, 1) <= out_most ? std::max(out_least, 1) : out_least;
    const int in_ok = in_least;
    const int in_top = in_most == kVariadic ? in_least + 3 : in_most;
    const int out_top = out_most == kVariadic ? out_least + 3 : out_most;
    for (int n = in_least; n <= in_top; ++n)
      EXPECT_FALSE(RefusedForArity(domain, op, v, n, out_ok)) << decl->Label() << " refused with " << n << " inputs";
    if (in_least > 0) EXPECT_TRUE(RefusedForArity(domain, op, v, in_least - 1, out_ok)) << decl->Label();
    if (in_most != kVariadic) EXPECT_TRUE(RefusedForArity(domain, op, v, in_most + 1, out_ok)) << decl->Label();
    for (int n = out_least; n <= out_top; ++n)
      EXPECT_FALSE(RefusedForArity(domain, op, v, in_ok, n)) << decl->Label() << " refused with " << n << " outputs";
    if (out_least > 0) EXPECT_TRUE(RefusedForArity(domain, op, v, in_ok, out_least - 1)) << decl->Label();
    if (out_most != kVariadic) EXPECT_TRUE(RefusedForArity(domain, op, v, in_ok, out_most + 1)) << decl->Label();
    ++compared;
  }
  EXPECT_GT(compared, 600);
}

}  // namespace
}  // namespace nee
