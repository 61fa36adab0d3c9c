// The opset converter's adapters: one short function per (op, version step)
// and direction whose change the generic rule (opset_convert.cc) cannot make,
// listed in kAdapters at the end. `up` moves a node from the version before
// `since` into `since`; `down` moves it back. Nodes an adapter adds are
// written for the final target opset (StepCtx::target), so the helpers below
// pick the attribute or input form that opset wants.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ir/convert.h"
#include "opt/opset_adapters.h"

namespace nee::opset {
namespace {

// ---- Helpers --------------------------------------------------------------

Result<std::vector<int64_t>> Ints(const Tensor& t) { return t.ToInt64Vector(); }

Result<std::vector<float>> Floats(const Tensor& t) {
  NEE_ASSIGN_OR_RETURN(Tensor f, Tensor::Allocate(DataType::kFloat, t.dims()));
  NEE_RETURN_IF_ERROR(ConvertTensor(t, f));
  return std::vector<float>(f.data<float>(), f.data<float>() + f.num_elements());
}

Tensor FloatTensor(const std::vector<float>& v) { return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size())}); }

// An attribute that became an input: int64 constant in its place (absent attribute -> omitted input).
void IntsAttrToInput(StepCtx& c, const char* attr, size_t index) {
  const Attribute* a = c.node.FindAttr(attr);
  if (c.node.inputs.size() <= index) c.node.inputs.resize(index + 1);
  if (a) c.node.inputs[index] = c.ConstInts(a->ints, attr);
  RemoveAttr(c.node, attr);
  while (!c.node.inputs.empty() && c.node.inputs.back().empty()) c.node.inputs.pop_back();
}

// An input that was an attribute: must be a constant.
Status IntsInputToAttr(StepCtx& c, const char* attr, size_t index) {
  NEE_ASSIGN_OR_RETURN(Tensor t, c.ConstantInput(index, attr));
  if (t.defined()) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> v, Ints(t));
    SetAttr(c.node, IntsAttr(attr, v));
  }
  if (c.node.inputs.size() > index) c.node.inputs.resize(index);
  return Status::Ok();
}

// ReduceMean / Unsqueeze / Squeeze with `axes` in the form the target opset wants.
std::string AxesOp(StepCtx& c, const std::string& op, const std::string& x, const std::vector<int64_t>& axes,
                   std::vector<Attribute> attrs, const std::string& hint, bool put_after = false) {
  const int64_t input_form = op == "ReduceSum" ? 13 : op.rfind("Reduce", 0) == 0 ? 18 : 13;
  std::vector<std::string> inputs = {x};
  if (c.target >= input_form) inputs.push_back(c.ConstInts(axes, hint + "_axes"));
  else attrs.push_back(IntsAttr("axes", axes));
  return c.Emit(op, inputs, attrs, hint, put_after);
}

// ---- Softmax, LogSoftmax, Hardmax 13: from "coerce to 2-D at axis" to "one axis" ----

Status SoftmaxUp(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t axis, c.node.GetInt("axis", 1));
  const int64_t rank = c.scope.Rank(c.node.inputs[0]);
  if (axis == -1 || (rank >= 0 && NormalizeAxis(axis, rank) == rank - 1)) {
    SetAttr(c.node, IntAttr("axis", rank >= 0 ? rank - 1 : -1));
    return Status::Ok();
  }
  // Flatten at the axis, normalize over the second dim, reshape back.
  const std::string x = c.node.inputs[0];
  const std::string flat = c.Emit("Flatten", {x}, {IntAttr("axis", axis)}, "flatten");
  const std::string shape = c.Emit("Shape", {x}, {}, "shape", true);
  const std::string y = c.node.outputs[0];
  const std::string y2d = c.scope.Fresh(y + "_2d");
  c.Emit("Reshape", {y2d, shape}, {}, "reshape", true, y);
  c.node.inputs[0] = flat;
  c.node.outputs[0] = y2d;
  SetAttr(c.node, IntAttr("axis", 1));
  return Status::Ok();
}

Status SoftmaxDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t axis, c.node.GetInt("axis", -1));
  const int64_t rank = c.scope.Rank(c.node.inputs[0]);
  if (rank < 0) {
    if (axis != -1) return c.Fail("axis " + std::to_string(axis) + " needs the input's rank, which is unknown");
    if (c.target < 11) return c.Fail("the input's rank is unknown (a negative axis needs opset 11)");
    SetAttr(c.node, IntAttr("axis", -1));
    return Status::Ok();
  }
  const int64_t a = NormalizeAxis(axis, rank);
  SetAttr(c.node, IntAttr("axis", rank - 1));
  if (a == rank - 1) return Status::Ok();
  // Move the axis last, normalize over it, move it back (a swap is its own inverse).
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(a)], perm.back());
  c.node.inputs[0] = c.Emit("Transpose", {c.node.inputs[0]}, {IntsAttr("perm", perm)}, "to_last");
  const std::string y = c.node.outputs[0];
  c.node.outputs[0] = c.scope.Fresh(y + "_last");
  c.Emit("Transpose", {c.node.outputs[0]}, {IntsAttr("perm", perm)}, "back", true, y);
  return Status::Ok();
}

