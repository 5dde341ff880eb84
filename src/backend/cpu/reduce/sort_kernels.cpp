// Sorting and top-k on the CPU.
//
// Every element becomes an unsigned key whose integer order is the value order kiln
// sorts by (floats: sign-magnitude bits flipped into two's-complement order, every
// NaN mapped to the top, -0.0 to +0.0; descending: all key bits inverted). Keys of up
// to 32 bits are packed with their position into one uint64, (key << 32) | position,
// so sorting integers is stable (ties fall back to the position) and needs no
// comparator; 64-bit keys (and lines of 2^32 elements or more) sort (key, position)
// pairs instead. Long lines are radix sorted (stable LSD on the key bytes), short ones
// go to std::sort. topk keeps a sorted buffer of the best k in one pass when k is
// small, else runs nth_element and sorts the selected k.
//
// std::sort on packed integers is used over Highway's vqsort because vqsort ships in
// libhwy_contrib, which kiln does not link (and its 1.0.3 key-value sort has no stable
// variant).
#include "backend/cpu/reduce/sort_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/common/byte_stride.h"
#include "kiln/error.h"
#include "kiln/scalar_types.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kGrainElements = 16384;

uint32_t float_key(float f) {
  if (std::isnan(f)) return std::numeric_limits<uint32_t>::max();
  if (f == 0.0f) f = 0.0f;  // -0.0 ties with 0.0
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

uint64_t double_key(double f) {
  if (std::isnan(f)) return std::numeric_limits<uint64_t>::max();
  if (f == 0.0) f = 0.0;
  uint64_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return (bits & 0x8000000000000000ull) ? ~bits : bits | 0x8000000000000000ull;
}

// Storage type T -> its ascending-order key (uint32_t or uint64_t).
template <class T>
auto key_of(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return double_key(v);
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<uint64_t>(v) ^ 0x8000000000000000ull;
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return v;
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return static_cast<uint32_t>(static_cast<int32_t>(v)) ^ 0x80000000u;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<uint32_t>(v);
  } else {  // float and the narrow float types, which convert to float exactly
    return float_key(static_cast<float>(v));
  }
}

// Key and position in one integer (keys up to 32 bits, lines below 2^32).
struct PackedOrder {
  using Item = uint64_t;
  static constexpr int kKeyBytes = 4;
  static Item make(uint64_t key, int64_t pos) { return (key << 32) | static_cast<uint64_t>(pos); }
  static int64_t position(Item item) { return static_cast<int64_t>(item & 0xFFFFFFFFu); }
  static unsigned key_byte(Item item, int b) { return static_cast<unsigned>(item >> (32 + 8 * b)) & 0xFFu; }
};

// Key and position side by side (64-bit keys or long lines).
struct PairOrder {
  struct Item {
    uint64_t key;
    uint64_t pos;
    bool operator<(const Item& o) const { return key < o.key || (key == o.key && pos < o.pos); }
  };
  static constexpr int kKeyBytes = 8;
  static Item make(uint64_t key, int64_t pos) { return {key, static_cast<uint64_t>(pos)}; }
  static int64_t position(const Item& item) { return static_cast<int64_t>(item.pos); }
  static unsigned key_byte(const Item& item, int b) { return static_cast<unsigned>(item.key >> (8 * b)) & 0xFFu; }
};

// Lines at least this long are radix sorted; shorter ones use std::sort.
constexpr size_t kRadixMinLength = 512;

// Stable LSD radix sort by key bytes. Items start in position order, so equal keys
// keep it: the same order as sorting (key, position). A byte that is the same in every
// key (common for narrow dtypes) costs only its count.
template <class Order>
void radix_sort(std::vector<typename Order::Item>& items, std::vector<typename Order::Item>& scratch) {
  const size_t n = items.size();
  scratch.resize(n);
  for (int b = 0; b < Order::kKeyBytes; ++b) {
    size_t count[256] = {};
    for (const auto& item : items) ++count[Order::key_byte(item, b)];
    if (count[Order::key_byte(items[0], b)] == n) continue;
    size_t offset[256];
    size_t total = 0;
    for (int v = 0; v < 256; ++v) {
      offset[v] = total;
      total += count[v];
    }
    for (const auto& item : items) scratch[offset[Order::key_byte(item, b)]++] = item;
    items.swap(scratch);
  }
}

// The k smallest items, in order, into items[0, k): one pass keeping a sorted buffer
// of the best k, for k much smaller than the line.
template <class Item>
void select_few(std::vector<Item>& items, size_t k) {
  std::sort(items.begin(), items.begin() + k);
  for (size_t i = k; i < items.size(); ++i) {
    const Item item = items[i];
    if (!(item < items[k - 1])) continue;
    size_t j = k - 1;
    for (; j > 0 && item < items[j - 1]; --j) items[j] = items[j - 1];
    items[j] = item;
  }
}

struct Lines {
  const char* src;
  int64_t in_step;  // bytes between neighbours along the dim
  char* values;
  int64_t* indices;
  int64_t out_step;  // elements between neighbours along the dim in the outputs
  int64_t L, k;
  Shape outer_sizes, in_strides, out_strides;  // the other dims (strides in bytes / elements)
  int64_t count;                               // lines
};

