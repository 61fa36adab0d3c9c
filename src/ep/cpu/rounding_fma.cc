// The one-fma requantization's proof (rounding_fma.h).
#include "ep/cpu/rounding_fma.h"

namespace nee::cpu {

// The argument, for m = mult (a float: mult_f), z = yzp (an integer, |z| <= 255), |s| <= S = sum_bound, E = s * m + z
// exactly, C = kRoundingBias:
// - Where |s| <= 2^24, float(s) = s, so the fma rounds E + C once. Where |E| < 2^22, E + C lies in (2^23, 2^24),
//   where floats are the integers: the fma gives C + round_half_even(E) (C is even, so the tie goes the same
//   way), whose bits less C's are round_half_even(E).
// - The reference forms D = double(s) * m + z in two roundings and rounds D half to even. With |s| <= 2^24 the
//   product (24 + 24 bits) is exact; E is a multiple of m's last bit (2^-43 or more for m >= 2^-20), so where
//   |E| < 2^10 it fits a double's 53 bits and D = E: the same integer. Where |E| >= 2^10 - 256 both saturate
//   to the same end, since D is within 2^-40 |E| of E and the fma's value within 1 of it.
// - Where |s| > 2^24 (only when S is), float(s) is within |s| 2^-24 of s: with m >= 2^-14, |s m| > 2^10 and the
//   value stays past the output range by hundreds on the same side, saturating as the reference's does.
// - The fma's value (E within 1 + |E| 2^-24) stays above -C while S m < 2^22: a positive float, so its bits
//   grow with it; past 2^24 or below 2^23 they leave C's binade but stay beyond C's bits -+ 2^22 on the
//   right side, which the saturating narrow clamps to hi or lo as the reference clamps D.
bool RoundingFmaExact(double mult, float mult_f, double yzp, double sum_bound) {
  if (!(mult >= std::ldexp(1.0, -20) && mult < 0.5) || static_cast<double>(mult_f) != mult) return false;
  if (yzp != std::nearbyint(yzp) || std::fabs(yzp) > 255) return false;
  if (!(sum_bound >= 0 && sum_bound <= 2147483648.0)) return false;
  if (sum_bound > 16777216.0 && mult < std::ldexp(1.0, -14)) return false;
  return sum_bound * mult < 4194304.0;
}

}  // namespace nee::cpu
