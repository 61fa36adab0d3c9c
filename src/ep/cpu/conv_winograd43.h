// 3x3 stride-1 convolutions by Winograd F(4x4, 3x3) on AVX2: each 4x4 block
// of outputs costs 36 multiplies per channel pair instead of F(2x2, 3x3)'s
// 64 (16 per 2x2), so the GEMMs do 1.78x fewer flops. Rounding error grows
// with the tile: see conv_winograd43.cc for the interpolation points chosen
// to keep it within a few times F(2x2, 3x3)'s. conv_winograd.cc picks it.
// Memory: the transformed weights are 4x the weights (F(2x2, 3x3)'s 1.78x).
#pragma once

#include "ep/cpu/conv_winograd.h"

namespace nee::cpu {

// Whether F(4x4, 3x3) runs this geometry (one WinogradApplies accepted) faster
// than F(2x2, 3x3) on this CPU: AVX2 and FMA only (AVX-512 keeps F(2x2, 3x3)),
// and images whose 4x4 tiles do not leave the GEMMs mostly padding.
bool Winograd43Preferred(const Winograd3x3& g);

// For tests: kAuto (the rule above), kNever (F(2x2, 3x3) throughout), or
// kAlways (every Winograd conv, but still on AVX2 and FMA only).
enum class Winograd43Mode { kAuto, kNever, kAlways };
void SetWinograd43Mode(Winograd43Mode mode);

// As ConvWinograd; call only where Winograd43Preferred says so. Outputs
// differ from the direct sum by rounding (measured by the tests), and do not
// depend on the thread count. Returns false, y then partly written, where
// an input is NaN or infinite: F(4x4, 3x3)'s transforms would spread it to
// outputs whose windows do not hold it (F(2x2, 3x3)'s do not), so the
// caller computes the conv another way.
Result<bool> ConvWinograd43(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w, const float* bias,
                            const ConvEpilogue* epilogue, const float* z, float* y);

// The same on nee's channel-blocked layout (see ConvWinogradBlocked).
Result<bool> ConvWinograd43Blocked(KernelContext& ctx, const Winograd3x3& g, const float* x, const float* w,
                                   const float* bias, const FusedActivation& act, const float* z, float* y);

}  // namespace nee::cpu
