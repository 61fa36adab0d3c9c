// Element type conversion between any two ONNX element types, with the rules
// of the ONNX Cast operator. Used by Cast/CastLike and anything else that
// needs a typed copy.
//
// Rules (numpy on x86-64 and ml_dtypes are the reference where ONNX leaves
// the result open):
// - float <- float: round to nearest even, once, from the exact source value
//   (no double rounding through float32); Inf if out of range; float8 follow
//   the saturate table of Cast; float8e8m0 uses `e8m0_rounding`.
// - float <- integer: correctly rounded from the exact integer.
// - integer <- integer: the low bits, reinterpreted (two's complement), as
//   ONNX specifies ("200 (int16) -> -56 (int8)").
// - integer <- float: truncation toward zero. Out of range and NaN are
//   undefined in ONNX; nee gives what numpy's astype gives on x86-64 for
//   float32/float64 inputs (the x86 conversion instructions): int32/int64
//   become the most negative value, narrower types take the low bits of the
//   int32 result, uint32/uint64 wrap like numpy. The same rule applies to
//   every float source type (numpy/ml_dtypes differ per source type there).
// - bool <- anything: zero (and -0.0, and "") is false, everything else true;
//   bool -> number gives 0/1.
// - string <- number: as numpy's astype(str): shortest round-trip digits,
//   positional or scientific as numpy chooses per type ("0.1", "1e-05",
//   "1.5e+20", "nan", "-inf", "True"). bfloat16, float8 and float4 values,
//   which numpy cannot print, are printed like the float32 they widen to.
// - number <- string: plain and scientific notation, surrounding blanks,
//   a leading '+', and case-insensitive "NaN", "INF", "+INF", "-INF",
//   "Infinity". Integer targets parse integer literals exactly; anything else
//   is parsed as a floating-point number and truncated. bool accepts also
//   "true"/"false". A string that is not a number is an error.
#pragma once
#include <cstdint>
#include <string>

#include "base/status.h"
#include "ir/float_formats.h"
#include "ir/tensor.h"

namespace nee {

struct ConvertOptions {
  // Float8 targets: clamp out-of-range values (and Inf) to the largest finite
  // value instead of producing Inf/NaN. ONNX Cast's `saturate` attribute.
  bool saturate = true;
  // float8e8m0 targets: ONNX Cast's `round_mode` ("up" by default).
  E8M0Rounding e8m0_rounding = E8M0Rounding::kUp;
};

// Converts every element of `src` into `dst`, which must already be
// allocated with the target type and the same number of elements.
Status ConvertTensor(const Tensor& src, Tensor& dst, bool saturate = true);
Status ConvertTensor(const Tensor& src, Tensor& dst, const ConvertOptions& options);

// The same for elements [begin, end) only (for parallel kernels). When the
// target packs several elements per byte (int4, uint4, float4e2m1, int2,
// uint2), `begin` must be a multiple of 4 and `end` a multiple of 4 or the
// element count, so that two ranges never write to the same byte.
Status ConvertElements(const Tensor& src, Tensor& dst, int64_t begin, int64_t end,
                       const ConvertOptions& options);

// Whether ConvertTensor supports converting `from` to `to`.
bool CanConvert(DataType from, DataType to);

// ---- Element-level building blocks (exposed for reuse and tests) ----------

// Element i of any numeric or bool tensor (packed types included) as a
// double: exact for every floating-point type, bool and integers up to 2^53
// in magnitude; wider integers are rounded to nearest. NaN for strings and
// unsupported types.
double ElementAsDouble(const Tensor& t, int64_t i);
// Stores `v` into element i of any numeric or bool tensor with the rules
// above (as Cast from float64 would). Writing a packed element rewrites its
// byte: not safe concurrently with a neighbour in the same byte.
void StoreDoubleElement(Tensor& t, int64_t i, double v, const ConvertOptions& options = {});

// ONNX "round_mode" attribute value -> rounding; false for an unknown name.
bool ParseE8M0Rounding(const std::string& name, E8M0Rounding* mode);
// A number formatted as numpy's astype(str) formats a value of `type`
// (a floating-point type); `value` must be exactly representable in it.
std::string FormatFloatLikeNumpy(double value, DataType type);

}  // namespace nee
