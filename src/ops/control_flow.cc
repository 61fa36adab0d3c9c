// Operator family: ControlFlow — If, Loop and Scan.
//
// The kernels run their body graphs through ctx.subgraphs(); the session
// resolves the names a body captures from enclosing scopes, so a kernel only
// passes the body's formal inputs. Loop-carried values are copied out of
// whatever buffers the body produced them in (see control_flow_util.h); scan
// outputs are kept by reference until stacked (see OwnedScanElement).
#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "ops/control_flow_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using cf::InferBody;
using cf::TypesEqual;
using cf::UnionTypes;

// ---- Small shared pieces ---------------------------------------------------

Result<SubgraphRunner*> RunnerOf(const KernelContext& ctx) {
  if (!ctx.subgraphs()) return ctx.Error("cannot run its body: no subgraph runner was provided");
  return ctx.subgraphs();
}

// Reads a boolean condition tensor holding exactly one element.
Result<bool> ReadCondition(const KernelContext& ctx, const Value& v, const std::string& what) {
  if (!v.is_tensor() || v.tensor().dtype() != DataType::kBool || v.tensor().num_elements() != 1)
    return ctx.Error(what + " must be a bool tensor with one element, got " + v.Describe());
  return v.tensor().data<bool>()[0];
}

// `iteration` (>= 0 for Loop/Scan) is named in errors: "in body 'b' (iteration 7)".
Result<std::vector<Value>> RunBody(KernelContext& ctx, const Graph& body, const std::vector<Value>& inputs,
                                   size_t expected_outputs, int64_t iteration = -1) {
  NEE_ASSIGN_OR_RETURN(SubgraphRunner * runner, RunnerOf(ctx));
  Result<std::vector<Value>> outs = runner->Run(body, inputs);
  if (!outs.ok()) {
    std::string where = iteration >= 0 ? " (iteration " + std::to_string(iteration) + ")" : "";
    return outs.status().WithContext(ctx.node().Describe() + ": in body '" + body.name + "'" + where + ": ");
  }
  if (outs->size() != expected_outputs)
    return ctx.Error("body '" + body.name + "' produced " + std::to_string(outs->size()) +
                     " outputs, expected " + std::to_string(expected_outputs));
  return outs;
}

// The tensor a per-iteration (scan) output must be. Kept by reference, not
// copied: bodies run without an arena (exec's BodyInvoker), so each body
// output is a fresh heap tensor — counted in the run's memory budget — or an
// immutable value that outlives this node; the next iteration cannot
// overwrite it.
Result<Tensor> OwnedScanElement(const KernelContext& ctx, const Value& v, size_t k) {
  if (!v.is_tensor())
    return ctx.Error("scan output " + std::to_string(k) + " must be a tensor, got " + v.Describe());
  return v.tensor();
}

// Checks that every element has the first one's element type and dims.
Status CheckUniformElements(const KernelContext& ctx, const std::vector<Tensor>& parts, size_t k) {
  for (size_t t = 1; t < parts.size(); ++t) {
    if (parts[t].dtype() != parts[0].dtype() || parts[t].dims() != parts[0].dims())
      return ctx.Error("scan output " + std::to_string(k) + " changed from " + parts[0].Describe() +
                       " in iteration 0 to " + parts[t].Describe() + " in iteration " + std::to_string(t));
  }
  return Status::Ok();
}

// When no iteration ran, a scan output is empty: its element type and the
// dims of one element come from the body's declared output type when known.
// Unknown dims become 0 (the output is empty either way) so the rank matches
// what the shape rule derived from the same declaration.
void EmptyScanElement(const Graph& body, size_t body_output, DataType* dtype, std::vector<int64_t>* dims) {
  *dtype = DataType::kFloat;  // the body declares nothing: float is the ONNX default element type
  dims->clear();
  if (body_output >= body.outputs.size()) return;
  const TypeInfo& t = body.outputs[body_output].type;
  if (!t.is_tensor()) return;
  if (t.elem_type != DataType::kUndefined) *dtype = t.elem_type;
  if (t.shape)
    for (const Dim& d : *t.shape) dims->push_back(d.known() ? d.value : 0);
}

