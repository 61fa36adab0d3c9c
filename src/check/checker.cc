#include "check/checker.h"

#include <algorithm>
#include <deque>

#include "check/type_constraints.h"
#include "ops/attr_spec.h"

namespace nee {

namespace {
constexpr int64_t kMaxPropagatedElements = 1024;

std::string GraphLabel(const Graph& g) { return "graph '" + g.name + "'"; }

// What bodies capture, where already known (from checking them).
using CapturedByBody = std::unordered_map<const Graph*, std::vector<std::string>>;

// Adds a graph's definitions to `defined`, and every used-but-undefined name
// to `captured`; a body listed in `known` is not walked again.
void CollectCaptured(const Graph& g, const std::unordered_set<std::string>& outer_defined,
                     std::vector<std::string>& captured, std::unordered_set<std::string>& seen,
                     const CapturedByBody* known = nullptr) {
  std::unordered_set<std::string> defined = outer_defined;
  for (const ValueInfo& vi : g.inputs) defined.insert(vi.name);
  for (const Initializer& init : g.initializers) defined.insert(init.name);
  for (const SparseTensor& s : g.sparse_initializers) defined.insert(s.name);
  for (const Node& n : g.nodes)
    for (const std::string& o : n.outputs)
      if (!o.empty()) defined.insert(o);
  auto use = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && seen.insert(name).second) captured.push_back(name);
  };
  for (const Node& n : g.nodes) {
    for (const std::string& in : n.inputs) use(in);
    for (const Attribute& a : n.attributes) {
      std::vector<std::string> inner;
      std::unordered_set<std::string> inner_seen;
      for (const Graph* body : BodiesOf(a)) {
        auto it = known ? known->find(body) : CapturedByBody::const_iterator{};
        if (known && it != known->end()) {
          for (const std::string& name : it->second) use(name);
        } else {
          CollectCaptured(*body, {}, inner, inner_seen);
        }
      }
      for (const std::string& name : inner) use(name);
    }
  }
  for (const ValueInfo& vi : g.outputs) use(vi.name);
}

// Merges a declared type (value_info / graph output) into an inferred one.
Status MergeDeclared(const Node& node, const std::string& name, const TypeInfo& declared, TypeInfo& inferred) {
  if (declared.kind == TypeInfo::Kind::kUnknown) return Status::Ok();
  if (inferred.kind == TypeInfo::Kind::kUnknown) {
    inferred = declared;
    return Status::Ok();
  }
  if (inferred.kind == TypeInfo::Kind::kTensor && declared.kind == TypeInfo::Kind::kTensor) {
    if (declared.elem_type != DataType::kUndefined && inferred.elem_type != DataType::kUndefined &&
        declared.elem_type != inferred.elem_type)
      return InvalidModel(node.Describe() + ": output '" + name + "' is declared " + declared.ToString() +
                          " but the operator produces " + inferred.ToString());
    if (inferred.elem_type == DataType::kUndefined) inferred.elem_type = declared.elem_type;
    if (!inferred.shape) {
      inferred.shape = declared.shape;
    } else if (declared.shape && declared.shape->size() == inferred.shape->size()) {
      for (size_t i = 0; i < inferred.shape->size(); ++i)
        if (!(*inferred.shape)[i].known() && (*inferred.shape)[i].symbol.empty())
          (*inferred.shape)[i] = (*declared.shape)[i];
    }
  }
  return Status::Ok();
}

class GraphChecker {
 public:
  GraphChecker(const Graph& g, const OpsetMap& opsets, const OpRegistry& registry, const TypeScope* outer,
               const CheckOptions& options, int depth)
      : g_(g), opsets_(opsets), registry_(registry), outer_(outer), options_(options), depth_(depth) {}

