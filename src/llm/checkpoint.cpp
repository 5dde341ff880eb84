#include "llm/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "kiln/error.h"
#include "llm/json_tree.h"
#include "llm/model_files.h"
#include "llm/safetensors_format.h"

namespace kiln::llm {
namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kSingleFile = "model.safetensors";

// One file mapped read-only and private: pages are shared with the page cache, and
// MADV_DONTNEED drops them from this process without losing the data (they fault back
// in from the file).
struct Mapping {
  uint8_t* base = nullptr;
  uint64_t size = 0;
};

std::string file_op(const std::string& path) { return "checkpoint " + path; }

// `what` names the reader in errors ("checkpoint", "load_safetensors").
std::shared_ptr<Mapping> map_file(const std::string& path, std::string_view what = "checkpoint") {
  uint64_t size = 0;
  const int fd = open_regular_file(path, what, size);
  if (size < 8) {
    ::close(fd);
    fail(ErrorKind::Value, std::string(what) + " " + path, "file is {} bytes, shorter than the 8-byte header length",
         size);
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (base == MAP_FAILED) fail(ErrorKind::Runtime, std::string(what) + " " + path, "mmap failed: {}", std::strerror(map_errno));
  return std::shared_ptr<Mapping>(new Mapping{static_cast<uint8_t*>(base), size}, [](Mapping* m) {
    ::munmap(m->base, m->size);
    delete m;
  });
}

// The name the model sees: multimodal checkpoints nest the text model under
// "model.language_model."; their vision tower and multi-token-prediction head are not
// used by a text decoder and are skipped (std::nullopt).
std::optional<std::string> model_tensor_name(const std::string& stored) {
  if (stored.starts_with("model.visual.") || stored.starts_with("mtp.")) return std::nullopt;
  constexpr std::string_view kNested = "model.language_model.";
  if (stored.starts_with(kNested)) return "model." + stored.substr(kNested.size());
  return stored;
}

// weight_map of model.safetensors.index.json: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const std::string& path) {
  const std::string op = file_op(path);
  nlohmann::json index = parse_json_tree(read_regular_file(path, kMaxIndexFileBytes, "checkpoint"), op);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail(ErrorKind::Value, op, "expected an object with a 'weight_map' object");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      fail(ErrorKind::Value, op, "weight_map: tensor '{}' maps to {}, expected a file name", name, json_excerpt(shard));
    }
    const std::string file = shard.get<std::string>();
    // Shards live in the checkpoint folder itself; a path could reach anywhere.
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
      fail(ErrorKind::Value, op, "weight_map: tensor '{}' maps to '{}', expected a file name in the folder", name,
           file);
    }
    weight_map[name] = file;
  }
  return weight_map;
}

std::vector<std::string> all_safetensors_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    // A FIFO or folder of that name is refused by name rather than skipped unseen.
    if (regular_file_exists(e.path().string(), "checkpoint")) files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

struct Checkpoint::State {
  std::string dir;
  std::vector<std::string> files;  // paths
  std::vector<std::shared_ptr<Mapping>> mappings;
  std::vector<uint64_t> data_starts;
  std::map<std::string, TensorEntry> entries;
};

