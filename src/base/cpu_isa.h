// The vector instruction set this process's kernels may use: what the CPU
// has, capped by NEE_MAX_ISA (avx2 | portable; as oneDNN's
// ONEDNN_MAX_CPU_ISA). The CPU provider's kernels choose by it at run time
// (ep/cpu/sgemm.h's SgemmActiveIsa, which tests may lower further), and the
// layout pass by it when a layout pays only with a kernel one level has.
#pragma once

namespace nee {

enum class CpuIsaLevel { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

// AVX-512 means F, DQ, VL and BW with FMA; AVX2 means AVX2 with FMA.
CpuIsaLevel HostIsaLevel();

// AVX512-BF16 (vdpbf16ps; CPUID leaf 7, sub-leaf 1, EAX bit 5) at the
// AVX-512 level: the CPU provider's bfloat16 MatMul/Gemm (ep/cpu/bf16_gemm.h),
// which the optimizer's widen-narrow-float pass then leaves bfloat16.
bool HostHasAvx512Bf16();

// F16C (vcvtph2ps / vcvtps2ph; CPUID leaf 1, ECX bit 29) at the AVX2 level or
// above: the float16 casts and the float16-weight GEMM widen with it. Its
// instructions use the AVX state, which the AVX2 check has found the OS to save.
bool HostHasF16c();

}  // namespace nee
