// Installs the CPU kernels of the pointwise_extra family.
#include "backend/cpu/pointwise_extra/pointwise_extra_kernels.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::pointwise_extra_kernels.install(DeviceType::CPU, {&frexp_cpu, &laguerre_polynomial_l_cpu});
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
