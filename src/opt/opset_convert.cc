// The opset converter's driver: walks every graph (subgraphs first) and every
// model-local function, moves each default-domain node across its op's version
// steps between the two opsets one step at a time (an adapter where
// opset_adapters.cc has one, the generic rule where the spec table shows the
// step as compatible) and restamps the default domain's opset import.
#include "opt/opset_convert.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/json.h"
#include "check/checker.h"
#include "format/lineage.h"
#include "format/metadata_edit.h"
#include "format/onnx_reader.h"
#include "format/onnx_writer.h"
#include "ir/convert.h"
#include "ir/inline_functions.h"
#include "ops/attr_spec.h"
#include "opt/opset_adapters.h"

namespace nee {
namespace opset {

namespace {

const SpecStep kSpec[] = {
#define NEE_SPEC_STEP(...) {__VA_ARGS__},
#include "opt/opset_spec.inc"
#undef NEE_SPEC_STEP
};

std::vector<std::string> SplitList(const char* text) {
  std::vector<std::string> out;
  std::string s = text, item;
  if (s.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t bar = s.find('|', start);
    out.push_back(s.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

}  // namespace

const std::vector<const SpecStep*>& StepsOf(const std::string& op) {
  static const auto* index = [] {
    auto* m = new std::map<std::string, std::vector<const SpecStep*>>;
    for (const SpecStep& s : kSpec) (*m)[s.op].push_back(&s);
    for (auto& [name, steps] : *m)
      std::sort(steps.begin(), steps.end(), [](const SpecStep* a, const SpecStep* b) { return a->since < b->since; });
    return m;
  }();
  static const std::vector<const SpecStep*> kNone;
  auto it = index->find(op);
  return it == index->end() ? kNone : it->second;
}

const TypeInfo* Scope::Type(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->types.find(name);
    if (it != s->types.end()) return it->second.kind == TypeInfo::Kind::kUnknown ? nullptr : &it->second;
  }
  return nullptr;
}

int64_t Scope::Rank(const std::string& name) const {
  const TypeInfo* t = Type(name);
  return t && t->is_tensor() && t->shape ? static_cast<int64_t>(t->shape->size()) : -1;
}

bool Scope::Dims(const std::string& name, std::vector<int64_t>* dims) const {
  const TypeInfo* t = Type(name);
  return t && t->is_tensor() && t->shape && ShapeIsStatic(*t->shape, dims);
}

DataType Scope::ElemType(const std::string& name) const {
  const TypeInfo* t = Type(name);
  if (t && t->is_tensor()) return t->elem_type;
  if (const Tensor* c = Constant(name)) return c->dtype();
  return DataType::kUndefined;
}

const Tensor* Scope::Constant(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent) {
    auto it = s->constants.find(name);
    if (it != s->constants.end()) return &it->second;
  }
  return nullptr;
}

std::string Scope::Fresh(const std::string& hint) {
  std::string base = hint.empty() ? "convert" : hint;
  std::string name = base;
  for (int k = 1; names->count(name); ++k) name = base + "_" + std::to_string(k);
  names->insert(name);
  return name;
}

std::string StepCtx::Const(const Tensor& value, const std::string& hint) {
  Attribute a;
  a.name = "value";
  a.type = AttrType::kTensor;
  a.t = value;
  std::string out = Emit("Constant", {}, {a}, hint);
  scope.constants[out] = value;
  return out;
}

std::string StepCtx::ConstInts(const std::vector<int64_t>& values, const std::string& hint, bool scalar) {
  std::vector<int64_t> dims;
  if (!scalar) dims.push_back(static_cast<int64_t>(values.size()));
  return Const(Tensor::FromVector<int64_t>(values, dims), hint);
}

Result<std::string> StepCtx::ConstScalar(DataType type, double value, const std::string& hint) {
  if (type == DataType::kUndefined) return InvalidArgument("the element type of its input is unknown");
  Tensor f = Tensor::Scalar<double>(value);
  NEE_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(type, {}));
  NEE_RETURN_IF_ERROR(ConvertTensor(f, t));
  return Const(t, hint);
}

std::string StepCtx::Emit(const std::string& op, std::vector<std::string> inputs, std::vector<Attribute> attrs,
                          const std::string& hint, bool put_after, std::string output) {
  Node n;
  n.op_type = op;
  n.name = scope.Fresh((node.name.empty() ? node.op_type : node.name) + "_" + hint);
  n.inputs = std::move(inputs);
  n.outputs = {output.empty() ? scope.Fresh((node.outputs.empty() ? node.name : node.outputs[0]) + "_" + hint)
                              : output};
  n.attributes = std::move(attrs);
  std::string out = n.outputs[0];
  (put_after ? after : before).push_back(std::move(n));
  return out;
}

Result<Tensor> StepCtx::ConstantInput(size_t i, const char* what) const {
  if (!node.HasInput(i)) return Tensor{};
  const Tensor* t = scope.Constant(node.inputs[i]);
  if (!t) return InvalidArgument(std::string("its ") + what + " input '" + node.inputs[i] +
                                 "' is computed at run time, but the older version takes it as an attribute");
  return *t;
}

void RemoveAttr(Node& node, const std::string& name) {
  node.attributes.erase(std::remove_if(node.attributes.begin(), node.attributes.end(),
                                       [&](const Attribute& a) { return a.name == name; }),
                        node.attributes.end());
}
void SetAttr(Node& node, Attribute a) {
  RemoveAttr(node, a.name);
  node.attributes.push_back(std::move(a));
}
int64_t NormalizeAxis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

namespace {

// ---- The generic rule -------------------------------------------------------

// An attribute holding the value a spec default spells ("1", "0.5", "nearest", "1,2").
bool AttrEqualsDefault(const Attribute& a, const std::string& def) {
  switch (a.type) {
    case AttrType::kInt: return def == std::to_string(a.i);
    case AttrType::kFloat: {
      char* end = nullptr;
      double d = std::strtod(def.c_str(), &end);
      return end != def.c_str() && static_cast<float>(d) == a.f;
    }
    case AttrType::kString: return def == a.s;
    case AttrType::kInts: {
      std::string s;
      for (int64_t v : a.ints) s += (s.empty() ? "" : ",") + std::to_string(v);
      return s == def;
    }
    default: return false;
  }
}

// An attribute from a spec default ("1" for an int attribute, ...), typed like
// the spec's value; false when it cannot tell.
bool AttrFromDefault(const std::string& name, const std::string& def, Attribute* out) {
  if (def.empty()) return false;
  char* end = nullptr;
  long long i = std::strtoll(def.c_str(), &end, 10);
  if (*end == 0) {
    *out = IntAttr(name, i);
    return true;
  }
  double d = std::strtod(def.c_str(), &end);
  if (*end == 0) {
    *out = opt::FloatAttr(name, static_cast<float>(d));
    return true;
  }
  if (def.find(',') != std::string::npos) return false;
  *out = opt::StringAttr(name, def);
  return true;
}

// Whether the values fit a formal parameter list ('.', '?', '*' marks).
std::string FitsParams(std::vector<std::string>& values, const std::string& marks, const char* what) {
  const bool variadic = !marks.empty() && marks.back() == '*';
  for (size_t i = 0; i < values.size(); ++i) {
    const bool present = !values[i].empty();
    if (i >= marks.size()) {
      if (present && !variadic)
        return std::string(what) + " " + std::to_string(i) + " ('" + values[i] + "') has no place in that version";
    } else if (marks[i] == '.' && !present) {
      return std::string(what) + " " + std::to_string(i) + " is required in that version but absent";
    }
  }
  for (size_t i = values.size(); i < marks.size(); ++i)
    if (marks[i] == '.') return std::string(what) + " " + std::to_string(i) + " is required in that version but absent";
  while (!values.empty() && values.back().empty() && values.size() > marks.size()) values.pop_back();
  while (!values.empty() && values.back().empty() && !marks.empty() && marks.size() >= values.size() &&
         marks[values.size() - 1] != '.')
    values.pop_back();
  return "";
}

Status GenericStep(StepCtx& c, const SpecStep& step) {
  Node& node = c.node;
  const std::string prev = "version " + std::to_string(step.since);
  for (const std::string& name : SplitList(step.attrs_removed)) {
    if (c.up && node.HasAttr(name))
      return c.Fail("attribute '" + name + "' was removed in " + node.op_type + "-" + std::to_string(step.since) +
                    " and nee has no adapter for it");
  }
  for (const std::string& entry : SplitList(step.attrs_added)) {
    const bool required = !entry.empty() && entry.back() == '!';
    const size_t eq = entry.find('=');
    const std::string name = required ? entry.substr(0, entry.size() - 1) : entry.substr(0, eq);
    const std::string def = eq == std::string::npos ? "" : entry.substr(eq + 1);
    const Attribute* a = node.FindAttr(name);
    if (c.up) {
      if (required && !a)
        return c.Fail("attribute '" + name + "' is required from " + node.op_type + "-" + std::to_string(step.since));
    } else if (a) {
      if (!def.empty() && AttrEqualsDefault(*a, def)) RemoveAttr(node, name);
      else
        return c.Fail("attribute '" + name + "' (added in " + node.op_type + "-" + std::to_string(step.since) +
                      ") is set, and the older version has no equivalent");
    }
  }
  for (const std::string& entry : SplitList(step.attrs_changed)) {
    // name=old>new: the default changed, so an absent attribute is written out.
    const size_t eq = entry.find('='), gt = entry.find('>');
    const std::string name = entry.substr(0, eq);
    const std::string def = c.up ? entry.substr(eq + 1, gt - eq - 1) : entry.substr(gt + 1);
    if (node.HasAttr(name)) continue;
    Attribute a;
    if (!AttrFromDefault(name, def, &a))
      return c.Fail("the default of attribute '" + name + "' changed in " + node.op_type + "-" +
                    std::to_string(step.since));
    node.attributes.push_back(a);
  }
  const std::string ins = c.up ? step.inputs_after : step.inputs_before;
  const std::string outs = c.up ? step.outputs_after : step.outputs_before;
  std::string why = FitsParams(node.inputs, ins, "input");
  if (why.empty()) why = FitsParams(node.outputs, outs, "output");
  if (!why.empty()) return c.Fail(why);
  // Element types the other version lacks at each input / output position.
  for (const std::string& entry : SplitList(c.up ? step.types_removed : step.types_added)) {
    const size_t eq = entry.find('=');
    const bool input = entry[0] == 'i';
    const size_t pos = static_cast<size_t>(std::stoul(entry.substr(1, eq - 1)));
    const std::string types = "," + entry.substr(eq + 1) + ",";
    const auto& values = input ? node.inputs : node.outputs;
    const std::string& marks = input ? (c.up ? step.inputs_after : step.inputs_before)
                                     : (c.up ? step.outputs_after : step.outputs_before);
    const bool variadic_last = !marks.empty() && marks.back() == '*' && pos + 1 == marks.size();
    for (size_t i = pos; i < values.size() && (i == pos || variadic_last); ++i) {
      const TypeInfo* t = values[i].empty() ? nullptr : c.scope.Type(values[i]);
      if (!t) continue;
      const std::string s = t->ToString();
      if (types.find("," + s + ",") != std::string::npos)
        return c.Fail("'" + values[i] + "' is " + s + ", which " + node.op_type + " does not accept " +
                      (c.up ? "from version " + std::to_string(step.since)
                            : "before version " + std::to_string(step.since)));
    }
  }
  // Negative axes are allowed from opset 11: going below, they count from the front.
  if (!c.up && step.since == 11) {
    Attribute* axis = nullptr;
    for (Attribute& a : node.attributes)
      if (a.name == "axis" || a.name == "axes") axis = &a;
    const bool negative = axis && ((axis->type == AttrType::kInt && axis->i < 0) ||
                                   (axis->type == AttrType::kInts &&
                                    std::any_of(axis->ints.begin(), axis->ints.end(), [](int64_t v) { return v < 0; })));
    if (negative) {
      int64_t rank = node.inputs.empty() ? -1 : c.scope.Rank(node.inputs[0]);
      // Unsqueeze's axes and OneHot's axis count the output's dims.
      if (rank >= 0 && node.op_type == "Unsqueeze") rank += static_cast<int64_t>(axis->ints.size());
      if (rank >= 0 && node.op_type == "OneHot") rank += 1;
      if (rank < 0)
        return c.Fail("its negative '" + axis->name + "' needs the input's rank, which is unknown, to count from the front");
      if (axis->type == AttrType::kInt) axis->i = NormalizeAxis(axis->i, rank);
      for (int64_t& v : axis->ints) v = NormalizeAxis(v, rank);
    }
  }
  return Status::Ok();
}

// ---- The driver -----------------------------------------------------------

struct Counters {
  size_t nodes = 0, adapted = 0, added = 0;
};

std::string Name(const std::string& op, int64_t v) { return op + "-" + std::to_string(v); }

Status ConvertGraph(Graph& graph, Scope& scope, int64_t source, int64_t target, Counters& counters);

// The version of `op` in force at `opset`; 0 when the op does not exist there.
int InForce(const std::vector<const SpecStep*>& steps, int64_t opset) {
  int v = 0;
  for (const SpecStep* s : steps)
    if (s->since <= opset) v = s->since;
  return v;
}

Status ConvertNode(Node node, Scope& scope, int64_t source, int64_t target, std::vector<Node>& out,
                   Counters& counters) {
  // Bodies first: they see this graph's scope.
  for (Attribute& a : node.attributes) {
    std::vector<std::shared_ptr<Graph>*> bodies;
    if (a.g) bodies.push_back(&a.g);
    for (auto& g : a.graphs) bodies.push_back(&g);
    for (auto* body : bodies) {
      auto copy = std::make_shared<Graph>(**body);
      Scope inner;
      inner.parent = &scope;
      inner.names = scope.names;
      NEE_RETURN_IF_ERROR(ConvertGraph(*copy, inner, source, target, counters));
      *body = copy;
    }
  }
  if (!NormalizeDomain(node.domain).empty() || source == target) {
    out.push_back(std::move(node));
    return Status::Ok();
  }
  ++counters.nodes;
  const std::string original = node.Describe();
  const std::string source_op = Name(node.op_type, InForce(StepsOf(node.op_type), source));
  // "node 'n' (Op): cannot convert Op-13 (opset 13) to opset 9: at Op-11 -> Op-10: <why>"
  auto fail = [&](const std::string& op, int from, int to, const Status& why) {
    return InvalidArgument(original + ": cannot convert " + source_op + " (opset " + std::to_string(source) +
                           ") to opset " + std::to_string(target) + ": at " + Name(op, from) + " -> " +
                           (to > 0 ? Name(op, to) : "opset " + std::to_string(target)) + ": " + why.message());
  };
  std::vector<Node> before, after;
  bool replaced = false, adapted = false;
  const bool up = target > source;
  int64_t cur = source;  // the opset the node is written for so far
  for (int guard = 0; guard < 64 && !replaced; ++guard) {
    const auto& steps = StepsOf(node.op_type);
    if (steps.empty())
      return InvalidArgument(original + ": '" + node.op_type + "' is not an operator of the ONNX default domain " +
                             "nee knows the history of");
    const int here = InForce(steps, cur);
    if (here == 0)
      return InvalidArgument(original + ": '" + node.op_type + "' does not exist in opset " + std::to_string(cur));
    const SpecStep* step = nullptr;
    if (up) {
      for (const SpecStep* s : steps)
        if (s->since > cur && s->since <= target) {
          step = s;
          break;
        }
    } else {
      for (const SpecStep* s : steps)
        if (s->since > target && s->since <= here) step = s;  // the newest one to undo
    }
    if (!step) break;
    const bool first = step == steps.front();
    const bool removal = step->deprecated && step == steps.back();
    const Adapter* adapter = FindAdapter(node.op_type, step->since);
    AdapterFn fn = adapter ? (up ? adapter->up : adapter->down) : nullptr;
    StepCtx c{node, scope, before, after, step->since, up, target};
    const std::string op = node.op_type;
    const int from_version = up ? here : step->since;  // the version the node is at before this step
    if (fn) {
      Status st = fn(c);
      if (!st.ok()) return fail(op, from_version, up ? step->since : InForce(steps, step->since - 1), st);
      adapted = true;
      replaced = c.replaced;
    } else if (!up && first) {
      return InvalidArgument(original + ": cannot convert " + source_op + " (opset " + std::to_string(source) +
                             ") to opset " + std::to_string(target) + ": " + op + " does not exist before opset " +
                             std::to_string(step->since) + " and nee has no decomposition for it");
    } else if (up && removal) {
      return fail(op, from_version, step->since,
                  InvalidArgument(op + " was removed in opset " + std::to_string(step->since) +
                                  " and nee has no replacement for it"));
    } else if (!up && steps[static_cast<size_t>(std::find(steps.begin(), steps.end(), step) - steps.begin()) - 1]
                          ->deprecated) {
      const int older = InForce(steps, step->since - 1);
      return fail(op, from_version, older,
                  InvalidArgument(Name(op, older) + " is deprecated (onnx.checker rejects it)"));
    } else if (NeedsAdapter(op, step->since, up)) {
      return fail(op, from_version, up ? step->since : InForce(steps, step->since - 1),
                  InvalidArgument("the semantics change at this step and nee has no adapter for it"));
    } else {
      Status st = GenericStep(c, *step);
      if (!st.ok()) return fail(op, from_version, up ? step->since : InForce(steps, step->since - 1), st);
    }
    cur = up ? step->since : step->since - 1;
  }
  // Constants an adapter made and a later step folded into an attribute.
  auto reads = [&](const std::string& name) {
    auto in = [&](const Node& n) { return std::find(n.inputs.begin(), n.inputs.end(), name) != n.inputs.end(); };
    return (!replaced && in(node)) || std::any_of(before.begin(), before.end(), in) ||
           std::any_of(after.begin(), after.end(), in);
  };
  for (size_t i = before.size(); i-- > 0;)
    if (before[i].op_type == "Constant" && !reads(before[i].outputs[0]))
      before.erase(before.begin() + static_cast<std::ptrdiff_t>(i));
  counters.adapted += adapted ? 1 : 0;
  counters.added += before.size() + after.size();
  for (Node& n : before) out.push_back(std::move(n));
  if (!replaced) out.push_back(std::move(node));
  for (Node& n : after) out.push_back(std::move(n));
  return Status::Ok();
}

void RecordConstantNode(const Node& node, Scope& scope) {
  if (!NormalizeDomain(node.domain).empty() || node.op_type != "Constant" || node.outputs.size() != 1) return;
  if (const Attribute* a = node.FindAttr("value"); a && a->type == AttrType::kTensor)
    scope.constants[node.outputs[0]] = a->t;
  else if (const Attribute* ints = node.FindAttr("value_ints"))
    scope.constants[node.outputs[0]] =
        Tensor::FromVector<int64_t>(ints->ints, {static_cast<int64_t>(ints->ints.size())});
  else if (const Attribute* i = node.FindAttr("value_int"))
    scope.constants[node.outputs[0]] = Tensor::Scalar<int64_t>(i->i);
  else if (const Attribute* fs = node.FindAttr("value_floats"))
    scope.constants[node.outputs[0]] = Tensor::FromVector<float>(fs->floats, {static_cast<int64_t>(fs->floats.size())});
  else if (const Attribute* f = node.FindAttr("value_float"))
    scope.constants[node.outputs[0]] = Tensor::Scalar<float>(f->f);
}

// Types for a subgraph body, from the checker run with the enclosing types.
void InferBodyTypes(const Graph& graph, Scope& scope, const OpsetMap& opsets) {
  if (!scope.parent) return;
  std::vector<std::unique_ptr<TypeScope>> chain;
  const TypeScope* outer = nullptr;
  std::vector<const Scope*> scopes;
  for (const Scope* s = scope.parent; s; s = s->parent) scopes.push_back(s);
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    auto ts = std::make_unique<TypeScope>();
    ts->parent = outer;
    ts->types = &(*it)->types;
    outer = ts.get();
    chain.push_back(std::move(ts));
  }
  Result<CheckedGraph> checked = CheckGraph(graph, opsets, OpRegistry::Global(), outer, CheckOptions{}, 1);
  if (checked.ok()) scope.types = checked->types;
}

thread_local const OpsetMap* g_source_opsets = nullptr;

// Every name the graph's nodes, subgraphs and outputs read.
std::unordered_set<std::string> ReadNames(const Graph& graph) {
  std::unordered_set<std::string> names;
  for (const ValueInfo& o : graph.outputs) names.insert(o.name);
  for (const Node& n : graph.nodes) {
    for (const std::string& i : n.inputs) names.insert(i);
    for (const Graph* body : BodiesOf(n))
      for (const std::string& c : CapturedNames(*body)) names.insert(c);
  }
  return names;
}

Status ConvertGraph(Graph& graph, Scope& scope, int64_t source, int64_t target, Counters& counters) {
  if (scope.types.empty() && g_source_opsets) InferBodyTypes(graph, scope, *g_source_opsets);
  // Declared types where inference gave none (a graph the checker could not type).
  auto declare = [&](const ValueInfo& v) {
    if (v.type.kind != TypeInfo::Kind::kUnknown) scope.types.emplace(v.name, v.type);
  };
  for (const ValueInfo& v : graph.inputs) declare(v);
  for (const ValueInfo& v : graph.outputs) declare(v);
  for (const ValueInfo& v : graph.value_info) declare(v);
  for (const Initializer& init : graph.initializers)
    scope.types.emplace(init.name, TypeInfo::Tensor(init.tensor.dtype(), ShapeFromDims(init.tensor.dims())));
  std::unordered_set<std::string> overridable;
  for (const ValueInfo& in : graph.inputs) overridable.insert(in.name);
  for (const Initializer& init : graph.initializers)
    if (!overridable.count(init.name)) scope.constants[init.name] = init.tensor;
  const std::unordered_set<std::string> read_before = ReadNames(graph);
  std::vector<Node> out;
  out.reserve(graph.nodes.size());
  for (Node& node : graph.nodes) {
    RecordConstantNode(node, scope);
    NEE_RETURN_IF_ERROR(ConvertNode(std::move(node), scope, source, target, out, counters));
  }
  graph.nodes = std::move(out);
  // Constants whose only readers now hold their value as an attribute (an input folded back going down).
  const std::unordered_set<std::string> read_after = ReadNames(graph);
  graph.nodes.erase(std::remove_if(graph.nodes.begin(), graph.nodes.end(),
                                   [&](const Node& n) {
                                     return NormalizeDomain(n.domain).empty() && n.op_type == "Constant" &&
                                            n.outputs.size() == 1 && read_before.count(n.outputs[0]) &&
                                            !read_after.count(n.outputs[0]);
                                   }),
                    graph.nodes.end());
  return Status::Ok();
}

void CollectNames(const Graph& g, std::unordered_set<std::string>& names) {
  names.insert(g.name);
  for (const ValueInfo& v : g.inputs) names.insert(v.name);
  for (const Initializer& i : g.initializers) names.insert(i.name);
  for (const Node& n : g.nodes) {
    names.insert(n.name);
    for (const std::string& s : n.outputs) names.insert(s);
    for (const std::string& s : n.inputs) names.insert(s);
    for (const Attribute& a : n.attributes) {
      if (a.g) CollectNames(*a.g, names);
      for (const auto& sub : a.graphs) CollectNames(*sub, names);
    }
  }
}

// The IR version the ONNX release that introduced `opset` wrote (onnx.helper.VERSION_TABLE).
int64_t MinimumIrVersion(int64_t opset) {
  if (opset <= 8) return 3;
  if (opset <= 9) return 4;
  if (opset <= 10) return 5;
  if (opset <= 11) return 6;
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  if (opset <= 24) return 11;
  return 12;
}

}  // namespace
}  // namespace opset

