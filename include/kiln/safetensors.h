// Reading and writing single safetensors files by tensor name: the format Hugging Face
// and the `safetensors` package use for state dicts (kiln.load_safetensors /
// kiln.save_safetensors in Python, named as the package's load_file / save_file).
//
// Loading validates the whole header before any tensor is made (header length within
// the file, JSON, known dtypes, shapes whose byte size matches the offsets, offsets
// inside the data region and not overlapping, no duplicate names) and copies each
// tensor out of the file, so the tensors are writable and independent of the file
// (which may then be overwritten). Errors are kiln::Error (Value) naming the file and
// the tensor.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// name -> tensor, in a fixed order: the order of the file's header for loading, the
// caller's order for saving.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;  // the header's __metadata__, if any
};

// Every tensor of the safetensors file at `path` (CPU tensors, dtypes as stored:
// bool, u8..u64, i8..i64, f16, bf16, f32, f64, f8_e4m3fn, f8_e5m2) and its metadata.
SafetensorsFile load_safetensors(const std::string& path);

// Writes `tensors` (any strides; tensors on another device are copied to the CPU first)
// to `path` in the given order, with the optional string metadata. Names must be unique
// and non-empty; complex dtypes have no safetensors spelling and are refused. A failed
// write leaves no partial file.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace kiln
