// Transpose of 4-byte elements (float, int32, uint32), and of 1- and 2-byte ones (8-bit quantized tensors,
// float16) on the same paths with a plain loop for the 2-D transpose. Size-1 dims are
// dropped and input dims that stay neighbours in the output are merged; what
// remains is handled when it is
//   - a copy (nothing moves),
//   - a permutation that keeps the innermost dim ([B,S,H,D] -> [B,H,S,D]):
//     contiguous rows copied in output order, or
//   - a batched 2-D transpose [B, M, N] -> [B, N, M] (last-two swap, and
//     NCHW <-> NHWC): 8x8 tiles through AVX registers (scalar at the edges),
//     tasks over (batch, band of output rows).
// Other permutations and types go to the reference. A transpose only moves
// bits, so any split between threads gives the same output.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/parallel_tasks.h"
#include "ep/cpu/simd_x86.h"
#include "ep/cpu/transpose_band.h"

namespace nee::cpu {
namespace {

constexpr int64_t kMinChunk = 1 << 14;  // elements per task
constexpr int64_t kBand = 256;          // most output rows per 2-D transpose task

// dims and perm with size-1 dims dropped and runs of input dims that stay
// adjacent (and in order) in the output merged into one.
void Collapse(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm, std::vector<int64_t>* out_dims,
              std::vector<int64_t>* out_perm) {
  // Keep the non-1 axes, renumbered in input order.
  std::vector<int64_t> new_index(dims.size(), -1), kept;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != 1) new_index[i] = static_cast<int64_t>(kept.size()), kept.push_back(dims[i]);
  std::vector<int64_t> p;
  for (int64_t axis : perm)
    if (new_index[static_cast<size_t>(axis)] >= 0) p.push_back(new_index[static_cast<size_t>(axis)]);
  // Merge output neighbours p[k], p[k+1] == p[k] + 1. group[a]: merged axis of input axis a.
  std::vector<int64_t> starts;  // input axes that begin a merged group
  for (size_t k = 0; k < p.size(); ++k)
    if (k == 0 || p[k] != p[k - 1] + 1) starts.push_back(p[k]);
  std::sort(starts.begin(), starts.end());
  std::vector<int64_t> group(kept.size());
  out_dims->assign(starts.size(), 1);
  for (size_t a = 0, g = 0; a < kept.size(); ++a) {
    if (g + 1 < starts.size() && static_cast<int64_t>(a) == starts[g + 1]) ++g;
    group[a] = static_cast<int64_t>(g);
    (*out_dims)[g] *= kept[a];
  }
  out_perm->clear();
  for (size_t k = 0; k < p.size(); ++k)
    if (k == 0 || p[k] != p[k - 1] + 1) out_perm->push_back(group[static_cast<size_t>(p[k])]);
}

// Output rows of length `row` copied from an input whose outer dims are
// permuted: out row r (an index over the output's outer dims) reads the input
// row at the matching offset.
template <typename T>
void CopyRows(const T* x, T* y, const std::vector<int64_t>& dims, const std::vector<int64_t>& perm, int64_t begin,
              int64_t end) {
  const size_t outer = perm.size() - 1;
  const int64_t row = dims.back();
  std::vector<int64_t> in_stride(dims.size());  // in elements
  for (size_t a = dims.size(), s = 1; a-- > 0;) in_stride[a] = static_cast<int64_t>(s), s *= static_cast<size_t>(dims[a]);
  std::vector<int64_t> index(outer, 0);
  int64_t offset = 0;
  for (size_t k = outer, rest = static_cast<size_t>(begin); k-- > 0;) {
    const size_t dim = static_cast<size_t>(dims[static_cast<size_t>(perm[k])]);
    index[k] = static_cast<int64_t>(rest % dim);
    rest /= dim;
    offset += index[k] * in_stride[static_cast<size_t>(perm[k])];
  }
  for (int64_t r = begin; r < end; ++r) {
    std::memcpy(y + r * row, x + offset, static_cast<size_t>(row) * sizeof(T));
    for (size_t k = outer; k-- > 0;) {
      const int64_t stride = in_stride[static_cast<size_t>(perm[k])];
      offset += stride;
      if (++index[k] < dims[static_cast<size_t>(perm[k])]) break;
      offset -= index[k] * stride;
      index[k] = 0;
    }
  }
}

// Output rows [j0, j1) of y = x^T for x [m, n] of elements narrower than 4 bytes: blocks of 16 x 16, so that
// the reads of a block's 16 input rows and the writes of its 16 output rows stay in the cache.
template <typename T>
void TransposeBandNarrow(const T* x, T* y, int64_t m, int64_t n, int64_t j0, int64_t j1) {
  constexpr int64_t kBlock = 16;
  for (int64_t i0 = 0; i0 < m; i0 += kBlock) {
    const int64_t i1 = std::min(m, i0 + kBlock);
    for (int64_t jb = j0; jb < j1; jb += kBlock) {
      const int64_t jb1 = std::min(j1, jb + kBlock);
      for (int64_t j = jb; j < jb1; ++j)
        for (int64_t i = i0; i < i1; ++i) y[j * m + i] = x[i * n + j];
    }
  }
}

template <typename T>
Status TransposeTyped(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& perm, Tensor& out);

}  // namespace

