// Opset conversion (`nee convert MODEL --opset N -o OUT`): rewrites a model's
// default-domain (ai.onnx) nodes from the opset it imports to another one,
// upgrading or, where the spec allows, downgrading.
//
// Every operator's version history comes from opset_spec.inc (generated from
// the ONNX spec by scripts/gen_opset_spec.py): for each since-version, what
// changed against the version before (attributes added, removed or given a
// new default, inputs and outputs, element types). Crossing a version step is
// either
//   - an adapter (opset_adapters.cc), one short function per (op, step) and
//     direction for the steps that change semantics or signature (attributes
//     that became inputs, Softmax's axis semantics, Upsample -> Resize,
//     decompositions of ops the target lacks, ...), or
//   - the generic rule, for steps the table shows as compatible: a newly
//     added attribute or optional input is allowed going up and must be
//     absent (or at its default) going down; a changed default is written out
//     explicitly; element types added by the step must not be used going down;
//     a negative axis (allowed from opset 11) is normalized going below 11.
// Steps whose semantics change invisibly to the table are listed in
// opset_adapters.cc and never restamped without an adapter. When a node
// cannot be converted the error names the node, the op and both versions and
// nothing is written. Other domains (ai.onnx.ml, com.microsoft, ...) are left
// as they are; If/Loop/Scan bodies and model-local functions are converted too.
#pragma once
#include <cstdint>
#include <string>

#include "base/status.h"
#include "ir/graph.h"

namespace nee {

// The lowest default-domain opset nee converts to or from.
constexpr int64_t kOldestConvertibleOpset = 7;

struct OpsetConversionReport {
  int64_t from = 0, to = 0;
  size_t nodes = 0;        // default-domain nodes visited (all graphs and functions)
  size_t adapted = 0;      // nodes an adapter rewrote
  size_t added_nodes = 0;  // nodes adapters added (constants, decompositions)
  std::string Text() const;
};

// Converts `model` in place to default-domain opset `target`. On error the
// model is left in an unspecified state (callers convert a copy).
Result<OpsetConversionReport> ConvertModelOpset(Model& model, int64_t target);

// Reads `in_path`, converts it, checks the result with nee's checker at the
// new opset, appends a lineage record ("convert", {"from_opset", "to_opset"})
// and writes `out_path`. Writes nothing on error.
Result<OpsetConversionReport> ConvertOpsetFile(const std::string& in_path, const std::string& out_path,
                                               int64_t target);

}  // namespace nee
