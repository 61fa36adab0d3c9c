// Concat parts produced in place and Slice/Split outputs as views of their
// input (plan/part_offsets.cc, AliasGroups in plan/memory_plan.cc): where the
// planner shares bytes and where it must refuse, and a randomized check that
// a run over the planned arena never reads a value whose bytes were changed.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../opt/opt_test_util.h"
#include "plan/memory_plan.h"

namespace nee {
namespace {

using opt_test::IntAttr;

// Values of [1, C, 2, 2] floats: 16 bytes a channel, so 4 channels are one
// 64-byte alignment step.
TypeInfo Channels(int64_t c, int64_t n = 1) { return TypeInfo::Tensor(DataType::kFloat, ShapeFromDims({n, c, 2, 2})); }

struct Builder {
  Graph g;
  int next = 0;
  Builder() { g.name = "sharing"; }
  void Input(const std::string& name, int64_t c, int64_t n = 1) { g.inputs.push_back({name, Channels(c, n), "", {}}); }
  void Ints(const std::string& name, std::vector<int64_t> v) {
    const auto size = static_cast<int64_t>(v.size());
    g.initializers.push_back({name, Tensor::FromVector<int64_t>(v, {size}), ""});
  }
  void Weights(const std::string& name, int64_t c) {
    g.initializers.push_back({name, Tensor::FromVector<float>(std::vector<float>(c * 4, 1.f), {1, c, 2, 2}), ""});
  }
  void Op(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
          std::vector<Attribute> attrs = {}) {
    Node n;
    n.name = "n" + std::to_string(next++);
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attributes = std::move(attrs);
    g.nodes.push_back(std::move(n));
  }
  // out = x[:, begin:end] on channels, starts/ends as initializers (opset 13).
  void SliceChannels(const std::string& x, const std::string& out, int64_t begin, int64_t end, int64_t step = 1) {
    const std::string p = out + "_";
    Ints(p + "s", {begin}), Ints(p + "e", {end}), Ints(p + "a", {1}), Ints(p + "t", {step});
    Op("Slice", {x, p + "s", p + "e", p + "a", p + "t"}, {out});
  }
  void Output(const std::string& name) { g.outputs.push_back({name, TypeInfo{}, "", {}}); }
};

struct Planned {
  ExecutionPlan plan;
  CheckedGraph checked;
  MemoryPlan mp;
  int64_t Offset(const std::string& name) const { return mp.offset[plan.slot_of.at(name)]; }
};

Planned Plan(const Graph& g, bool share = true) {
  Planned p;
  auto checked = CheckGraph(g, {{"", 13}}, OpRegistry::Global(), nullptr, {});
  EXPECT_TRUE(checked.ok()) << checked.status().ToString();
  if (!checked.ok()) return p;
  p.checked = std::move(checked).value();
  auto plan = BuildExecutionPlan(g, p.checked, CpuProvider::Default());
  EXPECT_TRUE(plan.ok());
  if (!plan.ok()) return p;
  p.plan = std::move(plan).value();
  p.mp = PlanMemory(p.plan, p.checked.types, &p.checked.constants, MemoryPlanOptions{share});
  return p;
}

// Each named value lies at its byte offset inside `host`.
void ExpectInside(const Planned& p, const std::string& host, std::vector<std::pair<std::string, int64_t>> parts) {
  ASSERT_GE(p.Offset(host), 0) << host;
  for (const auto& [name, at] : parts) EXPECT_EQ(p.Offset(name), p.Offset(host) + at) << name << " in " << host;
}

TEST(BufferSharing, ConcatInputsAreProducedInsideTheOutput) {
  Builder b;
  b.Input("x", 8);
  b.Op("Relu", {"x"}, {"a"});
  b.Op("Neg", {"x"}, {"c"});
  b.Op("Concat", {"a", "c"}, {"cat"}, {IntAttr("axis", 1)});
  b.Op("Sigmoid", {"cat"}, {"y"});
  b.Output("y");
  Planned p = Plan(b.g);
  ASSERT_GE(p.Offset("cat"), 0);
  EXPECT_EQ(p.Offset("a"), p.Offset("cat"));
  EXPECT_EQ(p.Offset("c"), p.Offset("cat") + 128);
  EXPECT_EQ(p.mp.num_aliased, 2u);
  Planned off = Plan(b.g, /*share=*/false);
  EXPECT_EQ(off.mp.num_aliased, 0u);
  EXPECT_NE(off.Offset("a"), off.Offset("cat"));
}

TEST(BufferSharing, ConcatIsRefusedForGraphInputsInitializersOutputsAndOuterDims) {
  for (int which = 0; which < 4; ++which) {
    Builder b;
    b.Input("x", 8, which == 3 ? 2 : 1);
    b.Weights("w", 8);
    b.Op("Relu", {"x"}, {"a"});
    // Concat(a, x) of a graph input, Concat(a, w) of an initializer, Concat(a, a) as a graph output, of batch 2
    const std::string other = which == 0 ? "x" : which == 1 ? "w" : "a";
    b.Op("Concat", {"a", other}, {"cat"}, {IntAttr("axis", 1)});
    if (which == 2) {
      b.Output("cat");
    } else {
      b.Op("Sigmoid", {"cat"}, {"y"});
      b.Output("y");
    }
    Planned p = Plan(b.g);
    ASSERT_GE(p.Offset("a"), 0) << which;
    if (which == 2) {  // the output's own buffer holds its first part (the second is copied)
      const int cat = p.plan.slot_of.at("cat");
      EXPECT_EQ(p.mp.host[p.plan.slot_of.at("a")], cat);
      EXPECT_EQ(p.mp.host[cat], cat);
      EXPECT_EQ(p.Offset("a"), 0);
      continue;
    }
    EXPECT_EQ(p.mp.num_aliased, 0u) << which;
    if (p.Offset("cat") >= 0) EXPECT_NE(p.Offset("a"), p.Offset("cat")) << which;
  }
}

TEST(BufferSharing, AnInputUsedTwiceOrByTwoConcatsIsPlacedOnce) {
  Builder b;
  b.Input("x", 8);
  b.Op("Relu", {"x"}, {"a"});
  b.Op("Neg", {"x"}, {"c"});
  b.Op("Concat", {"a", "a", "c"}, {"cat1"}, {IntAttr("axis", 1)});
  b.Op("Concat", {"c", "a"}, {"cat2"}, {IntAttr("axis", 1)});
  b.Op("Sigmoid", {"cat1"}, {"y1"});
  b.Op("Sigmoid", {"cat2"}, {"y2"});
  b.Output("y1");
  b.Output("y2");
  Planned p = Plan(b.g);
  EXPECT_EQ(p.Offset("a"), p.Offset("cat1"));        // the first part; the second is copied
  EXPECT_EQ(p.Offset("c"), p.Offset("cat1") + 256);  // in the first Concat: the second copies both
  const int64_t cat2 = p.Offset("cat2");
  for (const char* part : {"a", "c"}) EXPECT_TRUE(p.Offset(part) < cat2 || p.Offset(part) >= cat2 + 256) << part;
}

TEST(BufferSharing, NestedConcatsAndUnalignedParts) {
  Builder b;
  b.Input("x", 8);
  b.Input("z", 3);
  b.Op("Relu", {"x"}, {"a"});
  b.Op("Neg", {"x"}, {"c"});
  b.Op("Concat", {"a", "c"}, {"inner"}, {IntAttr("axis", 1)});
  b.Op("Relu", {"z"}, {"odd"});  // 48 bytes: what follows it is not 64-byte aligned
  b.Op("Neg", {"x"}, {"d"});
  b.Op("Concat", {"inner", "odd", "d"}, {"outer"}, {IntAttr("axis", 1)});
  b.Op("Sigmoid", {"outer"}, {"y"});
  b.Output("y");
  Planned p = Plan(b.g);
  ExpectInside(p, "outer", {{"inner", 0}, {"a", 0}, {"c", 128}, {"odd", 256}});
  const int64_t outer = p.Offset("outer");
  EXPECT_TRUE(p.Offset("d") < outer || p.Offset("d") >= outer + 19 * 16);  // at 304: unaligned, copied
}

TEST(BufferSharing, ContiguousSlicesAreViewsOthersAreNot) {
  Builder b;
  b.Input("x", 16);
  b.Op("Relu", {"x"}, {"r"});
  b.SliceChannels("r", "mid", 4, 12);       // contiguous, 64 bytes in
  b.SliceChannels("r", "odd", 1, 5);        // contiguous but 16 bytes in: unaligned
  b.SliceChannels("r", "stepped", 0, 16, 2);
  b.Ints("last_s", {0}), b.Ints("last_e", {1}), b.Ints("last_a", {3});
  b.Op("Slice", {"r", "last_s", "last_e", "last_a"}, {"last"});  // innermost axis: strided rows
  b.Op("Slice", {"x", "mid_s", "mid_e", "mid_a"}, {"of_input"});  // of a graph input
  for (const char* v : {"mid", "odd", "stepped", "last", "of_input"}) {
    b.Op("Sigmoid", {v}, {std::string(v) + "_y"});
    b.Output(std::string(v) + "_y");
  }
  Planned p = Plan(b.g);
  EXPECT_EQ(p.Offset("mid"), p.Offset("r") + 64);
  EXPECT_EQ(p.mp.num_aliased, 1u);
  for (const char* v : {"odd", "stepped", "last", "of_input"}) {
    ASSERT_GE(p.Offset(v), 0) << v;
    EXPECT_TRUE(p.Offset(v) < p.Offset("r") || p.Offset(v) >= p.Offset("r") + 256) << v;
  }
}

TEST(BufferSharing, SplitOutputsAreViewsAndAC2fConcatTakesTheirInputWhole) {
  // YOLOv8's C2f: x -> conv -> Split(a, b); m = f(b); Concat(a, b, m).
  Builder b;
  b.Input("x", 16);
  b.Op("Relu", {"x"}, {"r"});
  b.Op("Split", {"r"}, {"a", "bb"}, {IntAttr("axis", 1)});
  b.Op("Neg", {"bb"}, {"m"});
  b.Op("Concat", {"a", "bb", "m"}, {"cat"}, {IntAttr("axis", 1)});
  b.Op("Concat", {"bb", "a"}, {"swapped"}, {IntAttr("axis", 1)});  // out of order: copied
  b.Op("Sigmoid", {"cat"}, {"y"});
  b.Op("Sigmoid", {"swapped"}, {"y2"});
  b.Output("y");
  b.Output("y2");
  Planned p = Plan(b.g);
  ExpectInside(p, "cat", {{"r", 0}, {"a", 0}, {"bb", 128}, {"m", 256}});
  const int64_t cat = p.Offset("cat");
  EXPECT_TRUE(p.Offset("swapped") >= cat + 384 || p.Offset("swapped") + 256 <= cat);
}

TEST(BufferSharing, SplitOfABatchIsNotAView) {
  Builder b;
  b.Input("x", 16, 2);
  b.Op("Relu", {"x"}, {"r"});
  b.Op("Split", {"r"}, {"a", "c"}, {IntAttr("axis", 1)});
  b.Op("Add", {"a", "c"}, {"y"});
  b.Output("y");
  Planned p = Plan(b.g);
  EXPECT_EQ(p.mp.num_aliased, 0u);
}

// ---- Randomized: a symbolic run over the planned arena ----------------------------
//
// Each float of each value is tagged with where its number came from (the
// slot that computed it, and the index there); views, slices, splits and
// concats move tags. Replaying the plan in order, every input a node reads
// must find its tags at its planned offset, and a node may overwrite only
// bytes that no input of its own lies on (kernels read and write at once),
// unless it writes the very tag already there (a part already in place).

using Tag = std::pair<int, int64_t>;

Graph RandomSharingGraph(std::mt19937& rng, int nodes) {
  Builder b;
  b.Input("x", 8);
  b.Weights("w", 4);
  std::vector<std::pair<std::string, int64_t>> values = {{"x", 8}, {"w", 4}};
  auto pick = [&] { return values[rng() % values.size()]; };
  for (int i = 0; i < nodes; ++i) {
    const std::string v = "v" + std::to_string(i);
    const auto [x, c] = pick();
    switch (rng() % 6) {
      case 0: b.Op("Relu", {x}, {v}), values.push_back({v, c}); break;
      case 1: b.Op("Identity", {x}, {v}), values.push_back({v, c}); break;
      case 2: {
        std::vector<std::string> in;
        int64_t total = 0;
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
          auto [y, cy] = pick();
          in.push_back(y), total += cy;
        }
        b.Op("Concat", in, {v}, {IntAttr("axis", 1)}), values.push_back({v, total});
        break;
      }
      case 3: {
        if (c < 2) break;
        const int64_t first = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(c - 1));
        b.Ints(v + "_split", {first, c - first});
        b.Op("Split", {x, v + "_split"}, {v + "a", v + "b"}, {IntAttr("axis", 1)});
        values.push_back({v + "a", first}), values.push_back({v + "b", c - first});
        break;
      }
      case 4: {
        const int64_t begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(c));
        const int64_t end = begin + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(c - begin));
        b.SliceChannels(x, v, begin, end);
        values.push_back({v, end - begin});
        break;
      }
      default: {
        auto [y, cy] = pick();
        if (cy == c) b.Op("Add", {x, y}, {v}), values.push_back({v, c});
        break;
      }
    }
  }
  for (int k = static_cast<int>(values.size()) - 1, n = 0; k > 1 && n < 3; k -= 1 + static_cast<int>(rng() % 3), ++n)
    b.Output(values[static_cast<size_t>(k)].first);
  return b.g;
}

