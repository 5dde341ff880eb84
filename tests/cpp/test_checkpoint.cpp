// Safetensors checkpoints: write -> open -> get round trips (bit-exact), sharding through
// the index, name mapping, release(), and one hand-made hostile file per validation rule,
// each error checked to name the file and the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/ops/creation.h"
#include "kiln/tensor.h"
#include "llm/checkpoint.h"
#include "llm/safetensors_format.h"
#include "llm_test_files.h"
#include "test_util.h"

using namespace kiln;
using kiln::llm::Checkpoint;
using kiln::testing::expect_error;
using kiln::testing::TempDir;
using kiln::testing::write_file;
using kiln::testing::write_safetensors_bytes;

namespace {

// Bytes of t in row-major order.
std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

Tensor filled(const Shape& shape, DType dtype, double start) {
  Tensor f = arange(Scalar(start), Scalar(start + static_cast<double>(shape_numel(shape))), Scalar(1.0),
                    DType::Float32);
  return f.view(shape).to(dtype);
}

// One F32 tensor "w" of shape [2, 3] as a header entry.
const std::string kGoodEntry = R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";

}  // namespace

TEST(Checkpoint, RoundTripKeepsEveryDtypeBitExact) {
  TempDir dir;
  const Tensor base = filled({3, 4}, DType::Float32, -5.5);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", filled({2, 3}, DType::Float32, 0.25)},
      {"bf16", filled({5}, DType::BFloat16, -2.0)},
      {"f16", filled({2, 2}, DType::Float16, 1.5)},
      {"f64", filled({3}, DType::Float64, 1e-3)},
      {"i64", filled({2, 2}, DType::Int64, -3)},
      {"u8", filled({4}, DType::UInt8, 250)},
      {"i8", filled({3}, DType::Int8, -1)},
      {"boolean", filled({3}, DType::Bool, 0)},
      {"fp8", filled({3, 2}, DType::Float8_e4m3fn, -3.0)},
      {"e5m2", filled({2}, DType::Float8_e5m2, 0.5)},
      {"transposed", base.transpose(0, 1)},  // not contiguous: written in its logical order
      {"scalar", filled({}, DType::Float32, 7.0)},
      {"empty", Tensor::empty({0, 3}, DType::Float32)},
  };
  llm::write_safetensors(dir.file("model.safetensors"), tensors, {{"format", "pt"}});

  const Checkpoint ckpt = Checkpoint::open(dir.str());
  ASSERT_EQ(ckpt.files().size(), 1u);
  EXPECT_EQ(ckpt.names().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const Tensor got = ckpt.get(name, t.shape(), t.dtype());
    EXPECT_EQ(got.shape(), t.shape());
    EXPECT_EQ(got.dtype(), t.dtype());
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(bytes_of(got), bytes_of(t));
  }
  EXPECT_EQ(ckpt.get("transposed").at({1, 2}).to_double(), base.at({2, 1}).to_double());
}

TEST(Checkpoint, HeaderIsPaddedOrderedAndDataContiguous) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  llm::write_safetensors(path, {{"b", filled({3}, DType::Float32, 0)}, {"a", filled({1}, DType::BFloat16, 1)}},
                         {{"format", "pt"}});
  const std::string bytes = kiln::testing::read_file(path);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  EXPECT_EQ(len % 8, 0u);
  const std::string header = bytes.substr(8, len);
  EXPECT_EQ(header.find(R"({"__metadata__":{"format":"pt"},"b":)"), 0u) << header;
  EXPECT_LT(header.find("\"b\""), header.find("\"a\""));
  // Padding: at most 7 spaces after the closing brace.
  EXPECT_LT(len - (header.rfind('}') + 1), 8u);
  EXPECT_EQ(header.find_first_not_of(' ', header.rfind('}') + 1), std::string::npos);
  const auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["b"]["data_offsets"], nlohmann::json::array({0, 12}));
  EXPECT_EQ(j["a"]["data_offsets"], nlohmann::json::array({12, 14}));
  EXPECT_EQ(bytes.size(), 8 + len + 14);
}

