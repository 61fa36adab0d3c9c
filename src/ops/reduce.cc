// Operator family: Reduce. ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and
// ReduceSumSquare, opset 1 to the newest.
//
// Axes come from the `axes` attribute before opset 13 (ReduceSum) / 18 (the
// others) and from the optional second input afterwards, where the
// `noop_with_empty_axes` attribute decides what "no axes" means. Reducing
// over an empty set of axes applies the op to each element alone (numpy's
// axis=()), which is what the ONNX reference does (e.g. SumSquare -> x*x).
//
// One reference kernel serves all ten ops: for each output element it walks
// the input elements that reduce into it (index arithmetic, no offset tables). Floating types
// accumulate in double; integer types use wrap-around integer arithmetic for
// the exact ops (sum, prod, ...) and double for the others, truncating the
// result as numpy's astype does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ir/float_formats.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The opset from which `axes` is an input rather than an attribute.
int64_t AxesInputOpset(ReduceKind kind) { return kind == ReduceKind::kSum ? 13 : 18; }

// Which axes to reduce, resolved from attribute or input.
struct AxesSpec {
  bool known = true;               // false: axes input present but its value is not known (inference)
  bool reduce_all = false;         // no axes given and noop_with_empty_axes == 0
  std::vector<int64_t> axes;       // normalized, unique; empty with !reduce_all means "noop"
  bool keepdims = true;
};

// Validates and normalizes raw axes against `rank`.
template <typename Ctx>
Status NormalizeAxes(const Ctx& ctx, const std::vector<int64_t>& raw, int64_t rank,
                     std::vector<int64_t>* out) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  out->clear();
  for (int64_t a : raw) {
    if (a < -rank || a >= rank)
      return ctx.Error("axis " + std::to_string(a) + " is out of range for input rank " +
                       std::to_string(rank));
    int64_t n = a < 0 ? a + rank : a;
    if (seen[static_cast<size_t>(n)])
      return ctx.Error("axis " + std::to_string(a) + " appears more than once in axes");
    seen[static_cast<size_t>(n)] = true;
    out->push_back(n);
  }
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

// `axes_value` is the axes input tensor (nullptr when omitted, or unknown at
// inference time with `axes_present` true).
template <typename Ctx>
Result<AxesSpec> ResolveAxes(const Ctx& ctx, const Node& node, ReduceKind kind, int64_t opset,
                             int64_t rank, bool axes_present, const Tensor* axes_value) {
  AxesSpec spec;
  NEE_ASSIGN_OR_RETURN(int64_t keepdims, node.GetInt("keepdims", 1));
  spec.keepdims = keepdims != 0;
  std::vector<int64_t> raw;
  bool noop_when_empty = false;
  if (opset < AxesInputOpset(kind)) {
    NEE_ASSIGN_OR_RETURN(raw, node.GetInts("axes", {}));
  } else {
    NEE_ASSIGN_OR_RETURN(int64_t noop, node.GetInt("noop_with_empty_axes", 0));
    noop_when_empty = noop != 0;
    if (axes_present) {
      if (!axes_value) {
        spec.known = false;
        return spec;
      }
      if (axes_value->dtype() != DataType::kInt64 || axes_value->rank() > 1)
        return ctx.InputError(1, "(axes) must be a 1-D int64 tensor, got " + axes_value->Describe());
      NEE_ASSIGN_OR_RETURN(raw, axes_value->ToInt64Vector());
    }
  }
  if (raw.empty()) {
    spec.reduce_all = !noop_when_empty;
    if (spec.reduce_all)
      for (int64_t d = 0; d < rank; ++d) spec.axes.push_back(d);
    return spec;
  }
  NEE_RETURN_IF_ERROR(NormalizeAxes(ctx, raw, rank, &spec.axes));
  return spec;
}

bool IsReduced(const AxesSpec& spec, int64_t d) {
  return std::binary_search(spec.axes.begin(), spec.axes.end(), d);
}

// ---- Shape rule ------------------------------------------------------------

template <ReduceKind kKind>
Status InferReduce(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* in, InputTensorType(ctx, 0));
  if (ctx.num_outputs() == 0) return Status::Ok();
  TypeInfo& out = ctx.output_types[0];
  out = TypeInfo::Tensor(in->elem_type);
  if (!in->shape) return Status::Ok();
  const Shape& shape = *in->shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  bool axes_present = ctx.opset >= AxesInputOpset(kKind) && ctx.has_input(1);
  NEE_ASSIGN_OR_RETURN(AxesSpec spec, ResolveAxes(ctx, ctx.node, kKind, ctx.opset, rank, axes_present,
                                                  axes_present ? ctx.input_value(1) : nullptr));
  if (!spec.known) {
    if (spec.keepdims) out.shape = Shape(static_cast<size_t>(rank), Dim::Unknown());
    return Status::Ok();
  }
  Shape result;
  for (int64_t d = 0; d < rank; ++d) {
    if (!IsReduced(spec, d)) result.push_back(shape[static_cast<size_t>(d)]);
    else if (spec.keepdims) result.push_back(Dim::Known(1));
  }
  out.shape = std::move(result);
  return Status::Ok();
}

