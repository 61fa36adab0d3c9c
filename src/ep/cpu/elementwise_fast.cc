// Add, Sub, Mul and Div on float32 with numpy broadcasting. The output is
// walked as rows: the dims where both operands behave alike (both advance,
// or one is broadcast) are merged, the innermost merged dim is the row, and
// in a row each operand is either contiguous or one repeated value. That
// covers equal shapes, a scalar operand, bias rows ([.., N] with [N]),
// per-channel values ([B,C,H,W] with [C,1,1]) and attention masks
// ([B,1,1,S] with [B,H,S,S]) with one loop. Each element is the same single
// IEEE operation the reference performs, so results are bitwise identical to
// it and independent of the thread count. Before opset 7 (legacy broadcast
// attributes) and for other types the reference runs.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/simd_vector.h"
#include "ep/cpu/simd_x86.h"
#include "ops/blocked_conv.h"
#include "ops/op_util.h"

namespace nee::cpu {
namespace {

constexpr int64_t kMinChunk = 1 << 14;  // elements per task, below which threads do not pay

enum class BinOp { kAdd, kSub, kMul, kDiv };


// The operation on values or GCC vectors. Returning a wide vector by value
// would tie it to an ABI, so the result goes through `y`.
template <BinOp kOp, typename T, typename Out>
__attribute__((always_inline)) inline void Apply(const T& a, const T& b, Out* y) {
  if constexpr (kOp == BinOp::kAdd) *y = a + b;
  else if constexpr (kOp == BinOp::kSub) *y = a - b;
  else if constexpr (kOp == BinOp::kMul) *y = a * b;
  else *y = a / b;
}

// y[i] = a[i*sa] op b[i*sb] for a row of n, with sa and sb each 0 or 1
// (kA, kB). Inlined into one function per instruction set below.
template <typename W, BinOp kOp, bool kA, bool kB>
__attribute__((always_inline)) inline void RowLoop(const float* a, const float* b, float* y, int64_t n) {
  using V = typename W::V;
  using U = typename W::U;
  constexpr int kLanes = sizeof(V) / sizeof(float);
  V va = V{} + a[0], vb = V{} + b[0];
  int64_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    const V a0 = kA ? *reinterpret_cast<const U*>(a + i) : va;
    const V a1 = kA ? *reinterpret_cast<const U*>(a + i + kLanes) : va;
    const V b0 = kB ? *reinterpret_cast<const U*>(b + i) : vb;
    const V b1 = kB ? *reinterpret_cast<const U*>(b + i + kLanes) : vb;
    V y0, y1;
    Apply<kOp>(a0, b0, &y0);
    Apply<kOp>(a1, b1, &y1);
    *reinterpret_cast<U*>(y + i) = y0;
    *reinterpret_cast<U*>(y + i + kLanes) = y1;
  }
  for (; i < n; ++i) Apply<kOp>(a[kA ? i : 0], b[kB ? i : 0], y + i);
}

// y[i] = a[i] op b[i % P] (kAPeriodic: a[i % P] op b[i]) for a row of n, a
// multiple of P: one operand repeats a short run of P values, which divides
// the vector width (a channel-blocked tensor times per-channel values,
// [N, Cb, H, W, 8] by [N, Cb, 1, 1, 8]: an SE block's scale).
template <typename W, BinOp kOp, int P, bool kAPeriodic>
__attribute__((always_inline)) inline void PeriodicRowLoop(const float* a, const float* b, float* y, int64_t n) {
  using V = typename W::V;
  using U = typename W::U;
  constexpr int kLanes = sizeof(V) / sizeof(float);
  const float* periodic = kAPeriodic ? a : b;
  const float* full = kAPeriodic ? b : a;
  int64_t i = 0;
  if constexpr (kLanes % P == 0) {  // else (narrow vectors) one element at a time
    V pattern;
    for (int l = 0; l < kLanes; ++l) pattern[l] = periodic[l % P];
    for (; i + kLanes <= n; i += kLanes) {
      const V v = *reinterpret_cast<const U*>(full + i);
      V out;
      if constexpr (kAPeriodic) Apply<kOp>(pattern, v, &out);
      else Apply<kOp>(v, pattern, &out);
      *reinterpret_cast<U*>(y + i) = out;
    }
  }
  for (; i < n; ++i) {
    if constexpr (kAPeriodic) Apply<kOp>(periodic[i % P], full[i], y + i);
    else Apply<kOp>(full[i], periodic[i % P], y + i);
  }
}

using RowFn = void (*)(const float*, const float*, float*, int64_t);

// kPeriod 0: RowLoop; else PeriodicRowLoop with period kPeriod, the periodic
// operand the one that does not advance (kA or kB false).
template <typename W, BinOp kOp, bool kA, bool kB, int kPeriod>
__attribute__((always_inline)) inline void AnyRow(const float* a, const float* b, float* y, int64_t n) {
  if constexpr (kPeriod == 0) RowLoop<W, kOp, kA, kB>(a, b, y, n);
  else PeriodicRowLoop<W, kOp, kPeriod, !kA>(a, b, y, n);
}

#if defined(__x86_64__) || defined(__i386__)
template <BinOp kOp, bool kA, bool kB, int kPeriod>
__attribute__((target("avx512f"))) void RowAvx512(const float* a, const float* b, float* y, int64_t n) {
  AnyRow<Width16, kOp, kA, kB, kPeriod>(a, b, y, n);
}
template <BinOp kOp, bool kA, bool kB, int kPeriod>
__attribute__((target("avx2"))) void RowAvx2(const float* a, const float* b, float* y, int64_t n) {
  AnyRow<Width8, kOp, kA, kB, kPeriod>(a, b, y, n);
}
#endif
template <BinOp kOp, bool kA, bool kB, int kPeriod>
void RowBase(const float* a, const float* b, float* y, int64_t n) {
  AnyRow<Width4, kOp, kA, kB, kPeriod>(a, b, y, n);
}

template <BinOp kOp, bool kA, bool kB, int kPeriod = 0>
RowFn PickRow() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return RowAvx512<kOp, kA, kB, kPeriod>;
  if (CpuHasAvx2Fma()) return RowAvx2<kOp, kA, kB, kPeriod>;
#endif
  return RowBase<kOp, kA, kB, kPeriod>;
}

