// ConvInteger, MatMulInteger, com.microsoft MatMulIntegerToFloat,
// DequantizeLinear (per tensor) and DynamicQuantizeLinear on the integer GEMM
// (igemm.h). Integer results are exact and the float steps round as the
// reference's do, so these are bitwise the reference kernels (ops/conv.cc,
// ops/matmul.cc, ops/quant_matmul.cc, ops/quantize.cc); anything they do not
// take (other ranks, broadcast batches, malformed inputs) goes to the
// reference, which also reports the errors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "ep/cpu/conv_int_depthwise.h"
#include "ep/cpu/conv_int_geometry.h"
#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/igemm.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/quant_matmul.h"
#include "ep/cpu/sgemm.h"
#include "ops/dynamic_quantize.h"
#include "ops/nn_util.h"
#include "ops/op_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_QUANT_X86 1
#endif

namespace nee::cpu {

namespace quant_matmul {

bool ReadZeroPoint(const KernelContext& ctx, size_t index, DataType type, int64_t per_axis, bool allow_per_axis,
                   std::vector<int32_t>& out, int64_t& stride) {
  out.assign(1, 0);
  stride = 0;
  if (!ctx.has_input(index)) return true;
  const Value* v = ctx.input(index);
  if (!v->is_tensor()) return false;
  const Tensor& t = v->tensor();
  if (t.dtype() != type) return false;
  if (t.num_elements() == 1) {
    out[0] = static_cast<int32_t>(ReadAsDouble(t, 0));
    return true;
  }
  if (!allow_per_axis || t.num_elements() != per_axis) return false;
  out.resize(static_cast<size_t>(per_axis));
  for (int64_t i = 0; i < per_axis; ++i) out[static_cast<size_t>(i)] = static_cast<int32_t>(ReadAsDouble(t, i));
  stride = 1;
  return true;
}

}  // namespace quant_matmul

using quant_matmul::QuantProduct;
using quant_matmul::QuantWeights;
using quant_matmul::ReadZeroPoint;

namespace {

// ---- ConvInteger ---------------------------------------------------------------

// Whether a ConvInteger runs on the u8 x s8 kernel: only where it is VNNI's
// vpdpbusd, exact for any bytes, so the im2col (activations, any values) packs
// as it is (elsewhere the u8 x s8 packing would clamp most of its pairs), and
// only with many output channels a group: the im2col is then written whole and
// packed in a second pass, which the GEMM's rows must pay for. Measured on
// ddddocr's quantized convs (1 thread): 192 and 256 channels 1.3-1.4x faster
// than the int16 kernel, 96 level, 24-48 channels 1.5-2x slower.
constexpr int64_t kMinVnniChannels = 128;
bool ConvIntOnVnni(const ConvInt2D& g) {
  return g.Mg >= kMinVnniChannels && std::strcmp(IgemmU8S8KernelName(), "vnni") == 0;
}

// XORs n bytes with `flip` (0: nothing), a vector at a time. With 0x80 it
// moves bytes between uint8 and int8 by 128: uint8 v becomes the int8 byte
// of v - 128, int8 v the uint8 byte of v + 128.
void FlipBytes(uint8_t* __restrict bytes, int64_t n, uint8_t flip) {
  if (flip == 0) return;
  for (int64_t j = 0; j < n; ++j) bytes[j] = static_cast<uint8_t>(bytes[j] ^ flip);
}

// The weights of every group, packed as the GEMM's A once: on VNNI as uint8
// (int8 weights plus 128, their zero points too: the same W - zw), against an
// int8 im2col (ConvIntOnVnni); otherwise minus their zero points as int16
// pairs, against the 8-bit im2col widened in the kernel.
struct ConvIntWeights {
  bool u8s8 = false;
  std::vector<IgemmPackedA> groups;
  std::vector<IgemmPackedAU8> u8_groups;
  std::vector<int32_t> u8_zero;  // per output channel, for u8_groups
};

std::shared_ptr<const ConvIntWeights> PackConvWeights(const ConvInt2D& g, const Tensor& w,
                                                      const std::vector<int32_t>& wzp, int64_t wzp_stride) {
  auto packed = std::make_shared<ConvIntWeights>();
  const int64_t k = g.K();
  const auto* bytes = static_cast<const uint8_t*>(w.raw_data());
  const bool w_signed = w.dtype() == DataType::kInt8;
  packed->u8s8 = ConvIntOnVnni(g);
  if (packed->u8s8) {
    std::vector<uint8_t> unsigned_w(bytes, bytes + g.M * k);
    FlipBytes(unsigned_w.data(), g.M * k, w_signed ? 0x80 : 0);
    packed->u8_groups.resize(static_cast<size_t>(g.group));
    for (int64_t grp = 0; grp < g.group; ++grp)
      IgemmPackAU8(g.Mg, k, unsigned_w.data() + grp * g.Mg * k, k, &packed->u8_groups[static_cast<size_t>(grp)]);
    packed->u8_zero.resize(static_cast<size_t>(g.M));
    for (int64_t m = 0; m < g.M; ++m)
      packed->u8_zero[static_cast<size_t>(m)] = wzp[static_cast<size_t>(m * wzp_stride)] + (w_signed ? 128 : 0);
    return packed;
  }
  packed->groups.resize(static_cast<size_t>(g.group));
  for (int64_t grp = 0; grp < g.group; ++grp)
    IgemmPackA(g.Mg, k, bytes + grp * g.Mg * k, k, w_signed, wzp.data() + grp * g.Mg * wzp_stride, wzp_stride,
               &packed->groups[static_cast<size_t>(grp)]);
  return packed;
}

// GCC turns short fill and copy loops into memset/memcpy calls, whose call
// overhead dominates for rows of 25-100 bytes and margins of a byte or two.
#if defined(__GNUC__) && !defined(__clang__)
#define NEE_QUANT_NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define NEE_QUANT_NO_LIBCALLS
#endif

// Output pixels [p0, p1) of one im2col row of one (image, group): for im2col
// row r = (c, i, j), the input tap (i, j) of channel c reads at each of those
// output pixels, or the zero point in the padding (the reference subtracts the
// zero point before padding, so padding counts as the zero point). row[0]
// is pixel p0.
NEE_QUANT_NO_LIBCALLS void Im2ColRowInt(const ConvInt2D& g, const uint8_t* x, uint8_t pad, int64_t r, int64_t p0,
                                        int64_t p1, uint8_t* row) {
  const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
  const uint8_t* plane = x + c * g.ih * g.iw;
  // Output columns whose tap lands inside the input row: [lo, hi).
  const int64_t shift = j * g.dw - g.pw;
  int64_t lo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
  int64_t hi = g.iw - shift <= 0 ? 0 : (g.iw - shift + g.sw - 1) / g.sw;
  lo = std::min(lo, g.ow);
  hi = std::clamp(hi, lo, g.ow);
  for (int64_t oy = p0 / g.ow; oy * g.ow < p1; ++oy) {
    // This output row's columns [o0, o1) within [p0, p1).
    const int64_t o0 = std::max<int64_t>(0, p0 - oy * g.ow), o1 = std::min(g.ow, p1 - oy * g.ow);
    uint8_t* dst = row + oy * g.ow - p0;
    const int64_t y = oy * g.sh - g.ph + i * g.dh;
    if (y < 0 || y >= g.ih) {
      for (int64_t o = o0; o < o1; ++o) dst[o] = pad;
      continue;
    }
    const uint8_t* src = plane + y * g.iw + shift;
    const int64_t in0 = std::clamp(lo, o0, o1), in1 = std::clamp(hi, in0, o1);
    for (int64_t o = o0; o < in0; ++o) dst[o] = pad;
    if (g.sw == 1) {
      for (int64_t o = in0; o < in1; ++o) dst[o] = src[o];
    } else {
      for (int64_t o = in0; o < in1; ++o) dst[o] = src[o * g.sw];
    }
    for (int64_t o = in1; o < o1; ++o) dst[o] = pad;
  }
}

// B of one (image, group) packed for the GEMM: the im2col rows built two at a
// time into a scratch pair that stays in L1 and packed from there, instead of
// writing the whole K x P im2col and reading it back.
void PackIm2ColInt(const KernelContext& ctx, const ConvInt2D& g, const uint8_t* x, uint8_t pad, bool is_signed,
                   uint8_t* packed) {
  const int64_t K = g.K(), P = g.P();
  // k pairs write disjoint bytes: shared out over the threads in runs of about 16 KB of input.
  ctx.ParallelFor(IgemmKPairs(K), std::max<int64_t>(1, 8192 / P), [&](int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> t_rows;
    if (t_rows.size() < static_cast<size_t>(2 * P)) t_rows.resize(static_cast<size_t>(2 * P));
    uint8_t* row0 = t_rows.data();
    uint8_t* row1 = row0 + P;
    for (int64_t p = begin; p < end; ++p) {
      Im2ColRowInt(g, x, pad, 2 * p, 0, P, row0);
      const bool odd = 2 * p + 1 < K;
      if (odd) Im2ColRowInt(g, x, pad, 2 * p + 1, 0, P, row1);
      IgemmPackBPair(K, P, p, row0, odd ? row1 : nullptr, is_signed, packed);
    }
  });
}

// Output pixels [p0, p1) of the im2col of one (image, group) as int8 rows
// [K][p1 - p0]: uint8 input minus 128 (the byte with its top bit flipped),
// int8 input as it is; padding is the zero point's byte, flipped alike. Rows
// are shared out over the threads.
void Im2ColSigned(const KernelContext& ctx, const ConvInt2D& g, const uint8_t* x, uint8_t pad, bool x_signed,
                  int64_t p0, int64_t p1, int8_t* out) {
  const int64_t K = g.K(), width = p1 - p0;
  const uint8_t flip = x_signed ? 0 : 0x80;
  ctx.ParallelFor(K, std::max<int64_t>(1, 16384 / width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      uint8_t* __restrict row = reinterpret_cast<uint8_t*>(out + r * width);
      if (g.pointwise()) std::memcpy(row, x + r * g.P() + p0, static_cast<size_t>(width));
      else Im2ColRowInt(g, x, pad, r, p0, p1, row);
      FlipBytes(row, width, flip);
    }
  });
}

// y = (W - zw)(im2col - zx) of every (image, group) on the u8 x s8 kernel, in
// blocks of output pixels whose im2col takes at most about 4 MB.
void ConvIntU8S8(const KernelContext& ctx, const ConvInt2D& g, const ConvIntWeights& w, const uint8_t* xs,
                 bool x_signed, int32_t zx, int32_t* y) {
  const int64_t K = g.K(), P = g.P();
  const int64_t block = std::min(P, std::max<int64_t>(kIgemmCols, (int64_t{4} << 20) / std::max<int64_t>(K, 1) /
                                                                      kIgemmCols * kIgemmCols));
  const int32_t zb = x_signed ? zx : zx - 128;  // the zero point of the flipped bytes
  thread_local std::vector<int8_t> t_cols;
  thread_local IgemmPackedBS8 t_b;
  if (t_cols.size() < static_cast<size_t>(K * block)) t_cols.resize(static_cast<size_t>(K * block));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const uint8_t* xg = xs + (n * g.C + grp * g.Cg) * g.ih * g.iw;
      for (int64_t p0 = 0; p0 < P; p0 += block) {
        const int64_t width = std::min(block, P - p0);
        Im2ColSigned(ctx, g, xg, static_cast<uint8_t>(zx), x_signed, p0, p0 + width, t_cols.data());
        IgemmPackBS8(K, width, t_cols.data(), width, 0.0, &t_b);  // exact on VNNI: never declines
        IgemmU8S8(&ctx, w.u8_groups[static_cast<size_t>(grp)], t_b, w.u8_zero.data() + grp * g.Mg, 1, &zb, 0,
                  y + (n * g.M + grp * g.Mg) * P + p0, P);
      }
    }
}

}  // namespace