TEST(Checkpoint, GetChecksShapeAndDtype) {
  TempDir dir;
  llm::write_safetensors(dir.file("model.safetensors"), {{"w", filled({2, 3}, DType::BFloat16, 0)}});
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  const std::string file = dir.file("model.safetensors");
  expect_error([&] { ckpt.get("w", {3, 2}, DType::BFloat16); }, ErrorKind::Value,
               "checkpoint " + file + ": tensor 'w' has shape [2, 3] dtype bfloat16, expected shape [3, 2] dtype "
               "bfloat16");
  expect_error([&] { ckpt.get("w", {2, 3}, DType::Float32); }, ErrorKind::Value, "expected shape [2, 3] dtype float32");
  expect_error([&] { ckpt.get("w", {6}); }, ErrorKind::Value, "has shape [2, 3] dtype bfloat16, expected shape [6]");
  expect_error([&] { ckpt.get("missing"); }, ErrorKind::Value, "no tensor 'missing'");
  expect_error([&] { ckpt.entry("missing"); }, ErrorKind::Value, dir.str());
  EXPECT_TRUE(ckpt.has("w"));
  EXPECT_FALSE(ckpt.has("missing"));
  EXPECT_EQ(ckpt.entry("w").end - ckpt.entry("w").begin, 12u);
}

TEST(Checkpoint, ReleaseKeepsDataReadable) {
  TempDir dir;
  // Several pages, between two small neighbours whose pages must survive.
  const Tensor big = filled({3, 65536}, DType::Float32, -1000.0);
  const Tensor left = filled({3}, DType::Float32, 1.0);
  const Tensor right = filled({5}, DType::Float32, 2.0);
  llm::write_safetensors(dir.file("model.safetensors"), {{"left", left}, {"big", big}, {"right", right}});
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  const Tensor view = ckpt.get("big");
  ASSERT_EQ(bytes_of(view), bytes_of(big));
  ckpt.release("big");
  ckpt.release("left");  // smaller than a page: nothing to drop, still fine
  // The pages fault back in from the file.
  EXPECT_EQ(bytes_of(view), bytes_of(big));
  EXPECT_EQ(bytes_of(ckpt.get("big")), bytes_of(big));
  EXPECT_EQ(bytes_of(ckpt.get("left")), bytes_of(left));
  EXPECT_EQ(bytes_of(ckpt.get("right")), bytes_of(right));
  // prefault reads pages in again, whatever their alignment; contents unchanged.
  for (const char* name : {"big", "left", "right"}) ckpt.prefault(name);
  EXPECT_EQ(bytes_of(view), bytes_of(big));
  EXPECT_EQ(bytes_of(ckpt.get("left")), bytes_of(left));
}

TEST(Checkpoint, ViewsOutliveTheCheckpoint) {
  TempDir dir;
  const Tensor w = filled({4, 4}, DType::Float32, 3.0);
  llm::write_safetensors(dir.file("model.safetensors"), {{"w", w}});
  Tensor view;
  {
    const Checkpoint ckpt = Checkpoint::open(dir.str());
    view = ckpt.get("w");
  }
  EXPECT_EQ(bytes_of(view), bytes_of(w));
}

TEST(Checkpoint, MisalignedTensorIsCopiedIntoAlignedMemory) {
  TempDir dir;
  // A header of 61 bytes (not padded) puts the F32 data at offset 69.
  std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append(61 - header.size(), ' ');
  const float values[2] = {1.5f, -2.25f};
  write_safetensors_bytes(dir.file("model.safetensors"), header, std::string(reinterpret_cast<const char*>(values), 8));
  const Tensor x = Checkpoint::open(dir.str()).get("x");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data_ptr()) % alignof(float), 0u);
  EXPECT_EQ(x.at({0}).to_double(), 1.5);
  EXPECT_EQ(x.at({1}).to_double(), -2.25);
}

