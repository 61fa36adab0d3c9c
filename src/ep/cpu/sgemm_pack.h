// Packing into SGEMM's panel layout (internal to sgemm*.cc; layout in sgemm.h).
#pragma once
#include <cstdint>

#include "ep/cpu/sgemm.h"

namespace nee::cpu::sgemm_internal {

// Rows [i0, i0+mc) x columns [p0, p0+kc) of alpha*A as ceil(mc/12) panels, one after another.
void PackA(const MatrixView& a, float alpha, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* out);

// Rows [p0, p0+kc) x columns [j0, j0+nc) of B as ceil(nc/32) panels, one after another.
void PackB(const MatrixView& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* out);

}  // namespace nee::cpu::sgemm_internal
