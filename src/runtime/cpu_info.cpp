// Machine facts: CPU model and ISA features, memory, last-level cache, the Highway target
// in use, and which libraries provide BLAS and LAPACK.
#include <cblas.h>
#include <dlfcn.h>
#include <hwy/targets.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kiln/runtime.h"
#include "kiln/thread_pool.h"

namespace kiln {
namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return trim(line);
}

#if defined(__x86_64__) || defined(__i386__)

struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidRegs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return {};
  return r;
}

std::string x86_brand_string() {
  if (cpuid(0x80000000).eax < 0x80000004) return "unknown x86 CPU";
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const CpuidRegs r = cpuid(0x80000002 + i);
    const unsigned words[4] = {r.eax, r.ebx, r.ecx, r.edx};
    std::memcpy(brand + 16 * i, words, 16);
  }
  return trim(brand);
}

// Only features whose register state the OS saves (XCR0) are usable; a CPU can advertise
// AVX-512 under a kernel or hypervisor that disabled it.
std::vector<std::string> x86_features() {
  const CpuidRegs leaf1 = cpuid(1);
  const bool has_osxsave = (leaf1.ecx >> 27) & 1;
  uint64_t xcr0 = 0;
  if (has_osxsave) {
    unsigned lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t{hi} << 32) | lo;
  }
  const bool os_avx = (xcr0 & 0x6) == 0x6;                 // XMM and YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM0-15 high, ZMM16-31
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;         // XTILECFG and XTILEDATA

  const unsigned max_leaf = cpuid(0).eax;
  const CpuidRegs leaf7 = max_leaf >= 7 ? cpuid(7, 0) : CpuidRegs{};
  const CpuidRegs leaf7_1 = max_leaf >= 7 && leaf7.eax >= 1 ? cpuid(7, 1) : CpuidRegs{};
  const auto bit = [](unsigned reg, int b) { return ((reg >> b) & 1) != 0; };

  struct Feature {
    const char* name;
    bool present;
  };
  const Feature table[] = {
      {"sse4_2", bit(leaf1.ecx, 20)},
      {"avx", os_avx && bit(leaf1.ecx, 28)},
      {"avx2", os_avx && bit(leaf7.ebx, 5)},
      {"fma", os_avx && bit(leaf1.ecx, 12)},
      {"f16c", os_avx && bit(leaf1.ecx, 29)},
      {"bmi2", bit(leaf7.ebx, 8)},
      {"avx_vnni", os_avx && bit(leaf7_1.eax, 4)},
      {"avx512f", os_avx512 && bit(leaf7.ebx, 16)},
      {"avx512dq", os_avx512 && bit(leaf7.ebx, 17)},
      {"avx512cd", os_avx512 && bit(leaf7.ebx, 28)},
      {"avx512bw", os_avx512 && bit(leaf7.ebx, 30)},
      {"avx512vl", os_avx512 && bit(leaf7.ebx, 31)},
      {"avx512_vbmi", os_avx512 && bit(leaf7.ecx, 1)},
      {"avx512_vnni", os_avx512 && bit(leaf7.ecx, 11)},
      {"avx512_bf16", os_avx512 && bit(leaf7_1.eax, 5)},
      {"avx512_fp16", os_avx512 && bit(leaf7.edx, 23)},
      {"amx_tile", os_amx && bit(leaf7.edx, 24)},
      {"amx_bf16", os_amx && bit(leaf7.edx, 22)},
      {"amx_int8", os_amx && bit(leaf7.edx, 25)},
  };
  std::vector<std::string> features;
  for (const Feature& f : table) {
    if (f.present) features.emplace_back(f.name);
  }
  return features;
}

#else  // Arm and others: the kernel's names in /proc/cpuinfo, mapped to the usual ones.

// The value of the first "key : value" line of /proc/cpuinfo with this key.
std::string proc_cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

std::vector<std::string> proc_cpuinfo_features() {
  std::istringstream words(proc_cpuinfo_field("Features"));
  struct Alias {
    const char* kernel_name;
    const char* name;
  };
  static constexpr Alias kAliases[] = {{"asimd", "neon"}, {"asimdhp", "fp16"},     {"asimddp", "dotprod"},
                                       {"i8mm", "i8mm"},  {"bf16", "bf16"},        {"sve", "sve"},
                                       {"sve2", "sve2"},  {"svebf16", "sve_bf16"}, {"sme", "sme"}};
  std::vector<std::string> features;
  for (std::string word; words >> word;) {
    for (const Alias& a : kAliases) {
      if (word == a.kernel_name) features.emplace_back(a.name);
    }
  }
  return features;
}