// ---- Attributes that became inputs ----------------------------------------

Status ReshapeUp(StepCtx& c) {
  IntsAttrToInput(c, "shape", 1);
  return Status::Ok();
}
Status ReshapeDown(StepCtx& c) { return IntsInputToAttr(c, "shape", 1); }

Status PadUp(StepCtx& c) {
  const Attribute* pads = c.node.FindAttr("pads");
  if (!pads) return c.Fail("attribute 'pads' is missing");
  NEE_ASSIGN_OR_RETURN(float value, c.node.GetFloat("value", 0.0f));
  std::vector<std::string> inputs = {c.node.inputs[0], c.ConstInts(pads->ints, "pads")};
  if (value != 0.0f) {
    NEE_ASSIGN_OR_RETURN(std::string v, c.ConstScalar(c.scope.ElemType(c.node.inputs[0]), value, "value"));
    inputs.push_back(v);
  }
  c.node.inputs = inputs;
  RemoveAttr(c.node, "pads");
  RemoveAttr(c.node, "value");
  return Status::Ok();
}
Status PadDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(Tensor pads, c.ConstantInput(1, "pads"));
  NEE_ASSIGN_OR_RETURN(Tensor value, c.ConstantInput(2, "constant_value"));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> p, Ints(pads));
  SetAttr(c.node, IntsAttr("pads", p));
  if (value.defined() && value.num_elements() > 0) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> v, Floats(value));
    if (v[0] != 0.0f) SetAttr(c.node, opt::FloatAttr("value", v[0]));
  }
  c.node.inputs.resize(1);
  return Status::Ok();
}
// Pad 18 added `axes`: going back, the pads of the listed axes are spread over every axis.
Status Pad18Down(StepCtx& c) {
  Node& n = c.node;
  if (!n.HasInput(3)) {
    n.inputs.resize(std::min<size_t>(n.inputs.size(), 3));
    return Status::Ok();
  }
  NEE_ASSIGN_OR_RETURN(Tensor axes_t, c.ConstantInput(3, "axes"));
  NEE_ASSIGN_OR_RETURN(Tensor pads_t, c.ConstantInput(1, "pads"));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, Ints(axes_t));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, Ints(pads_t));
  const int64_t rank = c.scope.Rank(n.inputs[0]);
  if (rank < 0) return c.Fail("the rank of its input is unknown, so its axes cannot be spread out");
  if (pads.size() != 2 * axes.size()) return c.Fail("pads does not hold two values per axis");
  std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = NormalizeAxis(axes[i], rank);
    if (a < 0 || a >= rank) return c.Fail("axis " + std::to_string(axes[i]) + " is out of range");
    full[static_cast<size_t>(a)] = pads[i];
    full[static_cast<size_t>(a + rank)] = pads[i + axes.size()];
  }
  n.inputs[1] = c.ConstInts(full, "pads");
  n.inputs.resize(3);
  while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
  return Status::Ok();
}

Status Pad19Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string mode, c.node.GetString("mode", "constant"));
  if (mode == "wrap") return c.Fail("mode 'wrap' exists from Pad-19 only");
  return Status::Ok();
}

Status SliceUp(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> starts, c.node.GetInts("starts"));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> ends, c.node.GetInts("ends"));
  std::vector<std::string> inputs = {c.node.inputs[0], c.ConstInts(starts, "starts"), c.ConstInts(ends, "ends")};
  if (const Attribute* axes = c.node.FindAttr("axes")) inputs.push_back(c.ConstInts(axes->ints, "axes"));
  c.node.inputs = inputs;
  for (const char* a : {"starts", "ends", "axes"}) RemoveAttr(c.node, a);
  return Status::Ok();
}
Status SliceDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(Tensor steps, c.ConstantInput(4, "steps"));
  if (steps.defined()) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> s, Ints(steps));
    if (std::any_of(s.begin(), s.end(), [](int64_t v) { return v != 1; }))
      return c.Fail("steps other than 1 exist from Slice-10 only");
  }
  c.node.inputs.resize(std::min<size_t>(c.node.inputs.size(), 4));
  NEE_RETURN_IF_ERROR(IntsInputToAttr(c, "axes", 3));
  NEE_RETURN_IF_ERROR(IntsInputToAttr(c, "ends", 2));
  return IntsInputToAttr(c, "starts", 1);
}

