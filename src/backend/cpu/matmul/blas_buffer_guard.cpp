#include "backend/cpu/matmul/blas_buffer_guard.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "kiln/error.h"

namespace kiln::cpu {
namespace {

// BUFFER_SIZE of OpenBLAS's x86-64 and arm64 builds (32 << 22) plus the page it adds,
// and a page of slack.
constexpr size_t kOpenBlasBufferBytes = (size_t{32} << 22) + 2 * 4096;

std::atomic<int> calls_in_flight{0};
std::atomic<int> most_calls_in_flight{0};
thread_local bool thread_checked = false;

void check_buffer_can_be_mapped() {
  void* p = ::mmap(nullptr, kOpenBlasBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    fail(ErrorKind::Runtime, "matmul",
         "out of memory: OpenBLAS needs a {}-byte work buffer and the system refused to map one ({}); the process "
         "is at its memory limit (ulimit -v?)", kOpenBlasBufferBytes, std::strerror(err));
  }
  ::munmap(p, kOpenBlasBufferBytes);  // only the address space was taken: nothing was touched
}

}  // namespace

BlasBufferGuard::BlasBufferGuard() {
  const int now = calls_in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
  int most = most_calls_in_flight.load(std::memory_order_relaxed);
  if (thread_checked && now <= most) return;
  try {
    check_buffer_can_be_mapped();
  } catch (...) {
    calls_in_flight.fetch_sub(1, std::memory_order_relaxed);
    throw;
  }
  thread_checked = true;
  while (now > most && !most_calls_in_flight.compare_exchange_weak(most, now, std::memory_order_relaxed)) {
  }
}

BlasBufferGuard::~BlasBufferGuard() { calls_in_flight.fetch_sub(1, std::memory_order_relaxed); }

}  // namespace kiln::cpu
