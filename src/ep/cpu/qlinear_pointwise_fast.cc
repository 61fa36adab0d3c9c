// com.microsoft QLinearMul, QLinearSigmoid, QLinearLeakyRelu and QLinearConcat, which ONNX Runtime's
// quantize_static writes in the QOperator form (EfficientNet's and YOLO's SiLU as QLinearSigmoid then
// QLinearMul, squeeze-and-excitation scales as a QLinearMul broadcast over the pixels, YOLO's neck's
// QLinearConcats): bitwise the reference kernels (ops/quantize_contrib.cc).
//
// QLinearMul: per element (float(a - za) * float(b - zb)) * (sa * sb / sc), rounded to nearest even, plus the
// output's zero point, saturated — the reference's float operations in its order, eight lanes at a time with
// AVX2 (no contraction: the product of two differences is exact, then one rounded multiply). Broadcasting is
// taken as runs of the output in which each operand either advances or stays (one value over a run: a
// per-channel scale), the runs cut into pieces for the threads; where those runs would be short (an operand
// broadcast over a few trailing elements, YOLO's anchors), that operand is written out at the output's shape
// first.
//
// QLinearSigmoid and QLinearLeakyRelu map each byte through a 256-entry table built as the reference builds
// it (dequantize, the float function, quantize); so does QLinearConcat each input whose scale or zero point
// differs from the output's (YOLO's neck), the others copied.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "ep/cpu/byte_lookup.h"
#include "ep/cpu/conv_int_geometry.h"  // Is8Bit
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/qlinear_common.h"
#include "ep/cpu/sgemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "ep/cpu/simd_x86.h"
#define NEE_QLINEAR_X86 1
#endif

namespace nee::cpu {

namespace {

// One run of a QLinearMul: `count` outputs from y, a advancing by one, b by b_step (0 or 1); a and b are
// the node's A and B or, where only B advances, B and A, each with its own zero point.
struct MulRun {
  const uint8_t* a;
  const uint8_t* b;
  int64_t b_step;
  uint8_t* y;
  int64_t count;
  int32_t za, zb;
};

struct MulParams {
  bool is_signed;
  int32_t zc;
  float ratio;  // sa * sb / sc, as the reference computes it
};

inline int32_t Int8At(const uint8_t* p, bool is_signed) {
  return is_signed ? static_cast<int32_t>(static_cast<int8_t>(*p)) : static_cast<int32_t>(*p);
}

NEE_NO_FP_CONTRACT void MulRunPortable(const MulRun& r, const MulParams& p) {
  for (int64_t i = 0; i < r.count; ++i) {
    const float va = static_cast<float>(Int8At(r.a + i, p.is_signed) - r.za);
    const float vb = static_cast<float>(Int8At(r.b + i * r.b_step, p.is_signed) - r.zb);
    float v = va * vb;
    v = v * p.ratio;
    r.y[i] = static_cast<uint8_t>(Store8(v, p.zc, p.is_signed));
  }
}

#ifdef NEE_QLINEAR_X86
__attribute__((target("avx2"))) inline __m256 Dequant8(const uint8_t* p, __m256i zp, bool is_signed) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256i wide = is_signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  return _mm256_cvtepi32_ps(_mm256_sub_epi32(wide, zp));
}

// Eight at a time: the same float operations (no FMA in this target), nearest-even rounding, saturation.
__attribute__((target("avx2"))) void MulRunAvx2(const MulRun& r, const MulParams& p) {
  const __m256i za = _mm256_set1_epi32(r.za), zb = _mm256_set1_epi32(r.zb);
  const __m256 ratio = _mm256_set1_ps(p.ratio), zc = _mm256_set1_ps(static_cast<float>(p.zc));
  const __m256 lo = _mm256_set1_ps(p.is_signed ? -128.0f : 0.0f), hi = _mm256_set1_ps(p.is_signed ? 127.0f : 255.0f);
  const __m256 b_value = _mm256_set1_ps(static_cast<float>(Int8At(r.b, p.is_signed) - r.zb));
  int64_t i = 0;
  for (; i + 8 <= r.count; i += 8) {
    const __m256 va = Dequant8(r.a + i, za, p.is_signed);
    const __m256 vb = r.b_step ? Dequant8(r.b + i, zb, p.is_signed) : b_value;
    __m256 v = _mm256_mul_ps(_mm256_mul_ps(va, vb), ratio);
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zc), lo), hi);
    const __m256i q = _mm256_cvtps_epi32(v);
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b8 = p.is_signed ? _mm_packs_epi16(w16, w16) : _mm_packus_epi16(w16, w16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(r.y + i), b8);
  }
  MulRunPortable(MulRun{r.a + i, r.b + i * r.b_step, r.b_step, r.y + i, r.count - i, r.za, r.zb}, p);
}
#endif

