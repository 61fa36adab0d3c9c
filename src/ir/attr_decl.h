// What an operator version declares about its attributes: each one's name,
// type, whether it is required and the spec's default value. The declarations
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

struct AttrSchema {
  std::string domain;  // normalized: "" for ai.onnx
  std::string op;
  int since_version;
  // onnx.checker lets undeclared attributes through (LayerNormalization-17).
  bool accepts_undeclared;
  std::vector<AttrDecl> attrs;

  const AttrDecl* Find(const std::string& name) const;
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
