#include "ops/op_utils.h"

namespace kiln {

Device common_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  Device chosen = kCPU;
  bool have = false;
  bool only_cpu_scalars = false;  // every tensor seen on `chosen` is a 0-dim CPU tensor
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    const bool cpu_scalar = t->device().type == DeviceType::CPU && t->dim() == 0;
    if (!have || (only_cpu_scalars && !cpu_scalar && t->device() != chosen)) {
      chosen = t->device();
      have = true;
      only_cpu_scalars = cpu_scalar;
      continue;
    }
    if (t->device() == chosen) {
      only_cpu_scalars = only_cpu_scalars && cpu_scalar;
      continue;
    }
    if (cpu_scalar) continue;
    fail(ErrorKind::Runtime, op,
         "Expected all tensors to be on the same device, but found at least two devices, {} and {}!", chosen.str(),
         t->device().str());
  }
  return chosen;
}

Tensor on_device(const Tensor& t, Device device) { return t.device() == device ? t : t.to(device); }

}  // namespace kiln
