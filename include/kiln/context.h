// The execution context: what a kernel runs with besides its arguments (the thread
// pool, per-worker scratch, the random generator; a stream later). Op front ends take it
// from the calling thread (current_context()) and pass it to the kernel explicitly, so
// no kernel looks anything up globally.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kiln/thread_pool.h"

namespace kiln {

class Generator;

class ExecutionContext {
 public:
  // Scratch slots per thread: a kernel and a helper it calls can each hold one.
  static constexpr int kScratchSlots = 4;

  // A context over `pool` (not null). A null generator means default_generator().
  explicit ExecutionContext(std::shared_ptr<ThreadPool> pool, Generator* generator = nullptr);

  ThreadPool& pool() const { return *pool_; }
  int num_threads() const { return pool_->num_threads(); }
  const std::shared_ptr<ThreadPool>& shared_pool() const { return pool_; }
  Generator& generator() const;

  // The calling thread's scratch buffer `slot` (0..kScratchSlots-1): at least `bytes`
  // long, 64-byte aligned, kept across calls (grown, never shrunk), so a kernel called
  // hundreds of times per token allocates nothing after the first call. Each pool
  // worker has its own. Valid until the same thread asks for the same slot again.
  void* scratch(int slot, size_t bytes) const;
  // Scratch for `count` elements of `element_size` bytes; a negative count or a byte
  // count that overflows is an error, never a wrapped (small) buffer.
  void* scratch_elements(int slot, int64_t count, size_t element_size) const;
  template <typename T>
  T* scratch_of(int slot, int64_t count) const {
    return static_cast<T*>(scratch_elements(slot, count, sizeof(T)));
  }

 private:
  std::shared_ptr<ThreadPool> pool_;
  Generator* generator_ = nullptr;
};

// The context ops run with on the calling thread: the innermost ContextScope on this
// thread, else the process default (default_num_threads() threads, changed by
// set_num_threads). It holds its pool alive, so a set_num_threads on another thread
// never pulls the pool from under a running op.
ExecutionContext current_context();

// Makes `context` the calling thread's current context for the scope's lifetime;
// scopes nest. This is how a C++ caller hands its own pool or generator to every op it
// calls, and how Python's `with kiln.threads(n):` works.
class ContextScope {
 public:
  explicit ContextScope(ExecutionContext context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  ExecutionContext context_;
  const ExecutionContext* previous_;
};

// A ContextScope over a fresh pool of `num_threads` threads (1..kMaxPoolThreads) and the
// current generator.
class ThreadsScope {
 public:
  explicit ThreadsScope(int num_threads);

 private:
  ContextScope scope_;
};

// Threads of the calling thread's current context.
int get_num_threads();

}  // namespace kiln
