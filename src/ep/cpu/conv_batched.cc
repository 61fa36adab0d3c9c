// Convolution of a batch of small images (silero-vad's 100 windows of 1 to 5
// pixels): im2col + SGEMM image by image gives SGEMM 1 to 5 columns, a
// fraction of one 32-column panel, so the call, the packing and the padded
// panel lanes cost more than the arithmetic. Here the im2col columns of a
// chunk of whole images sit side by side in one B matrix (100 images of 4
// pixels: 400 columns), written straight into SGEMM's packed panels; SGEMM
// writes C into a scratch matrix, and its epilogue scatters each finished
// tile to the images' [M, pixels] planes with bias, residual and activation
// while the tile is in L1.
//
// Determinism: SGEMM computes each column of C on its own, its sum over k in
// a fixed order, so which chunk (and which thread) an image falls in never
// changes a bit of its output.
#include "ep/cpu/conv_batched.h"

#include <algorithm>

#include "ep/cpu/parallel_tasks.h"

namespace nee::cpu {

namespace {

// Output pixels per image up to which images are batched. Measured one conv
// at a time, 100 images (16 for the 1-D k3), AVX2 Zen 3, 1 thread, against
// what ran before: 1-D k3 64->64 stride 1 (the pixel-major path) 0.85x at 8
// pixels, 0.92x at 16, 0.98x at 24, 1.03x at 32; stride 2 0.50x at 16; a
// 2-D 4x4 image 0.56x; kernel 256 stride 128 (image-by-image im2col) 0.38x
// at 5 pixels, 0.92x at 16, 1.05x at 32.
constexpr int64_t kMaxBatchedPixels = 16;

// About this many GEMM columns per chunk of images: eight panels, so that B's
// k-block (256 x 256 floats) and the chunk's C stay within L2 next to A.
constexpr int64_t kChunkColumns = 256;

// Whole images per chunk: as many as fill a whole number of SGEMM's panels
// (a chunk's last panel is padded with zeros: 13 images of 5 pixels are 65
// columns, three panels' work), up to kChunkColumns, and with several threads
// enough chunks (four per thread) for threads claiming them to end together.
int64_t ImagesPerChunk(const BatchedConv& g, int threads) {
  constexpr int64_t kPanel = kSgemmPanelWidth;
  int64_t panels = kChunkColumns / kPanel;
  if (threads > 1) {
    const int64_t wanted_chunks = std::max<int64_t>(1, (4 * threads + g.group - 1) / g.group);
    const int64_t total_panels = (g.N * g.out_size + kPanel - 1) / kPanel;
    panels = std::clamp<int64_t>((total_panels + wanted_chunks - 1) / wanted_chunks, 1, panels);
  }
  return std::clamp<int64_t>(panels * kPanel / g.out_size, 1, g.N);
}

// Scratch of the calling thread: `which` 0 holds an im2col row, 1 the
// chunk's C, 2 the chunk's padded input (1-D convs).
float* Scratch(int which, size_t floats) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[which];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

// One (chunk of images, group): the chunk's images and where their data is.
struct Unit {
  const BatchedConv* g;
  int64_t first_image, images, group;
  int64_t columns() const { return images * g->out_size; }
};

// Row p of the chunk's B, columns [j0, j0 + nc), into `row`: image after image,
// each output pixel the input value it sees through tap taps[p % taps] of
// channel p / taps (0 in padding).
void FillBatchedRow(const Unit& u, const float* x, int64_t p, int64_t j0, int64_t nc, float* __restrict row) {
  const BatchedConv& g = *u.g;
  const int64_t live = static_cast<int64_t>(g.taps.size());
  const int64_t c = p / live, tap = g.taps[p % live], out = g.out_size;
  const int64_t* offsets = g.tap_offsets.data() + tap * out;
  const int64_t image_stride = g.C * g.in_size;
  const int64_t n = u.first_image + j0 / out;
  const float* plane = x + (n * g.C + u.group * g.Cg() + c) * g.in_size;
  int64_t ow = j0 % out;
  for (int64_t left = nc; left > 0; plane += image_stride) {
    const int64_t end = std::min(out, ow + left);
    for (int64_t o = ow; o < end; ++o) {
      const int64_t at = offsets[o];
      *row++ = at < 0 ? 0.f : plane[at];
    }
    left -= end - ow;
    ow = 0;
  }
}

// ---- 1-D convs: each image's input rows padded, then strided copies ----------------
//
// Each input row of the chunk is copied once with its padding around it, so
// every tap of every output lies inside it: a row of B is then, image after
// image, `out` floats read at the conv's stride from a fixed offset, with no
// border cases. Rows of at most 8 or 16 pixels are copied as 8 or 16 floats
// at once (a fixed count the compiler vectorizes; the extra floats are
// overwritten by the next image or lie past the row), which needs kLineSlack
// readable floats past the padded rows.
constexpr int64_t kLineSlack = 32;

int64_t PaddedLength(const BatchedConv& g) { return g.pad + g.in_size + g.pad_end; }

// The chunk's input channels of its group, [images][Cg][padded length], then kLineSlack zeros.
NEE_NO_LIBCALL_LOOPS void PadLines(const Unit& u, const float* x, float* __restrict padded) {
  const BatchedConv& g = *u.g;
  const int64_t in = g.in_size, pad = g.pad, pad_end = g.pad_end;
  for (int64_t n = u.first_image; n < u.first_image + u.images; ++n) {
    const float* __restrict src = x + (n * g.C + u.group * g.Cg()) * in;
    for (int64_t c = 0; c < g.Cg(); ++c, src += in) {
      for (int64_t i = 0; i < pad; ++i) *padded++ = 0.f;
      for (int64_t i = 0; i < in; ++i) *padded++ = src[i];
      for (int64_t i = 0; i < pad_end; ++i) *padded++ = 0.f;
    }
  }
  for (int64_t i = 0; i < kLineSlack; ++i) padded[i] = 0.f;
}

// dst[n * out + o] = src[n * image_stride + o * kStride] for n < images, o <
// out, copying kCount >= out floats an image (the compiler vectorizes a
// fixed count; the floats past `out` are overwritten by the next image).
template <int kStride, int kCount>
void CopyLinesFixed(const float* __restrict src, int64_t image_stride, int64_t images, int64_t out,
                    float* __restrict dst) {
  for (int64_t n = 0; n < images; ++n)
    for (int i = 0; i < kCount; ++i) dst[n * out + i] = src[n * image_stride + i * kStride];
}

// The same for any out: up to 4 pixels copied exactly (overlapping 8-float
// copies of 1-pixel images cost more than the table path), then 8 or 16.
template <int kStride>
void CopyLines(const float* src, int64_t image_stride, int64_t images, int64_t out, float* dst) {
  switch (out) {
    case 1: return CopyLinesFixed<kStride, 1>(src, image_stride, images, out, dst);
    case 2: return CopyLinesFixed<kStride, 2>(src, image_stride, images, out, dst);
    case 3: return CopyLinesFixed<kStride, 3>(src, image_stride, images, out, dst);
    case 4: return CopyLinesFixed<kStride, 4>(src, image_stride, images, out, dst);
    default: break;
  }
  if (out <= 8) return CopyLinesFixed<kStride, 8>(src, image_stride, images, out, dst);
  if (out <= 16) return CopyLinesFixed<kStride, 16>(src, image_stride, images, out, dst);
  for (int64_t n = 0; n < images; ++n)
    for (int64_t o = 0; o < out; ++o) dst[n * out + o] = src[n * image_stride + o * kStride];
}

void CopyLinesStrided(const float* src, int64_t image_stride, int64_t images, int64_t out, int64_t stride,
                      float* dst) {
  for (int64_t n = 0; n < images; ++n)
    for (int64_t o = 0; o < out; ++o) dst[n * out + o] = src[n * image_stride + o * stride];
}

// Where a chunk's 1-D input rows are: its padded copy, or (no padding, and
// copies that read no float past a row) the input itself.
struct Lines {
  const float* first;  // the chunk's first image, the group's first channel
  int64_t image_stride, channel_stride;
};

bool ReadsInPlace(const BatchedConv& g) {
  return g.pad == 0 && g.pad_end == 0 && (g.stride > 2 || g.out_size <= 4);
}

// Row p of the chunk's B for the whole images that columns [j0, j0 + nc)
// touch, from `dst` on (16 floats of slack after them); returns where column j0 is.
float* FillLineRow(const Unit& u, const Lines& lines, int64_t p, int64_t j0, int64_t nc, float* dst) {
  const BatchedConv& g = *u.g;
  const int64_t live = static_cast<int64_t>(g.taps.size());
  const int64_t c = p / live, tap = g.taps[p % live], out = g.out_size;
  const int64_t first = j0 / out, images = (j0 + nc + out - 1) / out - first;
  const int64_t image_stride = lines.image_stride;
  const float* src = lines.first + first * image_stride + c * lines.channel_stride + tap * g.dilation;
  if (g.stride == 1) CopyLines<1>(src, image_stride, images, out, dst);
  else if (g.stride == 2) CopyLines<2>(src, image_stride, images, out, dst);
  else CopyLinesStrided(src, image_stride, images, out, g.stride, dst);
  return dst + j0 % out;
}

// Whether a unit takes the 1-D copies: its rows read in place, or a padded
// copy of them of at most 4 MiB (long rows read at a large stride would
// otherwise make a copy far bigger than the B it feeds).
bool UsesLines(const Unit& u) {
  constexpr int64_t kMaxPaddedFloats = 1 << 20;
  return ReadsInPlace(*u.g) || u.images * u.g->Cg() * PaddedLength(*u.g) <= kMaxPaddedFloats;
}

// The chunk's rows, padded into scratch unless they can be read in place.
Lines LinesOf(const Unit& u, const float* x) {
  const BatchedConv& g = *u.g;
  if (ReadsInPlace(g))
    return {x + (u.first_image * g.C + u.group * g.Cg()) * g.in_size, g.C * g.in_size, g.in_size};
  const int64_t length = PaddedLength(g);
  float* padded = Scratch(2, static_cast<size_t>(u.images * g.Cg() * length + kLineSlack));
  PadLines(u, x, padded);
  return {padded, g.Cg() * length, length};
}

// fn(at, j, seg) for each run of one image's pixels among the chunk's
// columns [j0, j0 + cols): column j starts it, `seg` pixels long, and `at` is
// where its first output channel's row of the run lies in y, given `channel`.
template <typename Fn>
void ForEachImageRun(const Unit& u, int64_t channel, int64_t j0, int64_t cols, Fn&& fn) {
  const int64_t out = u.g->out_size;
  for (int64_t j = j0; j < j0 + cols;) {
    const int64_t n = u.first_image + j / out, ow = j % out, seg = std::min(out - ow, j0 + cols - j);
    fn((n * u.g->M + channel) * out + ow, j, seg);
    j += seg;
  }
}

// Rows [0, rows) x columns [0, cols) of a finished C tile (chunk columns
// from j0, output channels from `channel`) to the images' planes in y.
void Scatter(const Unit& u, int64_t channel, int64_t j0, int64_t rows, int64_t cols, const float* tile, int64_t ldc,
             float* y) {
  const int64_t out = u.g->out_size;
  ForEachImageRun(u, channel, j0, cols, [&](int64_t at, int64_t j, int64_t seg) {
    const float* src = tile + (j - j0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < seg; ++o) y[at + r * out + o] = src[r * ldc + o];
  });
}

// Residual and activation (and bias) on the scattered copy, one image at a time.
void FinishImages(const Unit& u, const FusedActivation& act, const float* bias, const float* z, int64_t channel,
                  int64_t j0, int64_t rows, int64_t cols, float* y) {
  const int64_t out = u.g->out_size;
  ForEachImageRun(u, channel, j0, cols, [&](int64_t at, int64_t, int64_t seg) {
    BiasResidualActivate(act, bias ? bias + channel : nullptr, z + at, out, y + at, out, rows, seg);
  });
}

// One unit's SGEMM; `pool` (may be null) parallelizes inside it.
void RunUnit(const Unit& u, const float* x, const float* w, const SgemmPackedA* packed_w, const float* bias,
             const FusedActivation& act, const float* z, float* y, ThreadPool* pool) {
  const BatchedConv& g = *u.g;
  const int64_t rows = g.rows(), cols = u.columns(), Mg = g.Mg();
  float* c = Scratch(1, static_cast<size_t>(Mg * cols));
  const bool line = g.line && UsesLines(u);
  const Lines lines = line ? LinesOf(u, x) : Lines{nullptr, 0, 0};
  // im2col straight into SGEMM's packed panels, a row at a time (it stays in L1).
  auto pack = [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* packed) {
    // An im2col row (whole images, and the 1-D copies' slack), the packing thread's own.
    float* row_buffer = Scratch(0, static_cast<size_t>(nc + 2 * g.out_size + 16));
    for (int64_t p = p0; p < p0 + kc; ++p) {
      float* row = row_buffer;
      if (line) row = FillLineRow(u, lines, p, j0, nc, row_buffer);
      else FillBatchedRow(u, x, p, j0, nc, row_buffer);
      SgemmPackBRow(row, nc, kc, p - p0, packed);
    }
  };
  const bool finish = bias || z || act.kind != FusedActivation::Kind::kNone;
  const SgemmEpilogueFn scatter = [&](int64_t i0, int64_t j0, int64_t tile_rows, int64_t tile_cols, float* tile,
                                      int64_t ldc) {
    const int64_t channel = u.group * Mg + i0;
    // Without a residual the whole tile is finished at once, before it moves.
    if (finish && !z) BiasResidualActivate(act, bias ? bias + channel : nullptr, nullptr, 0, tile, ldc, tile_rows, tile_cols);
    Scatter(u, channel, j0, tile_rows, tile_cols, tile, ldc, y);
    if (z) FinishImages(u, act, bias, z, channel, j0, tile_rows, tile_cols, y);
  };
  const SgemmA weights =
      packed_w ? SgemmA(packed_w[u.group]) : SgemmA(MatrixView{w + u.group * Mg * rows, rows, 1});
  const PackBFn pack_fn = pack;
  Sgemm(Mg, cols, rows, weights, SgemmB(pack_fn), 0.f, c, cols, pool, &scatter);
}

}  // namespace

// (Batch-1 models never come here: one image has its own paths.)
bool ConvBatchedApplies(int64_t N, int64_t out_size) { return N > 1 && out_size <= kMaxBatchedPixels; }

Status ConvBatched(KernelContext& ctx, const BatchedConv& g, const float* x, const float* w,
                   const SgemmPackedA* packed_w, const float* bias, const ConvEpilogue* epilogue, const float* z,
                   float* y) {
  const FusedActivation none;
  const FusedActivation& act = epilogue ? epilogue->activation : none;
  const int64_t images = ImagesPerChunk(g, NumThreads(ctx));  // (the last chunk may have fewer)
  const int64_t chunks = (g.N + images - 1) / images;
  const int threads = NumThreads(ctx);
  auto unit = [&](int64_t t) {
    const int64_t first = t / g.group * images;
    return Unit{&g, first, std::min(images, g.N - first), t % g.group};
  };
  if (threads > 1 && chunks * g.group < threads) {
    // Too few images to go around: the threads share each unit's SGEMM (over output channels).
    for (int64_t t = 0; t < chunks * g.group; ++t) RunUnit(unit(t), x, w, packed_w, bias, act, z, y, ctx.pool());
    return Status::Ok();
  }
  ParallelTasks(ctx, chunks * g.group,
                  [&](int64_t t) { RunUnit(unit(t), x, w, packed_w, bias, act, z, y, nullptr); });
  return Status::Ok();
}

}  // namespace nee::cpu
