// Installs the CPU kernels of the interpolate family.
#include "backend/cpu/interpolate/resample_kernels.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::InterpolateKernels k;
  k.forward = resample_forward;
  k.backward = resample_backward;
  backend::interpolate_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
