// The kernel boundary: one table of kernel entry points per op family, keyed by device
// type (internal; see docs/architecture.md).
//
// A family's entries are a struct of plain function pointers, each taking the
// execution context and a plain argument struct (src/backend/<family>.h). A backend
// installs its entries at start-up (backend/cpu/*/register.cpp); an op front end
// validates, infers shape and dtype, allocates, and ends in one call through the table.
// A device that has no kernel for the op is a clear error, never a fallback.
#pragma once

#include "kiln/device.h"
#include "kiln/error.h"

namespace kiln {

template <typename Kernels>
class KernelTable {
 public:
  explicit constexpr KernelTable(const char* family) : family_(family) {}
  KernelTable(const KernelTable&) = delete;
  KernelTable& operator=(const KernelTable&) = delete;

  // Called by a backend's registration, before any op runs.
  void install(DeviceType device, const Kernels& kernels) {
    slots_[index(device)] = kernels;
    installed_[index(device)] = true;
  }

  // The entries for `device`; an error naming `op` when the device has none.
  const Kernels& on(Device device, const char* op) const {
    KILN_CHECK_KIND(installed_[index(device.type)], NotImplemented, op,
                    "no kernel for device {} (the {} kernels are not built for it)", device_type_name(device.type),
                    family_);
    return slots_[index(device.type)];
  }

  bool has(DeviceType device) const { return installed_[index(device)]; }

 private:
  static constexpr int index(DeviceType d) { return static_cast<int>(d); }

  const char* family_;
  Kernels slots_[kDeviceTypeCount]{};
  bool installed_[kDeviceTypeCount]{};
};

// One entry of a family that a backend may leave out (null): returns it, or raises the
// same error as a missing family.
template <typename Fn>
Fn require_kernel(Fn fn, Device device, const char* op) {
  KILN_CHECK_KIND(fn != nullptr, NotImplemented, op, "no kernel for device {}", device_type_name(device.type));
  return fn;
}

}  // namespace kiln
