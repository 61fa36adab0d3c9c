// Level-2 fusion of the dequantizing tail of a dynamically quantized MatMul,
// as ONNX Runtime's quantize_dynamic writes it, into com.microsoft
// MatMulIntegerToFloat (ops/quant_matmul.cc), whose kernel dequantizes each
// tile of the integer product while it is in cache instead of writing the
// int32 product, casting it and scaling it in passes of their own:
//
//   m = MatMulInteger(a, B, a_zp?, b_zp?)
//   y = Mul(Cast(m, to=float), s) | Mul(s, Cast(...))   with s = Mul(x_scale, w_scale)
//   [y = Add(y, bias) | Add(bias, y)]
//     => y = MatMulIntegerToFloat(a, B, x_scale, w_scale, a_zp, b_zp[, bias])
//
// The fused op rounds exactly as the chain does (float(int32 sum), times the
// float product of the two scales, plus the bias), so results are unchanged.
// The DynamicQuantizeLinear that feeds a (often shared by the Q, K and V
// projections) stays as it is. Conditions: B of known shape [K, N]; the
// scales float32 with static shapes, one of them a single element and the
// other one element or [N] (so that s broadcasts only along the columns, as
// the fused op's b_scale does); a_zp a single element; b_zp one element or
// [N]; the bias float32 [N]; m, the cast and (with a bias) y read only by the
// next node of the chain.
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// A tensor value with static dims.
bool Dims(GraphEditor& ed, const std::string& name, std::vector<int64_t>* dims) {
  return opt::StaticDims(ed.TensorType(name), dims);
}

int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A float32 value with one element and rank <= 1.
bool IsScalarScale(GraphEditor& ed, const std::string& name) {
  std::vector<int64_t> d;
  const TypeInfo* t = ed.TensorType(name);
  return t && t->elem_type == DataType::kFloat && Dims(ed, name, &d) && d.size() <= 1 && Elements(d) == 1;
}

// A float32 value of one element (rank <= 1) or shape [n].
bool IsColumnScale(GraphEditor& ed, const std::string& name, int64_t n) {
  std::vector<int64_t> d;
  const TypeInfo* t = ed.TensorType(name);
  if (!t || t->elem_type != DataType::kFloat || !Dims(ed, name, &d) || d.size() > 1) return false;
  return Elements(d) == 1 || (d.size() == 1 && d[0] == n);
}

// An 8-bit zero point of one element, or (per_column) of shape [n].
bool IsZeroPoint(GraphEditor& ed, const std::string& name, DataType type, bool per_column, int64_t n) {
  std::vector<int64_t> d;
  const TypeInfo* t = ed.TensorType(name);
  if (!t || t->elem_type != type || !Dims(ed, name, &d) || d.size() > 1) return false;
  return Elements(d) == 1 || (per_column && d.size() == 1 && d[0] == n);
}

Status TryFuse(GraphEditor& ed, size_t index) {
  const Node& mm = ed.node(index);
  if (!opt::IsOp(mm, "MatMulInteger") || mm.inputs.size() < 2 || mm.inputs.size() > 4 || mm.outputs.size() != 1 ||
      !mm.attributes.empty())
    return Status::Ok();
  const TypeInfo* at = ed.TensorType(mm.inputs[0]);
  const TypeInfo* bt = ed.TensorType(mm.inputs[1]);
  std::vector<int64_t> bd;
  if (!at || !at->shape || at->shape->empty() || !bt || !Dims(ed, mm.inputs[1], &bd) || bd.size() != 2)
    return Status::Ok();
  const int64_t n = bd[1];
  if (mm.HasInput(2) && !IsZeroPoint(ed, mm.inputs[2], at->elem_type, false, n)) return Status::Ok();
  if (mm.HasInput(3) && !IsZeroPoint(ed, mm.inputs[3], bt->elem_type, true, n)) return Status::Ok();

  // Cast to float, read only by the Mul.
  const int64_t cast_index = opt::SoleConsumer(ed, mm.outputs[0]);
  if (cast_index < 0) return Status::Ok();
  const Node& cast = ed.node(static_cast<size_t>(cast_index));
  auto to = cast.GetInt("to", 0);
  if (!opt::IsOp(cast, "Cast") || cast.outputs.size() != 1 || !to.ok() ||
      to.value() != static_cast<int64_t>(DataType::kFloat) || opt::HasOtherAttributes(cast, {"to", "saturate"}))
    return Status::Ok();
  const int64_t mul_index = opt::SoleConsumer(ed, cast.outputs[0]);
  if (mul_index < 0) return Status::Ok();
  const Node& mul = ed.node(static_cast<size_t>(mul_index));
  if (!opt::IsOp(mul, "Mul") || mul.inputs.size() != 2 || mul.outputs.size() != 1 || !mul.attributes.empty() ||
      ed.checked().opsets[static_cast<size_t>(mul_index)] < 7)
    return Status::Ok();
  const std::string& s = mul.inputs[0] == cast.outputs[0] ? mul.inputs[1] : mul.inputs[0];
  if (s == cast.outputs[0]) return Status::Ok();
  // s = Mul(x_scale, w_scale): one scalar, the other a scalar or per column.
  const int64_t s_index = ed.Producer(s);
  if (s_index < 0) return Status::Ok();
  const Node& sm = ed.node(static_cast<size_t>(s_index));
  if (!opt::IsOp(sm, "Mul") || sm.inputs.size() != 2 || sm.outputs.size() != 1 || !sm.attributes.empty() ||
      ed.checked().opsets[static_cast<size_t>(s_index)] < 7)
    return Status::Ok();
  std::string a_scale = sm.inputs[0], b_scale = sm.inputs[1];
  if (!IsScalarScale(ed, a_scale)) std::swap(a_scale, b_scale);
  if (!IsScalarScale(ed, a_scale) || !IsColumnScale(ed, b_scale, n)) return Status::Ok();

  // An optional bias [N] added next.
  size_t last = static_cast<size_t>(mul_index);
  std::string bias;
  const int64_t add_index = opt::SoleConsumer(ed, mul.outputs[0]);
  if (add_index >= 0) {
    const Node& add = ed.node(static_cast<size_t>(add_index));
    if (opt::IsOp(add, "Add") && add.inputs.size() == 2 && add.outputs.size() == 1 && add.attributes.empty() &&
        ed.checked().opsets[static_cast<size_t>(add_index)] >= 7) {
      const std::string& other = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
      std::vector<int64_t> d;
      const TypeInfo* t = ed.TensorType(other);
      if (other != mul.outputs[0] && t && t->elem_type == DataType::kFloat && Dims(ed, other, &d) && d.size() == 1 &&
          d[0] == n) {
        bias = other;
        last = static_cast<size_t>(add_index);
      }
    }
  }

  std::vector<std::string> inputs = {mm.inputs[0], mm.inputs[1], a_scale, b_scale,
                                     mm.HasInput(2) ? mm.inputs[2] : std::string(),
                                     mm.HasInput(3) ? mm.inputs[3] : std::string()};
  if (!bias.empty()) inputs.push_back(bias);
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  ed.RemoveNode(index);
  ed.RemoveNode(static_cast<size_t>(cast_index));
  if (last != static_cast<size_t>(mul_index)) ed.RemoveNode(static_cast<size_t>(mul_index));
  ed.RewriteAs(last, opt::kMicrosoftDomain, "MatMulIntegerToFloat", inputs, {});
  return Status::Ok();
}
}  // namespace

Status FuseQuantMatMul(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
