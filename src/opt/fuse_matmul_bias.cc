// Level-2 fusion of a MatMul by a constant matrix with the bias and GELU that
// follow it into nee's ai.nee FusedMatMul (ops/fused_matmul.h), whose kernel
// applies them to each tile of the product while it is in cache:
//   y = Add(MatMul(a, W), bias) | Add(bias, MatMul(a, W))  => FusedMatMul(a, W, bias)
//   y = com.microsoft BiasGelu(MatMul(a, W), bias)           => FusedMatMul(a, W, bias, activation=Gelu)
//   y = com.microsoft FastGelu(MatMul(a, W)[, bias])         => FusedMatMul(a, W[, bias], activation=FastGelu)
//   y = com.microsoft Gelu(MatMul(a, W))                     => FusedMatMul(a, W, activation=Gelu)
// Runs after fuse-gelu (which writes those GELU ops) and fuse-skip-layer-norm
// (which takes a residual's bias into SkipLayerNormalization, saving a pass
// of its own). 2-D products with a bias are already Gemm (fuse-matmul-add-gemm).
// Conditions: float32; W a constant 2-D initializer [K, N]; a of known rank
// >= 2; the bias 1-D [N] (so nothing broadcasts); the product read only by
// the consumer.
#include "ops/attention_sdpa.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// A 1-D float32 value of n elements.
bool IsBias(GraphEditor& ed, const std::string& name, int64_t n) {
  const TypeInfo* t = ed.TensorType(name);
  return opt::IsFloatWithRank(t) && t->shape->size() == 1 && (*t->shape)[0].known() && (*t->shape)[0].value == n;
}

// For the consumer of a product of width n: the bias input (or "") and the
// activation name, when it is one of the forms above.
bool MatchEpilogue(GraphEditor& ed, size_t index, const std::string& product, int64_t n, std::string* bias,
                   std::string* activation) {
  const Node& c = ed.node(index);
  if (c.outputs.size() != 1) return false;
  const bool ms = c.domain == opt::kMicrosoftDomain;
  if (opt::IsOp(c, "Add") && c.inputs.size() == 2 && c.attributes.empty() && ed.checked().opsets[index] >= 7) {
    const size_t side = c.inputs[0] == product ? 1 : 0;
    if (c.inputs[1 - side] != product || !IsBias(ed, c.inputs[side], n)) return false;
    *bias = c.inputs[side];
    *activation = "";
    return true;
  }
  if (ms && c.op_type == "BiasGelu" && c.inputs.size() == 2 && c.inputs[0] == product && IsBias(ed, c.inputs[1], n)) {
    *bias = c.inputs[1];
    *activation = "Gelu";
    return true;
  }
  if (ms && c.op_type == "FastGelu" && !c.inputs.empty() && c.inputs.size() <= 2 && c.inputs[0] == product &&
      c.attributes.empty()) {
    if (c.HasInput(1) && !IsBias(ed, c.inputs[1], n)) return false;
    *bias = c.HasInput(1) ? c.inputs[1] : "";
    *activation = "FastGelu";
    return true;
  }
  if (ms && c.op_type == "Gelu" && c.inputs.size() == 1 && c.inputs[0] == product && c.attributes.empty()) {
    *bias = "";
    *activation = "Gelu";
    return true;
  }
  return false;
}

Status TryFuse(GraphEditor& ed, size_t index) {
  const Node& mm = ed.node(index);
  if (!opt::IsOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) return Status::Ok();
  Tensor w = ed.Constant(mm.inputs[1]);
  const TypeInfo* a = ed.TensorType(mm.inputs[0]);
  if (!opt::IsFloatTensor(w) || w.rank() != 2 || !opt::IsFloatWithRank(a) || a->shape->size() < 2) return Status::Ok();
  const std::string product = mm.outputs[0];
  int64_t consumer = opt::SoleConsumer(ed, product);
  if (consumer < 0) return Status::Ok();
  std::string bias, activation;
  if (!MatchEpilogue(ed, static_cast<size_t>(consumer), product, w.dim(1), &bias, &activation)) return Status::Ok();
  std::vector<std::string> inputs = {mm.inputs[0], mm.inputs[1]};
  if (!bias.empty()) inputs.push_back(bias);
  std::vector<Attribute> attrs;
  if (!activation.empty()) attrs.push_back(opt::StringAttr("activation", activation));
  ed.RemoveNode(index);
  ed.RewriteAs(static_cast<size_t>(consumer), kNeeDomain, "FusedMatMul", inputs, std::move(attrs));
  return Status::Ok();
}
}  // namespace

Status FuseMatMulBias(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
