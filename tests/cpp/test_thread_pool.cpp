// ThreadPool: coverage of every index, chunking rules, chunks taken by the caller when
// workers are late, nesting, exceptions, concurrent callers, and KILN_NUM_THREADS validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/error.h"
#include "kiln/thread_pool.h"

using namespace kiln;

namespace {

struct Chunk {
  int64_t begin, end;
  std::thread::id thread;
};

// Runs parallel_for and returns its chunks in order of `begin`.
std::vector<Chunk> record_chunks(ThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    std::lock_guard lock(mutex);
    chunks.push_back({begin, end, std::this_thread::get_id()});
  });
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  return chunks;
}

// Sets an environment variable for one scope and restores the previous value after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 8, 63, 64, 65, 1000, 4097}) {
      for (int64_t grain : {0, 1, 2, 3, 16, 100, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
              << "index " << i << " n=" << n << " grain=" << grain << " threads=" << threads;
        }
      }
    }
  }
}

TEST(ThreadPool, ChunksAreContiguousBalancedAndAtLeastGrain) {
  ThreadPool pool(4);
  for (int64_t n : {10, 17, 100, 1001}) {
    for (int64_t grain : {1, 3, 10, 40}) {
      const std::vector<Chunk> chunks = record_chunks(pool, n, grain);
      const int64_t expected = std::clamp<int64_t>(n / grain, 1, 4);
      ASSERT_EQ(static_cast<int64_t>(chunks.size()), expected) << "n=" << n << " grain=" << grain;
      int64_t next = 0;
      for (const Chunk& c : chunks) {
        EXPECT_EQ(c.begin, next);
        EXPECT_GE(c.end - c.begin, std::min(grain, n));
        // Static balanced split: chunk sizes differ by at most one item.
        EXPECT_LE(c.end - c.begin, n / expected + 1);
        next = c.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ThreadPool, SmallWorkRunsInlineOnCaller) {
  ThreadPool pool(4);
  for (int64_t n : {1, 5, 9}) {
    const std::vector<Chunk> chunks = record_chunks(pool, n, 10);  // n < 2 * grain
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].begin, 0);
    EXPECT_EQ(chunks[0].end, n);
    EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
  }
}

TEST(ThreadPool, CallerTakesFirstChunkAndWorkersTheRest) {
  ThreadPool pool(3);
  // Every chunk waits until all three have started, so no thread can run two of them:
  // the caller runs the first and each worker one of the others.
  std::atomic<int> started{0};
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(300, 1, [&](int64_t begin, int64_t end) {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (started.load() < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    std::lock_guard lock(mutex);
    chunks.push_back({begin, end, std::this_thread::get_id()});
  });
  ASSERT_EQ(chunks.size(), 3u);
  std::sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
  std::set<std::thread::id> distinct;
  for (const Chunk& c : chunks) distinct.insert(c.thread);
  EXPECT_EQ(distinct.size(), 3u);
}

TEST(ThreadPool, CallerRunsChunksNoWorkerHasClaimed) {
  // Workers that sleep (the pool sat idle) wake late; the caller does not wait for them
  // to start their chunks but runs whatever is unclaimed, so every chunk still runs
  // exactly once, whoever runs it, call after call, idle or not.
  ThreadPool pool(4);
  for (int call = 0; call < 200; ++call) {
    if (call % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let the workers block
    const std::vector<Chunk> chunks = record_chunks(pool, 4000, 1);
    ASSERT_EQ(chunks.size(), 4u);
    int64_t expected_begin = 0;
    for (const Chunk& c : chunks) {
      EXPECT_EQ(c.begin, expected_begin);
      EXPECT_EQ(c.end - c.begin, 1000);
      expected_begin = c.end;
    }
  }
}

TEST(ThreadPool, NestedParallelForRunsInlineSerially) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(64 * 64);
  std::atomic<int> nested_calls_on_other_threads{0};
  pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    EXPECT_TRUE(ThreadPool::in_parallel_region());
    for (int64_t row = begin; row < end; ++row) {
      const auto outer_thread = std::this_thread::get_id();
      pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
        if (std::this_thread::get_id() != outer_thread) nested_calls_on_other_threads.fetch_add(1);
        EXPECT_EQ(b, 0);  // one inline call over the whole range
        EXPECT_EQ(e, 64);
        for (int64_t col = b; col < e; ++col) hits[static_cast<size_t>(row * 64 + col)].fetch_add(1);
      });
    }
  });
  EXPECT_FALSE(ThreadPool::in_parallel_region());
  EXPECT_EQ(nested_calls_on_other_threads.load(), 0);
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ExceptionFromCallersChunkPropagates) {
  ThreadPool pool(4);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallel_for(4, 1,
                                 [&](int64_t begin, int64_t) {
                                   if (begin == 0) throw std::runtime_error("caller chunk");
                                   finished.fetch_add(1);
                                 }),
               std::runtime_error);
  // The call returned only after the other chunks had finished.
  EXPECT_EQ(finished.load(), 3);
  EXPECT_FALSE(ThreadPool::in_parallel_region());
}