template <BinOp kOp>
RowFn PickRow(bool a_advances, bool b_advances) {
  if (a_advances && b_advances) return PickRow<kOp, true, true>();
  if (a_advances) return PickRow<kOp, true, false>();
  return PickRow<kOp, false, true>();  // never both broadcast: such dims are merged away
}

// The output as merged dims, outermost first; for each, how far each operand
// moves per step (0 where it is broadcast). The last dim is the row.
struct BroadcastPlan {
  std::vector<int64_t> dims, a_steps, b_steps;
};

// Aligns both operands to the output rank, drops the output's 1s, merges
// neighbours that broadcast alike, then derives each operand's steps.
BroadcastPlan PlanBroadcast(const std::vector<int64_t>& a_dims, const std::vector<int64_t>& b_dims,
                            const std::vector<int64_t>& out_dims) {
  const size_t rank = out_dims.size();
  auto aligned = [rank](const std::vector<int64_t>& d, size_t i) { return i + d.size() < rank ? 1 : d[i + d.size() - rank]; };
  BroadcastPlan plan;
  std::vector<bool> a_full, b_full;
  for (size_t i = 0; i < rank; ++i) {
    if (out_dims[i] == 1) continue;
    const bool af = aligned(a_dims, i) != 1, bf = aligned(b_dims, i) != 1;
    if (!plan.dims.empty() && a_full.back() == af && b_full.back() == bf) {
      plan.dims.back() *= out_dims[i];
      continue;
    }
    plan.dims.push_back(out_dims[i]);
    a_full.push_back(af);
    b_full.push_back(bf);
  }
  if (plan.dims.empty()) {  // one element
    plan.dims.push_back(1);
    a_full.push_back(true);
    b_full.push_back(true);
  }
  const size_t n = plan.dims.size();
  plan.a_steps.assign(n, 0);
  plan.b_steps.assign(n, 0);
  int64_t a_size = 1, b_size = 1;
  for (size_t i = n; i-- > 0;) {
    if (a_full[i]) plan.a_steps[i] = a_size, a_size *= plan.dims[i];
    if (b_full[i]) plan.b_steps[i] = b_size, b_size *= plan.dims[i];
  }
  return plan;
}

