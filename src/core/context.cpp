// ExecutionContext, the thread's current context, and the default generator.
#include "kiln/context.h"

#include <algorithm>
#include <cstdlib>

#include "core/default_pool.h"
#include "kiln/allocator.h"
#include "kiln/error.h"
#include "kiln/generator.h"
#include "kiln/int_math.h"

namespace kiln {
namespace {

thread_local const ExecutionContext* t_current = nullptr;

// One thread's scratch slots: 64-byte aligned blocks, grown geometrically.
struct ScratchSlots {
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
  };
  Block blocks[ExecutionContext::kScratchSlots];
  ~ScratchSlots() {
    for (Block& b : blocks) std::free(b.data);
  }
};

thread_local ScratchSlots t_scratch;

}  // namespace

ExecutionContext::ExecutionContext(std::shared_ptr<ThreadPool> pool, Generator* generator)
    : pool_(std::move(pool)), generator_(generator) {
  KILN_CHECK(pool_ != nullptr, "ExecutionContext", "a context needs a thread pool, got none");
}

Generator& ExecutionContext::generator() const { return generator_ != nullptr ? *generator_ : default_generator(); }

void* ExecutionContext::scratch_elements(int slot, int64_t count, size_t element_size) const {
  size_t bytes = 0;
  KILN_CHECK(count >= 0 && checked_mul(static_cast<size_t>(count), element_size, &bytes), "ExecutionContext::scratch",
             "not enough memory: scratch for {} elements of {} bytes cannot exist", count, element_size);
  return scratch(slot, bytes);
}

void* ExecutionContext::scratch(int slot, size_t bytes) const {
  KILN_CHECK(slot >= 0 && slot < kScratchSlots, "ExecutionContext::scratch", "slot must be in [0, {}), got {}",
             kScratchSlots, slot);
  ScratchSlots::Block& b = t_scratch.blocks[slot];
  if (b.bytes < bytes || b.data == nullptr) {
    // Bounded first, so that the doubling and the rounding below cannot wrap.
    KILN_CHECK(bytes <= kMaxAllocationBytes, "ExecutionContext::scratch",
               "not enough memory: you tried to allocate {} bytes, more than the {} bytes a single allocation can "
               "have", bytes, kMaxAllocationBytes);
    size_t want = std::max<size_t>({bytes, std::min(2 * b.bytes, kMaxAllocationBytes), 4096});
    want = (want + 63) / 64 * 64;
    void* fresh = std::aligned_alloc(64, want);
    KILN_CHECK(fresh != nullptr, "ExecutionContext::scratch", "not enough memory: you tried to allocate {} bytes",
               want);
    std::free(b.data);
    b.data = fresh;
    b.bytes = want;
  }
  return b.data;
}

ExecutionContext current_context() {
  if (t_current != nullptr) return *t_current;
  return ExecutionContext(default_pool_shared());
}

ContextScope::ContextScope(ExecutionContext context) : context_(std::move(context)), previous_(t_current) {
  t_current = &context_;
}

ContextScope::~ContextScope() { t_current = previous_; }

ThreadsScope::ThreadsScope(int num_threads)
    : scope_(ExecutionContext(std::make_shared<ThreadPool>(num_threads), &current_context().generator())) {}

int get_num_threads() { return current_context().num_threads(); }

Generator& default_generator() {
  static Generator g(0);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace kiln
