// Validation and type/shape inference of a graph before anything runs.
//
// CheckGraph proves a graph well-formed (unique SSA names, no cycles, every
// input defined in this graph or an enclosing one, every op known at the
// model's opset with a valid arity) and infers the type and shape of every
// value by running each op's own rule in topological order. It never
// changes the graph; its product, CheckedGraph, is what plan/ consumes.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "ops/op_registry.h"

namespace nee {

using OpsetMap = std::map<std::string, int64_t>;  // normalized domain -> version
OpsetMap OpsetsOf(const std::vector<OpsetImport>& imports);

// Types (and small known values) of the names visible from enclosing graphs.
struct TypeScope {
  const TypeScope* parent = nullptr;
  const std::unordered_map<std::string, TypeInfo>* types = nullptr;
  const std::unordered_map<std::string, Tensor>* constants = nullptr;
  const TypeInfo* Find(const std::string& name) const;
};

struct CheckedGraph {
  // Node indices in a valid execution order.
  std::vector<size_t> order;
  // Per node index: its schema entry in force and its domain's opset.
  std::vector<const OpSchema*> schemas;
  std::vector<int64_t> opsets;
  // Per node index: outer-scope names its subgraphs read (implicit inputs).
  std::vector<std::vector<std::string>> implicit_inputs;
  // Type of every value defined in this graph (inputs, initializers, node outputs).
  std::unordered_map<std::string, TypeInfo> types;
  // Values known before running: non-overridable initializers and small
  // propagated shape computations.
  std::unordered_map<std::string, Tensor> constants;
  // Names this graph reads from enclosing scopes.
  std::vector<std::string> captured;
  // A subgraph body checked on its own: its inputs' types are only what the
  // body declares, not what its node passes it when the model runs.
  bool is_body = false;
};

struct CheckOptions {
  // Concrete types for the graph's inputs (per-shape-signature planning);
  // when null, the declared types are used.
  const std::vector<TypeInfo>* input_types = nullptr;
  int max_subgraph_depth = 64;
  // When set (`nee check`), the main graph's problems are recorded here and
  // checking goes on where it can: a node with a problem, and every node
  // reading what it defines, gets no inferred types, and the result is
  // returned although it is not fit to run. A problem inside a subgraph is
  // one problem of the node holding it. Unset (sessions): the first problem
  // is returned as the error.
  std::vector<Status>* problems = nullptr;
  // When set (CheckModelFunctions), a node calling one of this model's
  // model-local functions is not resolved against the registry: the callee's
  // body is checked on its own.
  const Model* local_functions = nullptr;
};

Result<CheckedGraph> CheckGraph(const Graph& graph, const OpsetMap& opsets, const OpRegistry& registry,
                                const TypeScope* outer, const CheckOptions& options, int depth = 0);

// The newest opset nee implements for `domain` ("" and "ai.onnx" alike); -1
// for a domain nee does not know (a custom one), whose opset is not limited.
int64_t NewestSupportedOpset(const std::string& domain);

// Model-level checks (IR version, opset imports: none newer than
// NewestSupportedOpset) plus CheckGraph on the main graph.
Result<CheckedGraph> CheckModel(const Model& model, const OpRegistry& registry,
                                const CheckOptions& options = {});

// Every model-local function's body on its own, as onnx.checker checks each
// whether or not a node calls it: an op unknown at the function's opsets, a
// wrong arity, attributes against their declarations, SSA, order, undefined
// names (no types: the body's inputs have none). Sessions and `nee check` run
// it once, before expanding calls. With `problems`, each function's problem is
// recorded and Ok returned.
Status CheckModelFunctions(const Model& model, const OpRegistry& registry, std::vector<Status>* problems = nullptr);

// The subgraphs (If/Loop/Scan bodies, ...) an attribute or a node holds.
std::vector<const Graph*> BodiesOf(const Attribute& attribute);
std::vector<const Graph*> BodiesOf(const Node& node);

// Names a graph (recursively through nested subgraphs) reads but does not define.
std::vector<std::string> CapturedNames(const Graph& graph);

}  // namespace nee
