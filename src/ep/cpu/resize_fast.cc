// Resize on float32 NCHW for the CPU provider: the upsampling of YOLO / FPN
// heads (nearest x2) and of segmentation decoders (bilinear); nearest also on
// uint8 / int8 (a quantized detector's), never extrapolating.
//
// Bitwise equal to the reference kernel (ops/resize.cc) by construction: the
// per-position source indices, taps and weights come from the reference's own
// functions (ops/resize_geometry.h), computed once per call for the output
// rows and columns, and every output value is combined in the reference's
// order and precision. The reference resizes one axis at a time through
// double buffers (H, then W); here each output row first forms its H-resized
// input row in double (0 + w0*a + w1*b + ..., as the reference's sum) and then
// the W taps of that row, so the same doubles meet in the same order, and the
// result is saturated to float as the reference stores it. Nearest is a
// gather of input bits (a repeated source row is copied from the previous
// output row; integer width factors write each input value f times). With
// AVX2 the taps run four doubles at a time, without FMA so that every product
// and sum rounds exactly as the scalar reference's; the sampling tables are
// cached per geometry in the node's PreparedCache.
//
// Handled: rank 4, N and C left as they are (the reference's identity-axis
// rule), H and W resized in any mode the reference knows; and nearest on
// rank 5 with the last axis left as it is too: the channel-blocked layout's
// [N, Cb, H, W, 8] (opt/layout_blocked.cc), each pixel's 8 lanes copied as
// one unit. Everything else
// (other ranks and types, resized N or C, empty tensors, invalid models) goes
// to the reference kernel.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/resize_geometry.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NEE_RESIZE_X86 1
#endif