Status ConvIntegerFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* w, ctx.InputTensor(1));
  ConvInt2D g;
  if (!PlanConvInt(ctx, *x, *w, g)) return RunReference(ctx);
  std::vector<int32_t> xzp, wzp;
  int64_t xzp_stride = 0, wzp_stride = 0;
  if (!ReadZeroPoint(ctx, 2, x->dtype(), 1, false, xzp, xzp_stride) ||
      !ReadZeroPoint(ctx, 3, w->dtype(), g.M, true, wzp, wzp_stride))
    return RunReference(ctx);
  if (wzp_stride == 0) wzp.assign(static_cast<size_t>(g.M), wzp[0]);
  wzp_stride = 1;
  std::vector<int64_t> out_dims{g.N, g.M};
  for (int64_t d = 2; d < x->rank(); ++d) out_dims.push_back(d + 1 == x->rank() ? g.ow : g.oh);
  if (g.N == 0 || g.M == 0 || g.P() == 0) return ctx.AllocateOutput(0, DataType::kInt32, out_dims).status();
  if (IsConvIntDepthwise(g)) {
    NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kInt32, out_dims));
    ConvIntDepthwise(ctx, g, static_cast<const uint8_t*>(x->raw_data()), x->dtype() == DataType::kInt8, xzp[0],
                     static_cast<const uint8_t*>(w->raw_data()), w->dtype() == DataType::kInt8, wzp.data(),
                     y.data<int32_t>());
    return Status::Ok();
  }
  // The weights are packed once per session when they and their zero point are constants.
  std::shared_ptr<const ConvIntWeights> weights;
  const bool constant = ctx.input_is_constant(1) && (!ctx.has_input(3) || ctx.input_is_constant(3));
  if (ctx.prepared() && constant) {
    // Released, not dropped: were the ISA limit lowered later (tests), the
    // packed kind would no longer match the kernel, and the reference runs.
    auto built = ctx.prepared()->GetOrBuild<ConvIntWeights>(
        {g.M, g.Cg, g.kh, g.kw, g.group}, [&]() -> Result<std::shared_ptr<const ConvIntWeights>> {
          auto p = PackConvWeights(g, *w, wzp, wzp_stride);
          ctx.ReleaseConstantInput(1);
          return p;
        });
    if (built.ok()) weights = built.value();
  }
  if (!weights) weights = PackConvWeights(g, *w, wzp, wzp_stride);
  if (weights->u8s8 != ConvIntOnVnni(g)) return RunReference(ctx);

  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kInt32, out_dims));
  const int64_t K = g.K(), P = g.P();
  const auto* xs = static_cast<const uint8_t*>(x->raw_data());
  const uint8_t pad = static_cast<uint8_t>(xzp[0]);  // the zero point's own byte (int8 in two's complement)
  const int32_t zx = xzp[0];
  const bool x_signed = x->dtype() == DataType::kInt8;
  if (weights->u8s8) {
    ConvIntU8S8(ctx, g, *weights, xs, x_signed, zx, y.data<int32_t>());
    return Status::Ok();
  }
  // Grown, never shrunk: resizing up again after a smaller layer would zero-fill
  // bytes that packing overwrites anyway.
  thread_local std::vector<uint8_t> t_packed;
  const size_t packed_bytes = static_cast<size_t>(IgemmPackBSize(K, P));
  if (t_packed.size() < packed_bytes) t_packed.resize(packed_bytes);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const uint8_t* xg = xs + (n * g.C + grp * g.Cg) * g.ih * g.iw;
      if (g.pointwise()) {
        IgemmPackB(K, P, xg, P, x_signed, t_packed.data());
      } else {
        PackIm2ColInt(ctx, g, xg, pad, x_signed, t_packed.data());
      }
      const IgemmB b{t_packed.data(), K, P, x_signed};
      Igemm(&ctx, weights->groups[static_cast<size_t>(grp)], b, &zx, 0,
            y.data<int32_t>() + (n * g.M + grp * g.Mg) * P, P);
    }
  return Status::Ok();
}

