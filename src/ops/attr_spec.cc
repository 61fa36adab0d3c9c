#include "ops/attr_spec.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

namespace nee {

namespace {
struct SpecRow {
  const char* domain;
  const char* op;
  int since_version;
  int accepts_undeclared;
  // One string (a pointer per row, not four: each costs a relocation in the
  // shared library), the row's four fields joined by '|':
  // - attributes, "name:TYPE name:TYPE! name:TYPE=default ...": '!' marks a
  //   required attribute, '=' a declared default (see attr_spec.inc's header);
  // - formal inputs, then outputs, in order, "name:T name:T? name:T*N
  //   name:T%N ...": T a constraint letter or a type; '?' optional, '*N' /
  //   '%N' variadic of one type / of mixed types, with at least N values;
  // - constraints, "T=id ...": a NEE_TYPE_SET's id, or (hand-written rows)
  //   "T=type,type".
  const char* decl;
};

// The distinct allowed-type lists the generated rows' constraints refer to by
// position (the generator numbers them 0, 1, ... in order).
constexpr const char* kTypeSets[] = {
#define NEE_TYPE_SET(id, types) types,
#define NEE_ATTR_SPEC(...)
#include "ops/attr_spec.inc"
#undef NEE_ATTR_SPEC
#undef NEE_TYPE_SET
};

constexpr SpecRow kRows[] = {
#define NEE_TYPE_SET(id, types)
#define NEE_ATTR_SPEC(domain, op, since, open, attrs, inputs, outputs, constraints) \
  {domain, op, since, open, attrs "|" inputs "|" outputs "|" constraints},
#include "ops/attr_spec.inc"
#undef NEE_ATTR_SPEC
#undef NEE_TYPE_SET
    // nee's own fused ops (ops/attention_fused.cc), written by its optimizer
    // (opt/fuse_attention.cc, opt/fuse_matmul_bias.cc): what their rules and
    // kernels read (float32 only, which their rules check too).
    {"ai.nee", "ScaledDotProductAttention", 1, 0,
     "causal:INT=0 num_heads:INT! scale:FLOAT|query:T key:T? value:T? bias:T?|output:T|T=tensor(float)"},
    {"ai.nee", "FusedMatMul", 1, 0, "activation:STRING|A:T B:T bias:T?|Y:T|T=tensor(float)"},
    // com.microsoft FusedConv on bfloat16 (ops/conv.cc), which ORT's schema
    // does not allow, written by opt/fuse_conv_activation.cc for the bfloat16
    // Convs opt/widen_narrow_float.cc keeps narrow: each step rounded to bfloat16.
    {"ai.nee", "FusedConv", 1, 0,
     "activation:STRING activation_params:FLOATS auto_pad:STRING=NOTSET dilations:INTS group:INT=1 "
     "kernel_shape:INTS pads:INTS strides:INTS|X:T W:T B:T? Z:T?|Y:T|T=tensor(bfloat16)"},
    // ConvInteger with its dequantizing tail (ops/quant_conv.h), written by opt/fuse_quant_conv.cc.
    {"ai.nee", "ConvIntegerToFloat", 1, 0,
     "activation:STRING activation_params:FLOATS auto_pad:STRING=NOTSET dilations:INTS group:INT=1 "
     "kernel_shape:INTS pads:INTS strides:INTS|"
     "X:T1 W:T2 x_zero_point:T1? w_zero_point:T2? scale:T3 B:T4? bias:T3? Z:T3?|"
     "Y:T3|T1=tensor(int8),tensor(uint8) T2=tensor(int8),tensor(uint8) T3=tensor(float) T4=tensor(int32)"},
    // A byte-to-byte function as its 256-entry table (ops/table_lookup.cc), written by opt/fuse_byte_table.cc.
    {"ai.nee", "TableLookup", 1, 0, "|X:T1 table:T2|Y:T2|T1=tensor(int8),tensor(uint8) T2=tensor(int8),tensor(uint8)"},
    // The channel-blocked layout (ops/blocked_conv.cc), written by opt/layout_blocked.cc.
    {"ai.nee", "ToBlocked", 1, 0, "|X:T|Y:T|T=tensor(float)"},
    {"ai.nee", "FromBlocked", 1, 0, "channels:INT!|X:T|Y:T|T=tensor(float)"},
    {"ai.nee", "BlockedConv", 1, 0,
     "channels:INT! activation:STRING activation_params:FLOATS dilations:INTS group:INT=1 input_layout:STRING "
     "kernel_shape:INTS output_layout:STRING pads:INTS strides:INTS|X:T W:T B:T? Z:T?|Y:T|T=tensor(float)"},
    {"ai.nee", "BlockedExpandDepthwise", 1, 0,
     "channels:INT! activation:STRING activation_params:FLOATS dilations:INTS expand_activation:STRING "
     "expand_activation_params:FLOATS kernel_shape:INTS pads:INTS project_activation:STRING "
     "project_activation_params:FLOATS strides:INTS|X:T W:T B:T DW:T DB:T PW:T? PB:T? Z:T?|Y:T|T=tensor(float)"},
    // A Transpose with column-range arithmetic and a last-axis Concat (ops/column_map.cc),
    // written by opt/fuse_column_map.cc.
    {"ai.nee", "TransposeColumnMap", 1, 0, "bounds:INTS! perm:INTS! program:INTS|X:T operands:T*0|Y:T|T=tensor(float)"},
    {"ai.nee", "BlockedMaxPool", 1, 0,
     "channels:INT! kernel_shape:INTS! pads:INTS strides:INTS|X:T|Y:T|T=tensor(float)"},
    {"ai.nee", "BlockedGlobalAveragePool", 1, 0, "channels:INT!|X:T|Y:T|T=tensor(float)"},
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

// Every allowed-type list, parsed once: kTypeSets by position, then the
// hand-written rows' literal lists (a deque: pointers into it stay valid).
using TypeLists = std::deque<std::vector<std::string>>;

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(std::move(w));
  return words;
}

// A NEE_TYPE_SET's types: a tensor is written by its element type alone.
std::vector<std::string> ParseTypeSet(const char* text) {
  std::vector<std::string> types = SplitWords(text);
  for (std::string& t : types)
    if (t.find('(') == std::string::npos) t = "tensor(" + t + ")";
  return types;
}

std::vector<FormalParam> ParseFormals(const std::string& text) {
  std::vector<FormalParam> formals;
  for (const std::string& word : SplitWords(text)) {
    const size_t colon = word.find(':');
    FormalParam f;
    f.name = word.substr(0, colon);
    std::string type = word.substr(colon + 1);
    const size_t mark = type.find_first_of("?*%");  // never inside a type: "tensor(int64)"
    if (mark != std::string::npos) {
      if (type[mark] == '?') {
        f.option = FormalParam::Option::kOptional;
      } else {
        f.option = FormalParam::Option::kVariadic;
        f.homogeneous = type[mark] == '*';
        f.min_arity = static_cast<int>(ParseInt(type.substr(mark + 1)));
      }
      type.resize(mark);
    }
    f.type = std::move(type);
    formals.push_back(std::move(f));
  }
  return formals;
}

std::vector<TypeConstraint> ParseConstraints(const std::string& text, TypeLists& lists) {
  std::vector<TypeConstraint> constraints;
  for (const std::string& word : SplitWords(text)) {
    const size_t eq = word.find('=');
    const std::string value = word.substr(eq + 1);
    const std::vector<std::string>* allowed;
    if (!value.empty() && value[0] >= '0' && value[0] <= '9') {
      allowed = &lists[static_cast<size_t>(ParseInt(value))];
    } else {
      lists.push_back(SplitCommas(value));
      allowed = &lists.back();
    }
    constraints.push_back({word.substr(0, eq), allowed});
  }
  return constraints;
}

AttrSchema Parse(const SpecRow& row, TypeLists& lists) {
  AttrSchema s{row.domain, row.op, row.since_version, row.accepts_undeclared != 0, {}, {}, {}, {}};
  std::vector<std::string> fields;  // attributes | inputs | outputs | constraints
  std::istringstream decl(row.decl);
  for (std::string field; std::getline(decl, field, '|');) fields.push_back(std::move(field));
  fields.resize(4);  // getline yields nothing for an empty last field
  s.inputs = ParseFormals(fields[1]);
  s.outputs = ParseFormals(fields[2]);
  s.constraints = ParseConstraints(fields[3], lists);
  std::istringstream words(fields[0]);
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

// One op's declarations, parsed when the op is first looked up: a session
// reads the few ops its model uses, not all ~800 versions.
struct OpEntry {
  std::vector<const SpecRow*> rows;
  std::once_flag parsed_once;
  std::vector<AttrSchema> versions;  // by since-version, once parsed
};

struct Index {
  std::map<std::pair<std::string, std::string>, OpEntry> ops;
  TypeLists lists;  // lives as long as the declarations pointing into it
};

// Built on first use (a function-local static: initialized once, thread-safe).
Index& GetIndex() {
  static Index* index = [] {
    auto* idx = new Index();
    for (const char* types : kTypeSets) idx->lists.push_back(ParseTypeSet(types));
    for (const SpecRow& row : kRows) idx->ops[{row.domain, row.op}].rows.push_back(&row);
    return idx;
  }();
  return *index;
}

const std::vector<AttrSchema>& Versions(Index& index, OpEntry& entry) {
  std::call_once(entry.parsed_once, [&] {
    // The hand-written rows' literal type lists are appended to the shared
    // table: serialized, as another op may be parsed at the same time.
    static std::mutex lists_mu;
    std::lock_guard<std::mutex> lock(lists_mu);
    for (const SpecRow* row : entry.rows) entry.versions.push_back(Parse(*row, index.lists));
    std::sort(entry.versions.begin(), entry.versions.end(),
              [](const AttrSchema& a, const AttrSchema& b) { return a.since_version < b.since_version; });
  });
  return entry.versions;
}
}  // namespace

const AttrSchema* FindAttrSchema(const std::string& domain, const std::string& op, int64_t opset) {
  Index& index = GetIndex();
  auto it = index.ops.find({NormalizeDomain(domain), op});
  if (it == index.ops.end()) return nullptr;
  const AttrSchema* found = nullptr;
  for (const AttrSchema& s : Versions(index, it->second))
    if (s.since_version <= opset) found = &s;
  return found;
}

std::vector<const AttrSchema*> AllAttrSchemas() {
  Index& index = GetIndex();
  std::vector<const AttrSchema*> all;
  for (auto& [key, entry] : index.ops)
    for (const AttrSchema& s : Versions(index, entry)) all.push_back(&s);
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

void BindAttrDeclarations(Graph& graph, const std::vector<OpsetImport>& imports) {
  std::map<std::string, int64_t> opsets;
  for (const OpsetImport& o : imports) opsets.emplace(NormalizeDomain(o.domain), o.version);
  BindGraph(graph, opsets);
}

void BindAttrDeclarations(Model& model) { BindAttrDeclarations(model.graph, model.opset_imports); }

const char* AttrTypeSpecName(AttrType type) {
  const auto i = static_cast<size_t>(type);
  return i < std::size(kTypeNames) ? kTypeNames[i] : "UNDEFINED";
}

}  // namespace nee
