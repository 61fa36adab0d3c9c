// What an operator version declares: its attributes (each one's name, type,
// whether it is required and the spec's default value), its formal inputs and
// outputs (name, type or type-constraint letter, single / optional / variadic)
// and its type constraints (each letter's allowed types). The declarations
// themselves are ops/'s (ops/attr_spec.h: FindAttrSchema, generated from the
// ONNX and ONNX Runtime schemas); this header holds their shape so that a
// Node (ir/graph.h) can point at the one in force for it, and Node::Get*
// return the declared default for an attribute the node does not carry.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace nee {

struct AttrDecl {
  std::string name;
  AttrType type;
  bool required;
  // The spec's default (onnx OpSchema's default_value, ONNX Runtime's for
  // com.microsoft): a value of `type` (int, float, string or a list of them)
  // in the matching field of `default_value`, whose name is this one's.
  bool has_default = false;
  Attribute default_value;
};

// One formal input or output, as onnx's OpSchema.FormalParameter.
struct FormalParam {
  enum class Option { kSingle, kOptional, kVariadic };
  std::string name;
  // A type-constraint letter of the schema ("T") or a type ("tensor(int64)"),
  // spelt as TypeInfo::ToString spells types.
  std::string type;
  Option option = Option::kSingle;
  // Variadic only: every value has one type (false: Loop's v_initial, whose
  // values may each be of any allowed type), and at least this many values.
  bool homogeneous = true;
  int min_arity = 1;
};

// A type-constraint letter and the types it may stand for ("tensor(float)",
// "seq(tensor(int64))", ...); `allowed` points into a table shared by every
// declaration and lives as long as the program.
struct TypeConstraint {
  std::string letter;
  const std::vector<std::string>* allowed;
};

struct AttrSchema {
  std::string domain;  // normalized: "" for ai.onnx
  std::string op;
  int since_version;
  // onnx.checker lets undeclared attributes through (LayerNormalization-17).
  bool accepts_undeclared;
  std::vector<AttrDecl> attrs;
  std::vector<FormalParam> inputs;
  std::vector<FormalParam> outputs;
  std::vector<TypeConstraint> constraints;

  const AttrDecl* Find(const std::string& name) const;
  // The constraint named `letter`; null when `letter` is none (a formal of a
  // fixed type, "tensor(int64)").
  const TypeConstraint* FindConstraint(const std::string& letter) const;
  // The formal input that node input `index` binds to (the last, variadic one
  // for every index past it); null past the declared inputs.
  const FormalParam* InputFormal(size_t index) const;
  // The same for node output `index`.
  const FormalParam* OutputFormal(size_t index) const;
  // "Relu-14", "com.microsoft.FusedConv-1".
  std::string Label() const;
};

// The audit that keeps kernels' fallbacks equal to the declarations (a test
// hook, off unless a test turns it on): while on, every Node::Get* that
// answers for an absent attribute with a declared default which differs from
// the fallback the caller passed (or for which the caller passed none, i.e.
// treats the attribute as required) records one line, "Op-since attr:
// declared X, reader's fallback Y", once per distinct line.
void SetAttrDefaultAudit(bool on);
// The lines recorded since the last call, sorted; clears them.
std::vector<std::string> TakeAttrDefaultMismatches();

}  // namespace nee