TEST(Checkpoint, ShardedThroughIndex) {
  TempDir dir;
  const Tensor a = filled({2, 2}, DType::BFloat16, 1);
  const Tensor b = filled({3}, DType::Float32, 2);
  llm::write_safetensors(dir.file("model-00001-of-00002.safetensors"), {{"model.a", a}});
  llm::write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{"model.b", b}, {"model.c", b}});
  // model.c is in shard 2 but not in the weight_map: loaded all the same.
  write_file(dir.file("model.safetensors.index.json"),
             R"({"metadata":{"total_size":20},"weight_map":{"model.a":"model-00001-of-00002.safetensors",
                "model.b":"model-00002-of-00002.safetensors"}})");
  // A stray file the index does not name is ignored.
  llm::write_safetensors(dir.file("model.safetensors"), {{"model.stray", a}});
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"model.a", "model.b", "model.c"}));
  EXPECT_EQ(bytes_of(ckpt.get("model.a")), bytes_of(a));
  EXPECT_EQ(bytes_of(ckpt.get("model.b")), bytes_of(b));
  EXPECT_EQ(ckpt.files()[ckpt.entry("model.b").file], dir.file("model-00002-of-00002.safetensors"));
}

TEST(Checkpoint, IndexErrorsNameIndexShardAndTensor) {
  const Tensor a = filled({2}, DType::Float32, 1);
  const auto setup = [&](TempDir& dir, const std::string& index) {
    llm::write_safetensors(dir.file("s1.safetensors"), {{"model.a", a}});
    llm::write_safetensors(dir.file("s2.safetensors"), {{"model.b", a}});
    write_file(dir.file("model.safetensors.index.json"), index);
  };
  {
    TempDir dir;
    setup(dir, R"({"weight_map":{"model.a":"s1.safetensors","model.b":"gone.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "shard 'gone.safetensors'");
  }
  {
    TempDir dir;
    setup(dir, R"({"weight_map":{"model.a":"s2.safetensors","model.b":"s2.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value,
                 "tensor 'model.a' is mapped to shard 's2.safetensors' but no shard holds it");
  }
  {
    TempDir dir;
    setup(dir, R"({"weight_map":{"model.a":"s1.safetensors","model.b":"s1.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "tensor 'model.b' is mapped to shard");
  }
  {
    TempDir dir;
    setup(dir, R"({"weight_map":{"model.a":"s1.safetensors","model.b":"s2.safetensors"}})");
    llm::write_safetensors(dir.file("s2.safetensors"), {{"model.b", a}, {"model.a", a}});
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "tensor 'model.a' is also in " +
                 dir.file("s1.safetensors"));
  }
  {
    TempDir dir;
    setup(dir, R"({"weight_map":{"model.a":"../s1.safetensors"}})");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "expected a file name in the folder");
  }
  {
    TempDir dir;
    setup(dir, R"({"weight_map":{"model.a":3}})");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "tensor 'model.a' maps to 3");
  }
  {
    TempDir dir;
    setup(dir, R"({"metadata":{}})");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "'weight_map'");
  }
  {
    TempDir dir;
    setup(dir, R"({"weight_map":)");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value,
                 dir.file("model.safetensors.index.json") + ": not valid JSON");
  }
}

TEST(Checkpoint, MultimodalNamesAreMappedAndSkipped) {
  TempDir dir;
  const Tensor t = filled({2}, DType::BFloat16, 0);
  llm::write_safetensors(dir.file("model.safetensors"), {{"model.language_model.layers.0.mlp.gate.weight", t},
                                                         {"model.visual.blocks.0.attn.qkv.weight", t},
                                                         {"mtp.fc.weight", t},
                                                         {"lm_head.weight", t}});
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"lm_head.weight", "model.layers.0.mlp.gate.weight"}));
  EXPECT_EQ(ckpt.entry("model.layers.0.mlp.gate.weight").name, "model.layers.0.mlp.gate.weight");

  TempDir twice;
  llm::write_safetensors(twice.file("model.safetensors"), {{"model.norm.weight", t},
                                                           {"model.language_model.norm.weight", t}});
  expect_error([&] { Checkpoint::open(twice.str()); }, ErrorKind::Value,
               "tensor 'model.norm.weight' and tensor 'model.language_model.norm.weight' of " + twice.file("model.safetensors") +
                   " are both read as 'model.norm.weight'");
}