// The output's runs, each cut to at most kPiece elements (so that the threads share a large one).
constexpr int64_t kPiece = 4096;

std::vector<MulRun> MulRuns(const Tensor& a, int32_t za, const Tensor& b, int32_t zb,
                            const std::vector<int64_t>& out_dims, Tensor& y) {
  std::vector<MulRun> runs;
  const auto* ap = static_cast<const uint8_t*>(a.raw_data());
  const auto* bp = static_cast<const uint8_t*>(b.raw_data());
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  ForEachBroadcastBlock(out_dims, {a.dims(), b.dims()},
                        [&](int64_t out, const int64_t* offs, const int64_t* steps, int64_t count) {
                          // Multiplication commutes bit for bit: the advancing operand goes first.
                          const bool swap = steps[0] == 0 && steps[1] == 1;
                          const uint8_t* x = swap ? bp + offs[1] : ap + offs[0];
                          const uint8_t* z = swap ? ap + offs[0] : bp + offs[1];
                          const int64_t x_step = swap ? steps[1] : steps[0], z_step = swap ? steps[0] : steps[1];
                          const int32_t zx = swap ? zb : za, zz = swap ? za : zb;
                          for (int64_t c = 0; c < count; c += (x_step ? kPiece : 1)) {
                            // A run where neither advances is one element at a time (x_step 0: count 1 each).
                            const int64_t n = x_step ? std::min(kPiece, count - c) : 1;
                            runs.push_back({x + c * x_step, z + c * z_step, z_step, yp + out + c, n, zx, zz});
                          }
                        });
  return runs;
}

// The output's innermost runs over which x, broadcast to `out`, either advances throughout or stays: the
// product of the trailing output dims of one kind (x's dim equal to the output's, or 1), dims of 1 aside.
int64_t InnerRun(const std::vector<int64_t>& x, const std::vector<int64_t>& out) {
  int64_t n = 1;
  int kind = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t od = out[out.size() - 1 - i];
    if (od == 1) continue;
    const int64_t xd = i < x.size() ? x[x.size() - 1 - i] : 1;
    const int k = xd == od ? 1 : 0;
    if (kind >= 0 && k != kind) break;
    kind = k;
    n *= od;
  }
  return n;
}

// Dims d.. of x written out at `dims` into dst: `strides` are x's, right-aligned to the output, 0 where x is
// broadcast; `blocks[d]` the output's elements per index of dim d. A broadcast dim's first slice is computed
// once and copied to the others.
void ExpandBytes(const uint8_t* src, const std::vector<int64_t>& strides, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& blocks, size_t d, uint8_t* dst) {
  const size_t n = static_cast<size_t>(dims[d]);
  if (d + 1 == dims.size()) {
    if (strides[d]) std::memcpy(dst, src, n);
    else std::memset(dst, *src, n);
    return;
  }
  const size_t block = static_cast<size_t>(blocks[d]);
  if (strides[d] == 0) {
    ExpandBytes(src, strides, dims, blocks, d + 1, dst);
    for (size_t i = 1; i < n; ++i) std::memcpy(dst + i * block, dst, block);
    return;
  }
  for (size_t i = 0; i < n; ++i) ExpandBytes(src + i * strides[d], strides, dims, blocks, d + 1, dst + i * block);
}

// `x` written out at `out_dims` (numpy broadcasting; out_dims of rank >= 1).
Result<Tensor> BroadcastBytes(const Tensor& x, const std::vector<int64_t>& out_dims) {
  NEE_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(x.dtype(), out_dims));
  if (out.num_elements() == 0) return out;
  const size_t rank = out_dims.size(), offset = rank - static_cast<size_t>(x.rank());
  std::vector<int64_t> strides(rank, 0), blocks(rank, 1);
  for (size_t d = rank, stride = 1; d-- > offset;) {
    const int64_t xd = x.dim(static_cast<int64_t>(d - offset));
    strides[d] = xd == 1 ? 0 : static_cast<int64_t>(stride);
    stride *= static_cast<size_t>(xd);
  }
  for (size_t d = rank - 1; d-- > 0;) blocks[d] = blocks[d + 1] * out_dims[d + 1];
  ExpandBytes(static_cast<const uint8_t*>(x.raw_data()), strides, out_dims, blocks, 0,
              static_cast<uint8_t*>(out.raw_data()));
  return out;
}

}  // namespace

