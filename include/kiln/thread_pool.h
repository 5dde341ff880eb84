// The CPU thread pool: one persistent pool, passed explicitly to kernels, one worker per
// physical core, static contiguous splits with a minimum chunk, brief spin then block.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

namespace kiln {

// More threads than this is a typo, not a machine.
inline constexpr int kMaxPoolThreads = 1024;

class ThreadPool {
 public:
  // Total threads including the calling thread, 1..kMaxPoolThreads (kiln::Error otherwise).
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into at most num_threads() contiguous static chunks of at least `grain`
  // items and runs fn(begin, end) on each, the caller taking the first chunk and then any
  // chunk no worker has claimed yet (a worker slow to wake does not hold the call up);
  // returns when all are done. Which thread runs a chunk is not fixed. Work too small for two chunks runs inline on the caller with no wake-up.
  // An exception thrown by any chunk is rethrown here (the first one caught wins) once every
  // chunk has finished. A call from inside a chunk (nested) runs inline, serially.
  // Concurrent callers from different threads are serialised.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    const int chunks = num_chunks(n, grain);
    if (chunks <= 1 || in_parallel_region()) {
      fn(int64_t{0}, n);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run_chunks(n, chunks, &invoke_range<Fn>, context_of(fn), /*pinned=*/false);
  }

  // Runs fn(thread_index) once on each of the num_threads() threads (index 0 is the caller),
  // e.g. to set up per-worker scratch. Nested inside a chunk it runs every index inline.
  template <typename F>
  void run_on_all(F&& fn) {
    if (num_threads_ == 1 || in_parallel_region()) {
      for (int i = 0; i < num_threads_; ++i) fn(i);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run_chunks(num_threads_, num_threads_, &invoke_index<Fn>, context_of(fn), /*pinned=*/true);
  }

  // True on a pool worker and on a caller while it runs its own chunk.
  static bool in_parallel_region();

 private:
  // Type erasure by function pointer + context: no std::function, so no heap allocation
  // per call.
  using RangeFn = void (*)(void* context, int64_t begin, int64_t end);

  template <typename Fn>
  static void invoke_range(void* context, int64_t begin, int64_t end) {
    (*static_cast<Fn*>(context))(begin, end);
  }
  template <typename Fn>
  static void invoke_index(void* context, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) (*static_cast<Fn*>(context))(static_cast<int>(i));
  }
  template <typename Fn>
  static void* context_of(Fn& fn) {
    return const_cast<void*>(static_cast<const void*>(std::addressof(fn)));
  }

  int num_chunks(int64_t n, int64_t grain) const {
    const int64_t by_grain = n / (grain > 1 ? grain : 1);
    if (by_grain <= 1) return 1;
    return by_grain < num_threads_ ? static_cast<int>(by_grain) : num_threads_;
  }

  // Runs the `chunks` balanced contiguous chunks of [0, n): chunk i on thread i when
  // `pinned`, else each on whichever thread claims it first (the caller starts with 0).
  void run_chunks(int64_t n, int chunks, RangeFn fn, void* context, bool pinned);

  struct State;
  int num_threads_;
  std::unique_ptr<State> state_;
};

// The process-wide default pool, created on first use with default_num_threads()
// threads. Ops do not use it directly: they run on current_context() (kiln/context.h),
// which holds its pool alive. The reference stays valid until the next set_num_threads.
ThreadPool& default_thread_pool();
// KILN_NUM_THREADS if set (an integer in 1..kMaxPoolThreads, else kiln::Error naming the
// variable and its value), else physical_core_count().
int default_num_threads();
// Replaces the default pool by one with n threads (1..kMaxPoolThreads, else
// kiln::Error). Safe while other threads compute: ops that already took their context
// finish on the old pool, which is destroyed when the last of them returns. Threads
// inside a ContextScope keep their own pool.
void set_num_threads(int n);
// Physical cores (not SMT siblings) this process may run on, also bounded by a cgroup CPU
// quota; >= 1.
int physical_core_count();

}  // namespace kiln
