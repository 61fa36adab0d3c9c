// Operator family: Sequence — the tensor-sequence ops (SequenceConstruct,
// SequenceEmpty, SequenceAt, SequenceInsert, SequenceErase, SequenceLength,
// SplitToSequence, ConcatFromSequence, SequenceMap) and the optional ops
// (Optional, OptionalHasElement, OptionalGetElement).
//
// A sequence Value holds heap-owned tensors that are never modified, so new
// sequences share the elements of their input sequence; tensors taken from
// plain kernel inputs are copied first (see control_flow_util.h).
#include <algorithm>
#include <string>

#include "ops/control_flow_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

// ---- Shared pieces ---------------------------------------------------------

// The runtime element type recorded in a sequence of tensors: the element
// type only, since elements may differ in shape.
TypeInfo ElementTypeOf(DataType dtype) { return TypeInfo::Tensor(dtype); }

Result<const Value*> InputSequence(const KernelContext& ctx, size_t i) {
  const Value* v = ctx.input(i);
  if (!v) return ctx.InputError(i, "(sequence) is required but missing");
  if (!v->is_sequence()) return ctx.InputError(i, "expected a sequence, got " + v->Describe());
  return v;
}

// Reads an optional scalar position input (int32 or int64, one element).
Result<std::optional<int64_t>> ReadPosition(const KernelContext& ctx, size_t i) {
  if (!ctx.input(i)) return std::optional<int64_t>();
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  if (t->num_elements() != 1 || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32))
    return ctx.InputError(i, "(position) must be an int32 or int64 scalar, got " + t->Describe());
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> v, t->ToInt64Vector());
  return std::optional<int64_t>(v[0]);
}

// Maps a position in [-size, size + extra) to [0, size + extra).
Result<int64_t> NormalizePosition(const KernelContext& ctx, size_t input, int64_t pos, int64_t size,
                                  int64_t extra) {
  if (pos < -size || pos >= size + extra)
    return ctx.InputError(input, "(position) " + std::to_string(pos) + " is out of range [" +
                                     std::to_string(-size) + ", " + std::to_string(size + extra - 1) +
                                     "] for a sequence of " + std::to_string(size) + " tensors");
  return pos < 0 ? pos + size : pos;
}

// The element type a sequence type holds, or unknown.
TypeInfo InnerOf(const TypeInfo& t) {
  if ((t.kind == TypeInfo::Kind::kSequence || t.kind == TypeInfo::Kind::kOptional) && t.inner) return *t.inner;
  return TypeInfo{};
}

// Input i's type when present and known to be a sequence (or unknown);
// errors only when it is definitely something else.
Result<TypeInfo> SequenceInputType(const InferenceContext& ictx, size_t i) {
  if (!ictx.has_input(i)) return ictx.InputError(i, "(sequence) is required");
  const TypeInfo& t = ictx.input_type(i);
  if (t.kind != TypeInfo::Kind::kSequence && t.kind != TypeInfo::Kind::kUnknown)
    return ictx.InputError(i, "expected a sequence, got " + t.ToString());
  return t;
}

// A fresh heap copy of a tensor input, fit to be kept inside a sequence.
Result<Tensor> OwnedTensorInput(const KernelContext& ctx, size_t i) {
  NEE_ASSIGN_OR_RETURN(const Tensor* t, ctx.InputTensor(i));
  return t->Clone();
}

// ---- SequenceConstruct / SequenceEmpty ---------------------------------------

Status InferSequenceConstruct(InferenceContext& ictx) {
  TypeInfo element;
  for (size_t i = 0; i < ictx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(const TypeInfo* t, InputTensorType(ictx, i));
    if (i > 0 && t->is_tensor() && element.is_tensor() && t->elem_type != element.elem_type)
      return ictx.InputError(i, "has type " + t->ToString() + " but input 0 has " + element.ToString());
    element = i == 0 ? *t : cf::UnionTypes(element, *t);
  }
  ictx.output_types[0] = TypeInfo::Sequence(element);
  return Status::Ok();
}

