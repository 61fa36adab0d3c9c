// Graph rewrites that keep results unchanged, run in levels:
//   0 none; 1 basic (constant folding, dead-code removal); 2 extended
//   (no-op elimination, Conv/BatchNormalization folding, MatMul+Add -> Gemm,
//   fusions into com.microsoft ops: FusedConv, Gelu, SkipLayerNormalization);
//   3 layout. Each pass sees the graph with a fresh check of it.
#pragma once
#include <utility>
#include <string>
#include <vector>

#include "check/checker.h"
#include "ir/graph.h"

namespace nee {

struct GraphPass {
  const char* name;
  int level;
  Status (*run)(Graph& graph, const CheckedGraph& checked, bool* changed);
};

// What one pass did: the main graph's node count before and after, and
// whether its result was undone (the checker rejected it, or it failed).
struct PassReport {
  std::string pass;
  int level = 0;
  size_t nodes_before = 0, nodes_after = 0;
  bool changed = false, undone = false;
  // The subgraph the pass ran on ("" for the main graph; for a body, its
  // node and attribute); nodes_* then count that body's nodes.
  std::string graph;
};

// The metadata key a model optimized by nee carries (`nee optimize`), with the
// level as its value: a session at that level or below does not optimize the
// model again.
constexpr const char* kOptimizedLevelKey = "nee.optimization_level";
// The level recorded in the model's metadata, or -1.
int RecordedOptimizationLevel(const Model& model);

// Runs every pass up to `level` over the main graph, then over every
// subgraph body within its enclosing scope (folding may read the enclosing
// graphs' initializers). A level-2+ pass whose result the checker rejects
// is undone (the model keeps running unfused); in a body, any pass is. `report`
// (may be null) gets one entry per pass that ran on the main graph and one
// per pass that changed or was undone in a body. `registry`
// resolves ops (a session's own, with its custom ops; null: nee's).
Status OptimizeModel(Model& model, int level, std::vector<PassReport>* report = nullptr,
                     const OpRegistry* registry = nullptr);

// Individual passes, exposed for tests.
Status FoldConstants(Graph& graph, const CheckedGraph& checked, bool* changed);
Status EliminateDeadNodes(Graph& graph, const CheckedGraph& checked, bool* changed);
// Level 2 (src/opt/eliminate_noops.cc, fold_conv.cc, fuse_gemm.cc).
Status EliminateNoOps(Graph& graph, const CheckedGraph& checked, bool* changed);
// Conv / ConvTranspose + BatchNormalization and per-channel Mul, Add, Sub, in any order and number.
Status FoldConvAffine(Graph& graph, const CheckedGraph& checked, bool* changed);
// A per-channel Mul, Add or Sub before an unpadded Conv or FusedConv, folded into it.
Status FoldConvInputAffine(Graph& graph, const CheckedGraph& checked, bool* changed);
Status BlockConvLayout(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseBlockedExpandDepthwise(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseMatMulAddIntoGemm(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FoldTransposeIntoGemm(Graph& graph, const CheckedGraph& checked, bool* changed);
// Fusions into ONNX Runtime's com.microsoft ops (src/opt/fuse_conv_activation.cc,
// fuse_gelu.cc, fuse_skip_layer_norm.cc).
Status FuseConvActivation(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseGelu(Graph& graph, const CheckedGraph& checked, bool* changed);
// Layer normalization written out (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div [, Mul, Add])
// -> LayerNormalization (fuse_layer_norm.cc).
Status FuseLayerNorm(Graph& graph, const CheckedGraph& checked, bool* changed);
Status FuseSkipLayerNorm(Graph& graph, const CheckedGraph& checked, bool* changed);
// Fusion into nee's ai.nee ScaledDotProductAttention (src/opt/fuse_attention.cc).
Status FuseAttention(Graph& graph, const CheckedGraph& checked, bool* changed);
// Fusion into nee's ai.nee FusedMatMul (src/opt/fuse_matmul_bias.cc).
Status FuseMatMulBias(Graph& graph, const CheckedGraph& checked, bool* changed);
// A Gather of rows moved above the row-wise nodes computing them (src/opt/gather_rows_early.cc).
Status GatherRowsEarly(Graph& graph, const CheckedGraph& checked, bool* changed);
// A one-hot (Cast of Equal with 0..K-1) times a constant matrix as a Gather of
// its rows (src/opt/one_hot_matmul.cc).
Status OneHotMatMulAsGather(Graph& graph, const CheckedGraph& checked, bool* changed);
// Fusion into com.microsoft MatMulIntegerToFloat (src/opt/fuse_quant_matmul.cc).
Status FuseQuantMatMul(Graph& graph, const CheckedGraph& checked, bool* changed);
// Fusion into ai.nee ConvIntegerToFloat (src/opt/fuse_quant_conv.cc).
Status FuseQuantConv(Graph& graph, const CheckedGraph& checked, bool* changed);
// float16 / bfloat16 nodes of ops with a fast float32 kernel computed in
// float32 between Casts (src/opt/widen_narrow_float.cc); WidenedOps() lists
// those ops as (domain, op) pairs.
Status WidenNarrowFloat(Graph& graph, const CheckedGraph& checked, bool* changed);
const std::vector<std::pair<const char*, const char*>>& WidenedOps();
// An element-wise chain from one 8-bit tensor to another as ai.nee TableLookup (src/opt/fuse_byte_table.cc).
Status FuseByteTable(Graph& graph, const CheckedGraph& checked, bool* changed);
// QDQ Conv / Relu / Add into QLinearConv, com.microsoft QLinearLeakyRelu and
// QLinearAdd (src/opt/fuse_qdq_conv.cc).
Status FuseQdqConv(Graph& graph, const CheckedGraph& checked, bool* changed);

}  // namespace nee
