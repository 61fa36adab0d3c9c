// com.microsoft MatMulNBits (ops/matmul_nbits.h): attributes and inputs
// validated once for the shape rule, the reference kernel and the fast kernel;
// the reference dequantizes one column of W at a time and sums in double.
#include "ops/matmul_nbits.h"

#include <optional>
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {

namespace {

constexpr int64_t kImplementedBits = 4;
// K and N beyond this are refused before any size is computed from them (a
// hostile attribute must not overflow blocks * blob).
constexpr int64_t kMaxDim = int64_t{1} << 40;

constexpr size_t kA = 0, kB = 1, kScales = 2, kZeroPoints = 3, kGIdx = 4, kBias = 5;

std::string Num(int64_t v) { return std::to_string(v); }

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + Num(dims[i]);
  return s + "]";
}

int64_t Elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A per-block input (scales, unpacked zero points): [N, blocks] or N * blocks flat.
bool PerBlockShape(const std::vector<int64_t>& dims, int64_t n, int64_t per_column) {
  if (dims.size() == 2) return dims[0] == n && dims[1] == per_column;
  return dims.size() == 1 && dims[0] == n * per_column;
}

// What is wrong with one input's shape.
struct ShapeProblem {
  size_t input = 0;
  std::string what;
};

// The shapes of B, scales, zero points and bias (each null when unknown)
// against the attributes; `zp_packed`: the zero points are 4-bit packed uint8.
std::vector<ShapeProblem> CheckShapes(const MatMulNBitsAttrs& at, const std::vector<int64_t>* b,
                                      const std::vector<int64_t>* scales, const std::vector<int64_t>* zp,
                                      bool zp_packed, const std::vector<int64_t>* bias) {
  std::vector<ShapeProblem> problems;
  const std::vector<int64_t> b_want = {at.n, at.blocks, at.blob};
  if (b && *b != b_want)
    problems.push_back({kB, "(B) must be uint8 " + DimsText(b_want) + " for N=" + Num(at.n) + ", K=" + Num(at.k) +
                                ", block_size=" + Num(at.block_size) + ", got " + DimsText(*b)});
  if (scales && !PerBlockShape(*scales, at.n, at.blocks))
    problems.push_back({kScales, "(scales) must hold N x blocks = " + Num(at.n) + " x " + Num(at.blocks) +
                                     " values ([N, blocks] or flat), got " + DimsText(*scales)});
  if (zp) {
    const int64_t per_column = zp_packed ? at.zp_row : at.blocks;
    if (!PerBlockShape(*zp, at.n, per_column))
      problems.push_back({kZeroPoints, std::string("(zero_points) must hold N x ") +
                                           (zp_packed ? "ceil(blocks / 2)" : "blocks") + " = " + Num(at.n) + " x " +
                                           Num(per_column) + (zp_packed ? " packed uint8" : "") + " values, got " +
                                           DimsText(*zp)});
  }
  if (bias && (bias->size() != 1 || (*bias)[0] != at.n))
    problems.push_back({kBias, "(bias) must be [" + Num(at.n) + "], got " + DimsText(*bias)});
  return problems;
}

// The static dims of an input's type, when known.
bool KnownDims(const InferenceContext& ctx, size_t i, std::vector<int64_t>* dims) {
  if (!ctx.has_input(i)) return false;
  const TypeInfo& t = ctx.input_type(i);
  return t.shape && ShapeIsStatic(*t.shape, dims);
}

Status CheckFloatType(const InferenceContext& ctx, size_t i, const char* name) {
  if (!ctx.has_input(i)) return Status::Ok();
  const DataType t = ctx.input_type(i).elem_type;
  if (t != DataType::kUndefined && t != DataType::kFloat)
    return NotImplemented(ctx.node.Describe() + ": " + name + " is " + DataTypeName(t) +
                          "; only float32 is implemented");
  return Status::Ok();
}

Status InferMatMulNBits(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(MatMulNBitsAttrs at, MatMulNBitsAttrsOf(ctx.node));
  if (ctx.has_input(kGIdx))
    return NotImplemented(ctx.node.Describe() + ": g_idx (deprecated by ONNX Runtime) is not implemented");
  NEE_RETURN_IF_ERROR(CheckFloatType(ctx, kA, "A"));
  NEE_RETURN_IF_ERROR(CheckFloatType(ctx, kScales, "scales"));
  NEE_RETURN_IF_ERROR(CheckFloatType(ctx, kBias, "bias"));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* a, InputTensorType(ctx, kA));
  std::vector<int64_t> b, scales, zp, bias;
  const bool zp_packed = ctx.has_input(kZeroPoints) && ctx.input_type(kZeroPoints).elem_type == DataType::kUint8;
  const std::vector<ShapeProblem> problems =
      CheckShapes(at, KnownDims(ctx, kB, &b) ? &b : nullptr, KnownDims(ctx, kScales, &scales) ? &scales : nullptr,
                  KnownDims(ctx, kZeroPoints, &zp) ? &zp : nullptr, zp_packed,
                  KnownDims(ctx, kBias, &bias) ? &bias : nullptr);
  if (!problems.empty()) return ctx.InputError(problems[0].input, problems[0].what);
  std::optional<Shape> shape;
  if (a->shape) {
    if (a->shape->empty()) return ctx.InputError(kA, "(A) must have rank >= 1");
    const Dim& last = a->shape->back();
    if (last.known() && last.value != at.k)
      return ctx.InputError(kA, "(A) has last dim " + Num(last.value) + " but K=" + Num(at.k));
    Shape out(a->shape->begin(), a->shape->end() - 1);
    out.push_back(Dim::Known(at.n));
    shape = std::move(out);
  }
  ctx.output_types[0] = TypeInfo::Tensor(DataType::kFloat, std::move(shape));
  return Status::Ok();
}

