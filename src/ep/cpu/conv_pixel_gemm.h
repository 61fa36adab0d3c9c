// Convolution with output pixels as GEMM rows and output channels as the
// vector dimension (conv_pixel_gemm.cc). The input is read where it lies, one
// scalar broadcast per pixel and tap; the weights are packed once per
// session; nothing the size of the input is copied or packed per run. Each
// output row's pixel-major result is transposed into NCHW as it is copied out.
#pragma once
#include <cstdint>
#include <memory>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/sgemm.h"
#include "ops/op_schema.h"

namespace nee::cpu {

// Taps per depth block at most: what one tile of six pixels reads (kc cache
// lines of input) and its block of weights (kc x 16 floats) share L1 with
// room left. K is cut into equal blocks (144 taps: 72 + 72, not 128 + 16).
constexpr int64_t kPixelGemmDepth = 128;

// The weights w (M x K, row-major) packed for the kernel: per depth block and
// per 16 output channels, kc rows of 16 floats (channels past M zero).
class PixelPackedWeights {
 public:
  PixelPackedWeights(const float* w, int64_t M, int64_t K);
  int64_t M() const { return M_; }
  int64_t K() const { return K_; }
  int64_t padded_m() const { return (M_ + 15) / 16 * 16; }
  int64_t depth_blocks() const { return blocks_; }
  // Depth block b holds taps [BlockStart(b), BlockStart(b + 1)).
  int64_t BlockStart(int64_t b) const { return b * K_ / blocks_; }
  // The [kc][16] weights of depth block b and channels [16 * cb, 16 * cb + 16).
  const float* Block(int64_t b, int64_t cb) const {
    return data_.get() + BlockStart(b) * padded_m() + cb * 16 * (BlockStart(b + 1) - BlockStart(b));
  }

 private:
  int64_t M_, K_, blocks_;
  SgemmBuffer data_;
};

// Whether this CPU has the kernel (AVX2 with FMA). AVX-512 machines keep the
// channel-major paths, whose kernel reads its B operand in place there.
bool PixelGemmAvailable();

// Whether ConvPixel runs this geometry: the kernel exists, the geometry is
// supported and it measured faster than the channel-major paths for its kind.
bool ConvPixelApplies(const Conv2D& g);

// y = conv(x, w) + bias, then the optional FusedConv epilogue (`z`: the
// residual, shaped as y, or null). Every output element sums its taps in
// (c, kh, kw) order in fixed depth blocks, so results do not depend on the
// thread count.
Status ConvPixel(KernelContext& ctx, const Conv2D& g, const float* x, const float* w, const float* bias,
                 const ConvEpilogue* epilogue, const float* z, float* y);

// ---- The pieces, for tests ----

// A run of output pixels for PixelGemm: pixel j's tap p is rows[p][stride * j];
// its results go to grid rows j (leading dimension ldg).
struct PixelSegment {
  const float* const* rows;
  int64_t stride;
  int64_t pixels;
  float* grid;
};

// grid[j * ldg + m] = sum over taps p of rows[p][stride * j] * w[m][p], for
// every segment, pixel j and m in the blocks of 16 channels [cb0, cb1) (zeros
// past M). Depth blocks outermost, then channel blocks, so each block of
// weights is read from L1 by every segment.
void PixelGemm(const PixelSegment* segments, int64_t count, const PixelPackedWeights& w, int64_t cb0, int64_t cb1,
               int64_t ldg);

}  // namespace nee::cpu