Status QLinearMulFast(KernelContext& ctx) {
  const Tensor *pa = nullptr, *pb = nullptr;
  Quant8 qa, qb, qc;
  if (!ReadQLinearBinary(ctx, &pa, &pb, &qa, &qb, &qc)) return RunReference(ctx);
  const Tensor& a = *pa;
  const Tensor& b = *pb;
  auto out_dims = BroadcastDims(a.dims(), b.dims());
  if (!out_dims.ok()) return RunReference(ctx);
  const MulParams p{a.dtype() == DataType::kInt8, qc.zero_point, qa.scale * qb.scale / qc.scale};
  // Beyond this a product could overflow to infinity (or be NaN), which the vector path rounds differently.
  if (!(std::fabs(p.ratio) < 1e30f)) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, a.dtype(), out_dims.value()));
  if (y.num_elements() == 0) return Status::Ok();
  // Short runs (an operand broadcast over a few trailing elements: YOLO's anchors, [1, 3, 1, 1, 2] against
  // [1, 3, 80, 80, 2], in runs of two) cost a call each: that operand is written out at the output's shape
  // first, which leaves one run (the same products: each element meets the same two bytes).
  const std::vector<int64_t>& dims = out_dims.value();
  const bool a_full = a.dims() == dims, b_full = b.dims() == dims;
  Tensor expanded;
  if (a_full != b_full && y.num_elements() >= 64 && InnerRun(a_full ? b.dims() : a.dims(), dims) < 16) {
    NEE_ASSIGN_OR_RETURN(expanded, BroadcastBytes(a_full ? b : a, dims));
  }
  const Tensor& a_in = expanded.defined() && !a_full ? expanded : a;
  const Tensor& b_in = expanded.defined() && a_full ? expanded : b;
  const std::vector<MulRun> runs = MulRuns(a_in, qa.zero_point, b_in, qb.zero_point, dims, y);
#ifdef NEE_QLINEAR_X86
  const bool avx2 = CpuHasAvx2Fma() && !SgemmPortableForced();
#endif
  const int64_t mean_run = std::max<int64_t>(1, y.num_elements() / static_cast<int64_t>(runs.size()));
  const int64_t per_task = std::max<int64_t>(1, kPiece / mean_run);  // about kPiece elements a chunk
  ctx.ParallelFor(static_cast<int64_t>(runs.size()), per_task, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
#ifdef NEE_QLINEAR_X86
      if (avx2) {
        MulRunAvx2(runs[static_cast<size_t>(t)], p);
        continue;
      }
#endif
      MulRunPortable(runs[static_cast<size_t>(t)], p);
    }
  });
  return Status::Ok();
}

namespace {

// A QLinear unary op (X, X_scale, X_zp, Y_scale, Y_zp) through its table: fn(dequantized x) / y_scale, stored.
template <typename Fn>
NEE_NO_FP_CONTRACT Status QLinearTableFast(KernelContext& ctx, Fn fn) {
  if (!ctx.has_input(0) || !ctx.input(0)->is_tensor() || !ctx.has_input(3)) return RunReference(ctx);
  const Tensor& x = ctx.input(0)->tensor();
  Quant8 qx, qy;
  if (!Is8Bit(x.dtype()) || !ReadQuant8(ctx, 1, 2, x.dtype(), &qx) || !ReadQuant8(ctx, 3, 4, x.dtype(), &qy))
    return RunReference(ctx);
  const bool is_signed = x.dtype() == DataType::kInt8;
  const int32_t low = is_signed ? -128 : 0;
  uint8_t table[256];
  for (int32_t v = low; v < low + 256; ++v) {
    const float dq = static_cast<float>(v - qx.zero_point) * qx.scale;
    table[v - low] = static_cast<uint8_t>(Store8(fn(dq) / qy.scale, qy.zero_point, is_signed));
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x.dtype(), x.dims()));
  MapThroughTable(ctx, x, ByteTable(table), y);
  return Status::Ok();
}

