// A node's input types against its op version's declaration (ops/attr_spec.h:
// each formal input's type or type-constraint letter, and the types each
// letter allows), as ONNX Runtime checks them when it resolves a graph and
// onnx.checker with full_check: an input whose type is not allowed for its
// formal, or two inputs bound to one letter with different types, makes the
// model invalid.
#pragma once
#include <string>
#include <vector>

#include "base/status.h"
#include "ir/attr_decl.h"
#include "ir/graph.h"
#include "ir/type_info.h"

namespace nee {

// Checks the inputs whose types are fully known (element types included);
// omitted optional inputs (null) and partly known types are skipped, so an
// input whose type inference could not settle is never refused. The error
// names the node, the input's position and formal name, its type and the
// types allowed: "node 'n' (Relu): input 0 ('X') has type tensor(int64);
// Relu-14 allows T in tensor(float), tensor(double), ...".
Status CheckInputTypes(const Node& node, const AttrSchema& decl, const std::vector<const TypeInfo*>& input_types);

// The audit of shape rules against the declarations (a test hook, off unless
// a test turns it on; tests/python/test_type_constraints.py runs every ONNX
// node test with it): while on, the checker passes each node's inferred output
// types here, and every fully known one its formal does not allow, or that
// differs from what its letter is bound to by the inputs or an earlier output,
// records one line, "Op-since output k ('name'): ...", once per distinct line.
void SetOutputTypeAudit(bool on);
bool OutputTypeAuditOn();
void AuditOutputTypes(const AttrSchema& decl, const std::vector<const TypeInfo*>& input_types,
                      const std::vector<TypeInfo>& output_types);
// The lines recorded since the last call, sorted; clears them.
std::vector<std::string> TakeOutputTypeMismatches();

// Whether a type is known down to every element type (what CheckInputTypes
// compares; "seq(?)" or "tensor(undefined)" are not).
bool TypeFullyKnown(const TypeInfo& type);

}  // namespace nee
