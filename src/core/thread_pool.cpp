// ThreadPool: per-worker wake-up slots, a spin-then-block wait on both sides, chunks
// claimed from a shared counter (so the caller takes a chunk no worker has started), and
// the process-wide default pool.
#include "kiln/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "core/default_pool.h"
#include "kiln/error.h"

namespace kiln {
namespace {

// Decode runs one small kernel after another with a few microseconds of front-end work
// between them; a worker that spins that long catches the next kernel without a futex
// wake-up (tens of microseconds), and one that blocks after it leaves the core free.
constexpr auto kSpinBeforeBlock = std::chrono::microseconds(20);

thread_local bool t_in_parallel_region = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins (with pause instructions) until done() or kSpinBeforeBlock has passed; true if
// done() became true. Reading the clock every few pauses keeps its cost out of the loop.
template <typename Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinBeforeBlock;
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

class InParallelRegion {
 public:
  InParallelRegion() { t_in_parallel_region = true; }
  ~InParallelRegion() { t_in_parallel_region = false; }
};

void check_thread_count(int n, std::string_view what) {
  KILN_CHECK_KIND(n >= 1 && n <= kMaxPoolThreads, Value, what, "num_threads must be between 1 and {}, got {}",
                  kMaxPoolThreads, n);
}

}  // namespace

// One per worker, on its own cache lines so that waking one worker does not disturb
// another's spin.
struct alignas(64) WorkerSlot {
  std::atomic<uint64_t> epoch{0};  // bumped by the caller to hand this worker a chunk
  std::mutex mutex;
  std::condition_variable wake;
  std::thread thread;
};

struct ThreadPool::State {
  explicit State(int num_workers) : slots(new WorkerSlot[num_workers]) {}

  std::unique_ptr<WorkerSlot[]> slots;  // slot w-1 belongs to thread w
  std::mutex call_mutex;                // one parallel call at a time
  uint64_t epoch = 0;                   // guarded by call_mutex
  std::atomic<bool> stopping{false};

  // The current call, written by the caller before it publishes the call in `claims`
  // (release) and read by a worker only after it claimed a chunk of that call (acquire).
  RangeFn fn = nullptr;
  void* context = nullptr;
  int64_t n = 0;
  int chunks = 0;
  // run_on_all: chunk i belongs to thread i (per-thread set-up), so nobody takes another's.
  bool pinned = false;

  // The next unclaimed chunk of the current call, packed with the call's epoch and chunk
  // count so a worker that wakes after its call ended cannot claim a chunk of the next:
  // bits 63..32 epoch, 31..16 chunk count, 15..0 next chunk. Chunks are claimed in order
  // by whoever is free first: a worker that is slow to wake (a vCPU the host parked
  // while the process sat idle can take 50+ us) no longer holds the caller waiting for
  // a chunk it has not even started; the caller runs it itself.
  alignas(64) std::atomic<uint64_t> claims{0};
  alignas(64) std::atomic<int> remaining{0};  // chunks not yet finished, the caller's included
  std::mutex done_mutex;
  std::condition_variable done;
  std::atomic<bool> has_error{false};
  std::exception_ptr first_error;  // written only by the thread that set has_error

  void run_chunk(int index) {
    const int64_t base = n / chunks;
    const int64_t extra = n % chunks;  // the first `extra` chunks get one more item
    const int64_t begin = index * base + std::min<int64_t>(index, extra);
    const int64_t end = begin + base + (index < extra ? 1 : 0);
    try {
      fn(context, begin, end);
    } catch (...) {
      if (!has_error.exchange(true, std::memory_order_acq_rel)) first_error = std::current_exception();
    }
  }

  void worker_main(int index) {
    t_in_parallel_region = true;
    WorkerSlot& slot = slots[index - 1];
    uint64_t seen = 0;
    for (;;) {
      const auto has_new_epoch = [&] { return slot.epoch.load(std::memory_order_acquire) != seen; };
      if (!spin_until(has_new_epoch)) {
        std::unique_lock lock(slot.mutex);
        slot.wake.wait(lock, has_new_epoch);
      }
      seen = slot.epoch.load(std::memory_order_acquire);
      if (stopping.load(std::memory_order_acquire)) return;
      if (pinned_call(seen)) {
        run_chunk(index);
        finish_chunk();
      } else {
        for (int chunk; (chunk = claim_chunk(seen)) >= 0;) {
          run_chunk(chunk);
          finish_chunk();
        }
      }
    }
  }

