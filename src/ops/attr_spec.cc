#include "ops/attr_spec.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>

namespace nee {

namespace {
struct SpecRow {
  const char* domain;
  const char* op;
  int since_version;
  int accepts_undeclared;
  // "name:TYPE name:TYPE! name:TYPE=default ..."; '!' marks a required
  // attribute, '=' a declared default (see attr_spec.inc's header).
  const char* attrs;
};

constexpr SpecRow kRows[] = {
#define NEE_ATTR_SPEC(domain, op, since, open, attrs) {domain, op, since, open, attrs},
#include "ops/attr_spec.inc"
#undef NEE_ATTR_SPEC
    // nee's own fused ops (ops/attention_fused.cc), written by its optimizer
    // (opt/fuse_attention.cc, opt/fuse_matmul_bias.cc): what their rules and
    // kernels read.
    {"ai.nee", "ScaledDotProductAttention", 1, 0, "num_heads:INT! scale:FLOAT"},
    {"ai.nee", "FusedMatMul", 1, 0, "activation:STRING"},
    // The channel-blocked layout (ops/blocked_conv.cc), written by opt/layout_blocked.cc.
    {"ai.nee", "ToBlocked", 1, 0, ""},
    {"ai.nee", "FromBlocked", 1, 0, "channels:INT!"},
    {"ai.nee", "BlockedConv", 1, 0,
     "channels:INT! activation:STRING activation_params:FLOATS dilations:INTS group:INT=1 kernel_shape:INTS pads:INTS "
     "strides:INTS"},
};

constexpr const char* kTypeNames[] = {
    "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS", "STRINGS",
    "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS",
};

AttrType TypeFromName(const std::string& name) {
  for (size_t i = 0; i < std::size(kTypeNames); ++i)
    if (name == kTypeNames[i]) return static_cast<AttrType>(i);
  return AttrType::kUndefined;  // not reached: the generator writes only these names
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  size_t begin = 0;
  for (size_t comma; (comma = text.find(',', begin)) != std::string::npos; begin = comma + 1)
    parts.push_back(text.substr(begin, comma - begin));
  parts.push_back(text.substr(begin));
  return parts;
}

// The generator writes floats as the shortest %g text that reads back as the
// same float32, so strtof restores the spec's value exactly.
float ParseFloat(const std::string& text) { return std::strtof(text.c_str(), nullptr); }
int64_t ParseInt(const std::string& text) { return std::strtoll(text.c_str(), nullptr, 10); }

// Fills the field of `a` that its type reads from the generator's spelling.
void ParseDefault(const std::string& text, Attribute& a) {
  switch (a.type) {
    case AttrType::kInt: a.i = ParseInt(text); break;
    case AttrType::kFloat: a.f = ParseFloat(text); break;
    case AttrType::kString: a.s = text; break;
    case AttrType::kInts:
      for (const std::string& p : SplitCommas(text)) a.ints.push_back(ParseInt(p));
      break;
    case AttrType::kFloats:
      for (const std::string& p : SplitCommas(text)) a.floats.push_back(ParseFloat(p));
      break;
    case AttrType::kStrings: a.strings = SplitCommas(text); break;
    default: break;  // not reached: the generator writes defaults of these six types only
  }
}

AttrSchema Parse(const SpecRow& row) {
  AttrSchema s{row.domain, row.op, row.since_version, row.accepts_undeclared != 0, {}};
  std::istringstream words(row.attrs);
  std::string word;
  while (words >> word) {
    const size_t eq = word.find('=');
    const std::string head = word.substr(0, eq);
    const size_t colon = head.rfind(':');
    const bool required = head.back() == '!';
    std::string type = head.substr(colon + 1, head.size() - colon - 1 - (required ? 1 : 0));
    AttrDecl decl{head.substr(0, colon), TypeFromName(type), required, false, {}};
    if (eq != std::string::npos) {
      decl.has_default = true;
      decl.default_value.name = decl.name;
      decl.default_value.type = decl.type;
      ParseDefault(word.substr(eq + 1), decl.default_value);
    }
    s.attrs.push_back(std::move(decl));
  }
  return s;
}

using Index = std::map<std::pair<std::string, std::string>, std::vector<AttrSchema>>;

// Built on first use (a function-local static: initialized once, thread-safe).
const Index& GetIndex() {
  static const Index* index = [] {
    auto* idx = new Index();
    for (const SpecRow& row : kRows) (*idx)[{row.domain, row.op}].push_back(Parse(row));
    for (auto& [key, versions] : *idx)
      std::sort(versions.begin(), versions.end(),
                [](const AttrSchema& a, const AttrSchema& b) { return a.since_version < b.since_version; });
    return idx;
  }();
  return *index;
}
}  // namespace

const AttrSchema* FindAttrSchema(const std::string& domain, const std::string& op, int64_t opset) {
  const Index& index = GetIndex();
  auto it = index.find({NormalizeDomain(domain), op});
  if (it == index.end()) return nullptr;
  const AttrSchema* found = nullptr;
  for (const AttrSchema& s : it->second)
    if (s.since_version <= opset) found = &s;
  return found;
}

std::vector<const AttrSchema*> AllAttrSchemas() {
  std::vector<const AttrSchema*> all;
  for (const auto& [key, versions] : GetIndex())
    for (const AttrSchema& s : versions) all.push_back(&s);
  return all;
}

namespace {
void BindGraph(Graph& graph, const std::map<std::string, int64_t>& opsets) {
  for (Node& node : graph.nodes) {
    auto it = opsets.find(NormalizeDomain(node.domain));
    node.declaration = it == opsets.end() ? nullptr : FindAttrSchema(node.domain, node.op_type, it->second);
    for (Attribute& a : node.attributes) {
      if (a.g) BindGraph(*a.g, opsets);
      for (const std::shared_ptr<Graph>& body : a.graphs)
        if (body) BindGraph(*body, opsets);
    }
  }
}
}  // namespace

void BindAttrDeclarations(Model& model) {
  std::map<std::string, int64_t> opsets;
  for (const OpsetImport& o : model.opset_imports) opsets.emplace(NormalizeDomain(o.domain), o.version);
  BindGraph(model.graph, opsets);
}

const char* AttrTypeSpecName(AttrType type) {
  const auto i = static_cast<size_t>(type);
  return i < std::size(kTypeNames) ? kTypeNames[i] : "UNDEFINED";
}

}  // namespace nee