// Stacks per-iteration tensors along `axis` (a new axis) into output i.
// `order_reversed` puts iteration t at position count-1-t.
Status WriteScanOutput(KernelContext& ctx, size_t i, std::vector<Tensor> parts, int64_t axis,
                       bool order_reversed, const Graph& body, size_t body_output) {
  if (parts.empty()) {
    DataType dtype;
    std::vector<int64_t> dims;
    EmptyScanElement(body, body_output, &dtype, &dims);
    if (axis > static_cast<int64_t>(dims.size())) dims.clear();
    dims.insert(dims.begin() + std::min<int64_t>(axis, dims.size()), 0);
    return ctx.AllocateOutput(i, dtype, dims).status();
  }
  NEE_RETURN_IF_ERROR(CheckUniformElements(ctx, parts, i));
  if (order_reversed) std::reverse(parts.begin(), parts.end());
  std::vector<int64_t> dims = parts[0].dims();
  dims.insert(dims.begin() + axis, static_cast<int64_t>(parts.size()));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(i, parts[0].dtype(), dims));
  cf::StackAlongAxis(parts, axis, out);
  return Status::Ok();
}

// A tensor type with dimension `axis` removed (rank unknown stays unknown).
TypeInfo DropAxis(const TypeInfo& t, int64_t axis) {
  TypeInfo out = t;
  if (!t.is_tensor() || !t.shape) return out;
  if (axis < 0) axis += static_cast<int64_t>(t.shape->size());
  if (axis < 0 || axis >= static_cast<int64_t>(t.shape->size())) {
    out.shape.reset();
    return out;
  }
  out.shape->erase(out.shape->begin() + axis);
  return out;
}

// A tensor type with `dim` inserted at `axis` (in [-(rank+1), rank]).
Result<TypeInfo> InsertAxis(const InferenceContext& ictx, const TypeInfo& t, int64_t axis, const Dim& dim,
                            const std::string& what) {
  if (!t.is_tensor()) return TypeInfo{};
  TypeInfo out = t;
  if (!t.shape) return out;
  const int64_t rank = static_cast<int64_t>(t.shape->size());
  if (axis < -(rank + 1) || axis > rank)
    return ictx.Error(what + " axis " + std::to_string(axis) + " is out of range for an element of rank " +
                      std::to_string(rank));
  if (axis < 0) axis += rank + 1;
  out.shape->insert(out.shape->begin() + axis, dim);
  return out;
}

TypeInfo InputTypeOrUnknown(const InferenceContext& ictx, size_t i) {
  return ictx.has_input(i) ? ictx.input_type(i) : TypeInfo{};
}

// ---- If --------------------------------------------------------------------

// The type both branches agree on: same element type, dims kept where equal.
Result<TypeInfo> MergeBranchTypes(const InferenceContext& ictx, const TypeInfo& a, const TypeInfo& b, size_t i) {
  if (a.is_tensor() && b.is_tensor() && a.elem_type != DataType::kUndefined &&
      b.elem_type != DataType::kUndefined && a.elem_type != b.elem_type)
    return ictx.Error("output " + std::to_string(i) + ": then_branch yields " + a.ToString() +
                      " but else_branch yields " + b.ToString());
  return UnionTypes(a, b);
}

// Infers one branch. A branch that is never taken may be invalid for the
// types at hand (a function body guards a Split with an If on the rank, say),
// so when the condition is unknown a failing branch only loses information;
// `failure` keeps its error in case both fail.
std::vector<TypeInfo> InferBranchLeniently(const InferenceContext& ictx, const Graph& branch, Status* failure) {
  Result<std::vector<TypeInfo>> types = InferBody(ictx, branch, {});
  if (types.ok()) return std::move(types).value();
  *failure = types.status();
  return cf::DeclaredOutputTypes(branch);
}

// The condition's value when the checker knows it (a constant or a folded
// shape computation).
std::optional<bool> KnownCondition(const InferenceContext& ictx) {
  const Tensor* cond = ictx.input_value(0);
  if (!cond || cond->dtype() != DataType::kBool || cond->num_elements() != 1) return std::nullopt;
  return cond->data<bool>()[0];
}