  // What makes a graph invalid whatever types flow into it: an op with no
  // schema at the model's opsets, a wrong arity, an input defined nowhere, a
  // cycle; in this graph and every body nested in it. Types are not inferred.
  Status CheckStructure() {
    if (depth_ > options_.max_subgraph_depth)
      return InvalidModel(GraphLabel(g_) + ": subgraphs nested deeper than " +
                          std::to_string(options_.max_subgraph_depth) + " levels");
    failed_.assign(g_.nodes.size(), false);
    NEE_RETURN_IF_ERROR(DefineGraphInputs());
    NEE_RETURN_IF_ERROR(ResolveNodes());
    NEE_RETURN_IF_ERROR(TopologicalOrder());
    // Nested bodies may read what this graph's nodes define: known, untyped.
    for (const Node& node : g_.nodes)
      for (const std::string& o : node.outputs)
        if (!o.empty()) out_.types.emplace(o, TypeInfo{});
    TypeScope scope{outer_, &out_.types, &out_.constants};
    for (const Node& node : g_.nodes)
      for (const Attribute& a : node.attributes)
        for (const Graph* body : BodiesOf(a)) {
          Status nested = GraphChecker(*body, opsets_, registry_, &scope, options_, depth_ + 1).CheckStructure();
          if (!nested.ok()) return nested.WithContext(node.Describe() + ": attribute '" + a.name + "': ");
        }
    return Status::Ok();
  }

  Result<CheckedGraph> Run() {
    if (depth_ > options_.max_subgraph_depth)
      return InvalidModel(GraphLabel(g_) + ": subgraphs nested deeper than " +
                          std::to_string(options_.max_subgraph_depth) + " levels");
    for (const ValueInfo& vi : g_.value_info) declared_.emplace(vi.name, &vi.type);
    for (const ValueInfo& vi : g_.outputs) declared_.emplace(vi.name, &vi.type);
    failed_.assign(g_.nodes.size(), false);
    out_.is_body = depth_ > 0;
    NEE_RETURN_IF_ERROR(DefineGraphInputs());
    NEE_RETURN_IF_ERROR(ResolveNodes());
    NEE_RETURN_IF_ERROR(TopologicalOrder());
    for (size_t idx : out_.order) {
      if (failed_[idx] || ReadsFailedValue(idx)) {
        SkipNode(idx);
        continue;
      }
      Status inferred = InferNode(idx);
      if (!inferred.ok()) {
        NEE_RETURN_IF_ERROR(Problem(std::move(inferred)));
        SkipNode(idx);
      }
    }
    NEE_RETURN_IF_ERROR(CheckOutputs());
    return std::move(out_);
  }

 private:
  // A problem found: the error itself when checking fails fast (sessions),
  // else recorded (CheckOptions::problems) and checking goes on.
  Status Problem(Status problem) {
    if (!options_.problems) return problem;
    options_.problems->push_back(std::move(problem));
    return Status::Ok();
  }

  // A node with a problem: reported once; what it defines has no inferred
  // type and whatever reads it is skipped, so one mistake is not reported
  // again by every node downstream.
  Status NodeProblem(size_t idx, Status problem) {
    failed_[idx] = true;
    return Problem(std::move(problem));
  }

  bool ReadsFailedValue(size_t idx) const {
    if (failed_values_.empty()) return false;
    for (const std::string& in : g_.nodes[idx].inputs)
      if (!in.empty() && failed_values_.count(in)) return true;
    for (const std::string& in : out_.implicit_inputs[idx])
      if (failed_values_.count(in)) return true;
    return false;
  }

  void SkipNode(size_t idx) {
    for (const std::string& o : g_.nodes[idx].outputs) {
      if (o.empty()) continue;
      failed_values_.insert(o);
      out_.types.emplace(o, TypeInfo{});
    }
  }

  Status Define(const std::string& name, const TypeInfo& type, const char* what) {
    if (name.empty()) return Problem(InvalidModel(GraphLabel(g_) + ": a " + what + " has an empty name"));
    if (!out_.types.emplace(name, type).second)
      return Problem(InvalidModel(GraphLabel(g_) + ": value '" + name + "' is defined more than once"));
    return Status::Ok();
  }

