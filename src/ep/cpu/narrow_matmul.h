// What the bfloat16 and float16 MatMul / Gemm kernels share
// (bf16_matmul_fast.cc, f16_matmul_fast.cc): packing a constant B once per
// session, MatMul's shapes with the broadcast batch, the products of a
// batched MatMul and how they are spread over the threads, and Gemm's C.
// PackedB is the kernel's packed-B class, constructed as
// PackedB(k, n, b, row_stride, col_stride) from 16-bit values.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "ep/cpu/cpu_kernels.h"
#include "ep/cpu/gemm_plan.h"
#include "ep/cpu/parallel_tasks.h"
#include "ops/op_util.h"

namespace nee::cpu::narrow {

// B (k x n, element (r, j) at b[r * row_stride + j * col_stride]) packed:
// once per session through the node's PreparedCache when input `index` is a
// constant, per call otherwise. The packed copy is all later runs read, so
// the constant is dropped (the kernel takes this path on every run of this
// CPU, whatever A's shape).
template <class PackedB>
std::shared_ptr<const PackedB> PackB(KernelContext& ctx, size_t index, const uint16_t* b, int64_t k, int64_t n,
                                     int64_t row_stride, int64_t col_stride) {
  auto pack = [&] { return std::make_shared<const PackedB>(k, n, b, row_stride, col_stride); };
  if (!ctx.prepared() || !ctx.input_is_constant(index)) return pack();
  auto packed = ctx.prepared()->GetOrBuild<PackedB>(
      {k, n, col_stride == 1 ? 0 : 1}, [&]() -> Result<std::shared_ptr<const PackedB>> {
        auto built = pack();
        ctx.DropConstantInput(index);
        return built;
      });
  return packed.ok() ? packed.value() : pack();
}

inline std::vector<int64_t> BatchDims(const std::vector<int64_t>& d) { return {d.begin(), d.end() - 2}; }

// MatMul's shapes: A [..., m, k] (or [k]) times B [..., k, n], B of rank >= 2.
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> batch;     // the broadcast batch dims (empty for a vector A)
  std::vector<int64_t> out_dims;  // batch, m (unless A is a vector), n
  bool shared_b = false;          // one 2-D B for every batch of A: one product of [batch * m, k] by [k, n]
};

// Errors name the input; the caller has checked the ranks (B >= 2, A >= 1, A >= 2 for a batched B).
inline Result<MatMulShape> PlanMatMul(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  MatMulShape s;
  const auto& ad = a.dims();
  const auto& bd = b.dims();
  s.k = ad.back();
  s.n = bd.back();
  s.m = a.rank() == 1 ? 1 : ad[ad.size() - 2];
  if (bd[bd.size() - 2] != s.k)
    return ctx.InputError(1, "inner dimensions differ: " + DimsToString(ad) + " x " + DimsToString(bd));
  if (a.rank() > 1) {
    auto broadcast = BroadcastDims(BatchDims(ad), BatchDims(bd));
    if (!broadcast.ok()) return ctx.InputError(1, broadcast.status().message());
    s.batch = broadcast.value();
  }
  s.out_dims = s.batch;
  if (a.rank() > 1) s.out_dims.push_back(s.m);
  s.out_dims.push_back(s.n);
  s.shared_b = b.rank() == 2 && (a.rank() == 1 || ProductOf(BatchDims(ad)) == ProductOf(s.batch));
  return s;
}

// One product of a batched MatMul: the offsets of its A, B and Y matrices, in elements.
struct Product {
  int64_t a, b, y;
};

inline std::vector<Product> BatchProducts(const Tensor& a, const Tensor& b, const MatMulShape& s) {
  std::vector<Product> products;
  std::vector<std::vector<int64_t>> in_batches = {BatchDims(a.dims()), BatchDims(b.dims())};
  ForEachBroadcastBlock(s.batch, in_batches,
                        [&](int64_t out_off, const int64_t* in_off, const int64_t* steps, int64_t count) {
                          for (int64_t i = 0; i < count; ++i)
                            products.push_back({(in_off[0] + i * steps[0]) * s.m * s.k,
                                                (in_off[1] + i * steps[1]) * s.k * s.n, (out_off + i) * s.m * s.n});
                        });
  return products;
}

// Each distinct B matrix of the products packed once (a B broadcast over A's
// batch is packed once), by the threads; `slot[p.b]` is product p's.
template <class PackedB>
std::vector<std::unique_ptr<const PackedB>> PackDistinctB(KernelContext& ctx, const std::vector<Product>& products,
                                                          const uint16_t* b, const MatMulShape& s,
                                                          std::map<int64_t, size_t>& slot) {
  std::vector<int64_t> offsets;
  for (const Product& p : products)
    if (slot.emplace(p.b, offsets.size()).second) offsets.push_back(p.b);
  std::vector<std::unique_ptr<const PackedB>> packed(offsets.size());
  ParallelTasks(ctx, static_cast<int64_t>(offsets.size()), [&](int64_t t) {
    packed[static_cast<size_t>(t)] = std::make_unique<const PackedB>(s.k, s.n, b + offsets[t], s.n, 1);
  });
  return packed;
}

// multiply(product, pool) for every product. As MatMulFloat: many small
// products (attention heads) one per task, few or large ones each over all
// threads; each product is computed alike either way.
template <class Multiply>
void RunProducts(KernelContext& ctx, const std::vector<Product>& products, const MatMulShape& s, Multiply multiply) {
  const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
  const int threads = NumThreads(ctx);
  if (threads > 1 && static_cast<int64_t>(products.size()) >= 2 * threads && flops < 5e7)
    ParallelTasks(ctx, static_cast<int64_t>(products.size()), [&](int64_t t) { multiply(products[t], nullptr); });
  else
    for (const Product& p : products) multiply(p, ctx.pool());
}

// Gemm's C in the kernel's arguments (c, c_row_stride, c_col_stride, beta).
// The reference adds beta * C whenever C is given (beta 0 included).
template <class Args>
void SetGemmC(Args& g, const GemmPlan& plan, const Tensor* c) {
  if (!c) return;
  g.c = c->data<uint16_t>();
  g.c_row_stride = plan.c_rows == 1 ? 0 : plan.c_cols;
  g.c_col_stride = plan.c_cols == 1 ? 0 : 1;
  g.beta = plan.beta;
}

}  // namespace nee::cpu::narrow
