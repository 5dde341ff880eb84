// Synthetic checkpoints for the model tests, written once per test process (the "tiny"
// preset: a few hundred KiB), and helpers to derive broken copies of them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/tensor.h"
#include "llm/checkpoint.h"
#include "llm/synthetic_model.h"

namespace kiln::testing {

// Folder of the tiny synthetic `arch` checkpoint (bf16, or HF FP8 block-scaled), seed 7.
inline const std::string& tiny_model_dir(const std::string& arch, bool fp8 = false) {
  struct Cache {
    std::filesystem::path root;
    std::map<std::string, std::string> dirs;
    ~Cache() {
      std::error_code ec;
      if (!root.empty()) std::filesystem::remove_all(root, ec);
    }
  };
  static Cache cache;
  const std::string key = arch + (fp8 ? "_fp8" : "");
  auto it = cache.dirs.find(key);
  if (it != cache.dirs.end()) return it->second;
  if (cache.root.empty()) {
    cache.root = std::filesystem::temp_directory_path() / ("kiln_llm_models_" + std::to_string(::getpid()));
  }
  llm::SyntheticModelOptions options;
  options.arch = arch;
  options.preset = "tiny";
  options.fp8 = fp8;
  options.seed = 7;
  options.out_dir = (cache.root / key).string();
  llm::write_synthetic_model(options);
  return cache.dirs[key] = options.out_dir;
}

// Copies the model folder `from` to `to` with its safetensors replaced by one file of
// the same tensors, `edit` deciding per tensor: return false to drop it, or change it;
// `extra` tensors are added at the end.
template <typename Edit>
void copy_model_with(const std::string& from, const std::string& to, Edit edit,
                     const std::vector<std::pair<std::string, Tensor>>& extra = {}) {
  namespace fs = std::filesystem;
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (name.find("safetensors") == std::string::npos) {
      fs::copy_file(entry.path(), fs::path(to) / name, fs::copy_options::overwrite_existing);
    }
  }
  llm::Checkpoint checkpoint = llm::Checkpoint::open(from);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : checkpoint.names()) {
    Tensor t = checkpoint.get(name);
    if (edit(name, t)) tensors.emplace_back(name, t);
  }
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  llm::write_safetensors((fs::path(to) / "model.safetensors").string(), tensors);
}

// RMS of (a - b) over RMS of b, both float32 of one shape.
inline double relative_rms_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const float* pa = ac.data<float>();
  const float* pb = bc.data<float>();
  double diff = 0.0, ref = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff += (double(pa[i]) - pb[i]) * (double(pa[i]) - pb[i]);
    ref += double(pb[i]) * pb[i];
  }
  return std::sqrt(diff / std::max(ref, 1e-300));
}

// max |a - b| over max(1, max |b|).
inline double relative_max_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  const float* pa = ac.data<float>();
  const float* pb = bc.data<float>();
  double diff = 0.0, scale = 1.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(pa[i]) - pb[i]));
    scale = std::max(scale, std::abs(double(pb[i])));
  }
  return diff / scale;
}

}  // namespace kiln::testing
