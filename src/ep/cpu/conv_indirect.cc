// 2-D convolution as one GEMM per tile of output rows, B read in place.
//
// The im2col path builds, for every tile, K = C*KH*KW rows of gathered input
// (a strided gather per tap for stride 2) and packs them into SGEMM's panels:
// on a YOLO or ResNet downsampling conv that costs as much as the multiply.
// Here the input is copied once into zero-padded planes laid out so that
// every tap's im2col row is a contiguous window of one plane:
//  - stride 1: the padded plane itself; tap (kh, kw) of output (oh, ow) is
//    plane[oh + kh][ow + kw], so over a grid of Wq = OW + KW - 1 columns per
//    output row, tap (kh, kw)'s row is the plane from offset kh*Wq + kw on;
//  - stride 2: four phase planes, phase (a, b) holding padded rows a, a+2, ...
//    and columns b, b+2, ...; tap (kh, kw) reads phase (kh%2, kw%2) from offset
//    (kh/2)*Wq + kw/2.
// SGEMM (SgemmB::Rows) reads those windows where they lie. Each output row
// is computed over Wq columns, of which the last Wq - OW are junk (they read
// across the row end) and are dropped when the tile is copied out; bias,
// residual and activation are applied to the copied rows while they are hot.
//
// Every output element is the same sum over (c, kh, kw) in the same k-blocks
// as the im2col path computes, so the bits are the same, for any tiling and
// thread count.
#include "ep/cpu/conv_indirect.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ep/cpu/parallel_tasks.h"

