// Level-2 fusion of a residual Add feeding LayerNormalization into ONNX
// Runtime's com.microsoft SkipLayerNormalization (one pass over each row
// instead of writing the sum and reading it back):
//   s = Add(a, b); y = LayerNormalization(s, gamma[, beta])  => y = SkipLayerNormalization(a, b, gamma[, beta])
// When s has other readers (pre-LN transformers carry it as the residual
// stream) or is a graph output, the fused node also writes s, as its fourth
// output (input_skip_bias_sum).
// When one operand of the sum is itself Add(p, bias) with a constant 1-D
// bias [H] (a Linear layer's bias, as torch exports it) that only the sum
// reads, the bias becomes the fused node's fifth input and p its operand.
// Conditions: float32; a and b of one shape (known or named dims, so that
// nothing broadcasts); normalization over the last axis only, whose size H is
// known; gamma and beta 1-D [H]; the LayerNormalization's Mean and InvStdDev
// outputs unused.
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// A 1-D float32 value of `hidden` elements.
bool IsChannelVector(GraphEditor& ed, const std::string& name, int64_t hidden) {
  const TypeInfo* t = ed.TensorType(name);
  return opt::IsFloatWithRank(t) && t->shape->size() == 1 && (*t->shape)[0].known() &&
         (*t->shape)[0].value == hidden;
}

// The LayerNormalization's epsilon when it normalizes the last axis of an
// input of rank `rank` and writes only its first output.
bool LastAxisLayerNorm(const Node& ln, size_t rank, float* epsilon) {
  if (!opt::IsOp(ln, "LayerNormalization") || ln.inputs.size() < 2 || ln.inputs.size() > 3) return false;
  for (size_t k = 1; k < ln.outputs.size(); ++k)
    if (!ln.outputs[k].empty()) return false;
  if (opt::HasOtherAttributes(ln, {"axis", "epsilon", "stash_type"})) return false;
  auto axis = ln.GetInt("axis", -1);
  auto eps = ln.GetFloat("epsilon", 1e-5f);
  auto stash = ln.GetInt("stash_type", 1);
  if (!axis.ok() || !eps.ok() || !stash.ok() || stash.value() != 1) return false;
  if (axis.value() != -1 && axis.value() != static_cast<int64_t>(rank) - 1) return false;
  *epsilon = eps.value();
  return true;
}

// When `operand` = Add(p, bias) as described above, with p of `shape`: the
// Add's index, p and the bias.
bool MatchBiasAdd(GraphEditor& ed, const std::string& operand, const Shape& shape, size_t* add, std::string* p,
                  std::string* bias) {
  int64_t producer = ed.Producer(operand);
  if (producer < 0 || opt::SoleConsumer(ed, operand) < 0) return false;
  const Node& n = ed.node(static_cast<size_t>(producer));
  if (!opt::IsOp(n, "Add") || n.inputs.size() != 2 || n.outputs.size() != 1 || !n.attributes.empty() ||
      ed.checked().opsets[static_cast<size_t>(producer)] < 7)
    return false;
  for (size_t side = 0; side < 2; ++side) {
    Tensor b = ed.Constant(n.inputs[side]);
    const TypeInfo* other = ed.TensorType(n.inputs[1 - side]);
    if (!opt::IsFloatTensor(b) || b.rank() != 1 || b.dim(0) != shape.back().value) continue;
    if (!opt::IsFloatWithRank(other) || *other->shape != shape) continue;  // `shape` is provable
    *add = static_cast<size_t>(producer);
    *p = n.inputs[1 - side];
    *bias = n.inputs[side];
    return true;
  }
  return false;
}

Status TryFuse(GraphEditor& ed, size_t index) {
  const Node& ln = ed.node(index);
  if (!opt::IsOp(ln, "LayerNormalization") || ln.inputs.size() < 2) return Status::Ok();
  const std::string s = ln.inputs[0];
  if (ln.inputs[1] == s || (ln.HasInput(2) && ln.inputs[2] == s)) return Status::Ok();
  int64_t add = ed.Producer(s);
  if (add < 0) return Status::Ok();
  const Node& sum = ed.node(static_cast<size_t>(add));
  if (!opt::IsOp(sum, "Add") || sum.inputs.size() != 2 || sum.outputs.size() != 1 || !sum.attributes.empty() ||
      ed.checked().opsets[static_cast<size_t>(add)] < 7)
    return Status::Ok();
  const TypeInfo* a = ed.TensorType(sum.inputs[0]);
  const TypeInfo* b = ed.TensorType(sum.inputs[1]);
  if (!opt::ProvablySameShape(a, b) || a->shape->empty() || !a->shape->back().known()) return Status::Ok();
  const int64_t hidden = a->shape->back().value;
  float epsilon = 0;
  if (!LastAxisLayerNorm(ln, a->shape->size(), &epsilon)) return Status::Ok();
  if (!IsChannelVector(ed, ln.inputs[1], hidden)) return Status::Ok();
  if (ln.HasInput(2) && !IsChannelVector(ed, ln.inputs[2], hidden)) return Status::Ok();

  std::vector<std::string> inputs = {sum.inputs[0], sum.inputs[1], ln.inputs[1], ln.HasInput(2) ? ln.inputs[2] : ""};
  for (size_t side = 0; side < 2; ++side) {
    size_t bias_add = 0;
    std::string p, bias;
    if (!MatchBiasAdd(ed, sum.inputs[side], *a->shape, &bias_add, &p, &bias)) continue;
    ed.RemoveNode(bias_add);
    inputs[side] = p;
    inputs.push_back(bias);
    break;
  }
  while (inputs.back().empty()) inputs.pop_back();
  const bool keep_sum = opt::SoleConsumer(ed, s) != static_cast<int64_t>(index);
  ed.RemoveNode(static_cast<size_t>(add));
  ed.RewriteAs(index, opt::kMicrosoftDomain, "SkipLayerNormalization", inputs,
               {opt::FloatAttr("epsilon", epsilon)});
  ed.node(index).outputs.resize(1);
  if (keep_sum) ed.SetOutput(index, 3, s);
  return Status::Ok();
}
}  // namespace

Status FuseSkipLayerNorm(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