namespace nee::cpu {
namespace {

using resize::AxisGeometry;
using resize::Mode;
using resize::ResizeAttrs;
using resize::ResizePlan;

// Per output position along H or W: where to read and, when interpolating,
// with which weights. `taps` entries per position (1 for nearest).
struct AxisTable {
  bool identity = false;  // the reference skips this axis
  int64_t taps = 1;
  // Tap-major: tap k of position o at [k * out_width + o] (so that vector
  // code loads one tap of consecutive positions).
  std::vector<int64_t> index;   // taps * out_width
  std::vector<double> weight;   // taps * out_width (interpolation only)
  std::vector<uint8_t> outside;  // out_width: tf_crop_and_resize positions outside the input
  bool any_outside = false;
  int64_t factor = 0;  // nearest only: index[o] == o / factor for every o (0: no such factor)
};

AxisGeometry GeometryOf(const ResizePlan& plan, const Tensor& x, size_t d) {
  return {x.dim(static_cast<int64_t>(d)), plan.out_dims[d], plan.scales[d], plan.roi_start[d], plan.roi_end[d]};
}

// The width factor f with index[o] == o / f for every o and out == in * f.
int64_t IntegerFactor(const std::vector<int64_t>& index, int64_t in_width) {
  const int64_t out_width = static_cast<int64_t>(index.size());
  if (in_width <= 0 || out_width % in_width != 0) return 0;
  const int64_t f = out_width / in_width;
  for (int64_t o = 0; o < out_width; ++o)
    if (index[static_cast<size_t>(o)] != o / f) return 0;
  return f;
}

// Nearest: the reference's per-axis source index (o itself on an identity axis).
AxisTable NearestTable(const ResizeAttrs& attrs, const AxisGeometry& g) {
  AxisTable t;
  t.identity = resize::IsIdentityAxis(attrs, g);
  t.index.resize(static_cast<size_t>(g.out_width));
  t.outside.assign(static_cast<size_t>(g.out_width), 0);
  for (int64_t o = 0; o < g.out_width; ++o) {
    bool out_of_input = false;
    const double c = t.identity ? static_cast<double>(o) : resize::SourceCoordinate(attrs, g, o, &out_of_input);
    t.index[static_cast<size_t>(o)] = t.identity ? o : resize::NearestIndex(attrs, g, c);
    t.outside[static_cast<size_t>(o)] = out_of_input ? 1 : 0;
    t.any_outside = t.any_outside || out_of_input;
  }
  t.factor = IntegerFactor(t.index, g.in_width);
  return t;
}

// Linear / cubic: the reference's taps per position. Nullopt when positions
// disagree on the tap count (never expected; the reference would cope).
std::optional<AxisTable> InterpolationTable(const ResizeAttrs& attrs, const AxisGeometry& g) {
  AxisTable t;
  t.identity = resize::IsIdentityAxis(attrs, g);
  if (t.identity) return t;
  t.outside.assign(static_cast<size_t>(g.out_width), 0);
  for (int64_t o = 0; o < g.out_width; ++o) {
    resize::Taps taps = resize::TapsFor(attrs, g, o);
    if (o == 0) {
      t.taps = static_cast<int64_t>(taps.index.size());
      t.index.resize(static_cast<size_t>(t.taps * g.out_width));
      t.weight.resize(static_cast<size_t>(t.taps * g.out_width));
    }
    if (static_cast<int64_t>(taps.index.size()) != t.taps || taps.weight.size() != taps.index.size() || t.taps == 0)
      return std::nullopt;
    for (int64_t k = 0; k < t.taps; ++k) {
      t.index[static_cast<size_t>(k * g.out_width + o)] = taps.index[static_cast<size_t>(k)];
      t.weight[static_cast<size_t>(k * g.out_width + o)] = taps.weight[static_cast<size_t>(k)];
    }
    t.outside[static_cast<size_t>(o)] = taps.outside ? 1 : 0;
    t.any_outside = t.any_outside || taps.outside;
  }
  return t;
}

// The sampling tables of H and W: they depend only on the attributes (fixed
// per node) and the geometry, so a session builds them once per shape.
struct AxisTables {
  AxisTable rows, cols;
};

Result<std::shared_ptr<const AxisTables>> BuildTables(const ResizeAttrs& attrs, const AxisGeometry& h,
                                                      const AxisGeometry& w) {
  auto tables = std::make_shared<AxisTables>();
  if (attrs.mode == Mode::kNearest) {
    tables->rows = NearestTable(attrs, h);
    tables->cols = NearestTable(attrs, w);
  } else {
    auto rows = InterpolationTable(attrs, h);
    auto cols = InterpolationTable(attrs, w);
    if (!rows || !cols) return NotImplemented("Resize taps vary along an axis");
    tables->rows = std::move(*rows);
    tables->cols = std::move(*cols);
  }
  return std::shared_ptr<const AxisTables>(std::move(tables));
}

PreparedCache::Key TablesKey(const AxisGeometry& h, const AxisGeometry& w) {
  PreparedCache::Key key;
  for (const AxisGeometry& g : {h, w})
    for (int64_t v : {g.in_width, g.out_width, std::bit_cast<int64_t>(g.scale), std::bit_cast<int64_t>(g.roi_start),
                      std::bit_cast<int64_t>(g.roi_end)})
      key.push_back(v);
  return key;
}

// Everything one call needs, resolved before the output is allocated.
struct FastPlan {
  ResizeAttrs attrs;
  std::vector<int64_t> out_dims;
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t unit = 1;  // floats a pixel: 1, or a rank-5 tensor's last dim
  AxisGeometry h, w;  // what the tables are built from (AttachTables)
  std::shared_ptr<const AxisTables> tables;
  const AxisTable& rows() const { return tables->rows; }
  const AxisTable& cols() const { return tables->cols; }
};

// The plan when this kernel handles the call; nullopt sends it to the reference.
std::optional<FastPlan> PlanFast(KernelContext& ctx) {
  auto x_or = ctx.InputTensor(0);
  if (!x_or.ok()) return std::nullopt;
  const Tensor& x = *x_or.value();
  const size_t rank = x.dims().size();
  const bool bytes = Is8Bit(x.dtype());
  if ((x.dtype() != DataType::kFloat && !bytes) || (rank != 4 && rank != 5) || x.num_elements() == 0)
    return std::nullopt;
  auto attrs_or = resize::ReadKernelAttrs(ctx);
  if (!attrs_or.ok()) return std::nullopt;
  FastPlan p;
  p.attrs = std::move(attrs_or).value();
  // 8-bit: nearest (a gather) only, never extrapolating (only tf_crop_and_resize samples outside the input).
  if (bytes && (p.attrs.mode != Mode::kNearest || p.attrs.coord == resize::Coord::kTfCropAndResize))
    return std::nullopt;
  if (rank == 5 && p.attrs.mode != Mode::kNearest) return std::nullopt;
  auto plan_or = resize::ReadKernelPlan(ctx, p.attrs, x);
  if (!plan_or.ok()) return std::nullopt;
  const ResizePlan& plan = plan_or.value();
  for (size_t d : {size_t{0}, size_t{1}, size_t{4}})
    if (d < rank && !resize::IsIdentityAxis(p.attrs, GeometryOf(plan, x, d))) return std::nullopt;
  p.out_dims = plan.out_dims;
  p.unit = rank == 5 ? x.dim(4) : 1;
  p.planes = x.dim(0) * x.dim(1);
  p.in_h = x.dim(2), p.in_w = x.dim(3), p.out_h = plan.out_dims[2], p.out_w = plan.out_dims[3];
  if (p.out_h == 0 || p.out_w == 0) return std::nullopt;
  // The tables hold up to 4 taps per output row and column, outside the run's
  // memory budget. Only when they are smaller than the output (which is in
  // the budget, and allocated before them) do they pay; a degenerate shape
  // such as 1 x 50M goes to the reference, which needs none.
  // (Sums in double too: int64 dims this large would overflow.)
  constexpr double kMaxTaps = 4;
  if (kMaxTaps * (static_cast<double>(p.out_h) + static_cast<double>(p.out_w)) >
      static_cast<double>(p.planes * p.unit) * static_cast<double>(p.out_h) * static_cast<double>(p.out_w))
    return std::nullopt;
  p.h = GeometryOf(plan, x, 2), p.w = GeometryOf(plan, x, 3);
  return p;
}

// Builds (or finds in the node's cache) the plan's sampling tables; false
// sends the call to the reference.
bool AttachTables(KernelContext& ctx, FastPlan& p) {
  auto build = [&] { return BuildTables(p.attrs, p.h, p.w); };
  auto tables = ctx.prepared() ? ctx.prepared()->GetOrBuild<AxisTables>(TablesKey(p.h, p.w), build) : build();
  if (!tables.ok()) return false;
  p.tables = std::move(tables).value();
  return true;
}

// The reference's store of a final double into float: saturate, then round.
inline float SaturateToFloat(double v) {
  constexpr double kMax = std::numeric_limits<float>::max();
  if (v != v) return static_cast<float>(v);
  return static_cast<float>(v < -kMax ? -kMax : v > kMax ? kMax : v);
}

// ---- Nearest ----------------------------------------------------------------

// One output row of blocked pixels (p.unit elements each) gathered from one
// input row; eight-lane units (the blocked layout's) as one fixed-size copy.
template <typename T>
void NearestUnitRow(const FastPlan& p, const T* src, T* dst) {
  const int64_t* index = p.cols().index.data();
  const int64_t u = p.unit;
  if (u == 8) {
    for (int64_t o = 0; o < p.out_w; ++o) std::memcpy(dst + o * 8, src + index[o] * 8, 8 * sizeof(T));
    return;
  }
  for (int64_t o = 0; o < p.out_w; ++o)
    std::memcpy(dst + o * u, src + index[o] * u, static_cast<size_t>(u) * sizeof(T));
}

// One output row gathered from one input row.
template <typename T>
void NearestRow(const FastPlan& p, const T* src, T* dst) {
  const AxisTable& c = p.cols();
  if (p.unit != 1) {
    NearestUnitRow(p, src, dst);
  } else if (c.factor == 1) {
    std::memcpy(dst, src, static_cast<size_t>(p.out_w) * sizeof(T));
  } else if (c.factor == 2) {
    for (int64_t i = 0; i < p.in_w; ++i) dst[2 * i] = dst[2 * i + 1] = src[i];
  } else if (c.factor > 2) {
    for (int64_t i = 0; i < p.in_w; ++i) std::fill(dst + i * c.factor, dst + (i + 1) * c.factor, src[i]);
  } else {
    const int64_t* index = c.index.data();
    for (int64_t o = 0; o < p.out_w; ++o) dst[o] = src[index[o]];
  }
}

// Output rows [begin, end) of all planes (row r = plane * out_h + oh). An
// 8-bit plan has no extrapolated pixels (PlanFast), so `extrapolated` is a float's.
template <typename T>
void NearestRows(const FastPlan& p, const T* x, T* y, int64_t begin, int64_t end) {
  const T extrapolated = static_cast<T>(SaturateToFloat(p.attrs.extrapolation_value));
  const int64_t row = p.out_w * p.unit;  // elements an output row
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / p.out_h, oh = r % p.out_h;
    T* dst = y + r * row;
    const int64_t ih = p.rows().index[static_cast<size_t>(oh)];
    if (p.rows().outside[static_cast<size_t>(oh)]) {
      std::fill(dst, dst + row, extrapolated);
      continue;
    }
    if (r > begin && oh > 0 && !p.rows().outside[static_cast<size_t>(oh - 1)] &&
        p.rows().index[static_cast<size_t>(oh - 1)] == ih) {
      std::memcpy(dst, dst - row, static_cast<size_t>(row) * sizeof(T));
      continue;
    }
    NearestRow(p, x + (plane * p.in_h + ih) * p.in_w * p.unit, dst);
    if (p.cols().any_outside)
      for (int64_t o = 0; o < p.out_w; ++o)
        if (p.cols().outside[static_cast<size_t>(o)]) std::fill(dst + o * p.unit, dst + (o + 1) * p.unit, extrapolated);
  }
}

// Rank 5 (the blocked layout [N, Cb, H, W, 8]) on more than one thread: the
// tasks are ranges of output rows of an image, every channel block each, as
// the blocked convs around it share their pixels (parallel_tasks.h), so each
// thread writes the rows its next conv reads; a split of the rows of all
// planes would hand each thread half the channel blocks instead.
template <typename T>
void NearestByRowRanges(const KernelContext& ctx, const FastPlan& p, const T* x, T* y, int64_t images,
                        int64_t min_chunk) {
  const int64_t blocks = p.planes / images;
  const int64_t parts = RangesPerImage(ctx, p.out_h * blocks, min_chunk);
  ParallelImageRanges(ctx, images, parts, p.out_h, 1, [&](int64_t n, int64_t oh0, int64_t oh1) {
    for (int64_t plane = n * blocks; plane < (n + 1) * blocks; ++plane)
      NearestRows(p, x, y, plane * p.out_h + oh0, plane * p.out_h + oh1);
  });
}

// ---- Linear / cubic -----------------------------------------------------------

#if NEE_RESIZE_X86
// AVX2 without FMA: every product and sum rounds as the reference's scalar
// double arithmetic does (a fused multiply-add would not).
std::atomic<bool> force_portable{false};

inline bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has && !force_portable.load(std::memory_order_relaxed);
}