Status ClipUp(StepCtx& c) {
  const Attribute* lo = c.node.FindAttr("min");
  const Attribute* hi = c.node.FindAttr("max");
  const DataType type = c.scope.ElemType(c.node.inputs[0]);
  c.node.inputs.resize(1);
  if (lo) {
    NEE_ASSIGN_OR_RETURN(std::string v, c.ConstScalar(type, lo->f, "min"));
    c.node.inputs.push_back(v);
  }
  if (hi) {
    if (!lo) c.node.inputs.push_back("");
    NEE_ASSIGN_OR_RETURN(std::string v, c.ConstScalar(type, hi->f, "max"));
    c.node.inputs.push_back(v);
  }
  RemoveAttr(c.node, "min");
  RemoveAttr(c.node, "max");
  return Status::Ok();
}
Status ClipDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(Tensor lo, c.ConstantInput(1, "min"));
  NEE_ASSIGN_OR_RETURN(Tensor hi, c.ConstantInput(2, "max"));
  if (lo.defined()) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> v, Floats(lo));
    SetAttr(c.node, opt::FloatAttr("min", v.at(0)));
  }
  if (hi.defined()) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> v, Floats(hi));
    SetAttr(c.node, opt::FloatAttr("max", v.at(0)));
  }
  c.node.inputs.resize(1);
  return Status::Ok();
}

Status AxesUp(StepCtx& c) {
  IntsAttrToInput(c, "axes", 1);
  return Status::Ok();
}
Status AxesDown(StepCtx& c) { return IntsInputToAttr(c, "axes", 1); }

// Reduce* with noop_with_empty_axes: going back to the attribute form, "no axes and no-op" is an Identity.
Status ReduceUp(StepCtx& c) {
  IntsAttrToInput(c, "axes", 1);
  return Status::Ok();
}
Status ReduceDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t noop, c.node.GetInt("noop_with_empty_axes", 0));
  RemoveAttr(c.node, "noop_with_empty_axes");
  NEE_ASSIGN_OR_RETURN(Tensor axes, c.ConstantInput(1, "axes"));
  if (noop && (!axes.defined() || axes.num_elements() == 0)) {
    c.node.op_type = "Identity";
    c.node.inputs.resize(1);
    c.node.attributes.clear();
    return Status::Ok();
  }
  return IntsInputToAttr(c, "axes", 1);
}

Status SplitUp(StepCtx& c) {
  IntsAttrToInput(c, "split", 1);
  return Status::Ok();
}
Status SplitDown(StepCtx& c) { return IntsInputToAttr(c, "split", 1); }
// Split 18: without `split`, `num_outputs` is required (and may leave a smaller last chunk).
Status Split18Up(StepCtx& c) {
  if (!c.node.HasInput(1)) SetAttr(c.node, IntAttr("num_outputs", static_cast<int64_t>(c.node.outputs.size())));
  return Status::Ok();
}
Status Split18Down(StepCtx& c) {
  if (!c.node.HasAttr("num_outputs")) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(int64_t n, c.node.GetInt("num_outputs"));
  NEE_ASSIGN_OR_RETURN(int64_t axis, c.node.GetInt("axis", 0));
  RemoveAttr(c.node, "num_outputs");
  std::vector<int64_t> dims;
  if (c.scope.Dims(c.node.inputs[0], &dims)) {
    const int64_t d = dims.at(static_cast<size_t>(NormalizeAxis(axis, static_cast<int64_t>(dims.size()))));
    if (n > 0 && d % n != 0) {  // uneven: the sizes spelled out
      const int64_t chunk = (d + n - 1) / n;
      std::vector<int64_t> split;
      for (int64_t i = 0; i < n; ++i) split.push_back(std::clamp<int64_t>(d - i * chunk, 0, chunk));
      c.node.inputs.resize(1);
      c.node.inputs.push_back(c.ConstInts(split, "split"));  // Split-13's step makes it an attribute if need be
    }
  }
  return Status::Ok();  // even split: the older default
}

Status TopKUp(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t k, c.node.GetInt("k"));
  c.node.inputs.resize(1);
  c.node.inputs.push_back(c.ConstInts({k}, "k"));
  RemoveAttr(c.node, "k");
  return Status::Ok();
}
Status TopKDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(Tensor k, c.ConstantInput(1, "k"));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> v, Ints(k));
  if (v.size() != 1) return c.Fail("k must hold one value");
  SetAttr(c.node, IntAttr("k", v[0]));
  c.node.inputs.resize(1);
  return Status::Ok();
}

