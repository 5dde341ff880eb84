// Front ends for matmul, mm, bmm, mv and dot: torch.matmul's shape rules, the dtype
// checks, and one batched GEMM call (backend/matmul.h) per op.
//
// Every product funnels into batched_product: operands keep their strides (a transposed
// operand stays transposed, a broadcast batch becomes offsets that repeat) and are
// copied only when the kernel cannot read them in place. float16/bfloat16 operands are
// widened to float32 as whole tensors, multiplied with sgemm (float32 accumulation) and
// rounded once to the input dtype ("compute wide, store narrow"). Widening per panel
// would save the temporary copies; the whole-tensor cast keeps this layer simple and
// the cast engine vectorised.
#include "kiln/ops/matmul.h"

#include "backend/matmul.h"
#include "core/op_profile.h"
#include "kiln/context.h"
#include "kiln/error.h"
#include "kiln/ops/creation.h"
#include "kiln/type_promotion.h"
#include "ops/autograd_hooks.h"
#include "ops/op_utils.h"

namespace kiln {

namespace {

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  common_device(op, {&a, &b});
  KILN_CHECK_KIND(a.dtype() == b.dtype(), Type, op, "expected m1 and m2 to have the same dtype, but got: {} != {}",
                  dtype_name(a.dtype()), dtype_name(b.dtype()));
}

void check_supported_dtype(const Tensor& t, const char* op) {
  const DType dt = t.dtype();
  const bool supported = backend::matmul_kernels.on(t.device(), op).supports(compute_dtype(dt));
  KILN_CHECK_KIND(supported && !is_fp8(dt), Type, op,
                  "not implemented for {} (matrix products take floating, complex and integer dtypes; fp8 "
                  "products go through scaled_mm)",
                  dtype_name(dt));
}

// Element offsets of each matrix of `t` ([..., rows, cols]) when its batch dims are
// broadcast to batch_shape, in row-major order of the batch.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch_shape) {
  const int64_t nb = static_cast<int64_t>(batch_shape.size());
  const int64_t tb = t.dim() - 2;
  Shape strides(static_cast<size_t>(nb), 0);
  for (int64_t d = 0; d < tb; ++d) strides[nb - tb + d] = t.size(d) == 1 ? 0 : t.stride(d);
  const int64_t batch = shape_numel(batch_shape);
  std::vector<int64_t> offsets(static_cast<size_t>(batch));
  Shape index(static_cast<size_t>(nb), 0);
  int64_t offset = 0;
  for (int64_t i = 0; i < batch; ++i) {
    offsets[i] = offset;
    for (int64_t d = nb - 1; d >= 0; --d) {
      if (++index[d] < batch_shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= (batch_shape[d] - 1) * strides[d];
      index[d] = 0;
    }
  }
  return offsets;
}

// a [..., M, K] @ b [..., K, N] -> [batch_shape..., M, N], the batch dims of a and b
// broadcasting to batch_shape. Shapes and dtypes are already checked.
Tensor batched_product(Tensor a, Tensor b, const Shape& batch_shape) {
  const DType dt = a.dtype();
  const DType compute = compute_dtype(dt);
  a = a.to(compute);
  b = b.to(compute);
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const backend::MatmulKernels& kernels = backend::matmul_kernels.on(a.device(), "matmul");
  if (!kernels.reads_in_place(compute, M, K, a.stride(-2), a.stride(-1))) a = a.contiguous();
  if (!kernels.reads_in_place(compute, K, N, b.stride(-2), b.stride(-1))) b = b.contiguous();
  Shape out_shape = batch_shape;
  out_shape.push_back(M);
  out_shape.push_back(N);
  // The output first: a batch too large for memory fails there, in kiln's words, before
  // the per-matrix offset tables below are sized by it.
  Tensor out = Tensor::empty(out_shape, compute, kCPU, "matmul");
  if (out.numel() == 0) return out.to(dt);
  const std::vector<int64_t> a_offsets = batch_offsets(a, batch_shape);
  const std::vector<int64_t> b_offsets = batch_offsets(b, batch_shape);
  backend::BatchedGemm p;
  p.dtype = compute;
  p.batch = shape_numel(batch_shape);
  p.M = M;
  p.N = N;
  p.K = K;
  p.a = {a.data_ptr(), a_offsets.data(), a.stride(-2), a.stride(-1)};
  p.b = {b.data_ptr(), b_offsets.data(), b.stride(-2), b.stride(-1)};
  p.c = out.data_ptr();
  const OpProfile profile("matmul", [&] {
    return OpCost{tensor_bytes({&a, &b, &out}),
                  2.0 * static_cast<double>(p.batch) * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K)};
  });
  kernels.gemm_batched(current_context(), p);
  return out.to(dt);
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(mm, a, b);
  check_defined(a, "mm", "self");
  check_defined(b, "mm", "mat2");
  KILN_CHECK(a.dim() == 2, "mm", "self must be a matrix, got a {}-D tensor of shape {}", a.dim(), a.shape_str());
  KILN_CHECK(b.dim() == 2, "mm", "mat2 must be a matrix, got a {}-D tensor of shape {}", b.dim(), b.shape_str());
  KILN_CHECK(a.size(1) == b.size(0), "mm", "mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", a.size(0),
             a.size(1), b.size(0), b.size(1));
  check_same_dtype(a, b, "mm");
  check_supported_dtype(a, "mm");
  return batched_product(a, b, {});
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(bmm, a, b);
  check_defined(a, "bmm", "self");
  check_defined(b, "bmm", "mat2");
  KILN_CHECK(a.dim() == 3, "bmm", "batch1 must be a 3D tensor, got shape {}", a.shape_str());
  KILN_CHECK(b.dim() == 3, "bmm", "batch2 must be a 3D tensor, got shape {}", b.shape_str());
  KILN_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), "bmm",
             "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].", a.size(0),
             a.size(2), b.size(0), b.size(1));
  check_same_dtype(a, b, "bmm");
  check_supported_dtype(a, "bmm");
  return batched_product(a, b, {a.size(0)});
}

