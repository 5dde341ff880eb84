// The safetensors file format, apart from how files are opened: the header (an 8-byte
// little-endian length, then that many bytes of JSON, then the data region) parsed and
// validated, and written by a streaming writer that never needs the whole file in memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::llm {

// safetensors' spelling of a dtype ("BF16", "F8_E4M3", ...); complex dtypes have none
// (a Type error naming `what`).
std::string_view safetensors_dtype_name(DType dtype, std::string_view what);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);

struct SafetensorsTensorInfo {
  std::string name;  // as stored in the file
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data region
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // offset of the data region in the file: 8 + header length
};

// Headers above this are refused before any parsing (safetensors' own reader refuses
// anything over 100 MB: a real header of 100k tensors is a few MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses the header of the file `path` whose whole content (file_size bytes, at least the
// 8-byte length and the header) starts at `file`. Everything is checked before anything
// is returned: length within the file, JSON object, every entry's dtype/shape/offsets,
// byte sizes, bounds, overlaps and duplicate names. Errors are Value errors naming the
// file and the tensor.
SafetensorsHeader parse_safetensors_header(const uint8_t* file, uint64_t file_size, const std::string& path);

struct SafetensorsEntrySpec {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
};

// Byte size of a tensor of this shape and dtype (a Value error naming `what` on overflow).
uint64_t tensor_byte_size(const Shape& shape, DType dtype, std::string_view what);

// Writes one safetensors file as a stream: the header (tensors laid out contiguously in
// the given order, JSON padded with spaces to a multiple of 8 bytes as Hugging Face's
// writer does) goes out at construction, then write() takes the tensors' bytes in order,
// in as many pieces as the caller likes. finish() checks every byte arrived and closes the
// file; a writer destroyed before finish() removes its partial file.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, const std::vector<SafetensorsEntrySpec>& entries,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next bytes of the current tensor (little-endian, row-major); may not run past it.
  void write(const void* data, size_t nbytes);
  void finish();
  // Bytes of the whole file (header and data).
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  void write_raw(const void* data, size_t nbytes);

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<std::string> names_;
  std::vector<uint64_t> sizes_;
  size_t current_ = 0;         // tensor being written
  uint64_t current_done_ = 0;  // its bytes written so far
  uint64_t file_bytes_ = 0;
};

}  // namespace kiln::llm