Status DropoutUp(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(float ratio, c.node.GetFloat("ratio", 0.5f));
  RemoveAttr(c.node, "ratio");
  c.node.inputs.resize(1);
  if (ratio != 0.5f) c.node.inputs.push_back(c.Const(Tensor::Scalar<float>(ratio), "ratio"));
  return Status::Ok();
}
Status DropoutDown(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(Tensor training, c.ConstantInput(2, "training_mode"));
  if (training.defined()) {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> t, Ints(training));
    if (!t.empty() && t[0]) return c.Fail("training_mode is true; the older Dropout only infers");
  }
  NEE_ASSIGN_OR_RETURN(Tensor ratio, c.ConstantInput(1, "ratio"));
  if (ratio.defined()) {
    NEE_ASSIGN_OR_RETURN(std::vector<float> r, Floats(ratio));
    SetAttr(c.node, opt::FloatAttr("ratio", r.at(0)));
  }
  RemoveAttr(c.node, "seed");
  c.node.inputs.resize(1);
  return Status::Ok();
}

// ---- Upsample and Resize --------------------------------------------------

Status Upsample9Up(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::vector<float> scales, c.node.GetFloats("scales"));
  RemoveAttr(c.node, "scales");
  c.node.inputs.resize(1);
  c.node.inputs.push_back(c.Const(FloatTensor(scales), "scales"));
  return Status::Ok();
}
Status Upsample9Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(Tensor scales, c.ConstantInput(1, "scales"));
  NEE_ASSIGN_OR_RETURN(std::vector<float> s, Floats(scales));
  Attribute a;
  a.name = "scales";
  a.type = AttrType::kFloats;
  a.floats = s;
  SetAttr(c.node, a);
  c.node.inputs.resize(1);
  return Status::Ok();
}
// Upsample is gone from opset 10: Resize-10 has the same inputs and modes.
Status UpsampleToResize(StepCtx& c) {
  c.node.op_type = "Resize";
  return Status::Ok();
}
Status ResizeToUpsample(StepCtx& c) {
  c.node.op_type = "Upsample";
  return Status::Ok();
}
// Resize-10 sampled asymmetrically (x_in = x_out / scale), nearest rounding down.
Status Resize11Up(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string mode, c.node.GetString("mode", "nearest"));
  const std::string scales = c.node.inputs.at(1);
  c.node.inputs = {c.node.inputs[0], c.Const(FloatTensor({}), "roi"), scales};
  SetAttr(c.node, opt::StringAttr("coordinate_transformation_mode", "asymmetric"));
  if (mode == "nearest") SetAttr(c.node, opt::StringAttr("nearest_mode", "floor"));
  return Status::Ok();
}
Status Resize11Down(StepCtx& c) {
  Node& n = c.node;
  NEE_ASSIGN_OR_RETURN(std::string mode, n.GetString("mode", "nearest"));
  NEE_ASSIGN_OR_RETURN(std::string coord, n.GetString("coordinate_transformation_mode", "half_pixel"));
  NEE_ASSIGN_OR_RETURN(std::string nearest, n.GetString("nearest_mode", "round_prefer_floor"));
  if (mode == "cubic") return c.Fail("mode 'cubic' exists from Resize-11 only");
  if (n.HasInput(3)) return c.Fail("output 'sizes' exist from Resize-11 only; Resize-10 takes scales");
  if (!n.HasInput(2)) return c.Fail("it has no scales");
  bool same = coord == "asymmetric" && (mode != "nearest" || nearest == "floor");
  if (!same && mode == "nearest" && nearest == "round_prefer_floor" && coord == "half_pixel") {
    // With whole-number scales, half-pixel centers rounded half down pick the same pixels as flooring.
    if (const Tensor* s = c.scope.Constant(n.inputs[2])) {
      NEE_ASSIGN_OR_RETURN(std::vector<float> v, Floats(*s));
      same = std::all_of(v.begin(), v.end(), [](float x) { return x >= 1 && x == std::floor(x); });
    }
  }
  if (!same)
    return c.Fail("coordinate_transformation_mode '" + coord + "'" +
                  (mode == "nearest" ? " with nearest_mode '" + nearest + "'" : std::string()) +
                  " has no Resize-10 equivalent (it samples asymmetrically, nearest rounding down)");
  n.inputs = {n.inputs[0], n.inputs[2]};
  for (const char* a : {"coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                        "extrapolation_value", "nearest_mode"})
    RemoveAttr(n, a);
  return Status::Ok();
}
Status Resize13Up(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string coord, c.node.GetString("coordinate_transformation_mode", "half_pixel"));
  if (coord == "tf_half_pixel_for_nn") return c.Fail("coordinate_transformation_mode 'tf_half_pixel_for_nn' was removed");
  // roi and scales became optional: an empty constant may simply be left out.
  return Status::Ok();
}
Status Resize13Down(StepCtx& c) {
  Node& n = c.node;
  n.inputs.resize(std::max<size_t>(n.inputs.size(), 3));
  if (n.inputs[1].empty()) n.inputs[1] = c.Const(FloatTensor({}), "roi");
  if (n.inputs[2].empty()) n.inputs[2] = c.Const(FloatTensor({}), "scales");
  while (n.inputs.size() > 3 && n.inputs.back().empty()) n.inputs.pop_back();
  return Status::Ok();
}
Status Resize19Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string coord, c.node.GetString("coordinate_transformation_mode", "half_pixel"));
  if (coord == "half_pixel_symmetric") return c.Fail("'half_pixel_symmetric' exists from Resize-19 only");
  return Status::Ok();
}

