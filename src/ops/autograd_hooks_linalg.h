// The hook table of the differentiable linear-algebra ops, moe_route and the FP8
// matmuls (internal; the same scheme as ops/autograd_hooks.h, in a table of its own so
// that these families do not rebuild every op front end when they change).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "kiln/ops/linalg.h"
#include "kiln/ops/moe.h"
#include "ops/autograd_hooks.h"

namespace kiln::autograd_hooks {

struct LinalgHooks {
  Tensor (*solve_triangular)(const Tensor&, const Tensor&, bool, bool, bool) = nullptr;
  linalg::LuFactorResult (*lu_factor)(const Tensor&, bool) = nullptr;
  linalg::LuFactorExResult (*lu_factor_ex)(const Tensor&, bool, bool) = nullptr;
  linalg::LuResult (*lu)(const Tensor&, bool) = nullptr;
  Tensor (*lu_solve)(const Tensor&, const Tensor&, const Tensor&, bool, bool) = nullptr;
  linalg::SolveExResult (*solve_ex)(const Tensor&, const Tensor&, bool, bool) = nullptr;
  Tensor (*det)(const Tensor&) = nullptr;
  linalg::SlogdetResult (*slogdet)(const Tensor&) = nullptr;
  linalg::InvExResult (*inv_ex)(const Tensor&, bool) = nullptr;
  linalg::CholeskyExResult (*cholesky_ex)(const Tensor&, bool, bool) = nullptr;
  linalg::QrResult (*qr)(const Tensor&, std::string_view) = nullptr;
  linalg::SvdResult (*svd)(const Tensor&, bool) = nullptr;
  Tensor (*svdvals)(const Tensor&) = nullptr;
  linalg::EighResult (*eigh)(const Tensor&, std::string_view) = nullptr;
  Tensor (*eigvalsh)(const Tensor&, std::string_view) = nullptr;
  Tensor (*pinv)(const Tensor&, const OptTensor&, const OptTensor&, bool) = nullptr;
  linalg::LstsqResult (*lstsq)(const Tensor&, const Tensor&, std::optional<double>,
                               std::optional<std::string_view>) = nullptr;
  MoeRouting (*moe_route)(const Tensor&, int64_t, MoeScoring, bool, const OptTensor&, double, double) = nullptr;
  // An op PyTorch gives no derivative (the FP8 matmuls): `out` is recorded with a node
  // whose backward raises "derivative for aten::<op> is not implemented", as PyTorch's does.
  Tensor (*not_differentiable)(const char* aten_name, const std::vector<Tensor>& inputs, Tensor out) = nullptr;
};
LinalgHooks& linalg_hooks();

}  // namespace kiln::autograd_hooks

// The first line of a differentiable linear-algebra front end (as KILN_AUTOGRAD).
#define KILN_LINALG_AUTOGRAD(slot, ...)                                                                       \
  do {                                                                                                        \
    if (::kiln::autograd_hooks::any_records(__VA_ARGS__)) [[unlikely]]                                        \
      return ::kiln::autograd_hooks::installed(::kiln::autograd_hooks::linalg_hooks().slot, #slot)(__VA_ARGS__); \
  } while (0)