// ---- Kernel ----------------------------------------------------------------

// Maps a flat row-major index over a subset of the input's dims to an
// element offset. Adjacent dims that are contiguous in memory are merged, so
// reducing (or keeping) a trailing block costs one step per index.
struct IndexMap {
  std::vector<int64_t> dims, strides;  // innermost first
  int64_t count = 1;

  int64_t Offset(int64_t i) const {
    if (dims.size() == 1) return i * strides[0];
    int64_t offset = 0;
    for (size_t k = 0; k < dims.size(); ++k) {
      offset += (i % dims[k]) * strides[k];
      i /= dims[k];
    }
    return offset;
  }
};

IndexMap MakeIndexMap(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      const std::vector<bool>& pick) {
  IndexMap map;
  for (size_t d = dims.size(); d-- > 0;) {
    if (!pick[d]) continue;
    map.count *= dims[d];
    if (!map.dims.empty() && strides[d] == map.dims.back() * map.strides.back()) {
      map.dims.back() *= dims[d];  // contiguous with the previous picked dim
    } else {
      map.dims.push_back(dims[d]);
      map.strides.push_back(strides[d]);
    }
  }
  return map;
}

struct ReducePlan {
  std::vector<int64_t> out_dims;
  IndexMap kept;     // output element -> offset of its first input element
  IndexMap reduced;  // reduced element -> offset relative to that
};

ReducePlan MakePlan(const std::vector<int64_t>& dims, const AxesSpec& spec) {
  ReducePlan plan;
  std::vector<bool> reduced(dims.size(), false), kept(dims.size(), false);
  for (size_t d = 0; d < dims.size(); ++d) {
    reduced[d] = IsReduced(spec, static_cast<int64_t>(d));
    kept[d] = !reduced[d];
    if (kept[d]) plan.out_dims.push_back(dims[d]);
    else if (spec.keepdims) plan.out_dims.push_back(1);
  }
  std::vector<int64_t> strides = StridesOf(dims);
  plan.kept = MakeIndexMap(dims, strides, kept);
  plan.reduced = MakeIndexMap(dims, strides, reduced);
  return plan;
}

// Reduces n values given by load(i) in double precision.
template <typename Load>
double ReduceInDouble(ReduceKind kind, int64_t n, const Load& load) {
  switch (kind) {
    case ReduceKind::kMax: {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < n; ++i) {
        double v = load(i);
        if (std::isnan(v)) return v;
        m = std::max(m, v);
      }
      return m;
    }
    case ReduceKind::kMin: {
      double m = std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < n; ++i) {
        double v = load(i);
        if (std::isnan(v)) return v;
        m = std::min(m, v);
      }
      return m;
    }
    case ReduceKind::kProd: {
      double p = 1;
      for (int64_t i = 0; i < n; ++i) p *= load(i);
      return p;
    }
    case ReduceKind::kLogSumExp: {
      // Shift by the largest finite value so exp cannot overflow.
      double shift = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < n; ++i) {
        double v = load(i);
        if (std::isfinite(v)) shift = std::max(shift, v);
      }
      if (!std::isfinite(shift)) shift = 0;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::exp(load(i) - shift);
      return std::log(s) + shift;
    }
    default: break;
  }
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = load(i);
    switch (kind) {
      case ReduceKind::kL1: s += std::fabs(v); break;
      case ReduceKind::kL2:
      case ReduceKind::kSumSquare: s += v * v; break;
      default: s += v; break;
    }
  }
  switch (kind) {
    case ReduceKind::kMean: return s / static_cast<double>(n);
    case ReduceKind::kL2: return std::sqrt(s);
    case ReduceKind::kLogSum: return std::log(s);
    default: return s;
  }
}

// Floating types: Storage is the stored element type, converted through
// double by `to_double` / `from_double`.
template <typename Storage, typename ToDouble, typename FromDouble>
void ReduceFloating(const KernelContext& ctx, ReduceKind kind, const ReducePlan& plan, const Storage* in,
                    Storage* out, ToDouble to_double, FromDouble from_double) {
  const int64_t n = plan.reduced.count;
  ctx.ParallelFor(plan.kept.count, std::max<int64_t>(1, 4096 / (n + 1)),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t o = begin; o < end; ++o) {
                      const Storage* base = in + plan.kept.Offset(o);
                      out[o] = from_double(ReduceInDouble(
                          kind, n, [&](int64_t i) { return to_double(base[plan.reduced.Offset(i)]); }));
                    }
                  });
}