// ---- Normalization --------------------------------------------------------

Status BatchNorm9Up(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t spatial, c.node.GetInt("spatial", 1));
  if (!spatial) return c.Fail("spatial=0 (per-element statistics) was removed in BatchNormalization-9");
  RemoveAttr(c.node, "spatial");
  return Status::Ok();
}
Status BatchNorm14Up(StepCtx& c) {
  for (size_t i = 1; i < c.node.outputs.size(); ++i)
    if (!c.node.outputs[i].empty()) return c.Fail("its training outputs are used; BatchNormalization-14 changed them");
  c.node.outputs.resize(1);
  return Status::Ok();
}
Status BatchNorm14Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t training, c.node.GetInt("training_mode", 0));
  if (training) return c.Fail("training_mode=1 has no equivalent before BatchNormalization-14");
  RemoveAttr(c.node, "training_mode");
  c.node.outputs.resize(1);
  return Status::Ok();
}

// GroupNormalization 21: scale and bias per channel instead of per group.
Status GroupNorm21Up(StepCtx& c) {
  Node& n = c.node;
  NEE_ASSIGN_OR_RETURN(int64_t groups, n.GetInt("num_groups"));
  std::vector<int64_t> dims;
  const int64_t rank = c.scope.Rank(n.inputs[0]);
  const TypeInfo* t = c.scope.Type(n.inputs[0]);
  if (rank < 2 || (*t->shape)[1].value < 0)
    return c.Fail("the number of channels of its input is unknown, so scale and bias cannot be spread over them");
  const int64_t channels = (*t->shape)[1].value;
  if (groups <= 0 || channels % groups) return c.Fail("channels are not a multiple of num_groups");
  for (size_t i = 1; i <= 2; ++i) {
    // [G] -> [G, 1] -> Expand [G, C/G] -> [C]
    const std::string g1 = AxesOp(c, "Unsqueeze", n.inputs[i], {1}, {}, i == 1 ? "scale_g1" : "bias_g1");
    const std::string e = c.Emit("Expand", {g1, c.ConstInts({groups, channels / groups}, "per_group")}, {},
                                 i == 1 ? "scale_expand" : "bias_expand");
    n.inputs[i] = c.Emit("Reshape", {e, c.ConstInts({channels}, "channels")}, {}, i == 1 ? "scale_c" : "bias_c");
  }
  return Status::Ok();
}
// LayerNormalization (from opset 17): mean and variance over the axes from `axis` on.
Status LayerNormDown(StepCtx& c) {
  Node& n = c.node;
  NEE_ASSIGN_OR_RETURN(int64_t axis, n.GetInt("axis", -1));
  NEE_ASSIGN_OR_RETURN(float epsilon, n.GetFloat("epsilon", 1e-5f));
  const std::string x = n.inputs[0];
  const int64_t rank = c.scope.Rank(x);
  const DataType type = c.scope.ElemType(x);
  std::vector<int64_t> axes;
  if (rank >= 0) {
    for (int64_t a = NormalizeAxis(axis, rank); a < rank; ++a) axes.push_back(a);
  } else if (axis == -1 && c.target >= 11) {
    axes = {-1};
  } else {
    return c.Fail("the rank of its input is unknown");
  }
  NEE_ASSIGN_OR_RETURN(std::string eps, c.ConstScalar(type, epsilon, "epsilon"));
  const std::string mean = AxesOp(c, "ReduceMean", x, axes, {IntAttr("keepdims", 1)}, "mean");
  if (n.HasOutput(1)) c.Emit("Identity", {mean}, {}, "mean_out", false, n.outputs[1]);
  const std::string d = c.Emit("Sub", {x, mean}, {}, "centered");
  const std::string sq = c.Emit("Mul", {d, d}, {}, "squared");
  const std::string var = AxesOp(c, "ReduceMean", sq, axes, {IntAttr("keepdims", 1)}, "variance");
  const std::string ve = c.Emit("Add", {var, eps}, {}, "variance_eps");
  const std::string sd = c.Emit("Sqrt", {ve}, {}, "stddev");
  if (n.HasOutput(2)) c.Emit("Reciprocal", {sd}, {}, "inv_stddev", false, n.outputs[2]);
  const std::string normalized = c.Emit("Div", {d, sd}, {}, "normalized");
  if (n.HasInput(2)) {
    const std::string scaled = c.Emit("Mul", {normalized, n.inputs[1]}, {}, "scaled");
    c.Emit("Add", {scaled, n.inputs[2]}, {}, "biased", false, n.outputs[0]);
  } else {
    c.Emit("Mul", {normalized, n.inputs[1]}, {}, "scaled", false, n.outputs[0]);
  }
  c.replaced = true;
  return Status::Ok();
}