void TransposeBand(const uint32_t* x, uint32_t* y, int64_t m, int64_t n, int64_t j0, int64_t j1, bool avx2) {
  int64_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
  if (avx2) {
    for (; i + 8 <= m; i += 8) {
      // The input rows are far apart (a detector head reads 85 rows 25 KB
      // apart), too many streams for the hardware prefetcher when they come
      // from memory: fetch the band's part of the rows two tiles ahead.
      for (int64_t r = i + 16; r < std::min(m, i + 24); ++r)
        for (int64_t c = j0; c < j1; c += 16) __builtin_prefetch(x + r * n + c);
      int64_t j = j0;
      for (; j + 8 <= j1; j += 8)
        Transpose8x8Avx2(reinterpret_cast<const float*>(x + i * n + j), n, reinterpret_cast<float*>(y + j * m + i), m);
      for (; j < j1; ++j)
        for (int64_t ii = i; ii < i + 8; ++ii) y[j * m + ii] = x[ii * n + j];
    }
  }
#endif
  for (int64_t j = j0; j < j1; ++j)
    for (int64_t ii = i; ii < m; ++ii) y[j * m + ii] = x[ii * n + j];
}

Status TransposeFast(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  const DataType t = x->dtype();
  const bool four = t == DataType::kFloat || t == DataType::kInt32 || t == DataType::kUint32;
  const bool two = t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kInt16 ||
                   t == DataType::kUint16;
  const bool one = t == DataType::kUint8 || t == DataType::kInt8;
  if (!four && !two && !one) return RunReference(ctx);
  const int64_t rank = x->rank();
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) reversed[static_cast<size_t>(i)] = rank - 1 - i;
  auto perm_attr = ctx.node().GetInts("perm", reversed);
  if (!perm_attr.ok() || static_cast<int64_t>(perm_attr.value().size()) != rank) return RunReference(ctx);
  const std::vector<int64_t>& perm = perm_attr.value();
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return RunReference(ctx);  // it words the error
    seen[static_cast<size_t>(p)] = true;
  }
  std::vector<int64_t> out_dims(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out_dims[i] = x->dim(perm[i]);
  NEE_ASSIGN_OR_RETURN(Tensor out, ctx.AllocateOutputForOverwrite(0, t, out_dims));
  if (four) return TransposeTyped<uint32_t>(ctx, *x, perm, out);
  if (two) return TransposeTyped<uint16_t>(ctx, *x, perm, out);
  return TransposeTyped<uint8_t>(ctx, *x, perm, out);
}

namespace {

template <typename T>
Status TransposeTyped(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& perm, Tensor& out) {
  const int64_t total = x.num_elements();
  if (total == 0) return Status::Ok();
  const auto* px = static_cast<const T*>(x.raw_data());
  auto* py = static_cast<T*>(out.raw_data());
  std::vector<int64_t> dims, p;
  Collapse(x.dims(), perm, &dims, &p);
  if (p.size() <= 1) {  // nothing moves
    ctx.ParallelFor(total, kMinChunk, [&](int64_t b, int64_t e) {
      std::memcpy(py + b, px + b, static_cast<size_t>(e - b) * sizeof(T));
    });
    return Status::Ok();
  }
  if (p.back() == static_cast<int64_t>(p.size()) - 1) {  // innermost dim stays: copy rows
    const int64_t row = dims.back();
    ctx.ParallelFor(total / row, std::max<int64_t>(1, kMinChunk / row),
                    [&](int64_t b, int64_t e) { CopyRows<T>(px, py, dims, p, b, e); });
    return Status::Ok();
  }
  const bool swap2 = p.size() == 2;
  const bool batched_swap = p.size() == 3 && p[0] == 0 && p[1] == 2 && p[2] == 1;
  if (!swap2 && !batched_swap) return RunReference(ctx);  // the output is allocated: the reference writes it
  const int64_t batch = swap2 ? 1 : dims[0], m = dims[p.size() - 2], n = dims.back();
#if defined(__x86_64__) || defined(__i386__)
  const bool avx2 = CpuHasAvx2Fma();
#else
  const bool avx2 = false;
#endif
  // Bands of up to kBand output rows, narrower when that leaves too few tasks for the threads.
  const int64_t wanted = std::max<int64_t>(1, (4 * NumThreads(ctx) + batch - 1) / batch);
  const int64_t band = std::clamp<int64_t>(((n + wanted - 1) / wanted + 7) & ~int64_t{7}, 32, kBand);
  const int64_t bands = (n + band - 1) / band;
  ParallelTasks(ctx, batch * bands, [&](int64_t task) {
    const int64_t b = task / bands, j0 = (task % bands) * band;
    if constexpr (sizeof(T) == 4) TransposeBand(px + b * m * n, py + b * m * n, m, n, j0, std::min(n, j0 + band), avx2);
    else TransposeBandNarrow<T>(px + b * m * n, py + b * m * n, m, n, j0, std::min(n, j0 + band));
  });
  return Status::Ok();
}

}  // namespace

}  // namespace nee::cpu
