#include "ep/cpu/conv_int_geometry.h"

#include <vector>

#include "ops/nn_util.h"

namespace nee::cpu {

bool PlanConvInt(const KernelContext& ctx, const Tensor& x, const Tensor& w, ConvInt2D& g) {
  if (!Is8Bit(x.dtype()) || !Is8Bit(w.dtype())) return false;
  if (x.rank() < 3 || x.rank() > 4 || w.rank() != x.rank()) return false;
  const size_t n = static_cast<size_t>(x.rank() - 2);
  auto group = ctx.node().GetInt("group", 1);
  if (!group.ok() || group.value() <= 0) return false;
  g.group = group.value();
  g.N = x.dim(0);
  g.C = x.dim(1);
  g.M = w.dim(0);
  g.Cg = w.dim(1);
  if (g.C != g.Cg * g.group || g.M % g.group != 0) return false;
  g.Mg = g.M / g.group;
  std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  auto spec = nn::ReadWindowSpec(ctx.node(), n, &kernel);
  if (!spec.ok() || spec.value().kernel != kernel) return false;
  nn::WindowSpec& ws = spec.value();
  int64_t in[2] = {1, 1}, out[2] = {1, 1}, k[2] = {1, 1}, s[2] = {1, 1}, dl[2] = {1, 1}, p[2] = {0, 0};
  const size_t first = 2 - n;
  for (size_t d = 0; d < n; ++d) {
    auto o = nn::WindowOutputDim(ctx.node(), ws, d, x.dim(static_cast<int64_t>(d + 2)));
    if (!o.ok()) return false;
    in[first + d] = x.dim(static_cast<int64_t>(d + 2));
    out[first + d] = o.value();
    k[first + d] = kernel[d];
    s[first + d] = ws.strides[d];
    dl[first + d] = ws.dilations[d];
    p[first + d] = ws.pad_begin(d);
  }
  g.ih = in[0], g.iw = in[1], g.oh = out[0], g.ow = out[1], g.kh = k[0], g.kw = k[1];
  g.sh = s[0], g.sw = s[1], g.dh = dl[0], g.dw = dl[1], g.ph = p[0], g.pw = p[1];
  // Empty outputs (N, M or P zero) and empty sums (Cg zero) are the caller's
  // and the GEMM's to handle: after the weights are packed and dropped, only
  // inputs the reference refuses before reading them may go to it.
  return true;
}

}  // namespace nee::cpu
