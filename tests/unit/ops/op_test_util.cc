#include "op_test_util.h"

#include "ops/attr_spec.h"

namespace nee::testing {

Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a; a.name = name; a.type = AttrType::kInt; a.i = v; return a;
}
Attribute FloatAttr(const std::string& name, float v) {
  Attribute a; a.name = name; a.type = AttrType::kFloat; a.f = v; return a;
}
Attribute StringAttr(const std::string& name, const std::string& v) {
  Attribute a; a.name = name; a.type = AttrType::kString; a.s = v; return a;
}
Attribute IntsAttr(const std::string& name, std::vector<int64_t> v) {
  Attribute a; a.name = name; a.type = AttrType::kInts; a.ints = std::move(v); return a;
}
Attribute FloatsAttr(const std::string& name, std::vector<float> v) {
  Attribute a; a.name = name; a.type = AttrType::kFloats; a.floats = std::move(v); return a;
}
Attribute StringsAttr(const std::string& name, std::vector<std::string> v) {
  Attribute a; a.name = name; a.type = AttrType::kStrings; a.strings = std::move(v); return a;
}
Attribute TensorAttr(const std::string& name, Tensor t) {
  Attribute a; a.name = name; a.type = AttrType::kTensor; a.t = std::move(t); return a;
}

Node MakeNode(const std::string& op_type, size_t num_inputs, size_t num_outputs,
              std::vector<Attribute> attributes, const std::string& domain) {
  Node n;
  n.name = "test";
  n.op_type = op_type;
  n.domain = domain;
  for (size_t i = 0; i < num_inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < num_outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  n.attributes = std::move(attributes);
  return n;
}

static TypeInfo TypeOfValue(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor:
      return TypeInfo::Tensor(v.tensor().dtype(), ShapeFromDims(v.tensor().dims()));
    case Value::Kind::kSequence: return TypeInfo::Sequence(v.element_type());
    case Value::Kind::kNone: return TypeInfo::Optional(v.element_type());
    default: return TypeInfo{};
  }
}

Result<OpRun> RunOp(const Node& unbound, int64_t opset, const std::vector<Value>& inputs, int num_threads) {
  // Bound to its declaration as a session binds it (ops/attr_spec.h), with
  // the audit on: the rule and the kernel must read no absent attribute with
  // a fallback other than the declared default.
  Node node = unbound;
  node.declaration = FindAttrSchema(node.domain, node.op_type, opset);
  TakeAttrDefaultMismatches();
  SetAttrDefaultAudit(true);
  struct AuditCheck {
    ~AuditCheck() {
      SetAttrDefaultAudit(false);
      for (const std::string& line : TakeAttrDefaultMismatches()) ADD_FAILURE() << "attribute default: " << line;
    }
  } audit_check;
  NEE_ASSIGN_OR_RETURN(const OpSchema* schema, OpRegistry::Global().Resolve(node.domain, node.op_type, opset));
  std::vector<TypeInfo> input_types;
  for (const Value& v : inputs) input_types.push_back(TypeOfValue(v));
  InferenceContext ictx{node, opset, {}, {}, {}, {}, nullptr};
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool present = !inputs[i].empty();
    ictx.input_types.push_back(present ? &input_types[i] : nullptr);
    ictx.input_values.push_back(present && inputs[i].is_tensor() ? &inputs[i].tensor() : nullptr);
  }
  ictx.output_types.resize(node.outputs.size());
  ictx.output_values.resize(node.outputs.size());
  if (schema->infer) NEE_RETURN_IF_ERROR(schema->infer(ictx));

  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(v.empty() ? nullptr : &v);
  std::vector<Value> outputs(node.outputs.size());
  ThreadPool pool(num_threads);
  KernelContext kctx(node, opset, ptrs, &outputs, nullptr, &pool, nullptr);
  if (!schema->kernel) return NotImplemented("no kernel for " + node.op_type);
  NEE_RETURN_IF_ERROR(schema->kernel(kctx));

  // The shape rule and the kernel must agree wherever the rule was specific.
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TypeInfo& t = ictx.output_types[i];
    if (!outputs[i].is_tensor() || t.kind != TypeInfo::Kind::kTensor) continue;
    const Tensor& out = outputs[i].tensor();
    EXPECT_EQ(t.elem_type, out.dtype()) << "output " << i << " element type: rule vs kernel";
    if (t.shape) {
      EXPECT_EQ(t.shape->size(), out.dims().size()) << "output " << i << " rank: rule vs kernel";
      for (size_t d = 0; d < t.shape->size() && d < out.dims().size(); ++d)
        if ((*t.shape)[d].known()) EXPECT_EQ((*t.shape)[d].value, out.dims()[d]) << "output " << i << " dim " << d;
    }
  }
  return OpRun{std::move(outputs), std::move(ictx.output_types)};
}

Tensor RunOne(const std::string& op, int64_t opset, const std::vector<Value>& inputs,
              std::vector<Attribute> attrs, int threads) {
  Node node = MakeNode(op, inputs.size(), 1, std::move(attrs));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].empty()) node.inputs[i] = "";  // an omitted optional input
  auto r = RunOp(node, opset, inputs, threads);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->outputs[0].is_tensor()) return Tensor();
  return r->outputs[0].tensor();
}

Status RunError(const std::string& op, int64_t opset, const std::vector<Value>& inputs,
                std::vector<Attribute> attrs) {
  Node node = MakeNode(op, inputs.size(), 1, std::move(attrs));
  auto r = RunOp(node, opset, inputs);
  return r.ok() ? Status::Ok() : r.status();
}

void ExpectRegisteredVersions(const std::vector<std::pair<std::string, std::vector<int>>>& op_versions) {
  for (const auto& [op, versions] : op_versions) {
    for (int v : versions) {
      auto schema = OpRegistry::Global().Resolve("", op, v);
      ASSERT_TRUE(schema.ok()) << op << " at opset " << v << ": " << schema.status().ToString();
      EXPECT_EQ(schema.value()->since_version, v) << op;
      EXPECT_NE(schema.value()->kernel, nullptr) << op;
      EXPECT_NE(schema.value()->infer, nullptr) << op;
    }
  }
}

}  // namespace nee::testing