Status InferIf(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const Graph* then_branch, ictx.node.GetGraph("then_branch"));
  NEE_ASSIGN_OR_RETURN(const Graph* else_branch, ictx.node.GetGraph("else_branch"));
  if (then_branch->outputs.size() != else_branch->outputs.size())
    return ictx.Error("then_branch has " + std::to_string(then_branch->outputs.size()) +
                      " outputs but else_branch has " + std::to_string(else_branch->outputs.size()));
  if (ictx.num_outputs() > then_branch->outputs.size())
    return ictx.Error("has " + std::to_string(ictx.num_outputs()) + " outputs but its branches yield " +
                      std::to_string(then_branch->outputs.size()));
  if (std::optional<bool> cond = KnownCondition(ictx)) {
    // Only the branch that will run matters (and its errors are real). The
    // other one is still shown to the checker, but its errors are dropped:
    // it may be invalid for these very types (which is why it is not taken).
    Status ignored;
    InferBranchLeniently(ictx, *cond ? *else_branch : *then_branch, &ignored);
    NEE_ASSIGN_OR_RETURN(std::vector<TypeInfo> types, InferBody(ictx, *cond ? *then_branch : *else_branch, {}));
    for (size_t i = 0; i < ictx.num_outputs() && i < types.size(); ++i) ictx.output_types[i] = types[i];
    return Status::Ok();
  }
  Status then_failure, else_failure;
  std::vector<TypeInfo> then_types = InferBranchLeniently(ictx, *then_branch, &then_failure);
  std::vector<TypeInfo> else_types = InferBranchLeniently(ictx, *else_branch, &else_failure);
  if (!then_failure.ok() && !else_failure.ok()) return then_failure;
  for (size_t i = 0; i < ictx.num_outputs() && i < then_types.size() && i < else_types.size(); ++i) {
    NEE_ASSIGN_OR_RETURN(ictx.output_types[i], MergeBranchTypes(ictx, then_types[i], else_types[i], i));
  }
  return Status::Ok();
}

Status IfKernel(KernelContext& ctx) {
  if (!ctx.input(0)) return ctx.InputError(0, "(cond) is required but missing");
  NEE_ASSIGN_OR_RETURN(bool cond, ReadCondition(ctx, *ctx.input(0), "input 0 (cond)"));
  NEE_ASSIGN_OR_RETURN(const Graph* branch, ctx.node().GetGraph(cond ? "then_branch" : "else_branch"));
  if (branch->outputs.size() < ctx.num_outputs())
    return ctx.Error("has " + std::to_string(ctx.num_outputs()) + " outputs but branch '" + branch->name +
                     "' yields " + std::to_string(branch->outputs.size()));
  NEE_ASSIGN_OR_RETURN(std::vector<Value> outs, RunBody(ctx, *branch, {}, branch->outputs.size()));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.wants_output(i)) continue;
    NEE_RETURN_IF_ERROR(cf::SetValueOutput(ctx, i, outs[i]));
  }
  return Status::Ok();
}

// ---- Loop ------------------------------------------------------------------
// Inputs: M (optional trip count), cond (optional), N loop-carried values.
// Body: (iteration_num, cond, carried...) -> (cond, carried..., scan elements...).
// Outputs: N final carried values, then K scan outputs stacked on a new axis 0.

size_t LoopCarriedCount(size_t num_inputs) { return num_inputs > 2 ? num_inputs - 2 : 0; }

Status InferLoop(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const Graph* body, ictx.node.GetGraph("body"));
  const size_t n = LoopCarriedCount(ictx.num_inputs());
  if (body->outputs.size() < 1 + n)
    return ictx.Error("body yields " + std::to_string(body->outputs.size()) + " outputs, expected at least " +
                      std::to_string(1 + n) + " (cond and the loop-carried values)");
  const size_t k = body->outputs.size() - 1 - n;
  // Loop-carried values may change shape from one iteration to the next:
  // widen their types until the body maps them into themselves. The lattice
  // is finite (each step only forgets dims), so this ends; the bound is a
  // belt-and-braces limit after which shapes are dropped altogether.
  std::vector<TypeInfo> carried(n);
  for (size_t j = 0; j < n; ++j) carried[j] = InputTypeOrUnknown(ictx, 2 + j);
  std::vector<TypeInfo> body_out;
  constexpr int kMaxWidenings = 8;
  for (int round = 0;; ++round) {
    std::vector<TypeInfo> body_in = {TypeInfo::Tensor(DataType::kInt64, Shape{}),
                                     TypeInfo::Tensor(DataType::kBool, Shape{})};
    body_in.insert(body_in.end(), carried.begin(), carried.end());
    NEE_ASSIGN_OR_RETURN(body_out, InferBody(ictx, *body, body_in));
    body_out.resize(std::max(body_out.size(), 1 + n + k));
    bool stable = true;
    for (size_t j = 0; j < n; ++j) {
      TypeInfo widened = UnionTypes(carried[j], body_out[1 + j]);
      if (!TypesEqual(widened, carried[j])) stable = false;
      carried[j] = std::move(widened);
    }
    if (stable) break;
    if (round == kMaxWidenings) {
      for (TypeInfo& t : carried) t = cf::WithoutShapes(t);
      break;
    }
  }
  // Without a cond input only M bounds the loop, so a known M is the exact
  // number of iterations (the length of every scan output).
  Dim iterations = Dim::Unknown();
  const Tensor* m = ictx.input_value(0);
  if (!ictx.has_input(1) && m && m->num_elements() == 1) {
    auto values = m->ToInt64Vector();
    if (values.ok() && (*values)[0] >= 0) iterations = Dim::Known((*values)[0]);
  }
  for (size_t i = 0; i < ictx.num_outputs(); ++i) {
    if (i < n) {
      ictx.output_types[i] = carried[i];
    } else if (i < n + k) {
      NEE_ASSIGN_OR_RETURN(ictx.output_types[i], InsertAxis(ictx, body_out[1 + i], 0, iterations, "scan output"));
    }
  }
  return Status::Ok();
}

