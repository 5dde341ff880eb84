// run_phases (backend/cpu/decode_block/phased_region.h), the one parallel region the
// fused decode blocks run their dependent steps in: every piece of every phase runs
// exactly once, no piece of a phase starts before every piece of the one before it has
// finished, claims are contiguous runs of at least the grain, a failure is rethrown
// without hanging, and guided_run's runs stay within their bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "backend/cpu/decode_block/phased_region.h"
#include "kiln/thread_pool.h"

namespace {

using kiln::ThreadPool;
using kiln::cpu::guided_run;
using kiln::cpu::run_phases;

constexpr int kPhases = 3;

// Records which pieces ran, how often, and whether a phase's piece started while an
// earlier phase still had pieces outstanding.
struct Recorder {
  std::vector<int64_t> counts[kPhases];
  std::unique_ptr<std::atomic<int64_t>[]> runs[kPhases];
  std::atomic<int64_t> finished[kPhases];
  std::atomic<bool> order_broken{false};
  int64_t grains[kPhases];
  int64_t throw_at = -1;  // a piece of phase 1 that throws

  std::atomic<int64_t> run_starts[kPhases];  // pieces a thread ran not right after its previous one

  explicit Recorder(const std::vector<int64_t>& pieces, const std::vector<int64_t>& g) {
    for (int p = 0; p < kPhases; ++p) {
      counts[p].assign(1, pieces[p]);
      runs[p] = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(pieces[p] > 0 ? pieces[p] : 1));
      for (int64_t i = 0; i < pieces[p]; ++i) runs[p][i] = 0;
      finished[p] = 0;
      run_starts[p] = 0;
      grains[p] = g[p];
    }
  }
};

struct RecordingWork {
  Recorder& r;
  struct Local {
    int64_t last = -2;  // the piece this thread ran before in this phase
  };
  void enter(int, Local& l) const { l.last = -2; }
  int64_t pieces(int phase, Local&) const { return r.counts[phase][0]; }
  int64_t grain(int phase) const { return r.grains[phase]; }
  void run(int phase, int64_t piece, Local& l) const {
    for (int q = 0; q < phase; ++q) {
      if (r.finished[q].load() != r.counts[q][0]) r.order_broken = true;
    }
    if (piece != l.last + 1) r.run_starts[phase].fetch_add(1);
    l.last = piece;
    r.runs[phase][piece].fetch_add(1);
    r.finished[phase].fetch_add(1);
    if (phase == 1 && piece == r.throw_at) throw std::runtime_error("piece failed");
  }
};

TEST(PhasedRegion, GuidedRunStaysWithinItsBounds) {
  EXPECT_EQ(guided_run(100, 1, 2), 25);   // a quarter of what is left with 2 threads
  EXPECT_EQ(guided_run(100, 1, 4), 12);
  EXPECT_EQ(guided_run(100, 30, 4), 30);  // never below the grain
  EXPECT_EQ(guided_run(10, 30, 2), 10);   // never more than is left
  EXPECT_EQ(guided_run(7, 1, 1), 7);      // one thread takes everything
  EXPECT_EQ(guided_run(1, 1, 8), 1);
  EXPECT_EQ(guided_run(3, 0, 8), 1);      // a zero grain still makes progress
  for (int64_t remaining = 1; remaining < 300; ++remaining) {
    for (int64_t grain : {1, 2, 7}) {
      for (int64_t threads : {1, 2, 3, 16}) {
        const int64_t run = guided_run(remaining, grain, threads);
        EXPECT_GE(run, 1);
        EXPECT_LE(run, remaining);
        EXPECT_GE(run, std::min(grain, remaining));
      }
    }
  }
}

TEST(PhasedRegion, EveryPieceRunsOnceAndPhasesStayInOrder) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (const auto& pieces : std::vector<std::vector<int64_t>>{{16, 1536, 512}, {0, 1, 2}, {1, 0, 7}, {5, 33, 1}}) {
      for (int64_t grain : {1, 2, 64}) {
        Recorder rec(pieces, {grain, grain, grain});
        RecordingWork work{rec};
        run_phases<kPhases>(pool, work);
        for (int p = 0; p < kPhases; ++p) {
          for (int64_t i = 0; i < pieces[p]; ++i) {
            ASSERT_EQ(rec.runs[p][i].load(), 1) << "threads " << threads << " phase " << p << " piece " << i;
          }
        }
        EXPECT_FALSE(rec.order_broken.load()) << "threads " << threads;
      }
    }
  }
}

// The claims are contiguous runs: with 2 threads over 1536 pieces of grain 2 the threads
// see a few dozen runs (guided: 384, 288, 216, ... pieces), not 768 alternating pairs.
TEST(PhasedRegion, ThreadsClaimLongContiguousRuns) {
  ThreadPool pool(2);
  Recorder rec({1, 1536, 1}, {1, 2, 1});
  RecordingWork work{rec};
  run_phases<kPhases>(pool, work);
  // Two claims of one thread that happen to be adjacent count as one run, so this is at
  // most the number of claims: log(768) / log(4/3), about 23, then a few of the grain.
  EXPECT_GE(rec.run_starts[1].load(), 1);
  EXPECT_LE(rec.run_starts[1].load(), 40);
  for (int64_t i = 0; i < 1536; ++i) ASSERT_EQ(rec.runs[1][i].load(), 1);
}

TEST(PhasedRegion, AFailedPieceIsRethrownAndTheRestSkipped) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    Recorder rec({4, 100, 50}, {1, 1, 1});
    rec.throw_at = 37;
    RecordingWork work{rec};
    EXPECT_THROW(run_phases<kPhases>(pool, work), std::runtime_error);
    for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(rec.runs[2][i].load(), 0) << "threads " << threads;
  }
}

}  // namespace
