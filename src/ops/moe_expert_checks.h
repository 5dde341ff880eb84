// The checks and the kernel-side view of a MoeExperts (and optional shared expert),
// shared by moe_experts and the fused MoE decode block (internal to src/ops).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backend/moe.h"
#include "kiln/device.h"
#include "kiln/ops/moe.h"
#include "kiln/tensor.h"

namespace kiln::moe_detail {

// The experts as the kernels read them. `list` and `shared_expert` point into the
// weights and into `keep` (the contiguous float32 scales): keep this object alive, and
// in place, while a kernel reads it.
struct CheckedExperts {
  DType weight_dtype = DType::Float32;
  backend::Fp8ScaleLayout layout = backend::Fp8ScaleLayout::PerRow;
  std::vector<backend::SwigluExpert> list;
  bool has_shared = false;
  backend::SwigluExpert shared_expert;
  Tensor shared_gate;  // float32 [hidden]
  std::vector<Tensor> keep;
};

// Every expert (and the shared one) checked against `hidden` and `device`: one dtype,
// one intermediate size, one FP8 scale layout, unit stride inside rows; errors name `op`.
CheckedExperts check_experts(const char* op, const MoeExperts& experts, const std::optional<SharedExpert>& shared,
                             int64_t hidden, Device device);

backend::ExpertMatrix expert_matrix(const char* op, const char* what, const Tensor& w,
                                    const std::optional<Tensor>& scale, int64_t rows, int64_t cols,
                                    backend::Fp8ScaleLayout* layout, bool* layout_known, std::vector<Tensor>& keep);
backend::SwigluExpert swiglu_expert(const char* op, const SwigluWeights& w, int64_t hidden, DType dtype,
                                    backend::Fp8ScaleLayout* layout, bool* layout_known, std::vector<Tensor>& keep);

}  // namespace kiln::moe_detail
