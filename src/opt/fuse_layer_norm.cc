// Level-2 fusion of layer normalization written out in elementary ops (as
// torch exports nn.LayerNorm before opset 17, and Paddle and TensorFlow
// exporters do: PP-OCR's SVTR recognizers) into one LayerNormalization, a
// pass over the data instead of nine:
//
//   mean = ReduceMean(x, axes)           (the last k axes, keepdims)
//   d    = x - mean
//   var  = ReduceMean(d^2, axes)         (Pow(d, 2) or d * d)
//   y    = d / Sqrt(var + eps)
//   y    = y * gamma + beta              (each optional; constants of the normalized shape)
//   => LayerNormalization(x, gamma, beta, axis = rank - k, epsilon = eps)
//
// Every intermediate value must have no reader outside the pattern and not be
// a graph output or read by a subgraph (d has exactly its two readers). A
// missing gamma becomes ones, a missing beta stays absent. The fused op
// computes the same quantities in another order (its mean and variance in
// one kernel), so results agree to float rounding, not bit for bit; ONNX
// Runtime's LayerNormFusion makes the same rewrite. (LayerNormalization is
// registered from opset 1, as ONNX Runtime's optimizer writes it into older
// models.)
#include <algorithm>
#include <numeric>

#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// What a match found.
struct LayerNormMatch {
  std::string x, gamma, beta;
  float epsilon = 0;
  int64_t axis = 0;                    // the first normalized axis
  std::vector<int64_t> normalized;     // the normalized dims (known where gamma must be made)
  std::vector<size_t> nodes;           // every node of the pattern
  size_t last = 0;                     // the node writing the output: it becomes the fused node
};

// Node `index` as a plain op `op` with `inputs` inputs and one output.
bool IsPlain(const GraphEditor& ed, int64_t index, const char* op, size_t inputs) {
  if (index < 0) return false;
  const Node& n = ed.node(static_cast<size_t>(index));
  return opt::IsOp(n, op) && n.inputs.size() == inputs && n.outputs.size() == 1;
}

// The sole reader of `name` when it is the op `op` with `inputs` inputs; -1 otherwise.
int64_t SoleReader(GraphEditor& ed, const std::string& name, const char* op, size_t inputs) {
  const int64_t reader = opt::SoleConsumer(ed, name);
  return IsPlain(ed, reader, op, inputs) ? reader : -1;
}

// A ReduceMean's axes, normalized to [0, rank) and sorted, when they are
// the last ones of a rank-`rank` input and it keeps the reduced dims.
bool TrailingAxes(GraphEditor& ed, size_t index, int64_t rank, std::vector<int64_t>* axes) {
  const Node& n = ed.node(index);
  if (!opt::IsOp(n, "ReduceMean") || n.outputs.size() != 1 || n.inputs.empty()) return false;
  Result<int64_t> keepdims = n.GetInt("keepdims", 1);
  if (!keepdims.ok() || keepdims.value() != 1) return false;
  std::vector<int64_t> given;
  if (ed.checked().opsets[index] >= 18) {
    if (n.inputs.size() < 2 || n.inputs[1].empty()) return false;
    const Tensor t = ed.Constant(n.inputs[1]);
    if (!t.defined() || t.dtype() != DataType::kInt64) return false;
    given = t.ToInt64Vector().value();
  } else {
    if (n.inputs.size() != 1) return false;
    Result<std::vector<int64_t>> a = n.GetInts("axes", {});
    if (!a.ok()) return false;
    given = a.value();
  }
  if (given.empty()) return false;
  for (int64_t& a : given) {
    if (a < -rank || a >= rank) return false;
    if (a < 0) a += rank;
  }
  std::sort(given.begin(), given.end());
  for (size_t i = 0; i < given.size(); ++i)
    if (given[i] != rank - static_cast<int64_t>(given.size()) + static_cast<int64_t>(i)) return false;
  *axes = given;
  return true;
}

// A constant float tensor whose dims are the normalized ones (leading 1s allowed).
bool NormalizedConstant(GraphEditor& ed, const std::string& name, const std::vector<int64_t>& normalized) {
  const Tensor t = ed.Constant(name);
  if (!opt::IsFloatTensor(t) || t.rank() < static_cast<int64_t>(normalized.size())) return false;
  const std::vector<int64_t>& dims = t.dims();
  const size_t lead = dims.size() - normalized.size();
  for (size_t i = 0; i < lead; ++i)
    if (dims[i] != 1) return false;
  return std::equal(normalized.begin(), normalized.end(), dims.begin() + static_cast<int64_t>(lead));
}

// One step of the affine tail: when the match's output is read only by `op`
// with a constant of the normalized shape, that node joins the match (its
// new last) and `constant` names the constant.
bool AffineStep(GraphEditor& ed, const char* op, LayerNormMatch* m, std::string* constant) {
  const std::string& out = ed.node(m->last).outputs[0];
  const int64_t step = SoleReader(ed, out, op, 2);
  if (step < 0) return false;
  const std::string other = opt::OtherInput(ed.node(static_cast<size_t>(step)), out);
  if (other.empty() || !NormalizedConstant(ed, other, m->normalized)) return false;
  *constant = other;
  m->nodes.push_back(static_cast<size_t>(step));
  m->last = static_cast<size_t>(step);
  return true;
}