// The trip count M, or -1 when omitted (no bound).
Result<int64_t> ReadTripCount(const KernelContext& ctx) {
  if (!ctx.input(0)) return -1;
  NEE_ASSIGN_OR_RETURN(const Tensor* m, ctx.InputTensor(0));
  if (m->num_elements() != 1 || (m->dtype() != DataType::kInt64 && m->dtype() != DataType::kInt32))
    return ctx.InputError(0, "(M) must be an int64 tensor with one element, got " + m->Describe());
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> values, m->ToInt64Vector());
  if (values[0] < 0) return ctx.InputError(0, "(M) must be non-negative, got " + std::to_string(values[0]));
  return values[0];
}

Status LoopKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Graph* body, ctx.node().GetGraph("body"));
  const size_t n = LoopCarriedCount(ctx.num_inputs());
  if (body->inputs.size() != 2 + n)
    return ctx.Error("body takes " + std::to_string(body->inputs.size()) + " inputs, expected " +
                     std::to_string(2 + n) + " (iteration number, cond and " + std::to_string(n) +
                     " loop-carried values)");
  if (body->outputs.size() < 1 + n)
    return ctx.Error("body yields " + std::to_string(body->outputs.size()) + " outputs, expected at least " +
                     std::to_string(1 + n));
  const size_t k = body->outputs.size() - 1 - n;
  if (ctx.num_outputs() > n + k)
    return ctx.Error("has " + std::to_string(ctx.num_outputs()) + " outputs, but the body gives only " +
                     std::to_string(n + k));

  NEE_ASSIGN_OR_RETURN(int64_t trip_count, ReadTripCount(ctx));
  const bool has_cond = ctx.input(1) != nullptr;
  bool keep_going = true;
  if (has_cond) {
    NEE_ASSIGN_OR_RETURN(keep_going, ReadCondition(ctx, *ctx.input(1), "input 1 (cond)"));
  }
  std::vector<Value> carried(n);
  for (size_t j = 0; j < n; ++j) {
    if (!ctx.input(2 + j)) return ctx.InputError(2 + j, "(loop-carried value) is missing");
    carried[j] = *ctx.input(2 + j);
  }
  std::vector<std::vector<Tensor>> scans(k);

  // As the spec says, only M and cond bound the loop; without cond the body's
  // cond output is ignored.
  int64_t iteration = 0;
  while ((trip_count < 0 || iteration < trip_count) && keep_going) {
    std::vector<Value> body_in = {Tensor::Scalar<int64_t>(iteration), Tensor::Scalar<bool>(keep_going)};
    body_in.insert(body_in.end(), carried.begin(), carried.end());
    NEE_ASSIGN_OR_RETURN(std::vector<Value> outs, RunBody(ctx, *body, body_in, 1 + n + k, iteration));
    if (has_cond) {
      NEE_ASSIGN_OR_RETURN(keep_going, ReadCondition(ctx, outs[0], "the body's cond output"));
    }
    for (size_t j = 0; j < n; ++j) {
      NEE_ASSIGN_OR_RETURN(carried[j], cf::OwnedCopy(outs[1 + j]));
    }
    for (size_t s = 0; s < k; ++s) {
      NEE_ASSIGN_OR_RETURN(Tensor element, OwnedScanElement(ctx, outs[1 + n + s], s));
      scans[s].push_back(std::move(element));
    }
    ++iteration;
  }

  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.wants_output(i)) continue;
    if (i < n) {
      NEE_RETURN_IF_ERROR(cf::SetValueOutput(ctx, i, carried[i]));
    } else {
      NEE_RETURN_IF_ERROR(WriteScanOutput(ctx, i, std::move(scans[i - n]), 0, false, *body, 1 + i));
    }
  }
  return Status::Ok();
}

// ---- Scan (opset 9+) -------------------------------------------------------
// Inputs: N initial states, then M scan inputs (M = num_scan_inputs).
// Body: (states..., one slice of each scan input) -> (states..., K scan elements).

