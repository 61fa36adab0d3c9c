// ReduceSum and ReduceMean on float32 over one contiguous block of axes. The
// reference (ops/reduce.cc) walks every input element through an index map
// (divisions per element): magika's two sums of a [1, 512, 256] tensor over
// axis 1 took 0.4-0.5 ms each, against ONNX Runtime's 0.28.
//
// The input is seen as [outer, n, inner] (n: the reduced axes). Each output
// is summed as the reference sums it, so the bits are the reference's: in
// double, from +0, element after element along the reduced axes, then the
// mean divided in double, then rounded to float once. Independent outputs
// share the work instead: eight neighbouring inner lanes (each its own chain)
// per step, or, when the reduced block is innermost, eight outputs' chains
// interleaved. Tasks are runs of outputs; which thread sums an output never
// changes it.
//
// Other element types, empty tensors, axes that are not one contiguous block,
// no axes (reduce-all or no-op) and malformed axes go to the reference.
#include <algorithm>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace nee::cpu {
namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kWorkPerTask = 32 << 10;  // input elements per task

struct ReduceShape {
  int64_t outer = 1, n = 1, inner = 1;
  std::vector<int64_t> out_dims;
};

// The reduced axes as given (attribute before `axes_input_opset`, input after);
// false when the reference should decide (absent, empty, malformed).
bool ReadAxes(KernelContext& ctx, int64_t axes_input_opset, std::vector<int64_t>* axes) {
  if (ctx.opset() < axes_input_opset) {
    auto attr = ctx.node().GetInts("axes", {});
    if (!attr.ok()) return false;
    *axes = *attr;
  } else {
    if (!ctx.has_input(1) || !ctx.input(1)->is_tensor()) return false;
    const Tensor& t = ctx.input(1)->tensor();
    if (t.dtype() != DataType::kInt64 || t.rank() > 1) return false;
    auto values = t.ToInt64Vector();
    if (!values.ok()) return false;
    *axes = *values;
  }
  return !axes->empty();
}

// [outer, n, inner] and the output dims, or false (see the file comment).
bool ReadShape(KernelContext& ctx, int64_t axes_input_opset, ReduceShape* s) {
  if (!ctx.has_input(0) || !ctx.input(0)->is_tensor()) return false;
  const Tensor& x = ctx.input(0)->tensor();
  if (x.dtype() != DataType::kFloat || x.num_elements() == 0) return false;
  std::vector<int64_t> axes;
  if (!ReadAxes(ctx, axes_input_opset, &axes)) return false;
  auto keepdims = ctx.node().GetInt("keepdims", 1);
  if (!keepdims.ok()) return false;
  const int64_t rank = x.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return false;
    const auto d = static_cast<size_t>(a < 0 ? a + rank : a);
    if (reduced[d]) return false;
    reduced[d] = true;
  }
  const auto first = static_cast<int64_t>(std::find(reduced.begin(), reduced.end(), true) - reduced.begin());
  const int64_t last = first + static_cast<int64_t>(axes.size()) - 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t size = x.dim(d);
    const bool in_block = d >= first && d <= last;
    if (in_block != reduced[static_cast<size_t>(d)]) return false;  // not one contiguous block
    if (in_block) s->n *= size;
    else if (d < first) s->outer *= size;
    else s->inner *= size;
    if (!in_block) s->out_dims.push_back(size);
    else if (*keepdims != 0) s->out_dims.push_back(1);
  }
  return true;
}

// Outputs [o0, o1) of [outer, inner] (flattened), eight inner lanes a step:
// lane j's chain is x[o, 0, j] + x[o, 1, j] + ... in double.
void SumAcrossRows(const float* x, const ReduceShape& s, bool mean, int64_t o0, int64_t o1, float* y) {
  for (int64_t o = o0; o < o1;) {
    const int64_t outer = o / s.inner, j0 = o % s.inner;
    const int64_t lanes = std::min({kLanes, s.inner - j0, o1 - o});
    double acc[kLanes] = {};
    const float* base = x + outer * s.n * s.inner + j0;
    for (int64_t i = 0; i < s.n; ++i) {
      const float* row = base + i * s.inner;
      if (lanes == kLanes) {
        for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(row[k]);
      } else {
        for (int64_t k = 0; k < lanes; ++k) acc[k] += static_cast<double>(row[k]);
      }
    }
    for (int64_t k = 0; k < lanes; ++k)
      y[o + k] = static_cast<float>(mean ? acc[k] / static_cast<double>(s.n) : acc[k]);
    o += lanes;
  }
}