// Gelu (from opset 20): 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation.
Status GeluDown(StepCtx& c) {
  Node& n = c.node;
  NEE_ASSIGN_OR_RETURN(std::string approximate, n.GetString("approximate", "none"));
  const std::string x = n.inputs[0];
  const DataType type = c.scope.ElemType(x);
  NEE_ASSIGN_OR_RETURN(std::string half, c.ConstScalar(type, 0.5, "half"));
  NEE_ASSIGN_OR_RETURN(std::string one, c.ConstScalar(type, 1.0, "one"));
  std::string inner;
  if (approximate == "tanh") {
    NEE_ASSIGN_OR_RETURN(std::string k, c.ConstScalar(type, 0.044715, "cubic"));
    NEE_ASSIGN_OR_RETURN(std::string s, c.ConstScalar(type, std::sqrt(2.0 / M_PI), "sqrt_2_over_pi"));
    const std::string x2 = c.Emit("Mul", {x, x}, {}, "x2");
    const std::string x3 = c.Emit("Mul", {x2, x}, {}, "x3");
    const std::string kx3 = c.Emit("Mul", {x3, k}, {}, "kx3");
    const std::string sum = c.Emit("Add", {x, kx3}, {}, "sum");
    const std::string arg = c.Emit("Mul", {sum, s}, {}, "arg");
    inner = c.Emit("Tanh", {arg}, {}, "tanh");
  } else {
    if (c.target < 9) return c.Fail("Erf, which the decomposition needs, exists from opset 9 on");
    NEE_ASSIGN_OR_RETURN(std::string r, c.ConstScalar(type, M_SQRT1_2, "inv_sqrt2"));
    const std::string arg = c.Emit("Mul", {x, r}, {}, "arg");
    inner = c.Emit("Erf", {arg}, {}, "erf");
  }
  const std::string plus = c.Emit("Add", {inner, one}, {}, "plus_one");
  const std::string hx = c.Emit("Mul", {x, half}, {}, "half_x");
  c.Emit("Mul", {hx, plus}, {}, "gelu", false, n.outputs[0]);
  c.replaced = true;
  return Status::Ok();
}

// ---- Renamed ops, changed attribute values ---------------------------------

Status ScatterToScatterElements(StepCtx& c) {
  c.node.op_type = "ScatterElements";
  return Status::Ok();
}
Status ScatterElementsToScatter(StepCtx& c) {
  c.node.op_type = "Scatter";
  return Status::Ok();
}

Status GridSample20Up(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string mode, c.node.GetString("mode", "bilinear"));
  SetAttr(c.node, opt::StringAttr("mode", mode == "bilinear" ? "linear" : mode == "bicubic" ? "cubic" : mode));
  return Status::Ok();
}
Status GridSample20Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string mode, c.node.GetString("mode", "linear"));
  const int64_t rank = c.scope.Rank(c.node.inputs[0]);
  if (rank != 4) return c.Fail(rank < 0 ? "its input's rank is unknown (GridSample-16 is 2-D only)"
                                        : "GridSample-16 samples 4-D inputs only");
  SetAttr(c.node, opt::StringAttr("mode", mode == "linear" ? "bilinear" : mode == "cubic" ? "bicubic" : mode));
  return Status::Ok();
}

// Shape 15 added start / end: a Slice of the whole shape.
Status Shape15Down(StepCtx& c) {
  Node& n = c.node;
  if (!n.HasAttr("start") && !n.HasAttr("end")) return Status::Ok();
  NEE_ASSIGN_OR_RETURN(int64_t start, n.GetInt("start", 0));
  NEE_ASSIGN_OR_RETURN(int64_t end, n.GetInt("end", INT64_MAX));
  if (c.target < 10 && (start < 0 || end < 0)) {
    const int64_t rank = c.scope.Rank(n.inputs[0]);
    if (rank < 0) return c.Fail("its negative start / end need the input's rank, which is unknown");
    start = std::clamp<int64_t>(NormalizeAxis(start, rank), 0, rank);
    if (end != INT64_MAX) end = std::clamp<int64_t>(NormalizeAxis(end, rank), 0, rank);
  }
  RemoveAttr(n, "start");
  RemoveAttr(n, "end");
  const std::string y = n.outputs[0];
  n.outputs[0] = c.scope.Fresh(y + "_full");
  if (c.target >= 10)
    c.Emit("Slice", {n.outputs[0], c.ConstInts({start}, "start"), c.ConstInts({end}, "end")}, {}, "slice", true, y);
  else
    c.Emit("Slice", {n.outputs[0]}, {IntsAttr("starts", {start}), IntsAttr("ends", {end})}, "slice", true, y);
  return Status::Ok();
}

