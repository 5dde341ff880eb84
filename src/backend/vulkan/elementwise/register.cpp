// Installs the Vulkan elementwise kernels (shaders/elementwise.comp): the float ops of
// backend/elementwise.h computed in float32 over float32/float16/bfloat16/float8
// storage, and where/clamp (shaders/ternary.comp). Ops the shader does not have (pow, expm1, log1p, integer ops, ...)
// are refused by supports_*, so the front end raises before allocating.
//
// Accuracy: Vulkan bounds exp to 3 + 2|x| ulp, log to 3 ulp (2^-21 absolute near 1) and
// division to 2.5 ulp, not correctly rounded as on the CPU; tests allow for it.
#include <algorithm>

#include "backend/elementwise.h"
#include "backend/vulkan/elementwise/where.h"
#include "backend/vulkan/vk_kernels.h"
#include "kiln/error.h"

namespace kiln::vulkan {
namespace {

using backend::BinaryOp;
using backend::TernaryOp;
using backend::UnaryOp;

// shaders/elementwise.comp's code for up * silu(gate) (past every BinaryOp).
constexpr uint32_t kSiluMul = 200;

bool is_float_storage(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || is_fp8(t);
}

// Bool compute (bool operands): the logical ops, bitwise not/and/or/xor and comparisons,
// read as 0 and 1 in float32.
bool supports_unary(UnaryOp op, DType compute) {
  if (compute == DType::Bool) return op == UnaryOp::LogicalNot || op == UnaryOp::BitwiseNot;
  if (compute != DType::Float32) return false;
  switch (op) {
    case UnaryOp::Abs: case UnaryOp::Neg: case UnaryOp::Square: case UnaryOp::Reciprocal: case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt: case UnaryOp::Exp: case UnaryOp::Log: case UnaryOp::Sigmoid: case UnaryOp::Silu:
    case UnaryOp::Relu: case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: case UnaryOp::Trunc:
    case UnaryOp::Exp2: case UnaryOp::Sin: case UnaryOp::Cos: case UnaryOp::Tanh: case UnaryOp::Gelu:
    case UnaryOp::GeluTanh: case UnaryOp::Softplus: case UnaryOp::LogicalNot: case UnaryOp::IsNan:
    case UnaryOp::IsInf: case UnaryOp::IsFinite:
      return true;
    default:
      return false;
  }
}

bool supports_binary(BinaryOp op, DType compute) {
  const bool logical = op == BinaryOp::LogicalAnd || op == BinaryOp::LogicalOr || op == BinaryOp::LogicalXor;
  if (compute == DType::Bool) {
    return logical || op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor ||
           op == BinaryOp::Eq || op == BinaryOp::Ne;
  }
  if (compute != DType::Float32) return false;
  if (logical) return true;
  switch (op) {
    case BinaryOp::Add: case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::Maximum: case BinaryOp::Minimum:
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt: case BinaryOp::Ge:
      return true;
    default:
      return false;
  }
}

// Bool operands load as 0 and 1.
void check_storage(const char* op, const Tensor& t) {
  KILN_CHECK_KIND(is_float_storage(t.dtype()) || t.dtype() == DType::Bool, NotImplemented, op,
                  "{} operands are not supported by the Vulkan elementwise kernels yet (float32, float16, bfloat16, "
                  "float8 and bool are)",
                  dtype_name(t.dtype()));
}

void run(const char* op, uint32_t arity, uint32_t code, const Tensor& out, const Tensor& a, const Tensor* b,
         float alpha, float threshold = 0.0f) {
  if (out.numel() == 0) return;
  check_storage(op, a);
  if (b != nullptr) check_storage(op, *b);
  KILN_CHECK_KIND(out.dtype() == DType::Bool || is_float_storage(out.dtype()), NotImplemented, op,
                  "{} results are not supported by the Vulkan elementwise kernels yet", dtype_name(out.dtype()));
  const Binding bo = bind(out, op);
  const Binding ba = bind(a, op);
  // A unary op binds its input twice: every binding the shader declares must be valid.
  const Binding bb = b != nullptr ? bind(*b, op) : ba;
  StridedLayout layout = b != nullptr ? strided_layout(out, {&a, b}, {&bo, &ba, &bb}, op)
                                      : strided_layout(out, {&a, &a}, {&bo, &ba, &bb}, op);
  layout.push.alpha = alpha;
  layout.push.threshold = threshold;
  const uint32_t spec[] = {arity, code, dtype_code(a.dtype()), dtype_code(b != nullptr ? b->dtype() : a.dtype()),
                           dtype_code(out.dtype())};
  dispatch_strided(op, "elementwise", "elementwise_many_dims", spec, {bo, ba, bb}, layout);
}

// where moves bytes (any dtype that a, b and out share) or converts between float
// storage dtypes; clamp computes in float32 (shaders/ternary.comp).
bool supports_ternary(TernaryOp op, DType compute) {
  if (op == TernaryOp::Where) return itemsize(compute) <= 16;
  return op == TernaryOp::Clamp && compute == DType::Float32;
}

// out = op(x, y, z) by shaders/ternary.comp, operands already expanded to out's shape.
void record_ternary(const char* op, TernaryOp top, const Tensor& out, const Tensor& x, const Tensor& y,
                    const Tensor& z) {
  if (out.numel() == 0) return;
  if (top == TernaryOp::Where) {
    KILN_CHECK_KIND(x.dtype() == DType::Bool || x.dtype() == DType::UInt8, Type, op,
                    "expected condition to be a boolean tensor, but got a tensor with dtype {}", dtype_name(x.dtype()));
    const bool same = y.dtype() == out.dtype() && z.dtype() == out.dtype();
    const bool floats = is_float_storage(y.dtype()) && is_float_storage(z.dtype()) && is_float_storage(out.dtype());
    KILN_CHECK_KIND(same || floats, NotImplemented, op,
                    "where of {} and {} into {} is not implemented on vulkan yet (operands of the result's dtype, "
                    "or float32/float16/bfloat16/float8 ones, are)",
                    dtype_name(y.dtype()), dtype_name(z.dtype()), dtype_name(out.dtype()));
  } else {
    for (const Tensor* t : {&x, &y, &z, &out}) check_storage(op, *t);
  }
  const Binding bo = bind(out, op);
  const Binding b0 = bind(x, op);
  const Binding b1 = bind(y, op);
  const Binding b2 = bind(z, op);
  const StridedLayout layout = strided_layout(out, {&x, &y, &z}, {&bo, &b0, &b1, &b2}, op);
  const uint32_t spec[] = {static_cast<uint32_t>(top), dtype_code(x.dtype()), dtype_code(y.dtype()),
                           dtype_code(z.dtype()), dtype_code(out.dtype())};
  // Four operands always take the storage-buffer geometry.
  dispatch_strided(op, "ternary", "ternary", spec, {bo, b0, b1, b2}, layout);
}

void run_ternary(const backend::TernaryProblem& p) {
  const char* op = p.op == TernaryOp::Where ? "where" : "clamp";
  KILN_CHECK_KIND(supports_ternary(p.op, p.compute), NotImplemented, op, "no Vulkan kernel for {} yet",
                  dtype_name(p.compute));
  record_ternary(op, p.op, p.out, p.a, p.b, p.c);
}

const bool registered = [] {
  backend::ElementwiseKernels k;
  k.supports_unary = &supports_unary;
  k.supports_binary = &supports_binary;
  k.supports_ternary = &supports_ternary;
  k.unary = [](const ExecutionContext&, const backend::UnaryProblem& p) {
    KILN_CHECK_KIND(supports_unary(p.op, p.compute), NotImplemented, "elementwise",
                    "this op has no Vulkan kernel for {} yet", dtype_name(p.compute));
    // Softplus's beta travels as alpha (the one scalar the other unary ops leave unused).
    const bool softplus = p.op == UnaryOp::Softplus;
    run("elementwise", 1, static_cast<uint32_t>(p.op), p.out, p.in, nullptr,
        softplus ? static_cast<float>(p.args.beta.f) : 1.0f, softplus ? static_cast<float>(p.args.threshold.f) : 0.0f);
  };
  k.binary = [](const ExecutionContext&, const backend::BinaryProblem& p) {
    KILN_CHECK_KIND(supports_binary(p.op, p.compute), NotImplemented, "elementwise",
                    "this op has no Vulkan kernel for {} yet", dtype_name(p.compute));
    run("elementwise", 2, static_cast<uint32_t>(p.op), p.out, p.a, &p.b, static_cast<float>(p.args.alpha.f));
  };
  k.ternary = [](const ExecutionContext&, const backend::TernaryProblem& p) { run_ternary(p); };
  k.silu_and_mul = [](const ExecutionContext&, const backend::SiluAndMulProblem& p) {
    KILN_CHECK_KIND(p.compute == DType::Float32, NotImplemented, "silu_and_mul", "{} has no Vulkan kernel",
                    dtype_name(p.compute));
    run("silu_and_mul", 2, kSiluMul, p.out, p.gate, &p.up, 1.0f);
  };
  backend::elementwise_kernels.install(DeviceType::Vulkan, k);
  return true;
}();

}  // namespace

void record_where(const char* op, const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  record_ternary(op, TernaryOp::Where, out, cond, a, b);
}

}  // namespace kiln::vulkan