// Converts a double to integer type T the way numpy's astype does for
// in-range values (truncation); out-of-range values saturate and NaN gives 0
// (numpy leaves those undefined).
template <typename T>
T TruncateToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// Integer types. Sum-like ops wrap modulo 2^bits as numpy's do (computed in
// uint64 so overflow is defined, then narrowed).
template <typename T>
T ReduceIntegers(ReduceKind kind, int64_t n, const T* base, const IndexMap& reduced) {
  using U = uint64_t;
  auto at = [&](int64_t i) { return base[reduced.Offset(i)]; };
  switch (kind) {
    case ReduceKind::kMax: {
      T m = std::numeric_limits<T>::lowest();
      for (int64_t i = 0; i < n; ++i) m = std::max(m, at(i));
      return m;
    }
    case ReduceKind::kMin: {
      T m = std::numeric_limits<T>::max();
      for (int64_t i = 0; i < n; ++i) m = std::min(m, at(i));
      return m;
    }
    case ReduceKind::kSum:
    case ReduceKind::kL1:
    case ReduceKind::kSumSquare:
    case ReduceKind::kMean: {
      U s = 0;
      for (int64_t i = 0; i < n; ++i) {
        T v = at(i);
        U u = static_cast<U>(static_cast<int64_t>(v));
        if constexpr (std::is_unsigned_v<T>) u = static_cast<U>(v);
        if (kind == ReduceKind::kL1 && v < T(0)) u = U(0) - u;
        if (kind == ReduceKind::kSumSquare) u = u * u;
        s += u;
      }
      T wrapped = static_cast<T>(s);
      if (kind != ReduceKind::kMean) return wrapped;
      return TruncateToInt<T>(static_cast<double>(wrapped) / static_cast<double>(n));
    }
    case ReduceKind::kProd: {
      U p = 1;
      for (int64_t i = 0; i < n; ++i) {
        T v = at(i);
        p *= std::is_unsigned_v<T> ? static_cast<U>(v) : static_cast<U>(static_cast<int64_t>(v));
      }
      return static_cast<T>(p);
    }
    default:
      return TruncateToInt<T>(
          ReduceInDouble(kind, n, [&](int64_t i) { return static_cast<double>(at(i)); }));
  }
}

template <typename T>
void ReduceIntegerTensor(const KernelContext& ctx, ReduceKind kind, const ReducePlan& plan, const T* in,
                         T* out) {
  const int64_t n = plan.reduced.count;
  ctx.ParallelFor(plan.kept.count, std::max<int64_t>(1, 4096 / (n + 1)),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t o = begin; o < end; ++o)
                      out[o] = ReduceIntegers<T>(kind, n, in + plan.kept.Offset(o), plan.reduced);
                  });
}

const char* KindName(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kSum: return "ReduceSum";
    case ReduceKind::kMean: return "ReduceMean";
    case ReduceKind::kMax: return "ReduceMax";
    case ReduceKind::kMin: return "ReduceMin";
    case ReduceKind::kProd: return "ReduceProd";
    case ReduceKind::kL1: return "ReduceL1";
    case ReduceKind::kL2: return "ReduceL2";
    case ReduceKind::kLogSum: return "ReduceLogSum";
    case ReduceKind::kLogSumExp: return "ReduceLogSumExp";
    case ReduceKind::kSumSquare: return "ReduceSumSquare";
  }
  return "Reduce";
}

