// Cumulative sums. A line along the scanned dim is either contiguous (the dim is the
// innermost one that is not of size 1) and scanned in chunks, or its neighbours are
// contiguous and blocks of lines are scanned together, row by row, which keeps the
// loads contiguous. Storage dtypes are converted to the running-sum type per chunk with
// cast_strided (SIMD for the float types).
#include "backend/cpu/reduce/scan_kernels.h"

#include <algorithm>
#include <complex>
#include <vector>

#include "backend/cpu/cast/cast.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kChunk = 2048;       // elements of one line converted at once
constexpr int64_t kBlockWidth = 256;   // lines scanned together
constexpr int64_t kGrainElements = 16384;

// Integer running sums wrap modulo 2^64 instead of overflowing.
template <class Acc>
Acc add(Acc a, Acc b) {
  if constexpr (std::is_same_v<Acc, int64_t>) {
    return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}

template <class Acc>
void cumsum_typed(ThreadPool& pool, const Tensor& input, int64_t dim, const Tensor& out, DType acc_dtype) {
  const int64_t L = input.sizes()[dim];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= input.sizes()[d];
  for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= input.sizes()[d];
  const DType in_dtype = input.dtype(), out_dtype = out.dtype();
  const int64_t in_size = static_cast<int64_t>(itemsize(in_dtype));
  const int64_t out_size = static_cast<int64_t>(itemsize(out_dtype));
  const int64_t acc_size = static_cast<int64_t>(sizeof(Acc));
  const char* src = static_cast<const char*>(input.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());

  if (inner == 1) {
    pool.parallel_for(outer, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(L, 1)),
                      [&](int64_t begin, int64_t end) {
                        std::vector<Acc> buf(static_cast<size_t>(std::min(L, kChunk)));
                        for (int64_t line = begin; line < end; ++line) {
                          Acc carry{};
                          for (int64_t i0 = 0; i0 < L; i0 += kChunk) {
                            const int64_t n = std::min(kChunk, L - i0);
                            const int64_t at = line * L + i0;
                            cast_strided(in_dtype, src + at * in_size, in_size, acc_dtype, buf.data(), acc_size, n);
                            for (int64_t i = 0; i < n; ++i) buf[i] = carry = add(carry, buf[i]);
                            cast_strided(acc_dtype, buf.data(), acc_size, out_dtype, dst + at * out_size, out_size, n);
                          }
                        }
                      });
    return;
  }
  const int64_t blocks = (inner + kBlockWidth - 1) / kBlockWidth;
  pool.parallel_for(outer * blocks, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(L * kBlockWidth, 1)),
                    [&](int64_t begin, int64_t end) {
                      std::vector<Acc> acc(kBlockWidth), row(kBlockWidth);
                      for (int64_t item = begin; item < end; ++item) {
                        const int64_t o = item / blocks;
                        const int64_t c0 = (item % blocks) * kBlockWidth;
                        const int64_t w = std::min(kBlockWidth, inner - c0);
                        std::fill(acc.begin(), acc.end(), Acc{});
                        for (int64_t r = 0; r < L; ++r) {
                          const int64_t at = (o * L + r) * inner + c0;
                          cast_strided(in_dtype, src + at * in_size, in_size, acc_dtype, row.data(), acc_size, w);
                          for (int64_t j = 0; j < w; ++j) acc[j] = add(acc[j], row[j]);
                          cast_strided(acc_dtype, acc.data(), acc_size, out_dtype, dst + at * out_size, out_size, w);
                        }
                      }
                    });
}

}  // namespace

void cumsum_kernel(ThreadPool& pool, const Tensor& input, int64_t dim, const Tensor& out) {
  if (input.numel() == 0) return;
  const DType t = input.dtype();
  if (is_complex(t)) {
    cumsum_typed<std::complex<double>>(pool, input, dim, out, DType::Complex128);
  } else if (is_floating(t)) {
    cumsum_typed<double>(pool, input, dim, out, DType::Float64);
  } else {
    cumsum_typed<int64_t>(pool, input, dim, out, DType::Int64);
  }
}

}  // namespace kiln::cpu