// Column n of W (K values) dequantized as the spec states: (q - zp) * scale.
void DequantizeColumn(const MatMulNBitsGeometry& g, int64_t n, float* w) {
  const MatMulNBitsAttrs& at = g.attrs;
  const uint8_t* column = g.b + n * at.blocks * at.blob;
  for (int64_t k = 0; k < at.k; ++k) {
    const int64_t block = k / at.block_size;
    const uint8_t byte = column[block * at.blob + (k % at.block_size) / 2];
    const int q = (k & 1) ? byte >> 4 : byte & 0x0F;
    w[k] = (static_cast<float>(q) - MatMulNBitsZeroPoint(g, n, block)) * g.scales[n * at.blocks + block];
  }
}

Status MatMulNBitsKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(MatMulNBitsGeometry g, MatMulNBitsGeometryOf(ctx));
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, g.out_dims));
  float* out = y.data<float>();
  const int64_t k = g.attrs.k, n = g.attrs.n;
  ctx.ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> w(static_cast<size_t>(k));
    for (int64_t j = begin; j < end; ++j) {
      DequantizeColumn(g, j, w.data());
      for (int64_t i = 0; i < g.rows; ++i) {
        const float* a = g.a + i * k;
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a[p]) * w[p];
        float v = static_cast<float>(sum);
        if (g.bias) v += g.bias[j];
        out[i * n + j] = v;
      }
    }
  });
  return Status::Ok();
}

}  // namespace

Result<MatMulNBitsAttrs> MatMulNBitsAttrsOf(const Node& node) {
  MatMulNBitsAttrs at;
  NEE_ASSIGN_OR_RETURN(at.k, node.GetInt("K"));
  NEE_ASSIGN_OR_RETURN(at.n, node.GetInt("N"));
  NEE_ASSIGN_OR_RETURN(at.block_size, node.GetInt("block_size"));
  NEE_ASSIGN_OR_RETURN(int64_t bits, node.GetInt("bits", kImplementedBits));
  NEE_ASSIGN_OR_RETURN(int64_t prepacked, node.GetInt("weight_prepacked", 0));
  const std::string who = node.Describe() + ": ";
  if (at.k < 1 || at.k > kMaxDim) return InvalidModel(who + "attribute K must be in [1, 2^40], got " + Num(at.k));
  if (at.n < 1 || at.n > kMaxDim) return InvalidModel(who + "attribute N must be in [1, 2^40], got " + Num(at.n));
  if (at.block_size < 16 || at.block_size > kMaxDim || (at.block_size & (at.block_size - 1)) != 0)
    return InvalidModel(who + "attribute block_size must be a power of two >= 16, got " + Num(at.block_size));
  if (bits != kImplementedBits)
    return NotImplemented(who + "bits=" + Num(bits) + ": only 4-bit weights are implemented");
  if (prepacked != 0)
    return NotImplemented(who + "weight_prepacked=" + Num(prepacked) + " (an EP-specific layout) is not implemented");
  at.blocks = (at.k + at.block_size - 1) / at.block_size;
  at.blob = at.block_size * kImplementedBits / 8;
  at.zp_row = (at.blocks + 1) / 2;
  return at;
}