  Status DefineGraphInputs() {
    if (options_.input_types && options_.input_types->size() != g_.inputs.size())
      return InvalidArgument(GraphLabel(g_) + ": expected " + std::to_string(g_.inputs.size()) + " input types");
    std::unordered_set<std::string> input_names;
    for (size_t i = 0; i < g_.inputs.size(); ++i) {
      const ValueInfo& vi = g_.inputs[i];
      NEE_RETURN_IF_ERROR(Define(vi.name, options_.input_types ? (*options_.input_types)[i] : vi.type, "graph input"));
      input_names.insert(vi.name);
    }
    for (const Initializer& init : g_.initializers) {
      TypeInfo t = TypeInfo::Tensor(init.tensor.dtype(), ShapeFromDims(init.tensor.dims()));
      if (input_names.count(init.name)) {
        // An initializer that is also a graph input is an overridable default.
        continue;
      }
      const bool first = !out_.types.count(init.name);
      NEE_RETURN_IF_ERROR(Define(init.name, t, "initializer"));
      if (first) out_.constants.emplace(init.name, init.tensor);
    }
    for (const SparseTensor& s : g_.sparse_initializers) {
      if (input_names.count(s.name)) continue;
      NEE_RETURN_IF_ERROR(Define(s.name, TypeInfo::Tensor(s.values.dtype(), ShapeFromDims(s.dims)), "sparse initializer"));
    }
    return Status::Ok();
  }

  Status ResolveNodes() {
    size_t n = g_.nodes.size();
    out_.schemas.resize(n);
    out_.opsets.resize(n);
    decls_.assign(n, nullptr);
    out_.implicit_inputs.resize(n);
    std::unordered_set<std::string> node_outputs;
    for (size_t i = 0; i < n; ++i) {
      const Node& node = g_.nodes[i];
      Status resolved = ResolveNode(i);
      if (!resolved.ok()) NEE_RETURN_IF_ERROR(NodeProblem(i, std::move(resolved)));
      for (const std::string& o : node.outputs) {
        if (o.empty()) continue;
        // The first definition stands; a later one is the problem.
        if (out_.types.count(o) || !node_outputs.insert(o).second)
          NEE_RETURN_IF_ERROR(NodeProblem(i, InvalidModel(node.Describe() + ": output '" + o + "' is defined more than once")));
      }
      std::unordered_set<std::string> seen;
      for (const Graph* body : BodiesOf(node)) CollectCaptured(*body, {}, out_.implicit_inputs[i], seen);
    }
    return Status::Ok();
  }

  // The node's schema entry at the model's opset, and its arity against it.
  Status ResolveNode(size_t i) {
    const Node& node = g_.nodes[i];
    std::string domain = NormalizeDomain(node.domain);
    auto it = opsets_.find(domain);
    if (it == opsets_.end())
      return InvalidModel(node.Describe() + ": the model imports no opset for domain '" + node.domain + "'");
    out_.opsets[i] = it->second;
    if (options_.local_functions && options_.local_functions->FindFunction(node.domain, node.op_type)) return Status::Ok();
    auto schema = registry_.Resolve(domain, node.op_type, it->second);
    if (!schema.ok()) return schema.status().WithContext(node.Describe() + ": ");
    const OpSchema* s = schema.value();
    out_.schemas[i] = s;
    // A custom op's attributes and types are its library's business.
    const AttrSchema* decl = s->custom ? nullptr : FindAttrSchema(domain, node.op_type, it->second);
    decls_[i] = decl;
    // The arity is the declaration's where there is one (the registry states
    // none for such ops), the registry entry's counts otherwise (custom ops).
    if (!decl && ArityDeclared(*s))
      return NotImplemented(node.Describe() + ": nee registers " + node.op_type + " at opset " +
                            std::to_string(it->second) + " without a declaration to take its arity from");
    const int least_inputs = decl ? DeclaredArity(decl->inputs).first : s->min_inputs;
    using Option = FormalParam::Option;
    if (decl) {
      NEE_RETURN_IF_ERROR(CheckDeclaredArity(node, *decl));
    } else {
      int n_in = static_cast<int>(node.inputs.size());
      int n_out = static_cast<int>(node.outputs.size());
      if (n_in < s->min_inputs || n_in > s->max_inputs)
        return InvalidModel(node.Describe() + ": has " + std::to_string(n_in) + " inputs, opset " +
                            std::to_string(it->second) + " allows " + ArityText(s->min_inputs, s->max_inputs));
      if (n_out < s->min_outputs || n_out > s->max_outputs)
        return InvalidModel(node.Describe() + ": has " + std::to_string(n_out) + " outputs, opset " +
                            std::to_string(it->second) + " allows " + ArityText(s->min_outputs, s->max_outputs));
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      // A required input may not be omitted: one the declaration marks single,
      // one of a variadic formal's least arity, or, for an undeclared op, one
      // before the registry's least count.
      const FormalParam* formal = decl ? decl->InputFormal(k) : nullptr;
      const bool required = formal ? formal->option == Option::kSingle ||
                                         (formal->option == Option::kVariadic && static_cast<int>(k) < least_inputs)
                                   : static_cast<int>(k) < least_inputs;
      if (node.inputs[k].empty() && required)
        return InvalidModel(node.Describe() + ": required input " + std::to_string(k) +
                            (formal ? " ('" + formal->name + "')" : "") + " is empty");
    }
    return CheckAttributes(node, decl);
  }