// ---- MatMulInteger -------------------------------------------------------------

namespace {

// At most 0.5% of the pairs with a remainder: each costs about 10-20 times a
// packed pair (a scalar multiply-add per row of a tile), so up to about 10%
// more work, still less than the widened kernel's ~12% (BERT-base int8: 0.05%
// on average, 0.2% at most).
constexpr double kMaxRemainderFraction = 0.005;
// The paired kernel's remainders are per weight, each a vpmaddubsw,
// vpmaddwd and vpaddd per 8 rows of A (a weight's share of the main loop is
// about one operation): at most 1% of the weights keeps them under ~5% of
// the work (BERT-base and GPT-2 int8, their k quads paired per panel to
// avoid them: ~0.03%).
constexpr double kMaxPairedRemainderFraction = 0.01;

}  // namespace

namespace quant_matmul {

std::shared_ptr<QuantWeights> PackQuantWeights(const uint8_t* b, int64_t k, int64_t n, bool b_signed,
                                               bool a_unsigned, bool many_rows) {
  auto w = std::make_shared<QuantWeights>();
  if (a_unsigned && IgemmU8S8Available()) {
    std::vector<uint8_t> shifted;
    const int8_t* s8_bytes = reinterpret_cast<const int8_t*>(b);
    if (!b_signed) {  // uint8 B as int8 bytes B - 128
      shifted.assign(b, b + k * n);
      FlipBytes(shifted.data(), k * n, 0x80);
      s8_bytes = reinterpret_cast<const int8_t*>(shifted.data());
    }
    if (many_rows && IgemmPairedAvailable()) {
      auto paired = std::make_unique<IgemmPackedS8Paired>();
      if (IgemmPackS8Paired(k, n, s8_bytes, n, kMaxPairedRemainderFraction, paired.get())) {
        w->paired = std::move(paired);
        w->shifted = !b_signed;
        return w;
      }
    }
    auto s8 = std::make_unique<IgemmPackedBS8>();
    if (IgemmPackBS8(k, n, s8_bytes, n, kMaxRemainderFraction, s8.get())) {
      w->s8 = std::move(s8);
      w->shifted = !b_signed;
    }
  }
  if (!w->s8) w->wide = std::make_unique<IgemmPackedB>(k, n, b, n, b_signed);
  return w;
}

std::shared_ptr<const QuantWeights> GetQuantWeights(KernelContext& ctx, size_t index, const Tensor& b, int64_t k,
                                                    int64_t n, bool a_unsigned, bool b_transposed) {
  const bool b_signed = b.dtype() == DataType::kInt8;
  auto pack = [&]() -> std::shared_ptr<const QuantWeights> {
    const auto* bytes = static_cast<const uint8_t*>(b.raw_data());
    if (!b_transposed) return PackQuantWeights(bytes, k, n, b_signed, a_unsigned, true);
    // B given as [n, k] (QGemm's transB): the packing reads [k, n], so transpose it once.
    std::vector<uint8_t> kn(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i) kn[static_cast<size_t>(i * n + j)] = bytes[j * k + i];
    return PackQuantWeights(kn.data(), k, n, b_signed, a_unsigned, true);
  };
  if (ctx.prepared() && ctx.input_is_constant(index)) {
    auto built = ctx.prepared()->GetOrBuild<QuantWeights>(
        {k, n, b_signed ? 1 : 0, a_unsigned ? 1 : 0, b_transposed ? 1 : 0},
        [&]() -> Result<std::shared_ptr<const QuantWeights>> {
          std::shared_ptr<const QuantWeights> p = pack();
          ctx.DropConstantInput(index);
          return p;
        });
    if (built.ok()) return built.value();
  }
  return pack();
}

void QuantProduct(KernelContext& ctx, const Tensor& a, int64_t rows, int64_t k, const QuantWeights& w,
                  const int32_t* za, int64_t za_stride, const int32_t* zb, int64_t zb_stride, int32_t* c, int64_t ldc,
                  const IgemmFloatOut* fout) {
  QuantProduct(&ctx, static_cast<const uint8_t*>(a.raw_data()), a.dtype() == DataType::kInt8, rows, k, w, za,
               za_stride, zb, zb_stride, c, ldc, fout);
}

void QuantProduct(const KernelContext* ctx, const uint8_t* a, bool a_signed, int64_t rows, int64_t k,
                  const QuantWeights& w, const int32_t* za, int64_t za_stride, const int32_t* zb, int64_t zb_stride,
                  int32_t* c, int64_t ldc, const IgemmFloatOut* fout) {
  if (w.paired || w.s8) {
    const int64_t n = w.paired ? w.paired->n : w.s8->n;
    thread_local IgemmPackedAU8 t_a8;
    thread_local std::vector<int32_t> t_zb;
    if (w.shifted) {  // the zero points of B - 128
      t_zb.assign(zb, zb + (zb_stride == 0 ? 1 : n));
      for (int32_t& z : t_zb) z -= 128;
      zb = t_zb.data();
    }
    if (w.paired) {  // packed only for uint8 A (a_unsigned)
      IgemmU8S8Paired(ctx, a, rows, k, *w.paired, za, za_stride, zb, zb_stride, c, ldc, fout);
      return;
    }
    IgemmPackAU8(rows, k, a, k, &t_a8);
    IgemmU8S8(ctx, t_a8, *w.s8, za, za_stride, zb, zb_stride, c, ldc, fout);
    return;
  }
  // Kept per thread: grown, never zero-filled again (IgemmPackA writes every element).
  thread_local IgemmPackedA t_pa;
  IgemmPackA(rows, k, a, k, a_signed, za, za_stride, &t_pa);
  Igemm(ctx, t_pa, w.wide->view(), zb, zb_stride, c, ldc, fout);
}

}  // namespace quant_matmul

