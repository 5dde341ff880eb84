// Hostile use of kiln's C++ API (issue classes 2, 4 and 5): read-only memory, one model
// or generator shared by several threads, and error messages that name the op the
// caller used rather than kiln's internals.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/reduce/reduce_kernels.h"
#include "kiln/generator.h"
#include "kiln/llm.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/index.h"
#include "kiln/ops/moe.h"
#include "kiln/ops/reduce.h"
#include "llm/checkpoint.h"
#include "llm_model_test_util.h"
#include "test_util.h"

namespace {

using namespace kiln;
using kiln::testing::expect_error;
using kiln::testing::tiny_model_dir;

// ---- class 2: read-only memory ----

// A tensor over memory the test owns, marked read-only as from_numpy marks a read-only
// array.
Tensor read_only_tensor(std::vector<float>& data) {
  auto storage = Storage::borrow(data.data(), data.size() * sizeof(float), nullptr);
  storage->read_only = true;
  return Tensor::from_storage(storage, {static_cast<int64_t>(data.size())}, {1}, 0, DType::Float32);
}

TEST(HostileReadOnly, InPlaceOpsRaiseAndLeaveTheMemoryAlone) {
  std::vector<float> data = {1, 2, 3, 4};
  Tensor t = read_only_tensor(data);
  const std::string needle = "cannot write to a read-only tensor";
  expect_error([&] { t.copy_(zeros({4})); }, ErrorKind::Runtime, "copy_: " + needle);
  expect_error([&] { t.fill_(Scalar(7.0)); }, ErrorKind::Runtime, "fill_: " + needle);
  expect_error([&] { t.zero_(); }, ErrorKind::Runtime, needle);
  expect_error([&] { add_(t, Scalar(1.0)); }, ErrorKind::Runtime, "add_: " + needle);
  expect_error([&] { sub_(t, ones({4})); }, ErrorKind::Runtime, "sub_: " + needle);
  expect_error([&] { mul_(t, Scalar(2.0)); }, ErrorKind::Runtime, "mul_: " + needle);
  expect_error([&] { div_(t, Scalar(2.0)); }, ErrorKind::Runtime, "div_: " + needle);
  const Tensor index = zeros({1}, DType::Int64);
  expect_error([&] { scatter_add_(t, 0, index, ones({1})); }, ErrorKind::Runtime, "scatter_add_: " + needle);
  expect_error([&] { index_add_(t, 0, index, ones({1})); }, ErrorKind::Runtime, "index_add_: " + needle);
  expect_error([&] { masked_fill_(t, ones({4}, DType::Bool), Scalar(0.0)); }, ErrorKind::Runtime,
               "masked_fill_: " + needle);
  // Views share the storage, so they are read-only too.
  expect_error([&] { t.narrow(0, 1, 2).fill_(Scalar(0.0)); }, ErrorKind::Runtime, needle);
  EXPECT_EQ(data, (std::vector<float>{1, 2, 3, 4}));

  // Reading, out-of-place ops and copies work; a copy is writable.
  EXPECT_DOUBLE_EQ(sum(t).item().to_double(), 10.0);
  EXPECT_DOUBLE_EQ(add(t, Scalar(1.0)).at({3}).to_double(), 5.0);
  Tensor copy = t.clone();
  add_(copy, Scalar(1.0));
  EXPECT_DOUBLE_EQ(copy.at({0}).to_double(), 2.0);
  // The out-of-place forms of the index ops write to a clone.
  EXPECT_DOUBLE_EQ(index_add(t, 0, index, ones({1})).at({0}).to_double(), 2.0);
}

TEST(HostileReadOnly, CheckpointTensorsAreReadOnly) {
  // A safetensors file is mapped PROT_READ: a write would fault, so it must raise.
  const llm::Checkpoint checkpoint = llm::Checkpoint::open(tiny_model_dir("qwen3_moe"));
  Tensor weight = checkpoint.get(checkpoint.names().front());
  ASSERT_TRUE(weight.storage()->read_only);
  expect_error([&] { weight.zero_(); }, ErrorKind::Runtime, "cannot write to a read-only tensor");
  expect_error([&] { add_(weight, Scalar(1.0)); }, ErrorKind::Runtime, "cannot write to a read-only tensor");
}

// ---- class 4: threads ----

TEST(HostileThreads, ConcurrentRandOnTheDefaultGeneratorNeverSharesCounters) {
  Generator& g = default_generator();
  const Generator saved = g;
  constexpr int kThreads = 4, kCalls = 50;
  constexpr int64_t kNumel = 8;  // two 128-bit counters per call
  const auto as_vector = [](const Tensor& t) {
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };

  // Sequentially: the draws from one seed, and how far they move the counter.
  manual_seed(1234);
  std::vector<std::vector<float>> sequential;
  for (int i = 0; i < kThreads * kCalls; ++i) sequential.push_back(as_vector(rand({kNumel})));
  const uint64_t advanced = g.offset();

  // Concurrently from the same seed: every call must reserve its own counters, so the
  // draws are the sequential ones in some order and the counter moves as far.
  manual_seed(1234);
  std::vector<std::vector<std::vector<float>>> drawn(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&drawn, k, &as_vector] {
      for (int i = 0; i < kCalls; ++i) drawn[k].push_back(as_vector(rand({kNumel})));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(g.offset(), advanced);
  std::vector<std::vector<float>> concurrent;
  for (const auto& d : drawn) concurrent.insert(concurrent.end(), d.begin(), d.end());
  std::sort(sequential.begin(), sequential.end());
  std::sort(concurrent.begin(), concurrent.end());
  EXPECT_EQ(concurrent, sequential);
  EXPECT_EQ(std::adjacent_find(concurrent.begin(), concurrent.end()), concurrent.end()) << "two calls drew alike";
  g = saved;
}

TEST(HostileThreads, GeneratorAdvanceIsAtomic) {
  Generator g(5);
  constexpr int kThreads = 4, kCalls = 10000;
  std::vector<std::vector<uint64_t>> firsts(kThreads);
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&g, &firsts, k] {
      for (int i = 0; i < kCalls; ++i) firsts[k].push_back(g.advance(3));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(g.offset(), uint64_t{3} * kThreads * kCalls);
  std::vector<uint64_t> all;
  for (const auto& f : firsts) all.insert(all.end(), f.begin(), f.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], 3 * i) << "ranges overlap or leave gaps";
  EXPECT_EQ(g.seed(), 5u);
}

llm::GenerateOptions greedy(int64_t tokens) {
  llm::GenerateOptions o;
  o.max_new_tokens = tokens;
  return o;
}

TEST(HostileThreads, ConcurrentGenerateOnOneModelMatchesSequential) {
  auto model = llm::Model::load(tiny_model_dir("qwen3_moe"));
  const std::vector<std::string> prompts = {"The kiln", "Pots crack when", "A long time ago", "Glaze"};
  std::vector<std::string> sequential;
  for (const std::string& p : prompts) sequential.push_back(llm::generate(*model, p, greedy(12)).text);

  std::vector<std::string> concurrent(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] { concurrent[i] = llm::generate(*model, prompts[i], greedy(12)).text; });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(concurrent, sequential);
}

