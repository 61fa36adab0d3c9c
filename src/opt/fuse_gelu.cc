// Level-2 fusion of GELU written out in elementary ops (as torch exports
// nn.GELU before opset 20, and GPT-2's gelu_new) into ONNX Runtime's
// com.microsoft ops, one pass over the data instead of five to nine:
//   erf form   x * 0.5 * (1 + Erf(x / sqrt(2)))                         => Gelu(x)
//   tanh form  x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))  => FastGelu(x)
// and, when x = Add(p, bias) with a constant 1-D bias over the last axis that
// only the GELU reads, BiasGelu(p, bias) / FastGelu(p, bias).
//
// The pattern admits what exporters vary: x / sqrt(2) or x * (1/sqrt(2));
// Pow(x, 3), x * x * x or x * (x * x); either operand order of Add and Mul;
// and the three placements of the 0.5 ((x * a) * 0.5, (x * 0.5) * a,
// x * (a * 0.5), where a = 1 + erf/tanh). Constants match within a relative
// 1e-4. Every intermediate value must have exactly one reader and not be a
// graph output or read by a subgraph; x itself is read only by the pattern
// when a bias is absorbed.
#include <algorithm>
#include <cmath>

#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubicCoefficient = 0.044715;

// What a match found: the GELU's input x, the node writing its output (which
// becomes the fused node) and every node of the pattern.
struct GeluMatch {
  std::string x;
  size_t last = 0;
  std::vector<size_t> nodes;
};

// For a commutative binary node with a scalar constant near `want` on one
// side: the other input. Empty when it does not fit.
std::string OtherThanConstant(GraphEditor& ed, size_t index, double want) {
  const Node& n = ed.node(index);
  for (size_t side = 0; side < 2; ++side) {
    float c = 0;
    if (opt::ScalarConstant(ed, n.inputs[side], &c) && opt::NearlyEqual(c, want)) return n.inputs[1 - side];
  }
  return "";
}

// The sole reader of `name` when it is the op `op`; -1 otherwise.
int64_t SoleReaderOp(GraphEditor& ed, const std::string& name, const char* op) {
  int64_t reader = opt::SoleConsumer(ed, name);
  return opt::IsBinary(ed, reader, op) ? reader : -1;
}

// The producer of `name` when it is the op `op` and `name` has no other reader.
int64_t SoleProducerOp(GraphEditor& ed, const std::string& name, const char* op) {
  int64_t producer = ed.Producer(name);
  if (producer < 0 || opt::SoleConsumer(ed, name) < 0) return -1;
  return opt::IsBinary(ed, producer, op) ? producer : -1;
}

// The shared tail: inner (erf or tanh of the scaled x) -> Add 1 -> the
// product with x and 0.5, in any of its three placements.
bool MatchTail(GraphEditor& ed, const std::string& inner, const std::string& x, GeluMatch* m) {
  int64_t add = SoleReaderOp(ed, inner, "Add");
  if (add < 0 || OtherThanConstant(ed, static_cast<size_t>(add), 1.0) != inner) return false;
  const std::string& a = ed.node(static_cast<size_t>(add)).outputs[0];
  int64_t m1 = SoleReaderOp(ed, a, "Mul");
  if (m1 < 0) return false;
  const std::string other = opt::OtherInput(ed.node(static_cast<size_t>(m1)), a);
  const std::string& p1 = ed.node(static_cast<size_t>(m1)).outputs[0];
  m->x = x;
  m->nodes.insert(m->nodes.end(), {static_cast<size_t>(add), static_cast<size_t>(m1)});
  if (other == x) {  // (x * a) * 0.5
    int64_t m2 = SoleReaderOp(ed, p1, "Mul");
    if (m2 < 0 || OtherThanConstant(ed, static_cast<size_t>(m2), 0.5) != p1) return false;
    m->last = static_cast<size_t>(m2);
    m->nodes.push_back(m->last);
    return true;
  }
  int64_t half = SoleProducerOp(ed, other, "Mul");
  if (half >= 0 && OtherThanConstant(ed, static_cast<size_t>(half), 0.5) == x) {  // (x * 0.5) * a
    m->last = static_cast<size_t>(m1);
    m->nodes.push_back(static_cast<size_t>(half));
    return true;
  }
  float c = 0;
  if (opt::ScalarConstant(ed, other, &c) && opt::NearlyEqual(c, 0.5)) {  // x * (a * 0.5)
    int64_t m2 = SoleReaderOp(ed, p1, "Mul");
    if (m2 < 0 || opt::OtherInput(ed.node(static_cast<size_t>(m2)), p1) != x) return false;
    m->last = static_cast<size_t>(m2);
    m->nodes.push_back(m->last);
    return true;
  }
  return false;
}

// Erf(x / sqrt(2)) or Erf(x * (1/sqrt(2))) + the tail.
bool MatchErfGelu(GraphEditor& ed, size_t erf, GeluMatch* m) {
  const Node& e = ed.node(erf);
  if (!opt::IsOp(e, "Erf") || e.inputs.size() != 1 || e.outputs.size() != 1) return false;
  int64_t scale = ed.Producer(e.inputs[0]);
  if (scale < 0 || opt::SoleConsumer(ed, e.inputs[0]) != static_cast<int64_t>(erf)) return false;
  std::string x;
  if (opt::IsBinary(ed, scale, "Div")) {
    const Node& div = ed.node(static_cast<size_t>(scale));
    float c = 0;
    if (opt::ScalarConstant(ed, div.inputs[1], &c) && opt::NearlyEqual(c, kSqrt2)) x = div.inputs[0];
  } else if (opt::IsBinary(ed, scale, "Mul")) {
    x = OtherThanConstant(ed, static_cast<size_t>(scale), 1.0 / kSqrt2);
  }
  if (x.empty()) return false;
  m->nodes = {static_cast<size_t>(scale), erf};
  return MatchTail(ed, e.outputs[0], x, m);
}