// CastLike (from opset 15): a Cast to the second input's element type, when known.
Status CastLikeDown(StepCtx& c) {
  Node& n = c.node;
  const DataType type = c.scope.ElemType(n.inputs.at(1));
  if (type == DataType::kUndefined) return c.Fail("the element type of its target_type input is unknown");
  if (c.target < 13 && (type == DataType::kBFloat16 || c.scope.ElemType(n.inputs[0]) == DataType::kBFloat16))
    return c.Fail("Cast takes bfloat16 from opset 13 only");
  std::vector<Attribute> attrs = {IntAttr("to", static_cast<int64_t>(type))};
  if (const Attribute* sat = n.FindAttr("saturate")) attrs.push_back(*sat);
  c.Emit("Cast", {n.inputs[0]}, attrs, "cast", false, n.outputs[0]);
  c.replaced = true;
  return Status::Ok();
}

// RoiAlign 16 added coordinate_transformation_mode, whose default (half_pixel) is not what RoiAlign-10 did.
Status RoiAlign16Up(StepCtx& c) {
  if (!c.node.HasAttr("coordinate_transformation_mode"))
    SetAttr(c.node, opt::StringAttr("coordinate_transformation_mode", "output_half_pixel"));
  return Status::Ok();
}
Status RoiAlign16Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(std::string mode, c.node.GetString("coordinate_transformation_mode", "half_pixel"));
  if (mode != "output_half_pixel") return c.Fail("coordinate_transformation_mode '" + mode + "' exists from RoiAlign-16 only");
  RemoveAttr(c.node, "coordinate_transformation_mode");
  return Status::Ok();
}

// Mod 28 defines fmod=0 on floating-point inputs, which earlier versions rejected.
Status Mod28Down(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t fmod, c.node.GetInt("fmod", 0));
  const DataType type = c.scope.ElemType(c.node.inputs[0]);
  if (fmod) return Status::Ok();
  if (type == DataType::kUndefined) return c.Fail("fmod=0 and the element type is unknown (floats need Mod-28)");
  if (IsFloatingPoint(type)) return c.Fail("fmod=0 on floating-point inputs is defined from Mod-28 only");
  return Status::Ok();
}

// MaxPool / AveragePool 22: with ceil_mode, a last window starting in the end padding is dropped, which
// changes the output size of some shapes; only ceil_mode=0 keeps its meaning across the step.
Status Pool22(StepCtx& c) {
  NEE_ASSIGN_OR_RETURN(int64_t ceil_mode, c.node.GetInt("ceil_mode", 0));
  if (ceil_mode) return c.Fail("the output size with ceil_mode=1 changed at version 22");
  return Status::Ok();
}

// Constant 12 added value_float(s) / value_int(s) / value_string(s): back to a tensor.
Status ConstantDown(StepCtx& c) {
  Node& n = c.node;
  Tensor t;
  if (const Attribute* a = n.FindAttr("value_float")) t = Tensor::Scalar<float>(a->f);
  else if (const Attribute* a = n.FindAttr("value_floats"))
    t = Tensor::FromVector<float>(a->floats, {static_cast<int64_t>(a->floats.size())});
  else if (const Attribute* a = n.FindAttr("value_int")) t = Tensor::Scalar<int64_t>(a->i);
  else if (const Attribute* a = n.FindAttr("value_ints"))
    t = Tensor::FromVector<int64_t>(a->ints, {static_cast<int64_t>(a->ints.size())});
  else if (const Attribute* a = n.FindAttr("value_string")) t = Tensor::Scalar<std::string>(a->s);
  else if (const Attribute* a = n.FindAttr("value_strings"))
    t = Tensor::FromVector<std::string>(a->strings, {static_cast<int64_t>(a->strings.size())});
  else if (n.HasAttr("sparse_value")) return c.Fail("sparse_value has no equivalent before Constant-11");
  else return Status::Ok();
  Attribute v;
  v.name = "value";
  v.type = AttrType::kTensor;
  v.t = t;
  n.attributes = {v};
  return Status::Ok();
}

// Max / Min / Mean / Sum broadcast from opset 8; before, every input had one shape.
Status VariadicDown(StepCtx& c) {
  std::vector<int64_t> first, dims;
  for (size_t i = 0; i < c.node.inputs.size(); ++i) {
    if (!c.scope.Dims(c.node.inputs[i], &dims) || (i && dims != first))
      return c.Fail("its inputs may broadcast, which the older version does not");
    if (!i) first = dims;
  }
  return Status::Ok();
}