Status SequenceConstructKernel(KernelContext& ctx) {
  std::vector<Value> elements;
  DataType dtype = DataType::kUndefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    NEE_ASSIGN_OR_RETURN(Tensor t, OwnedTensorInput(ctx, i));
    if (i > 0 && t.dtype() != dtype)
      return ctx.InputError(i, "has type " + std::string(DataTypeName(t.dtype())) + " but input 0 has " +
                                   DataTypeName(dtype));
    dtype = t.dtype();
    elements.push_back(Value(std::move(t)));
  }
  return ctx.SetOutput(0, Value::Sequence(std::move(elements), ElementTypeOf(dtype)));
}

Result<DataType> EmptySequenceType(const Node& node) {
  NEE_ASSIGN_OR_RETURN(int64_t dtype, node.GetInt("dtype", static_cast<int64_t>(DataType::kFloat)));
  if (!IsValidDataType(static_cast<int32_t>(dtype)) || dtype == 0)
    return InvalidModel(node.Describe() + ": attribute dtype " + std::to_string(dtype) + " is not a valid element type");
  return static_cast<DataType>(dtype);
}

Status InferSequenceEmpty(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(DataType dtype, EmptySequenceType(ictx.node));
  ictx.output_types[0] = TypeInfo::Sequence(TypeInfo::Tensor(dtype));
  return Status::Ok();
}

Status SequenceEmptyKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(DataType dtype, EmptySequenceType(ctx.node()));
  return ctx.SetOutput(0, Value::Sequence({}, ElementTypeOf(dtype)));
}

// ---- SequenceAt / SequenceInsert / SequenceErase / SequenceLength -------------

Status InferSequenceAt(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(TypeInfo seq, SequenceInputType(ictx, 0));
  TypeInfo element = InnerOf(seq);
  ictx.output_types[0] = element.kind == TypeInfo::Kind::kUnknown ? TypeInfo{} : element;
  return Status::Ok();
}

Status SequenceAtKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Value* seq, InputSequence(ctx, 0));
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> pos, ReadPosition(ctx, 1));
  if (!pos) return ctx.InputError(1, "(position) is required but missing");
  const int64_t size = static_cast<int64_t>(seq->elements().size());
  NEE_ASSIGN_OR_RETURN(int64_t index, NormalizePosition(ctx, 1, *pos, size, 0));
  return cf::SetValueOutput(ctx, 0, seq->elements()[static_cast<size_t>(index)]);
}

Status InferSequenceInsert(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(TypeInfo seq, SequenceInputType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* tensor, InputTensorType(ictx, 1));
  TypeInfo element = InnerOf(seq);
  if (element.is_tensor() && tensor->is_tensor() && element.elem_type != DataType::kUndefined &&
      element.elem_type != tensor->elem_type)
    return ictx.InputError(1, "has type " + tensor->ToString() + " but the sequence holds " + element.ToString());
  // A sequence known to be empty (SequenceEmpty) says nothing about shapes;
  // keep the merge simple: union of what is known.
  ictx.output_types[0] = TypeInfo::Sequence(
      element.kind == TypeInfo::Kind::kUnknown ? cf::WithoutShapes(*tensor) : cf::UnionTypes(element, *tensor));
  return Status::Ok();
}

Status SequenceInsertKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Value* seq, InputSequence(ctx, 0));
  NEE_ASSIGN_OR_RETURN(Tensor tensor, OwnedTensorInput(ctx, 1));
  const TypeInfo& element_type = seq->element_type();
  if (element_type.is_tensor() && element_type.elem_type != DataType::kUndefined &&
      element_type.elem_type != tensor.dtype())
    return ctx.InputError(1, "has type " + std::string(DataTypeName(tensor.dtype())) +
                                 " but the sequence holds " + element_type.ToString());
  std::vector<Value> elements = seq->elements();
  const int64_t size = static_cast<int64_t>(elements.size());
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> pos, ReadPosition(ctx, 2));
  int64_t index = size;
  if (pos) {
    NEE_ASSIGN_OR_RETURN(index, NormalizePosition(ctx, 2, *pos, size, 1));
  }
  DataType dtype = tensor.dtype();
  elements.insert(elements.begin() + index, Value(std::move(tensor)));
  return ctx.SetOutput(0, Value::Sequence(std::move(elements), ElementTypeOf(dtype)));
}

Status InferSameSequence(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(ictx.output_types[0], SequenceInputType(ictx, 0));
  return Status::Ok();
}