using quant_matmul::GetQuantWeights;

Status MatMulIntegerFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  // Batched B (one matrix per batch) and mismatched shapes go to the reference.
  if (!Is8Bit(a->dtype()) || !Is8Bit(b->dtype()) || a->rank() < 1 || b->rank() != 2) return RunReference(ctx);
  const auto& ad = a->dims();
  const int64_t k = ad.back(), n = b->dim(1);
  const int64_t m = a->rank() == 1 ? 1 : ad[ad.size() - 2];
  if (b->dim(0) != k) return RunReference(ctx);
  std::vector<int32_t> za, zb;
  int64_t za_stride = 0, zb_stride = 0;
  if (!ReadZeroPoint(ctx, 2, a->dtype(), m, true, za, za_stride) ||
      !ReadZeroPoint(ctx, 3, b->dtype(), n, true, zb, zb_stride))
    return RunReference(ctx);
  std::vector<int64_t> out_dims(ad.begin(), ad.end() - 1);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kInt32, out_dims));
  const int64_t rows = a->rank() == 1 ? 1 : ProductOf(ad, 0, ad.size() - 1);
  if (rows == 0 || n == 0) return Status::Ok();
  if (k == 0) {
    std::fill(y.data<int32_t>(), y.data<int32_t>() + rows * n, 0);
    return Status::Ok();
  }
  const bool a_unsigned = a->dtype() == DataType::kUint8;
  std::shared_ptr<const QuantWeights> w = GetQuantWeights(ctx, 1, *b, k, n, a_unsigned);
  // A's zero point per row of each matrix, repeated over the batch.
  std::vector<int32_t> row_zp(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) row_zp[static_cast<size_t>(r)] = za[static_cast<size_t>((r % m) * za_stride)];
  QuantProduct(ctx, *a, rows, k, *w, row_zp.data(), 1, zb.data(), zb_stride, y.data<int32_t>(), n, nullptr);
  return Status::Ok();
}