// The H taps of output row oh, four doubles at a time (ResizeColumnPass).
__attribute__((target("avx2"))) void ColumnTapsAvx2(const FastPlan& p, const float* plane, int64_t oh,
                                                    double* row) {
  const AxisTable& t = p.rows();
  const int64_t n = p.in_w, vec_end = n - n % 4;
  for (int64_t w = 0; w < n; ++w) row[w] = 0.0;
  for (int64_t k = 0; k < t.taps; ++k) {
    const size_t at = static_cast<size_t>(k * p.out_h + oh);
    const float* src = plane + t.index[at] * n;
    const double wk = t.weight[at];
    const __m256d vw = _mm256_set1_pd(wk);
    for (int64_t w = 0; w < vec_end; w += 4) {
      const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(src + w));
      _mm256_storeu_pd(row + w, _mm256_add_pd(_mm256_loadu_pd(row + w), _mm256_mul_pd(vw, v)));
    }
    for (int64_t w = vec_end; w < n; ++w) row[w] += wk * static_cast<double>(src[w]);
  }
}

// Two W taps per output, gathered; saturated to float as SaturateToFloat
// (min/max with the value second, so that NaN passes through).
__attribute__((target("avx2"))) void RowTaps2Avx2(const AxisTable& t, const double* row, float* dst, int64_t n) {
  const int64_t *i0 = t.index.data(), *i1 = i0 + n;
  const double *w0 = t.weight.data(), *w1 = w0 + n;
  const __m256d hi = _mm256_set1_pd(std::numeric_limits<float>::max()), lo = _mm256_set1_pd(-std::numeric_limits<float>::max());
  const __m256i one = _mm256_set1_epi64x(1);
  int64_t o = 0;
  for (; o + 4 <= n; o += 4) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(i0 + o));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(i1 + o));
    __m256d a, b;
    if (_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(v1, _mm256_add_epi64(v0, one)))) == 0xF) {
      // Adjacent taps (all but the clamped edges): four pair loads, transposed.
      const __m256d p02 = _mm256_set_m128d(_mm_loadu_pd(row + i0[o + 2]), _mm_loadu_pd(row + i0[o]));
      const __m256d p13 = _mm256_set_m128d(_mm_loadu_pd(row + i0[o + 3]), _mm_loadu_pd(row + i0[o + 1]));
      a = _mm256_unpacklo_pd(p02, p13);
      b = _mm256_unpackhi_pd(p02, p13);
    } else {
      a = _mm256_i64gather_pd(row, v0, 8);
      b = _mm256_i64gather_pd(row, v1, 8);
    }
    __m256d s = _mm256_add_pd(_mm256_setzero_pd(), _mm256_mul_pd(_mm256_loadu_pd(w0 + o), a));
    s = _mm256_add_pd(s, _mm256_mul_pd(_mm256_loadu_pd(w1 + o), b));
    s = _mm256_max_pd(lo, _mm256_min_pd(hi, s));
    _mm_storeu_ps(dst + o, _mm256_cvtpd_ps(s));
  }
  for (; o < n; ++o) {
    double s = 0;
    s += w0[o] * row[i0[o]];
    s += w1[o] * row[i1[o]];
    dst[o] = SaturateToFloat(s);
  }
}
#endif