template <class T, class Order>
void sort_lines_typed(ThreadPool& pool, const Lines& g, bool descending, bool order_selected) {
  using Key = decltype(key_of(T{}));
  const uint64_t flip = descending ? static_cast<uint64_t>(std::numeric_limits<Key>::max()) : 0;
  pool.parallel_for(g.count, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(g.L, 1)),
                    [&](int64_t begin, int64_t end) {
                      std::vector<typename Order::Item> items(static_cast<size_t>(g.L)), scratch;
                      for (int64_t line = begin; line < end; ++line) {
                        int64_t in_off = 0, out_off = 0;
                        for (int64_t d = static_cast<int64_t>(g.outer_sizes.size()), rest = line; d-- > 0;) {
                          const int64_t i = rest % g.outer_sizes[d];
                          rest /= g.outer_sizes[d];
                          in_off += i * g.in_strides[d];
                          out_off += i * g.out_strides[d];
                        }
                        const char* src = g.src + in_off;
                        for (int64_t i = 0; i < g.L; ++i) {
                          T v;
                          std::memcpy(&v, src + i * g.in_step, sizeof(T));
                          items[i] = Order::make(static_cast<uint64_t>(key_of(v)) ^ flip, i);
                        }
                        const size_t k = static_cast<size_t>(g.k);
                        if (k == items.size()) {
                          if (k >= kRadixMinLength) {
                            radix_sort<Order>(items, scratch);
                          } else {
                            std::sort(items.begin(), items.end());
                          }
                        } else if (k <= 32 && 16 * k <= items.size()) {
                          select_few(items, k);
                        } else {
                          std::nth_element(items.begin(), items.begin() + g.k, items.end());
                          if (order_selected) std::sort(items.begin(), items.begin() + g.k);
                        }
                        char* values = g.values + out_off * static_cast<int64_t>(sizeof(T));
                        int64_t* indices = g.indices + out_off;
                        for (int64_t j = 0; j < g.k; ++j) {
                          const int64_t pos = Order::position(items[j]);
                          std::memcpy(values + j * g.out_step * static_cast<int64_t>(sizeof(T)), src + pos * g.in_step,
                                      sizeof(T));
                          indices[j * g.out_step] = pos;
                        }
                      }
                    });
}

template <class T>
void sort_lines(ThreadPool& pool, const Lines& g, bool descending, bool order_selected) {
  using Key = decltype(key_of(T{}));
  if (sizeof(Key) == 4 && g.L <= (int64_t{1} << 32)) {
    sort_lines_typed<T, PackedOrder>(pool, g, descending, order_selected);
  } else {
    sort_lines_typed<T, PairOrder>(pool, g, descending, order_selected);
  }
}

}  // namespace

void sort_kernel(ThreadPool& pool, const Tensor& input, int64_t dim, int64_t k, bool descending, bool order_selected,
                 const Tensor& values, const Tensor& indices) {
  Lines g;
  const int64_t size = static_cast<int64_t>(input.element_size());
  g.src = static_cast<const char*>(input.data_ptr());
  g.in_step = byte_stride(input, dim, size);
  g.values = static_cast<char*>(values.data_ptr());
  g.indices = indices.data<int64_t>();
  g.out_step = values.strides()[dim];
  g.L = input.sizes()[dim];
  g.k = k;
  g.count = 1;
  for (int64_t d = 0; d < input.dim(); ++d) {
    if (d == dim) continue;
    g.outer_sizes.push_back(input.sizes()[d]);
    g.in_strides.push_back(byte_stride(input, d, size));
    g.out_strides.push_back(values.strides()[d]);
    g.count *= input.sizes()[d];
  }
  if (g.count == 0 || k == 0) return;
  switch (input.dtype()) {
    case DType::Bool:
    case DType::UInt8: return sort_lines<uint8_t>(pool, g, descending, order_selected);
    case DType::UInt16: return sort_lines<uint16_t>(pool, g, descending, order_selected);
    case DType::UInt32: return sort_lines<uint32_t>(pool, g, descending, order_selected);
    case DType::UInt64: return sort_lines<uint64_t>(pool, g, descending, order_selected);
    case DType::Int8: return sort_lines<int8_t>(pool, g, descending, order_selected);
    case DType::Int16: return sort_lines<int16_t>(pool, g, descending, order_selected);
    case DType::Int32: return sort_lines<int32_t>(pool, g, descending, order_selected);
    case DType::Int64: return sort_lines<int64_t>(pool, g, descending, order_selected);
    case DType::Float16: return sort_lines<Half>(pool, g, descending, order_selected);
    case DType::BFloat16: return sort_lines<BFloat16>(pool, g, descending, order_selected);
    case DType::Float32: return sort_lines<float>(pool, g, descending, order_selected);
    case DType::Float64: return sort_lines<double>(pool, g, descending, order_selected);
    case DType::Float8_e4m3fn: return sort_lines<Float8_e4m3fn>(pool, g, descending, order_selected);
    case DType::Float8_e5m2: return sort_lines<Float8_e5m2>(pool, g, descending, order_selected);
    default:
      fail(ErrorKind::Type, "sort", "{} input is not supported", dtype_name(input.dtype()));
  }
}

}  // namespace kiln::cpu
