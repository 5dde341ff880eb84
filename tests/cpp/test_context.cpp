// The execution context: scopes, thread counts, scratch, the device error, and changing
// the thread count while other threads compute (which used to free the pool under a
// running op).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/kernel_table.h"
#include "kiln/context.h"
#include "kiln/generator.h"
#include "kiln/llm.h"
#include "kiln/llm_synthetic.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/thread_pool.h"
#include "llm_model_test_util.h"
#include "test_util.h"

namespace kiln {
namespace {

using testing::expect_error;

// Restores the default pool's size when a test that changes it ends, pass or fail.
class DefaultThreadsGuard {
 public:
  DefaultThreadsGuard() : before_(get_num_threads()) {}
  ~DefaultThreadsGuard() { set_num_threads(before_); }
  int before() const { return before_; }

 private:
  int before_;
};

bool same_values(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

// Ops that go through the context on every call, on enough rows to split over threads.
Tensor op_chain(const Tensor& x) {
  const Tensor probs = softmax(x, 1);
  return log_softmax(probs.to(DType::BFloat16).to(DType::Float32), 0).clone();
}

// Changes the default thread count 1, 2, 3, 4, 1, ... until `stop`.
std::thread cycle_thread_counts(std::atomic<bool>& stop, std::atomic<int64_t>& changes) {
  return std::thread([&stop, &changes] {
    for (int i = 0; !stop.load(); ++i) {
      set_num_threads(1 + i % 4);
      changes.fetch_add(1);
    }
  });
}

TEST(ExecutionContext, CurrentContextIsTheDefaultPoolOutsideScopes) {
  DefaultThreadsGuard guard;
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  EXPECT_EQ(current_context().num_threads(), 3);
  EXPECT_EQ(&current_context().pool(), &default_thread_pool());
  EXPECT_EQ(&current_context().generator(), &default_generator());
}

TEST(ExecutionContext, ContextScopesNestAndRestore) {
  const int outside = get_num_threads();
  auto two = std::make_shared<ThreadPool>(2);
  auto three = std::make_shared<ThreadPool>(3);
  Generator own(42);
  {
    ContextScope outer(ExecutionContext(two, &own));
    EXPECT_EQ(get_num_threads(), 2);
    EXPECT_EQ(current_context().shared_pool(), two);
    EXPECT_EQ(&current_context().generator(), &own);
    {
      ContextScope inner{ExecutionContext(three)};
      EXPECT_EQ(get_num_threads(), 3);
      EXPECT_EQ(current_context().shared_pool(), three);
      EXPECT_EQ(&current_context().generator(), &default_generator());
    }
    EXPECT_EQ(current_context().shared_pool(), two);
    EXPECT_EQ(&current_context().generator(), &own);
  }
  EXPECT_EQ(get_num_threads(), outside);
}

TEST(ExecutionContext, ScopeHoldsItsPoolAlive) {
  std::weak_ptr<ThreadPool> watch;
  {
    auto pool = std::make_shared<ThreadPool>(2);
    watch = pool;
    ContextScope scope(ExecutionContext(std::move(pool)));
    EXPECT_FALSE(watch.expired());
    EXPECT_EQ(get_num_threads(), 2);
  }
  EXPECT_TRUE(watch.expired());
}

TEST(ExecutionContext, RejectsANullPool) {
  expect_error([] { (void)ExecutionContext(nullptr); }, ErrorKind::Runtime, "needs a thread pool");
}

TEST(ThreadsScope, SetsTheCountOnThisThreadOnly) {
  const int outside = get_num_threads();
  Generator own(7);
  ContextScope with_generator(ExecutionContext(current_context().shared_pool(), &own));
  {
    ThreadsScope scope(2);
    EXPECT_EQ(get_num_threads(), 2);
    EXPECT_EQ(&current_context().generator(), &own);  // keeps the current generator
    int other = 0;
    std::thread([&other] { other = get_num_threads(); }).join();
    EXPECT_EQ(other, default_thread_pool().num_threads());
    {
      ThreadsScope nested(3);
      EXPECT_EQ(get_num_threads(), 3);
    }
    EXPECT_EQ(get_num_threads(), 2);
  }
  EXPECT_EQ(get_num_threads(), outside);
}

TEST(ThreadsScope, IgnoresSetNumThreadsAndGivesTheSameResults) {
  DefaultThreadsGuard guard;
  const Tensor x = randn({257, 96});
  const Tensor reference = op_chain(x);
  ThreadsScope scope(3);
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 3);  // the scope's pool, not the default
  EXPECT_TRUE(same_values(op_chain(x), reference));
}

TEST(ThreadsScope, RejectsBadCounts) {
  expect_error([] { ThreadsScope scope(0); }, ErrorKind::Value, "num_threads must be between 1 and");
  expect_error([] { ThreadsScope scope(kMaxPoolThreads + 1); }, ErrorKind::Value, "num_threads");
}

TEST(ExecutionContextScratch, AlignedReusedAndGrown) {
  const ExecutionContext ctx = current_context();
  for (int slot = 0; slot < ExecutionContext::kScratchSlots; ++slot) {
    for (size_t bytes : {size_t{1}, size_t{63}, size_t{4096}, size_t{100'000}}) {
      void* p = ctx.scratch(slot, bytes);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "slot " << slot << ", " << bytes << " bytes";
      std::memset(p, 0xA5, bytes);  // the whole request is writable
    }
  }
  // Within its size a slot hands back the same block; a larger request grows it.
  float* a = ctx.scratch_of<float>(1, 1000);
  EXPECT_EQ(ctx.scratch_of<float>(1, 10), a);
  EXPECT_EQ(ctx.scratch_of<float>(1, 1000), a);
  float* big = ctx.scratch_of<float>(1, 10'000'000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  big[10'000'000 - 1] = 1.0f;
  EXPECT_EQ(ctx.scratch_of<float>(1, 5'000'000), big);
  // Slots are distinct, and so are threads.
  EXPECT_NE(ctx.scratch(0, 64), ctx.scratch(2, 64));
  void* mine = ctx.scratch(3, 256);
  void* theirs = nullptr;
  std::thread([&] { theirs = ctx.scratch(3, 256); }).join();
  EXPECT_NE(mine, theirs);
}

TEST(ExecutionContextScratch, EveryWorkerHasItsOwn) {
  const ExecutionContext ctx(std::make_shared<ThreadPool>(4));
  std::vector<void*> blocks(4, nullptr);
  ctx.pool().run_on_all([&](int i) { blocks[i] = ctx.scratch(0, 4096); });
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) EXPECT_NE(blocks[i], blocks[j]);
  }
}

TEST(ExecutionContextScratch, RejectsBadSlots) {
  const ExecutionContext ctx = current_context();
  expect_error([&] { ctx.scratch(-1, 8); }, ErrorKind::Runtime, "slot must be in [0, 4)");
  expect_error([&] { ctx.scratch(ExecutionContext::kScratchSlots, 8); }, ErrorKind::Runtime, "slot");
}

// A tensor whose storage claims to be on a CUDA device (host memory underneath, never
// touched): enough to reach the kernel tables in a CPU-only build.
Tensor fake_cuda_tensor(std::vector<float>& host) {
  auto storage = Storage::borrow(host.data(), host.size() * sizeof(float), nullptr, Device{DeviceType::CUDA, 0});
  return Tensor::from_storage(storage, {static_cast<int64_t>(host.size())}, {1}, 0, DType::Float32);
}

TEST(KernelTables, ADeviceWithoutKernelsIsAClearError) {
  std::vector<float> a(8), b(8);
  Tensor x = fake_cuda_tensor(a), y = fake_cuda_tensor(b);
  EXPECT_EQ(x.device().type, DeviceType::CUDA);
  expect_error([&] { x.copy_(y); }, ErrorKind::NotImplemented, "copy_: no kernel for device cuda");
  expect_error([&] { x.select(0, 0).item(); }, ErrorKind::NotImplemented, "item: no kernel for device cuda");
}

TEST(KernelTables, LookupByDeviceType) {
  struct Entries {
    int (*answer)() = nullptr;
    int (*missing)() = nullptr;
  };
  static KernelTable<Entries> table{"example"};
  table.install(DeviceType::CPU, Entries{[] { return 42; }, nullptr});
  EXPECT_TRUE(table.has(DeviceType::CPU));
  EXPECT_FALSE(table.has(DeviceType::CUDA));
  EXPECT_EQ(table.on(kCPU, "answer").answer(), 42);
  expect_error([&] { table.on(Device{DeviceType::CUDA, 1}, "linear"); }, ErrorKind::NotImplemented,
               "linear: no kernel for device cuda (the example kernels are not built for it)");
  expect_error([&] { require_kernel(table.on(kCPU, "missing").missing, kCPU, "missing"); }, ErrorKind::NotImplemented,
               "missing: no kernel for device cpu");
}

// set_num_threads used to destroy the pool a running op was using; now every op holds
// its context's pool until it returns. Ops are repeated while another thread replaces
// the default pool as fast as it can, and every result must equal the one computed
// before (these ops split rows, so the thread count does not change any value).
TEST(SetNumThreadsWhileComputing, OpsKeepTheirPoolAndTheirResults) {
  DefaultThreadsGuard guard;
  const Tensor x = randn({513, 130});
  const Tensor reference = op_chain(x);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> changes{0};
  std::thread changer = cycle_thread_counts(stop, changes);
  int mismatches = 0;
  int runs = 0;
  for (; runs < 2000 && (runs < 50 || changes.load() < 200); ++runs) {
    if (!same_values(op_chain(x), reference)) ++mismatches;
  }
  stop = true;
  changer.join();
  EXPECT_EQ(mismatches, 0) << "of " << runs << " runs";
  EXPECT_GT(changes.load(), 0);
}

// A synthetic Qwen3-MoE wide enough that its projections split over threads (the demo
// geometry: hidden 512; its vocabulary is the synthetic tokenizer's 613 ids), one layer,
// written once per process.
const std::string& threaded_model_dir() {
  struct Folder {
    std::string path;
    Folder() {
      path = (std::filesystem::temp_directory_path() / ("kiln_context_model_" + std::to_string(::getpid()))).string();
      llm::SyntheticModelOptions options;
      options.preset = "demo";
      options.num_layers = 1;
      options.seed = 3;
      options.out_dir = path;
      llm::make_synthetic_model(options);
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return folder.path;
}

// The same during a model's forward passes (prefill and decode, float32 weights), next
// to a thread that keeps changing the thread count. Before the execution context, 20
// passes were enough to crash (heap corruption, a segfault, or a wait on a pool's
// condition variable that set_num_threads had destroyed).
TEST(SetNumThreadsWhileComputing, ModelForwardKeepsItsPool) {
  DefaultThreadsGuard guard;
  llm::LoadOptions options;
  options.weights = llm::WeightFormat::Float32;
  options.max_context = 64;
  std::unique_ptr<llm::Model> model = llm::Model::load(threaded_model_dir(), options);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < 24; ++i) prompt.push_back((i * 977 + 5) % 600);
  const auto run = [&] {
    model->reset();
    Tensor prefill = model->forward(std::span(prompt).first(prompt.size() - 1), /*all_logits=*/true);
    Tensor decode = model->forward(std::span(prompt).last(1));
    return std::pair{prefill, decode};
  };
  const auto [prefill_ref, decode_ref] = run();

  std::atomic<bool> stop{false};
  std::atomic<int64_t> changes{0};
  std::thread changer = cycle_thread_counts(stop, changes);
  double worst = 0.0;
  int runs = 0;
  for (; runs < 500 && (runs < 40 || changes.load() < 200); ++runs) {
    const auto [prefill, decode] = run();
    // Reductions may split differently with another thread count: equal up to rounding.
    worst = std::max({worst, testing::relative_max_difference(prefill, prefill_ref),
                      testing::relative_max_difference(decode, decode_ref)});
  }
  stop = true;
  changer.join();
  EXPECT_LT(worst, 1e-5) << "over " << runs << " forward passes";
  EXPECT_GT(changes.load(), 0);
}

}  // namespace
}  // namespace kiln
