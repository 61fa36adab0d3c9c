// Helpers of the optimizer's tests: small models built node by node, the op
// types left after optimizing, and runs at a given optimization level.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>

#include "exec/session.h"
#include "opt/pass_manager.h"

namespace nee::opt_test {


// ((i*mul) % mod - offset) / div, as fusion_expected_gen.py's seq().
inline Tensor Seq(std::vector<int64_t> dims, int64_t mul, int64_t mod, int64_t offset, float div) {
  Tensor t = Tensor::Allocate(DataType::kFloat, std::move(dims)).value();
  for (int64_t i = 0; i < t.num_elements(); ++i)
    t.data<float>()[i] = static_cast<float>((i * mul) % mod - offset) / div;
  return t;
}

inline Tensor Floats(std::vector<float> values, std::vector<int64_t> dims) { return Tensor::FromVector(values, dims); }
inline Tensor Ints(std::vector<int64_t> values) {
  int64_t n = static_cast<int64_t>(values.size());
  return Tensor::FromVector(values, {n});
}

inline Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kInt;
  a.i = v;
  return a;
}
inline Attribute FloatAttr(const std::string& name, float v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kFloat;
  a.f = v;
  return a;
}
inline Attribute StringAttr(const std::string& name, const std::string& v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kString;
  a.s = v;
  return a;
}
inline Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.type = AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

// Builds small models node by node.
struct ModelBuilder {
  Model model;
  explicit ModelBuilder(int64_t opset = 17) {
    model.ir_version = 8;
    model.opset_imports.push_back({"", opset});
    model.graph.name = "g";
  }
  ModelBuilder& Input(const std::string& name, std::optional<Shape> shape, DataType type = DataType::kFloat) {
    model.graph.inputs.push_back({name, TypeInfo::Tensor(type, std::move(shape)), "", {}});
    return *this;
  }
  ModelBuilder& Output(const std::string& name) {
    model.graph.outputs.push_back({name, TypeInfo{}, "", {}});
    return *this;
  }
  ModelBuilder& Init(const std::string& name, Tensor t) {
    model.graph.initializers.push_back({name, std::move(t), ""});
    return *this;
  }
  ModelBuilder& Op(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                   std::vector<Attribute> attrs = {}) {
    Node n;
    n.name = op + std::to_string(model.graph.nodes.size());
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attributes = std::move(attrs);
    model.graph.nodes.push_back(std::move(n));
    return *this;
  }
};

// The op types left after optimizing at `level`, in node order.
inline std::vector<std::string> OpsAfter(Model model, int level = 99) {
  Status st = OptimizeModel(model, level);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> ops;
  for (const Node& n : model.graph.nodes) ops.push_back(n.op_type);
  return ops;
}

using Ops = std::vector<std::string>;

// Runs the model at `level` with `threads` threads (only the reference kernels when `reference_only`) and
// returns its first output.
inline Tensor RunAt(const Model& model, const std::vector<NamedValue>& inputs, int level = 99, int threads = 1,
                    bool reference_only = false) {
  SessionOptions options;
  options.graph_optimization_level = level;
  options.intra_op_num_threads = threads;
  options.reference_kernels_only = reference_only;
  auto session = Session::Create(model, options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return Tensor();
  auto out = (*session)->Run(inputs, {});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return Tensor();
  return out.value()[0].tensor();
}

inline void ExpectNear(const Tensor& got, const std::vector<int64_t>& dims, const std::vector<float>& want) {
  ASSERT_EQ(got.dtype(), DataType::kFloat);
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.num_elements()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want[i], 1e-5f + 1e-5f * std::fabs(want[i])) << "element " << i;
}

// Adds an If (condition input "cond") whose branches read `captured` from
// the main graph; its output `output` becomes a graph output.
inline void AddIfReading(ModelBuilder& b, const std::string& captured, const std::string& output) {
  auto branch = std::make_shared<Graph>();
  branch->name = "branch";
  Node neg;
  neg.name = "branch_neg";
  neg.op_type = "Neg";
  neg.inputs = {captured};
  neg.outputs = {"branch_out"};
  branch->nodes.push_back(neg);
  branch->outputs.push_back({"branch_out", TypeInfo::Tensor(DataType::kFloat), "", {}});
  Attribute then_attr;
  then_attr.name = "then_branch";
  then_attr.type = AttrType::kGraph;
  then_attr.g = branch;
  Attribute else_attr = then_attr;
  else_attr.name = "else_branch";
  b.Input("cond", Shape{}, DataType::kBool).Op("If", {"cond"}, {output}, {then_attr, else_attr}).Output(output);
}

// The op types of the main graph's nodes, in order.
inline std::vector<std::string> OpTypes(const Model& m) {
  std::vector<std::string> ops;
  for (const Node& n : m.graph.nodes) ops.push_back(n.op_type);
  return ops;
}

// A float32 scalar (rank 0).
inline Tensor Scalar(float v) { return Tensor::FromVector(std::vector<float>{v}, {}); }

// n floats uniform in [-3, 3), from a fixed seed.
inline Tensor Random(std::vector<int64_t> dims, unsigned seed = 1) {
  Tensor t = Tensor::Allocate(DataType::kFloat, std::move(dims)).value();
  uint32_t state = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.data<float>()[i] = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 6.f - 3.f;
  }
  return t;
}

// The model's first output is the same (within float rounding) with the
// optimizer off and fully on.
inline void ExpectSameResults(const Model& model, const std::vector<NamedValue>& inputs, float tolerance = 1e-5f) {
  Tensor off = RunAt(model, inputs, 0);
  Tensor on = RunAt(model, inputs, 99);
  ASSERT_TRUE(off.defined() && on.defined());
  ASSERT_EQ(off.dims(), on.dims());
  for (int64_t i = 0; i < off.num_elements(); ++i) {
    const float a = off.data<float>()[i], b = on.data<float>()[i];
    EXPECT_NEAR(b, a, tolerance + tolerance * std::fabs(a)) << "element " << i;
  }
}

// The optimized model (level 99).
inline Model Optimized(Model model) {
  Status st = OptimizeModel(model, 99);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return model;
}

}  // namespace nee::opt_test
