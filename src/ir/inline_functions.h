// Expands calls to model-local functions (FunctionProto) into their bodies,
// so that every later stage sees only operators. Function bodies are the
// decomposition of record: expanding them is always correct.
#pragma once
#include "ir/graph.h"

namespace nee {

// Replaces each node that calls a model-local function, in the main graph
// and all subgraphs, by the function's nodes with fresh value names and the
// caller's attributes substituted for `ref_attr_name` references. Fails once
// the expansions would add more than `max_nodes` nodes (<= 0: 2^26).
Status InlineModelFunctions(Model& model, int64_t max_nodes = 1'000'000);

}  // namespace nee