Status SequenceEraseKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Value* seq, InputSequence(ctx, 0));
  std::vector<Value> elements = seq->elements();
  const int64_t size = static_cast<int64_t>(elements.size());
  if (size == 0) return ctx.InputError(0, "(sequence) is empty: there is nothing to erase");
  NEE_ASSIGN_OR_RETURN(std::optional<int64_t> pos, ReadPosition(ctx, 1));
  int64_t index = size - 1;
  if (pos) {
    NEE_ASSIGN_OR_RETURN(index, NormalizePosition(ctx, 1, *pos, size, 0));
  }
  elements.erase(elements.begin() + index);
  return ctx.SetOutput(0, Value::Sequence(std::move(elements), seq->element_type()));
}

Status InferSequenceLength(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(SequenceInputType(ictx, 0).status());
  ictx.output_types[0] = TypeInfo::Tensor(DataType::kInt64, Shape{});
  return Status::Ok();
}

Status SequenceLengthKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Value* seq, InputSequence(ctx, 0));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kInt64, {}));
  out.data<int64_t>()[0] = static_cast<int64_t>(seq->elements().size());
  return Status::Ok();
}

// ---- SplitToSequence ---------------------------------------------------------

// Chunk lengths along the axis of extent `extent`, from the split input (a
// scalar chunk size or a 1-D list of lengths) or 1 each when omitted.
Result<std::vector<int64_t>> SplitLengths(const KernelContext& ctx, int64_t extent) {
  std::vector<int64_t> lengths;
  if (!ctx.input(1)) {
    lengths.assign(static_cast<size_t>(extent), 1);
    return lengths;
  }
  NEE_ASSIGN_OR_RETURN(const Tensor* split, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> values, split->ToInt64Vector());
  if (split->rank() == 0) {
    const int64_t chunk = values[0];
    if (chunk <= 0) return ctx.InputError(1, "(split) must be positive, got " + std::to_string(chunk));
    for (int64_t start = 0; start < extent; start += chunk) lengths.push_back(std::min(chunk, extent - start));
    return lengths;
  }
  if (split->rank() != 1) return ctx.InputError(1, "(split) must be a scalar or 1-D, got " + split->Describe());
  int64_t total = 0;
  for (int64_t v : values) {
    // Bounding each entry by the extent also keeps the sum from overflowing.
    if (v < 0 || v > extent)
      return ctx.InputError(1, "(split) entry " + std::to_string(v) + " is outside [0, " + std::to_string(extent) + "]");
    total += v;
    if (total > extent) break;
  }
  if (total != extent)
    return ctx.InputError(1, "(split) lengths sum to " + std::string(total > extent ? "more than " : "") +
                                 std::to_string(total > extent ? extent : total) + " but the axis has " +
                                 std::to_string(extent) + " entries");
  return values;
}

Status InferSplitToSequence(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* in, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, ictx.node.GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t keepdims, ictx.node.GetInt("keepdims", 1));
  TypeInfo element = TypeInfo::Tensor(in->elem_type);
  if (in->is_tensor() && in->shape) {
    const int64_t rank = static_cast<int64_t>(in->shape->size());
    NEE_ASSIGN_OR_RETURN(axis, NormalizeDimAxis(axis, rank, ictx.node));
    Shape shape = *in->shape;
    if (!ictx.has_input(1)) {
      if (keepdims) shape[static_cast<size_t>(axis)] = Dim::Known(1);
      else shape.erase(shape.begin() + axis);
    } else {
      // The chunk length is known only when every chunk has the same one.
      Dim chunk = Dim::Unknown();
      const Tensor* split = ictx.input_value(1);
      const Dim& extent = shape[static_cast<size_t>(axis)];
      if (split && split->num_elements() > 0) {
        auto values = split->ToInt64Vector();
        if (values.ok()) {
          bool all_equal = std::all_of(values->begin(), values->end(), [&](int64_t v) { return v == (*values)[0]; });
          bool scalar_divides = split->rank() == 0 && extent.known() && (*values)[0] > 0 &&
                                extent.value % (*values)[0] == 0;
          if (split->rank() == 1 ? all_equal : scalar_divides) chunk = Dim::Known((*values)[0]);
        }
      }
      shape[static_cast<size_t>(axis)] = chunk;
    }
    element.shape = shape;
  }
  ictx.output_types[0] = TypeInfo::Sequence(element);
  return Status::Ok();
}

