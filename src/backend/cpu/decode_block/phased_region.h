// Several dependent phases of one kernel in ONE parallel region of the pool (internal to
// the fused decode blocks).
//
// A decode block is a chain of small steps that each need all of the previous one (the
// router's logits before top-k, every gate/up row before the down projection). Run as
// separate parallel_for calls, each step pays a region's start and end; here the pool is
// entered once and the phases are separated by completion counters instead:
//   - phase p has pieces(p) pieces; a thread claims contiguous runs of them from a
//     shared counter (guided: half a 1/threads share of what is left, at least
//     grain(p)) and counts the ones it finished; a thread with nothing left to claim
//     spins until every piece of the phase is done, then goes on to the next. Long runs
//     matter: a piece is a few rows of a weight matrix, and a thread streams its run
//     with the next rows prefetched. Runs of grain(p) (64 KiB) handed out in turn made
//     the two threads alternate rows, each prefetching rows the other then read: the
//     MoE block ran 1.03-1.7x slower that way at decode shapes (docs/bench.md,
//     2026-12-02);
//   - before a phase, each thread may set itself up (`enter`): that work is redundant
//     (every thread computes the same small thing, e.g. the normalised row or the
//     routing) and deterministic, so no thread waits for one that computes it;
//   - a thread that arrives late (its chunk claimed after the others have finished some
//     phases, e.g. a worker woken late on a loaded machine) skips every finished phase
//     without setting up for it, so it never holds the others up.
// Pieces are claimed dynamically, so which thread runs a piece is not fixed, but each
// piece's arithmetic is, so results do not depend on the thread count.
// A piece that throws does not hang the others: its pieces still count as done, the
// remaining phases are skipped, and the first exception is rethrown by run_phases.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "kiln/thread_pool.h"

namespace kiln::cpu {

inline void phase_spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Pauses a waiting thread spins through before it yields its core (a pause is ~40-140
// cycles, so this is some tens of microseconds).
inline constexpr int kSpinsBeforeYield = 1024;

// Pieces a thread claims when `remaining` are left: half its 1/threads share of them
// (guided self-scheduling), at least `grain`, at most all. Half, not the whole share: a
// thread descheduled in the middle of its run (a loaded machine) holds the others up
// for at most that run, and runs of an eighth of a phase and less are still long
// stretches of rows (hundreds of KiB at decode sizes).
inline int64_t guided_run(int64_t remaining, int64_t grain, int64_t threads) {
  const int64_t share = threads > 1 ? remaining / (2 * threads) : remaining;
  const int64_t least = grain > 1 ? grain : 1;
  const int64_t run = share > least ? share : least;
  return run < remaining ? run : remaining;
}

// Work provides, for phases 0 .. kPhases-1:
//   int64_t pieces(int phase, Local& local)  the phase's piece count (may set local up)
//   int64_t grain(int phase)                 the fewest pieces a thread claims at once
//   void enter(int phase, Local& local)      per-thread set-up before claiming pieces
//   void run(int phase, int64_t piece, Local& local)
// and a default-constructible Local (per-thread state, fresh for every participant).
template <int kPhases, class Work>
void run_phases(ThreadPool& pool, Work& work) {
  struct alignas(64) Counter {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::atomic<int64_t> total{-1};  // the piece count, once a thread has computed it
  };
  Counter counters[kPhases];
  const int64_t threads = pool.num_threads();
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;

  const auto participant = [&] {
    typename Work::Local local;
    for (int p = 0; p < kPhases; ++p) {
      Counter& c = counters[p];
      const int64_t known = c.total.load(std::memory_order_acquire);
      if (known >= 0 && c.done.load(std::memory_order_acquire) >= known) continue;  // finished: skip
      if (failed.load(std::memory_order_acquire)) return;
      int64_t n = 0;
      try {
        work.enter(p, local);
        n = work.pieces(p, local);
      } catch (...) {
        // Set-up is redundant per thread: a failure here fails every thread alike.
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed.store(true, std::memory_order_release);
        return;
      }
      c.total.store(n, std::memory_order_release);
      const int64_t grain = work.grain(p) > 0 ? work.grain(p) : 1;
      while (true) {
        int64_t begin = c.next.load(std::memory_order_relaxed);
        int64_t end = begin;
        do {
          if (begin >= n) break;
          end = begin + guided_run(n - begin, grain, threads);
        } while (!c.next.compare_exchange_weak(begin, end, std::memory_order_relaxed));
        if (begin >= n) break;
        if (!failed.load(std::memory_order_relaxed)) {
          try {
            for (int64_t i = begin; i < end; ++i) work.run(p, i, local);
          } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) error = std::current_exception();
            failed.store(true, std::memory_order_release);
          }
        }
        c.done.fetch_add(end - begin, std::memory_order_acq_rel);
      }
      // The pieces still running are short; past a few microseconds their thread has
      // been descheduled (a loaded machine), so give the core up instead of spinning on.
      for (int spins = 0; c.done.load(std::memory_order_acquire) < n; ++spins) {
        if (spins < kSpinsBeforeYield) {
          phase_spin_pause();
        } else {
          std::this_thread::yield();
        }
      }
    }
  };
  // One chunk per thread; the caller takes any chunk no worker has started, so a late
  // worker finds everything done (ThreadPool::parallel_for). Nested or on one thread,
  // the single chunk runs every phase alone.
  pool.parallel_for(pool.num_threads(), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) participant();
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace kiln::cpu