// x^3 as Pow(x, 3), (x * x) * x or x * (x * x); its nodes go to `nodes`.
bool MatchCube(GraphEditor& ed, const std::string& cube, const std::string& x, std::vector<size_t>* nodes) {
  int64_t producer = ed.Producer(cube);
  if (producer < 0 || opt::SoleConsumer(ed, cube) < 0) return false;
  if (opt::IsBinary(ed, producer, "Pow")) {
    const Node& pow = ed.node(static_cast<size_t>(producer));
    float e = 0;
    if (pow.inputs[0] != x || !opt::ScalarConstant(ed, pow.inputs[1], &e) || e != 3.0f) return false;
    nodes->push_back(static_cast<size_t>(producer));
    return true;
  }
  if (!opt::IsBinary(ed, producer, "Mul")) return false;
  const std::string square = opt::OtherInput(ed.node(static_cast<size_t>(producer)), x);
  int64_t sq = SoleProducerOp(ed, square, "Mul");
  if (sq < 0 || ed.node(static_cast<size_t>(sq)).inputs[0] != x || ed.node(static_cast<size_t>(sq)).inputs[1] != x)
    return false;
  nodes->insert(nodes->end(), {static_cast<size_t>(sq), static_cast<size_t>(producer)});
  return true;
}

// Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) + the tail.
bool MatchTanhGelu(GraphEditor& ed, size_t tanh, GeluMatch* m) {
  const Node& t = ed.node(tanh);
  if (!opt::IsOp(t, "Tanh") || t.inputs.size() != 1 || t.outputs.size() != 1) return false;
  int64_t scale = ed.Producer(t.inputs[0]);
  if (opt::SoleConsumer(ed, t.inputs[0]) != static_cast<int64_t>(tanh) || !opt::IsBinary(ed, scale, "Mul"))
    return false;
  const std::string inner = OtherThanConstant(ed, static_cast<size_t>(scale), kSqrt2OverPi);
  int64_t sum = SoleProducerOp(ed, inner, "Add");
  if (sum < 0) return false;
  const Node& add = ed.node(static_cast<size_t>(sum));
  for (size_t side = 0; side < 2; ++side) {
    const std::string& x = add.inputs[1 - side];
    int64_t cubic = SoleProducerOp(ed, add.inputs[side], "Mul");
    if (cubic < 0) continue;
    std::vector<size_t> nodes = {static_cast<size_t>(scale), tanh, static_cast<size_t>(sum),
                                 static_cast<size_t>(cubic)};
    const std::string cube = OtherThanConstant(ed, static_cast<size_t>(cubic), kCubicCoefficient);
    if (cube.empty() || !MatchCube(ed, cube, x, &nodes)) continue;
    m->nodes = std::move(nodes);
    return MatchTail(ed, t.outputs[0], x, m);
  }
  return false;
}

// When x = Add(p, bias) with bias a constant float vector over x's last axis
// (so x has p's shape) and only the GELU reads x: the Add's index, p and bias.
bool MatchBias(GraphEditor& ed, const GeluMatch& m, size_t* add, std::string* p, std::string* bias) {
  int64_t producer = ed.Producer(m.x);
  if (!opt::IsBinary(ed, producer, "Add") || ed.IsPinned(m.x)) return false;
  for (const opt::Use& u : ed.Uses(m.x))
    if (std::find(m.nodes.begin(), m.nodes.end(), u.node) == m.nodes.end()) return false;
  const Node& n = ed.node(static_cast<size_t>(producer));
  for (size_t side = 0; side < 2; ++side) {
    Tensor b = ed.Constant(n.inputs[side]);
    const TypeInfo* other = ed.TensorType(n.inputs[1 - side]);
    if (!opt::IsFloatTensor(b) || b.rank() != 1 || !opt::IsFloatWithRank(other) || other->shape->empty()) continue;
    const Dim& last = other->shape->back();
    if (!last.known() || last.value != b.dim(0)) continue;
    *add = static_cast<size_t>(producer);
    *p = n.inputs[1 - side];
    *bias = n.inputs[side];
    return true;
  }
  return false;
}

// Replaces the matched nodes by one com.microsoft node: `op` on x, or
// `bias_op` on (p, bias) when x is a biased sum only the GELU reads.
void Replace(GraphEditor& ed, const GeluMatch& m, const char* op, const char* bias_op) {
  size_t add = 0;
  std::string p, bias;
  std::vector<std::string> inputs = {m.x};
  const char* fused = op;
  if (MatchBias(ed, m, &add, &p, &bias)) {
    ed.RemoveNode(add);
    inputs = {p, bias};
    fused = bias_op;
  }
  for (size_t n : m.nodes)
    if (n != m.last) ed.RemoveNode(n);
  ed.RewriteAs(m.last, opt::kMicrosoftDomain, fused, inputs, {});
}

bool IsFloat32(GraphEditor& ed, const std::string& name) {
  const TypeInfo* t = ed.TensorType(name);
  return t && t->elem_type == DataType::kFloat;
}

Status TryFuse(GraphEditor& ed, size_t index) {
  GeluMatch erf;
  if (MatchErfGelu(ed, index, &erf) && IsFloat32(ed, erf.x)) {
    Replace(ed, erf, "Gelu", "BiasGelu");
    return Status::Ok();
  }
  GeluMatch tanh;
  if (MatchTanhGelu(ed, index, &tanh) && IsFloat32(ed, tanh.x)) Replace(ed, tanh, "FastGelu", "FastGelu");
  return Status::Ok();
}
}  // namespace

Status FuseGelu(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