Status SplitToSequenceKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* in, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis", 0));
  NEE_ASSIGN_OR_RETURN(int64_t keepdims, ctx.node().GetInt("keepdims", 1));
  if (in->rank() == 0) return ctx.InputError(0, "cannot be split: it is a scalar");
  NEE_ASSIGN_OR_RETURN(axis, NormalizeAxis(axis, in->rank(), ctx.node()));
  const int64_t extent = in->dim(axis);
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, SplitLengths(ctx, extent));
  // keepdims only matters when split is omitted (every chunk has length 1).
  const bool squeeze = !ctx.input(1) && keepdims == 0;

  const std::vector<int64_t>& dims = in->dims();
  const int64_t outer = ProductOf(dims, 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(dims, static_cast<size_t>(axis) + 1);
  std::vector<Value> elements;
  int64_t start = 0;
  for (int64_t length : lengths) {
    std::vector<int64_t> part_dims = dims;
    part_dims[static_cast<size_t>(axis)] = length;
    if (squeeze) part_dims.erase(part_dims.begin() + axis);
    NEE_ASSIGN_OR_RETURN(Tensor part, Tensor::Allocate(in->dtype(), part_dims));
    for (int64_t o = 0; o < outer; ++o)
      cf::CopyElements(*in, (o * extent + start) * inner, part, o * length * inner, length * inner);
    elements.push_back(Value(std::move(part)));
    start += length;
  }
  return ctx.SetOutput(0, Value::Sequence(std::move(elements), ElementTypeOf(in->dtype())));
}

// ---- ConcatFromSequence --------------------------------------------------------

Status InferConcatFromSequence(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(TypeInfo seq, SequenceInputType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, ictx.node.GetInt("axis"));
  NEE_ASSIGN_OR_RETURN(int64_t new_axis, ictx.node.GetInt("new_axis", 0));
  TypeInfo element = InnerOf(seq);
  if (!element.is_tensor()) {
    ictx.output_types[0] = TypeInfo{};
    return Status::Ok();
  }
  TypeInfo out = TypeInfo::Tensor(element.elem_type);
  if (element.shape) {
    const int64_t rank = static_cast<int64_t>(element.shape->size()) + (new_axis ? 1 : 0);
    if (axis < -rank || axis >= rank)
      return ictx.Error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    Shape shape = *element.shape;
    if (new_axis) shape.insert(shape.begin() + axis, Dim::Unknown());
    else shape[static_cast<size_t>(axis)] = Dim::Unknown();  // sum over an unknown number of elements
    out.shape = shape;
  }
  ictx.output_types[0] = out;
  return Status::Ok();
}

Status ConcatFromSequenceKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Value* seq, InputSequence(ctx, 0));
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis"));
  NEE_ASSIGN_OR_RETURN(int64_t new_axis, ctx.node().GetInt("new_axis", 0));
  const std::vector<Value>& elements = seq->elements();
  if (elements.empty()) return ctx.InputError(0, "(sequence) is empty: there is nothing to concatenate");
  std::vector<Tensor> parts;
  for (size_t e = 0; e < elements.size(); ++e) {
    if (!elements[e].is_tensor()) return ctx.InputError(0, "element " + std::to_string(e) + " is not a tensor");
    parts.push_back(elements[e].tensor());
  }
  const Tensor& first = parts[0];
  const int64_t rank = first.rank() + (new_axis ? 1 : 0);
  if (axis < -rank || axis >= rank || rank == 0)
    return ctx.Error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  // Every element must match the first except (without new_axis) along axis.
  for (size_t e = 1; e < parts.size(); ++e) {
    const Tensor& p = parts[e];
    bool ok = p.dtype() == first.dtype() && p.rank() == first.rank();
    for (int64_t d = 0; ok && d < first.rank(); ++d)
      if (p.dim(d) != first.dim(d) && (new_axis || d != axis)) ok = false;
    if (!ok)
      return ctx.InputError(0, "element " + std::to_string(e) + " is " + p.Describe() +
                                   ", which cannot be concatenated with element 0 " + first.Describe());
  }
  if (new_axis) {
    std::vector<int64_t> dims = first.dims();
    dims.insert(dims.begin() + axis, static_cast<int64_t>(parts.size()));
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, first.dtype(), dims));
    cf::StackAlongAxis(parts, axis, out);
    return Status::Ok();
  }
  std::vector<int64_t> dims = first.dims();
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dim(axis);
  dims[static_cast<size_t>(axis)] = total;
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, first.dtype(), dims));
  // Per outer index, each part contributes one contiguous block.
  const int64_t outer = ProductOf(dims, 0, static_cast<size_t>(axis));
  const int64_t inner = ProductOf(dims, static_cast<size_t>(axis) + 1);
  int64_t offset = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& p : parts) {
      const int64_t block = p.dim(axis) * inner;
      cf::CopyElements(p, o * block, out, offset, block);
      offset += block;
    }
  }
  return Status::Ok();
}

