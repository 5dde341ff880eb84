// Loop scaffolding the index kernels share (internal to src/backend/cpu/index and
// index_extra): the element-size switch of the kernels that only move bytes, and the
// order-keeping two-pass compaction of masked_select and nonzero.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {

// fn(std::integral_constant<size_t, N>{}) for the element size N (1, 2, 4, 8 or 16
// bytes): kernels that move elements without looking at them are instantiated per size,
// not per dtype, so every dtype (fp8 included) moves bit for bit.
template <typename F>
decltype(auto) with_element_size(size_t elem, const char* op, F&& fn) {
  switch (elem) {
    case 1: return fn(std::integral_constant<size_t, 1>{});
    case 2: return fn(std::integral_constant<size_t, 2>{});
    case 4: return fn(std::integral_constant<size_t, 4>{});
    case 8: return fn(std::integral_constant<size_t, 8>{});
    case 16: return fn(std::integral_constant<size_t, 16>{});
  }
  fail(ErrorKind::Type, op, "unsupported element size {}", elem);
}

// [0, numel) in fixed chunks (at least `grain` elements, at most 4 per thread). count()
// runs a first pass that counts each chunk's outputs and a prefix sum that gives each
// chunk its first output; write() runs the second pass, each chunk writing from there.
// The outputs keep the elements' order whatever the thread count, with no locks.
class OrderedChunks {
 public:
  OrderedChunks(ThreadPool& pool, int64_t numel, int64_t grain)
      : pool_(pool),
        numel_(numel),
        chunks_(std::clamp<int64_t>(numel / grain, 1, int64_t{pool.num_threads()} * 4)),
        first_(static_cast<size_t>(chunks_) + 1, 0) {}

  // count(begin, end) -> the number of outputs of elements [begin, end). Returns the total.
  template <typename Count>
  int64_t count(Count&& count) {
    pool_.parallel_for(chunks_, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) first_[static_cast<size_t>(c) + 1] = count(begin_of(c), begin_of(c + 1));
    });
    for (size_t c = 0; c < static_cast<size_t>(chunks_); ++c) first_[c + 1] += first_[c];
    return first_.back();
  }

  // write(begin, end, first): the outputs of elements [begin, end), from output `first` on.
  template <typename Write>
  void write(Write&& write) {
    pool_.parallel_for(chunks_, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) write(begin_of(c), begin_of(c + 1), first_[static_cast<size_t>(c)]);
    });
  }

 private:
  int64_t begin_of(int64_t c) const { return numel_ / chunks_ * c + std::min(c, numel_ % chunks_); }

  ThreadPool& pool_;
  int64_t numel_, chunks_;
  std::vector<int64_t> first_;  // chunk c's first output; the total at the end
};

}  // namespace kiln::cpu
