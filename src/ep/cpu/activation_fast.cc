// Exp, Sigmoid, Tanh and Softmax (last axis) on float32 with an AVX2
// exponential: the reference kernels call std::exp per element (~4.5 ns
// each), which made Sigmoid, Tanh and Softmax 27-36x slower than ONNX
// Runtime. Other element types, other Softmax axes, and CPUs without AVX2+FMA
// go to the reference kernels.
//
// The exponential and tanh are in simd_math.h (shared with elementwise_fast.cc).
//
// Every element goes through the vector path — the last few of a chunk via a
// padded 8-lane buffer — so the result does not depend on how the loop was
// cut between threads.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/simd_math.h"
#include "ep/cpu/sgemm.h"
#include "ep/cpu/simd_x86.h"
#include "ops/op_util.h"

namespace nee::cpu {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kMinChunk = 1 << 14;

// Exp, Sigmoid and Tanh also have sixteen-lane forms (simd_math.h):
// Sigmoid16 and Tanh16 give their eight-lane forms' bits, Exp16 Exp8's
// wherever the result is a normal float; a kernel still uses one width for
// every element.
struct ExpOp {
  __attribute__((target("avx2,fma"), always_inline)) __m256 operator()(__m256 x) const { return Exp8(x); }
  __attribute__((target("avx512f"), always_inline)) __m512 operator()(__m512 x) const { return Exp16(x); }
};

struct SigmoidOp {
  __attribute__((target("avx2,fma"), always_inline)) __m256 operator()(__m256 x) const { return Sigmoid8(x); }
  __attribute__((target("avx512f"), always_inline)) __m512 operator()(__m512 x) const {
    return Sigmoid16(x);
  }
};

struct TanhOp {
  __attribute__((target("avx2,fma"), always_inline)) __m256 operator()(__m256 x) const { return Tanh8(x); }
  __attribute__((target("avx512f"), always_inline)) __m512 operator()(__m512 x) const { return Tanh16(x); }
};

template <typename Op>
__attribute__((target("avx2,fma"))) void MapAvx2(const float* x, float* y, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, op(_mm256_loadu_ps(x + i)));
  if (i < n) MapTail8(x + i, y + i, n - i, op);
}

// Sixteen lanes at a time; the last few through a padded vector, so that
// every element is computed the same way wherever a chunk ends. (GCC 12
// warns about the self-initialized _mm512_undefined_ps inside its own
// intrinsics once they are inlined here; nothing of ours is uninitialized.)
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
template <typename Op>
__attribute__((target("avx512f"))) void MapAvx512(const float* x, float* y, int64_t n, Op op) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, op(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, op(_mm512_maskz_loadu_ps(m, x + i)));  // zero padding, as MapTail8
  }
}
#pragma GCC diagnostic pop

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

template <typename Op>
constexpr bool kHas16 = std::is_invocable_v<const Op&, __m512>;

template <typename Op>
Status MapFloat(KernelContext& ctx, Op op) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || !CpuHasAvx2Fma()) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const float* px = x->data<float>();
  float* py = out.data<float>();
  if constexpr (kHas16<Op>) {
    if (CpuHasAvx512() && !SgemmPortableForced()) {
      ctx.ParallelFor(x->num_elements(), kMinChunk,
                      [&](int64_t begin, int64_t end) { MapAvx512(px + begin, py + begin, end - begin, op); });
      return Status::Ok();
    }
  }
  ctx.ParallelFor(x->num_elements(), kMinChunk,
                  [&](int64_t begin, int64_t end) { MapAvx2(px + begin, py + begin, end - begin, op); });
  return Status::Ok();
}


}  // namespace

Status ExpFloat(KernelContext& ctx) { return MapFloat(ctx, ExpOp{}); }
Status SigmoidFloat(KernelContext& ctx) { return MapFloat(ctx, SigmoidOp{}); }
Status TanhFloat(KernelContext& ctx) { return MapFloat(ctx, TanhOp{}); }

Status SoftmaxFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || x->rank() == 0 || !CpuHasAvx2Fma()) return RunReference(ctx);
  // Before opset 13 Softmax flattens at `axis` (default 1); from 13 it works
  // along `axis` (default -1). Both mean "along the last dim" exactly when
  // axis names the last dim; anything else goes to the reference.
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis", ctx.opset() >= 13 ? -1 : 1));
  if (axis != -1 && axis != x->rank() - 1) return RunReference(ctx);
  const int64_t n = x->dims().back();
  if (n == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, x->dims()));
  const int64_t rows = x->num_elements() / n;
  const float* px = x->data<float>();
  float* py = out.data<float>();
  ctx.ParallelFor(rows, std::max<int64_t>(1, kMinChunk / n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) SoftmaxRow8(px + r * n, py + r * n, n);
  });
  return Status::Ok();
}

#else
Status ExpFloat(KernelContext& ctx) { return RunReference(ctx); }
Status SigmoidFloat(KernelContext& ctx) { return RunReference(ctx); }
Status TanhFloat(KernelContext& ctx) { return RunReference(ctx); }
Status SoftmaxFloat(KernelContext& ctx) { return RunReference(ctx); }
#endif

}  // namespace nee::cpu