// The H-resized input row for output row oh of one plane, in double.
void ResizeColumnPass(const FastPlan& p, const float* plane, int64_t oh, double* row) {
  const AxisTable& t = p.rows();
  if (t.identity) {
    const float* src = plane + oh * p.in_w;
    for (int64_t w = 0; w < p.in_w; ++w) row[w] = static_cast<double>(src[w]);
    return;
  }
  if (t.outside[static_cast<size_t>(oh)]) {
    std::fill(row, row + p.in_w, p.attrs.extrapolation_value);
    return;
  }
#if NEE_RESIZE_X86
  if (CpuHasAvx2()) {
    ColumnTapsAvx2(p, plane, oh, row);
    return;
  }
#endif
  std::fill(row, row + p.in_w, 0.0);
  // Tap by tap over the row: per element the reference's s = 0; s += w_k * v_k.
  for (int64_t k = 0; k < t.taps; ++k) {
    const size_t at = static_cast<size_t>(k * p.out_h + oh);
    const float* src = plane + t.index[at] * p.in_w;
    const double wk = t.weight[at];
    for (int64_t w = 0; w < p.in_w; ++w) row[w] += wk * static_cast<double>(src[w]);
  }
}

// One output row from its H-resized row: the W taps, then the float store.
void ResizeRowPass(const FastPlan& p, const double* row, float* dst) {
  const AxisTable& t = p.cols();
  if (t.identity) {
    for (int64_t o = 0; o < p.out_w; ++o) dst[o] = SaturateToFloat(row[o]);
    return;
  }
#if NEE_RESIZE_X86
  if (t.taps == 2 && !t.any_outside && CpuHasAvx2()) {
    RowTaps2Avx2(t, row, dst, p.out_w);
    return;
  }
#endif
  const int64_t n = p.out_w;
  for (int64_t o = 0; o < n; ++o) {
    double s = 0;
    for (int64_t k = 0; k < t.taps; ++k) s += t.weight[static_cast<size_t>(k * n + o)] * row[t.index[static_cast<size_t>(k * n + o)]];
    dst[o] = SaturateToFloat(t.outside[static_cast<size_t>(o)] ? p.attrs.extrapolation_value : s);
  }
}