Result<MatMulNBitsGeometry> MatMulNBitsGeometryOf(const KernelContext& ctx) {
  MatMulNBitsGeometry g;
  NEE_ASSIGN_OR_RETURN(g.attrs, MatMulNBitsAttrsOf(ctx.node()));
  const MatMulNBitsAttrs& at = g.attrs;
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(kA));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(kB));
  NEE_ASSIGN_OR_RETURN(const Tensor* scales, ctx.InputTensor(kScales));
  NEE_ASSIGN_OR_RETURN(const Tensor* zp, OptionalInputTensor(ctx, kZeroPoints));
  NEE_ASSIGN_OR_RETURN(const Tensor* g_idx, OptionalInputTensor(ctx, kGIdx));
  NEE_ASSIGN_OR_RETURN(const Tensor* bias, OptionalInputTensor(ctx, kBias));
  if (g_idx) return NotImplemented(ctx.node().Describe() + ": g_idx (deprecated by ONNX Runtime) is not implemented");
  if (a->dtype() != DataType::kFloat)
    return NotImplemented(ctx.node().Describe() + ": A is " + a->Describe() + "; only float32 is implemented");
  if (b->dtype() != DataType::kUint8) return ctx.InputError(kB, "(B) must be uint8, got " + b->Describe());
  if (scales->dtype() != DataType::kFloat)
    return ctx.InputError(kScales, "(scales) must be float32 as A is, got " + scales->Describe());
  if (zp && zp->dtype() != DataType::kUint8 && zp->dtype() != DataType::kFloat)
    return ctx.InputError(kZeroPoints, "(zero_points) must be uint8 (packed) or float32, got " + zp->Describe());
  if (bias && bias->dtype() != DataType::kFloat)
    return ctx.InputError(kBias, "(bias) must be float32, got " + bias->Describe());
  const std::vector<ShapeProblem> problems =
      CheckShapes(at, &b->dims(), &scales->dims(), zp ? &zp->dims() : nullptr,
                  zp && zp->dtype() == DataType::kUint8, bias ? &bias->dims() : nullptr);
  if (!problems.empty()) return ctx.InputError(problems[0].input, problems[0].what);
  if (a->rank() < 1) return ctx.InputError(kA, "(A) must have rank >= 1, got " + a->Describe());
  if (a->dims().back() != at.k)
    return ctx.InputError(kA, "(A) has last dim " + Num(a->dims().back()) + " but K=" + Num(at.k));
  g.out_dims.assign(a->dims().begin(), a->dims().end() - 1);
  g.out_dims.push_back(at.n);
  g.rows = Elements(a->dims()) / at.k;
  g.a = a->data<float>();
  g.b = b->data<uint8_t>();
  g.scales = scales->data<float>();
  if (zp && zp->dtype() == DataType::kUint8) g.zp_packed = zp->data<uint8_t>();
  if (zp && zp->dtype() == DataType::kFloat) g.zp_float = zp->data<float>();
  if (bias) g.bias = bias->data<float>();
  return g;
}

void RegisterMatMulNBitsOps(OpRegistry& registry) {
  registry.RegisterVersions("com.microsoft", "MatMulNBits", {1}, InferMatMulNBits, MatMulNBitsKernel);
}

}  // namespace nee
