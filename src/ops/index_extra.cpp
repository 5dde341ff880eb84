// Front ends of take, put_/put and bincount.
#include "kiln/ops/index_extra.h"

#include "backend/index_extra.h"
#include "kiln/context.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "ops/op_utils.h"

namespace kiln {
namespace {

const backend::IndexExtraKernels& kernels(const Tensor& t, const char* op) {
  return backend::index_extra_kernels.on(t.device(), op);
}

void check_long_index(const Tensor& index, const char* op) {
  check_defined(index, op, "index");
  KILN_CHECK_KIND(index.dtype() == DType::Int64, Index, op, "Expected a long tensor for index, but got {}",
                  torch_type_name(index.dtype()));
}

}  // namespace

Tensor take(const Tensor& input, const Tensor& index) {
  check_defined(input, "take", "input");
  check_long_index(index, "take");
  KILN_CHECK_KIND(!(input.numel() == 0 && index.numel() != 0), Index, "take",
                  "tried to take from an empty tensor");
  const Tensor in = input.contiguous();
  const Tensor idx = index.contiguous();
  Tensor out = empty(index.sizes(), input.dtype());
  if (out.numel() > 0) {
    kernels(input, "take").take(current_context(), {"take", input.element_size(), in.numel(), in.data_ptr(),
                                                    idx.numel(), idx.data<int64_t>(), out.data_ptr()});
  }
  return out;
}

Tensor put_(const Tensor& self, const Tensor& index, const Tensor& source, bool accumulate) {
  const char* op = "put_";
  check_defined(self, op, "self");
  check_defined(source, op, "source");
  check_long_index(index, op);
  check_writable(self, op);
  KILN_CHECK(self.dtype() == source.dtype(), op,
             "self and source expected to have the same dtype, but got self.dtype = {} and source.dtype = {}",
             torch_type_name(self.dtype()), torch_type_name(source.dtype()));
  KILN_CHECK(index.numel() == source.numel(), op,
             "Expected source and index to have the same number of elements, but got source.numel() = {}, "
             "index.numel() = {}",
             source.numel(), index.numel());
  KILN_CHECK_KIND(!(self.numel() == 0 && index.numel() != 0), Index, op,
                  "Tried to put elements into an empty tensor");
  if (index.numel() == 0) return self;
  // Work on self's logical order; a non-contiguous self is written back at the end.
  Tensor work = self.is_contiguous() ? self : self.contiguous();
  const Tensor idx = index.contiguous().view({-1});
  const Tensor src = source.contiguous().view({-1});
  const int64_t numel = self.numel();
  if (accumulate) {
    int64_t lo = 0, hi = 0;
    kernels(self, op).value_range(current_context(), idx.data<int64_t>(), idx.numel(), &lo, &hi);
    const int64_t bad = lo < -numel ? lo : hi;
    KILN_CHECK_KIND(lo >= -numel && hi < numel, Index, op,
                    "out of range: tried to access index {} on a tensor of {} elements.", bad, numel);
    const Tensor wrapped = lo < 0 ? where(lt(idx, Scalar(int64_t{0})), add(idx, Scalar(numel)), idx) : idx;
    index_add_(work.view({-1}), 0, wrapped, src);
  } else {
    kernels(self, op).put(current_context(), {self.element_size(), numel, work.data_ptr(), idx.numel(),
                                              idx.data<int64_t>(), src.data_ptr()});
  }
  if (!work.is_same(self)) const_cast<Tensor&>(self).copy_(work);
  return self;
}

Tensor put(const Tensor& input, const Tensor& index, const Tensor& source, bool accumulate) {
  check_defined(input, "put", "input");
  return put_(input.clone(), index, source, accumulate);
}

Tensor bincount(const Tensor& input, const std::optional<Tensor>& weights, int64_t minlength) {
  const char* op = "bincount";
  check_defined(input, op, "input");
  KILN_CHECK(minlength >= 0, op, "minlength should be >= 0");
  KILN_CHECK(input.dim() == 1 && is_integral(input.dtype()), op,
             "bincount only supports 1-d non-negative integral inputs. (got a {}-d {} tensor)", input.dim(),
             dtype_name(input.dtype()));
  DType out_dtype = DType::Int64;
  Tensor w;
  if (weights) {
    check_defined(*weights, op, "weights");
    KILN_CHECK(weights->dim() == 1 && weights->numel() == input.numel(), op,
               "weights should be 1-d and have the same length as input");
    KILN_CHECK(!is_complex(weights->dtype()) && !is_fp8(weights->dtype()), op,
               "weights of dtype {} are not supported", dtype_name(weights->dtype()));
    out_dtype = weights->dtype() == DType::Float32 ? DType::Float32 : DType::Float64;
    w = weights->to(out_dtype).contiguous();
  }
  if (input.numel() == 0) return zeros({minlength}, out_dtype);
  const Tensor in = input.to(DType::Int64).contiguous();
  const auto& k = kernels(input, op);
  if (k.bincount_one_pass != nullptr) {
    struct Allocation {
      DType dtype;
      Tensor out;
    } allocation{out_dtype, {}};
    const auto allocate = [](void* state, int64_t bins) -> void* {
      auto* a = static_cast<Allocation*>(state);
      a->out = zeros({bins}, a->dtype);
      return a->out.data_ptr();
    };
    if (k.bincount_one_pass(current_context(), {in.numel(), in.data<int64_t>(), out_dtype,
                                                weights ? w.data_ptr() : nullptr, minlength, allocate, &allocation})) {
      return allocation.out;
    }
  }
  // Two passes: the value range first (naming a negative value), then the count.
  int64_t lo = 0, hi = 0;
  k.value_range(current_context(), in.data<int64_t>(), in.numel(), &lo, &hi);
  KILN_CHECK(lo >= 0, op, "bincount only supports 1-d non-negative integral inputs. (got the value {})", lo);
  const int64_t bins = std::max(checked_add(hi, int64_t{1}, op), minlength);
  Tensor out = zeros({bins}, out_dtype);
  k.bincount(current_context(), {in.numel(), in.data<int64_t>(), out_dtype, weights ? w.data_ptr() : nullptr, bins,
                                 out.data_ptr()});
  return out;
}

}  // namespace kiln