const Adapter kAdapters[] = {
    {"AveragePool", 22, Pool22, Pool22},
    {"BatchNormalization", 9, BatchNorm9Up, nullptr},
    {"BatchNormalization", 14, BatchNorm14Up, BatchNorm14Down},
    {"CastLike", 15, nullptr, CastLikeDown},
    {"Clip", 11, ClipUp, ClipDown},
    {"Constant", 12, nullptr, ConstantDown},
    {"Dropout", 12, DropoutUp, DropoutDown},
    {"Gelu", 20, nullptr, GeluDown},
    {"GridSample", 20, GridSample20Up, GridSample20Down},
    {"GroupNormalization", 21, GroupNorm21Up, nullptr},  // down: GroupNormalization-18 is deprecated
    {"Hardmax", 13, SoftmaxUp, SoftmaxDown},
    {"LayerNormalization", 17, nullptr, LayerNormDown},
    {"LogSoftmax", 13, SoftmaxUp, SoftmaxDown},
    {"Max", 8, nullptr, VariadicDown},
    {"Mean", 8, nullptr, VariadicDown},
    {"MaxPool", 22, Pool22, Pool22},
    {"Min", 8, nullptr, VariadicDown},
    {"Mod", 28, nullptr, Mod28Down},
    {"Pad", 11, PadUp, PadDown},
    {"Pad", 18, nullptr, Pad18Down},
    {"Pad", 19, nullptr, Pad19Down},
    {"ReduceL1", 18, ReduceUp, ReduceDown},
    {"ReduceL2", 18, ReduceUp, ReduceDown},
    {"ReduceLogSum", 18, ReduceUp, ReduceDown},
    {"ReduceLogSumExp", 18, ReduceUp, ReduceDown},
    {"ReduceMax", 18, ReduceUp, ReduceDown},
    {"ReduceMean", 18, ReduceUp, ReduceDown},
    {"ReduceMin", 18, ReduceUp, ReduceDown},
    {"ReduceProd", 18, ReduceUp, ReduceDown},
    {"ReduceSum", 13, ReduceUp, ReduceDown},
    {"ReduceSumSquare", 18, ReduceUp, ReduceDown},
    {"Reshape", 5, ReshapeUp, ReshapeDown},
    {"Resize", 10, nullptr, ResizeToUpsample},
    {"Resize", 11, Resize11Up, Resize11Down},
    {"Resize", 13, Resize13Up, Resize13Down},
    {"Resize", 19, nullptr, Resize19Down},
    {"RoiAlign", 16, RoiAlign16Up, RoiAlign16Down},
    {"Scatter", 11, ScatterToScatterElements, nullptr},
    {"ScatterElements", 11, nullptr, ScatterElementsToScatter},
    {"Shape", 15, nullptr, Shape15Down},
    {"Slice", 10, SliceUp, SliceDown},
    {"Softmax", 13, SoftmaxUp, SoftmaxDown},
    {"Split", 13, SplitUp, SplitDown},
    {"Split", 18, Split18Up, Split18Down},
    {"Squeeze", 13, AxesUp, AxesDown},
    {"Sum", 8, nullptr, VariadicDown},
    {"TopK", 10, TopKUp, TopKDown},
    {"Unsqueeze", 13, AxesUp, AxesDown},
    {"Upsample", 9, Upsample9Up, Upsample9Down},
    {"Upsample", 10, UpsampleToResize, nullptr},
};

// Steps whose meaning changes without the spec table showing it (same
// attributes and inputs): the generic rule must not cross them.
struct Semantic {
  const char* op;
  int since;
  bool up, down;
};
const Semantic kSemantic[] = {
    {"Softmax", 13, true, true},   {"LogSoftmax", 13, true, true}, {"Hardmax", 13, true, true},
    {"Resize", 19, false, true},   {"Resize", 13, true, true},     {"GridSample", 20, true, true},
    {"Scan", 8, true, true},       {"Scan", 9, true, true},        {"Max", 8, false, true},
    {"Min", 8, false, true},       {"Mean", 8, false, true},       {"Sum", 8, false, true},
    {"Pad", 19, false, true},      {"Upsample", 10, true, false},  {"GroupNormalization", 21, true, false},
};

}  // namespace

const Adapter* FindAdapter(const std::string& op, int since) {
  for (const Adapter& a : kAdapters)
    if (op == a.op && since == a.since) return &a;
  return nullptr;
}

bool NeedsAdapter(const std::string& op, int since, bool up) {
  for (const Semantic& s : kSemantic)
    if (op == s.op && since == s.since) return up ? s.up : s.down;
  return false;
}

}  // namespace nee::opset
