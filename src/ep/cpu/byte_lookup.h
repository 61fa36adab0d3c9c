// Bytes mapped through a 256-entry table: the loop shared by the 8-bit table ops (ai.nee TableLookup here;
// QLinearSigmoid, QLinearLeakyRelu and QLinearConcat's requantized parts in qlinear_pointwise_fast.cc).
#pragma once
#include <cstdint>

#include "ir/tensor.h"
#include "ops/op_schema.h"

namespace nee::cpu {

// dst[i] = table[src[i] ^ flip] for n bytes (flip 0x80: an int8 v sits at table[v + 128]). AVX2: 32 bytes a
// step in sixteen byte shuffles; otherwise one byte at a time.
void LookupBytes(const uint8_t (&table)[256], const uint8_t* src, uint8_t* dst, int64_t n, uint8_t flip);

// y = table[x] over the whole tensor x (uint8 or int8), shared out over ctx's threads; y holds x's count of bytes.
void MapThroughTable(const KernelContext& ctx, const Tensor& x, const uint8_t (&table)[256], Tensor& y);

}  // namespace nee::cpu
