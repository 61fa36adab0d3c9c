#include "plan/memory_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../ops/op_test_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

Status Noop(KernelContext&) { return Status::Ok(); }

// Ops whose output has the same shape (U) or a broadcast shape (B).
const OpRegistry& Registry() {
  static OpRegistry r = [] {
    OpRegistry reg;
    reg.RegisterVersions("", "U", {1}, 1, 1, 1, 1, InferSameAsInput0, Noop);
    reg.RegisterVersions("", "B", {1}, 2, 2, 1, 1, InferBroadcast, Noop);
    reg.RegisterVersions("", "Identity", {1}, 1, 1, 1, 1, InferSameAsInput0, Noop);  // a view op
    return reg;
  }();
  return r;
}

// A random DAG of U/B nodes over one [n] input: every intermediate is planned.
Graph RandomGraph(std::mt19937& rng, int nodes) {
  Graph g;
  g.name = "random";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({257})), "", {}});
  std::vector<std::string> values = {"x"};
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    bool binary = rng() % 2;
    n.op_type = binary ? "B" : "U";
    n.inputs.push_back(values[rng() % values.size()]);
    if (binary) n.inputs.push_back(values[rng() % values.size()]);
    n.outputs.push_back("v" + std::to_string(i));
    values.push_back(n.outputs[0]);
    g.nodes.push_back(std::move(n));
  }
  g.outputs.push_back({values.back(), TypeInfo{}, "", {}});
  return g;
}

TEST(MemoryPlan, LiveValuesNeverShareBytesAndTheArenaReusesSpace) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    Graph g = RandomGraph(rng, 5 + trial % 30);
    auto checked = CheckGraph(g, {{"", 13}}, Registry(), nullptr, {});
    ASSERT_TRUE(checked.ok()) << checked.status().ToString();
    auto plan = BuildExecutionPlan(g, checked.value(), CpuProvider::Default());
    ASSERT_TRUE(plan.ok());
    MemoryPlan mp = PlanMemory(plan.value(), checked->types);
    // Each planned slot: [producer, last use] lifetime and [offset, offset+bytes) range.
    struct Span { int first, last; int64_t begin, end; };
    std::vector<Span> spans;
    for (size_t s = 0; s < plan->num_slots(); ++s) {
      if (mp.offset[s] < 0) continue;
      int first = plan->producer[s];
      int last = std::max(plan->last_use[s], first);
      spans.push_back({first, last, mp.offset[s], mp.offset[s] + 257 * 4});
      EXPECT_EQ(mp.offset[s] % static_cast<int64_t>(MemoryPlan::kAlignment), 0);
      EXPECT_LE(static_cast<size_t>(mp.offset[s] + 257 * 4), mp.arena_bytes);
    }
    for (size_t i = 0; i < spans.size(); ++i)
      for (size_t j = i + 1; j < spans.size(); ++j) {
        bool alive_together = !(spans[i].last < spans[j].first || spans[j].last < spans[i].first);
        bool overlap = spans[i].begin < spans[j].end && spans[j].begin < spans[i].end;
        EXPECT_FALSE(alive_together && overlap) << "trial " << trial;
      }
    EXPECT_LE(mp.arena_bytes, mp.num_planned * 1088);  // 257*4 rounded up to 64
  }
}

TEST(MemoryPlan, ChainUsesTwoBuffers) {
  // x -> U -> U -> U -> U -> out: intermediates alternate between two places.
  Graph g;
  g.name = "chain";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({1000})), "", {}});
  std::string prev = "x";
  for (int i = 0; i < 5; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.op_type = "U";
    n.inputs = {prev};
    prev = "v" + std::to_string(i);
    n.outputs = {prev};
    g.nodes.push_back(std::move(n));
  }
  g.outputs.push_back({prev, TypeInfo{}, "", {}});
  auto checked = CheckGraph(g, {{"", 13}}, Registry(), nullptr, {});
  ASSERT_TRUE(checked.ok());
  auto plan = BuildExecutionPlan(g, checked.value(), CpuProvider::Default());
  ASSERT_TRUE(plan.ok());
  MemoryPlan mp = PlanMemory(plan.value(), checked->types);
  EXPECT_EQ(mp.num_planned, 4u);  // the graph output is not planned
  EXPECT_EQ(mp.planned_bytes, 4u * 4000u);
  EXPECT_EQ(mp.arena_bytes, 2u * 4032u);
}

