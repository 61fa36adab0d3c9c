// Weights packed once per session: the pattern the CPU provider's fast
// kernels share for their constant operands.
#pragma once
#include <initializer_list>
#include <memory>
#include <utility>

#include "ops/op_schema.h"

namespace nee::cpu {

// The weights (the first input in `reads`, usually 1) packed into the layout
// a kernel reads, by `pack()` (returning a std::shared_ptr to a T): once per
// session, kept in the node's PreparedCache under `key`, when every input in
// `reads` that the node has is a constant; the weights' input is then
// released, since runs read the packed copy (and
// a later repack would fault a mapped file's pages back in). Otherwise, or if
// the cache fails, packed afresh for this call. The key holds whatever the
// layout depends on (shapes, and the ISA where tests change it at run time).
// `drop`: the kernel promises never to read the weights' input in place
// again in this session, whatever later runs' input shapes
// (KernelContext::DropConstantInput): the session then frees a heap copy of
// them (a constant the optimizer made, as convs with a BatchNormalization
// folded in), not only a mapped file's pages.
template <typename T, typename PackFn>
std::shared_ptr<const T> PackedOnce(KernelContext& ctx, const PreparedCache::Key& key,
                                    std::initializer_list<size_t> reads, PackFn&& pack, bool drop = false) {
  bool constant = ctx.prepared() != nullptr;
  for (size_t i : reads) constant = constant && (!ctx.has_input(i) || ctx.input_is_constant(i));
  if (!constant) return pack();
  auto packed = ctx.prepared()->GetOrBuild<T>(key, [&]() -> Result<std::shared_ptr<const T>> {
    std::shared_ptr<const T> p = pack();
    if (drop) ctx.DropConstantInput(*reads.begin());
    else ctx.ReleaseConstantInput(*reads.begin());
    return p;
  });
  return packed.ok() ? packed.value() : pack();
}

}  // namespace nee::cpu