TEST(Checkpoint, FolderWithoutIndexOrModelFileReadsEverySafetensors) {
  TempDir dir;
  const Tensor t = filled({2}, DType::Float32, 0);
  llm::write_safetensors(dir.file("b.safetensors"), {{"b", t}});
  llm::write_safetensors(dir.file("a.safetensors"), {{"a", t}});
  write_file(dir.file("notes.txt"), "not a checkpoint");
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt.files(), (std::vector<std::string>{dir.file("a.safetensors"), dir.file("b.safetensors")}));
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ckpt.dir(), dir.str());

  TempDir empty;
  expect_error([&] { Checkpoint::open(empty.str()); }, ErrorKind::Runtime, "holds no model.safetensors.index.json");
  expect_error([&] { Checkpoint::open(empty.file("nope")); }, ErrorKind::Runtime, "is not a directory");
  expect_error([&] { Checkpoint().names(); }, ErrorKind::Runtime, "not opened");
}

// Each hostile header, and the text its error must contain besides the file path.
struct HostileCase {
  const char* what;
  std::string header;
  std::string data;
  std::string needle;
  uint64_t header_len = UINT64_MAX;
};

TEST(Checkpoint, HostileFilesAreRefusedWithFileAndTensorNamed) {
  const std::string data24(24, '\0');
  const std::vector<HostileCase> cases = {
      {"header length past the file", "{}", "", "header length 1000 exceeds", 1000},
      {"absurd header length", "{}", "", "header length 9223372036854775808 exceeds", uint64_t{1} << 63},
      {"not JSON", "{\"w\":", data24, "header is not valid JSON"},
      {"invalid UTF-8", "{\"w\xff\":1}", data24, "header is not valid JSON"},
      {"JSON array", "[1,2]", data24, "header must be a JSON object, got array"},
      {"entry not an object", R"({"w":3})", data24, "tensor 'w': expected an object"},
      {"missing dtype", R"({"w":{"shape":[2,3],"data_offsets":[0,24]}})", data24, "tensor 'w': missing 'dtype'"},
      {"missing shape", R"({"w":{"dtype":"F32","data_offsets":[0,24]}})", data24, "tensor 'w': missing 'shape'"},
      {"missing offsets", R"({"w":{"dtype":"F32","shape":[2,3]}})", data24, "tensor 'w': missing 'data_offsets'"},
      {"dtype not a string", R"({"w":{"dtype":4,"shape":[2,3],"data_offsets":[0,24]}})", data24,
       "tensor 'w': dtype must be a string"},
      {"unknown dtype", R"({"w":{"dtype":"F4","shape":[2,3],"data_offsets":[0,24]}})", data24,
       "tensor 'w': unknown dtype 'F4'"},
      {"shape not an array", R"({"w":{"dtype":"F32","shape":6,"data_offsets":[0,24]}})", data24,
       "tensor 'w': shape must be an array"},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", data24,
       "tensor 'w': shape [-2,3] must hold non-negative integers"},
      {"fractional dim", R"({"w":{"dtype":"F32","shape":[2.5,3],"data_offsets":[0,24]}})", data24,
       "tensor 'w': shape [2.5,3] must hold non-negative integers"},
      {"offsets not a pair", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0]}})", data24,
       "tensor 'w': data_offsets must be [begin, end]"},
      {"negative offset", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[-1,23]}})", data24,
       "tensor 'w': data_offsets must hold non-negative integers"},
      {"begin after end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", data24,
       "tensor 'w': data_offsets [8, 4] begin after end"},
      {"byte size overflow", R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,24]}})",
       data24, "tensor 'w'"},
      {"size differs from offsets", R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,24]}})", data24,
       "tensor 'w': shape [2, 2] of float32 needs 16 bytes but data_offsets [0, 24] hold 24"},
      {"past the data region", R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", std::string(20, '\0'),
       "tensor 'w': data_offsets [0, 24] run past the data region of 20 bytes"},
      {"overlap", "{" + kGoodEntry + R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})", data24,
       "tensor 'v': data_offsets [16, 24] overlap tensor 'w' [0, 24]"},
      {"duplicate name", "{" + kGoodEntry + "," + kGoodEntry + "}", data24, "tensor 'w' appears twice"},
      {"metadata not strings", "{" + kGoodEntry + R"(,"__metadata__":{"format":1}})", data24,
       "__metadata__ key 'format' must be a string"},
      {"deep nesting", R"({"w":{"dtype":"F32","shape":[[[[[[[[[[1]]]]]]]]]],"data_offsets":[0,24]}})", data24,
       "header JSON nests deeper"},
  };
  for (const HostileCase& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    write_safetensors_bytes(path, c.header, c.data, c.header_len);
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, "checkpoint " + path + ": ");
    expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value, c.needle);
  }

  TempDir dir;
  write_file(dir.file("model.safetensors"), "short");
  expect_error([&] { Checkpoint::open(dir.str()); }, ErrorKind::Value,
               "checkpoint " + dir.file("model.safetensors") + ": file is 5 bytes, shorter than the 8-byte");
  // The same check on bytes in memory, where a mapping cannot be made.
  const uint8_t three[3] = {1, 2, 3};
  expect_error([&] { llm::parse_safetensors_header(three, 3, "mem"); }, ErrorKind::Value, "file is 3 bytes");
}