// ---- MatMulIntegerToFloat (com.microsoft) ---------------------------------------

// The integer product as MatMulInteger computes it (exact), dequantized in
// the GEMM's tile epilogue while the tile is in L1 (IgemmFloatOut): the same
// roundings as the reference (ops/quant_matmul.cc), so bitwise equal to it.
Status MatMulIntegerToFloatFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* a_scale, ctx.InputTensor(2));
  NEE_ASSIGN_OR_RETURN(const Tensor* b_scale, ctx.InputTensor(3));
  if (!Is8Bit(a->dtype()) || !Is8Bit(b->dtype()) || a->rank() < 1 || b->rank() != 2) return RunReference(ctx);
  const int64_t k = a->dims().back(), n = b->dim(1);
  if (b->dim(0) != k || k == 0 || a_scale->dtype() != DataType::kFloat || a_scale->num_elements() != 1 ||
      b_scale->dtype() != DataType::kFloat || (b_scale->num_elements() != 1 && b_scale->num_elements() != n))
    return RunReference(ctx);
  const Tensor* bias = nullptr;
  if (ctx.has_input(6)) {
    NEE_ASSIGN_OR_RETURN(bias, ctx.InputTensor(6));
    if (bias->dtype() != DataType::kFloat || bias->rank() != 1 || bias->dim(0) != n) return RunReference(ctx);
  }
  std::vector<int32_t> za, zb;
  int64_t za_stride = 0, zb_stride = 0;
  if (!ReadZeroPoint(ctx, 4, a->dtype(), 1, false, za, za_stride) ||
      !ReadZeroPoint(ctx, 5, b->dtype(), n, true, zb, zb_stride))
    return RunReference(ctx);
  std::vector<int64_t> out_dims(a->dims().begin(), a->dims().end() - 1);
  out_dims.push_back(n);
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims));
  const int64_t rows = ProductOf(a->dims(), 0, a->dims().size() - 1);
  if (rows == 0 || n == 0) return Status::Ok();
  std::shared_ptr<const QuantWeights> w = GetQuantWeights(ctx, 1, *b, k, n, a->dtype() == DataType::kUint8);
  // The scale of each column: the float product a_scale * b_scale[j], as Mul computes it.
  const float sa = a_scale->data<float>()[0];
  const int64_t ns = b_scale->num_elements();
  std::vector<float> scale(static_cast<size_t>(ns));
  for (int64_t j = 0; j < ns; ++j) scale[static_cast<size_t>(j)] = sa * b_scale->data<float>()[j];
  IgemmFloatOut fout;
  fout.out = y.data<float>();
  fout.ldo = n;
  fout.scale = scale.data();
  fout.scale_stride = ns == 1 ? 0 : 1;
  fout.bias = bias ? bias->data<float>() : nullptr;
  QuantProduct(ctx, *a, rows, k, *w, za.data(), 0, zb.data(), zb_stride, nullptr, 0, &fout);
  return Status::Ok();
}

