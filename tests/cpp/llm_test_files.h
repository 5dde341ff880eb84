// Scratch folders and raw files for the LLM-layer tests (checkpoints, configs).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace kiln::testing {

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("kiln_") + info->test_suite_name() + "_" + info->name() + "_" +
                       std::to_string(::getpid()) + "_" + std::to_string(counter()++);
    for (char& ch : name) {
      if (ch == '/') ch = '_';
    }
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file written by hand: the 8-byte little-endian length (header.size()
// unless overridden), the header text, then the data bytes.
inline void write_safetensors_bytes(const std::string& path, const std::string& header, const std::string& data,
                                    uint64_t header_len_override = UINT64_MAX) {
  const uint64_t len = header_len_override == UINT64_MAX ? header.size() : header_len_override;
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &len, 8);
  write_file(path, bytes + header + data);
}

}  // namespace kiln::testing