  // The node's attributes against the op version's declaration, refusing
  // what onnx.checker refuses (and ONNX Runtime, which runs it): an undeclared
  // attribute (unless named "__...", which onnx reserves for internal use), a
  // declared one of another type, a required one missing, one given twice. An
  // op nee has no declaration for (a schema-less since-version) is not checked.
  static Status CheckAttributes(const Node& node, const AttrSchema* spec) {
    if (!spec) return Status::Ok();
    for (size_t k = 0; k < node.attributes.size(); ++k) {
      const Attribute& a = node.attributes[k];
      if (a.name.empty()) return InvalidModel(node.Describe() + ": an attribute has an empty name");
      for (size_t j = 0; j < k; ++j)
        if (node.attributes[j].name == a.name)
          return InvalidModel(node.Describe() + ": attribute '" + a.name + "' is given more than once");
      const AttrDecl* decl = spec->Find(a.name);
      if (!decl) {
        if (spec->accepts_undeclared || a.name.rfind("__", 0) == 0) continue;
        std::string declared;
        for (const AttrDecl& d : spec->attrs) declared += (declared.empty() ? "" : ", ") + d.name;
        return InvalidModel(node.Describe() + ": unknown attribute '" + a.name + "' (" + spec->Label() +
                            (declared.empty() ? " has no attributes)" : " has " + declared + ")"));
      }
      if (a.type != decl->type)
        return InvalidModel(node.Describe() + ": attribute '" + a.name + "' must be " +
                            AttrTypeSpecName(decl->type) + ", got " + AttrTypeSpecName(a.type) + " (" +
                            spec->Label() + ")");
    }
    for (const AttrDecl& decl : spec->attrs)
      if (decl.required && !node.HasAttr(decl.name))
        return InvalidModel(node.Describe() + ": required attribute '" + decl.name + "' (" +
                            AttrTypeSpecName(decl.type) + ") is missing (" + spec->Label() + ")");
    return Status::Ok();
  }

  // The counts of inputs and outputs the declaration allows, as onnx's
  // OpSchema::Verify (which ONNX Runtime runs on every node) checks them: a
  // single formal makes every formal before it positional, a variadic one
  // adds its least arity and lifts the bound. One registry entry may cover
  // versions whose arity differs (Clip-6 takes only its input, Clip-11 min and
  // max too); the declaration holds each version's.
  static std::pair<int, int> DeclaredArity(const std::vector<FormalParam>& formals) {
    int least = 0, most = 0;
    for (const FormalParam& f : formals) {
      if (f.option == FormalParam::Option::kSingle) {
        least = ++most;
      } else if (f.option == FormalParam::Option::kOptional) {
        ++most;
      } else {
        least = most + f.min_arity;
        most = kVariadic;
      }
    }
    return {least, most};
  }

  static Status CheckDeclaredArity(const Node& node, const AttrSchema& decl) {
    const struct {
      const char* what;
      int count;
      const std::vector<FormalParam>& formals;
    } sides[] = {{"inputs", static_cast<int>(node.inputs.size()), decl.inputs},
                 {"outputs", static_cast<int>(node.outputs.size()), decl.outputs}};
    for (const auto& side : sides) {
      const auto [least, most] = DeclaredArity(side.formals);
      if (side.count < least || side.count > most)
        return InvalidModel(node.Describe() + ": has " + std::to_string(side.count) + " " + side.what + ", " +
                            decl.Label() + " allows " + ArityText(least, most) + " (" + FormalsText(side.formals) +
                            ")");
    }
    return Status::Ok();
  }

  // "X, W, B?" / "inputs...": a declaration's formals as arity errors list them.
  static std::string FormalsText(const std::vector<FormalParam>& formals) {
    std::string text;
    for (const FormalParam& f : formals)
      text += (text.empty() ? "" : ", ") + f.name +
              (f.option == FormalParam::Option::kOptional ? "?"
               : f.option == FormalParam::Option::kVariadic ? "..." : "");
    return text;
  }