TEST(ThreadPool, ExceptionFromWorkerChunkPropagatesAndPoolStillWorks) {
  ThreadPool pool(4);
  for (int attempt = 0; attempt < 20; ++attempt) {
    try {
      pool.parallel_for(4, 1, [&](int64_t begin, int64_t) {
        if (begin == 3) KILN_CHECK(false, "test", "worker chunk {}", begin);
      });
      FAIL() << "expected kiln::Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("worker chunk 3"), std::string::npos);
    }
  }
  // Every chunk throwing: exactly one exception comes out.
  EXPECT_THROW(pool.parallel_for(4, 1, [](int64_t, int64_t) { throw std::logic_error("all"); }),
               std::logic_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(ThreadPool, InlineExceptionPropagates) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(1, 1, [](int64_t, int64_t) { throw std::out_of_range("inline"); }),
               std::out_of_range);
}

TEST(ThreadPool, RunOnAllHitsEveryThreadIndexOnDistinctThreads) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(threads));
    std::vector<std::thread::id> ids(static_cast<size_t>(threads));
    pool.run_on_all([&](int t) {
      hits[static_cast<size_t>(t)].fetch_add(1);
      ids[static_cast<size_t>(t)] = std::this_thread::get_id();
    });
    for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    EXPECT_EQ(std::set<std::thread::id>(ids.begin(), ids.end()).size(), static_cast<size_t>(threads));
  }
}

TEST(ThreadPool, RunOnAllNestedRunsEveryIndexInline) {
  ThreadPool pool(3);
  std::atomic<int> inner_calls{0};
  pool.run_on_all([&](int) { pool.run_on_all([&](int) { inner_calls.fetch_add(1); }); });
  EXPECT_EQ(inner_calls.load(), 9);
}

TEST(ThreadPool, ConcurrentCallersFromTwoThreads) {
  ThreadPool pool(3);
  constexpr int64_t kN = 10000;
  const auto hammer = [&pool](int64_t* total) {
    for (int round = 0; round < 200; ++round) {
      std::atomic<int64_t> sum{0};
      pool.parallel_for(kN, 16, [&](int64_t begin, int64_t end) {
        int64_t local = 0;
        for (int64_t i = begin; i < end; ++i) local += i;
        sum.fetch_add(local);
      });
      *total += sum.load();
    }
  };
  int64_t total_a = 0, total_b = 0;
  std::thread a(hammer, &total_a), b(hammer, &total_b);
  a.join();
  b.join();
  EXPECT_EQ(total_a, 200 * kN * (kN - 1) / 2);
  EXPECT_EQ(total_b, 200 * kN * (kN - 1) / 2);
}

TEST(ThreadPool, ManyBackToBackCalls) {
  // Exercises the spin-then-block hand-off in both directions: tiny bodies, then a pause
  // long enough for the workers to fall asleep, then tiny bodies again.
  ThreadPool pool(2);
  std::atomic<int64_t> count{0};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 2000; ++i) {
      pool.parallel_for(2, 1, [&](int64_t begin, int64_t end) { count.fetch_add(end - begin); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(count.load(), 3 * 2000 * 2);
}

TEST(ThreadPool, RejectsBadThreadCounts) {
  EXPECT_THROW(ThreadPool(0), Error);
  EXPECT_THROW(ThreadPool(-3), Error);
  EXPECT_THROW(ThreadPool(kMaxPoolThreads + 1), Error);
  EXPECT_THROW(set_num_threads(0), Error);
}

TEST(ThreadPoolDefault, PhysicalCoresAndDefaultPool) {
  EXPECT_GE(physical_core_count(), 1);
  EXPECT_LE(physical_core_count(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const int before = default_thread_pool().num_threads();
  set_num_threads(3);
  EXPECT_EQ(default_thread_pool().num_threads(), 3);
  set_num_threads(before);
  EXPECT_EQ(default_thread_pool().num_threads(), before);
}

TEST(ThreadPoolDefault, KilnNumThreadsIsValidated) {
  {
    ScopedEnv env("KILN_NUM_THREADS", "3");
    EXPECT_EQ(default_num_threads(), 3);
  }
  for (const char* bad : {"0", "-2", "abc", "4x", "", " 4", "2.5", "99999999999"}) {
    ScopedEnv env("KILN_NUM_THREADS", bad);
    try {
      default_num_threads();
      FAIL() << "KILN_NUM_THREADS='" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Value);
      const std::string message = e.what();
      EXPECT_NE(message.find("KILN_NUM_THREADS"), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("'") + bad + "'"), std::string::npos) << message;
    }
  }
  {
    ScopedEnv env("KILN_NUM_THREADS", "1");
    unsetenv("KILN_NUM_THREADS");
    EXPECT_EQ(default_num_threads(), physical_core_count());
  }
}
