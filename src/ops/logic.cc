// Operator family: Logic. Comparisons (Equal, Greater, Less, GreaterOrEqual,
// LessOrEqual) producing bool, the boolean And/Or/Xor/Not, and Where, all
// with numpy broadcasting (and the legacy broadcast attributes before opset 7
// for the ops that had them).
#include <cstring>

#include "ops/elementwise_impl.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace ew;  // NOLINT: the helpers are this family's vocabulary

constexpr TypeSet kEqualTypes = kNumericTypes | kBoolType | kStringType;

// ---- Comparisons ---------------------------------------------------------------
// float16/bfloat16 compare as float (exact); NaN compares unequal to everything.

Status EqualKernel(KernelContext& ctx) {
  return SameTypeBinary<kEqualTypes, true, true>(ctx, [](const auto& a, const auto& b) { return a == b; });
}
Status GreaterKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, true, true>(ctx, [](auto a, auto b) { return a > b; });
}
Status LessKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, true, true>(ctx, [](auto a, auto b) { return a < b; });
}
Status GreaterOrEqualKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, true, false>(ctx, [](auto a, auto b) { return a >= b; });
}
Status LessOrEqualKernel(KernelContext& ctx) {
  return SameTypeBinary<kNumericTypes, true, false>(ctx, [](auto a, auto b) { return a <= b; });
}

// ---- Boolean logic ----------------------------------------------------------------

Status AndKernel(KernelContext& ctx) {
  return SameTypeBinary<kBoolType, true, true>(ctx, [](bool a, bool b) { return a && b; });
}
Status OrKernel(KernelContext& ctx) {
  return SameTypeBinary<kBoolType, true, true>(ctx, [](bool a, bool b) { return a || b; });
}
Status XorKernel(KernelContext& ctx) {
  return SameTypeBinary<kBoolType, true, true>(ctx, [](bool a, bool b) { return a != b; });
}
Status NotKernel(KernelContext& ctx) {
  return SameTypeUnary<kBoolType, true>(ctx, [](bool x) { return !x; });
}

// ---- Where -------------------------------------------------------------------------

// Where only moves elements, so it works on storage of the element's size.
struct Bytes16 {
  uint64_t lo, hi;
};

template <typename S>
void WhereLoop(const KernelContext& ctx, const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  const bool* pc = cond.data<bool>();
  const S* px = x.data<S>();
  const S* py = y.data<S>();
  S* po = out.data<S>();
  ForEachBlock<3>(ctx, out.dims(), {cond.dims(), x.dims(), y.dims()},
                  [&](int64_t o, const int64_t* off, const int64_t* step, int64_t n) {
                    const bool* c = pc + off[0];
                    const S* a = px + off[1];
                    const S* b = py + off[2];
                    S* dst = po + o;
                    if (step[0] && step[1] && step[2]) {
                      for (int64_t i = 0; i < n; ++i) dst[i] = c[i] ? a[i] : b[i];
                    } else {
                      for (int64_t i = 0; i < n; ++i)
                        dst[i] = c[i * step[0]] ? a[i * step[1]] : b[i * step[2]];
                    }
                  });
}

Status WhereKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* cond, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* y, ctx.InputTensor(2));
  if (cond->dtype() != DataType::kBool)
    return ctx.InputError(0, std::string("(condition) must be bool, got ") + DataTypeName(cond->dtype()));
  if (x->dtype() != y->dtype())
    return ctx.InputError(2, std::string("has element type ") + DataTypeName(y->dtype()) + " but input 1 has " +
                                 DataTypeName(x->dtype()));
  auto xy = BroadcastDims(x->dims(), y->dims());
  if (!xy.ok()) return xy.status().WithContext(ctx.node().Describe() + ": ");
  auto dims = BroadcastDims(cond->dims(), xy.value());
  if (!dims.ok()) return dims.status().WithContext(ctx.node().Describe() + ": ");

  const DataType type = x->dtype();
  if (type == DataType::kUndefined || IsSubByte(type)) return UnsupportedType(ctx.node(), type);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, type, dims.value()));
  if (type == DataType::kString) {
    WhereLoop<std::string>(ctx, *cond, *x, *y, out);
    return Status::Ok();
  }
  switch (ElementBits(type)) {
    case 8: WhereLoop<uint8_t>(ctx, *cond, *x, *y, out); break;
    case 16: WhereLoop<uint16_t>(ctx, *cond, *x, *y, out); break;
    case 32: WhereLoop<uint32_t>(ctx, *cond, *x, *y, out); break;
    case 64: WhereLoop<uint64_t>(ctx, *cond, *x, *y, out); break;
    case 128: WhereLoop<Bytes16>(ctx, *cond, *x, *y, out); break;
    default: return UnsupportedType(ctx.node(), type);
  }
  return Status::Ok();
}

// Output: X's element type, the broadcast shape of all three inputs.
Status InferWhere(InferenceContext& ictx) {
  NEE_RETURN_IF_ERROR(CheckAllowedType<kBoolType>(ictx, 0));
  NEE_RETURN_IF_ERROR(CheckSameTypes(ictx, 1, 3));
  NEE_RETURN_IF_ERROR(InputTensorType(ictx, 1).status());
  NEE_RETURN_IF_ERROR(InferBroadcast(ictx));
  if (ictx.num_outputs() > 0) ictx.output_types[0].elem_type = ictx.input_type(1).elem_type;
  return Status::Ok();
}

}  // namespace

void RegisterLogicOps(OpRegistry& r) {
  r.RegisterVersions("", "Equal", {1, 7, 11, 13, 19},
                     InferAndFold<InferBroadcastSameType<kEqualTypes, true, true>, EqualKernel>, EqualKernel);
  constexpr ShapeFn kCompare = InferBroadcastSameType<kNumericTypes, true, true>;
  r.RegisterVersions("", "Greater", {1, 7, 9, 13}, InferAndFold<kCompare, GreaterKernel>, GreaterKernel);
  r.RegisterVersions("", "Less", {1, 7, 9, 13}, InferAndFold<kCompare, LessKernel>, LessKernel);
  r.RegisterVersions("", "GreaterOrEqual", {12, 16}, InferAndFold<kCompare, GreaterOrEqualKernel>,
                     GreaterOrEqualKernel);
  r.RegisterVersions("", "LessOrEqual", {12, 16}, InferAndFold<kCompare, LessOrEqualKernel>, LessOrEqualKernel);

  constexpr ShapeFn kLogic = InferBroadcastSameType<kBoolType, true, true>;
  r.RegisterVersions("", "And", {1, 7}, InferAndFold<kLogic, AndKernel>, AndKernel);
  r.RegisterVersions("", "Or", {1, 7}, InferAndFold<kLogic, OrKernel>, OrKernel);
  r.RegisterVersions("", "Xor", {1, 7}, InferAndFold<kLogic, XorKernel>, XorKernel);
  r.RegisterVersions("", "Not", {1}, InferAndFold<InferUnary<kBoolType, true>, NotKernel>, NotKernel);

  r.RegisterVersions("", "Where", {9, 16}, InferAndFold<InferWhere, WhereKernel>, WhereKernel);
}

}  // namespace nee