std::string proc_cpuinfo_model() {
  for (const char* key : {"model name", "Model", "Hardware"}) {
    std::string value = proc_cpuinfo_field(key);
    if (!value.empty()) return value;
  }
  const std::string implementer = proc_cpuinfo_field("CPU implementer");
  const std::string part = proc_cpuinfo_field("CPU part");
  if (implementer.empty()) return "unknown CPU";
  return "implementer " + implementer + " part " + part;
}

#endif

// "MemTotal:  24567890 kB" -> bytes.
int64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1) * 1024;
  }
  return 0;
}

// "32768K" -> bytes.
int64_t parse_cache_size(const std::string& text) {
  int64_t value = std::atoll(text.c_str());
  if (text.find('K') != std::string::npos) value *= 1024;
  if (text.find('M') != std::string::npos) value *= 1024 * 1024;
  return value;
}

// The highest-level data or unified cache of CPU 0 in sysfs; glibc's cpuid-derived value
// when sysfs has no cache directory (as in some VMs).
int64_t last_level_cache_bytes() {
  int best_level = 0;
  int64_t best_size = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = read_first_line(dir + "level");
    if (level.empty()) break;
    if (read_first_line(dir + "type") == "Instruction") continue;
    if (std::atoi(level.c_str()) > best_level) {
      best_level = std::atoi(level.c_str());
      best_size = parse_cache_size(read_first_line(dir + "size"));
    }
  }
  if (best_size > 0) return best_size;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long size = sysconf(name);
    if (size > 0) return size;
  }
#endif
  return 0;
}

// The file a symbol was loaded from, with symlinks (Debian's BLAS alternatives) resolved.
std::string shared_object_of(const void* symbol) {
  Dl_info info{};
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) != nullptr) return resolved;
  return info.dli_fname;
}

}  // namespace

CpuInfo cpu_info() {
  CpuInfo info;
  utsname names{};
  info.arch = uname(&names) == 0 ? names.machine : "unknown";
#if defined(__x86_64__) || defined(__i386__)
  info.model = x86_brand_string();
  info.features = x86_features();
#else
  info.model = proc_cpuinfo_model();
  info.features = proc_cpuinfo_features();
#endif
  info.physical_cores = physical_core_count();
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  info.logical_cpus = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                          ? CPU_COUNT(&allowed)
                          : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.total_memory_bytes = meminfo_bytes("MemTotal");
  info.available_memory_bytes = meminfo_bytes("MemAvailable");
  info.llc_bytes = last_level_cache_bytes();
  return info;
}

// HWY_TARGETS here matches the kernels': kiln_core compiles every file with the same
// HWY_DISABLED_TARGETS. Dynamic dispatch picks the best (lowest) bit that the CPU supports.
std::string simd_target_name() {
  const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  if (usable == 0) return hwy::TargetName(HWY_STATIC_TARGET);
  return hwy::TargetName(usable & -usable);
}

std::vector<std::string> compiled_simd_targets() {
  std::vector<std::string> names;
  for (int64_t targets = HWY_TARGETS; targets != 0; targets &= targets - 1) {
    names.emplace_back(hwy::TargetName(targets & -targets));
  }
  return names;
}

BlasInfo blas_info() {
  BlasInfo info;
  // Taking cblas_sgemm's address also keeps the BLAS library linked in.
  info.blas_library = shared_object_of(reinterpret_cast<const void*>(&cblas_sgemm));
  // Looked up, not called directly, so that a non-OpenBLAS provider still links and runs.
  using StringFn = char* (*)();
  using IntFn = int (*)();
  if (auto config = reinterpret_cast<StringFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    info.openblas_config = trim(config());
  }
  if (auto core = reinterpret_cast<StringFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) {
    info.openblas_core = trim(core());
  }
  if (auto threads = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"))) {
    info.blas_threads = threads();
  }
  info.lapack_library = shared_object_of(dlsym(RTLD_DEFAULT, "dgetrf_"));
  return info;
}

std::string blas_library_info() {
  const BlasInfo info = blas_info();
  std::string text = info.blas_library.empty() ? "unknown BLAS" : info.blas_library;
  if (!info.openblas_config.empty()) {
    text += " (" + info.openblas_config + ", core " + info.openblas_core + ", " +
            std::to_string(info.blas_threads) + " threads)";
  }
  text += "; LAPACK: " + (info.lapack_library.empty() ? std::string("not loaded") : info.lapack_library);
  return text;
}

}  // namespace kiln
