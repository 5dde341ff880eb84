// safetensors header parsing: the input is a whole file (8-byte length, JSON header,
// data). Whatever the bytes, parse_safetensors_header returns entries that really lie
// in the data region, each exactly as long as its shape and dtype say, or raises
// kiln::Error.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz_input.h"
#include "kiln/error.h"
#include "llm/safetensors_format.h"

namespace {

using kiln::fuzz::finding;

// The entry's byte size from its shape, or false when it overflows 64 bits.
bool byte_size(const kiln::llm::SafetensorsTensorInfo& t, uint64_t& bytes) {
  bytes = kiln::itemsize(t.dtype);
  for (const int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return false;
  }
  return true;
}

void check_entries(const kiln::llm::SafetensorsHeader& header, const uint8_t* file, uint64_t file_size) {
  if (header.data_start < 8 || header.data_start > file_size) finding("data region starts outside the file");
  const uint64_t data_bytes = file_size - header.data_start;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint8_t sink = 0;
  for (const auto& t : header.tensors) {
    uint64_t bytes = 0;
    if (!byte_size(t, bytes)) finding("tensor '" + t.name + "' accepted with an overflowing byte size");
    if (t.begin > t.end || t.end > data_bytes) finding("tensor '" + t.name + "' accepted outside the data region");
    if (t.end - t.begin != bytes) finding("tensor '" + t.name + "' accepted with a length its shape does not give");
    // Touch the first and last byte: ASan knows the input buffer's exact bounds.
    if (bytes > 0) sink ^= file[header.data_start + t.begin] ^ file[header.data_start + t.end - 1];
    if (bytes > 0) ranges.emplace_back(t.begin, t.end);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) finding("overlapping tensors accepted");
  }
  asm volatile("" : : "r"(sink));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto header = kiln::llm::parse_safetensors_header(data, size, "fuzz.safetensors");
    check_entries(header, data, size);
  } catch (const kiln::Error&) {
  }
  return 0;
}