// ---- SequenceMap -----------------------------------------------------------------
// Runs the body once per element of the first input sequence; other inputs are
// sequences of the same length (element i taken) or values passed whole.

Status InferSequenceMap(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const Graph* body, ictx.node.GetGraph("body"));
  NEE_RETURN_IF_ERROR(SequenceInputType(ictx, 0).status());
  std::vector<TypeInfo> body_in;
  for (size_t i = 0; i < ictx.num_inputs(); ++i) {
    TypeInfo t = ictx.has_input(i) ? ictx.input_type(i) : TypeInfo{};
    body_in.push_back(t.kind == TypeInfo::Kind::kSequence ? InnerOf(t) : t);
  }
  NEE_ASSIGN_OR_RETURN(std::vector<TypeInfo> body_out, cf::InferBody(ictx, *body, body_in));
  for (size_t i = 0; i < ictx.num_outputs() && i < body_out.size(); ++i)
    ictx.output_types[i] = TypeInfo::Sequence(body_out[i]);
  return Status::Ok();
}

Status SequenceMapKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Graph* body, ctx.node().GetGraph("body"));
  NEE_ASSIGN_OR_RETURN(const Value* first, InputSequence(ctx, 0));
  if (!ctx.subgraphs()) return ctx.Error("cannot run its body: no subgraph runner was provided");
  if (body->inputs.size() != ctx.num_inputs() || body->outputs.size() < ctx.num_outputs())
    return ctx.Error("body takes " + std::to_string(body->inputs.size()) + " inputs and yields " +
                     std::to_string(body->outputs.size()) + " outputs; the node has " +
                     std::to_string(ctx.num_inputs()) + " and " + std::to_string(ctx.num_outputs()));
  const size_t count = first->elements().size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Value* v = ctx.input(i);
    if (!v) return ctx.InputError(i, "is missing");
    if (v->is_sequence() && v->elements().size() != count)
      return ctx.InputError(i, "has " + std::to_string(v->elements().size()) + " elements but input 0 has " +
                                   std::to_string(count));
  }
  std::vector<std::vector<Value>> results(ctx.num_outputs());
  for (size_t e = 0; e < count; ++e) {
    std::vector<Value> body_in;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Value* v = ctx.input(i);
      body_in.push_back(v->is_sequence() ? v->elements()[e] : *v);
    }
    Result<std::vector<Value>> outs = ctx.subgraphs()->Run(*body, body_in);
    if (!outs.ok()) return outs.status().WithContext(ctx.node().Describe() + ": in body '" + body->name + "': ");
    if (outs->size() < ctx.num_outputs()) return ctx.Error("body produced too few outputs");
    for (size_t o = 0; o < ctx.num_outputs(); ++o) {
      NEE_ASSIGN_OR_RETURN(Value owned, cf::OwnedCopy((*outs)[o]));
      results[o].push_back(std::move(owned));
    }
  }
  for (size_t o = 0; o < ctx.num_outputs(); ++o) {
    // The element type: from what the body produced, else from its declaration.
    TypeInfo element = body->outputs[o].type;
    if (!results[o].empty() && results[o][0].is_tensor()) element = ElementTypeOf(results[o][0].tensor().dtype());
    else if (element.is_tensor()) element = ElementTypeOf(element.elem_type);
    NEE_RETURN_IF_ERROR(ctx.SetOutput(o, Value::Sequence(std::move(results[o]), element)));
  }
  return Status::Ok();
}

// ---- Optional / OptionalHasElement / OptionalGetElement -------------------------

