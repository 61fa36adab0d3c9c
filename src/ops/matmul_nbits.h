// com.microsoft MatMulNBits (contrib opset 1), as ONNX Runtime defines it: a
// MatMul by a constant [K, N] weight matrix stored block-quantized along K.
//
//   attrs   K, N (required), bits (default 4), block_size (required; a power
//           of two >= 16), accuracy_level (how ONNX Runtime may compute A;
//           nee always computes in float32), weight_prepacked (0 only)
//   inputs  0 A [..., K] float32
//           1 B uint8 [N, blocks, block_size / 2]: column n of the weights,
//             block by block, two 4-bit values a byte, the lower k in the low
//             nibble; blocks = ceil(K / block_size), the last block padded
//           2 scales float32, N * blocks values ([N, blocks] or flat)
//           3 zero_points (optional): uint8 4-bit packed, ceil(blocks / 2)
//             bytes per column (the low nibble the even block; [N, that] or
//             flat), or float32 N * blocks values; absent: 8
//           4 g_idx (deprecated): refused as not implemented
//           5 bias (optional) float32 [N]
//   output  [..., N] = A W (+ bias), W[k, n] = (q[n, k] - zero_point) * scale
//           of k's block in column n
//
// The reference kernel (ops/matmul_nbits.cc) and the fast one
// (ep/cpu/matmul_nbits_fast.cc) share the validation below, so a hostile
// model (blobs of the wrong size, K not A's last dim) is refused by name
// before anything is read.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/op_schema.h"

namespace nee {

// The validated attributes.
struct MatMulNBitsAttrs {
  int64_t k = 0, n = 0, block_size = 0;
  int64_t blocks = 0;       // ceil(K / block_size)
  int64_t blob = 0;         // bytes per block: block_size / 2
  int64_t zp_row = 0;       // bytes of packed zero points per column: ceil(blocks / 2)
};

// Errors (naming the node) for a missing K/N/block_size, a block size that is
// not a power of two >= 16, bits other than 4 (not implemented), prepacked
// weights, K or N out of range.
Result<MatMulNBitsAttrs> MatMulNBitsAttrsOf(const Node& node);

struct MatMulNBitsGeometry {
  MatMulNBitsAttrs attrs;
  int64_t rows = 0;  // A viewed as [rows, K]
  std::vector<int64_t> out_dims;
  const float* a = nullptr;
  const uint8_t* b = nullptr;       // [N, blocks, blob]
  const float* scales = nullptr;    // [N, blocks]
  const uint8_t* zp_packed = nullptr;  // [N, zp_row], or null
  const float* zp_float = nullptr;     // [N, blocks], or null
  const float* bias = nullptr;         // [N], or null
};

// Validates every input against the attributes; a Status naming the node and
// the input otherwise.
Result<MatMulNBitsGeometry> MatMulNBitsGeometryOf(const KernelContext& ctx);

// The zero point of block `block` of column `n` (8 without zero points).
inline float MatMulNBitsZeroPoint(const MatMulNBitsGeometry& g, int64_t n, int64_t block) {
  if (g.zp_packed) {
    const uint8_t byte = g.zp_packed[n * g.attrs.zp_row + block / 2];
    return static_cast<float>((block & 1) ? byte >> 4 : byte & 0x0F);
  }
  if (g.zp_float) return g.zp_float[n * g.attrs.blocks + block];
  return 8.0f;
}

}  // namespace nee
