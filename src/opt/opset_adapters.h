// What the opset converter's per-op adapters see (opset_convert.cc drives
// them; opset_adapters.cc holds them). Internal to opt/.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "ir/graph.h"
#include "opt/rewrite_util.h"

namespace nee::opset {

// One since-version of one default-domain op, as opset_spec.inc lists it.
struct SpecStep {
  const char* op;
  int since;
  bool deprecated;
  const char* attrs_added;    // "name=default|name!|name="
  const char* attrs_removed;  // "name|name"
  const char* attrs_changed;  // "name=old>new"
  const char* inputs_before;  // per formal input: '.' single, '?' optional, '*' variadic
  const char* inputs_after;
  const char* outputs_before;
  const char* outputs_after;
  const char* types_added;    // per position: "i0=tensor(int8),tensor(int16)|o0=..."
  const char* types_removed;
};

// Every since-version of `op` in ascending order; empty when the spec does not know it.
const std::vector<const SpecStep*>& StepsOf(const std::string& op);

// The graph (or function body) being converted: types inferred by the
// checker where it could, values known before running, fresh names.
class Scope {
 public:
  const Scope* parent = nullptr;
  std::unordered_map<std::string, TypeInfo> types;
  std::unordered_map<std::string, Tensor> constants;
  std::unordered_set<std::string>* names = nullptr;  // every name in the model (shared)

  const TypeInfo* Type(const std::string& name) const;
  // The rank of a tensor value; -1 when unknown.
  int64_t Rank(const std::string& name) const;
  // The static dims of a tensor value; false when any is unknown.
  bool Dims(const std::string& name, std::vector<int64_t>* dims) const;
  // Element type of a tensor value; kUndefined when unknown.
  DataType ElemType(const std::string& name) const;
  // The value when known before running (initializer, Constant); nullptr otherwise.
  const Tensor* Constant(const std::string& name) const;
  std::string Fresh(const std::string& hint);
};

// One node crossing one version step of its op.
struct StepCtx {
  Node& node;
  Scope& scope;
  std::vector<Node>& before;  // nodes the adapter puts before the node
  std::vector<Node>& after;   // ... and after it
  int since;                  // the step: version `since` of node.op_type
  bool up;                    // into `since` (true) or out of it to the version before (false)
  int64_t target;             // the final opset: nodes an adapter adds are written for it
  bool replaced = false;      // set when `before` replaces the node entirely

  // "<why>" as the error the driver decorates with node, op and versions.
  Status Fail(const std::string& why) const { return InvalidArgument(why); }
  // A Constant node (added to `before`) holding `value`; returns its output.
  std::string Const(const Tensor& value, const std::string& hint);
  std::string ConstInts(const std::vector<int64_t>& values, const std::string& hint, bool scalar = false);
  // A scalar of `type` holding `value` (float types and int types).
  Result<std::string> ConstScalar(DataType type, double value, const std::string& hint);
  // Adds a node to `before` (or `after`), named after this node; returns its first output.
  std::string Emit(const std::string& op, std::vector<std::string> inputs, std::vector<Attribute> attrs,
                   const std::string& hint, bool put_after = false, std::string output = "");
  // Input i's value when it is a constant; error naming the input otherwise.
  Result<Tensor> ConstantInput(size_t i, const char* what) const;
};

using AdapterFn = Status (*)(StepCtx&);
struct Adapter {
  const char* op;
  int since;
  AdapterFn up;    // null: the generic rule
  AdapterFn down;  // null: the generic rule
};
// The adapter for (op, since), or nullptr.
const Adapter* FindAdapter(const std::string& op, int since);
// Steps whose semantics change in a way the spec table does not show: never
// crossed by the generic rule in the directions listed.
bool NeedsAdapter(const std::string& op, int since, bool up);

// Attribute helpers (the builders are the rewrite passes', opt/rewrite_util.h).
using opt::IntAttr;
using opt::IntsAttr;
void RemoveAttr(Node& node, const std::string& name);
void SetAttr(Node& node, Attribute a);
// An axis in [0, rank).
int64_t NormalizeAxis(int64_t axis, int64_t rank);

}  // namespace nee::opset