TEST(HostileThreads, ConcurrentForwardCallsEachRunWhole) {
  auto model = llm::Model::load(tiny_model_dir("qwen3_moe"));
  const std::vector<int32_t> prefix = {3, 9, 1, 4}, token = {5};
  constexpr int kCalls = 6;
  // After a varied prefix, one token at positions 4..9: what each call returns depends
  // on its position (the history it attends to).
  model->forward(prefix);
  std::vector<Tensor> sequential;
  for (int i = 0; i < kCalls; ++i) sequential.push_back(model->forward(token));
  model->reset();
  model->forward(prefix);

  std::vector<Tensor> concurrent(kCalls);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) threads.emplace_back([&, i] { concurrent[i] = model->forward(token); });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(model->position(), static_cast<int64_t>(prefix.size()) + kCalls);
  // Each call ran alone at one position: its logits are exactly the sequential ones
  // of that position, and every position was taken once.
  const auto same = [](const Tensor& a, const Tensor& b) {
    return a.sizes() == b.sizes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
  };
  for (int i = 0; i < kCalls; ++i) {
    for (int j = i + 1; j < kCalls; ++j) ASSERT_FALSE(same(sequential[i], sequential[j])) << i << " " << j;
  }
  std::vector<bool> taken(kCalls, false);
  for (const Tensor& c : concurrent) {
    const auto at = std::find_if(sequential.begin(), sequential.end(), [&](const Tensor& s) { return same(c, s); });
    ASSERT_NE(at, sequential.end()) << "a concurrent forward matches no sequential position";
    const auto position = static_cast<size_t>(at - sequential.begin());
    EXPECT_FALSE(taken[position]) << "two calls ran at position " << position;
    taken[position] = true;
  }
}

