// NEE_NO_FP_CONTRACT marks a function whose float multiplies and adds must
// round separately, as the reference's (or another path's) separate
// operations do: GCC may otherwise fuse them into FMAs where the target has
// FMA. Clang fuses only within one source expression and has no
// per-function switch, so there it marks nothing.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#define NEE_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define NEE_NO_FP_CONTRACT
#endif
