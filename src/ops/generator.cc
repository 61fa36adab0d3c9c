// Operator family: generators. Constant, ConstantOfShape, Range, EyeLike,
// and the seeded random generators (RandomUniform, RandomNormal, their
// *Like forms, Bernoulli).
//
// The random ops draw from a fixed-algorithm generator (splitmix64 seeded by
// the `seed` attribute, 0 when absent) so a model gives the same numbers on
// every run and platform; they do not reproduce other runtimes' streams.
#include <cmath>
#include <cstring>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee {
namespace {

using namespace tensor_util;  // NOLINT: private helpers of this family

// ---- Constant ---------------------------------------------------------------------------

// The value a Constant node produces (may share the attribute's bytes).
Result<Tensor> ConstantValue(const Node& node) {
  const Attribute* found = nullptr;
  static const char* kNames[] = {"value",       "sparse_value", "value_float", "value_floats",
                                 "value_int",   "value_ints",   "value_string", "value_strings"};
  for (const char* name : kNames) {
    if (const Attribute* a = node.FindAttr(name)) {
      if (found)
        return InvalidModel(node.Describe() + ": has both '" + found->name + "' and '" + a->name +
                            "'; exactly one value attribute is allowed");
      found = a;
    }
  }
  if (!found) return InvalidModel(node.Describe() + ": has no value attribute");
  const std::string& name = found->name;
  if (name == "value") {
    NEE_ASSIGN_OR_RETURN(Tensor t, node.GetTensor("value"));
    return t;
  }
  if (name == "sparse_value") {
    if (found->type != AttrType::kSparseTensor)
      return InvalidModel(node.Describe() + ": attribute 'sparse_value' must be a sparse tensor");
    auto dense = DensifySparse(found->sparse_tensor);
    if (!dense.ok()) return dense.status().WithContext(node.Describe() + ": ");
    return std::move(dense).value();
  }
  if (name == "value_float") {
    NEE_ASSIGN_OR_RETURN(float v, node.GetFloat(name));
    return Tensor::Scalar<float>(v);
  }
  if (name == "value_floats") {
    NEE_ASSIGN_OR_RETURN(std::vector<float> v, node.GetFloats(name));
    return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size())});
  }
  if (name == "value_int") {
    NEE_ASSIGN_OR_RETURN(int64_t v, node.GetInt(name));
    return Tensor::Scalar<int64_t>(v);
  }
  if (name == "value_ints") {
    NEE_ASSIGN_OR_RETURN(std::vector<int64_t> v, node.GetInts(name));
    return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())});
  }
  if (name == "value_string") {
    NEE_ASSIGN_OR_RETURN(std::string v, node.GetString(name));
    return Tensor::Scalar<std::string>(v);
  }
  NEE_ASSIGN_OR_RETURN(std::vector<std::string> v, node.GetStrings(name));
  return Tensor::FromVector<std::string>(v, {static_cast<int64_t>(v.size())});
}

Status ConstantKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(Tensor value, ConstantValue(ctx.node()));
  return CopyToOutput(ctx, 0, value, value.dims());
}

Status ConstantInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(Tensor value, ConstantValue(ictx.node));
  ictx.output_types[0] = TypeInfo::Tensor(value.dtype(), ShapeFromDims(value.dims()));
  if (value.num_elements() <= kMaxPropagatedElements) {
    // Own bytes: the attribute may view a mapped file the checker outlives.
    auto copy = value.Clone();
    if (copy.ok()) SetOutputValue(ictx, 0, std::move(copy).value());
  }
  return Status::Ok();
}

// ---- ConstantOfShape --------------------------------------------------------------------

Result<Tensor> FillValue(const Node& node) {
  if (!node.HasAttr("value")) return Tensor::Scalar<float>(0.0f);
  NEE_ASSIGN_OR_RETURN(Tensor v, node.GetTensor("value"));
  if (v.num_elements() != 1)
    return InvalidModel(node.Describe() + ": attribute 'value' must hold exactly one element, got " + v.Describe());
  return v;
}