  static std::string ArityText(int lo, int hi) {
    if (hi >= kVariadic) return std::to_string(lo) + " or more";
    if (lo == hi) return std::to_string(lo);
    return std::to_string(lo) + " to " + std::to_string(hi);
  }

  bool DefinedOutside(const std::string& name) const {
    return out_.types.count(name) || (outer_ && outer_->Find(name));
  }

  // Kahn's algorithm; also reports undefined inputs and cycles.
  Status TopologicalOrder() {
    size_t n = g_.nodes.size();
    std::unordered_map<std::string, size_t> producer;
    for (size_t i = 0; i < n; ++i)
      for (const std::string& o : g_.nodes[i].outputs)
        if (!o.empty()) producer[o] = i;
    std::vector<std::vector<size_t>> consumers(n);
    std::vector<size_t> pending(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const Node& node = g_.nodes[i];
      std::vector<std::string> reads;
      for (const std::string& in : node.inputs)
        if (!in.empty()) reads.push_back(in);
      for (const std::string& c : out_.implicit_inputs[i]) reads.push_back(c);
      std::unordered_set<size_t> deps;
      for (const std::string& name : reads) {
        auto p = producer.find(name);
        if (p != producer.end()) {
          if (deps.insert(p->second).second) {
            consumers[p->second].push_back(i);
            ++pending[i];
          }
        } else if (!DefinedOutside(name)) {
          NEE_RETURN_IF_ERROR(NodeProblem(i, InvalidModel(node.Describe() + ": input '" + name +
                                                          "' is not defined by any node, input or initializer of " +
                                                          GraphLabel(g_) + (depth_ > 0 ? " or an enclosing graph" : ""))));
        }
      }
    }
    std::deque<size_t> ready;
    for (size_t i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push_back(i);
    while (!ready.empty()) {
      size_t i = ready.front();
      ready.pop_front();
      out_.order.push_back(i);
      for (size_t c : consumers[i])
        if (--pending[c] == 0) ready.push_back(c);
    }
    if (out_.order.size() != n) {
      // One problem for the cycle; nodes on it, and after it, get no types.
      for (size_t i = 0; i < n; ++i)
        if (pending[i] > 0) {
          NEE_RETURN_IF_ERROR(Problem(InvalidModel(GraphLabel(g_) + " has a cycle: " + g_.nodes[i].Describe() +
                                                   " depends (directly or not) on its own output")));
          break;
        }
      for (size_t i = 0; i < n; ++i)
        if (pending[i] > 0) SkipNode(i);
    }
    return Status::Ok();
  }

  const TypeInfo* TypeOf(const std::string& name) const {
    auto it = out_.types.find(name);
    if (it != out_.types.end()) return &it->second;
    return outer_ ? outer_->Find(name) : nullptr;
  }

  const Tensor* ValueOf(const std::string& name) const {
    auto it = out_.constants.find(name);
    if (it != out_.constants.end()) return &it->second;
    for (const TypeScope* s = outer_; s; s = s->parent) {
      if (s->constants) {
        auto jt = s->constants->find(name);
        if (jt != s->constants->end()) return &jt->second;
      }
      if (s->types && s->types->count(name)) return nullptr;  // shadowed by a non-constant
    }
    return nullptr;
  }

  Status InferNode(size_t idx) {
    const Node& node = g_.nodes[idx];
    const OpSchema* schema = out_.schemas[idx];
    InferenceContext ctx{node, out_.opsets[idx], {}, {}, {}, {}, nullptr};
    ctx.schema = schema;
    for (const std::string& in : node.inputs) {
      ctx.input_types.push_back(in.empty() ? nullptr : TypeOf(in));
      ctx.input_values.push_back(in.empty() ? nullptr : ValueOf(in));
    }
    ctx.output_types.resize(node.outputs.size());
    ctx.output_values.resize(node.outputs.size());

    std::unordered_set<const Graph*> inferred_bodies;
    TypeScope scope{outer_, &out_.types, &out_.constants};
    ctx.infer_subgraph = [&](const Graph& body, const std::vector<TypeInfo>& input_types)
        -> Result<std::vector<TypeInfo>> {
      inferred_bodies.insert(&body);
      CheckOptions sub = options_;
      sub.input_types = input_types.size() == body.inputs.size() ? &input_types : nullptr;
      sub.problems = nullptr;
      NEE_ASSIGN_OR_RETURN(CheckedGraph checked,
                           GraphChecker(body, opsets_, registry_, &scope, sub, depth_ + 1).Run());
      body_captured_[&body] = checked.captured;  // (also: this body was checked in full)
      std::vector<TypeInfo> outs;
      for (const ValueInfo& vi : body.outputs) {
        auto it = checked.types.find(vi.name);
        outs.push_back(it != checked.types.end() ? it->second : vi.type);
      }
      return outs;
    };
    // Input types against the declaration's type constraints, before the
    // rule, whose own type checks then only meet what the spec allows.
    if (decls_[idx]) NEE_RETURN_IF_ERROR(CheckInputTypes(node, *decls_[idx], ctx.input_types));
    if (schema->infer) NEE_RETURN_IF_ERROR(schema->infer(ctx));
    // A rule may forgive a body's type errors (If with an unknown condition:
    // the branch that fails may be the one never taken), but not what is wrong
    // whatever the types: an unknown op in either branch fails, as in onnx's
    // checker and ONNX Runtime.
    for (const Graph* body : inferred_bodies) {
      // A body checked in full above passed the structure checks on the way
      // (checking them again at every level of nesting made checking nested
      // bodies cost their size times their depth).
      if (body_captured_.count(body)) continue;
      CheckOptions sub = options_;
      sub.input_types = nullptr;
      sub.problems = nullptr;
      Status structure = GraphChecker(*body, opsets_, registry_, &scope, sub, depth_ + 1).CheckStructure();
      if (!structure.ok()) return structure.WithContext(node.Describe() + ": in subgraph '" + body->name + "': ");
    }
    // Bodies the rule did not look at are still validated, with their declared input types.
    for (const Attribute& a : node.attributes) {
      for (const Graph* body : BodiesOf(a)) {
        if (inferred_bodies.count(body)) continue;
        CheckOptions sub = options_;
        sub.input_types = nullptr;
        sub.problems = nullptr;
        auto checked = GraphChecker(*body, opsets_, registry_, &scope, sub, depth_ + 1).Run();
        if (!checked.ok()) return checked.status().WithContext(node.Describe() + ": attribute '" + a.name + "': ");
      }
    }
    if (decls_[idx] && OutputTypeAuditOn()) AuditOutputTypes(*decls_[idx], ctx.input_types, ctx.output_types);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const std::string& name = node.outputs[k];
      if (name.empty()) continue;
      TypeInfo t = std::move(ctx.output_types[k]);
      if (const TypeInfo* declared = DeclaredType(name)) NEE_RETURN_IF_ERROR(MergeDeclared(node, name, *declared, t));
      out_.types[name] = std::move(t);
      if (ctx.output_values[k] && ctx.output_values[k]->num_elements() <= kMaxPropagatedElements)
        out_.constants[name] = *ctx.output_values[k];
    }
    return Status::Ok();
  }

