#include "llm/safetensors_format.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "kiln/error.h"
#include "llm/json_tree.h"

namespace kiln::llm {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; kiln maps it without byte swapping");

struct DTypeSpelling {
  std::string_view name;
  DType dtype;
};

constexpr DTypeSpelling kSpellings[] = {
    {"BOOL", DType::Bool},   {"U8", DType::UInt8},   {"U16", DType::UInt16},      {"U32", DType::UInt32},
    {"U64", DType::UInt64},  {"I8", DType::Int8},    {"I16", DType::Int16},       {"I32", DType::Int32},
    {"I64", DType::Int64},   {"F16", DType::Float16}, {"BF16", DType::BFloat16}, {"F32", DType::Float32},
    {"F64", DType::Float64}, {"F8_E4M3", DType::Float8_e4m3fn}, {"F8_E5M2", DType::Float8_e5m2},
};

// Nesting deeper than this cannot be a safetensors header; refusing it early keeps a
// hostile file from building a huge tree.
constexpr int kMaxJsonDepth = 8;

std::string file_op(const std::string& path) { return "checkpoint " + path; }

// The header tree; nlohmann keeps the last of duplicate keys silently, but a tensor
// named twice must fail, so the first repeated top-level key is noted.
class HeaderParser : public JsonTreeBuilder {
 public:
  HeaderParser() : JsonTreeBuilder(kMaxJsonDepth) {}
  const std::string& duplicate() const { return duplicate_; }

 protected:
  void on_duplicate_key(const std::string& key, std::size_t depth) override {
    if (depth == 1 && duplicate_.empty()) duplicate_ = key;
  }

 private:
  std::string duplicate_;
};

uint64_t json_offset(const nlohmann::json& v, const std::string& path, const std::string& name) {
  if (!v.is_number_unsigned()) {
    fail(ErrorKind::Value, file_op(path), "tensor '{}': data_offsets must hold non-negative integers, got {}", name,
         json_excerpt(v));
  }
  return v.get<uint64_t>();
}

SafetensorsTensorInfo parse_entry(const std::string& name, const nlohmann::json& entry, const std::string& path) {
  const std::string op = file_op(path);
  if (!entry.is_object()) {
    fail(ErrorKind::Value, op, "tensor '{}': expected an object with dtype, shape and data_offsets, got {}", name,
         entry.type_name());
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) fail(ErrorKind::Value, op, "tensor '{}': missing '{}'", name, key);
  }
  SafetensorsTensorInfo info;
  info.name = name;

  const nlohmann::json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    fail(ErrorKind::Value, op, "tensor '{}': dtype must be a string, got {}", name, json_excerpt(dtype));
  }
  const std::optional<DType> parsed = dtype_from_safetensors_name(dtype.get<std::string>());
  if (!parsed) {
    fail(ErrorKind::Value, op, "tensor '{}': unknown dtype '{}' (expected BOOL, U8..U64, I8..I64, F16, BF16, F32, "
         "F64, F8_E4M3 or F8_E5M2)", name, dtype.get<std::string>());
  }
  info.dtype = *parsed;

  const nlohmann::json& shape = entry["shape"];
  if (!shape.is_array()) {
    fail(ErrorKind::Value, op, "tensor '{}': shape must be an array, got {}", name, json_excerpt(shape));
  }
  for (const nlohmann::json& dim : shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(ErrorKind::Value, op, "tensor '{}': shape {} must hold non-negative integers", name, json_excerpt(shape));
    }
    info.shape.push_back(dim.get<int64_t>());
  }

  const nlohmann::json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(ErrorKind::Value, op, "tensor '{}': data_offsets must be [begin, end], got {}", name, json_excerpt(offsets));
  }
  info.begin = json_offset(offsets[0], path, name);
  info.end = json_offset(offsets[1], path, name);
  if (info.begin > info.end) {
    fail(ErrorKind::Value, op, "tensor '{}': data_offsets [{}, {}] begin after end", name, info.begin, info.end);
  }
  const uint64_t expected = tensor_byte_size(info.shape, info.dtype, op + ": tensor '" + name + "'");
  if (info.end - info.begin != expected) {
    fail(ErrorKind::Value, op, "tensor '{}': shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}", name,
         shape_to_string(info.shape), dtype_name(info.dtype), expected, info.begin, info.end, info.end - info.begin);
  }
  return info;
}

std::map<std::string, std::string> parse_metadata(const nlohmann::json& value, const std::string& path) {
  if (!value.is_object()) {
    fail(ErrorKind::Value, file_op(path), "__metadata__ must be an object of strings, got {}", value.type_name());
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) {
      fail(ErrorKind::Value, file_op(path), "__metadata__ key '{}' must be a string, got {}", key, json_excerpt(v));
    }
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

// Overlapping tensors would alias each other's bytes: sort by offset and compare neighbours.
void check_no_overlap(const std::vector<SafetensorsTensorInfo>& tensors, const std::string& path) {
  std::vector<const SafetensorsTensorInfo*> order;
  order.reserve(tensors.size());
  for (const SafetensorsTensorInfo& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const SafetensorsTensorInfo* a, const SafetensorsTensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const SafetensorsTensorInfo& prev = *order[i - 1];
    const SafetensorsTensorInfo& cur = *order[i];
    if (cur.begin < prev.end) {
      fail(ErrorKind::Value, file_op(path), "tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]",
           cur.name, cur.begin, cur.end, prev.name, prev.begin, prev.end);
    }
  }
}

}  // namespace

