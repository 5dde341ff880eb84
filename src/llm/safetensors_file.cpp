// kiln/safetensors.h: single-file load and save by name, on the checkpoint reader and
// the streaming writer the LLM runtime uses (llm/checkpoint.h).
#include "kiln/safetensors.h"

#include "kiln/error.h"
#include "llm/checkpoint.h"

namespace kiln {

SafetensorsFile load_safetensors(const std::string& path) { return llm::read_safetensors_file(path); }

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  NamedTensors on_cpu;
  on_cpu.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) fail(ErrorKind::Value, "save_safetensors " + path, "tensor '{}' is undefined", name);
    on_cpu.emplace_back(name, t.device() == kCPU ? t : t.to(kCPU));
  }
  llm::write_safetensors(path, on_cpu, metadata);
}

}  // namespace kiln
