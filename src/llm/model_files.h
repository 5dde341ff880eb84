// Opening the files of a model folder as hostile input: only regular files are read (a
// FIFO would block the reader forever, a directory or device is never a model file), and
// a file read whole into memory must fit a size bound chosen per kind of file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::llm {

// Bounds on files read whole into memory, each far above what real checkpoints ship.
inline constexpr uint64_t kMaxConfigFileBytes = 16ull << 20;  // config.json, generation_config.json (a few KiB)
inline constexpr uint64_t kMaxIndexFileBytes = 64ull << 20;   // model.safetensors.index.json (a few MiB)
inline constexpr uint64_t kMaxTokenizerConfigFileBytes = 64ull << 20;  // tokenizer_config.json (up to ~2 MiB)
inline constexpr uint64_t kMaxTokenizerFileBytes = 256ull << 20;       // tokenizer.json (up to ~35 MiB)

// True when `path` names a regular file (symbolic links followed), false when nothing is
// there; anything else (a FIFO, a directory, a device, a socket, a path that cannot be
// examined) is a Runtime error under `op`, e.g. "config.json is a FIFO, expected a
// regular file".
bool regular_file_exists(const std::string& path, std::string_view op);

// An open file descriptor of a regular file, checked after opening (so a file swapped
// for a FIFO between a check and the open is still refused) and opened non-blocking (so
// opening a FIFO cannot block). `size` receives its byte size. The caller closes it.
int open_regular_file(const std::string& path, std::string_view op, uint64_t& size);

// The whole content of the regular file `path`, at most `max_bytes` long.
std::string read_regular_file(const std::string& path, uint64_t max_bytes, std::string_view op);

}  // namespace kiln::llm