struct ScanConfig {
  size_t num_states = 0;
  size_t num_scan_inputs = 0;
  size_t num_scan_outputs = 0;
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

Result<std::vector<int64_t>> ReadPerItemAttr(const Node& node, const char* name, size_t count,
                                             const std::function<Status(const std::string&)>& error) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> values, node.GetInts(name, std::vector<int64_t>(count, 0)));
  if (values.size() != count)
    return error(std::string("attribute ") + name + " has " + std::to_string(values.size()) +
                 " entries, expected " + std::to_string(count));
  return values;
}

Status CheckDirections(const std::vector<int64_t>& directions, const char* name,
                       const std::function<Status(const std::string&)>& error) {
  for (int64_t d : directions)
    if (d != 0 && d != 1)
      return error(std::string("attribute ") + name + " entries must be 0 or 1, got " + std::to_string(d));
  return Status::Ok();
}

// Reads and checks the attributes shared by the shape rule and the kernel.
Result<ScanConfig> ReadScanConfig(const Node& node, size_t num_inputs, size_t num_body_outputs,
                                  int64_t opset, const std::function<Status(const std::string&)>& error) {
  ScanConfig c;
  NEE_ASSIGN_OR_RETURN(int64_t m, node.GetInt("num_scan_inputs"));
  const size_t first_state = opset < 9 ? 1 : 0;  // opset 8 starts with sequence_lens
  if (m < 1 || static_cast<size_t>(m) + first_state > num_inputs)
    return error("num_scan_inputs is " + std::to_string(m) + " but the node has " + std::to_string(num_inputs) +
                 " inputs");
  c.num_scan_inputs = static_cast<size_t>(m);
  c.num_states = num_inputs - first_state - c.num_scan_inputs;
  if (num_body_outputs < c.num_states)
    return error("body yields " + std::to_string(num_body_outputs) + " outputs, fewer than the " +
                 std::to_string(c.num_states) + " states");
  c.num_scan_outputs = num_body_outputs - c.num_states;
  if (opset < 9) {
    NEE_ASSIGN_OR_RETURN(c.input_directions, ReadPerItemAttr(node, "directions", c.num_scan_inputs, error));
    NEE_RETURN_IF_ERROR(CheckDirections(c.input_directions, "directions", error));
    c.input_axes.assign(c.num_scan_inputs, 1);  // [batch, sequence, ...]
    c.output_axes.assign(c.num_scan_outputs, 0);  // [batch] is put in front separately
    c.output_directions.assign(c.num_scan_outputs, 0);
    return c;
  }
  NEE_ASSIGN_OR_RETURN(c.input_axes, ReadPerItemAttr(node, "scan_input_axes", c.num_scan_inputs, error));
  NEE_ASSIGN_OR_RETURN(c.input_directions,
                       ReadPerItemAttr(node, "scan_input_directions", c.num_scan_inputs, error));
  NEE_ASSIGN_OR_RETURN(c.output_axes, ReadPerItemAttr(node, "scan_output_axes", c.num_scan_outputs, error));
  NEE_ASSIGN_OR_RETURN(c.output_directions,
                       ReadPerItemAttr(node, "scan_output_directions", c.num_scan_outputs, error));
  NEE_RETURN_IF_ERROR(CheckDirections(c.input_directions, "scan_input_directions", error));
  NEE_RETURN_IF_ERROR(CheckDirections(c.output_directions, "scan_output_directions", error));
  return c;
}