// Tags of the outputs of one node from the tags of its inputs.
std::vector<std::vector<Tag>> Produce(const PlannedNode& pn, const ExecutionPlan& plan, const CheckedGraph& checked,
                                      const std::vector<std::vector<Tag>>& tags) {
  const std::string& op = pn.node->op_type;
  auto in = [&](size_t i) -> const std::vector<Tag>& { return tags[pn.inputs[i]]; };
  std::vector<std::vector<Tag>> out;
  if (op == "Identity") return {in(0)};
  if (op == "Concat") {
    out.emplace_back();
    for (size_t i = 0; i < pn.inputs.size(); ++i) out[0].insert(out[0].end(), in(i).begin(), in(i).end());
    return out;
  }
  if (op == "Split") {
    const Tensor& sizes = checked.constants.at(plan.slot_names[pn.inputs[1]]);
    int64_t at = 0;
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t n = sizes.data<int64_t>()[k] * 4;
      out.emplace_back(in(0).begin() + at, in(0).begin() + at + n);
      at += n;
    }
    return out;
  }
  if (op == "Slice") {
    const int64_t begin = checked.constants.at(plan.slot_names[pn.inputs[1]]).data<int64_t>()[0] * 4;
    const int64_t end = checked.constants.at(plan.slot_names[pn.inputs[2]]).data<int64_t>()[0] * 4;
    return {std::vector<Tag>(in(0).begin() + begin, in(0).begin() + end)};
  }
  const int s = pn.outputs[0];  // Relu, Add: new numbers
  out.emplace_back(in(0).size());
  for (size_t k = 0; k < out[0].size(); ++k) out[0][k] = {s, static_cast<int64_t>(k)};
  return out;
}

