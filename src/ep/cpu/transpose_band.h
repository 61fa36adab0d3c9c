// The 2-D transpose of 32-bit elements that Transpose (transpose_fast.cc) and
// the detector-head decode (column_map_fast.cc) run band by band.
#pragma once

#include <cstdint>

namespace nee::cpu {

// Output rows [j0, j1) of y = x^T for x [m, n] (y [n, m]); 8x8 AVX2 tiles when
// `avx2`, with the band's input rows prefetched two tiles ahead.
void TransposeBand(const uint32_t* x, uint32_t* y, int64_t m, int64_t n, int64_t j0, int64_t j1, bool avx2);

}  // namespace nee::cpu
