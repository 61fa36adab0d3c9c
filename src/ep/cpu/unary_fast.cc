// Float32 activations and unary math, vectorized.
//
// Exact ops — Relu, LeakyRelu, HardSigmoid, HardSwish, Clip, Neg, Sqrt,
// Reciprocal — perform the reference's IEEE operations in the reference's
// order, so they are bitwise equal to it. They are compiled for AVX2 without
// FMA (and baseline SSE2) on purpose: with FMA available GCC would contract
// alpha * x + beta into one rounding, which the reference does not do.
//
// Approximated ops — Erf, Gelu (both forms), com.microsoft Gelu, BiasGelu,
// FastGelu — use the erf and tanh of simd_math.h (AVX2+FMA), whose error
// bounds are stated there; the tests bound the outputs' error against the
// reference. Lanes are independent and tails go through a padded vector, so
// the split between threads never changes a result.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/simd_vector.h"
#include "ep/cpu/simd_x86.h"
#include "ops/op_util.h"

namespace nee::cpu {
namespace {

constexpr int64_t kMinChunk = 1 << 14;  // elements per task

// ---- Exact ops: GCC vector code, one instruction set per caller ----------------

// Each op maps x to *y for a float or a GCC float vector (results go through
// a pointer: a wide vector returned by value would tie it to an ABI).
struct ReluOp {
  template <typename T>
  void operator()(const T& x, T* y) const { *y = x < 0 ? T{} : x; }  // NaN and -0 pass through
};
struct LeakyReluOp {
  float alpha;
  template <typename T>
  void operator()(const T& x, T* y) const { *y = x < 0 ? x * alpha : x; }
};
struct HardSigmoidOp {  // max(0, min(1, alpha * x + beta)), NaN stays NaN
  float alpha, beta;
  template <typename T>
  void operator()(const T& x, T* y) const {
    const T v = x * alpha + beta;
    *y = v < 0 ? T{} : (v > 1 ? T{} + 1.f : v);
  }
};
struct HardSwishOp {  // x * HardSigmoid(x, 1/6, 0.5)
  template <typename T>
  void operator()(const T& x, T* y) const {
    T h;
    HardSigmoidOp{1.f / 6.f, 0.5f}(x, &h);
    *y = x * h;
  }
};
struct ClipOp {  // lower bound first, so that lo > hi gives hi everywhere
  bool has_lo, has_hi;
  float lo, hi;
  template <typename T>
  void operator()(const T& x, T* y) const {
    T v = x;
    if (has_lo) v = v < lo ? T{} + lo : v;
    if (has_hi) v = v > hi ? T{} + hi : v;
    *y = v;
  }
};
struct NegOp {
  template <typename T>
  void operator()(const T& x, T* y) const { *y = -x; }
};
struct ReciprocalOp {
  template <typename T>
  void operator()(const T& x, T* y) const { *y = (T{} + 1.f) / x; }
};

template <typename W, typename Op>
__attribute__((always_inline)) inline void MapLoop(const float* x, float* y, int64_t n, const Op& op) {
  using V = typename W::V;
  using U = typename W::U;
  constexpr int kLanes = sizeof(V) / sizeof(float);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V r;
    op(static_cast<V>(*reinterpret_cast<const U*>(x + i)), &r);
    *reinterpret_cast<U*>(y + i) = r;
  }
  for (; i < n; ++i) op(x[i], y + i);
}

#if defined(__x86_64__) || defined(__i386__)
template <typename Op>
__attribute__((target("avx2"))) void MapExactAvx2(const float* x, float* y, int64_t n, const Op& op) {
  MapLoop<Width8>(x, y, n, op);
}
#endif
template <typename Op>
void MapExactBase(const float* x, float* y, int64_t n, const Op& op) {
  MapLoop<Width4>(x, y, n, op);
}

// Runs `op` over input 0 (float32) into output 0; anything else to the reference.
template <typename Op>
Status MapExact(KernelContext& ctx, const Op& op) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const float* px = x->data<float>();
  float* py = out.data<float>();
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = CpuHasAvx2Fma();
#else
  const bool avx2 = false;
#endif
  ctx.ParallelFor(x->num_elements(), kMinChunk, [&](int64_t begin, int64_t end) {
#if defined(__x86_64__) || defined(__i386__)
    if (avx2) return MapExactAvx2(px + begin, py + begin, end - begin, op);
#endif
    MapExactBase(px + begin, py + begin, end - begin, op);
  });
  return Status::Ok();
}