Tensor mv(const Tensor& a, const Tensor& v) {
  KILN_AUTOGRAD(mv, a, v);
  check_defined(a, "mv", "self");
  check_defined(v, "mv", "vec");
  KILN_CHECK(a.dim() == 2 && v.dim() == 1, "mv", "vector + matrix @ vector expected, got a {}-D matrix and a {}-D vector",
             a.dim(), v.dim());
  KILN_CHECK(a.size(1) == v.size(0), "mv", "size mismatch, got mat ({}x{}), vec ({})", a.size(0), a.size(1),
             v.size(0));
  check_same_dtype(a, v, "mv");
  check_supported_dtype(a, "mv");
  return batched_product(a, v.unsqueeze(1), {}).squeeze(1);
}

Tensor dot(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(dot, a, b);
  check_defined(a, "dot", "self");
  check_defined(b, "dot", "tensor");
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, "dot", "1D tensors expected, but got {}D and {}D tensors", a.dim(),
             b.dim());
  KILN_CHECK_KIND(a.dtype() == b.dtype(), Type, "dot", "expected both vectors to have same dtype, but found {} and {}",
                  dtype_name(a.dtype()), dtype_name(b.dtype()));
  KILN_CHECK(a.size(0) == b.size(0), "dot",
             "inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but "
             "got {} and {} elements respectively",
             a.size(0), b.size(0), a.size(0), b.size(0));
  check_supported_dtype(a, "dot");
  return batched_product(a.unsqueeze(0), b.unsqueeze(1), {}).view({});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  KILN_AUTOGRAD(matmul, a, b);
  check_defined(a, "matmul", "self");
  check_defined(b, "matmul", "other");
  const int64_t da = a.dim(), db = b.dim();
  KILN_CHECK(da > 0 && db > 0, "matmul", "both arguments to matmul need to be at least 1D, but they are {}D and {}D",
             da, db);
  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 1) return mv(a, b);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 2) return mm(a, b);
  if (da >= 3 && db <= 2) {
    // Fold a's batch dims into its rows: one large GEMM instead of many small ones (as
    // PyTorch does). reshape stays a view whenever a's layout allows it.
    const int64_t K = a.size(-1);
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    const Tensor rows = a.reshape({shape_numel(out_shape, "matmul"), K});
    if (db == 1) return mv(rows, b).view(out_shape);
    out_shape.push_back(b.size(1));
    return mm(rows, b).view(out_shape);
  }
  // Batched (b has 3+ dims): a 1-D `a` is a single row, removed at the end.
  const Tensor a3 = da == 1 ? a.unsqueeze(0) : a;
  KILN_CHECK(a3.size(-1) == b.size(-2), "matmul",
             "shapes {} and {} cannot be multiplied: {} columns against {} rows", a.shape_str(), b.shape_str(),
             a3.size(-1), b.size(-2));
  check_same_dtype(a, b, "matmul");
  check_supported_dtype(a, "matmul");
  const Shape batch = broadcast_shapes(Shape(a3.sizes().begin(), a3.sizes().end() - 2),
                                       Shape(b.sizes().begin(), b.sizes().end() - 2), "matmul");
  const Tensor out = batched_product(a3, b, batch);
  return da == 1 ? out.squeeze(-2) : out;
}

}  // namespace kiln
