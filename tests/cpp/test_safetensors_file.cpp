// kiln/safetensors.h: load_safetensors / save_safetensors round trips (every dtype,
// non-contiguous and empty tensors, metadata), loaded tensors independent of the file,
// and hostile files (truncated, lying header length, overlapping or out-of-range
// offsets, bad dtype, duplicate names) refused with errors naming the file and tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "kiln/ops/creation.h"
#include "kiln/safetensors.h"
#include "llm_test_files.h"
#include "test_util.h"

using namespace kiln;
using kiln::testing::expect_error;
using kiln::testing::TempDir;
using kiln::testing::write_file;
using kiln::testing::write_safetensors_bytes;

namespace {

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

Tensor ramp(const Shape& shape, DType dtype, double start) {
  return arange(Scalar(start), Scalar(start + static_cast<double>(shape_numel(shape))), Scalar(1.0), DType::Float32)
      .view(shape)
      .to(dtype);
}

}  // namespace

TEST(SafetensorsFile, RoundTripKeepsNamesOrderDtypesAndBytes) {
  TempDir dir;
  const std::string path = dir.file("sd.safetensors");
  const Tensor square = ramp({3, 4}, DType::Float32, -2.5);
  const NamedTensors tensors = {
      {"layer.weight", ramp({2, 3}, DType::Float32, 0.5)},
      {"b16", ramp({5}, DType::BFloat16, -2.0)},
      {"h", ramp({2, 2}, DType::Float16, 1.5)},
      {"d", ramp({3}, DType::Float64, 1e-3)},
      {"i32", ramp({2}, DType::Int32, -7)},
      {"i64", ramp({2, 2}, DType::Int64, -3)},
      {"mask", ramp({3}, DType::Bool, 0)},
      {"fp8", ramp({3, 2}, DType::Float8_e4m3fn, -3.0)},
      {"t", square.transpose(0, 1)},
      {"scalar", ramp({}, DType::Float32, 7.0)},
      {"empty", Tensor::empty({0, 3}, DType::Float32)},
  };
  save_safetensors(path, tensors, {{"format", "pt"}});
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const std::string& wanted = name;  // clang 14 captures no structured binding
    const auto it = std::find_if(file.tensors.begin(), file.tensors.end(), [&](const auto& e) { return e.first == wanted; });
    ASSERT_NE(it, file.tensors.end());
    EXPECT_EQ(it->second.shape(), t.shape());
    EXPECT_EQ(it->second.dtype(), t.dtype());
    EXPECT_EQ(bytes_of(it->second), bytes_of(t));
  }
}

TEST(SafetensorsFile, LoadedTensorsAreWritableCopiesIndependentOfTheFile) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  save_safetensors(path, {{"w", ramp({4}, DType::Float32, 1.0)}});
  SafetensorsFile file = load_safetensors(path);
  Tensor w = file.tensors.at(0).second;
  std::filesystem::remove(path);
  w.fill_(Scalar(3.0));  // not read-only, and the file is gone
  EXPECT_EQ(w.at({2}).to_double(), 3.0);
  // Saving over the file that was loaded from is fine too.
  save_safetensors(path, {{"w", w}});
  EXPECT_EQ(load_safetensors(path).tensors.at(0).second.at({0}).to_double(), 3.0);
}

TEST(SafetensorsFile, SaveRefusesBadInput) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  expect_error([&] { save_safetensors(path, {{"a", Tensor::empty({1})}, {"a", Tensor::empty({1})}}); },
               ErrorKind::Value, "given twice");
  expect_error([&] { save_safetensors(path, {{"", Tensor::empty({1})}}); }, ErrorKind::Value, "cannot be a tensor name");
  expect_error([&] { save_safetensors(path, {{"x", Tensor()}}); }, ErrorKind::Value, "tensor 'x' is undefined");
  expect_error([&] { save_safetensors(path, {{"c", Tensor::empty({2}, DType::Complex64)}}); }, ErrorKind::Type,
               "no safetensors spelling");
  EXPECT_FALSE(std::filesystem::exists(path));  // no partial file left behind
  expect_error([&] { save_safetensors(dir.file("no/such/dir.safetensors"), {{"a", Tensor::empty({1})}}); },
               ErrorKind::Runtime, "cannot create the file");
}

TEST(SafetensorsFile, HostileFilesAreErrorsNotCrashes) {
  TempDir dir;
  const std::string path = dir.file("h.safetensors");
  const std::string entry = R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  const std::string data(24, '\1');

  write_file(path, "abc");
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "shorter than the 8-byte header length");

  write_safetensors_bytes(path, "{" + entry + "}", data, 1'000'000);
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "header length");

  write_safetensors_bytes(path, "{" + entry + "}", data.substr(0, 10));  // truncated data
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "'w'");

  write_safetensors_bytes(path,
                          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          std::string(12, '\0'));
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "overlap");

  write_safetensors_bytes(path, R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", data);
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "'w'");

  write_safetensors_bytes(path, R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", data);
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "unknown dtype 'Q4'");

  write_safetensors_bytes(path, "{" + entry + "," + entry + "}", data);
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "appears twice");

  write_safetensors_bytes(path, "[1, 2]", "");
  expect_error([&] { load_safetensors(path); }, ErrorKind::Value, "JSON object");

  expect_error([&] { load_safetensors(dir.file("missing.safetensors")); }, ErrorKind::Runtime, "missing.safetensors");
}