// ---- DequantizeLinear ------------------------------------------------------------

namespace {

// y = float(x - zero_point) * scale: x - zero_point is an exact integer of at
// most 9 bits, so the float product rounds once, as the reference's double
// product narrowed to float does.
template <typename T>
void Dequantize8(const T* x, int64_t n, int32_t zero_point, float scale, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int32_t>(x[i]) - zero_point) * scale;
}

}  // namespace

// Per-tensor DequantizeLinear of 8-bit integers to float (a scalar scale and
// zero point); everything else (per axis, blocked, other types, an
// output_dtype) goes to the reference.
Status DequantizeLinearFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  if (!Is8Bit(x->dtype()) || scale->dtype() != DataType::kFloat || scale->rank() != 0 ||
      ctx.node().FindAttr("output_dtype") != nullptr || ctx.node().FindAttr("block_size") != nullptr)
    return RunReference(ctx);
  int32_t zero_point = 0;
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* zp, ctx.InputTensor(2));
    if (zp->dtype() != x->dtype() || zp->rank() != 0) return RunReference(ctx);
    zero_point = static_cast<int32_t>(ReadAsDouble(*zp, 0));
  }
  const float s = scale->data<float>()[0];
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  float* ys = y.data<float>();
  const bool is_signed = x->dtype() == DataType::kInt8;
  ctx.ParallelFor(x->num_elements(), 16384, [&](int64_t begin, int64_t end) {
    if (is_signed) {
      Dequantize8(x->data<int8_t>() + begin, end - begin, zero_point, s, ys + begin);
    } else {
      Dequantize8(x->data<uint8_t>() + begin, end - begin, zero_point, s, ys + begin);
    }
  });
  return Status::Ok();
}

// ---- DynamicQuantizeLinear -------------------------------------------------------

