// Exp, Sigmoid, Tanh and Softmax (any axis) on float32 with an AVX2
// exponential: the reference kernels call std::exp per element (~4.5 ns
// each), which made Sigmoid, Tanh and Softmax 27-36x slower than ONNX
// Runtime. Other element types and CPUs without AVX2+FMA go to the
// reference kernels.
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
#include <vector>

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


// Softmax down `columns` (<= kColumnGroup) columns at once: n values each,
// `stride` floats apart (Softmax along an axis other than the last: YOLOv8's
// distribution head takes it over 16 bins 33,600 floats apart, on the
// reference kernel 1.7 ms of nudenet's 19). Each column in its own lane, as
// SoftmaxRow8 does a row: the max, then e^(x - max) summed in order, then the
// scale; lanes past `columns` read and write nothing. A column holding NaN,
// or whose max is infinite, comes out NaN (x - max is NaN somewhere, and so
// the sum), as the reference's.
constexpr int64_t kColumnGroup = 32;  // four vectors: each row's 128 bytes are two whole cache lines

__attribute__((target("avx2,fma"))) void SoftmaxColumns(const float* x, float* y, int64_t n, int64_t stride,
                                                        int64_t columns) {
  constexpr int kVectors = kColumnGroup / 8;
  __m256i mask[kVectors];
  for (int v = 0; v < kVectors; ++v) mask[v] = LanesBetween8(0, columns - 8 * v);
  __m256 vmax[kVectors], sum[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    vmax[v] = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    sum[v] = _mm256_setzero_ps();
  }
  // _mm256_max_ps returns its second operand where either is NaN: a NaN may
  // be dropped from the max, but then it reaches the sum below.
  for (int64_t r = 0; r < n; ++r)
    for (int v = 0; v < kVectors; ++v)
      vmax[v] = _mm256_max_ps(vmax[v], _mm256_maskload_ps(x + r * stride + 8 * v, mask[v]));
  for (int64_t r = 0; r < n; ++r)
    for (int v = 0; v < kVectors; ++v) {
      const __m256 xv = _mm256_maskload_ps(x + r * stride + 8 * v, mask[v]);
      const __m256 e = ExpNonPositiveOrZero8(_mm256_sub_ps(xv, vmax[v]));
      _mm256_maskstore_ps(y + r * stride + 8 * v, mask[v], e);
      sum[v] = _mm256_add_ps(sum[v], e);
    }
  for (int v = 0; v < kVectors; ++v) sum[v] = _mm256_div_ps(_mm256_set1_ps(1.f), sum[v]);
  for (int64_t r = 0; r < n; ++r)
    for (int v = 0; v < kVectors; ++v) {
      float* at = y + r * stride + 8 * v;
      _mm256_maskstore_ps(at, mask[v], _mm256_mul_ps(_mm256_maskload_ps(at, mask[v]), sum[v]));
    }
}

}  // namespace

Status ExpFloat(KernelContext& ctx) { return MapFloat(ctx, ExpOp{}); }
Status SigmoidFloat(KernelContext& ctx) { return MapFloat(ctx, SigmoidOp{}); }
Status TanhFloat(KernelContext& ctx) { return MapFloat(ctx, TanhOp{}); }

Status SoftmaxFloat(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  if (x->dtype() != DataType::kFloat || x->rank() == 0 || !CpuHasAvx2Fma()) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(int64_t axis, ctx.node().GetInt("axis", ctx.opset() >= 13 ? -1 : 1));
  if (axis < -x->rank() || axis >= x->rank()) return RunReference(ctx);  // the reference words the error
  if (axis < 0) axis += x->rank();
  // Before opset 13 Softmax flattens at `axis` (default 1): rows of every
  // dim from `axis` on. From 13 it works along `axis` (default -1): rows
  // when that is the last dim, else columns `inner` floats apart.
  const std::vector<int64_t>& dims = x->dims();
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < x->rank(); ++d) {
    if (d < axis) outer *= dims[d];
    else if (d == axis || ctx.opset() < 13) n *= dims[d];
    else inner *= dims[d];
  }
  if (n == 0 || outer * inner == 0) return RunReference(ctx);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, dims));
  const float* px = x->data<float>();
  float* py = out.data<float>();
  if (inner == 1) {
    ctx.ParallelFor(outer, std::max<int64_t>(1, kMinChunk / n), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) SoftmaxRow8(px + r * n, py + r * n, n);
    });
    return Status::Ok();
  }
  // Tasks of kColumnGroup columns, cut at the same places whatever the
  // thread count: each column is always computed by the same lanes.
  const int64_t groups = (inner + kColumnGroup - 1) / kColumnGroup;
  ctx.ParallelFor(outer * groups, std::max<int64_t>(1, kMinChunk / (n * kColumnGroup)),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t t = begin; t < end; ++t) {
                      const int64_t o = t / groups, c0 = t % groups * kColumnGroup;
                      const int64_t at = o * n * inner + c0;
                      SoftmaxColumns(px + at, py + at, n, inner, std::min(kColumnGroup, inner - c0));
                    }
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