Status ConstantOfShapeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntInput(ctx, 0));
  for (int64_t d : dims)
    if (d < 0) return ctx.InputError(0, "has negative dimension " + std::to_string(d));
  NEE_ASSIGN_OR_RETURN(Tensor value, FillValue(ctx.node()));
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, value.dtype(), dims));
  return VisitStorage(ctx.node(), value.dtype(), [&]<typename A>() -> Status {
    A src(value), dst(out);
    for (int64_t i = 0; i < out.num_elements(); ++i) dst.Set(i, src.Get(0));
    return Status::Ok();
  });
}

Status ConstantOfShapeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(Tensor value, FillValue(ictx.node));
  std::optional<Shape> out;
  if (const Tensor* shape = ictx.input_value(0)) {
    auto dims = shape->ToInt64Vector();
    if (dims.ok()) {
      for (int64_t d : dims.value())
        if (d < 0) return ictx.InputError(0, "has negative dimension " + std::to_string(d));
      out = ShapeFromDims(dims.value());
    }
  } else if (ictx.has_input(0) && ictx.input_type(0).shape && ictx.input_type(0).shape->size() == 1 &&
             (*ictx.input_type(0).shape)[0].known()) {
    out = Shape(static_cast<size_t>((*ictx.input_type(0).shape)[0].value), Dim::Unknown());
  }
  ictx.output_types[0] = TypeInfo::Tensor(value.dtype(), out);
  PropagateByRunning(ictx, ConstantOfShapeKernel);
  return Status::Ok();
}

// ---- Range ----------------------------------------------------------------------------------

Status RangeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* start_t, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* limit_t, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* delta_t, ctx.InputTensor(2));
  const DataType type = start_t->dtype();
  for (size_t i = 0; i < 3; ++i) {
    const Tensor* t = i == 0 ? start_t : (i == 1 ? limit_t : delta_t);
    if (t->num_elements() != 1) return ctx.InputError(i, "must be a scalar, got " + t->Describe());
    if (t->dtype() != type) return ctx.InputError(i, "must have the same type as 'start'");
  }
  if (IsSignedInteger(type) && !IsSubByte(type)) {
    const int64_t start = IndexAt(*start_t, 0), limit = IndexAt(*limit_t, 0), delta = IndexAt(*delta_t, 0);
    if (delta == 0) return ctx.InputError(2, "delta must not be zero");
    __int128 span = static_cast<__int128>(limit) - start;
    __int128 count = 0;
    if ((span > 0 && delta > 0) || (span < 0 && delta < 0)) {
      __int128 d = delta > 0 ? delta : -static_cast<__int128>(delta);
      __int128 s = span > 0 ? span : -span;
      count = (s + d - 1) / d;
    }
    if (count > INT64_MAX) return OutOfMemory(ctx.node().Describe() + ": range is too long");
    NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, type, {static_cast<int64_t>(count)}));
    NEE_DISPATCH_NUMERIC(type, break, {
      for (int64_t i = 0; i < out.num_elements(); ++i)
        out.data<T>()[i] = static_cast<T>(start + i * delta);
    });
    return Status::Ok();
  }
  if (!IsFloatingPoint(type) || type == DataType::kFloat4E2M1)
    return NotImplemented(ctx.node().Describe() + ": element type " + DataTypeName(type) + " is not supported");
  const double start = ReadAsDouble(*start_t, 0), limit = ReadAsDouble(*limit_t, 0), delta = ReadAsDouble(*delta_t, 0);
  if (delta == 0 || std::isnan(delta)) return ctx.InputError(2, "delta must be a non-zero number");
  double count_f = std::ceil((limit - start) / delta);
  if (std::isnan(count_f) || count_f < 0) count_f = 0;
  if (count_f > 9.0e18) return OutOfMemory(ctx.node().Describe() + ": range is too long");
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, type, {static_cast<int64_t>(count_f)}));
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    if (type == DataType::kDouble) {
      out.data<double>()[i] = start + static_cast<double>(i) * delta;
    } else {
      // float and narrower types compute in float, like the reference.
      float v = static_cast<float>(start) + static_cast<float>(i) * static_cast<float>(delta);
      WriteFromDouble(out, i, v);
    }
  }
  return Status::Ok();
}