namespace {

// The range [min(0, x), max(0, x)]: NaN never wins a comparison, so NaNs are
// skipped, and -0 never replaces the initial +0, as in the reference's
// std::min / std::max chain.
void RangePortable(const float* x, int64_t n, float& lo, float& hi) {
  for (int64_t i = 0; i < n; ++i) {
    hi = std::max(hi, x[i]);
    lo = std::min(lo, x[i]);
  }
}

// q = clamp(nearbyint(x / scale) + zero_point), NaN -> zero_point.
void QuantizePortable(const float* x, int64_t n, float scale, float zero_point, uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    const float q = std::nearbyint(x[i] / scale) + zero_point;
    y[i] = static_cast<uint8_t>(std::isnan(q) ? zero_point : std::clamp(q, 0.0f, 255.0f));
  }
}

#ifdef NEE_QUANT_X86
// vmaxps / vminps return their second operand when either is NaN or both are
// zeros: with the running range second, a NaN or a -0 leaves it unchanged,
// exactly as the scalar chain. Max and min are exact, so the lane order does
// not matter.
// Four pairs of running vectors over 32 values a step, so that each max and
// min waits on the one four loads back, not on the last (DynamicQuantizeLinear
// of 128 x 3072 floats 100 -> 92 us, of 128 x 768 35 -> 33 us, thread-CPU
// minimums of 2000 runs on Zen 3); each starts from the range given, so a NaN
// or a -0 enters none of them, and they merge by the same exact max and min.
__attribute__((target("avx2,fma"))) void RangeAvx2(const float* x, int64_t n, float& lo, float& hi) {
  __m256 vhi = _mm256_set1_ps(hi), vlo = _mm256_set1_ps(lo);
  __m256 hi1 = vhi, hi2 = vhi, hi3 = vhi, lo1 = vlo, lo2 = vlo, lo3 = vlo;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    const __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
    vhi = _mm256_max_ps(v0, vhi);
    vlo = _mm256_min_ps(v0, vlo);
    hi1 = _mm256_max_ps(v1, hi1);
    lo1 = _mm256_min_ps(v1, lo1);
    hi2 = _mm256_max_ps(v2, hi2);
    lo2 = _mm256_min_ps(v2, lo2);
    hi3 = _mm256_max_ps(v3, hi3);
    lo3 = _mm256_min_ps(v3, lo3);
  }
  vhi = _mm256_max_ps(_mm256_max_ps(hi1, vhi), _mm256_max_ps(hi3, hi2));
  vlo = _mm256_min_ps(_mm256_min_ps(lo1, vlo), _mm256_min_ps(lo3, lo2));
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vhi = _mm256_max_ps(v, vhi);
    vlo = _mm256_min_ps(v, vlo);
  }
  alignas(32) float h[8], l[8];
  _mm256_store_ps(h, vhi);
  _mm256_store_ps(l, vlo);
  for (int j = 0; j < 8; ++j) {
    hi = std::max(hi, h[j]);
    lo = std::min(lo, l[j]);
  }
  RangePortable(x + i, n - i, lo, hi);
}

// Eight quotients x / scale rounded to integers by vcvtps2dq (the current rounding mode, as the scalar
// loop's and the reference's nearbyint: half to even by default) plus the zero point, as int32; the
// conversion saturates later, in the packs. Large quotients are capped at 65536 first (vcvtps2dq turns
// anything beyond int32 into INT_MIN, which would read as very negative); NaN lanes are zeroed, so they
// come out as the zero point. (vminps returns its second operand, the quotient, when that is NaN.)
__attribute__((target("avx2,fma"), always_inline)) inline __m256i QuotientsPlusZero(const float* x, __m256 vs,
                                                                                   __m256i vz) {
  const __m256 t = _mm256_div_ps(_mm256_loadu_ps(x), vs);
  const __m256 nan = _mm256_cmp_ps(t, t, _CMP_UNORD_Q);
  const __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_set1_ps(65536.0f), t));
  return _mm256_add_epi32(_mm256_andnot_si256(_mm256_castps_si256(nan), q), vz);
}

// The same division and rounding as the scalar loop; the clamp to [0, 255] is the packs' saturation
// (int32 -> int16 -> uint8), 32 values at a time (two packs, one packus and a lane permute per 32
// instead of a clamp, blend and three narrowing steps per 8: 0.21 -> 0.15 ns a value on Zen 3, where
// vdivps is now the limit).
__attribute__((target("avx2,fma"))) void QuantizeAvx2(const float* x, int64_t n, float scale, float zero_point,
                                                      uint8_t* y) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256i vz = _mm256_set1_epi32(static_cast<int32_t>(zero_point));
  const __m256i lane_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = QuotientsPlusZero(x + i, vs, vz), b = QuotientsPlusZero(x + i + 8, vs, vz);
    const __m256i c = QuotientsPlusZero(x + i + 16, vs, vz), d = QuotientsPlusZero(x + i + 24, vs, vz);
    // packs within 128-bit lanes: [a0-3 b0-3 | a4-7 b4-7], then bytes [a0-3 b0-3 c0-3 d0-3 | a4-7 ...].
    const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permutevar8x32_epi32(bytes, lane_order));
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i q = QuotientsPlusZero(x + i, vs, vz);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), _mm_packus_epi16(w, w));
  }
  QuantizePortable(x + i, n - i, scale, zero_point, y + i);
}
#endif

