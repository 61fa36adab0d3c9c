// The in-memory model: what format/ produces and every later stage consumes.
// Values are named by strings as in ONNX; exec/ maps names to slots.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "ir/tensor.h"
#include "ir/type_info.h"

namespace nee {

struct Graph;
struct AttrSchema;  // ir/attr_decl.h

// Sparse tensor in COO form (values 1-D [NNZ]; indices [NNZ] linear or [NNZ, rank]).
struct SparseTensor {
  Tensor values;
  Tensor indices;
  std::vector<int64_t> dims;
  std::string name;
};
// Densifies with bounds checks on every index.
Result<Tensor> DensifySparse(const SparseTensor& sparse);

// The numbering is ONNX's AttributeProto.AttributeType.
enum class AttrType : int32_t {
  kUndefined = 0, kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5,
  kFloats = 6, kInts = 7, kStrings = 8, kTensors = 9, kGraphs = 10,
  kSparseTensor = 11, kSparseTensors = 12, kTypeProto = 13, kTypeProtos = 14,
};
const char* AttrTypeName(AttrType type);

struct Attribute {
  std::string name;
  AttrType type = AttrType::kUndefined;
  std::string ref_attr_name;  // inside a function body: refers to the caller's attribute
  std::string doc_string;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  SparseTensor sparse_tensor;
  TypeInfo tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::vector<SparseTensor> sparse_tensors;
  std::vector<TypeInfo> type_protos;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ai.onnx domain
  std::string overload;
  std::string doc_string;
  std::vector<std::string> inputs;   // "" marks an omitted optional input
  std::vector<std::string> outputs;  // "" marks an omitted optional output
  std::vector<Attribute> attributes;
  // The attribute declaration of the op version in force for this node
  // (ops/attr_spec.h), recorded by BindAttrDeclarations before the model is
  // checked and run; null when unbound or the op has none. Not part of the
  // model: never written out, and an absent attribute stays absent.
  const AttrSchema* declaration = nullptr;

  // "node 'conv1' (Conv)"; used as the prefix of every error about the node.
  std::string Describe() const;
  const Attribute* FindAttr(const std::string& attr_name) const;
  bool HasAttr(const std::string& attr_name) const { return FindAttr(attr_name) != nullptr; }
  bool HasInput(size_t index) const { return index < inputs.size() && !inputs[index].empty(); }
  bool HasOutput(size_t index) const { return index < outputs.size() && !outputs[index].empty(); }

  // Typed accessors. For an absent attribute both forms return the default
  // the node's declaration gives it (the spec's); without one, the defaulted
  // form returns `def` and the other fails. A present attribute of the wrong
  // type is an error. Errors name the node and the attribute.
  Result<int64_t> GetInt(const std::string& n) const;
  Result<int64_t> GetInt(const std::string& n, int64_t def) const;
  Result<float> GetFloat(const std::string& n) const;
  Result<float> GetFloat(const std::string& n, float def) const;
  Result<std::string> GetString(const std::string& n) const;
  Result<std::string> GetString(const std::string& n, const std::string& def) const;
  Result<std::vector<int64_t>> GetInts(const std::string& n) const;
  Result<std::vector<int64_t>> GetInts(const std::string& n, std::vector<int64_t> def) const;
  Result<std::vector<float>> GetFloats(const std::string& n) const;
  Result<std::vector<float>> GetFloats(const std::string& n, std::vector<float> def) const;
  Result<std::vector<std::string>> GetStrings(const std::string& n) const;
  Result<std::vector<std::string>> GetStrings(const std::string& n, std::vector<std::string> def) const;
  Result<Tensor> GetTensor(const std::string& n) const;
  Result<const Graph*> GetGraph(const std::string& n) const;
};

struct ValueInfo {
  std::string name;
  TypeInfo type;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
};

struct Initializer {
  std::string name;
  Tensor tensor;
  std::string doc_string;
};

struct Graph {
  std::string name;
  std::string doc_string;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  std::vector<Initializer> initializers;
  std::vector<SparseTensor> sparse_initializers;
  std::vector<std::pair<std::string, std::string>> metadata_props;

  const Initializer* FindInitializer(const std::string& value_name) const;
};

struct OpsetImport {
  std::string domain;
  int64_t version = 0;
};

// A model-local function (FunctionProto).
struct Function {
  std::string name;
  std::string domain;
  std::string overload;
  std::string doc_string;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> attribute_names;   // attributes without defaults
  std::vector<Attribute> attribute_defaults;  // attribute_proto
  std::vector<Node> nodes;
  std::vector<OpsetImport> opset_imports;
  std::vector<ValueInfo> value_info;
  std::vector<std::pair<std::string, std::string>> metadata_props;
};

// Gives every subgraph (If/Loop/Scan bodies, at any depth, in the graph and
// in the model's functions) a copy of its own. Copies of a Model share their
// subgraphs (attributes hold them by shared_ptr); a session detaches its copy
// before binding declarations or rewriting, so that two sessions made at once
// from one in-memory model never write the same Graph.
struct Model;
void DetachSubgraphs(Model& model);

struct Model {
  int64_t ir_version = 0;
  std::vector<OpsetImport> opset_imports;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  Graph graph;
  std::vector<Function> functions;
  // Mapped files whose bytes initializers view; kept alive with the model.
  std::vector<std::shared_ptr<MappedFile>> mappings;

  // The opset version imported for `domain` ("" and "ai.onnx" are the same);
  // -1 when the model does not import it.
  int64_t OpsetVersion(const std::string& domain) const;
  const Function* FindFunction(const std::string& domain, const std::string& name) const;
};

// "" for the default domain spelled either way.
std::string NormalizeDomain(const std::string& domain);

}  // namespace nee