  static constexpr uint64_t pack(uint64_t epoch, int chunks, int next) {
    return (epoch << 32) | (static_cast<uint64_t>(chunks) << 16) | static_cast<uint64_t>(next);
  }

  // A pinned call never changes `claims` while it runs, so its epoch there tells whether
  // the call this worker was woken for is pinned.
  bool pinned_call(uint64_t epoch) const {
    const uint64_t word = claims.load(std::memory_order_acquire);
    return (word >> 32) == (epoch & 0xffffffffu) && (word & 0xffffu) == 0xffffu;
  }

  // The next unclaimed chunk of call `epoch`, or -1 when that call has none left (or has
  // ended and another began).
  int claim_chunk(uint64_t epoch) {
    uint64_t word = claims.load(std::memory_order_acquire);
    for (;;) {
      const int chunks_of_call = static_cast<int>((word >> 16) & 0xffffu);
      const int next = static_cast<int>(word & 0xffffu);
      if ((word >> 32) != (epoch & 0xffffffffu) || next >= chunks_of_call) return -1;
      if (claims.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return next;
      }
    }
  }

  void finish_chunk() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Notifying under the lock: the caller checks `remaining` under it before sleeping.
      std::lock_guard lock(done_mutex);
      done.notify_one();
    }
  }

  void wake_worker(int index, uint64_t new_epoch) {
    WorkerSlot& slot = slots[index - 1];
    slot.epoch.store(new_epoch, std::memory_order_release);
    // Taking the mutex orders this store against a worker that is between its last check
    // and its wait; notify_one costs no system call when nobody sleeps.
    { std::lock_guard lock(slot.mutex); }
    slot.wake.notify_one();
  }

  // Stops and joins threads 1..started-1.
  void stop_workers(int started) {
    stopping.store(true, std::memory_order_release);
    const uint64_t new_epoch = ++epoch;
    for (int w = 1; w < started; ++w) wake_worker(w, new_epoch);
    for (int w = 1; w < started; ++w) slots[w - 1].thread.join();
  }

  void wait_for_workers() {
    const auto all_done = [&] { return remaining.load(std::memory_order_acquire) == 0; };
    if (spin_until(all_done)) return;
    std::unique_lock lock(done_mutex);
    done.wait(lock, all_done);
  }
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  check_thread_count(num_threads, "ThreadPool");
  state_ = std::make_unique<State>(num_threads - 1);
  int started = 1;
  try {
    for (; started < num_threads; ++started) {
      state_->slots[started - 1].thread =
          std::thread([state = state_.get(), w = started] { state->worker_main(w); });
    }
  } catch (...) {
    // The system refused a thread: stop the ones already running before the error leaves.
    state_->stop_workers(started);
    throw;
  }
}

ThreadPool::~ThreadPool() {
  std::lock_guard call_lock(state_->call_mutex);
  state_->stop_workers(num_threads_);
}

bool ThreadPool::in_parallel_region() { return t_in_parallel_region; }

void ThreadPool::run_chunks(int64_t n, int chunks, RangeFn fn, void* context, bool pinned) {
  State& s = *state_;
  std::lock_guard call_lock(s.call_mutex);
  s.fn = fn;
  s.context = context;
  s.n = n;
  s.chunks = chunks;
  s.pinned = pinned;
  const uint64_t epoch = ++s.epoch;
  if (pinned) {
    s.remaining.store(chunks - 1, std::memory_order_relaxed);
    s.claims.store(State::pack(epoch & 0xffffffffu, 0xffff, 0xffff), std::memory_order_release);
  } else {
    s.remaining.store(chunks, std::memory_order_relaxed);
    // Chunk 0 is the caller's from the start, so its wake-ups overlap its own work.
    s.claims.store(State::pack(epoch & 0xffffffffu, chunks, 1), std::memory_order_release);
  }
  for (int w = 1; w < chunks; ++w) s.wake_worker(w, epoch);
  {
    InParallelRegion region;
    s.run_chunk(0);
    if (!pinned) {
      s.finish_chunk();
      for (int chunk; (chunk = s.claim_chunk(epoch)) >= 0;) {
        s.run_chunk(chunk);
        s.finish_chunk();
      }
    }
  }
  s.wait_for_workers();
  if (s.has_error.load(std::memory_order_acquire)) {
    std::exception_ptr error = std::exchange(s.first_error, nullptr);
    s.has_error.store(false, std::memory_order_relaxed);
    std::rethrow_exception(error);
  }
}