Checkpoint Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(ErrorKind::Runtime, "checkpoint", "'{}' is not a directory", dir);
  auto state = std::make_shared<State>();
  state->dir = dir;

  const std::string index_path = (fs::path(dir) / kIndexFile).string();
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shard_names;
  if (regular_file_exists(index_path, "checkpoint")) {
    weight_map = read_weight_map(index_path);
    std::set<std::string> unique;
    for (const auto& [name, shard] : weight_map) unique.insert(shard);
    for (const std::string& shard : unique) {
      if (!regular_file_exists((fs::path(dir) / shard).string(), file_op(index_path) + ": shard '" + shard + "'")) {
        fail(ErrorKind::Value, file_op(index_path), "shard '{}' named by the weight_map does not exist", shard);
      }
    }
    shard_names.assign(unique.begin(), unique.end());
  } else if (regular_file_exists((fs::path(dir) / kSingleFile).string(), "checkpoint")) {
    shard_names.push_back(kSingleFile);
  } else {
    shard_names = all_safetensors_files(dir);
  }
  if (shard_names.empty()) {
    fail(ErrorKind::Runtime, "checkpoint", "'{}' holds no {}, {} or *.safetensors file", dir, kIndexFile, kSingleFile);
  }

  std::map<std::string, std::string> stored_names;  // model name -> name in the file, for errors
  for (const std::string& shard : shard_names) {
    const std::string path = (fs::path(dir) / shard).string();
    std::shared_ptr<Mapping> mapping = map_file(path);
    SafetensorsHeader header = parse_safetensors_header(mapping->base, mapping->size, path);
    const size_t file_index = state->files.size();
    for (SafetensorsTensorInfo& t : header.tensors) {
      std::optional<std::string> name = model_tensor_name(t.name);
      if (!name) continue;
      auto [it, inserted] = state->entries.try_emplace(*name);
      const auto [stored_it, stored_inserted] = stored_names.try_emplace(*name, t.name);
      if (!inserted) {
        const std::string other = it->second.file < state->files.size() ? state->files[it->second.file] : path;
        if (stored_it->second == t.name) {
          fail(ErrorKind::Value, file_op(path), "tensor '{}' is also in {}", t.name, other);
        }
        fail(ErrorKind::Value, file_op(path), "tensor '{}' and tensor '{}' of {} are both read as '{}'", t.name,
             stored_it->second, other, *name);
      }
      it->second = TensorEntry{*name, t.dtype, std::move(t.shape), t.begin, t.end, file_index};
    }
    state->files.push_back(path);
    state->mappings.push_back(std::move(mapping));
    state->data_starts.push_back(header.data_start);
  }

  for (const auto& [stored, shard] : weight_map) {
    const std::optional<std::string> name = model_tensor_name(stored);
    if (!name) continue;
    const auto it = state->entries.find(*name);
    const std::string expected = (fs::path(dir) / shard).string();
    if (it == state->entries.end() || state->files[it->second.file] != expected) {
      fail(ErrorKind::Value, file_op(index_path), "tensor '{}' is mapped to shard '{}' but {}", stored, shard,
           it == state->entries.end() ? std::string("no shard holds it")
                                      : "it is in " + state->files[it->second.file]);
    }
  }

  Checkpoint checkpoint;
  checkpoint.state_ = std::move(state);
  return checkpoint;
}

bool Checkpoint::has(const std::string& name) const {
  KILN_CHECK(state_ != nullptr, "checkpoint", "not opened (use Checkpoint::open)");
  return state_->entries.count(name) != 0;
}

bool Checkpoint::has_prefix(const std::string& prefix) const {
  KILN_CHECK(state_ != nullptr, "checkpoint", "not opened (use Checkpoint::open)");
  const auto it = state_->entries.lower_bound(prefix);  // names are sorted: the first one >= prefix
  return it != state_->entries.end() && it->first.starts_with(prefix);
}

const TensorEntry& Checkpoint::entry(const std::string& name) const {
  KILN_CHECK(state_ != nullptr, "checkpoint", "not opened (use Checkpoint::open)");
  const auto it = state_->entries.find(name);
  if (it == state_->entries.end()) fail(ErrorKind::Value, "checkpoint " + state_->dir, "no tensor '{}'", name);
  return it->second;
}

Tensor Checkpoint::get(const std::string& name) const {
  const TensorEntry& e = entry(name);
  const std::shared_ptr<Mapping>& mapping = state_->mappings[e.file];
  uint8_t* data = mapping->base + state_->data_starts[e.file] + e.begin;
  const size_t nbytes = e.end - e.begin;
  if (reinterpret_cast<uintptr_t>(data) % itemsize(e.dtype) != 0) {
    // A header not padded to 8 bytes (older writers) leaves tensors misaligned; kernels
    // load whole elements, so such a tensor is copied once into aligned memory.
    Tensor copy = Tensor::empty(e.shape, e.dtype);
    // An empty tensor has no memory (a null data_ptr), and memcpy to null is undefined
    // even for 0 bytes (UBSan).
    if (nbytes > 0) std::memcpy(copy.data_ptr(), data, nbytes);
    return copy;
  }
  std::shared_ptr<Storage> storage = Storage::borrow(data, nbytes, mapping);
  storage->read_only = true;  // mapped PROT_READ: an in-place op must raise, not fault
  return Tensor::from_storage(std::move(storage), e.shape, contiguous_strides(e.shape), 0, e.dtype);
}