Status RangeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* start, InputTensorType(ictx, 0));
  Dim count = Dim::Unknown();
  const Tensor* start_v = ictx.input_value(0);
  const Tensor* limit_v = ictx.input_value(1);
  const Tensor* delta_v = ictx.input_value(2);
  if (start_v && limit_v && delta_v && start_v->num_elements() == 1 && limit_v->num_elements() == 1 &&
      delta_v->num_elements() == 1 && start_v->dtype() != DataType::kString) {
    // The kernel's count formula, evaluated in double: exact while the
    // operands stay far below 2^52 (beyond that the count stays unknown).
    double s = ReadAsDouble(*start_v, 0), l = ReadAsDouble(*limit_v, 0), d = ReadAsDouble(*delta_v, 0);
    double n = std::ceil((l - s) / d);
    bool exact = std::fabs(s) < 1e15 && std::fabs(l) < 1e15 && std::fabs(d) < 1e15;
    if (exact && std::isfinite(n) && n < 2.0e9) count = Dim::Known(n > 0 ? static_cast<int64_t>(n) : 0);
  }
  ictx.output_types[0] = TypeInfo::Tensor(start->elem_type, Shape{count});
  PropagateByRunning(ictx, RangeKernel);
  return Status::Ok();
}

// ---- EyeLike ----------------------------------------------------------------------------------

Result<DataType> DtypeAttr(const Node& node, DataType fallback) {
  if (!node.HasAttr("dtype")) return fallback;
  NEE_ASSIGN_OR_RETURN(int64_t v, node.GetInt("dtype"));
  if (!IsValidDataType(static_cast<int32_t>(v)))
    return InvalidModel(node.Describe() + ": dtype " + std::to_string(v) + " is not a valid element type");
  return static_cast<DataType>(v);
}

Status EyeLikeKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->rank() != 2) return ctx.InputError(0, "must have rank 2, got " + x->Describe());
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ctx.node(), x->dtype()));
  NEE_ASSIGN_OR_RETURN(int64_t k, ctx.node().GetInt("k", 0));
  if (type == DataType::kString || IsSubByte(type))
    return NotImplemented(ctx.node().Describe() + ": output type " + DataTypeName(type) + " is not supported");
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, type, x->dims()));
  const int64_t rows = x->dim(0), cols = x->dim(1);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) WriteFromDouble(out, i * cols + j, j - i == k ? 1.0 : 0.0);
  return Status::Ok();
}

Status EyeLikeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  if (x->shape && x->shape->size() != 2) return ictx.InputError(0, "must have rank 2");
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ictx.node, x->elem_type));
  ictx.output_types[0] = TypeInfo::Tensor(type, x->shape ? x->shape : Shape{Dim::Unknown(), Dim::Unknown()});
  return Status::Ok();
}

// ---- Random generators -------------------------------------------------------------------------

// splitmix64: tiny, well-distributed and identical everywhere.
class Random {
 public:
  explicit Random(float seed) {
    uint32_t bits;
    std::memcpy(&bits, &seed, sizeof bits);
    state_ = 0x9E3779B97F4A7C15ull ^ bits;
  }
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }
  double Normal() {  // Box-Muller
    double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

enum class Draw { kUniform, kNormal };

Status FillRandom(KernelContext& ctx, Draw draw, DataType type, std::vector<int64_t> dims) {
  if (!IsFloatingPoint(type) || IsSubByte(type))
    return NotImplemented(ctx.node().Describe() + ": output type " + DataTypeName(type) + " is not supported");
  NEE_ASSIGN_OR_RETURN(float seed, ctx.node().GetFloat("seed", 0.0f));
  Random rng(seed);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, type, std::move(dims)));
  if (draw == Draw::kUniform) {
    NEE_ASSIGN_OR_RETURN(float low, ctx.node().GetFloat("low", 0.0f));
    NEE_ASSIGN_OR_RETURN(float high, ctx.node().GetFloat("high", 1.0f));
    for (int64_t i = 0; i < out.num_elements(); ++i) WriteFromDouble(out, i, low + (high - low) * rng.Uniform());
  } else {
    NEE_ASSIGN_OR_RETURN(float mean, ctx.node().GetFloat("mean", 0.0f));
    NEE_ASSIGN_OR_RETURN(float scale, ctx.node().GetFloat("scale", 1.0f));
    for (int64_t i = 0; i < out.num_elements(); ++i) WriteFromDouble(out, i, mean + scale * rng.Normal());
  }
  return Status::Ok();
}

