// Shared helpers for the level-2 rewrite passes: who produces and who reads
// each value, which values must keep their name (graph outputs, names
// subgraphs capture), constant lookup, and safe node removal and rewiring.
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "check/checker.h"
#include "ir/graph.h"

namespace nee::opt {

// One use of a value: node index and input slot.
struct Use {
  size_t node;
  size_t input;
};

// A default-domain node, for rewrites that build new ones.
Node MakeNode(const std::string& name, const char* op, std::vector<std::string> inputs,
              std::vector<std::string> outputs, std::vector<Attribute> attrs = {});
// A Cast of `input` to `to` writing `output`.
Node CastNode(const std::string& name, const std::string& input, const std::string& output, DataType to);

// A mutable view of one graph used by a rewrite pass. Nodes are only marked
// removed during the pass; Commit() drops them, so indices stay stable.
class GraphEditor {
 public:
  GraphEditor(Graph& graph, const CheckedGraph& checked);

  Graph& graph() { return graph_; }
  const CheckedGraph& checked() const { return checked_; }
  Node& node(size_t i) { return graph_.nodes[i]; }
  const Node& node(size_t i) const { return graph_.nodes[i]; }
  bool removed(size_t i) const { return removed_[i]; }

  // The node producing `name`, or -1 for graph inputs, initializers and unknown names.
  int64_t Producer(const std::string& name) const;
  // Every live use of `name` as a node input.
  std::vector<Use> Uses(const std::string& name) const;
  // True when `name` is a graph output or read by a subgraph: its name must survive.
  bool IsPinned(const std::string& name) const;
  // True when `name`'s only reader is node `consumer` (through one input) and
  // nothing else (graph outputs, subgraphs) sees it.
  bool OnlyUsedBy(const std::string& name, size_t consumer) const;
  // The value of `name` when it is a constant initializer (not overridable by
  // a graph input); an undefined tensor otherwise. Copies share the bytes.
  Tensor Constant(const std::string& name) const;
  // The inferred tensor type of `name`; nullptr when unknown or not a tensor.
  const TypeInfo* TensorType(const std::string& name) const;

  // Points every use of `from` at `to` (node inputs only).
  void ReplaceUses(const std::string& from, const std::string& to);
  // Changes one input of a node, keeping the use index current.
  void SetInput(size_t node, size_t input, const std::string& name);
  // Renames a node output (all its uses follow).
  void RenameOutput(size_t node, size_t output, const std::string& name);
  void RemoveNode(size_t node);
  // Makes node `n` write `name` as output `output` (growing its outputs), for a
  // value whose producer was removed.
  void SetOutput(size_t n, size_t output, const std::string& name);
  // Turns node `n` into another op reading `inputs`, keeping its name and
  // outputs (a fusion's result reuses the node that wrote the pattern's output).
  void RewriteAs(size_t n, const std::string& domain, const std::string& op_type, const std::vector<std::string>& inputs,
               std::vector<Attribute> attributes);
  // Adds an initializer with a fresh name derived from `hint`; returns the name.
  std::string AddInitializer(const std::string& hint, Tensor tensor);
  // A value name not in use yet, derived from `hint` (and reserved).
  std::string FreshName(const std::string& hint);
  // Adds `node` just before (or after) node `anchor` on Commit, so the node
  // list stays in execution order. The new node is not editable by index.
  void InsertBefore(size_t anchor, Node node);
  void InsertAfter(size_t anchor, Node node);

  // Drops removed nodes; returns whether anything changed.
  bool Commit();
  // Commit(), then drops the initializers among `candidates` that nothing
  // reads any more (a rewrite's replaced weights); returns Commit()'s answer.
  bool CommitDroppingInitializers(const std::vector<std::string>& candidates);

 private:
  void AddUse(const std::string& name, Use use);
  void DropUse(const std::string& name, Use use);

  Graph& graph_;
  const CheckedGraph& checked_;
  std::vector<bool> removed_;
  bool changed_ = false;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, std::vector<Use>> uses_;
  std::unordered_set<std::string> pinned_;
  std::unordered_set<std::string> overridable_;
  std::unordered_set<std::string> names_;  // every name in use, for fresh names
  std::unordered_map<std::string, size_t> initializer_index_;
  std::unordered_map<size_t, std::vector<Node>> before_, after_;  // InsertBefore / InsertAfter
};

// A defined float32 tensor.
inline bool IsFloatTensor(const Tensor& t) { return t.defined() && t.dtype() == DataType::kFloat; }
// A tensor type with float32 elements and a known rank.
bool IsFloatWithRank(const TypeInfo* type);
// The static dims of a tensor type; false when any is unknown.
bool StaticDims(const TypeInfo* type, std::vector<int64_t>* dims);
// Whether a node is in the default ONNX domain with the given op type.
bool IsOp(const Node& node, const char* op_type);
// Whether two values provably have one shape at run time: both float32 (or
// both `elem`) with a known rank and every dim known or named (an unnamed
// unknown dim could be 1 on one side and broadcast), dim for dim equal.
bool ProvablySameShape(const TypeInfo* a, const TypeInfo* b, DataType elem = DataType::kFloat);
// Whether node `index` (-1: none) is the default-domain op `op` with two
// inputs, one output and no attributes, at opset 7 or later (numpy-style
// broadcasting; before 7, Add, Mul and Div broadcast by attribute).
bool IsBinary(const GraphEditor& ed, int64_t index, const char* op);
// Whether the node sets any attribute outside `allowed`.
bool HasOtherAttributes(const Node& node, const std::vector<std::string>& allowed);

// ---- For fusions into com.microsoft ops (the pass manager adds the opset import) ----

constexpr const char* kMicrosoftDomain = "com.microsoft";

// The one node reading `name` (through exactly one input), when nothing else
// sees it (graph outputs, subgraphs); -1 otherwise.
int64_t SoleConsumer(const GraphEditor& ed, const std::string& name);
// The input of a two-input node other than `known`; empty when neither or
// both inputs are `known`.
std::string OtherInput(const Node& node, const std::string& known);
// The value of a constant float32 tensor with exactly one element (any rank).
bool ScalarConstant(const GraphEditor& ed, const std::string& name, float* value);
// Whether `a` is within a relative tolerance of `b` (for constants a framework
// may have rounded differently, such as 1/sqrt(2)).
bool NearlyEqual(double a, double b, double tolerance = 1e-4);
Attribute StringAttr(const std::string& name, const std::string& value);
Attribute IntAttr(const std::string& name, int64_t value);
Attribute IntsAttr(const std::string& name, std::vector<int64_t> values);
Attribute FloatAttr(const std::string& name, float value);
Attribute FloatsAttr(const std::string& name, std::vector<float> values);

}  // namespace nee::opt
