// Installs the CPU kernels of the linalg family.
#include "backend/cpu/linalg/linalg_kernels.h"

namespace kiln::cpu::linalg {
namespace {

const bool registered = [] {
  backend::LinalgKernels k;
  k.triangular_solve = &triangular_solve_cpu;
  k.lu_factor = &lu_factor_cpu;
  k.lu_solve = &lu_solve_cpu;
  k.lu_determinant = &lu_determinant_cpu;
  k.lu_unpack = &lu_unpack_cpu;
  k.inverse = &inverse_cpu;
  k.small_matrix = &small_matrix_cpu;
  k.cholesky = &cholesky_cpu;
  k.qr = &qr_cpu;
  k.svd = &svd_cpu;
  k.eigh = &eigh_cpu;
  k.lstsq = &lstsq_cpu;
  k.pinv = &pinv_cpu;
  backend::linalg_kernels.install(DeviceType::CPU, k);
  return true;
}();

}  // namespace
}  // namespace kiln::cpu::linalg