Status InferScan(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const Graph* body, ictx.node.GetGraph("body"));
  auto error = [&](const std::string& m) { return ictx.Error(m); };
  NEE_ASSIGN_OR_RETURN(ScanConfig c, ReadScanConfig(ictx.node, ictx.num_inputs(), body->outputs.size(),
                                                    ictx.opset, error));
  const bool batched = ictx.opset < 9;
  const size_t first = batched ? 1 : 0;
  // Body inputs: the states (without the batch axis in opset 8) and one slice
  // of each scan input.
  std::vector<TypeInfo> body_in;
  Dim batch = Dim::Unknown();
  Dim length = Dim::Unknown();
  bool length_seen = false;
  for (size_t j = 0; j < c.num_states; ++j) {
    TypeInfo t = InputTypeOrUnknown(ictx, first + j);
    body_in.push_back(batched ? DropAxis(t, 0) : t);
  }
  for (size_t j = 0; j < c.num_scan_inputs; ++j) {
    TypeInfo t = InputTypeOrUnknown(ictx, first + c.num_states + j);
    int64_t axis = c.input_axes[j];
    if (t.is_tensor() && t.shape) {
      const int64_t rank = static_cast<int64_t>(t.shape->size());
      if (axis < -rank || axis >= rank)
        return ictx.InputError(first + c.num_states + j, "scan axis " + std::to_string(axis) +
                                                             " is out of range for rank " + std::to_string(rank));
      if (axis < 0) axis += rank;
      const Dim& d = (*t.shape)[static_cast<size_t>(axis)];
      if (!length_seen || (!length.known() && d.known())) length = d;
      length_seen = true;
      if (batched && !batch.known()) batch = (*t.shape)[0];
      TypeInfo element = DropAxis(t, axis);
      body_in.push_back(batched ? DropAxis(element, 0) : element);
    } else {
      body_in.push_back(t.is_tensor() ? TypeInfo::Tensor(t.elem_type) : t);
    }
  }
  NEE_ASSIGN_OR_RETURN(std::vector<TypeInfo> body_out, InferBody(ictx, *body, body_in));
  body_out.resize(std::max(body_out.size(), c.num_states + c.num_scan_outputs));
  for (size_t i = 0; i < ictx.num_outputs() && i < c.num_states + c.num_scan_outputs; ++i) {
    if (i < c.num_states) {
      TypeInfo state = UnionTypes(body_in[i], body_out[i]);
      if (batched) {
        NEE_ASSIGN_OR_RETURN(state, InsertAxis(ictx, state, 0, batch, "state"));
      }
      ictx.output_types[i] = state;
      continue;
    }
    const size_t s = i - c.num_states;
    NEE_ASSIGN_OR_RETURN(TypeInfo out, InsertAxis(ictx, body_out[i], c.output_axes[s], length, "scan output"));
    if (batched) {
      NEE_ASSIGN_OR_RETURN(out, InsertAxis(ictx, out, 0, batch, "scan output"));
    }
    ictx.output_types[i] = out;
  }
  return Status::Ok();
}

// Runs the scan over one set of states and scan inputs (the whole op in
// opset 9+, one batch entry in opset 8). `lengths` gives how many steps run.
struct ScanRun {
  std::vector<Value> states;
  std::vector<std::vector<Tensor>> scan_elements;  // [k][step], in output order
};

Result<ScanRun> RunScanSteps(KernelContext& ctx, const Graph& body, const ScanConfig& c,
                             std::vector<Value> states, const std::vector<Tensor>& scan_inputs,
                             const std::vector<int64_t>& axes, int64_t steps) {
  ScanRun run;
  run.scan_elements.resize(c.num_scan_outputs);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Value> body_in = states;
    for (size_t j = 0; j < scan_inputs.size(); ++j) {
      int64_t index = c.input_directions[j] == 1 ? steps - 1 - t : t;
      NEE_ASSIGN_OR_RETURN(Tensor slice, cf::SliceAlongAxis(scan_inputs[j], axes[j], index));
      body_in.push_back(Value(std::move(slice)));
    }
    NEE_ASSIGN_OR_RETURN(std::vector<Value> outs,
                         RunBody(ctx, body, body_in, c.num_states + c.num_scan_outputs, t));
    for (size_t j = 0; j < c.num_states; ++j) {
      NEE_ASSIGN_OR_RETURN(states[j], cf::OwnedCopy(outs[j]));
    }
    for (size_t s = 0; s < c.num_scan_outputs; ++s) {
      NEE_ASSIGN_OR_RETURN(Tensor element, OwnedScanElement(ctx, outs[c.num_states + s], s));
      run.scan_elements[s].push_back(std::move(element));
    }
  }
  run.states = std::move(states);
  return run;
}

Status CheckScanBody(const KernelContext& ctx, const Graph& body, const ScanConfig& c) {
  if (body.inputs.size() != c.num_states + c.num_scan_inputs)
    return ctx.Error("body takes " + std::to_string(body.inputs.size()) + " inputs, expected " +
                     std::to_string(c.num_states + c.num_scan_inputs) + " (states and scan inputs)");
  if (ctx.num_outputs() > c.num_states + c.num_scan_outputs)
    return ctx.Error("has " + std::to_string(ctx.num_outputs()) + " outputs, but the body gives only " +
                     std::to_string(c.num_states + c.num_scan_outputs));
  return Status::Ok();
}

