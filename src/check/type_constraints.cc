#include "check/type_constraints.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <string>

namespace nee {

bool TypeFullyKnown(const TypeInfo& type) {
  switch (type.kind) {
    case TypeInfo::Kind::kTensor:
    case TypeInfo::Kind::kSparseTensor: return type.elem_type != DataType::kUndefined;
    case TypeInfo::Kind::kSequence:
    case TypeInfo::Kind::kOptional: return type.inner && TypeFullyKnown(*type.inner);
    case TypeInfo::Kind::kMap:
      return type.elem_type != DataType::kUndefined && type.inner && TypeFullyKnown(*type.inner);
    case TypeInfo::Kind::kUnknown: break;
  }
  return false;
}

namespace {
std::string Join(const std::vector<std::string>& types) {
  std::string text;
  for (const std::string& t : types) text += (text.empty() ? "" : ", ") + t;
  return text;
}

std::string InputLabel(size_t index, const FormalParam& formal) {
  return "input " + std::to_string(index) + " ('" + formal.name + "')";
}

// Whether `type` is among `allowed`, or stands for an allowed optional: a
// session fed a sequence for an input declared optional(seq(...)) (as ONNX
// Runtime accepts) types the graph input, and what reads it, by the value
// fed, and an optional holding a value is that value.
bool Allowed(const std::vector<std::string>& allowed, const std::string& type) {
  return std::find(allowed.begin(), allowed.end(), type) != allowed.end() ||
         std::find(allowed.begin(), allowed.end(), "optional(" + type + ")") != allowed.end();
}

// A letter's first binding: which input bound it, to which type.
struct Binding {
  const std::string* letter;
  size_t input;
  std::string type;
};
}  // namespace

Status CheckInputTypes(const Node& node, const AttrSchema& decl, const std::vector<const TypeInfo*>& input_types) {
  std::vector<Binding> bound;
  for (size_t i = 0; i < input_types.size(); ++i) {
    const FormalParam* formal = decl.InputFormal(i);
    if (!formal || !input_types[i] || !TypeFullyKnown(*input_types[i])) continue;
    const std::string type = input_types[i]->ToString();
    const TypeConstraint* constraint = decl.FindConstraint(formal->type);
    if (!constraint) {  // a formal of one fixed type ("tensor(int64)")
      if (!Allowed({formal->type}, type))
        return InvalidModel(node.Describe() + ": " + InputLabel(i, *formal) + " has type " + type + "; " +
                            decl.Label() + " takes " + formal->type);
      continue;
    }
    const std::vector<std::string>& allowed = *constraint->allowed;
    if (!Allowed(allowed, type))
      return InvalidModel(node.Describe() + ": " + InputLabel(i, *formal) + " has type " + type + "; " +
                          decl.Label() + " allows " + constraint->letter + " in " + Join(allowed));
    // A heterogeneous variadic formal (Loop's v_initial) binds no type: each
    // of its values may be any allowed one.
    if (formal->option == FormalParam::Option::kVariadic && !formal->homogeneous) continue;
    auto it = std::find_if(bound.begin(), bound.end(), [&](const Binding& b) { return *b.letter == constraint->letter; });
    if (it == bound.end()) {
      bound.push_back({&constraint->letter, i, type});
    } else if (it->type != type) {
      const FormalParam& first = *decl.InputFormal(it->input);
      return InvalidModel(node.Describe() + ": " + InputLabel(i, *formal) + " has type " + type + " but " +
                          InputLabel(it->input, first) + " has " + it->type + "; " + decl.Label() +
                          " binds both to " + constraint->letter + ", one type");
    }
  }
  return Status::Ok();
}

namespace {
std::atomic<bool> g_output_audit{false};
std::mutex g_output_audit_mu;
std::set<std::string>& OutputAuditLines() {
  static auto* lines = new std::set<std::string>();
  return *lines;
}

const FormalParam* FormalAt(const std::vector<FormalParam>& formals, size_t index) {
  if (index < formals.size()) return &formals[index];
  if (!formals.empty() && formals.back().option == FormalParam::Option::kVariadic) return &formals.back();
  return nullptr;
}

bool Binds(const FormalParam& f) { return f.option != FormalParam::Option::kVariadic || f.homogeneous; }
}  // namespace

void SetOutputTypeAudit(bool on) { g_output_audit.store(on, std::memory_order_relaxed); }
bool OutputTypeAuditOn() { return g_output_audit.load(std::memory_order_relaxed); }

void AuditOutputTypes(const AttrSchema& decl, const std::vector<const TypeInfo*>& input_types,
                      const std::vector<TypeInfo>& output_types) {
  std::vector<std::pair<std::string, std::string>> bound;  // letter -> type, from the inputs first
  auto binding = [&](const std::string& letter) -> std::string* {
    for (auto& [l, t] : bound)
      if (l == letter) return &t;
    return nullptr;
  };
  for (size_t i = 0; i < input_types.size(); ++i) {
    const FormalParam* f = FormalAt(decl.inputs, i);
    if (!f || !input_types[i] || !TypeFullyKnown(*input_types[i]) || !Binds(*f) || !decl.FindConstraint(f->type))
      continue;
    if (!binding(f->type)) bound.emplace_back(f->type, input_types[i]->ToString());
  }
  for (size_t k = 0; k < output_types.size(); ++k) {
    const FormalParam* f = FormalAt(decl.outputs, k);
    if (!f || !TypeFullyKnown(output_types[k])) continue;
    const std::string type = output_types[k].ToString();
    const TypeConstraint* c = decl.FindConstraint(f->type);
    std::string problem;
    if (!Allowed(c ? *c->allowed : std::vector<std::string>{f->type}, type)) {
      problem = "type " + type + " is not allowed for " + f->type;
    } else if (c && Binds(*f)) {
      if (const std::string* b = binding(f->type)) {
        if (*b != type) problem = "type " + type + ", but " + f->type + " is bound to " + *b;
      } else {
        bound.emplace_back(f->type, type);
      }
    }
    if (problem.empty()) continue;
    std::lock_guard<std::mutex> lock(g_output_audit_mu);
    OutputAuditLines().insert(decl.Label() + " output " + std::to_string(k) + " ('" + f->name + "'): " + problem);
  }
}

std::vector<std::string> TakeOutputTypeMismatches() {
  std::lock_guard<std::mutex> lock(g_output_audit_mu);
  std::vector<std::string> lines(OutputAuditLines().begin(), OutputAuditLines().end());
  OutputAuditLines().clear();
  return lines;
}

}  // namespace nee
