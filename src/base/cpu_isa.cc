#include "base/cpu_isa.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace nee {

namespace {

CpuIsaLevel Detected() {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma"))
    return CpuIsaLevel::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsaLevel::kAvx2;
#endif
  return CpuIsaLevel::kPortable;
}

// Unset, empty or unknown: no cap.
CpuIsaLevel CapFromEnvironment() {
  const char* cap = std::getenv("NEE_MAX_ISA");
  if (!cap) return CpuIsaLevel::kAvx512;
  const std::string value(cap);
  if (value == "portable") return CpuIsaLevel::kPortable;
  if (value == "avx2") return CpuIsaLevel::kAvx2;
  return CpuIsaLevel::kAvx512;
}

}  // namespace

CpuIsaLevel HostIsaLevel() {
  static const CpuIsaLevel level = std::min(Detected(), CapFromEnvironment());
  return level;
}

bool HostHasAvx512Bf16() {
  static const bool has = [] {
#if defined(__x86_64__) || defined(__i386__)
    // Not every compiler knows "avx512bf16" for __builtin_cpu_supports: the CPUID bit itself.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return HostIsaLevel() == CpuIsaLevel::kAvx512 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) &&
           (eax & (1u << 5)) != 0;
#else
    return false;
#endif
  }();
  return has;
}

bool HostHasF16c() {
  static const bool has = [] {
#if defined(__x86_64__) || defined(__i386__)
    // Clang's __builtin_cpu_supports does not know "f16c": the CPUID bit itself.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return HostIsaLevel() >= CpuIsaLevel::kAvx2 && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
    return false;
#endif
  }();
  return has;
}

}  // namespace nee
