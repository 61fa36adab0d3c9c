// Bytes mapped through a 256-entry table: the loop shared by the 8-bit table ops (ai.nee TableLookup here;
// QLinearSigmoid, QLinearLeakyRelu and QLinearConcat's requantized parts in qlinear_pointwise_fast.cc).
#pragma once
#include <cstdint>

#include "ir/tensor.h"
#include "ops/op_schema.h"

namespace nee::cpu {

// A 256-entry table and the sixteen 16-byte rows the AVX2 lookup shuffles (byte_lookup.cc), built once per table:
// a table applied to many short runs (a last-axis concat's rows) must not rebuild them for each.
struct ByteTable {
  explicit ByteTable(const uint8_t* table);  // 256 entries
  uint8_t entries[256];
  alignas(16) uint8_t delta_rows[16][16];
};

// dst[i] = table[src[i] ^ flip] for n bytes (flip 0x80: an int8 v sits at table[v + 128]). AVX2: 32 bytes a
// step in sixteen byte shuffles; otherwise one byte at a time.
void LookupBytes(const ByteTable& table, const uint8_t* src, uint8_t* dst, int64_t n, uint8_t flip);

// y = table[x] over the whole tensor x (uint8 or int8), shared out over ctx's threads; y holds x's count of bytes.
void MapThroughTable(const KernelContext& ctx, const Tensor& x, const ByteTable& table, Tensor& y);

}  // namespace nee::cpu