TEST(BufferSharing, RandomGraphsNeverReadOverwrittenBytes) {
  std::mt19937 rng(23);
  size_t aliased = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Graph g = RandomSharingGraph(rng, 4 + trial % 25);
    Planned p = Plan(g);
    ASSERT_FALSE(p.plan.nodes.empty());
    aliased += p.mp.num_aliased;
    std::vector<std::vector<Tag>> tags(p.plan.num_slots());
    for (size_t s = 0; s < tags.size(); ++s) {  // graph inputs and initializers: their own numbers
      const TypeInfo& t = p.checked.types.at(p.plan.slot_names[s]);
      if (p.plan.producer[s] >= 0 || !t.is_tensor() || t.elem_type != DataType::kFloat) continue;
      tags[s].resize(static_cast<size_t>((*t.shape)[1].value * 4));
      for (size_t k = 0; k < tags[s].size(); ++k) tags[s][k] = {static_cast<int>(s), static_cast<int64_t>(k)};
    }
    // The arena (key -1) and the buffers of graph outputs that hold parts (key: their slot).
    std::map<int, std::vector<Tag>> buffers;
    buffers[-1].assign(p.mp.arena_bytes / 4, Tag{-1, -1});
    for (size_t s = 0; s < p.plan.num_slots(); ++s)
      if (p.mp.offset[s] >= 0 && p.mp.host[s] == static_cast<int>(s))
        buffers[static_cast<int>(s)].assign(static_cast<size_t>(p.mp.dims[s][1] * 4), Tag{-1, -1});
    // Cells are (buffer, float index) packed into one number.
    auto cell = [&](int s, size_t k) {
      return (static_cast<size_t>(p.mp.host[s] + 1) << 32) + static_cast<size_t>(p.mp.offset[s] / 4) + k;
    };
    auto at = [&](size_t c) -> Tag& { return buffers[static_cast<int>(c >> 32) - 1][c & 0xffffffffu]; };
    for (const PlannedNode& pn : p.plan.nodes) {
      std::vector<std::pair<size_t, size_t>> reads;  // arena cells [begin, end) of the inputs
      for (int s : pn.inputs) {
        if (s < 0 || p.mp.offset[s] < 0) continue;
        reads.emplace_back(cell(s, 0), cell(s, tags[s].size()));
        for (size_t k = 0; k < tags[s].size(); ++k)
          ASSERT_EQ(at(cell(s, k)), tags[s][k]) << "trial " << trial << ": " << pn.node->Describe() << " reads '"
                                                  << p.plan.slot_names[s] << "' overwritten at " << k;
      }
      std::vector<std::vector<Tag>> out = Produce(pn, p.plan, p.checked, tags);
      for (size_t i = 0; i < pn.outputs.size(); ++i) {
        const int s = pn.outputs[i];
        tags[s] = out[i];
        if (p.mp.offset[s] < 0) continue;
        for (size_t k = 0; k < out[i].size(); ++k) {
          Tag& c = at(cell(s, k));
          if (c == out[i][k]) continue;
          for (const auto& [begin, end] : reads)
            ASSERT_FALSE(cell(s, k) >= begin && cell(s, k) < end)
                << "trial " << trial << ": " << pn.node->Describe() << " writes over its own input";
          c = out[i][k];
        }
      }
    }
  }
  EXPECT_GT(aliased, 300u);  // the graphs do exercise sharing
}

}  // namespace
}  // namespace nee