// A random DAG of U/B/Identity nodes: Identity outputs share their input's
// bytes, and each alias group (a value and the views of it) must own its
// bytes from its first producer to its last reader.
TEST(MemoryPlan, ViewOutputsShareTheirInputAndGroupsNeverOverlap) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    Graph g = RandomGraph(rng, 5 + trial % 30);
    for (Node& n : g.nodes)
      if (n.op_type == "U" && rng() % 2) n.op_type = "Identity";
    auto checked = CheckGraph(g, {{"", 13}}, Registry(), nullptr, {});
    ASSERT_TRUE(checked.ok()) << checked.status().ToString();
    auto plan = BuildExecutionPlan(g, checked.value(), CpuProvider::Default());
    ASSERT_TRUE(plan.ok());
    MemoryPlan mp = PlanMemory(plan.value(), checked->types);
    // Expected groups, computed independently: a planned Identity output joins its planned input's group.
    std::vector<int> root(plan->num_slots());
    for (size_t s = 0; s < root.size(); ++s) root[s] = static_cast<int>(s);
    for (const PlannedNode& pn : plan->nodes)
      if (pn.node->op_type == "Identity" && mp.offset[pn.inputs[0]] >= 0 && mp.offset[pn.outputs[0]] >= 0)
        root[pn.outputs[0]] = root[pn.inputs[0]];
    struct Span { int first, last; int64_t begin; };
    std::map<int, Span> spans;  // per group root
    for (size_t s = 0; s < plan->num_slots(); ++s) {
      if (mp.offset[s] < 0) continue;
      int first = plan->producer[s], last = std::max(plan->last_use[s], first);
      auto [it, fresh] = spans.emplace(root[s], Span{first, last, mp.offset[s]});
      EXPECT_EQ(it->second.begin, mp.offset[s]) << "trial " << trial << ": a view is not on its input's bytes";
      it->second.first = std::min(it->second.first, first);
      it->second.last = std::max(it->second.last, last);
    }
    for (auto a = spans.begin(); a != spans.end(); ++a)
      for (auto b = std::next(a); b != spans.end(); ++b) {
        bool alive_together = !(a->second.last < b->second.first || b->second.last < a->second.first);
        bool overlap = a->second.begin < b->second.begin + 1088 && b->second.begin < a->second.begin + 1088;
        EXPECT_FALSE(alive_together && overlap) << "trial " << trial;
      }
  }
}

TEST(MemoryPlan, ViewOfAGraphInputOrIntoAGraphOutputIsNotAliased) {
  // x -> Identity -> a -> U -> b -> Identity -> c -> Identity -> out
  Graph g;
  g.name = "views";
  g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({100})), "", {}});
  const char* ops[] = {"Identity", "U", "Identity", "Identity"};
  const char* outs[] = {"a", "b", "c", "out"};
  std::string prev = "x";
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.op_type = ops[i];
    n.inputs = {prev};
    n.outputs = {outs[i]};
    prev = outs[i];
    g.nodes.push_back(std::move(n));
  }
  g.outputs.push_back({"out", TypeInfo{}, "", {}});
  auto checked = CheckGraph(g, {{"", 13}}, Registry(), nullptr, {});
  ASSERT_TRUE(checked.ok());
  auto plan = BuildExecutionPlan(g, checked.value(), CpuProvider::Default());
  ASSERT_TRUE(plan.ok());
  MemoryPlan mp = PlanMemory(plan.value(), checked->types);
  auto offset = [&](const char* name) { return mp.offset[plan->slot_of.at(name)]; };
  EXPECT_GE(offset("a"), 0);  // its own block: x is the caller's
  EXPECT_EQ(offset("out"), -1);
  EXPECT_EQ(offset("b"), offset("c"));
  EXPECT_NE(offset("a"), offset("b"));  // a is read while b is written
  EXPECT_EQ(mp.arena_bytes, 2u * 448u);
}

