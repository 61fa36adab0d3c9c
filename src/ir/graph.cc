#include "ir/graph.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "ir/attr_decl.h"

namespace nee {

const char* AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kFloat: return "float";
    case AttrType::kInt: return "int";
    case AttrType::kString: return "string";
    case AttrType::kTensor: return "tensor";
    case AttrType::kGraph: return "graph";
    case AttrType::kFloats: return "floats";
    case AttrType::kInts: return "ints";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensors: return "tensors";
    case AttrType::kGraphs: return "graphs";
    case AttrType::kSparseTensor: return "sparse_tensor";
    case AttrType::kSparseTensors: return "sparse_tensors";
    case AttrType::kTypeProto: return "type_proto";
    case AttrType::kTypeProtos: return "type_protos";
    case AttrType::kUndefined: break;
  }
  return "undefined";
}

std::string NormalizeDomain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

std::string Node::Describe() const {
  std::string s = "node '" + name + "' (";
  if (!domain.empty()) s += domain + ".";
  return s + op_type + ")";
}

const Attribute* Node::FindAttr(const std::string& attr_name) const {
  for (const Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

bool AttrDefaultAuditOn();  // ir/attr_decl.cc
void RecordAttrDefaultMismatch(std::string line);

namespace {
Status WrongType(const Node& node, const Attribute& a, AttrType want) {
  return InvalidModel(node.Describe() + ": attribute '" + a.name + "' should be " +
                      AttrTypeName(want) + " but is " + AttrTypeName(a.type));
}
Status Missing(const Node& node, const std::string& n) {
  return InvalidModel(node.Describe() + ": required attribute '" + n + "' is missing");
}

// The default the node's declaration gives attribute `n`, when it is bound to
// one for its op (a pass that rewrote op_type in place leaves a stale
// pointer: ignored) that declares a default of the type the reader wants.
const Attribute* DeclaredDefault(const Node& node, const std::string& n, AttrType want) {
  const AttrSchema* spec = node.declaration;
  if (!spec || spec->op != node.op_type || spec->domain != NormalizeDomain(node.domain)) return nullptr;
  const AttrDecl* decl = spec->Find(n);
  if (!decl || !decl->has_default || decl->type != want) return nullptr;
  return &decl->default_value;
}

std::string Text(int64_t v) { return std::to_string(v); }
std::string Text(float v) {  // the shortest spelling that reads back as v
  std::string text;
  for (int digits = 1; digits <= 9; ++digits) {
    std::ostringstream out;
    out.precision(digits);
    out << v;
    text = out.str();
    if (std::strtof(text.c_str(), nullptr) == v) break;
  }
  return text;
}
std::string Text(const std::string& v) { return "'" + v + "'"; }
template <typename T>
std::string Text(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + Text(v[k]);
  return s + "]";
}

template <typename T>
Result<T> Get(const Node& node, const std::string& n, AttrType want, T Attribute::*field,
              const T* def) {
  const Attribute* a = node.FindAttr(n);
  if (!a) {
    // (The specs declare no tensor defaults.)
    if constexpr (!std::is_same_v<T, Tensor>) {
      if (const Attribute* declared = DeclaredDefault(node, n, want)) {
        if (AttrDefaultAuditOn() && (!def || !(*def == declared->*field)))
          RecordAttrDefaultMismatch(node.declaration->Label() + " " + n + ": declared " + Text(declared->*field) +
                                    ", reader's fallback " + (def ? Text(*def) : std::string("none (required)")));
        return declared->*field;
      }
    }
    if (def) return *def;
    return Missing(node, n);
  }
  if (a->type != want) return WrongType(node, *a, want);
  return a->*field;
}
}  // namespace

Result<int64_t> Node::GetInt(const std::string& n) const { return Get<int64_t>(*this, n, AttrType::kInt, &Attribute::i, nullptr); }
Result<int64_t> Node::GetInt(const std::string& n, int64_t def) const { return Get<int64_t>(*this, n, AttrType::kInt, &Attribute::i, &def); }
Result<float> Node::GetFloat(const std::string& n) const { return Get<float>(*this, n, AttrType::kFloat, &Attribute::f, nullptr); }
Result<float> Node::GetFloat(const std::string& n, float def) const { return Get<float>(*this, n, AttrType::kFloat, &Attribute::f, &def); }
Result<std::string> Node::GetString(const std::string& n) const { return Get<std::string>(*this, n, AttrType::kString, &Attribute::s, nullptr); }
Result<std::string> Node::GetString(const std::string& n, const std::string& def) const { return Get<std::string>(*this, n, AttrType::kString, &Attribute::s, &def); }
Result<std::vector<int64_t>> Node::GetInts(const std::string& n) const { return Get<std::vector<int64_t>>(*this, n, AttrType::kInts, &Attribute::ints, nullptr); }
Result<std::vector<int64_t>> Node::GetInts(const std::string& n, std::vector<int64_t> def) const { return Get<std::vector<int64_t>>(*this, n, AttrType::kInts, &Attribute::ints, &def); }
Result<std::vector<float>> Node::GetFloats(const std::string& n) const { return Get<std::vector<float>>(*this, n, AttrType::kFloats, &Attribute::floats, nullptr); }
Result<std::vector<float>> Node::GetFloats(const std::string& n, std::vector<float> def) const { return Get<std::vector<float>>(*this, n, AttrType::kFloats, &Attribute::floats, &def); }
Result<std::vector<std::string>> Node::GetStrings(const std::string& n) const { return Get<std::vector<std::string>>(*this, n, AttrType::kStrings, &Attribute::strings, nullptr); }
Result<std::vector<std::string>> Node::GetStrings(const std::string& n, std::vector<std::string> def) const { return Get<std::vector<std::string>>(*this, n, AttrType::kStrings, &Attribute::strings, &def); }
Result<Tensor> Node::GetTensor(const std::string& n) const { return Get<Tensor>(*this, n, AttrType::kTensor, &Attribute::t, nullptr); }

Result<const Graph*> Node::GetGraph(const std::string& n) const {
  const Attribute* a = FindAttr(n);
  if (!a) return Missing(*this, n);
  if (a->type != AttrType::kGraph) return WrongType(*this, *a, AttrType::kGraph);
  if (!a->g) return InvalidModel(Describe() + ": attribute '" + n + "' holds no graph");
  return static_cast<const Graph*>(a->g.get());
}

namespace {
void DetachNodes(std::vector<Node>& nodes);

void DetachGraph(std::shared_ptr<Graph>& g) {
  if (!g) return;
  g = std::make_shared<Graph>(*g);
  DetachNodes(g->nodes);
}

void DetachAttributes(std::vector<Attribute>& attributes) {
  for (Attribute& a : attributes) {
    DetachGraph(a.g);
    for (std::shared_ptr<Graph>& g : a.graphs) DetachGraph(g);
  }
}

void DetachNodes(std::vector<Node>& nodes) {
  for (Node& node : nodes) DetachAttributes(node.attributes);
}
}  // namespace

void DetachSubgraphs(Model& model) {
  DetachNodes(model.graph.nodes);
  for (Function& f : model.functions) {
    DetachNodes(f.nodes);
    DetachAttributes(f.attribute_defaults);
  }
}

const Initializer* Graph::FindInitializer(const std::string& value_name) const {
  for (const Initializer& init : initializers)
    if (init.name == value_name) return &init;
  return nullptr;
}

int64_t Model::OpsetVersion(const std::string& d) const {
  std::string want = NormalizeDomain(d);
  for (const OpsetImport& o : opset_imports)
    if (NormalizeDomain(o.domain) == want) return o.version;
  return -1;
}

const Function* Model::FindFunction(const std::string& d, const std::string& n) const {
  for (const Function& f : functions)
    if (f.domain == d && f.name == n) return &f;
  return nullptr;
}

Result<Tensor> DensifySparse(const SparseTensor& sparse) {
  NEE_ASSIGN_OR_RETURN(Tensor dense, Tensor::Allocate(sparse.values.dtype(), sparse.dims));
  int64_t nnz = sparse.values.num_elements();
  if (sparse.values.rank() != 1)
    return InvalidModel("sparse tensor '" + sparse.name + "': values must be 1-D");
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> idx, sparse.indices.ToInt64Vector());
  int64_t rank = static_cast<int64_t>(sparse.dims.size());
  bool linear = sparse.indices.rank() == 1;
  if (linear ? static_cast<int64_t>(idx.size()) != nnz
             : (sparse.indices.rank() != 2 || sparse.indices.dim(0) != nnz || sparse.indices.dim(1) != rank))
    return InvalidModel("sparse tensor '" + sparse.name + "': indices shape " +
                        DimsToString(sparse.indices.dims()) + " does not match " +
                        std::to_string(nnz) + " values of rank " + std::to_string(rank));
  size_t elem = StorageBytes(dense.dtype(), 1);
  if (dense.dtype() == DataType::kString || IsSubByte(dense.dtype()))
    return NotImplemented("sparse tensor '" + sparse.name + "' of this element type");
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t offset = 0;
    if (linear) {
      offset = idx[k];
    } else {
      for (int64_t d = 0; d < rank; ++d) {
        int64_t v = idx[k * rank + d];
        if (v < 0 || v >= sparse.dims[d]) { offset = -1; break; }
        offset = offset * sparse.dims[d] + v;
      }
    }
    if (offset < 0 || offset >= dense.num_elements())
      return InvalidModel("sparse tensor '" + sparse.name + "': index out of range at entry " + std::to_string(k));
    std::memcpy(static_cast<uint8_t*>(dense.raw_data()) + offset * elem,
                static_cast<const uint8_t*>(sparse.values.raw_data()) + k * elem, elem);
  }
  return dense;
}

}  // namespace nee