Status ScanKernel9(KernelContext& ctx, const Graph& body, const ScanConfig& c) {
  std::vector<Value> states;
  for (size_t j = 0; j < c.num_states; ++j) {
    if (!ctx.input(j)) return ctx.InputError(j, "(initial state) is missing");
    states.push_back(*ctx.input(j));
  }
  std::vector<Tensor> scan_inputs;
  std::vector<int64_t> axes;
  int64_t length = -1;
  for (size_t j = 0; j < c.num_scan_inputs; ++j) {
    const size_t index = c.num_states + j;
    NEE_ASSIGN_OR_RETURN(const Tensor* in, ctx.InputTensor(index));
    if (in->rank() < 1) return ctx.InputError(index, "(scan input) must have rank >= 1, got a scalar");
    NEE_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(c.input_axes[j], in->rank(), ctx.node(), "scan_input_axes"));
    const int64_t len = in->dim(axis);
    if (length >= 0 && len != length)
      return ctx.InputError(index, "has " + std::to_string(len) + " steps along its scan axis, but an earlier " +
                                       "scan input has " + std::to_string(length));
    length = len;
    scan_inputs.push_back(*in);
    axes.push_back(axis);
  }
  NEE_ASSIGN_OR_RETURN(ScanRun run, RunScanSteps(ctx, body, c, std::move(states), scan_inputs, axes, length));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.wants_output(i)) continue;
    if (i < c.num_states) {
      NEE_RETURN_IF_ERROR(cf::SetValueOutput(ctx, i, run.states[i]));
      continue;
    }
    const size_t s = i - c.num_states;
    // The output axis is checked against the element rank (+1 for the new axis).
    int64_t element_rank = run.scan_elements[s].empty() ? 0 : run.scan_elements[s][0].rank();
    if (run.scan_elements[s].empty()) {
      DataType unused;
      std::vector<int64_t> dims;
      EmptyScanElement(body, i, &unused, &dims);
      element_rank = static_cast<int64_t>(dims.size());
    }
    NEE_ASSIGN_OR_RETURN(int64_t axis,
                         NormalizeAxis(c.output_axes[s], element_rank + 1, ctx.node(), "scan_output_axes"));
    NEE_RETURN_IF_ERROR(WriteScanOutput(ctx, i, std::move(run.scan_elements[s]), axis,
                                        c.output_directions[s] == 1, body, i));
  }
  return Status::Ok();
}