std::string OpsetConversionReport::Text() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "opset %lld -> %lld: %zu default-domain nodes, %zu rewritten by adapters, %zu nodes added\n",
                static_cast<long long>(from), static_cast<long long>(to), nodes, adapted, added_nodes);
  return line;
}

Result<OpsetConversionReport> ConvertModelOpset(Model& model, int64_t target) {
  using namespace opset;
  const int64_t source = model.OpsetVersion("");
  if (source < 0) return InvalidArgument("the model does not import the default ONNX domain; nothing to convert");
  const int64_t newest = NewestSupportedOpset("");
  if (target < kOldestConvertibleOpset || target > newest)
    return InvalidArgument("target opset " + std::to_string(target) + " is outside what nee converts (" +
                           std::to_string(kOldestConvertibleOpset) + " to " + std::to_string(newest) + ")");
  if (source < kOldestConvertibleOpset)
    return InvalidArgument("the model imports default-domain opset " + std::to_string(source) +
                           "; nee converts from opset " + std::to_string(kOldestConvertibleOpset) + " on");
  OpsetConversionReport report;
  report.from = source;
  report.to = target;

  std::unordered_set<std::string> names;
  CollectNames(model.graph, names);
  for (const Function& f : model.functions)
    for (const Node& n : f.nodes) {
      names.insert(n.name);
      for (const std::string& s : n.outputs) names.insert(s);
    }
  // Types of the main graph as the model stands (functions expanded, as a session sees it).
  Scope main;
  main.names = &names;
  {
    Model copy = model;
    if (InlineModelFunctions(copy).ok()) {
      BindAttrDeclarations(copy);
      Result<CheckedGraph> checked = CheckModel(copy, OpRegistry::Global());
      if (checked.ok()) {
        main.types = checked->types;
        for (auto& [name, value] : checked->constants) main.constants.emplace(name, value);
      }
    }
  }
  const OpsetMap opsets = OpsetsOf(model.opset_imports);
  g_source_opsets = &opsets;
  Counters counters;
  Status st = ConvertGraph(model.graph, main, source, target, counters);
  for (size_t i = 0; st.ok() && i < model.functions.size(); ++i) {
    Function& f = model.functions[i];
    int64_t fsource = -1;
    for (const OpsetImport& o : f.opset_imports)
      if (NormalizeDomain(o.domain).empty()) fsource = o.version;
    if (fsource < 0) continue;
    Scope fs;
    fs.names = &names;
    Graph body;  // the function's nodes and outputs, to see which values are read
    for (const std::string& o : f.outputs) body.outputs.push_back({o, TypeInfo{}, "", {}});
    body.nodes = f.nodes;
    const std::unordered_set<std::string> read_before = ReadNames(body);
    std::vector<Node> out;
    for (Node& node : f.nodes) {
      RecordConstantNode(node, fs);
      st = ConvertNode(std::move(node), fs, fsource, target, out, counters);
      if (!st.ok()) break;
    }
    if (!st.ok()) {
      st = InvalidArgument("function '" + f.name + "': " + st.message());
      break;
    }
    // Constants whose readers now hold their value as an attribute.
    body.nodes = std::move(out);
    const std::unordered_set<std::string> read_after = ReadNames(body);
    f.nodes.clear();
    for (Node& n : body.nodes)
      if (!(NormalizeDomain(n.domain).empty() && n.op_type == "Constant" && n.outputs.size() == 1 &&
            read_before.count(n.outputs[0]) && !read_after.count(n.outputs[0])))
        f.nodes.push_back(std::move(n));
    for (OpsetImport& o : f.opset_imports)
      if (NormalizeDomain(o.domain).empty()) o.version = target;
  }
  g_source_opsets = nullptr;
  NEE_RETURN_IF_ERROR(st);
  for (OpsetImport& o : model.opset_imports)
    if (NormalizeDomain(o.domain).empty()) o.version = target;
  model.ir_version = std::max(model.ir_version, MinimumIrVersion(target));
  report.nodes = counters.nodes;
  report.adapted = counters.adapted;
  report.added_nodes = counters.added;
  return report;
}