// Clip's bounds: attributes before opset 11, optional one-element inputs
// after. False when the reference should run (other bound types or shapes).
bool ReadClipBounds(const KernelContext& ctx, ClipOp* op) {
  const Node& node = ctx.node();
  if (ctx.opset() < 11) {
    // As the reference: Clip-6's declared defaults are -FLT_MAX and FLT_MAX.
    op->has_lo = ctx.opset() >= 6 || node.HasAttr("min");
    op->has_hi = ctx.opset() >= 6 || node.HasAttr("max");
    auto lo = node.GetFloat("min", std::numeric_limits<float>::lowest());
    auto hi = node.GetFloat("max", std::numeric_limits<float>::max());
    if (!lo.ok() || !hi.ok()) return false;
    op->lo = lo.value();
    op->hi = hi.value();
    return true;
  }
  float* bounds[2] = {&op->lo, &op->hi};
  bool* present[2] = {&op->has_lo, &op->has_hi};
  for (size_t k = 0; k < 2; ++k) {
    *present[k] = ctx.has_input(k + 1);
    if (!*present[k]) continue;
    const Value* v = ctx.input(k + 1);
    if (!v->is_tensor() || v->tensor().dtype() != DataType::kFloat || v->tensor().num_elements() != 1) return false;
    *bounds[k] = v->tensor().data<float>()[0];
  }
  return true;
}

// ---- Approximated ops: AVX2+FMA with simd_math.h -----------------------------------

#if defined(__x86_64__) || defined(__i386__)
struct ErfOp {
  NEE_AVX2_INLINE __m256 operator()(__m256 x) const { return Erf8(x); }
};

// y = op(x (+ bias[i % m])) for n elements starting at element `start` of a
// tensor whose rows have m elements; bias null for none. The tail goes through
// a padded vector so that every element takes the same path.
template <typename Op>
__attribute__((target("avx2,fma"))) void MapApproxAvx2(const float* x, const float* bias, int64_t start, int64_t m,
                                                       float* y, int64_t n, Op op) {
  int64_t i = 0;
  if (!bias) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, op(_mm256_loadu_ps(x + i)));
  } else {
    int64_t col = start % m;
    while (i < n) {  // rows (or their parts) of this range
      const int64_t run = std::min(n - i, m - col);
      int64_t j = 0;
      for (; j + 8 <= run; j += 8)
        _mm256_storeu_ps(y + i + j, op(_mm256_add_ps(_mm256_loadu_ps(x + i + j), _mm256_loadu_ps(bias + col + j))));
      for (; j < run; ++j) {  // through the vector path one lane at a time: same result as a full vector
        alignas(32) float lane[8] = {x[i + j] + bias[col + j], 0, 0, 0, 0, 0, 0, 0};
        _mm256_store_ps(lane, op(_mm256_load_ps(lane)));
        y[i + j] = lane[0];
      }
      i += run;
      col = 0;
    }
    return;
  }
  if (i < n) MapTail8(x + i, y + i, n - i, op);
}