  const TypeInfo* DeclaredType(const std::string& name) const {
    auto it = declared_.find(name);
    return it == declared_.end() ? nullptr : it->second;
  }

  Status CheckOutputs() {
    if (g_.outputs.empty() && depth_ == 0) NEE_RETURN_IF_ERROR(Problem(InvalidModel(GraphLabel(g_) + " has no outputs")));
    for (const ValueInfo& vi : g_.outputs) {
      if (!TypeOf(vi.name) && !failed_values_.count(vi.name))
        NEE_RETURN_IF_ERROR(Problem(InvalidModel(GraphLabel(g_) + ": output '" + vi.name +
                                                 "' is not produced by any node, input or initializer")));
    }
    std::unordered_set<std::string> seen;
    std::vector<std::string> captured;
    CollectCaptured(g_, {}, captured, seen, &body_captured_);
    out_.captured = std::move(captured);
    return Status::Ok();
  }

  // Names each body checked in full captures (its CheckedGraph's), so that
  // this graph's own list does not walk the nested bodies again.
  CapturedByBody body_captured_;
  const Graph& g_;
  const OpsetMap& opsets_;
  const OpRegistry& registry_;
  const TypeScope* outer_;
  const CheckOptions& options_;
  int depth_;
  CheckedGraph out_;
  std::unordered_map<std::string, const TypeInfo*> declared_;
  // Per node: its op version's declaration (attributes, formals, type
  // constraints); null for custom ops, local functions and undeclared ops.
  std::vector<const AttrSchema*> decls_;
  // Per node: it has a problem (recorded, not returned: CheckOptions::problems).
  std::vector<bool> failed_;
  // Values defined by failed nodes, or by nodes skipped because they read one.
  std::unordered_set<std::string> failed_values_;
};
}  // namespace

