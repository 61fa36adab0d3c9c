// Convolution of a batch of small images as one GEMM per group: the im2col
// columns of several images side by side in one B matrix (conv_batched.cc).
#pragma once
#include <cstdint>
#include <vector>

#include "ep/cpu/conv_common.h"
#include "ep/cpu/sgemm.h"

namespace nee::cpu {

// A conv as the batched path sees it: any rank, the window described only by
// which input element each output pixel reads through each tap.
struct BatchedConv {
  int64_t N, C, M, group;  // C and M over all groups
  int64_t in_size, out_size, kernel_size;
  // [tap * out_size + pixel]: the offset in an input channel plane that
  // output pixel reads through that tap, or -1 where it reads padding.
  std::vector<int64_t> tap_offsets;
  // A 1-D conv (every other axis trivial) is described by its window as
  // well, for the faster copies of the 1-D path; `line` false: use the table.
  bool line = false;
  int64_t pad = 0, pad_end = 0, stride = 1, dilation = 1;
  int64_t Cg() const { return C / group; }
  int64_t Mg() const { return M / group; }
  // The taps B has rows for, in order: all of them, or (with weights packed
  // for just those) the ones through which some output pixel reads the input,
  // the others reading only padding (silero-vad's k3 pad-1 convs over one
  // pixel: the outer two), whose products are zeros.
  std::vector<int64_t> taps = {};
  int64_t rows() const { return Cg() * static_cast<int64_t>(taps.size()); }  // GEMM depth per group
};

// Whether the batched path runs this conv: several images, each with too few
// output pixels to fill SGEMM's panels by itself.
bool ConvBatchedApplies(int64_t N, int64_t out_size);

// y = conv(x, w) + bias, then the optional FusedConv epilogue (`z`: the
// residual, shaped as y, or null). `packed_w`: each group's weights packed as
// SGEMM's A (Mg x rows, the columns of g.taps), or null to read `w` as given
// (then g.taps must be all taps). Every output element
// is the same SGEMM sum whatever the chunking, so the same bits for any
// thread count.
Status ConvBatched(KernelContext& ctx, const BatchedConv& g, const float* x, const float* w,
                   const SgemmPackedA* packed_w, const float* bias, const ConvEpilogue* epilogue, const float* z,
                   float* y);

}  // namespace nee::cpu
