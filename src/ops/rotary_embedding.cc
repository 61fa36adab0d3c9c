// Operator family: RotaryEmbedding (23), the ONNX rotary position embedding
// (com.microsoft's form is in attention_contrib.cc). Split from attention.cc
// to keep each file readable whole; its helpers are in attention_util.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/attention_util.h"
#include "ops/nn_util.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace nee {
namespace {

using namespace attention_util;  // NOLINT: shared with the other attention-era families
using nn::ComputeInput;
using nn::ComputeOutput;

// ---- RotaryEmbedding -------------------------------------------------------------

struct RotaryAttrs {
  bool interleaved = false;
  int64_t rotary_dim = 0;  // 0: the head size
  int64_t num_heads = 0;
};

Result<RotaryAttrs> ReadRotaryAttrs(const Node& node) {
  RotaryAttrs a;
  NEE_ASSIGN_OR_RETURN(int64_t interleaved, node.GetInt("interleaved", 0));
  a.interleaved = interleaved != 0;
  NEE_ASSIGN_OR_RETURN(a.rotary_dim, node.GetInt("rotary_embedding_dim", 0));
  NEE_ASSIGN_OR_RETURN(a.num_heads, node.GetInt("num_heads", 0));
  if (a.rotary_dim < 0) return InvalidModel(node.Describe() + ": rotary_embedding_dim must be non-negative");
  if (a.num_heads < 0) return InvalidModel(node.Describe() + ": num_heads must be positive");
  return a;
}

Status InferRotaryEmbedding(InferenceContext& ctx) {
  NEE_ASSIGN_OR_RETURN(RotaryAttrs attrs, ReadRotaryAttrs(ctx.node));
  NEE_ASSIGN_OR_RETURN(const TypeInfo* x, InputTensorType(ctx, 0));
  if (x->shape) {
    const size_t rank = x->shape->size();
    if (rank != 3 && rank != 4) return ctx.InputError(0, "X must be 3-D or 4-D, got rank " + std::to_string(rank));
    if (rank == 3 && attrs.num_heads <= 0) return ctx.Error("a 3-D X needs the attribute num_heads");
  }
  ctx.output_types[0] = *x;
  return Status::Ok();
}

Status RotaryEmbeddingKernel(KernelContext& ctx) {
  NEE_ASSIGN_OR_RETURN(RotaryAttrs attrs, ReadRotaryAttrs(ctx.node()));
  NEE_ASSIGN_OR_RETURN(const Tensor* x, ctx.InputTensor(0));
  NEE_ASSIGN_OR_RETURN(const Tensor* cos_cache, ctx.InputTensor(1));
  NEE_ASSIGN_OR_RETURN(const Tensor* sin_cache, ctx.InputTensor(2));
  NEE_ASSIGN_OR_RETURN(const Tensor* position_ids, OptionalInput(ctx, 3));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 0, *x));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 1, *cos_cache));
  NEE_RETURN_IF_ERROR(CheckFloatInput(ctx, 2, *sin_cache));

  // View X as (batch, seq, heads, head_size) through strides.
  const int64_t rank = x->rank();
  if (rank != 3 && rank != 4) return ctx.InputError(0, "X must be 3-D or 4-D, got " + x->Describe());
  const int64_t batch = x->dim(0);
  int64_t seq, heads, head_size;
  if (rank == 4) {
    heads = x->dim(1);
    seq = x->dim(2);
    head_size = x->dim(3);
  } else {
    if (attrs.num_heads <= 0) return ctx.Error("a 3-D X needs the attribute num_heads");
    heads = attrs.num_heads;
    seq = x->dim(1);
    if (x->dim(2) % heads != 0)
      return ctx.InputError(0, "hidden size " + std::to_string(x->dim(2)) + " is not divisible by num_heads " + std::to_string(heads));
    head_size = x->dim(2) / heads;
  }
  const HeadLayout layout = HeadLayout::Of(rank == 3, heads, seq, head_size);
  const int64_t rot = attrs.rotary_dim == 0 ? head_size : attrs.rotary_dim;
  if (rot > head_size || rot % 2 != 0)
    return ctx.Error("rotary_embedding_dim " + std::to_string(rot) + " must be even and at most the head size " +
                     std::to_string(head_size));
  const int64_t half = rot / 2;

  // Cache rows: cache[position_ids[b, s]] or cache[b, s].
  std::vector<int64_t> cache_row(static_cast<size_t>(batch * seq));
  for (size_t ci : {size_t{1}, size_t{2}}) {
    const Tensor& cache = ci == 1 ? *cos_cache : *sin_cache;
    if (position_ids) {
      if (cache.rank() != 2 || cache.dim(1) != half)
        return ctx.InputError(ci, "with position_ids the cache must be (max_position, " + std::to_string(half) +
                                      "), got " + DimsToString(cache.dims()));
    } else if (cache.rank() != 3 || cache.dim(0) != batch || cache.dim(1) != seq || cache.dim(2) != half) {
      return ctx.InputError(ci, "without position_ids the cache must be (" + std::to_string(batch) + ", " +
                                    std::to_string(seq) + ", " + std::to_string(half) + "), got " + DimsToString(cache.dims()));
    }
  }
  if (cos_cache->dims() != sin_cache->dims())
    return ctx.InputError(2, "sin_cache " + DimsToString(sin_cache->dims()) + " differs from cos_cache " +
                                 DimsToString(cos_cache->dims()));
  if (position_ids) {
    if (position_ids->dtype() != DataType::kInt64 || position_ids->rank() != 2 || position_ids->dim(0) != batch ||
        position_ids->dim(1) != seq)
      return ctx.InputError(3, "position_ids must be int64 (" + std::to_string(batch) + ", " + std::to_string(seq) +
                                   "), got " + position_ids->Describe());
    const int64_t max_pos = cos_cache->dim(0);
    for (int64_t i = 0; i < batch * seq; ++i) {
      const int64_t p = position_ids->data<int64_t>()[i];
      if (p < 0 || p >= max_pos)
        return ctx.InputError(3, "position id " + std::to_string(p) + " is outside the cache [0, " + std::to_string(max_pos) + ")");
      cache_row[i] = p;
    }
  } else {
    for (int64_t i = 0; i < batch * seq; ++i) cache_row[i] = i;
  }

  const DataType t = x->dtype();
  NEE_ASSIGN_OR_RETURN(Tensor y_tensor, ctx.AllocateOutput(0, t, x->dims()));
  auto run = [&](auto zero) -> Status {
    using A = decltype(zero);
    ComputeInput<A> cx(*x), ccos(*cos_cache), csin(*sin_cache);
    ComputeOutput<A> y(y_tensor);
    ctx.ParallelFor(batch * seq, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bs = begin; bs < end; ++bs) {
        const int64_t b = bs / seq, s = bs % seq;
        const A* cs = ccos.data() + cache_row[bs] * half;
        const A* sn = csin.data() + cache_row[bs] * half;
        for (int64_t h = 0; h < heads; ++h) {
          const A* in = cx.data() + layout.Row(b, h, s);
          A* out = y.data() + layout.Row(b, h, s);
          for (int64_t i = 0; i < half; ++i) {
            // The pair rotated together: halves, or neighbours when interleaved.
            const int64_t i1 = attrs.interleaved ? 2 * i : i;
            const int64_t i2 = attrs.interleaved ? 2 * i + 1 : i + half;
            const A x1 = in[i1], x2 = in[i2];
            out[i1] = RoundTo<A>(t, RoundTo<A>(t, cs[i] * x1) - RoundTo<A>(t, sn[i] * x2));
            out[i2] = RoundTo<A>(t, RoundTo<A>(t, sn[i] * x1) + RoundTo<A>(t, cs[i] * x2));
          }
          std::copy(in + rot, in + head_size, out + rot);
        }
      }
    });
    y.Commit();
    return Status::Ok();
  };
  if (t == DataType::kDouble) return run(0.0);
  return run(0.0f);
}

}  // namespace

void RegisterRotaryEmbeddingOps(OpRegistry& registry) {
  registry.RegisterVersions("", "RotaryEmbedding", {23}, InferRotaryEmbedding, RotaryEmbeddingKernel);
}

}  // namespace nee