bool QuantAvx2() {
#ifdef NEE_QUANT_X86
  return !SgemmPortableForced() && SgemmActiveIsa() >= SgemmIsa::kAvx2;
#else
  return false;
#endif
}

}  // namespace

void QuantizeRange(const float* x, int64_t n, float& lo, float& hi) {
#ifdef NEE_QUANT_X86
  if (QuantAvx2()) return RangeAvx2(x, n, lo, hi);
#endif
  RangePortable(x, n, lo, hi);
}

void QuantizeToUint8(const float* x, int64_t n, float scale, float zero_point, uint8_t* y) {
#ifdef NEE_QUANT_X86
  if (QuantAvx2()) return QuantizeAvx2(x, n, scale, zero_point, y);
#endif
  QuantizePortable(x, n, scale, zero_point, y);
}

// Per-tensor QuantizeLinear of float32 to uint8 (a scalar float scale, a
// uint8 zero point or none): the reference's quotient is the double quotient
// rounded to float, which is the float division (double rounding is
// innocuous for a quotient of floats), then the same rounding, NaN handling
// and saturation as DynamicQuantizeLinear's. Everything else: the reference.
Status QuantizeLinearFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* scale, ctx.InputTensor(1));
  const Node& node = ctx.node();
  if (x->dtype() != DataType::kFloat || scale->dtype() != DataType::kFloat || scale->num_elements() != 1 ||
      scale->rank() > 1 || node.FindAttr("output_dtype") || node.FindAttr("block_size") || node.FindAttr("precision"))
    return RunReference(ctx);
  float zero_point = 0;
  if (ctx.has_input(2)) {
    NEE_ASSIGN_OR_RETURN(const Tensor* zp, ctx.InputTensor(2));
    if (zp->dtype() != DataType::kUint8 || zp->num_elements() != 1 || zp->rank() > 1) return RunReference(ctx);
    zero_point = zp->data<uint8_t>()[0];
  }
  const float s = scale->data<float>()[0];
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kUint8, x->dims()));
  const float* xs = x->data<float>();
  uint8_t* ys = y.data<uint8_t>();
  ctx.ParallelFor(x->num_elements(), 16384,
                  [&](int64_t begin, int64_t end) { QuantizeToUint8(xs + begin, end - begin, s, zero_point, ys + begin); });
  return Status::Ok();
}

Status DynamicQuantizeLinearFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat) return RunReference(ctx);
  const float* xs = x->data<float>();
  const int64_t n = x->num_elements();
  float max_x = 0, min_x = 0;
  // The range by blocks over the threads, then the blocks' ranges in order:
  // max and min are exact and each block starts from [0, 0] as the whole
  // does, so this is the serial scan's result (NaNs skipped, +0 kept over -0).
  constexpr int64_t kRangeBlock = 32768;
  const int64_t blocks = (n + kRangeBlock - 1) / kRangeBlock;
  if (blocks > 1 && ctx.pool()) {
    std::vector<float> block_lo(static_cast<size_t>(blocks), 0.0f), block_hi(static_cast<size_t>(blocks), 0.0f);
    ctx.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        const int64_t b0 = blk * kRangeBlock, len = std::min(kRangeBlock, n - b0);
        QuantizeRange(xs + b0, len, block_lo[static_cast<size_t>(blk)], block_hi[static_cast<size_t>(blk)]);
      }
    });
    for (int64_t blk = 0; blk < blocks; ++blk) {
      max_x = std::max(max_x, block_hi[static_cast<size_t>(blk)]);
      min_x = std::min(min_x, block_lo[static_cast<size_t>(blk)]);
    }
  } else {
    QuantizeRange(xs, n, min_x, max_x);
  }
  const DynamicQuantParams p = DynamicQuantizeParams(min_x, max_x);  // as the reference
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, DataType::kUint8, x->dims()));
  uint8_t* ys = y.data<uint8_t>();
  ctx.ParallelFor(n, 16384, [&](int64_t begin, int64_t end) {
    QuantizeToUint8(xs + begin, end - begin, p.scale, p.zero_point, ys + begin);
  });
  return WriteDynamicQuantizeParams(ctx, p);
}

}  // namespace nee::cpu
