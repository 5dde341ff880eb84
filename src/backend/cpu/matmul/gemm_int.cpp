// Integer GEMM: no BLAS does integers, and PyTorch supports integer mm on the CPU, so
// this is a plain exact loop. Not a hot path (models run in floating point); it is
// blocked over rows of C so that each row of B read from memory serves kRowBlock rows.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/matmul/gemm_int.h"
#include "kiln/error.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kRowBlock = 4;

// Signed values sign-extend, unsigned ones zero-extend; uint64 arithmetic then wraps
// modulo 2^64 without signed-overflow UB, and the low bits are the wrapped result.
template <typename T>
uint64_t widen(T v) {
  if constexpr (std::is_signed_v<T>) return static_cast<uint64_t>(static_cast<int64_t>(v));
  else return static_cast<uint64_t>(v);
}

template <typename T>
T load(const char* base, int64_t element) {
  T v;
  std::memcpy(&v, base + element * int64_t{sizeof(T)}, sizeof(T));
  return v;
}

template <typename T>
void integer_gemm(const GemmTile& t) {
  std::vector<uint64_t> acc(static_cast<size_t>(kRowBlock * t.n));
  for (int64_t i0 = 0; i0 < t.m; i0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, t.m - i0);
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t p = 0; p < t.k; ++p) {
      const char* b_row = t.b + p * t.b_rs * int64_t{sizeof(T)};
      for (int64_t r = 0; r < rows; ++r) {
        const uint64_t a_value = widen(load<T>(t.a, (i0 + r) * t.a_rs + p * t.a_cs));
        uint64_t* acc_row = acc.data() + r * t.n;
        for (int64_t j = 0; j < t.n; ++j) acc_row[j] += a_value * widen(load<T>(b_row, j * t.b_cs));
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      T* c_row = reinterpret_cast<T*>(t.c) + (i0 + r) * t.ldc;
      const uint64_t* acc_row = acc.data() + r * t.n;
      for (int64_t j = 0; j < t.n; ++j) {
        const T v = static_cast<T>(acc_row[j]);  // modular since C++20
        std::memcpy(c_row + j, &v, sizeof(T));
      }
    }
  }
}

}  // namespace

void integer_gemm_tile(DType dtype, const GemmTile& tile) {
  switch (dtype) {
    case DType::UInt8: return integer_gemm<uint8_t>(tile);
    case DType::UInt16: return integer_gemm<uint16_t>(tile);
    case DType::UInt32: return integer_gemm<uint32_t>(tile);
    case DType::UInt64: return integer_gemm<uint64_t>(tile);
    case DType::Int8: return integer_gemm<int8_t>(tile);
    case DType::Int16: return integer_gemm<int16_t>(tile);
    case DType::Int32: return integer_gemm<int32_t>(tile);
    case DType::Int64: return integer_gemm<int64_t>(tile);
    default: break;
  }
  fail(ErrorKind::Type, "mm", "integer_gemm_tile: {} is not an integer dtype", dtype_name(dtype));
}

}  // namespace kiln::cpu
