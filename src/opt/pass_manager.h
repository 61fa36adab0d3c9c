// Graph rewrites that keep results unchanged, run in levels:
//   0 none; 1 basic (constant folding, dead-code removal); 2 extended
//   (fusions); 3 layout. Each pass sees the graph with a fresh check of it.
#pragma once
#include "check/checker.h"
#include "ir/graph.h"

namespace nee {

struct GraphPass {
  const char* name;
  int level;
  Status (*run)(Graph& graph, const CheckedGraph& checked, bool* changed);
};

// Runs every pass up to `level` over the main graph.
Status OptimizeModel(Model& model, int level);

// Individual passes, exposed for tests.
Status FoldConstants(Graph& graph, const CheckedGraph& checked, bool* changed);
Status EliminateDeadNodes(Graph& graph, const CheckedGraph& checked, bool* changed);

}  // namespace nee