TEST(Checkpoint, WriteSafetensorsRefusesWhatItCannotWrite) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  const Tensor t = filled({2}, DType::Float32, 0);
  expect_error([&] { llm::write_safetensors(path, {{"a", t}, {"a", t}}); }, ErrorKind::Value, "tensor 'a' given twice");
  expect_error([&] { llm::write_safetensors(path, {{"__metadata__", t}}); }, ErrorKind::Value, "cannot be a tensor name");
  expect_error([&] { llm::write_safetensors(path, {{"c", Tensor::empty({2}, DType::Complex64)}}); }, ErrorKind::Type,
               "tensor 'c': dtype complex64 has no safetensors spelling");
  expect_error([&] { llm::write_safetensors(path, {{"u", Tensor()}}); }, ErrorKind::Value, "tensor 'u' is undefined");
  expect_error([&] { llm::write_safetensors(dir.file("no/such/dir.safetensors"), {{"a", t}}); }, ErrorKind::Runtime,
               "cannot create the file");
}

TEST(Checkpoint, StreamingWriterChecksByteCountsAndRemovesPartialFiles) {
  TempDir dir;
  const std::string path = dir.file("s.safetensors");
  const float v[4] = {1, 2, 3, 4};
  {
    llm::SafetensorsWriter w(path, {{"a", DType::Float32, {2}}, {"z", DType::Float32, {0}}, {"b", DType::Float32, {2}}});
    w.write(v, 4);  // tensors may arrive in pieces
    w.write(v + 1, 8);
    expect_error([&] { w.write(v, 8); }, ErrorKind::Runtime, "more than the header declares");
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // not finished: removed
  {
    llm::SafetensorsWriter w(path, {{"a", DType::Float32, {2}}, {"b", DType::Float32, {2}}});
    w.write(v, 12);
    expect_error([&] { w.finish(); }, ErrorKind::Runtime, "tensor 'b' got 4 of its 8 bytes");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  {
    llm::SafetensorsWriter w(path, {{"a", DType::Float32, {2}}, {"b", DType::Float32, {2}}});
    w.write(v, 16);
    w.finish();
    EXPECT_EQ(std::filesystem::file_size(path), w.file_bytes());
  }
  const Checkpoint ckpt = Checkpoint::open(dir.str());
  EXPECT_EQ(ckpt.get("b").at({1}).to_double(), 4.0);
}
