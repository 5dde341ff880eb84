// The reduction engine: runs a ReduceKernel over any tensor layout and hands the
// result of each output element, as a ReducePartial, to the op front end.
//
// The reduced dims are coalesced and the layout picks one of three strategies:
//   rows     the innermost reduced dim is contiguous: a SIMD kernel per row block
//   columns  the innermost kept dim is contiguous (e.g. a leading dim of a contiguous
//            tensor is reduced): SIMD across outputs, accumulating row after row,
//            no copy
//   copy     anything else: the input is permuted (kept dims first) into a contiguous
//            copy, then reduced by rows; or, when the rows would be short (under 16
//            elements) and the outputs many, permuted reduced dims first and reduced
//            as columns, so no kernel call is spent on a handful of elements
// f16/bf16/fp8 blocks are widened to float32 in per-thread scratch on the way.
//
// Determinism: every output is split into the same blocks whatever the thread count,
// and their partials are combined in one fixed pairwise order, so results do not depend
// on the number of threads (only on the shape and strides).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/tensor.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

struct ReduceSpec {
  ReduceKind kind;
  ReduceParams params;
};

// Receives the final partials of outputs [first, first + n), numbered in the row-major
// order of the kept dims. Called from pool threads, concurrently for disjoint ranges.
class ReduceSink {
 public:
  virtual void consume(const ReducePartial* partials, int64_t first, int64_t n) = 0;

 protected:
  ~ReduceSink() = default;
};

// Reduces `input` over the dims d with reduced[d] (reduced.size() == input.dim()).
// For ArgMax/ArgMin, `index` is the row-major flat index over the reduced dims.
// An empty reduction gives reduce_identity(kind) for every output.
void reduce_loop(ThreadPool& pool, const Tensor& input, const std::vector<bool>& reduced, const ReduceSpec& spec,
                 ReduceSink& sink);

// The same with a callable consume(const ReducePartial*, int64_t first, int64_t n).
template <class F, std::enable_if_t<!std::is_base_of_v<ReduceSink, std::decay_t<F>>, int> = 0>
void reduce_loop(ThreadPool& pool, const Tensor& input, const std::vector<bool>& reduced, const ReduceSpec& spec,
                 F&& consume) {
  struct Sink final : ReduceSink {
    explicit Sink(F& f) : f(f) {}
    void consume(const ReducePartial* partials, int64_t first, int64_t n) override { f(partials, first, n); }
    F& f;
  } sink(consume);
  reduce_loop(pool, input, reduced, spec, static_cast<ReduceSink&>(sink));
}

}  // namespace kiln::cpu