namespace nee::cpu {

namespace {

// Output channels up to which SGEMM reads B in place (sgemm.cc: four row panels).
constexpr int64_t kIndirectMaxChannels = 48;

// The padded input as SGEMM reads it: per channel, stride x stride phase
// planes of Hq x Wq floats.
struct PhasePlanes {
  int64_t S, Hq, Wq;
  int64_t plane() const { return Hq * Wq; }
  int64_t channel() const { return S * S * plane(); }
};

// Rows: enough that a tap's window of OH * Wq floats, starting up to
// ((KH-1)/S) rows and (KW-1)/S columns in, stays inside its plane.
PhasePlanes PlanesOf(const Conv2D& g) {
  const int64_t S = g.stride;
  return {S, g.OH + (g.KH - 1) / S + 1, g.OW + (g.KW - 1) / S};
}

// Output rows per task: the tile's GEMM output (M x rows*Wq floats, copied
// out afterwards) stays around 256 KiB, and there are a few tasks per thread.
int64_t RowsPerTile(const Conv2D& g, const PhasePlanes& q, int threads) {
  int64_t rows = std::max<int64_t>(1, (64 * 1024) / std::max<int64_t>(1, g.M * q.Wq));
  if (threads > 1) rows = std::min(rows, std::max<int64_t>(1, (g.OH * g.N + 4 * threads - 1) / (4 * threads)));
  return std::min(rows, g.OH);
}

// Channel plane x_c into its phase planes (only the phases some tap reads).
void FillPhases(const Conv2D& g, const PhasePlanes& q, const float* x_c, float* dst) {
  for (int64_t a = 0; a < std::min(q.S, g.KH); ++a)
    for (int64_t b = 0; b < std::min(q.S, g.KW); ++b) {
      float* plane = dst + (a * q.S + b) * q.plane();
      // Columns j whose input column j*S + b - pl lies in [0, W): [lo, hi).
      const int64_t first = g.pl - b;  // j*S >= first
      const int64_t lo = std::clamp<int64_t>(first <= 0 ? 0 : (first + q.S - 1) / q.S, 0, q.Wq);
      const int64_t last = g.W - 1 + g.pl - b;  // j*S <= last
      const int64_t hi = std::clamp<int64_t>(last < 0 ? 0 : last / q.S + 1, lo, q.Wq);
      for (int64_t i = 0; i < q.Hq; ++i) {
        float* row = plane + i * q.Wq;
        const int64_t ih = i * q.S + a - g.pt;
        if (ih < 0 || ih >= g.H || lo == hi) {
          std::fill(row, row + q.Wq, 0.f);
          continue;
        }
        const float* src = x_c + ih * g.W + b - g.pl;  // src[j * S] is column j
        std::fill(row, row + lo, 0.f);
        if (q.S == 1) std::memcpy(row + lo, src + lo, sizeof(float) * static_cast<size_t>(hi - lo));
        else CopyEvens(src + 2 * lo, row + lo, hi - lo);
        std::fill(row + hi, row + q.Wq, 0.f);
      }
    }
}

// Per-thread buffers kept between calls (grow-only).
std::vector<float>& ThreadBuffer(int which) {
  thread_local std::vector<float> buffers[2];
  return buffers[which];
}

}  // namespace

bool ConvIndirectApplies(const Conv2D& g) {
  if (!SgemmReadsBInPlace() || (g.stride != 1 && g.stride != 2)) return false;
  // The padded copy is a pass over memory (about the input's size) that
  // im2col does not make; it pays where im2col's matrix is much bigger than
  // the input (KH*KW / stride^2 times: 9 for YOLO's 6x6 stride-2 stem, 1.2x
  // faster here at 1 thread) and B is read in place, which SGEMM does for
  // few output channels. ResNet's and YOLO's 3x3 and 1x1 stride-2 convs ran
  // 10-25% slower here than with im2col, in the model (where their input
  // has just been written and the copy competes with it for the caches).
  if (g.M > kIndirectMaxChannels || g.KH * g.KW < 4 * g.stride * g.stride) return false;
  if (g.N <= 0 || g.C <= 0 || g.M <= 0 || g.OH <= 0 || g.OW <= 0) return false;
  const PhasePlanes q = PlanesOf(g);
  const double copy = static_cast<double>(g.C) * static_cast<double>(q.channel());
  return copy <= 4.0 * static_cast<double>(g.C * g.H * g.W + g.M * g.OH * g.OW) + 65536;
}

Status ConvIndirect(KernelContext& ctx, const Conv2D& g, const float* x, const float* w,
                    const SgemmPackedA* packed_w, const float* bias, const ConvEpilogue* epilogue, const float* z,
                    float* y) {
  const PhasePlanes q = PlanesOf(g);
  const int threads = NumThreads(ctx);
  const int64_t K = g.C * g.KH * g.KW, out_plane = g.OH * g.OW;
  const int64_t rows_per_tile = RowsPerTile(g, q, threads), tiles = (g.OH + rows_per_tile - 1) / rows_per_tile;
  const SgemmA weights = packed_w ? SgemmA(*packed_w) : SgemmA(MatrixView{w, K, 1});
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  std::vector<float>& planes = ThreadBuffer(0);
  planes.resize(static_cast<size_t>(g.C * q.channel()));
  // Tap (c, kh, kw)'s window at the start of the grid; a tile adds its first row.
  std::vector<const float*> taps(static_cast<size_t>(K));
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw)
        taps[(c * g.KH + kh) * g.KW + kw] = planes.data() + c * q.channel() +
                                            ((kh % q.S) * q.S + kw % q.S) * q.plane() + (kh / q.S) * q.Wq + kw / q.S;
  for (int64_t n = 0; n < g.N; ++n) {
    const float* x_n = x + n * g.C * g.H * g.W;
    ParallelTasks(ctx, g.C, [&](int64_t c) { FillPhases(g, q, x_n + c * g.H * g.W, planes.data() + c * q.channel()); });
    auto tile = [&](int64_t t, ThreadPool* pool) {
      const int64_t oh0 = t * rows_per_tile, oh1 = std::min(g.OH, oh0 + rows_per_tile);
      const int64_t cols = (oh1 - oh0) * q.Wq;
      thread_local std::vector<const float*> rows;
      rows.resize(static_cast<size_t>(K));
      for (int64_t p = 0; p < K; ++p) rows[p] = taps[p] + oh0 * q.Wq;
      std::vector<float>& grid = ThreadBuffer(1);
      grid.resize(static_cast<size_t>(g.M * cols));
      Sgemm(g.M, cols, K, weights, SgemmB::Rows(rows.data()), 0.f, grid.data(), cols, pool);
      // Copy out the real columns of each output row, then finish them.
      const int64_t offset = n * g.M * out_plane + oh0 * g.OW, count = (oh1 - oh0) * g.OW;
      for (int64_t m = 0; m < g.M; ++m)
        for (int64_t r = 0; r < oh1 - oh0; ++r)
          std::memcpy(y + offset + m * out_plane + r * g.OW, grid.data() + m * cols + r * q.Wq,
                      sizeof(float) * static_cast<size_t>(g.OW));
      if (bias || z || act.kind != FusedActivation::Kind::kNone)
        BiasResidualActivate(act, bias, z ? z + offset : nullptr, out_plane, y + offset, out_plane, g.M, count);
    };
    if (threads == 1 || tiles >= threads) ParallelTasks(ctx, tiles, [&](int64_t t) { tile(t, nullptr); });
    else
      for (int64_t t = 0; t < tiles; ++t) tile(t, ctx.pool());  // few rows: SGEMM shares each tile
  }
  return Status::Ok();
}

}  // namespace nee::cpu
