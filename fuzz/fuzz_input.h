// What every harness shares: reading structured values out of libFuzzer's bytes, and
// the one rule they all check (an input either works or raises kiln::Error).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::fuzz {

// Reads the input front to back; once it runs out, every read returns zeros, so a
// harness never has to check for the end.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }

  uint8_t byte() { return empty() ? 0 : data_[pos_++]; }

  bool flag() { return (byte() & 1) != 0; }

  // An index in [0, n).
  size_t below(size_t n) { return n == 0 ? 0 : byte() % n; }

  template <typename T>
  T raw() {
    T value{};
    const size_t take = std::min(sizeof(T), size_ - std::min(pos_, size_));
    if (take > 0) std::memcpy(&value, data_ + pos_, take);
    pos_ += take;
    return value;
  }

  // The bytes not read yet.
  std::string_view rest() {
    if (empty()) return {};
    std::string_view out(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Text files never hold a NUL byte, so one input carries two documents: the bytes before
// the first NUL and those after it (empty when there is none).
inline std::pair<std::string, std::string> split_at_nul(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {std::string(all), std::string()};
  return {std::string(all.substr(0, nul)), std::string(all.substr(nul + 1))};
}

// A broken invariant that no sanitizer would notice (a wrong size, an out-of-bounds view
// accepted): abort, so libFuzzer keeps the input.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace kiln::fuzz