// The period of the rows PeriodicRows makes (the blocked layout's block).
constexpr int64_t kPeriod = kChannelBlock;

// Where the plan's last dim is kPeriod long, both operands advancing along
// it, and one of them is broadcast along the dim before (a blocked tensor
// [N, Cb, H, W, 8] and per-channel values [N, Cb, 1, 1, 8]): the two dims
// merged into one row along which that operand repeats its kPeriod values,
// and the row function for it. Otherwise null, the plan unchanged. (Rows of
// 8 elements, one call each, ran an SE block's Mul at 3x ORT's time.)
template <BinOp kOp>
RowFn PeriodicRows(BroadcastPlan* plan) {
  const size_t n = plan->dims.size();
  if (n < 2 || plan->dims[n - 1] != kPeriod || plan->a_steps[n - 1] == 0 || plan->b_steps[n - 1] == 0) return nullptr;
  const bool a_repeats = plan->a_steps[n - 2] == 0, b_repeats = plan->b_steps[n - 2] == 0;
  if (a_repeats == b_repeats) return nullptr;
  plan->dims[n - 2] *= kPeriod;
  plan->a_steps[n - 2] = a_repeats ? 0 : 1;
  plan->b_steps[n - 2] = b_repeats ? 0 : 1;
  for (auto* v : {&plan->dims, &plan->a_steps, &plan->b_steps}) v->pop_back();
  return a_repeats ? PickRow<kOp, false, true, kPeriod>() : PickRow<kOp, true, false, kPeriod>();
}

// Runs rows [begin, end) of the plan (row r covers output [r*n, (r+1)*n)).
void RunRows(const BroadcastPlan& plan, RowFn row, const float* a, const float* b, float* y, int64_t begin,
             int64_t end) {
  const size_t outer = plan.dims.size() - 1;
  const int64_t n = plan.dims.back();
  // Multi-index of row `begin` over the outer dims, then an odometer.
  std::vector<int64_t> index(outer, 0);
  int64_t a_off = 0, b_off = 0;
  for (size_t d = outer, rest = static_cast<size_t>(begin); d-- > 0;) {
    const int64_t dim = plan.dims[d];
    index[d] = static_cast<int64_t>(rest % static_cast<size_t>(dim));
    rest /= static_cast<size_t>(dim);
    a_off += index[d] * plan.a_steps[d];
    b_off += index[d] * plan.b_steps[d];
  }
  for (int64_t r = begin; r < end; ++r) {
    row(a + a_off, b + b_off, y + r * n, n);
    for (size_t d = outer; d-- > 0;) {
      a_off += plan.a_steps[d];
      b_off += plan.b_steps[d];
      if (++index[d] < plan.dims[d]) break;
      a_off -= plan.dims[d] * plan.a_steps[d];
      b_off -= plan.dims[d] * plan.b_steps[d];
      index[d] = 0;
    }
  }
}

// Equal shapes in the channel-blocked layout [N, Cb, H, W, 8], as the layout
// pass runs a residual Add (opt/layout_blocked.cc), on more than one thread:
// split by pixel ranges of an image, every channel block each, as the blocked
// convs and reorders around it share their pixels (parallel_tasks.h), so each
// thread adds the pixels it wrote and will read; a flat split would hand each
// thread half the channel blocks, half of them written on the other core.
bool SplitsByPixels(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  return NumThreads(ctx) > 1 && a.rank() == 5 && a.dims() == b.dims() && a.dim(4) == kChannelBlock;
}

void RunByPixels(const KernelContext& ctx, RowFn row, const float* a, const float* b, float* y,
                 const std::vector<int64_t>& dims) {
  const int64_t images = dims[0], blocks = dims[1], pixels = dims[2] * dims[3];
  const int64_t parts = RangesPerImage(ctx, pixels * kChannelBlock * blocks, kMinChunk);
  ParallelImageRanges(ctx, images, parts, pixels, 1, [&](int64_t n, int64_t p0, int64_t p1) {
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const int64_t at = ((n * blocks + cb) * pixels + p0) * kChannelBlock;
      row(a + at, b + at, y + at, (p1 - p0) * kChannelBlock);
    }
  });
}

