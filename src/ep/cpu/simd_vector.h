// GCC vector types for the CPU provider's exact element-wise kernels. Their
// generic operators compile to whatever the calling function's target allows
// (AVX-512, AVX2, or baseline SSE2), so one templated loop serves every
// instruction set and rounds exactly as the scalar reference does. V is the
// vector; U the unaligned alias used for loads and stores (the pointers are
// only float-aligned). Each lives in a struct because attributes on a typedef
// are dropped when it is passed as a template argument.
#pragma once

namespace nee::cpu {

struct Width16 {
  typedef float V __attribute__((vector_size(64)));
  typedef float U __attribute__((vector_size(64), aligned(4), may_alias));
};
struct Width8 {
  typedef float V __attribute__((vector_size(32)));
  typedef float U __attribute__((vector_size(32), aligned(4), may_alias));
};
struct Width4 {
  typedef float V __attribute__((vector_size(16)));
  typedef float U __attribute__((vector_size(16), aligned(4), may_alias));
};

}  // namespace nee::cpu