namespace {
// The newest opset nee implements, per domain it knows. A model importing a
// newer opset is refused at load, as ONNX Runtime refuses it, instead of being
// run under rules nee never saw: a newer opset may change what an op does
// without renaming it.
//
// An explicit table rather than the registry's highest since-version: an
// opset is a version of a whole domain, and most opsets change only a few ops.
// The registry's maximum says when an op nee implements last changed, not
// which opset nee was checked against; an opset that changed only ops nee
// lacks would be refused although nee runs it as written, and registering one
// op of a new opset would silently admit every other change in it. So the
// table names the release nee follows (onnx 1.23.2: ai.onnx 28 is
// onnx.defs.onnx_opset_version(), ai.onnx.ml 5, the preview domains 1;
// com.microsoft 1, the only version ONNX Runtime defines), and checker_test
// ties it to the registry: every registered domain is listed and no
// since-version exceeds its entry, so adopting a newer opset is a deliberate
// bump here. Domains not listed (custom ones) are not limited: their nodes
// fail as unknown ops if nee lacks them.
struct DomainOpset {
  const char* domain;  // normalized: "" for ai.onnx
  int64_t newest;
};
constexpr DomainOpset kNewestOpsets[] = {
    {"", 28},
    {"ai.onnx.ml", 5},
    {"ai.onnx.preview", 1},
    {"ai.onnx.preview.training", 1},
    {"com.microsoft", 1},
    {"ai.nee", 1},  // nee's fused ops (ops/attention_fused.cc), written by the optimizer
};
}  // namespace

int64_t NewestSupportedOpset(const std::string& domain) {
  std::string d = NormalizeDomain(domain);
  for (const DomainOpset& e : kNewestOpsets)
    if (d == e.domain) return e.newest;
  return -1;
}

OpsetMap OpsetsOf(const std::vector<OpsetImport>& imports) {
  OpsetMap m;
  for (const OpsetImport& o : imports) m[NormalizeDomain(o.domain)] = o.version;
  return m;
}

const TypeInfo* TypeScope::Find(const std::string& name) const {
  for (const TypeScope* s = this; s; s = s->parent) {
    if (!s->types) continue;
    auto it = s->types->find(name);
    if (it != s->types->end()) return &it->second;
  }
  return nullptr;
}

Result<CheckedGraph> CheckGraph(const Graph& graph, const OpsetMap& opsets, const OpRegistry& registry,
                                const TypeScope* outer, const CheckOptions& options, int depth) {
  return GraphChecker(graph, opsets, registry, outer, options, depth).Run();
}

