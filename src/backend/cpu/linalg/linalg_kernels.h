// The CPU linalg kernels (installed by register.cpp; tests call them directly).
#pragma once

#include "backend/linalg.h"

namespace kiln::cpu::linalg {

using backend::CholeskyProblem;
using backend::EighProblem;
using backend::InverseProblem;
using backend::LstsqProblem;
using backend::LuDeterminantProblem;
using backend::LuFactorProblem;
using backend::LuSolveProblem;
using backend::LuUnpackProblem;
using backend::PinvProblem;
using backend::QrProblem;
using backend::SmallMatrixProblem;
using backend::SvdProblem;
using backend::TriangularSolveProblem;

void triangular_solve_cpu(const ExecutionContext& ctx, const TriangularSolveProblem& p);
void lu_factor_cpu(const ExecutionContext& ctx, const LuFactorProblem& p);
void lu_solve_cpu(const ExecutionContext& ctx, const LuSolveProblem& p);
void lu_determinant_cpu(const ExecutionContext& ctx, const LuDeterminantProblem& p);
void lu_unpack_cpu(const ExecutionContext& ctx, const LuUnpackProblem& p);
void inverse_cpu(const ExecutionContext& ctx, const InverseProblem& p);
void small_matrix_cpu(const ExecutionContext& ctx, const SmallMatrixProblem& p);
void cholesky_cpu(const ExecutionContext& ctx, const CholeskyProblem& p);
void qr_cpu(const ExecutionContext& ctx, const QrProblem& p);
void svd_cpu(const ExecutionContext& ctx, const SvdProblem& p);
void eigh_cpu(const ExecutionContext& ctx, const EighProblem& p);
void lstsq_cpu(const ExecutionContext& ctx, const LstsqProblem& p);
void pinv_cpu(const ExecutionContext& ctx, const PinvProblem& p);

// Largest order the small LU (no LAPACK call) handles in lu_factor_cpu.
inline constexpr int64_t kSmallLuOrder = 8;

}  // namespace kiln::cpu::linalg