TEST(HostileThreads, ASessionKeepsOtherThreadsOut) {
  auto model = llm::Model::load(tiny_model_dir("qwen3_moe"));
  std::atomic<bool> other_done{false};
  std::thread other;
  {
    llm::Model::Session session(*model);
    session.reset();
    other = std::thread([&] {
      model->reset();  // waits for the session
      other_done = true;
    });
    session.forward(std::vector<int32_t>{1, 2, 3});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(other_done.load());
    EXPECT_EQ(session.position(), 3);
  }
  other.join();
  EXPECT_EQ(model->position(), 0);
}

TEST(HostileThreads, CallingTheModelFromGeneratesCallbackIsAnError) {
  auto model = llm::Model::load(tiny_model_dir("qwen3_moe"));
  llm::GenerateOptions o = greedy(4);
  o.on_text = [&](std::string_view) {
    model->forward(std::vector<int32_t>{1});
    return true;
  };
  expect_error([&] { llm::generate(*model, "The kiln", o); }, ErrorKind::Runtime,
               "Model.forward: this thread is already using the model");
  o.on_text = [&](std::string_view) {
    model->reset();
    return true;
  };
  expect_error([&] { llm::generate(*model, "The kiln", o); }, ErrorKind::Runtime,
               "Model.reset: this thread is already using the model");
  // Reading the running sequence from the callback is fine.
  std::vector<int64_t> positions;
  o.on_text = [&](std::string_view) {
    positions.push_back(model->position());
    return true;
  };
  const llm::GenerateResult r = llm::generate(*model, "The kiln", o);
  ASSERT_FALSE(positions.empty());
  EXPECT_EQ(positions.back(), r.prompt_tokens + r.generated_tokens - 1);
  // The lock was released: the model still works.
  EXPECT_EQ(llm::generate(*model, "The kiln", greedy(2)).generated_tokens, 2);
}

// ---- class 5: messages name the op the caller used ----

TEST(HostileMessages, IndexAddNamesItself) {
  const Tensor self = zeros({3}, DType::Float8_e4m3fn);
  const Tensor index = zeros({1}, DType::Int64);
  const Tensor source = zeros({1}, DType::Float8_e4m3fn);
  expect_error([&] { index_add_(self, 0, index, source); }, ErrorKind::Type,
               "index_add_: not implemented for float8_e4m3fn");
  expect_error([&] { index_add(self, 0, index, source); }, ErrorKind::Type, "index_add_: not implemented");
  expect_error([&] { index_add(zeros({3}), 0, full({1}, Scalar(int64_t{5}), DType::Int64), ones({1})); }, ErrorKind::Index, "index_add_:");
}

TEST(HostileMessages, ReductionsWithoutIdentityNameTheOp) {
  // The front ends refuse empty max/min-type reductions first; the kernels' own guard
  // says the same in PyTorch's words, naming the op rather than an enum value.
  for (auto [kind, name] : {std::pair{backend::ReduceKind::Max, "max"}, std::pair{backend::ReduceKind::ArgMin, "argmin"},
                            std::pair{backend::ReduceKind::MaxAbs, "norm (p = inf)"}}) {
    const backend::ReduceKind k = kind;  // clang 14 captures no structured binding
    expect_error([k] { cpu::reduce_identity(k); }, ErrorKind::Runtime,
                 std::string(name) + ": cannot perform reduction function " + name + " on a tensor with no elements");
  }
}

TEST(HostileMessages, MoeFromFusedChecksScaleRowsItself) {
  // gate_up [E=2, 2I=8, H=4] with per-row scales of 6 rows instead of 8.
  const Tensor gate_up = zeros({2, 8, 4}, DType::Float8_e4m3fn);
  const Tensor down = zeros({2, 4, 4}, DType::Float8_e4m3fn);
  expect_error([&] { MoeExperts::from_fused(gate_up, down, ones({2, 6}), ones({2, 4})); }, ErrorKind::Runtime,
               "MoeExperts.from_fused: gate_up_scale must have 8 rows for gate_up [2, 8, 4] (4 per projection, one "
               "per row), got shape [2, 6]");
  expect_error([&] { MoeExperts::from_fused(gate_up, down, ones({2, 2}), ones({2, 4})); }, ErrorKind::Runtime,
               "gate_up_scale must have 8 rows");
}

}  // namespace
