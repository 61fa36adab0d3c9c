// The passes that turn a detector head's decode into ai.nee TransposeColumnMap
// (ops/column_map.h); registered in pass_manager.cc's list.
#pragma once
#include "check/checker.h"
#include "ir/graph.h"

namespace nee {

// An activation reading a Conv through Reshape/Transpose-like moves applied
// before them, for fuse-conv-activation (src/opt/hoist_activation.cc).
Status HoistActivationToConv(Graph& graph, const CheckedGraph& checked, bool* changed);
// A last-axis Concat of column ranges of a Transpose's output, through
// elementwise chains, into ai.nee TransposeColumnMap (src/opt/fuse_column_map.cc).
Status FuseTransposeColumnMap(Graph& graph, const CheckedGraph& checked, bool* changed);

}  // namespace nee
