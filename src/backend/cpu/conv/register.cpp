// Installs the CPU conv kernels (backend/conv.h).
#include "backend/conv.h"
#include "backend/cpu/conv/conv_kernels.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::ConvKernels k;
  k.forward = &conv_forward_cpu;
  k.input_grad = &conv_input_grad_cpu;
  k.weight_grad = &conv_weight_grad_cpu;
  backend::conv_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
