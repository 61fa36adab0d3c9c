#include "ep/cpu/packed_constant_b.h"

#include <utility>

namespace nee::cpu {

namespace {

// The packed B of a constant the caller may drop: over its own bytes when
// the session hands them over (KernelContext::TakeConstantInput), which
// spares as many fresh pages as B has; into new memory otherwise.
std::shared_ptr<const SgemmPackedB> PackDroppable(KernelContext& ctx, size_t index, int64_t k, int64_t n,
                                                  MatrixView view) {
  const bool row_major = view.row_stride == n && view.col_stride == 1;
  if (!row_major || !SgemmPackedB::PacksInPlace(n, view.data)) {
    auto b = std::make_shared<const SgemmPackedB>(k, n, view);
    ctx.DropConstantInput(index);
    return b;
  }
  Tensor taken = ctx.TakeConstantInput(index);
  if (taken.defined() && taken.raw_data() == view.data) {
    float* bytes = taken.data<float>();
    auto holder = std::make_shared<Tensor>(std::move(taken));
    return std::make_shared<const SgemmPackedB>(k, n, bytes, std::shared_ptr<void>(holder, bytes));
  }
  auto b = std::make_shared<const SgemmPackedB>(k, n, view);
  ctx.ReleaseConstantInput(index);
  return b;
}

}  // namespace

std::shared_ptr<const SgemmPackedB> PackedConstantB(KernelContext& ctx, size_t index, int64_t k, int64_t n,
                                                    MatrixView view, bool transposed, bool drop) {
  if (!ctx.prepared() || !ctx.input_is_constant(index)) return nullptr;
  auto packed = ctx.prepared()->GetOrBuild<SgemmPackedB>(
      {k, n, transposed ? 1 : 0}, [&]() -> Result<std::shared_ptr<const SgemmPackedB>> {
        if (drop) return PackDroppable(ctx, index, k, n, view);
        auto b = std::make_shared<const SgemmPackedB>(k, n, view);
        ctx.ReleaseConstantInput(index);  // the packed copy is what runs use
        return b;
      });
  return packed.ok() ? packed.value() : nullptr;
}

}  // namespace nee::cpu
