// Level-2 fusion of the dequantizing tail of a dynamically quantized Conv, as
// ONNX Runtime's quantize_dynamic writes it, into ai.nee ConvIntegerToFloat
// (ops/quant_conv.h), whose kernel converts the integer sums in one pass
// instead of an int32 Add, a Cast and a Mul of their own:
//
//   c = ConvInteger(x, W, x_zp?, w_zp?)
//   [c = Add(c, b) | Add(b, c)]                      b: int32, the bias quantized at run time
//   y = Mul(Cast(c, to=float), s) | Mul(s, Cast(...))
//   [y = Add(y, bias) | Add(bias, y)]                 bias: float32, as newer releases add it
//     => y = ConvIntegerToFloat(x, W, x_zp, w_zp, s, b, bias)
//
// The fused op rounds as the chain does, so results are unchanged; the
// activation and residual Add after it are fuse-conv-activation's to take.
// Conditions: W of static shape (its dim 0 is the channel count M), c of known
// rank >= 3; b, s and bias of static shapes holding one value or one per
// output channel along the channel axis only (so that none broadcasts c); the
// intermediate values read only by the next node of the chain.
#include "ops/attention_sdpa.h"  // kNeeDomain
#include "ops/quant_conv.h"
#include "opt/pass_manager.h"
#include "opt/rewrite_util.h"

namespace nee {

namespace {
using opt::GraphEditor;

// A value of `type` with static dims that hold one value or one per channel
// of an output of rank `rank` with `channels` channels, on the channel axis.
bool IsChannelOperand(GraphEditor& ed, const std::string& name, DataType type, size_t rank, int64_t channels) {
  const TypeInfo* t = ed.TensorType(name);
  std::vector<int64_t> dims;
  if (!t || t->elem_type != type || !opt::StaticDims(t, &dims) || dims.size() > rank) return false;
  for (size_t d = 0; d < dims.size(); ++d) {
    const size_t axis = rank - dims.size() + d;
    if (dims[d] != 1 && !(axis == 1 && dims[d] == channels)) return false;
  }
  return true;
}

// The single node reading `value`, if it is the plain default-domain `op`.
int64_t NextOp(GraphEditor& ed, const std::string& value, const char* op) {
  const int64_t next = opt::SoleConsumer(ed, value);
  return next >= 0 && opt::IsOp(ed.node(static_cast<size_t>(next)), op) ? next : -1;
}

Status TryFuse(GraphEditor& ed, size_t index) {
  const Node& conv = ed.node(index);
  if (!opt::IsOp(conv, "ConvInteger") || conv.inputs.size() < 2 || conv.outputs.size() != 1 ||
      opt::HasOtherAttributes(conv, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}))
    return Status::Ok();
  std::vector<int64_t> w_dims;
  const TypeInfo* c_type = ed.TensorType(conv.outputs[0]);
  if (!opt::StaticDims(ed.TensorType(conv.inputs[1]), &w_dims) || w_dims.size() < 3 || !c_type || !c_type->shape ||
      c_type->shape->size() != w_dims.size())
    return Status::Ok();
  const size_t rank = w_dims.size();
  const int64_t channels = w_dims[0];

  // The optional int32 bias Add.
  std::string sums = conv.outputs[0], bias;
  const int64_t add = NextOp(ed, sums, "Add");
  if (add >= 0) {
    if (!opt::IsBinary(ed, add, "Add")) return Status::Ok();
    const std::string other = opt::OtherInput(ed.node(static_cast<size_t>(add)), sums);
    if (other.empty() || !IsChannelOperand(ed, other, DataType::kInt32, rank, channels)) return Status::Ok();
    bias = other;
    sums = ed.node(static_cast<size_t>(add)).outputs[0];
  }
  // Cast to float, read only by the scale's Mul.
  const int64_t cast = NextOp(ed, sums, "Cast");
  if (cast < 0) return Status::Ok();
  const Node& cast_node = ed.node(static_cast<size_t>(cast));
  auto to = cast_node.GetInt("to", 0);
  if (cast_node.outputs.size() != 1 || !to.ok() || to.value() != static_cast<int64_t>(DataType::kFloat) ||
      opt::HasOtherAttributes(cast_node, {"to", "saturate"}))
    return Status::Ok();
  const int64_t mul = opt::SoleConsumer(ed, cast_node.outputs[0]);
  if (!opt::IsBinary(ed, mul, "Mul")) return Status::Ok();
  const std::string scale = opt::OtherInput(ed.node(static_cast<size_t>(mul)), cast_node.outputs[0]);
  if (scale.empty() || !IsChannelOperand(ed, scale, DataType::kFloat, rank, channels)) return Status::Ok();

  // The optional float bias Add.
  size_t last = static_cast<size_t>(mul);
  std::string float_bias;
  const int64_t bias_add = NextOp(ed, ed.node(last).outputs[0], "Add");
  if (opt::IsBinary(ed, bias_add, "Add")) {
    const std::string other = opt::OtherInput(ed.node(static_cast<size_t>(bias_add)), ed.node(last).outputs[0]);
    if (!other.empty() && IsChannelOperand(ed, other, DataType::kFloat, rank, channels)) {
      float_bias = other;
      last = static_cast<size_t>(bias_add);
    }
  }

  std::vector<std::string> inputs = {conv.inputs[0], conv.inputs[1], conv.HasInput(2) ? conv.inputs[2] : "",
                                     conv.HasInput(3) ? conv.inputs[3] : "", scale, bias, float_bias};
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  std::vector<Attribute> attributes = conv.attributes;
  ed.RemoveNode(index);
  if (add >= 0) ed.RemoveNode(static_cast<size_t>(add));
  ed.RemoveNode(static_cast<size_t>(cast));
  if (last != static_cast<size_t>(mul)) ed.RemoveNode(static_cast<size_t>(mul));
  ed.RewriteAs(last, kNeeDomain, "ConvIntegerToFloat", inputs, std::move(attributes));
  return Status::Ok();
}
}  // namespace

Status FuseQuantConv(Graph& graph, const CheckedGraph& checked, bool* changed) {
  GraphEditor ed(graph, checked);
  for (size_t index : checked.order)
    if (!ed.removed(index)) NEE_RETURN_IF_ERROR(TryFuse(ed, index));
  *changed = ed.Commit();
  return Status::Ok();
}

}  // namespace nee
