// CUDA availability without CUDA headers: the driver API is opened with dlopen, so that a
// CPU-only build on a machine with or without a GPU can say exactly why CUDA is refused.
#include <dlfcn.h>
#include <fmt/core.h>

#include <string>

#include "kiln/runtime.h"

namespace kiln {
namespace {

// CUresult values we explain; the driver's own text (cuGetErrorString) covers the rest.
const char* describe_cuda_error(int code) {
  switch (code) {
    case 3: return "not initialized";
    case 35: return "installed driver too old or insufficient for this CUDA runtime";
    case 100: return "no CUDA-capable device detected";
    case 804: return "forward compatibility is not supported on this device";
    case 999: return "unknown error";
    default: return nullptr;
  }
}

// The driver API's C ABI: CUresult and CUdevice are ints.
using CuInit = int (*)(unsigned flags);
using CuDriverGetVersion = int (*)(int* version);
using CuDeviceGetCount = int (*)(int* count);
using CuDeviceGet = int (*)(int* device, int ordinal);
using CuDeviceGetName = int (*)(char* name, int length, int device);
using CuDeviceGetAttribute = int (*)(int* value, int attribute, int device);
using CuDeviceTotalMem = int (*)(size_t* bytes, int device);
using CuGetErrorString = int (*)(int error, const char** text);

constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;
constexpr int kMinDriverVersion = 12000;  // CUDA 12.0

std::string cuda_error_text(int code, CuGetErrorString get_error_string) {
  if (const char* known = describe_cuda_error(code)) return known;
  const char* text = nullptr;
  if (get_error_string != nullptr && get_error_string(code, &text) == 0 && text != nullptr) return text;
  return "unrecognised error";
}

std::string version_text(int version) { return fmt::format("{}.{}", version / 1000, version % 1000 / 10); }

// "NVIDIA H200 (sm_90, 139.8 GiB)"; a property the driver cannot report is left out.
std::string describe_device(void* lib, int ordinal) {
  const auto device_get = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
  const auto get_name = reinterpret_cast<CuDeviceGetName>(dlsym(lib, "cuDeviceGetName"));
  const auto get_attribute = reinterpret_cast<CuDeviceGetAttribute>(dlsym(lib, "cuDeviceGetAttribute"));
  const auto total_mem = reinterpret_cast<CuDeviceTotalMem>(dlsym(lib, "cuDeviceTotalMem_v2"));
  int device = ordinal;
  if (device_get != nullptr && device_get(&device, ordinal) != 0)
    return fmt::format("device {} (unreadable)", ordinal);
  char name[256] = {};
  std::string text = get_name(name, sizeof(name), device) == 0 ? name : fmt::format("device {}", ordinal);
  std::string details;
  int major = 0, minor = 0;
  if (get_attribute != nullptr && get_attribute(&major, kComputeCapabilityMajor, device) == 0 &&
      get_attribute(&minor, kComputeCapabilityMinor, device) == 0) {
    details = fmt::format("sm_{}{}", major, minor);
  }
  size_t bytes = 0;
  if (total_mem != nullptr && total_mem(&bytes, device) == 0) {
    details +=
        fmt::format("{}{:.1f} GiB", details.empty() ? "" : ", ", static_cast<double>(bytes) / (1 << 30));
  }
  return details.empty() ? text : text + " (" + details + ")";
}

CudaAvailability probe_cuda() {
  CudaAvailability result;
#ifdef KILN_CUDA
  result.built_with_cuda = true;
#endif
  // Never closed: the driver starts threads in cuInit and is not safe to unload after it.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* error = dlerror();
    result.reason =
        fmt::format("no NVIDIA driver (libcuda.so.1 not found: {})", error ? error : "unknown dlopen error");
    return result;
  }
  const auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  const auto driver_get_version = reinterpret_cast<CuDriverGetVersion>(dlsym(lib, "cuDriverGetVersion"));
  const auto device_get_count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  const auto device_get_name = reinterpret_cast<CuDeviceGetName>(dlsym(lib, "cuDeviceGetName"));
  const auto get_error_string = reinterpret_cast<CuGetErrorString>(dlsym(lib, "cuGetErrorString"));
  if (!init || !driver_get_version || !device_get_count || !device_get_name) {
    result.reason =
        "libcuda.so.1 lacks the driver API (cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGetName)";
    return result;
  }
  if (const int error = init(0); error != 0) {
    result.reason = fmt::format("driver present but cuInit failed with CUDA error {} ({})", error,
                                cuda_error_text(error, get_error_string));
    return result;
  }
  if (driver_get_version(&result.driver_version) != 0) result.driver_version = 0;
  if (const int error = device_get_count(&result.device_count); error != 0) {
    result.device_count = 0;
    result.reason = fmt::format("cuDeviceGetCount failed with CUDA error {} ({})", error,
                                cuda_error_text(error, get_error_string));
    return result;
  }
  for (int i = 0; i < result.device_count; ++i) result.devices.push_back(describe_device(lib, i));
  if (result.device_count == 0) {
    result.reason = "no CUDA device";
  } else if (result.driver_version < kMinDriverVersion) {
    result.reason = fmt::format("driver too old (found {}, need >= {})", version_text(result.driver_version),
                                version_text(kMinDriverVersion));
  } else if (!result.built_with_cuda) {
    result.reason = "kiln was built without CUDA (configure with -DKILN_CUDA=ON)";
  } else {
    result.usable = true;
    result.reason =
        fmt::format("CUDA driver {}, {} device(s)", version_text(result.driver_version), result.device_count);
  }
  return result;
}

}  // namespace

CudaAvailability cuda_availability() {
  // The driver's answer does not change within a process, and cuInit is not free.
  static const CudaAvailability availability = probe_cuda();
  return availability;
}

}  // namespace kiln