void InterpolateRows(const FastPlan& p, const float* x, float* y, int64_t begin, int64_t end) {
  std::vector<double> row(static_cast<size_t>(p.in_w));
  for (int64_t r = begin; r < end; ++r) {
    const int64_t plane = r / p.out_h, oh = r % p.out_h;
    ResizeColumnPass(p, x + plane * p.in_h * p.in_w, oh, row.data());
    ResizeRowPass(p, row.data(), y + r * p.out_w);
  }
}

}  // namespace

void ResizeForcePortable(bool on) {
#if NEE_RESIZE_X86
  force_portable.store(on, std::memory_order_relaxed);
#else
  (void)on;
#endif
}

namespace {

// Nearest on 8-bit elements (no interpolation: the bytes are gathered as they are).
Status ResizeBytes(const KernelContext& ctx, const FastPlan& p, const Tensor& x, Tensor& y) {
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  const int64_t min_chunk = std::max<int64_t>(1, 65536 / (p.out_w * p.unit));
  if (p.unit != 1 && NumThreads(ctx) > 1) {
    NearestByRowRanges(ctx, p, src, dst, x.dim(0), min_chunk);
    return Status::Ok();
  }
  ctx.ParallelFor(p.planes * p.out_h, min_chunk, [&](int64_t begin, int64_t end) {
    NearestRows(p, src, dst, begin, end);
  });
  return Status::Ok();
}

}  // namespace