namespace {
// A model-local function's body on its own, as onnx.checker checks every
// function whether or not a node calls it (a called one is also checked where
// it is inlined): what CheckStructure refuses whatever the types (an op
// unknown at the function's opsets, arity, attributes against their
// declarations, SSA, order, undefined names). Calls to other model-local
// functions are left unresolved (each callee is checked on its own; expanding
// them here would repeat the session's bounded inlining once per function);
// the function's opset imports rule, the model's fill in domains it does not
// import.
Status CheckFunctionBody(const Model& model, const Function& fn, const OpRegistry& registry) {
  // A domain both import at different versions: each op of it in the body must
  // be the same version of the op at both (onnx.checker's compatibility rule).
  for (const Node& node : fn.nodes) {
    const std::string domain = NormalizeDomain(node.domain);
    int64_t in_function = -1;
    for (const OpsetImport& o : fn.opset_imports)
      if (NormalizeDomain(o.domain) == domain) in_function = o.version;
    const int64_t in_model = model.OpsetVersion(domain);
    if (in_function < 0 || in_model < 0 || in_function == in_model) continue;
    Result<const OpSchema*> at_function = registry.Resolve(domain, node.op_type, in_function);
    Result<const OpSchema*> at_model = registry.Resolve(domain, node.op_type, in_model);
    if (at_function.ok() && at_model.ok() && at_function.value()->since_version != at_model.value()->since_version)
      return InvalidModel(node.Describe() + ": the function imports opset " + std::to_string(in_function) +
                          " of domain '" + (domain.empty() ? "ai.onnx" : domain) + "' and the model " +
                          std::to_string(in_model) + ", at which " + node.op_type + " differs (version " +
                          std::to_string(at_function.value()->since_version) + " against " +
                          std::to_string(at_model.value()->since_version) + ")");
  }
  Model body;
  body.ir_version = model.ir_version;
  body.opset_imports = fn.opset_imports;
  for (const OpsetImport& o : model.opset_imports)
    if (body.OpsetVersion(o.domain) < 0) body.opset_imports.push_back(o);
  body.graph.name = fn.name;
  for (const std::string& in : fn.inputs) body.graph.inputs.push_back({in, TypeInfo{}, "", {}});
  for (const std::string& out : fn.outputs) body.graph.outputs.push_back({out, TypeInfo{}, "", {}});
  body.graph.nodes = fn.nodes;
  CheckOptions options;
  options.local_functions = &model;
  return GraphChecker(body.graph, OpsetsOf(body.opset_imports), registry, nullptr, options, 0).CheckStructure();
}
}  // namespace

Status CheckModelFunctions(const Model& model, const OpRegistry& registry, std::vector<Status>* problems) {
  for (const Function& fn : model.functions) {
    Status body = CheckFunctionBody(model, fn, registry);
    if (body.ok()) continue;
    body = body.WithContext("model-local function '" + fn.domain + "." + fn.name + "': ");
    if (!problems) return body;
    problems->push_back(std::move(body));
  }
  return Status::Ok();
}

Result<CheckedGraph> CheckModel(const Model& model, const OpRegistry& registry, const CheckOptions& options) {
  // Fails fast, or records the problem and goes on (CheckOptions::problems).
  auto problem = [&](Status s) {
    if (!options.problems) return s;
    options.problems->push_back(std::move(s));
    return Status::Ok();
  };
  if (model.ir_version < 3)
    NEE_RETURN_IF_ERROR(problem(InvalidModel("model ir_version " + std::to_string(model.ir_version) +
                                             " is not supported (need 3 or newer)")));
  if (model.opset_imports.empty()) NEE_RETURN_IF_ERROR(problem(InvalidModel("model has no opset_import")));
  for (const OpsetImport& o : model.opset_imports)
    if (o.version <= 0)
      NEE_RETURN_IF_ERROR(problem(InvalidModel("opset_import for domain '" + o.domain + "' has invalid version " +
                                               std::to_string(o.version))));
  for (const OpsetImport& o : model.opset_imports) {
    int64_t newest = NewestSupportedOpset(o.domain);
    if (newest > 0 && o.version > newest) {
      std::string domain = NormalizeDomain(o.domain).empty() ? "ai.onnx" : o.domain;
      NEE_RETURN_IF_ERROR(problem(NotImplemented(
          "the model imports opset " + std::to_string(o.version) + " of domain '" + domain +
          "', newer than the newest nee supports (" + std::to_string(newest) +
          "); convert or re-export the model to opset " + std::to_string(newest) + " or older, or use a newer nee")));
    }
  }
  return CheckGraph(model.graph, OpsetsOf(model.opset_imports), registry, nullptr, options);
}

std::vector<const Graph*> BodiesOf(const Attribute& attribute) {
  std::vector<const Graph*> bodies;
  if (attribute.g) bodies.push_back(attribute.g.get());
  for (const auto& g : attribute.graphs)
    if (g) bodies.push_back(g.get());
  return bodies;
}

std::vector<const Graph*> BodiesOf(const Node& node) {
  std::vector<const Graph*> bodies;
  for (const Attribute& a : node.attributes)
    for (const Graph* body : BodiesOf(a)) bodies.push_back(body);
  return bodies;
}

std::vector<std::string> CapturedNames(const Graph& graph) {
  std::vector<std::string> captured;
  std::unordered_set<std::string> seen;
  CollectCaptured(graph, {}, captured, seen);
  return captured;
}

}  // namespace nee
