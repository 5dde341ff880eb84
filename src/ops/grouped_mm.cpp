// grouped_mm and grouped_mm_fp8 front ends: PyTorch's validation (GroupedMMUtils.h, in its
// order), output allocation, and the grouped_mm kernel of the device
// (backend/grouped_mm.h).
#include "kiln/ops/grouped_mm.h"

#include <climits>

#include "backend/grouped_mm.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

constexpr const char* kOp = "grouped_mm";

bool is_grouped_mm_dtype(DType t) { return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16; }

// PyTorch's check_valid_strides_and_return_transposed: the last two dims are column-major
// (checked first) or row-major, and the leading stride is a multiple of 16 bytes. (On CPU
// the data pointer itself need not be aligned.)
void check_strides(const char* op, const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.stride(-2), cs = t.stride(-1);
  const int64_t alignment = 16 / static_cast<int64_t>(t.element_size());
  if (rs == 1 && cs >= std::max<int64_t>(1, rows)) {
    KILN_CHECK(cs % alignment == 0, op, "strides should be multiple of 16 bytes");
  } else if (cs == 1 && rs >= std::max<int64_t>(1, cols)) {
    KILN_CHECK(rs % alignment == 0, op, "strides should be multiple of 16 bytes");
  } else {
    fail(ErrorKind::Runtime, op, "Invalid strides/sizes, got {} for strides and {} for sizes",
         shape_to_string(t.strides()), t.shape_str());
  }
}

// The kernels index operands with 32-bit ints.
void check_int_sizes(const char* op, const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    KILN_CHECK_KIND(t.size(d) <= INT_MAX && t.stride(d) <= INT_MAX, NotImplemented, op,
                    "sizes and strides up to 2^31 - 1 are supported, got sizes {} and strides {}", t.shape_str(),
                    shape_to_string(t.strides()));
  }
}

backend::GroupedOperand operand(const Tensor& t) {
  backend::GroupedOperand o;
  o.data = t.data_ptr();
  o.dtype = t.dtype();
  o.batch_stride = t.dim() == 3 ? t.stride(0) : 0;
  o.row_stride = t.stride(-2);
  o.col_stride = t.stride(-1);
  o.rows = t.size(-2);
  o.cols = t.size(-1);
  return o;
}

// Checked int32 offsets, contiguous for the kernel.
Tensor checked_offs(const char* op, const Tensor& offs) {
  check_defined(offs, op, "offs");
  KILN_CHECK(offs.dim() == 1, op, "offs has to be 1D");
  KILN_CHECK(offs.dtype() == DType::Int32, op, "Offsets have to be int32");
  return offs.contiguous();
}

}  // namespace

Tensor grouped_mm(const Tensor& mat_a, const Tensor& mat_b, const std::optional<Tensor>& offs,
                  const std::optional<Tensor>& bias, std::optional<DType> out_dtype) {
  KILN_AUTOGRAD(grouped_mm, mat_a, mat_b, offs, bias, out_dtype);
  check_defined(mat_a, kOp, "mat_a");
  check_defined(mat_b, kOp, "mat_b");
  common_device(kOp, {&mat_a, &mat_b, offs ? &*offs : nullptr, bias ? &*bias : nullptr});
  KILN_CHECK(is_grouped_mm_dtype(mat_a.dtype()), kOp, "Expected mat_a to be Float32, BFloat16 or Float16 matrix, got {}",
             dtype_name(mat_a.dtype()));
  KILN_CHECK(is_grouped_mm_dtype(mat_b.dtype()), kOp, "Expected mat_b to be Float32, BFloat16 or Float16 matrix, got {}",
             dtype_name(mat_b.dtype()));
  KILN_CHECK(mat_a.dim() == 2 || mat_a.dim() == 3, kOp, "mat_a has to be 2 or 3d");
  KILN_CHECK(mat_b.dim() == 2 || mat_b.dim() == 3, kOp, "mat_b has to be 2 or 3d");
  const bool a_is_2d = mat_a.dim() == 2, b_is_2d = mat_b.dim() == 2;
  // PyTorch skips this check for 2D x 2D (K is the jagged dim there) and then slices A's
  // columns and B's rows separately, so mismatched K silently contracts over the shorter
  // one; kiln refuses it with the message of the other cases.
  KILN_CHECK(mat_a.size(-1) == mat_b.size(-2), kOp, "contraction dimension of mat_a and mat_b must match, got {} and {}",
             mat_a.shape_str(), mat_b.shape_str());
  check_strides(kOp, mat_a);
  check_strides(kOp, mat_b);
  KILN_CHECK(offs.has_value() == (a_is_2d || b_is_2d), kOp,
             "Have to provide offsets if there is a 2d matrix, or no offset if both matrices are 3d");
  Tensor offs_c;
  if (offs.has_value()) offs_c = checked_offs(kOp, *offs);
  KILN_CHECK(!bias.has_value(), kOp, "Bias not supported yet");
  const DType out_dt = out_dtype.value_or(mat_a.dtype());
  KILN_CHECK(out_dt == mat_a.dtype(), kOp, "Grouped gemm output dtype must match `mat_a` dtype");

  backend::GroupedMmArgs args;
  Shape out_shape;
  if (a_is_2d && !b_is_2d) {
    KILN_CHECK(offs_c.size(0) == mat_b.size(0), kOp, "matrix batch sizes have to match");
    args.kind = backend::GroupedMmCase::Jagged2Dx3D;
    out_shape = {mat_a.size(0), mat_b.size(-1)};
  } else if (!a_is_2d && b_is_2d) {
    KILN_CHECK(offs_c.size(0) == mat_a.size(0), kOp, "matrix batch sizes have to match");
    args.kind = backend::GroupedMmCase::Jagged3Dx2D;
    out_shape = {mat_a.size(1), mat_b.size(1)};
  } else if (a_is_2d && b_is_2d) {
    args.kind = backend::GroupedMmCase::Jagged2Dx2D;
    out_shape = {offs_c.size(0), mat_a.size(0), mat_b.size(1)};
  } else {
    KILN_CHECK(mat_a.size(0) == mat_b.size(0), kOp, "batched dimension has to match");
    args.kind = backend::GroupedMmCase::Batched3Dx3D;
    out_shape = {mat_a.size(0), mat_a.size(1), mat_b.size(-1)};
  }
  // PyTorch's CPU fallback runs mm per group, which refuses mixed dtypes.
  KILN_CHECK(mat_a.dtype() == mat_b.dtype(), kOp, "expected mat_a and mat_b to have the same dtype, but got: {} != {}",
             dtype_name(mat_a.dtype()), dtype_name(mat_b.dtype()));
  check_int_sizes(kOp, mat_a);
  check_int_sizes(kOp, mat_b);

  Tensor out = Tensor::empty(out_shape, out_dt, mat_a.device(), "grouped_mm");
  args.a = operand(mat_a);
  args.b = operand(mat_b);
  args.groups = offs_c.defined() ? offs_c.size(0) : mat_a.size(0);
  args.offs = offs_c.defined() ? offs_c.data<int32_t>() : nullptr;
  args.out = out.data_ptr();
  args.out_dtype = out_dt;
  const OpProfile profile(kOp, [&] { return OpCost{tensor_bytes({&mat_a, &mat_b, &out}), 0}; });
  backend::grouped_mm_kernels.on(out.device(), kOp).grouped_mm(current_context(), args);
  return out;
}

