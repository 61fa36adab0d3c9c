// Graph rewrites that keep results unchanged, run in levels:
//   0 none; 1 basic (constant folding, dead-code removal); 2 extended
//   (no-op elimination, Conv/BatchNormalization folding, MatMul+Add -> Gemm,
//   fusions into com.microsoft ops: FusedConv, Gelu, SkipLayerNormalization);
//   3 layout. Each pass sees the graph with a fresh check of it.
#pragma once
#include "check/checker.h"
#include "ir/graph.h"

namespace nee {

struct GraphPass {
  const char* name;
  int level;
  Status (*run)(Graph& graph, const CheckedGraph& checked, bool* changed);
};

// Runs every pass up to `level` over the main graph. A level-2+ pass whose
// result the checker rejects is undone (the model keeps running unfused).
Status OptimizeModel(Model& model, int level);

// Individual passes, exposed for tests.
Status FoldConstants(Graph& graph, const CheckedGraph& checked, bool* changed);
Status EliminateDeadNodes(Graph& graph, const CheckedGraph& checked, bool* changed);
// Level 2 (src/opt/eliminate_noops.cc, fold_conv.cc, fuse_gemm.cc).
Status EliminateNoOps(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FoldConvBatchNorm(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FoldConvAddMul(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseMatMulAddIntoGemm(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FoldTransposeIntoGemm(Graph& graph, const CheckedGraph& checked, bool* changed);
// Fusions into ONNX Runtime's com.microsoft ops (src/opt/fuse_conv_activation.cc,
// fuse_gelu.cc, fuse_skip_layer_norm.cc).
Status FuseConvActivation(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseGelu(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseSkipLayerNorm(Graph& graph, const CheckedGraph& checked, bool* changed);

}  // namespace nee
