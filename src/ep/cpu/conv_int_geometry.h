// The geometry of an 8-bit integer convolution (ConvInteger, QLinearConv), 1-D
// or 2-D, read once from the node and its input and weight shapes, for the
// fast kernels of quant_fast.cc and qconv_fast.cc.
#pragma once
#include <cstdint>

#include "ir/tensor.h"
#include "ops/op_schema.h"

namespace nee::cpu {

// A 1-D or 2-D convolution as 2-D (a 1-D one has a height of 1).
struct ConvInt2D {
  int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
  int64_t ih = 1, iw = 1, oh = 1, ow = 1, kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t K() const { return Cg * kh * kw; }
  int64_t P() const { return oh * ow; }
  bool pointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && oh == ih && ow == iw;
  }
};

// Fills `g` from the node's attributes and 8-bit x and w of rank 3 or 4;
// false (the caller runs the reference kernel, which names the problem) for
// anything else or any geometry the reference would refuse. Empty outputs
// (N, M or P zero) and empty sums (Cg zero) are the caller's to handle.
bool PlanConvInt(const KernelContext& ctx, const Tensor& x, const Tensor& w, ConvInt2D& g);

}  // namespace nee::cpu