std::string_view safetensors_dtype_name(DType dtype, std::string_view what) {
  for (const DTypeSpelling& s : kSpellings) {
    if (s.dtype == dtype) return s.name;
  }
  fail(ErrorKind::Type, "write_safetensors", "{}: dtype {} has no safetensors spelling", what, dtype_name(dtype));
}

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const DTypeSpelling& s : kSpellings) {
    if (s.name == name) return s.dtype;
  }
  return std::nullopt;
}

uint64_t tensor_byte_size(const Shape& shape, DType dtype, std::string_view what) {
  for (int64_t d : shape) {
    if (d < 0) fail(ErrorKind::Value, what, "negative dimension in shape {}", shape_to_string(shape));
    if (d == 0) return 0;
  }
  uint64_t bytes = itemsize(dtype);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      fail(ErrorKind::Value, what, "shape {} of {} overflows a 64-bit byte count", shape_to_string(shape),
           dtype_name(dtype));
    }
  }
  return bytes;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* file, uint64_t file_size, const std::string& path) {
  const std::string op = file_op(path);
  if (file_size < 8) {
    fail(ErrorKind::Value, op, "file is {} bytes, shorter than the 8-byte header length", file_size);
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, file, 8);
  if (header_len > kMaxSafetensorsHeaderBytes || header_len > file_size - 8) {
    fail(ErrorKind::Value, op, "header length {} exceeds the file's remaining {} bytes (or the {}-byte limit)",
         header_len, file_size - 8, kMaxSafetensorsHeaderBytes);
  }
  const char* text = reinterpret_cast<const char*>(file + 8);

  HeaderParser parser;
  if (!parser.parse(std::string_view(text, header_len))) {
    if (parser.too_deep()) fail(ErrorKind::Value, op, "header JSON nests deeper than {} levels", kMaxJsonDepth);
    fail(ErrorKind::Value, op, "header is not valid JSON: {}", parser.syntax_error());
  }
  const nlohmann::json& header = parser.result();
  if (!header.is_object()) fail(ErrorKind::Value, op, "header must be a JSON object, got {}", header.type_name());
  if (!parser.duplicate().empty()) {
    fail(ErrorKind::Value, op, "tensor '{}' appears twice in the header", parser.duplicate());
  }

  SafetensorsHeader result;
  result.data_start = 8 + header_len;
  const uint64_t data_size = file_size - result.data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      result.metadata = parse_metadata(entry, path);
      continue;
    }
    SafetensorsTensorInfo info = parse_entry(name, entry, path);
    if (info.end > data_size) {
      fail(ErrorKind::Value, op, "tensor '{}': data_offsets [{}, {}] run past the data region of {} bytes", name,
           info.begin, info.end, data_size);
    }
    result.tensors.push_back(std::move(info));
  }
  check_no_overlap(result.tensors, path);
  return result;
}

SafetensorsWriter::SafetensorsWriter(std::string path, const std::vector<SafetensorsEntrySpec>& entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)) {
  const std::string op = "write_safetensors " + path_;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntrySpec& e : entries) {
    if (e.name.empty() || e.name == "__metadata__") {
      fail(ErrorKind::Value, op, "'{}' cannot be a tensor name", e.name);
    }
    if (header.contains(e.name)) fail(ErrorKind::Value, op, "tensor '{}' given twice", e.name);
    const uint64_t bytes = tensor_byte_size(e.shape, e.dtype, op + ": tensor '" + e.name + "'");
    header[e.name] = {{"dtype", std::string(safetensors_dtype_name(e.dtype, "tensor '" + e.name + "'"))},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    names_.push_back(e.name);
    sizes_.push_back(bytes);
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) fail(ErrorKind::Runtime, op, "cannot create the file: {}", std::strerror(errno));
  // Large sequential writes: a bigger buffer means fewer system calls for small tensors.
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  write_raw(&header_len, 8);
  write_raw(text.data(), text.size());
  file_bytes_ = 8 + header_len + offset;
  while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(path_.c_str());
  }
}

void SafetensorsWriter::write_raw(const void* data, size_t nbytes) {
  if (nbytes > 0 && std::fwrite(data, 1, nbytes, file_) != nbytes) {
    fail(ErrorKind::Runtime, "write_safetensors " + path_, "write failed: {}", std::strerror(errno));
  }
}

void SafetensorsWriter::write(const void* data, size_t nbytes) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (nbytes > 0) {
    if (current_ >= sizes_.size()) {
      fail(ErrorKind::Runtime, "write_safetensors " + path_, "{} bytes more than the header declares", nbytes);
    }
    const uint64_t take = std::min<uint64_t>(nbytes, sizes_[current_] - current_done_);
    write_raw(bytes, take);
    bytes += take;
    nbytes -= take;
    current_done_ += take;
    if (current_done_ == sizes_[current_]) {
      current_done_ = 0;
      ++current_;
      while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
    }
  }
}

void SafetensorsWriter::finish() {
  const std::string op = "write_safetensors " + path_;
  if (current_ < sizes_.size()) {
    fail(ErrorKind::Runtime, op, "tensor '{}' got {} of its {} bytes", names_[current_], current_done_,
         sizes_[current_]);
  }
  std::FILE* f = std::exchange(file_, nullptr);
  // A full disk often shows only when the buffer is flushed on close.
  if (std::fclose(f) != 0) {
    const int err = errno;
    std::remove(path_.c_str());
    fail(ErrorKind::Runtime, op, "write failed: {}", std::strerror(err));
  }
}

}  // namespace kiln::llm