// Opset 8: every scan input is [batch, sequence, ...] and every state
// [batch, ...]; the body runs per batch entry over that entry's sequence
// length; scan outputs are [batch, max_sequence, ...], zero-padded.
Status ScanKernel8(KernelContext& ctx, const Graph& body, const ScanConfig& c) {
  const size_t first = 1;
  int64_t batch = -1, max_len = -1;
  std::vector<const Tensor*> scan_inputs;
  for (size_t j = 0; j < c.num_scan_inputs; ++j) {
    const size_t index = first + c.num_states + j;
    NEE_ASSIGN_OR_RETURN(const Tensor* in, ctx.InputTensor(index));
    if (in->rank() < 2) return ctx.InputError(index, "(scan input) must be [batch, sequence, ...], got " + in->Describe());
    if ((batch >= 0 && in->dim(0) != batch) || (max_len >= 0 && in->dim(1) != max_len))
      return ctx.InputError(index, "has batch/sequence dims " + DimsToString(std::vector<int64_t>{in->dim(0), in->dim(1)}) +
                                       " unlike the earlier scan inputs");
    batch = in->dim(0);
    max_len = in->dim(1);
    scan_inputs.push_back(in);
  }
  std::vector<const Tensor*> states;
  for (size_t j = 0; j < c.num_states; ++j) {
    NEE_ASSIGN_OR_RETURN(const Tensor* s, ctx.InputTensor(first + j));
    if (s->rank() < 1 || s->dim(0) != batch)
      return ctx.InputError(first + j, "(initial state) must have batch dim " + std::to_string(batch) + ", got " +
                                           s->Describe());
    states.push_back(s);
  }
  std::vector<int64_t> lengths(static_cast<size_t>(batch), max_len);
  if (ctx.input(0)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* lens, ctx.InputTensor(0));
    if (lens->num_elements() != batch)
      return ctx.InputError(0, "(sequence_lens) must hold " + std::to_string(batch) + " lengths, got " + lens->Describe());
    NEE_ASSIGN_OR_RETURN(lengths, lens->ToInt64Vector());
    for (int64_t len : lengths)
      if (len < 0 || len > max_len)
        return ctx.InputError(0, "(sequence_lens) entry " + std::to_string(len) + " is outside [0, " +
                                     std::to_string(max_len) + "]");
  }

  // Run each batch entry; the body sees the entry's states and its sequence.
  std::vector<std::vector<Tensor>> final_states(c.num_states);
  std::vector<std::vector<std::vector<Tensor>>> scan_elements(c.num_scan_outputs);  // [k][b][step]
  std::vector<int64_t> axes(c.num_scan_inputs, 0);  // after taking the batch entry, the sequence axis is 0
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> entry_states;
    for (const Tensor* s : states) {
      NEE_ASSIGN_OR_RETURN(Tensor slice, cf::SliceAlongAxis(*s, 0, b));
      entry_states.push_back(Value(std::move(slice)));
    }
    std::vector<Tensor> entry_inputs;
    for (const Tensor* in : scan_inputs) {
      NEE_ASSIGN_OR_RETURN(Tensor slice, cf::SliceAlongAxis(*in, 0, b));
      // Only the first `length` steps belong to the sequence (reverse scans start there).
      std::vector<int64_t> dims = slice.dims();
      dims[0] = lengths[b];
      NEE_ASSIGN_OR_RETURN(Tensor head, Tensor::Allocate(slice.dtype(), dims));
      cf::CopyElements(slice, 0, head, 0, head.num_elements());
      entry_inputs.push_back(std::move(head));
    }
    NEE_ASSIGN_OR_RETURN(ScanRun run, RunScanSteps(ctx, body, c, std::move(entry_states), entry_inputs, axes,
                                                   lengths[b]));
    for (size_t j = 0; j < c.num_states; ++j) {
      if (!run.states[j].is_tensor()) return ctx.Error("state " + std::to_string(j) + " must be a tensor");
      final_states[j].push_back(run.states[j].tensor());
    }
    for (size_t s = 0; s < c.num_scan_outputs; ++s) scan_elements[s].push_back(std::move(run.scan_elements[s]));
  }

  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.wants_output(i)) continue;
    if (i < c.num_states) {
      std::vector<Tensor>& parts = final_states[i];
      if (parts.empty()) {  // batch 0: the state keeps its (empty) input shape
        NEE_RETURN_IF_ERROR(cf::CopyTensorToOutput(ctx, i, *states[i]));
        continue;
      }
      NEE_RETURN_IF_ERROR(CheckUniformElements(ctx, parts, i));
      std::vector<int64_t> dims = parts[0].dims();
      dims.insert(dims.begin(), batch);
      NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(i, parts[0].dtype(), dims));
      cf::StackAlongAxis(parts, 0, out);
      continue;
    }
    const size_t s = i - c.num_states;
    // Element type and dims: from any step that ran, else from the body's declaration.
    const Tensor* sample = nullptr;
    for (const auto& per_batch : scan_elements[s])
      if (!per_batch.empty()) sample = &per_batch[0];
    DataType dtype;
    std::vector<int64_t> element_dims;
    if (sample) {
      dtype = sample->dtype();
      element_dims = sample->dims();
    } else {
      EmptyScanElement(body, i, &dtype, &element_dims);
    }
    std::vector<int64_t> dims = element_dims;
    dims.insert(dims.begin(), {batch, max_len});
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(i, dtype, dims));  // zero-filled padding
    const int64_t element_count = ProductOf(element_dims);
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<Tensor>& steps = scan_elements[s][b];
      for (size_t t = 0; t < steps.size(); ++t) {
        if (steps[t].dtype() != dtype || steps[t].dims() != element_dims)
          return ctx.Error("scan output " + std::to_string(s) + " changed to " + steps[t].Describe());
        cf::CopyElements(steps[t], 0, out, (b * max_len + static_cast<int64_t>(t)) * element_count, element_count);
      }
    }
  }
  return Status::Ok();
}

Status ScanKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Graph* body, ctx.node().GetGraph("body"));
  auto error = [&](const std::string& m) { return ctx.Error(m); };
  NEE_ASSIGN_OR_RETURN(ScanConfig c, ReadScanConfig(ctx.node(), ctx.num_inputs(), body->outputs.size(),
                                                    ctx.opset(), error));
  NEE_RETURN_IF_ERROR(CheckScanBody(ctx, *body, c));
  return ctx.opset() < 9 ? ScanKernel8(ctx, *body, c) : ScanKernel9(ctx, *body, c);
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& registry) {
  // Later versions only widened the allowed types (sequences, optionals, new
  // element types); the semantics nee implements are the same throughout.
  registry.RegisterVersions("", "If", {1, 11, 13, 16, 19, 21, 23, 24, 25}, InferIf, IfKernel);
  registry.RegisterVersions("", "Loop", {1, 11, 13, 16, 19, 21, 23, 24, 25}, InferLoop, LoopKernel);
  // Scan 8 has the batch axis and sequence_lens; 9 introduced the per-input
  // axes and directions; the rest widened types. (The declarations give each
  // version's arity; the kernel and rule check the counts against
  // num_scan_inputs.)
  registry.RegisterVersions("", "Scan", {8, 9, 11, 16, 19, 21, 23, 24, 25}, InferScan, ScanKernel);
}

}  // namespace nee