template <BinOp kOp>
Status BinaryFloat(KernelContext& ctx) {
  if (ctx.opset() < 7) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const Tensor* a, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* b, ctx.InputTensor(1));
  if (a->dtype() != DataType::kFloat || b->dtype() != DataType::kFloat) return RunReference(ctx);
  auto out_dims = BroadcastDims(a->dims(), b->dims());
  if (!out_dims.ok()) return RunReference(ctx);  // the reference words the error
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, out_dims.value()));
  if (out.num_elements() == 0) return Status::Ok();
  BroadcastPlan plan = PlanBroadcast(a->dims(), b->dims(), out.dims());
  RowFn row = PeriodicRows<kOp>(&plan);
  const bool periodic = row != nullptr;
  const size_t last = plan.dims.size() - 1;
  if (!periodic) row = PickRow<kOp>(plan.a_steps[last] != 0, plan.b_steps[last] != 0);
  const float* pa = a->data<float>();
  const float* pb = b->data<float>();
  float* py = out.data<float>();
  const int64_t n = plan.dims.back();
  if (SplitsByPixels(ctx, *a, *b)) {
    RunByPixels(ctx, row, pa, pb, py, a->dims());
    return Status::Ok();
  }
  if (plan.dims.size() == 1) {  // one row: split it (a periodic one at whole periods)
    const int64_t sa = plan.a_steps[0], sb = plan.b_steps[0], unit = periodic ? kPeriod : 1;
    ctx.ParallelFor(n / unit, std::max<int64_t>(1, kMinChunk / unit), [&](int64_t begin, int64_t end) {
      row(pa + begin * unit * sa, pb + begin * unit * sb, py + begin * unit, (end - begin) * unit);
    });
    return Status::Ok();
  }
  const int64_t rows = out.num_elements() / n;
  ctx.ParallelFor(rows, std::max<int64_t>(1, kMinChunk / n),
                  [&](int64_t begin, int64_t end) { RunRows(plan, row, pa, pb, py, begin, end); });
  return Status::Ok();
}

}  // namespace

Status AddFloat(KernelContext& ctx) { return BinaryFloat<BinOp::kAdd>(ctx); }
Status SubFloat(KernelContext& ctx) { return BinaryFloat<BinOp::kSub>(ctx); }
Status MulFloat(KernelContext& ctx) { return BinaryFloat<BinOp::kMul>(ctx); }
Status DivFloat(KernelContext& ctx) { return BinaryFloat<BinOp::kDiv>(ctx); }

// Pow of float32 by a constant scalar exponent of 2 or 3 (x*x, x*x*x: GPT-2's
// tanh GELU cubes its input; std::pow per element cost 27 ns each). Computed
// in double like the reference kernel, whose (float)pow((double)x, e) it
// reproduces: x*x is exact in double, and x*x*x is then one correctly rounded
// product, as a correctly rounded pow is. Other exponents go to the reference.
Status PowFloat(KernelContext& ctx) {
  if (ctx.opset() < 7) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* e, ctx.InputTensor(1));
  if (x->dtype() != DataType::kFloat || e->num_elements() != 1 || e->rank() > x->rank() ||
      (e->dtype() != DataType::kFloat && e->dtype() != DataType::kDouble))
    return RunReference(ctx);
  const double exponent = e->dtype() == DataType::kFloat ? e->data<float>()[0] : e->data<double>()[0];
  if (exponent != 2.0 && exponent != 3.0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const float* px = x->data<float>();
  float* py = out.data<float>();
  const bool cube = exponent == 3.0;
  ctx.ParallelFor(x->num_elements(), kMinChunk, [&](int64_t begin, int64_t end) {
    if (cube) {
      for (int64_t i = begin; i < end; ++i) {
        const double v = px[i];
        py[i] = static_cast<float>(v * v * v);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) {
        const double v = px[i];
        py[i] = static_cast<float>(v * v);
      }
    }
  });
  return Status::Ok();
}

}  // namespace nee::cpu