#if defined(__x86_64__)
#define NEE_REDUCE_AVX512 __attribute__((target("avx512f,avx512vl")))

// SumAcrossRows on AVX-512: up to 32 inner lanes a block as four vectors of
// eight doubles, so four chains' additions overlap; the same operations lane
// for lane (float -> double exact, add, divide, round once), so the same bits.
#pragma GCC diagnostic push
#ifndef __clang__  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on _mm512_undefined_* inside the conversions
#endif
NEE_REDUCE_AVX512 void SumAcrossRowsAvx512(const float* x, const ReduceShape& s, bool mean, int64_t o0, int64_t o1,
                                           float* y) {
  constexpr int64_t kBlock = 4 * kLanes;
  const __m512d count = _mm512_set1_pd(static_cast<double>(s.n));
  for (int64_t o = o0; o < o1;) {
    const int64_t outer = o / s.inner, j0 = o % s.inner;
    const int64_t lanes = std::min({kBlock, s.inner - j0, o1 - o});
    __mmask8 mask[4];
    for (int v = 0; v < 4; ++v)
      mask[v] = static_cast<__mmask8>((1u << std::clamp<int64_t>(lanes - kLanes * v, 0, kLanes)) - 1);
    __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
    const float* base = x + outer * s.n * s.inner + j0;
    for (int64_t i = 0; i < s.n; ++i) {
      const float* row = base + i * s.inner;
      for (int v = 0; v < 4; ++v)
        acc[v] = _mm512_add_pd(acc[v], _mm512_cvtps_pd(_mm256_maskz_loadu_ps(mask[v], row + kLanes * v)));
    }
    for (int v = 0; v < 4; ++v) {
      const __m512d r = mean ? _mm512_div_pd(acc[v], count) : acc[v];
      _mm256_mask_storeu_ps(y + o + kLanes * v, mask[v], _mm512_cvtpd_ps(r));
    }
    o += lanes;
  }
}
#pragma GCC diagnostic pop
#endif

// inner == 1: outputs [o0, o1), each a contiguous run of n; eight outputs'
// chains interleaved so their additions overlap.
void SumRuns(const float* x, const ReduceShape& s, bool mean, int64_t o0, int64_t o1, float* y) {
  for (int64_t o = o0; o < o1; o += kLanes) {
    const int64_t count = std::min(kLanes, o1 - o);
    double acc[kLanes] = {};
    const float* base = x + o * s.n;
    if (count == kLanes) {
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(base[k * s.n + i]);
    } else {
      for (int64_t k = 0; k < count; ++k)
        for (int64_t i = 0; i < s.n; ++i) acc[k] += static_cast<double>(base[k * s.n + i]);
    }
    for (int64_t k = 0; k < count; ++k)
      y[o + k] = static_cast<float>(mean ? acc[k] / static_cast<double>(s.n) : acc[k]);
  }
}

Status ReduceFloat(KernelContext& ctx, int64_t axes_input_opset, bool mean) {
  ReduceShape s;
  if (!ReadShape(ctx, axes_input_opset, &s)) return RunReference(ctx);
  const float* x = ctx.input(0)->tensor().data<float>();
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, DataType::kFloat, s.out_dims));
  float* y = out.data<float>();
  const int64_t outputs = s.outer * s.inner;
  // Tasks of whole eight-output groups, about kWorkPerTask inputs each.
  const int64_t per_task =
      std::max<int64_t>(kLanes, kWorkPerTask / std::max<int64_t>(s.n, 1) / kLanes * kLanes);
#if defined(__x86_64__)
  const bool avx512 = SgemmActiveIsa() == SgemmIsa::kAvx512;
#else
  const bool avx512 = false;
#endif
  ParallelTasks(ctx, (outputs + per_task - 1) / per_task, [&](int64_t t) {
    const int64_t o0 = t * per_task, o1 = std::min(outputs, o0 + per_task);
    if (s.inner == 1) SumRuns(x, s, mean, o0, o1, y);
    else if (avx512) SumAcrossRowsAvx512(x, s, mean, o0, o1, y);
    else SumAcrossRows(x, s, mean, o0, o1, y);
  });
  return Status::Ok();
}

}  // namespace

Status ReduceSumFloat(KernelContext& ctx) { return ReduceFloat(ctx, 13, false); }
Status ReduceMeanFloat(KernelContext& ctx) { return ReduceFloat(ctx, 18, true); }

}  // namespace nee::cpu