// ---------------------------------------------------------------------------------------
// Core counting

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// CPUs in this process's affinity mask, grouped by physical core through each CPU's SMT
// sibling list (identical for siblings). 0 when sysfs topology is unavailable.
int cores_from_sysfs_topology() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 0;
  std::set<std::string> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const std::string siblings = read_first_line("/sys/devices/system/cpu/cpu" + std::to_string(cpu) +
                                                 "/topology/thread_siblings_list");
    if (siblings.empty()) return 0;
    cores.insert(siblings);
  }
  return static_cast<int>(cores.size());
}

// A container limited to `quota/period` CPUs gets no more than that many busy threads;
// more would only be descheduled mid-kernel. 0 when there is no limit.
int cgroup_cpu_limit() {
  const std::string v2 = read_first_line("/sys/fs/cgroup/cpu.max");  // "max 100000" or "200000 100000"
  long long quota = -1, period = 0;
  if (!v2.empty()) {
    if (std::sscanf(v2.c_str(), "%lld %lld", &quota, &period) != 2) return 0;
  } else {
    const std::string q = read_first_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    const std::string p = read_first_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
    if (q.empty() || p.empty()) return 0;
    quota = std::atoll(q.c_str());
    period = std::atoll(p.c_str());
  }
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>((quota + period - 1) / period);
}

int detect_physical_cores() {
  int cores = cores_from_sysfs_topology();
  if (cores <= 0) {
    // No topology (some containers hide /sys): count the CPUs we may use; sharing a core
    // between SMT siblings costs less than leaving a core idle.
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    cores = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                ? CPU_COUNT(&allowed)
                : static_cast<int>(std::thread::hardware_concurrency());
  }
  const int quota = cgroup_cpu_limit();
  if (quota > 0) cores = std::min(cores, quota);
  return std::clamp(cores, 1, kMaxPoolThreads);
}

std::mutex g_default_pool_mutex;
std::shared_ptr<ThreadPool> g_default_pool;

}  // namespace

int physical_core_count() {
  static const int count = detect_physical_cores();
  return count;
}

int default_num_threads() {
  const char* env = std::getenv("KILN_NUM_THREADS");
  if (env == nullptr) return physical_core_count();
  const std::string_view text(env);
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  KILN_CHECK_KIND(
      ec == std::errc() && end == text.data() + text.size() && value >= 1 && value <= kMaxPoolThreads, Value,
      "KILN_NUM_THREADS", "expected a positive integer of at most {}, got KILN_NUM_THREADS='{}'",
      kMaxPoolThreads, text);
  return value;
}

std::shared_ptr<ThreadPool> default_pool_shared() {
  std::lock_guard lock(g_default_pool_mutex);
  if (!g_default_pool) g_default_pool = std::make_shared<ThreadPool>(default_num_threads());
  return g_default_pool;
}

ThreadPool& default_thread_pool() { return *default_pool_shared(); }

void set_num_threads(int n) {
  check_thread_count(n, "set_num_threads");
  // Built outside the lock (starting threads takes a while); the old pool is released
  // by whoever holds it last.
  auto fresh = std::make_shared<ThreadPool>(n);
  std::shared_ptr<ThreadPool> old;
  std::lock_guard lock(g_default_pool_mutex);
  if (g_default_pool && g_default_pool->num_threads() == n) return;
  old = std::exchange(g_default_pool, std::move(fresh));
}

}  // namespace kiln