// A BlockedConv whose residual nothing reads after it writes its output over
// the residual's bytes where its kernels allow it (ops/blocked_conv.h,
// BlockedConvOverwritableInput: 1x1 weights, an activation finished as it
// is stored); a residual still to be read, a 3x3 conv's or one under an
// exponential activation keeps its own.
TEST(MemoryPlan, APointwiseConvWritesOverAResidualNothingReadsAfter) {
  struct Case {
    const char* name;
    int64_t kernel;
    const char* activation;
    bool residual_read_after;
    bool shared;
  };
  for (const Case& c : {Case{"1x1 Relu", 1, "Relu", false, true}, Case{"1x1 none", 1, "", false, true},
                        Case{"read after", 1, "Relu", true, false}, Case{"3x3", 3, "Relu", false, false},
                        Case{"Silu", 1, "Silu", false, false}}) {
    // x -> a = conv(x); b = conv(x); y = conv(b, residual a); out = conv(y [, residual a])
    Graph g;
    g.name = c.name;
    g.inputs.push_back({"x", TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({1, 2, 4, 4, 8})), "", {}});
    auto weights = [&](const std::string& name, int64_t k) {
      std::vector<float> v(static_cast<size_t>(16 * 16 * k * k), 0.01f);
      g.initializers.push_back({name, Tensor::FromVector(v, {16, 16, k, k}), ""});
    };
    weights("w1", 1), weights("w2", 1), weights("w3", c.kernel), weights("w4", 1);
    g.initializers.push_back({"bias", Tensor::FromVector(std::vector<float>(16, 0.f), {16}), ""});
    auto conv = [&](const std::string& out, std::vector<std::string> in, int64_t k, const char* act) {
      Node n;
      n.name = out;
      n.domain = "ai.nee";
      n.op_type = "BlockedConv";
      n.inputs = std::move(in);
      n.outputs = {out};
      n.attributes.push_back(testing::IntAttr("channels", 16));
      if (k == 3) n.attributes.push_back(testing::IntsAttr("pads", {1, 1, 1, 1}));
      if (*act) n.attributes.push_back(testing::StringAttr("activation", act));
      g.nodes.push_back(std::move(n));
    };
    conv("a", {"x", "w1"}, 1, "");
    conv("b", {"x", "w2"}, 1, "");
    conv("y", {"b", "w3", "bias", "a"}, c.kernel, c.activation);
    if (c.residual_read_after) conv("out", {"y", "w4", "bias", "a"}, 1, "");
    else conv("out", {"y", "w4"}, 1, "");
    g.outputs.push_back({"out", TypeInfo{}, "", {}});
    auto checked = CheckGraph(g, {{"", 17}, {"ai.nee", 1}}, OpRegistry::Global(), nullptr, {});
    ASSERT_TRUE(checked.ok()) << c.name << ": " << checked.status().ToString();
    auto plan = BuildExecutionPlan(g, checked.value(), CpuProvider::Default());
    ASSERT_TRUE(plan.ok()) << c.name << ": " << plan.status().ToString();
    MemoryPlan mp = PlanMemory(plan.value(), checked->types);
    auto offset = [&](const char* name) { return mp.offset[plan->slot_of.at(name)]; };
    ASSERT_GE(offset("a"), 0) << c.name;
    ASSERT_GE(offset("y"), 0) << c.name;
    EXPECT_EQ(offset("a") == offset("y"), c.shared) << c.name;
    EXPECT_NE(offset("b"), offset("y")) << c.name;  // b is read while y is written
    EXPECT_EQ(mp.arena_bytes, (c.shared ? 2u : 3u) * 1024u) << c.name;  // 2 x 4 x 4 x 8 floats each
  }
}

}  // namespace
}  // namespace nee