Status InferOptional(InferenceContext& ictx) {
  if (ictx.has_input(0)) {
    ictx.output_types[0] = TypeInfo::Optional(ictx.input_type(0));
    return Status::Ok();
  }
  const Attribute* type = ictx.node.FindAttr("type");
  if (!type || type->type != AttrType::kTypeProto)
    return ictx.Error("without an input it needs the 'type' attribute (a TypeProto)");
  ictx.output_types[0] = TypeInfo::Optional(type->tp);
  return Status::Ok();
}

Status OptionalKernel(KernelContext& ctx) {
  if (const Value* v = ctx.input(0)) return cf::SetValueOutput(ctx, 0, *v);
  const Attribute* type = ctx.node().FindAttr("type");
  if (!type || type->type != AttrType::kTypeProto)
    return ctx.Error("without an input it needs the 'type' attribute (a TypeProto)");
  return ctx.SetOutput(0, Value::None(type->tp));
}

Status InferOptionalHasElement(InferenceContext& ictx) {
  if (ictx.opset < 18 && !ictx.has_input(0)) return ictx.InputError(0, "is required before opset 18");
  ictx.output_types[0] = TypeInfo::Tensor(DataType::kBool, Shape{});
  return Status::Ok();
}

Status OptionalHasElementKernel(KernelContext& ctx) {
  const Value* v = ctx.input(0);
  if (!v && ctx.opset() < 18) return ctx.InputError(0, "is required before opset 18");
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, DataType::kBool, {}));
  out.data<bool>()[0] = v != nullptr && !v->is_none() && !v->empty();
  return Status::Ok();
}

Status InferOptionalGetElement(InferenceContext& ictx) {
  if (!ictx.has_input(0)) return ictx.InputError(0, "is required");
  const TypeInfo& t = ictx.input_type(0);
  if (t.kind == TypeInfo::Kind::kOptional) {
    ictx.output_types[0] = InnerOf(t);
  } else if (ictx.opset >= 18 || t.kind == TypeInfo::Kind::kUnknown) {
    ictx.output_types[0] = t;  // opset 18 accepts plain tensors and sequences
  } else {
    return ictx.InputError(0, "must be an optional before opset 18, got " + t.ToString());
  }
  return Status::Ok();
}

Status OptionalGetElementKernel(KernelContext& ctx) {
  const Value* v = ctx.input(0);
  if (!v) return ctx.InputError(0, "is required but missing");
  if (v->is_none()) return ctx.InputError(0, "is an empty optional: it has no element to get");
  return cf::SetValueOutput(ctx, 0, *v);
}

}  // namespace

void RegisterSequenceOps(OpRegistry& registry) {
  registry.RegisterVersions("", "SequenceConstruct", {11}, InferSequenceConstruct, SequenceConstructKernel);
  registry.RegisterVersions("", "SequenceEmpty", {11}, InferSequenceEmpty, SequenceEmptyKernel);
  registry.RegisterVersions("", "SequenceAt", {11}, InferSequenceAt, SequenceAtKernel);
  registry.RegisterVersions("", "SequenceInsert", {11}, InferSequenceInsert, SequenceInsertKernel);
  registry.RegisterVersions("", "SequenceErase", {11}, InferSameSequence, SequenceEraseKernel);
  registry.RegisterVersions("", "SequenceLength", {11}, InferSequenceLength, SequenceLengthKernel);
  // 24 only widened the element types.
  registry.RegisterVersions("", "SplitToSequence", {11, 24}, InferSplitToSequence, SplitToSequenceKernel);
  registry.RegisterVersions("", "ConcatFromSequence", {11}, InferConcatFromSequence, ConcatFromSequenceKernel);
  registry.RegisterVersions("", "SequenceMap", {17}, InferSequenceMap, SequenceMapKernel);
  // 28 only widened the element types.
  registry.RegisterVersions("", "Optional", {15, 28}, InferOptional, OptionalKernel);
  // 18: the input became optional and may be a plain tensor or sequence.
  registry.RegisterVersions("", "OptionalHasElement", {15, 18, 28}, InferOptionalHasElement, OptionalHasElementKernel);
  registry.RegisterVersions("", "OptionalGetElement", {15, 18, 28}, InferOptionalGetElement, OptionalGetElementKernel);
}

}  // namespace nee
