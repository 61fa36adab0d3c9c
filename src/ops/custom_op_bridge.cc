// The bridge between nee and custom ops' callbacks: the nee_custom_op_api
// table (include/nee/custom_op.h) over InferenceContext and KernelContext,
// and the shape rule and kernel every custom op's schema entry points to.
// Nothing a callback passes in is trusted: indices, types and dims are
// checked, pointers may be NULL, and a failure is a return code, never an abort.
#include <cstring>
#include <exception>

#include "ops/custom_ops.h"

// One call of a callback: the node, and either the rule's or the kernel's context.
struct nee_custom_op_context {
  const nee::Node* node = nullptr;
  int64_t opset = 0;
  nee::InferenceContext* infer = nullptr;
  nee::KernelContext* kernel = nullptr;
  std::string error;
  // infer: each input's dims as int64 (-1 unknown), made on first request.
  std::vector<std::vector<int64_t>> dims;
  std::vector<bool> dims_made;
};

namespace nee {

namespace {

using Ctx = nee_custom_op_context;

bool ValidElementType(int32_t t) { return IsValidDataType(t) && t != static_cast<int32_t>(DataType::kUndefined); }

size_t NumInputs(const Ctx* c) {
  if (!c) return 0;
  return c->infer ? c->infer->num_inputs() : c->kernel ? c->kernel->num_inputs() : 0;
}
size_t NumOutputs(const Ctx* c) {
  if (!c) return 0;
  return c->infer ? c->infer->num_outputs() : c->kernel ? c->kernel->num_outputs() : 0;
}

void SetError(Ctx* c, const char* message) {
  if (!c) return;
  try {
    c->error = message && *message ? message : "failed (no message)";
  } catch (...) {
  }
}

const char* NodeName(const Ctx* c) { return c && c->node ? c->node->name.c_str() : ""; }
int64_t Opset(const Ctx* c) { return c ? c->opset : 0; }

int32_t HasInput(const Ctx* c, size_t i) {
  if (!c || !c->node) return 0;
  return i < NumInputs(c) && c->node->HasInput(i) ? 1 : 0;
}
int32_t HasOutput(const Ctx* c, size_t i) {
  if (!c || !c->node) return 0;
  return i < NumOutputs(c) && c->node->HasOutput(i) ? 1 : 0;
}

// The input's tensor in compute (null with a code otherwise).
const Tensor* KernelInput(const Ctx* c, size_t i, int32_t* code) {
  const Value* v = c->kernel->input(i);
  if (!v) {
    *code = NEE_CUSTOM_OP_ABSENT;
    return nullptr;
  }
  if (!v->is_tensor()) {
    *code = NEE_CUSTOM_OP_WRONG_TYPE;
    return nullptr;
  }
  return &v->tensor();
}

int32_t InputType(const Ctx* c, size_t i, int32_t* elem_type, int64_t* rank, const int64_t** dims) {
  if (!c || i >= NumInputs(c)) return NEE_CUSTOM_OP_INVALID;
  if (c->kernel) {
    int32_t code = NEE_CUSTOM_OP_OK;
    const Tensor* t = KernelInput(c, i, &code);
    if (!t) return code;
    if (elem_type) *elem_type = static_cast<int32_t>(t->dtype());
    if (rank) *rank = static_cast<int64_t>(t->dims().size());
    if (dims) *dims = t->dims().data();
    return NEE_CUSTOM_OP_OK;
  }
  if (!c->infer->has_input(i)) return NEE_CUSTOM_OP_ABSENT;
  const TypeInfo& t = c->infer->input_type(i);
  if (t.kind != TypeInfo::Kind::kTensor && t.kind != TypeInfo::Kind::kUnknown) return NEE_CUSTOM_OP_WRONG_TYPE;
  auto* mc = const_cast<Ctx*>(c);  // the dims cache is the context's own scratch space
  try {
    if (!mc->dims_made[i] && t.shape) {
      for (const Dim& d : *t.shape) mc->dims[i].push_back(d.known() ? d.value : -1);
    }
  } catch (...) {
    return NEE_CUSTOM_OP_FAIL;
  }
  mc->dims_made[i] = true;
  if (elem_type) *elem_type = static_cast<int32_t>(t.elem_type);
  if (rank) *rank = t.shape ? static_cast<int64_t>(t.shape->size()) : -1;
  if (dims) *dims = mc->dims[i].data();
  return NEE_CUSTOM_OP_OK;
}

const void* InputData(const Ctx* c, size_t i) {
  if (!c || i >= NumInputs(c)) return nullptr;
  const Tensor* t = nullptr;
  if (c->kernel) {
    int32_t code;
    t = KernelInput(c, i, &code);
  } else {
    t = c->infer->input_value(i);
  }
  return t && t->dtype() != DataType::kString ? t->raw_data() : nullptr;
}

// The attribute `name` when it has type `type`; null with a code otherwise.
const Attribute* Attr(const Ctx* c, const char* name, AttrType type, int32_t* code) {
  if (!c || !c->node || !name) {
    *code = NEE_CUSTOM_OP_INVALID;
    return nullptr;
  }
  for (const Attribute& a : c->node->attributes) {
    if (a.name != name) continue;
    if (a.type != type) {
      *code = NEE_CUSTOM_OP_WRONG_TYPE;
      return nullptr;
    }
    *code = NEE_CUSTOM_OP_OK;
    return &a;
  }
  *code = NEE_CUSTOM_OP_ABSENT;
  return nullptr;
}

int32_t AttrInt(const Ctx* c, const char* name, int64_t* out) {
  int32_t code;
  const Attribute* a = Attr(c, name, AttrType::kInt, &code);
  if (a && out) *out = a->i;
  return code;
}
int32_t AttrFloat(const Ctx* c, const char* name, float* out) {
  int32_t code;
  const Attribute* a = Attr(c, name, AttrType::kFloat, &code);
  if (a && out) *out = a->f;
  return code;
}
int32_t AttrString(const Ctx* c, const char* name, const char** out, size_t* length) {
  int32_t code;
  const Attribute* a = Attr(c, name, AttrType::kString, &code);
  if (a && out) *out = a->s.data();
  if (a && length) *length = a->s.size();
  return code;
}
int32_t AttrInts(const Ctx* c, const char* name, const int64_t** out, size_t* count) {
  int32_t code;
  const Attribute* a = Attr(c, name, AttrType::kInts, &code);
  if (a && out) *out = a->ints.data();
  if (a && count) *count = a->ints.size();
  return code;
}
int32_t AttrFloats(const Ctx* c, const char* name, const float** out, size_t* count) {
  int32_t code;
  const Attribute* a = Attr(c, name, AttrType::kFloats, &code);
  if (a && out) *out = a->floats.data();
  if (a && count) *count = a->floats.size();
  return code;
}
int32_t AttrStrings(const Ctx* c, const char* name, size_t index, const char** out, size_t* length, size_t* count) {
  int32_t code;
  const Attribute* a = Attr(c, name, AttrType::kStrings, &code);
  if (!a) return code;
  if (count) *count = a->strings.size();
  if (index < a->strings.size()) {
    if (out) *out = a->strings[index].data();
    if (length) *length = a->strings[index].size();
  }
  return NEE_CUSTOM_OP_OK;
}
size_t AttrCount(const Ctx* c) { return c && c->node ? c->node->attributes.size() : 0; }
const char* AttrName(const Ctx* c, size_t i) {
  return c && c->node && i < c->node->attributes.size() ? c->node->attributes[i].name.c_str() : nullptr;
}
int32_t AttrTypeOf(const Ctx* c, const char* name) {
  if (!c || !c->node || !name) return 0;
  const Attribute* a = c->node->FindAttr(name);
  return a ? static_cast<int32_t>(a->type) : 0;
}

int32_t SetOutputType(Ctx* c, size_t i, int32_t elem_type, int64_t rank, const int64_t* dims) {
  if (!c || !c->infer || i >= NumOutputs(c)) return NEE_CUSTOM_OP_INVALID;
  if (elem_type != 0 && !ValidElementType(elem_type)) return NEE_CUSTOM_OP_INVALID;
  if (rank < -1 || rank > 1024 || (rank > 0 && !dims)) return NEE_CUSTOM_OP_INVALID;
  try {
    TypeInfo t = TypeInfo::Tensor(static_cast<DataType>(elem_type));
    if (rank >= 0) {
      Shape shape;
      for (int64_t k = 0; k < rank; ++k) shape.push_back(dims[k] >= 0 ? Dim::Known(dims[k]) : Dim::Unknown());
      t.shape = std::move(shape);
    }
    c->infer->output_types[i] = std::move(t);
  } catch (...) {
    return NEE_CUSTOM_OP_FAIL;
  }
  return NEE_CUSTOM_OP_OK;
}

const char* InputDimSymbol(const Ctx* c, size_t i, size_t axis) {
  if (!c || !c->infer || i >= NumInputs(c) || !c->infer->has_input(i)) return nullptr;
  const TypeInfo& t = c->infer->input_type(i);
  if (!t.shape || axis >= t.shape->size() || (*t.shape)[axis].symbol.empty()) return nullptr;
  return (*t.shape)[axis].symbol.c_str();
}

int32_t SetOutputDimSymbol(Ctx* c, size_t i, size_t axis, const char* symbol) {
  if (!c || !c->infer || i >= NumOutputs(c) || !symbol || !*symbol) return NEE_CUSTOM_OP_INVALID;
  TypeInfo& t = c->infer->output_types[i];
  if (!t.shape || axis >= t.shape->size() || (*t.shape)[axis].known()) return NEE_CUSTOM_OP_INVALID;
  try {
    (*t.shape)[axis] = Dim::Symbol(symbol);
  } catch (...) {
    return NEE_CUSTOM_OP_FAIL;
  }
  return NEE_CUSTOM_OP_OK;
}

int32_t AllocateOutput(Ctx* c, size_t i, int32_t elem_type, size_t rank, const int64_t* dims, void** out_data) {
  if (!c || !c->kernel || i >= NumOutputs(c) || !out_data || (rank > 0 && !dims)) return NEE_CUSTOM_OP_INVALID;
  *out_data = nullptr;
  try {
    if (!ValidElementType(elem_type) || elem_type == static_cast<int32_t>(DataType::kString)) {
      c->error = "allocate_output: output " + std::to_string(i) + ": element type " + std::to_string(elem_type) +
                 " cannot be allocated (a numeric nee_dtype_t is needed)";
      return NEE_CUSTOM_OP_FAIL;
    }
    std::vector<int64_t> shape(dims, dims + rank);
    for (int64_t d : shape) {
      if (d < 0) {
        c->error = "allocate_output: output " + std::to_string(i) + ": negative dim " + std::to_string(d);
        return NEE_CUSTOM_OP_FAIL;
      }
    }
    Result<Tensor> t = c->kernel->AllocateOutputForOverwrite(i, static_cast<DataType>(elem_type), std::move(shape));
    if (!t.ok()) {
      c->error = "allocate_output: " + t.status().message();
      return NEE_CUSTOM_OP_FAIL;
    }
    *out_data = t->raw_data();
  } catch (...) {
    return NEE_CUSTOM_OP_FAIL;
  }
  return NEE_CUSTOM_OP_OK;
}

void ParallelFor(Ctx* c, int64_t n, int64_t min_chunk, void (*fn)(void*, int64_t, int64_t), void* arg) {
  if (!fn || n <= 0) return;
  if (!c || !c->kernel) {
    fn(arg, 0, n);
    return;
  }
  c->kernel->ParallelFor(n, min_chunk < 1 ? 1 : min_chunk, [fn, arg](int64_t begin, int64_t end) { fn(arg, begin, end); });
}

const nee_custom_op_api kApi = {
    NEE_CUSTOM_OP_ABI_VERSION,
    sizeof(nee_custom_op_api),
    CustomOpRegisterOp,
    CustomOpRegistryError,
    SetError,
    NodeName,
    Opset,
    NumInputs,
    NumOutputs,
    HasInput,
    HasOutput,
    InputType,
    InputData,
    AttrInt,
    AttrFloat,
    AttrString,
    AttrInts,
    AttrFloats,
    AttrStrings,
    AttrCount,
    AttrName,
    AttrTypeOf,
    SetOutputType,
    InputDimSymbol,
    SetOutputDimSymbol,
    AllocateOutput,
    ParallelFor,
};

// Calls one of the op's callbacks; the error message when it fails.
std::string Call(const CustomOp& op, nee_custom_op_callback fn, Ctx& c, const char* what) {
  int32_t rc = NEE_CUSTOM_OP_FAIL;
  try {
    rc = fn(&kApi, &c, op.def().user_data);
  } catch (const std::exception& e) {
    return std::string("its ") + what + " callback threw a C++ exception: " + e.what();
  } catch (...) {
    return std::string("its ") + what + " callback threw a C++ exception";
  }
  if (rc == NEE_CUSTOM_OP_OK) return std::string();
  std::string why = c.error.empty() ? "returned " + std::to_string(rc) + " without a message" : c.error;
  return std::string(what) + " failed: " + why;
}

}  // namespace

const nee_custom_op_api* CustomOpApi() { return &kApi; }

Status InferCustomOp(InferenceContext& ctx) {
  if (!ctx.schema || !ctx.schema->custom) return ctx.Error("custom op shape rule called without its definition");
  const CustomOp& op = *ctx.schema->custom;
  if (!op.def().infer) return Status::Ok();
  Ctx c;
  c.node = &ctx.node;
  c.opset = ctx.opset;
  c.infer = &ctx;
  c.dims.resize(ctx.num_inputs());
  c.dims_made.assign(ctx.num_inputs(), false);
  std::string error = Call(op, op.def().infer, c, "shape inference");
  if (!error.empty()) return ctx.Error("custom op from " + op.origin() + ": " + error);
  return Status::Ok();
}

Status RunCustomOp(KernelContext& ctx) {
  const OpSchema* schema = ctx.schema();
  if (!schema || !schema->custom) return ctx.Error("custom op kernel called without its definition");
  const CustomOp& op = *schema->custom;
  Ctx c;
  c.node = &ctx.node();
  c.opset = ctx.opset();
  c.kernel = &ctx;
  std::string error = Call(op, op.def().compute, c, "compute");
  if (!error.empty()) return ctx.Error("custom op from " + op.origin() + ": " + error);
  return Status::Ok();
}

}  // namespace nee