Result<OpsetConversionReport> ConvertOpsetFile(const std::string& in_path, const std::string& out_path,
                                               int64_t target) {
  NEE_ASSIGN_OR_RETURN(Model model, ReadModelFile(in_path));
  NEE_ASSIGN_OR_RETURN(LineageRecorder lineage, LineageRecorder::Begin(in_path, model));
  NEE_ASSIGN_OR_RETURN(OpsetConversionReport report, ConvertModelOpset(model, target));
  // What `nee convert` hands out must load: checked at the new opset, functions expanded as a session does.
  {
    Model copy = model;
    Status inlined = InlineModelFunctions(copy);
    if (!inlined.ok()) return InvalidArgument("the converted model does not load: " + inlined.message());
    BindAttrDeclarations(copy);
    Result<CheckedGraph> checked = CheckModel(copy, OpRegistry::Global());
    if (!checked.ok()) return InvalidArgument("the converted model does not check: " + checked.status().message());
  }
  NEE_RETURN_IF_ERROR(lineage.Append(model, "convert",
                                     Json::Object()
                                         .Set("from_opset", Json::Number(static_cast<double>(report.from)))
                                         .Set("to_opset", Json::Number(static_cast<double>(report.to)))));
  NEE_RETURN_IF_ERROR(WriteModelFile(model, out_path, KeepingExternalData(model, in_path)));
  return report;
}

}  // namespace nee