// The 256-entry table of a requantization from q_in to q_out, as the reference computes each element.
NEE_NO_FP_CONTRACT void RequantizeTable(const Quant8& q_in, const Quant8& q_out, bool is_signed,
                                        uint8_t (&table)[256]) {
  const int32_t low = is_signed ? -128 : 0;
  for (int32_t v = low; v < low + 256; ++v) {
    const float dq = static_cast<float>(v - q_in.zero_point) * q_in.scale;
    table[v - low] = static_cast<uint8_t>(Store8(dq / q_out.scale, q_out.zero_point, is_signed));
  }
}

// One QLinearConcat input: its bytes, rows of `row` bytes, and its table (or none: copied as it is).
struct ConcatPart {
  const uint8_t* x;
  int64_t row;
  int64_t column;  // where its rows start in an output row
  bool identity;
  std::unique_ptr<ByteTable> table;  // null where the part is copied
};

}  // namespace

// QLinearConcat: each input through the table of its requantization (a copy where that is the identity).
Status QLinearConcatFast(KernelContext& ctx) {
  const size_t n = ctx.num_inputs();
  if (n < 5 || (n - 2) % 3 != 0 || !ctx.has_input(2) || !ctx.input(2)->is_tensor()) return RunReference(ctx);
  const Tensor& first = ctx.input(2)->tensor();
  const DataType type = first.dtype();
  Quant8 qy;
  auto axis_attr = ctx.node().GetInt("axis", 0);
  if (!Is8Bit(type) || !ReadQuant8(ctx, 0, 1, type, &qy) || !axis_attr.ok()) return RunReference(ctx);
  const int64_t rank = first.rank();
  const int64_t axis = axis_attr.value() < 0 ? axis_attr.value() + rank : axis_attr.value();
  if (axis < 0 || axis >= rank) return RunReference(ctx);
  const bool is_signed = type == DataType::kInt8;
  std::vector<int64_t> out = first.dims();
  out[static_cast<size_t>(axis)] = 0;
  const int64_t inner = ProductOf(first.dims(), static_cast<size_t>(axis) + 1);
  std::vector<ConcatPart> parts((n - 2) / 3);
  int64_t column = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const size_t i = 2 + 3 * k;
    if (!ctx.has_input(i) || !ctx.input(i)->is_tensor()) return RunReference(ctx);
    const Tensor& x = ctx.input(i)->tensor();
    Quant8 qx;
    if (x.dtype() != type || x.rank() != rank || !ReadQuant8(ctx, i + 1, i + 2, type, &qx)) return RunReference(ctx);
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && x.dim(d) != first.dim(d)) return RunReference(ctx);
    ConcatPart& part = parts[k];
    part.x = static_cast<const uint8_t*>(x.raw_data());
    part.row = x.dim(axis) * inner;
    part.column = column;
    uint8_t table[256];
    RequantizeTable(qx, qy, is_signed, table);
    part.identity = true;
    const uint8_t offset = is_signed ? 0x80 : 0;  // int8 v sits at table[v + 128]
    for (int v = 0; v < 256; ++v) part.identity &= table[v] == static_cast<uint8_t>(v ^ offset);
    if (!part.identity) part.table = std::make_unique<ByteTable>(table);
    column += part.row;
    out[static_cast<size_t>(axis)] += x.dim(axis);
  }
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, type, out));
  const int64_t outer = ProductOf(out, 0, static_cast<size_t>(axis));
  const int64_t out_row = column;
  auto* yp = static_cast<uint8_t*>(y.raw_data());
  const uint8_t offset = is_signed ? 0x80 : 0;
  const int64_t tasks = outer * static_cast<int64_t>(parts.size());
  ctx.ParallelFor(tasks, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, out_row)), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const ConcatPart& part = parts[static_cast<size_t>(t % static_cast<int64_t>(parts.size()))];
      const int64_t o = t / static_cast<int64_t>(parts.size());
      const uint8_t* src = part.x + o * part.row;
      uint8_t* dst = yp + o * out_row + part.column;
      if (part.identity) std::memcpy(dst, src, static_cast<size_t>(part.row));
      else LookupBytes(*part.table, src, dst, part.row, offset);
    }
  });
  return Status::Ok();
}

Status QLinearLeakyReluFast(KernelContext& ctx) {
  auto alpha_attr = ctx.node().GetFloat("alpha", 0.01f);
  if (!alpha_attr.ok()) return RunReference(ctx);
  const float alpha = alpha_attr.value();
  return QLinearTableFast(ctx, [alpha](float v) { return v >= 0 ? v : v * alpha; });
}

Status QLinearSigmoidFast(KernelContext& ctx) {
  return QLinearTableFast(ctx, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
}

}  // namespace nee::cpu