// Runs `op` over input 0, plus input `bias_input` (a 1-D bias over the last
// axis) when the node has it; anything unusual to the reference.
template <typename Op>
Status MapApprox(KernelContext& ctx, Op op, size_t bias_input = 0) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || !CpuHasAvx2Fma()) return RunReference(ctx);
  const float* bias = nullptr;
  int64_t m = 1;
  if (bias_input > 0 && ctx.has_input(bias_input)) {
    const Value* b = ctx.input(bias_input);
    if (!b->is_tensor() || b->tensor().dtype() != DataType::kFloat || b->tensor().rank() != 1 || x->rank() == 0 ||
        b->tensor().dim(0) != x->dims().back() || x->dims().back() == 0)
      return RunReference(ctx);
    bias = b->tensor().data<float>();
    m = x->dims().back();
  }
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const float* px = x->data<float>();
  float* py = out.data<float>();
  ctx.ParallelFor(x->num_elements(), kMinChunk, [&](int64_t begin, int64_t end) {
    MapApproxAvx2(px + begin, bias, begin, m, py + begin, end - begin, op);
  });
  return Status::Ok();
}

__attribute__((target("avx2"))) void SqrtAvx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}
#endif

}  // namespace

Status ReluFloat(KernelContext& ctx) { return MapExact(ctx, ReluOp{}); }
Status NegFloat(KernelContext& ctx) { return MapExact(ctx, NegOp{}); }
Status ReciprocalFloat(KernelContext& ctx) { return MapExact(ctx, ReciprocalOp{}); }
Status HardSwishFloat(KernelContext& ctx) { return MapExact(ctx, HardSwishOp{}); }

Status LeakyReluFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 0.01f));
  return MapExact(ctx, LeakyReluOp{alpha});
}

Status HardSigmoidFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(float alpha, ctx.node().GetFloat("alpha", 0.2f));
  NEE_ASSIGN_OR_RETURN(float beta, ctx.node().GetFloat("beta", 0.5f));
  return MapExact(ctx, HardSigmoidOp{alpha, beta});
}

Status ClipFloat(KernelContext& ctx) {
  ClipOp op{};
  if (!ReadClipBounds(ctx, &op)) return RunReference(ctx);
  return MapExact(ctx, op);
}

#if defined(__x86_64__) || defined(__i386__)
Status SqrtFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || !CpuHasAvx2Fma()) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const float* px = x->data<float>();
  float* py = out.data<float>();
  ctx.ParallelFor(x->num_elements(), kMinChunk,
                  [&](int64_t begin, int64_t end) { SqrtAvx2(px + begin, py + begin, end - begin); });
  return Status::Ok();
}

Status ErfFloat(KernelContext& ctx) { return MapApprox(ctx, ErfOp{}); }
Status MsGeluFloat(KernelContext& ctx) { return MapApprox(ctx, GeluErfOp{}); }
Status BiasGeluFloat(KernelContext& ctx) {
  if (!ctx.has_input(1)) return RunReference(ctx);
  return MapApprox(ctx, GeluErfOp{}, 1);
}
Status FastGeluFloat(KernelContext& ctx) { return MapApprox(ctx, GeluTanhOp{}, 1); }

Status GeluFloat(KernelContext& ctx) {
  // (Read in place, not moved out of the Result: GCC 12 reports a moved
  // short string as maybe-uninitialized.)
  const auto attribute = ctx.node().GetString("approximate", "none");
  if (!attribute.ok()) return attribute.status();
  const std::string& approximate = attribute.value();
  if (approximate == "none") return MapApprox(ctx, GeluErfOp{});
  if (approximate == "tanh") return MapApprox(ctx, GeluTanhOp{});
  return RunReference(ctx);  // the reference words the error
}
#else
Status SqrtFloat(KernelContext& ctx) { return RunReference(ctx); }
Status ErfFloat(KernelContext& ctx) { return RunReference(ctx); }
Status MsGeluFloat(KernelContext& ctx) { return RunReference(ctx); }
Status BiasGeluFloat(KernelContext& ctx) { return RunReference(ctx); }
Status FastGeluFloat(KernelContext& ctx) { return RunReference(ctx); }
Status GeluFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
