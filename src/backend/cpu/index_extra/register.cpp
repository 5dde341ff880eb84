// Installs the CPU kernels of the index_extra family.
#include "backend/cpu/index_extra/index_extra_kernels.h"

namespace kiln::cpu {
namespace {

const bool registered = [] {
  backend::IndexExtraKernels k;
  k.take = &take_cpu;
  k.put = &put_cpu;
  k.value_range = &value_range_cpu;
  k.bincount = &bincount_cpu;
  k.bincount_one_pass = &bincount_one_pass_cpu;
  backend::index_extra_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu
