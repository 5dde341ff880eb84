#include <cstring>

#include "backend/cpu/common/loops.h"

namespace kiln::cpu {

void copy_strided(ThreadPool& pool, const Tensor& dst, const Tensor& src) {
  LoopGeometry<2> geo({&dst, &src}, dst.sizes(), /*memory_order=*/true);
  if (geo.numel == 0) return;
  DType dt = dst.dtype(), st = src.dtype();
  int64_t isz = static_cast<int64_t>(itemsize(dt));
  // Plain copies are memory bound: one thread saturates far less than the bus.
  pool.parallel_for(geo.numel, 1 << 16, [&](int64_t begin, int64_t end) {
    geo.for_each_row(begin, end, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
      if (dt == st && s[0] == isz && s[1] == isz) {
        std::memcpy(p[0], p[1], static_cast<size_t>(n * isz));
      } else {
        cast_strided(st, p[1], s[1], dt, p[0], s[0], n);
      }
    });
  });
}

}  // namespace kiln::cpu