Tensor Checkpoint::get(const std::string& name, const Shape& shape, std::optional<DType> dtype) const {
  const TensorEntry& e = entry(name);
  if (e.shape != shape || (dtype && *dtype != e.dtype)) {
    fail(ErrorKind::Value, file_op(state_->files[e.file]), "tensor '{}' has shape {} dtype {}, expected shape {}{}{}",
         name, shape_to_string(e.shape), dtype_name(e.dtype), shape_to_string(shape), dtype ? " dtype " : "",
         dtype ? dtype_name(*dtype) : "");
  }
  return get(name);
}

void Checkpoint::release(const std::string& name) const {
  const TensorEntry& e = entry(name);
  const uintptr_t data = reinterpret_cast<uintptr_t>(state_->mappings[e.file]->base) + state_->data_starts[e.file];
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Only pages wholly inside the tensor: a neighbour sharing a page may still be in use.
  const uintptr_t first = (data + e.begin + page - 1) / page * page;
  const uintptr_t last = (data + e.end) / page * page;
  if (first < last && ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) {
    fail(ErrorKind::Runtime, file_op(state_->files[e.file]), "madvise for tensor '{}' failed: {}", name,
         std::strerror(errno));
  }
}

void Checkpoint::prefault(const std::string& name) const {
  const TensorEntry& e = entry(name);
  const char* data = reinterpret_cast<const char*>(state_->mappings[e.file]->base) + state_->data_starts[e.file];
  const char* begin = data + e.begin;
  const size_t bytes = e.end - e.begin;
#ifdef MADV_POPULATE_READ
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) / page * page;
  if (bytes > 0 && ::madvise(reinterpret_cast<void*>(first), reinterpret_cast<uintptr_t>(begin) + bytes - first,
                             MADV_POPULATE_READ) == 0) {
    return;
  }
#endif
  // Kernels without MADV_POPULATE_READ: touch one byte per page.
  volatile char sink = 0;
  for (size_t off = 0; off < bytes; off += 4096) sink = sink + begin[off];
}

std::vector<std::string> Checkpoint::names() const {
  KILN_CHECK(state_ != nullptr, "checkpoint", "not opened (use Checkpoint::open)");
  std::vector<std::string> names;
  names.reserve(state_->entries.size());
  for (const auto& [name, e] : state_->entries) names.push_back(name);
  return names;
}

const std::vector<std::string>& Checkpoint::files() const {
  KILN_CHECK(state_ != nullptr, "checkpoint", "not opened (use Checkpoint::open)");
  return state_->files;
}

const std::string& Checkpoint::dir() const {
  KILN_CHECK(state_ != nullptr, "checkpoint", "not opened (use Checkpoint::open)");
  return state_->dir;
}

SafetensorsFile read_safetensors_file(const std::string& path) {
  const std::shared_ptr<Mapping> mapping = map_file(path, "load_safetensors");
  SafetensorsHeader header = parse_safetensors_header(mapping->base, mapping->size, path);
  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  out.tensors.reserve(header.tensors.size());
  for (SafetensorsTensorInfo& info : header.tensors) {
    // The header parser has checked begin <= end <= data size and end - begin equal to
    // the shape's byte size, so this copy stays inside the mapping.
    Tensor t = Tensor::empty(info.shape, info.dtype, kCPU, "load_safetensors");
    const uint64_t nbytes = info.end - info.begin;
    if (nbytes > 0) std::memcpy(t.data_ptr(), mapping->base + header.data_start + info.begin, nbytes);
    out.tensors.emplace_back(std::move(info.name), std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntrySpec> specs;
  specs.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) fail(ErrorKind::Value, "write_safetensors " + path, "tensor '{}' is undefined", name);
    if (t.device() != kCPU) fail(ErrorKind::Value, "write_safetensors " + path, "tensor '{}' is not on the CPU", name);
    specs.push_back({name, t.dtype(), t.shape()});
  }
  SafetensorsWriter writer(path, specs, metadata);
  for (const auto& [name, t] : tensors) {
    const Tensor contiguous = t.contiguous();
    writer.write(contiguous.data_ptr(), contiguous.nbytes());
  }
  writer.finish();
}

}  // namespace kiln::llm