Status ResizeFast(KernelContext& ctx) {
  std::optional<FastPlan> plan = PlanFast(ctx);
  if (!plan) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  // The output before the tables: a size over the memory budget stops here.
  NEE_ASSIGN_OR_RETURN(Tensor y, ctx.AllocateOutputForOverwrite(0, x->dtype(), plan->out_dims));
  if (!AttachTables(ctx, *plan)) {
    y = Tensor();  // the reference allocates the output again
    return RunReference(ctx);
  }
  const FastPlan& p = *plan;
  if (x->dtype() != DataType::kFloat) return ResizeBytes(ctx, p, *x, y);
  const float* src = x->data<float>();
  float* dst = y.data<float>();
  // Output rows of all planes, in chunks of about 16k outputs: each row is
  // computed the same way whichever chunk (thread) it falls in.
  const int64_t rows = p.planes * p.out_h;
  const int64_t min_chunk = std::max<int64_t>(1, 16384 / (p.out_w * p.unit));
  const bool nearest = p.attrs.mode == Mode::kNearest;
  if (p.unit != 1 && NumThreads(ctx) > 1) {
    NearestByRowRanges(ctx, p, src, dst, x->dim(0), min_chunk);
    return Status::Ok();
  }
  ctx.ParallelFor(rows, min_chunk, [&](int64_t begin, int64_t end) {
    if (nearest) NearestRows(p, src, dst, begin, end);
    else InterpolateRows(p, src, dst, begin, end);
  });
  return Status::Ok();
}

}  // namespace nee::cpu
