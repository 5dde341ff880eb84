// AVX512-BF16 detection for the kernels that choose a bf16 dot path at run time.
#include "kiln/cpu_features.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kiln {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool detect_bf16_dot() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || ((ecx >> 27) & 1) == 0) return false;  // no OSXSAVE
  unsigned lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (uint64_t{hi} << 32) | lo;
  // XMM, YMM, opmask, ZMM0-15 high halves and ZMM16-31: a hypervisor may hide them.
  if ((xcr0 & 0xe6) != 0xe6) return false;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const bool f = (ebx >> 16) & 1, bw = (ebx >> 30) & 1, vl = (ebx >> 31) & 1;
  if (!(f && bw && vl) || eax < 1) return false;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return ((eax >> 5) & 1) != 0;
}
#else
bool detect_bf16_dot() { return false; }
#endif

bool env_allows() {
  const char* v = std::getenv("KILN_BF16_DOT");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

std::atomic<int> g_override{-1};

}  // namespace

bool cpu_has_bf16_dot() {
  static const bool has = detect_bf16_dot();
  return has;
}

bool bf16_dot_enabled() {
  if (!cpu_has_bf16_dot()) return false;
  const int mode = g_override.load(std::memory_order_relaxed);
  if (mode >= 0) return mode == 1;
  static const bool env = env_allows();
  return env;
}

void set_bf16_dot_enabled(int mode) { g_override.store(mode < 0 ? -1 : (mode != 0 ? 1 : 0), std::memory_order_relaxed); }

}  // namespace kiln
