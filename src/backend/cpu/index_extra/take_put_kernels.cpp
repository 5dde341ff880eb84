// take and put_ on the CPU: flat gathers and scatters of whole elements, copied by size
// (the dtype does not matter to a copy), with PyTorch's index check and wrapping.
#include <cstring>

#include "backend/cpu/index/index_loops.h"
#include "backend/cpu/index_extra/index_extra_kernels.h"
#include "kiln/error.h"
#include "kiln/thread_pool.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

inline int64_t checked_flat_index(int64_t i, int64_t numel, const char* op) {
  KILN_CHECK_KIND(i >= -numel && i < numel, Index, op, "out of range: tried to access index {} on a tensor of {} elements.",
                  i, numel);
  return i < 0 ? i + numel : i;
}

template <size_t Size>
void copy_element(void* dst, const void* src) {
  std::memcpy(dst, src, Size);
}

using CopyFn = void (*)(void*, const void*);

CopyFn copier(size_t itemsize) {
  return with_element_size(itemsize, "take", [](auto elem) -> CopyFn { return &copy_element<decltype(elem)::value>; });
}

}  // namespace

void take_cpu(const ExecutionContext& ctx, const backend::TakeProblem& p) {
  const CopyFn copy = copier(p.itemsize);
  const auto* in = static_cast<const char*>(p.input);
  auto* out = static_cast<char*>(p.out);
  ctx.pool().parallel_for(p.count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t j = checked_flat_index(p.index[i], p.numel, p.op);
      copy(out + i * p.itemsize, in + j * p.itemsize);
    }
  });
}

void put_cpu(const ExecutionContext& ctx, const backend::PutProblem& p) {
  const CopyFn copy = copier(p.itemsize);
  // Every index is checked before anything is written, so a bad index leaves self as it was.
  ctx.pool().parallel_for(p.count, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) checked_flat_index(p.index[i], p.numel, "put_");
  });
  auto* self = static_cast<char*>(p.self);
  const auto* src = static_cast<const char*>(p.source);
  // In order, on one thread: with duplicate indices the last write wins, every run.
  for (int64_t i = 0; i < p.count; ++i) {
    const int64_t j = p.index[i] < 0 ? p.index[i] + p.numel : p.index[i];
    copy(self + j * p.itemsize, src + i * p.itemsize);
  }
}

}  // namespace kiln::cpu