Tensor grouped_mm_fp8(const Tensor& mat_a, const Tensor& mat_b, const Tensor& scale, const Tensor& offs) {
  constexpr const char* op = "grouped_mm_fp8";
  check_defined(mat_a, op, "mat_a");
  check_defined(mat_b, op, "mat_b");
  check_defined(scale, op, "scale");
  common_device(op, {&mat_a, &mat_b, &scale, &offs});
  KILN_CHECK_KIND(is_grouped_mm_dtype(mat_a.dtype()), Type, op,
                  "mat_a must be float32, bfloat16 or float16, but got {}", dtype_name(mat_a.dtype()));
  KILN_CHECK_KIND(mat_b.dtype() == DType::Float8_e4m3fn, Type, op, "mat_b must be float8_e4m3fn, but got {}",
                  dtype_name(mat_b.dtype()));
  KILN_CHECK_KIND(scale.dtype() == DType::Float32, Type, op,
                  "scale must be float32, but got {} (convert checkpoint scales with .to(float32))",
                  dtype_name(scale.dtype()));
  KILN_CHECK(mat_a.dim() == 2, op, "mat_a must be 2-D [M_total, K], got shape {}", mat_a.shape_str());
  KILN_CHECK(mat_b.dim() == 3, op, "mat_b must be 3-D [G, N, K] (one [N, K] weight per expert), got shape {}",
             mat_b.shape_str());
  const int64_t G = mat_b.size(0), N = mat_b.size(1), K = mat_b.size(2);
  KILN_CHECK(mat_a.size(1) == K, op, "contraction dimension of mat_a {} and mat_b {} [G, N, K] must match",
             mat_a.shape_str(), mat_b.shape_str());
  KILN_CHECK(mat_b.stride(2) == 1 && (N <= 1 || mat_b.stride(1) >= K), op,
             "mat_b's [N, K] weights must be row-major (unit stride along K), got strides {}",
             shape_to_string(mat_b.strides()));
  KILN_CHECK(scale.sizes() == Shape({G, N}), op, "scale must have shape [{}, {}] (one per expert and output), got {}",
             G, N, scale.shape_str());
  const Tensor offs_c = checked_offs(op, offs);
  KILN_CHECK(offs_c.size(0) == G, op, "matrix batch sizes have to match");
  // Row-major A rows are what the kernel streams; other layouts are copied once.
  const Tensor a = mat_a.stride(1) == 1 || mat_a.size(1) <= 1 ? mat_a : mat_a.contiguous();
  check_int_sizes(op, a);
  check_int_sizes(op, mat_b);
  const Tensor scale_c = scale.contiguous();

  Tensor out = Tensor::empty({mat_a.size(0), N}, mat_a.dtype(), mat_a.device(), op);
  backend::GroupedMmArgs args;
  args.kind = backend::GroupedMmCase::Jagged2Dx3D;
  args.a = operand(a);
  // B [G, K, N] is the transposed weight view: column-major last two dims.
  const Tensor b = mat_b.transpose(1, 2);
  args.b = operand(b);
  args.b_scale = scale_c.data<float>();
  args.groups = G;
  args.offs = offs_c.data<int32_t>();
  args.out = out.data_ptr();
  args.out_dtype = mat_a.dtype();
  const OpProfile profile(op, [&] { return OpCost{tensor_bytes({&mat_a, &mat_b, &out}), 0}; });
  backend::grouped_mm_kernels.on(out.device(), op).grouped_mm(current_context(), args);
  return out;
}

}  // namespace kiln