// Matches the pattern from its first ReduceMean.
bool Match(GraphEditor& ed, size_t mean_node, LayerNormMatch* m) {
  const Node& rm = ed.node(mean_node);
  if (!opt::IsOp(rm, "ReduceMean") || rm.inputs.empty()) return false;
  const std::string x = rm.inputs[0];
  const TypeInfo* xt = ed.TensorType(x);
  if (!opt::IsFloatWithRank(xt) || xt->shape->empty()) return false;
  const int64_t rank = static_cast<int64_t>(xt->shape->size());
  std::vector<int64_t> axes;
  if (!TrailingAxes(ed, mean_node, rank, &axes)) return false;
  // d = x - mean, read by the square and the division only.
  const int64_t sub = SoleReader(ed, rm.outputs[0], "Sub", 2);
  if (sub < 0 || ed.node(static_cast<size_t>(sub)).inputs[0] != x) return false;
  const std::string d = ed.node(static_cast<size_t>(sub)).outputs[0];
  if (ed.IsPinned(d)) return false;
  const std::vector<opt::Use> uses = ed.Uses(d);
  int64_t square = -1, div = -1;
  for (const opt::Use& u : uses) {
    const Node& n = ed.node(u.node);
    if (opt::IsOp(n, "Div") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] != d)
      div = static_cast<int64_t>(u.node);
    else if (opt::IsOp(n, "Pow") || opt::IsOp(n, "Mul"))
      square = static_cast<int64_t>(u.node);
  }
  const size_t expected_uses = square >= 0 && opt::IsOp(ed.node(static_cast<size_t>(square)), "Mul") ? 3 : 2;
  if (square < 0 || div < 0 || uses.size() != expected_uses) return false;
  const Node& sq = ed.node(static_cast<size_t>(square));
  float exponent = 0;
  const bool is_square = opt::IsOp(sq, "Pow") ? sq.inputs.size() == 2 && sq.inputs[0] == d &&
                                                    opt::ScalarConstant(ed, sq.inputs[1], &exponent) && exponent == 2.f
                                              : sq.inputs.size() == 2 && sq.inputs[0] == d && sq.inputs[1] == d;
  if (!is_square || sq.outputs.size() != 1) return false;
  // var = ReduceMean(d^2) over the same axes; + eps; Sqrt; then d / that.
  const int64_t rm2 = opt::SoleConsumer(ed, sq.outputs[0]);
  std::vector<int64_t> axes2;
  if (rm2 < 0 || !TrailingAxes(ed, static_cast<size_t>(rm2), rank, &axes2) || axes2 != axes ||
      ed.node(static_cast<size_t>(rm2)).inputs[0] != sq.outputs[0])
    return false;
  const std::string& var = ed.node(static_cast<size_t>(rm2)).outputs[0];
  const int64_t add = SoleReader(ed, var, "Add", 2);
  if (add < 0) return false;
  const std::string eps = opt::OtherInput(ed.node(static_cast<size_t>(add)), var);
  if (eps.empty() || !opt::ScalarConstant(ed, eps, &m->epsilon) || !(m->epsilon >= 0)) return false;
  const int64_t sqrt = SoleReader(ed, ed.node(static_cast<size_t>(add)).outputs[0], "Sqrt", 1);
  if (sqrt < 0 || opt::SoleConsumer(ed, ed.node(static_cast<size_t>(sqrt)).outputs[0]) != div ||
      ed.node(static_cast<size_t>(div)).inputs[1] != ed.node(static_cast<size_t>(sqrt)).outputs[0])
    return false;
  m->x = x;
  m->axis = axes.front();
  m->normalized.clear();
  for (int64_t a : axes) {
    const Dim& dim = (*xt->shape)[static_cast<size_t>(a)];
    m->normalized.push_back(dim.known() ? dim.value : -1);
  }
  m->nodes = {mean_node, static_cast<size_t>(sub), static_cast<size_t>(square), static_cast<size_t>(rm2),
              static_cast<size_t>(add), static_cast<size_t>(sqrt), static_cast<size_t>(div)};
  m->last = static_cast<size_t>(div);
  // The optional affine tail: * gamma, then + beta.
  const bool known = std::all_of(m->normalized.begin(), m->normalized.end(), [](int64_t v) { return v >= 0; });
  if (known && AffineStep(ed, "Mul", m, &m->gamma)) AffineStep(ed, "Add", m, &m->beta);
  // Without gamma the fused op needs ones of the normalized shape.
  return !m->gamma.empty() || known;
}

// The gamma or beta constant as LayerNormalization takes it: the normalized dims only.
std::string AsNormalized(GraphEditor& ed, const std::string& name, const std::vector<int64_t>& normalized) {
  Tensor t = ed.Constant(name);
  if (t.dims() == normalized) return name;
  const float* p = t.data<float>();
  return ed.AddInitializer(name + "_ln", Tensor::FromVector<float>(std::vector<float>(p, p + t.num_elements()),
                                                                   normalized));
}

void Replace(GraphEditor& ed, const LayerNormMatch& m) {
  std::string gamma;
  if (m.gamma.empty()) {
    const int64_t count = std::accumulate(m.normalized.begin(), m.normalized.end(), int64_t{1}, std::multiplies<>());
    const std::vector<float> ones(static_cast<size_t>(count), 1.f);
    gamma = ed.AddInitializer(m.x + "_ln_ones", Tensor::FromVector<float>(ones, m.normalized));
  } else {
    gamma = AsNormalized(ed, m.gamma, m.normalized);
  }
  std::vector<std::string> inputs = {m.x, gamma};
  if (!m.beta.empty()) inputs.push_back(AsNormalized(ed, m.beta, m.normalized));
  for (size_t n : m.nodes)
    if (n != m.last) ed.RemoveNode(n);
  ed.RewriteAs(m.last, "", "LayerNormalization", inputs,
               {opt::IntAttr("axis", m.axis), opt::FloatAttr("epsilon", m.epsilon)});
}
}  // namespace

Status FuseLayerNorm(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order) {
    if (ed.removed(index)) continue;
    LayerNormMatch m;
    if (Match(ed, index, &m)) Replace(ed, m);
  }
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