Status RandomUniformKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.node().GetInts("shape"));
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ctx.node(), DataType::kFloat));
  return FillRandom(ctx, Draw::kUniform, type, shape);
}
Status RandomNormalKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.node().GetInts("shape"));
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ctx.node(), DataType::kFloat));
  return FillRandom(ctx, Draw::kNormal, type, shape);
}
Status RandomLikeKernel(KernelContext& ctx, Draw draw) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ctx.node(), x->dtype()));
  return FillRandom(ctx, draw, type, x->dims());
}
Status RandomUniformLikeKernel(KernelContext& ctx) { return RandomLikeKernel(ctx, Draw::kUniform); }
Status RandomNormalLikeKernel(KernelContext& ctx) { return RandomLikeKernel(ctx, Draw::kNormal); }

Status RandomInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ictx.node.GetInts("shape"));
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ictx.node, DataType::kFloat));
  ictx.output_types[0] = TypeInfo::Tensor(type, ShapeFromDims(shape));
  return Status::Ok();
}
Status RandomLikeInfer(InferenceContext& ictx) {
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ictx, 0));
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ictx.node, x->elem_type));
  ictx.output_types[0] = TypeInfo::Tensor(type, x->shape);
  return Status::Ok();
}

Status BernoulliKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* p, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(DataType type, DtypeAttr(ctx.node(), p->dtype()));
  if (type == DataType::kString || IsSubByte(type))
    return NotImplemented(ctx.node().Describe() + ": output type " + DataTypeName(type) + " is not supported");
  NEE_ASSIGN_OR_RETURN(float seed, ctx.node().GetFloat("seed", 0.0f));
  Random rng(seed);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutput(0, type, p->dims()));
  for (int64_t i = 0; i < out.num_elements(); ++i)
    WriteFromDouble(out, i, rng.Uniform() < ReadAsDouble(*p, i) ? 1.0 : 0.0);
  return Status::Ok();
}

}  // namespace

void RegisterGeneratorOps(OpRegistry& r) {
  r.RegisterVersions("", "Constant", {1, 9, 11, 12, 13, 19, 21, 23, 24, 25}, ConstantInfer, ConstantKernel);
  r.RegisterVersions("", "ConstantOfShape", {9, 20, 21, 23, 24, 25}, ConstantOfShapeInfer, ConstantOfShapeKernel);
  r.RegisterVersions("", "Range", {11, 27}, RangeInfer, RangeKernel);
  r.RegisterVersions("", "EyeLike", {9, 22}, EyeLikeInfer, EyeLikeKernel);
  r.RegisterVersions("", "RandomUniform", {1, 22}, RandomInfer, RandomUniformKernel);
  r.RegisterVersions("", "RandomNormal", {1, 22}, RandomInfer, RandomNormalKernel);
  r.RegisterVersions("", "RandomUniformLike", {1, 22}, RandomLikeInfer, RandomUniformLikeKernel);
  r.RegisterVersions("", "RandomNormalLike", {1, 22}, RandomLikeInfer, RandomNormalLikeKernel);
  r.RegisterVersions("", "Bernoulli", {15, 22}, RandomLikeInfer, BernoulliKernel);
}

}  // namespace nee