template <ReduceKind kKind>
Status ReduceKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  bool axes_present = ctx.opset() >= AxesInputOpset(kKind) && ctx.has_input(1);
  const Tensor* axes = nullptr;
  if (axes_present) {
    NEE_ASSIGN_OR_RETURN(axes, ctx.InputTensor(1));
  }
  NEE_ASSIGN_OR_RETURN(AxesSpec spec,
                       ResolveAxes(ctx, ctx.node(), kKind, ctx.opset(), x->rank(), axes_present, axes));
  ReducePlan plan = MakePlan(x->dims(), spec);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutput(0, x->dtype(), plan.out_dims));
  const DataType dtype = x->dtype();
  switch (dtype) {
    case DataType::kFloat:
      ReduceFloating<float>(ctx, kKind, plan, x->data<float>(), y.data<float>(),
                            [](float v) { return static_cast<double>(v); },
                            [](double v) { return static_cast<float>(v); });
      return Status::Ok();
    case DataType::kDouble:
      ReduceFloating<double>(ctx, kKind, plan, x->data<double>(), y.data<double>(),
                             [](double v) { return v; }, [](double v) { return v; });
      return Status::Ok();
    case DataType::kFloat16:
      ReduceFloating<uint16_t>(ctx, kKind, plan, x->data<uint16_t>(), y.data<uint16_t>(),
                               [](uint16_t v) { return static_cast<double>(HalfToFloat(v)); },
                               [](double v) { return FloatToHalf(static_cast<float>(v)); });
      return Status::Ok();
    case DataType::kBFloat16:
      ReduceFloating<uint16_t>(ctx, kKind, plan, x->data<uint16_t>(), y.data<uint16_t>(),
                               [](uint16_t v) { return static_cast<double>(BFloat16ToFloat(v)); },
                               [](double v) { return FloatToBFloat16(static_cast<float>(v)); });
      return Status::Ok();
    case DataType::kBool:
      if (kKind == ReduceKind::kMax || kKind == ReduceKind::kMin) {
        // bool as uint8 0/1: max is "any", min is "all"; the empty identity is false / true.
        ReduceIntegerTensor<uint8_t>(ctx, kKind, plan, reinterpret_cast<const uint8_t*>(x->data<bool>()),
                                     reinterpret_cast<uint8_t*>(y.data<bool>()));
        if (kKind == ReduceKind::kMin)
          for (int64_t i = 0; i < y.num_elements(); ++i) y.data<bool>()[i] = y.data<uint8_t>()[i] != 0;
        return Status::Ok();
      }
      break;
    case DataType::kInt8: ReduceIntegerTensor(ctx, kKind, plan, x->data<int8_t>(), y.data<int8_t>()); return Status::Ok();
    case DataType::kInt16: ReduceIntegerTensor(ctx, kKind, plan, x->data<int16_t>(), y.data<int16_t>()); return Status::Ok();
    case DataType::kInt32: ReduceIntegerTensor(ctx, kKind, plan, x->data<int32_t>(), y.data<int32_t>()); return Status::Ok();
    case DataType::kInt64: ReduceIntegerTensor(ctx, kKind, plan, x->data<int64_t>(), y.data<int64_t>()); return Status::Ok();
    case DataType::kUint8: ReduceIntegerTensor(ctx, kKind, plan, x->data<uint8_t>(), y.data<uint8_t>()); return Status::Ok();
    case DataType::kUint16: ReduceIntegerTensor(ctx, kKind, plan, x->data<uint16_t>(), y.data<uint16_t>()); return Status::Ok();
    case DataType::kUint32: ReduceIntegerTensor(ctx, kKind, plan, x->data<uint32_t>(), y.data<uint32_t>()); return Status::Ok();
    case DataType::kUint64: ReduceIntegerTensor(ctx, kKind, plan, x->data<uint64_t>(), y.data<uint64_t>()); return Status::Ok();
    default: break;
  }
  return NotImplemented(ctx.node().Describe() + ": " + KindName(kKind) + " does not support element type " +
                        DataTypeName(dtype));
}

template <ReduceKind kKind>
void RegisterReduce(OpRegistry& registry, const char* name, std::initializer_list<int> attr_versions,
                    std::initializer_list<int> input_versions) {
  registry.RegisterVersions("", name, attr_versions, InferReduce<kKind>, ReduceKernel<kKind>);
  registry.RegisterVersions("", name, input_versions, InferReduce<kKind>, ReduceKernel<kKind>);
}

}  // namespace

void RegisterReduceOps(OpRegistry& registry) {
  RegisterReduce<ReduceKind::kSum>(registry, "ReduceSum", {1, 11}, {13});
  RegisterReduce<ReduceKind::kMean>(registry, "ReduceMean", {1, 11, 13}, {18});
  RegisterReduce<ReduceKind::kMax>(registry, "ReduceMax", {1, 11, 12, 13}, {18, 20});
  RegisterReduce<ReduceKind::kMin>(registry, "ReduceMin", {1, 11, 12, 13}, {18, 20});
  RegisterReduce<ReduceKind::kProd>(registry, "ReduceProd", {1, 11, 13}, {18});
  RegisterReduce<ReduceKind::kL1>(registry, "ReduceL1", {1, 11, 13}, {18});
  RegisterReduce<ReduceKind::kL2>(registry, "ReduceL2", {1, 11, 13}, {18});
  RegisterReduce<ReduceKind::kLogSum>(registry, "ReduceLogSum", {1, 11, 13}, {18, 28});
  RegisterReduce<ReduceKind::kLogSumExp>(registry, "ReduceLogSumExp", {1, 11, 13}, {18, 28});
  RegisterReduce<ReduceKind::kSumSquare>(registry, "ReduceSumSquare", {1, 11, 13}, {18});
}

}  // namespace nee
