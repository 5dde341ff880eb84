// Hugging Face checkpoint folders: safetensors files read through mmap, sharded through
// model.safetensors.index.json (spec: models.md §8).
//
// Tensors come back as zero-copy views of the mapping (read-only: never write into
// them) that keep the mapping alive. The header of every file is validated before any
// tensor is handed out: header length within the file, JSON well formed, known dtypes,
// shapes whose byte size equals end - begin, offsets inside the data region and not
// overlapping. Every error names the file and, where there is one, the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/safetensors.h"
#include "kiln/tensor.h"

namespace kiln::llm {

struct TensorEntry {
  std::string name;    // as the model sees it ("model.language_model." is read as "model.")
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the file's data region
  uint64_t end = 0;
  size_t file = 0;     // index into Checkpoint::files()
};

class Checkpoint {
 public:
  // dir holds model.safetensors.index.json (its weight_map names the shards), or else
  // model.safetensors, or else every *.safetensors file of the folder.
  static Checkpoint open(const std::string& dir);

  bool has(const std::string& name) const;
  // Whether some tensor's name starts with `prefix` ("model.layers.47.").
  bool has_prefix(const std::string& prefix) const;
  const TensorEntry& entry(const std::string& name) const;  // missing: error naming it
  // The tensor as stored (zero-copy).
  Tensor get(const std::string& name) const;
  // The same, after checking its shape (and dtype when `dtype` is given): a mismatch is
  // an error naming the file, the tensor, what it is and what was expected.
  Tensor get(const std::string& name, const Shape& shape, std::optional<DType> dtype = std::nullopt) const;
  // Drops the tensor's pages from this process's resident memory (after it has been
  // converted or copied), so loading never holds two full copies of the weights.
  void release(const std::string& name) const;
  // Reads the tensor's pages in now, for tensors used in place: the time goes to loading
  // rather than to the first forward pass.
  void prefault(const std::string& name) const;

  std::vector<std::string> names() const;  // sorted
  const std::vector<std::string>& files() const;
  const std::string& dir() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Every tensor of one safetensors file, copied out of it (writable, independent of the
// file), in header order, and its __metadata__; the header is validated first.
SafetensorsFile read_safetensors_file(const std::string& path);

// Writes one safetensors file (tensors contiguous or not; written in the given order,
// 8-byte aligned header as Hugging Face's writer does) with optional __metadata__.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kiln::llm
