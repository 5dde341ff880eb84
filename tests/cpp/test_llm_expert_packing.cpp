// Experts loaded as stored are copied out of the file mapping into one allocation per
// projection (which the allocator backs with huge pages) when the memory allows, and stay
// mapped views otherwise: both ways hold the checkpoint's exact bytes, and the fallback
// is taken cleanly, for the per-expert and the fused [E, 2I, H] layouts, bf16 and FP8.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>

#include "kiln/llm.h"
#include "llm/checkpoint.h"
#include "llm/config.h"
#include "llm/weights.h"
#include "llm_model_test_util.h"

namespace kiln::llm {
namespace {

using kiln::testing::tiny_model_dir;

bool mapped(const Tensor& t) { return !t.storage()->from_allocator && t.storage()->read_only; }

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// Restores the system's available memory when a test ends, whatever happened.
struct AvailableMemoryOverride {
  explicit AvailableMemoryOverride(std::optional<int64_t> bytes) { override_available_memory_for_packing(bytes); }
  ~AvailableMemoryOverride() { override_available_memory_for_packing(std::nullopt); }
};

int64_t first_moe_layer(const ModelConfig& c) {
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (c.moe_layers[i]) return i;
  }
  return -1;
}

struct Loaded {
  Checkpoint checkpoint;
  ModelConfig config;
  std::string prefix;
  MoeExperts experts;
};

Loaded load_experts(const std::string& arch, bool fp8, bool pack = true) {
  const std::string& dir = tiny_model_dir(arch, fp8);
  Loaded l{Checkpoint::open(dir), load_model_config(dir), "", {}};
  const int64_t layer = first_moe_layer(l.config);
  EXPECT_GE(layer, 0);
  l.prefix = "model.layers." + std::to_string(layer) + ".mlp.experts";
  WeightLoader loader(l.checkpoint, WeightFormat::AsStored, {}, pack);
  l.experts = loader.experts({l.prefix, "gate_proj", "up_proj", "down_proj"}, l.config.num_experts,
                             l.config.moe_intermediate_size, l.config.hidden_size);
  return l;
}

// The loaded experts hold the checkpoint's bytes, per-expert or fused layout.
void expect_checkpoint_bytes(const Loaded& l) {
  const int64_t E = l.config.num_experts, I = l.config.moe_intermediate_size;
  ASSERT_EQ(static_cast<int64_t>(l.experts.experts.size()), E);
  const bool fused = l.checkpoint.has(l.prefix + ".gate_up_proj");
  for (int64_t e = 0; e < E; ++e) {
    const SwigluWeights& w = l.experts.experts[static_cast<size_t>(e)];
    if (fused) {
      const Tensor gate_up = l.checkpoint.get(l.prefix + ".gate_up_proj").select(0, e);
      EXPECT_TRUE(same_bytes(w.gate, gate_up.narrow(0, 0, I))) << "expert " << e;
      EXPECT_TRUE(same_bytes(w.up, gate_up.narrow(0, I, I))) << "expert " << e;
      EXPECT_TRUE(same_bytes(w.down, l.checkpoint.get(l.prefix + ".down_proj").select(0, e))) << "expert " << e;
    } else {
      const std::string base = l.prefix + "." + std::to_string(e) + ".";
      EXPECT_TRUE(same_bytes(w.gate, l.checkpoint.get(base + "gate_proj.weight"))) << "expert " << e;
      EXPECT_TRUE(same_bytes(w.up, l.checkpoint.get(base + "up_proj.weight"))) << "expert " << e;
      EXPECT_TRUE(same_bytes(w.down, l.checkpoint.get(base + "down_proj.weight"))) << "expert " << e;
    }
  }
}

struct Case {
  const char* arch;
  bool fp8;
};
// qwen3_moe: per-expert tensors; qwen3_5_moe: fused bf16 experts (per-expert in FP8).
constexpr Case kCases[] = {{"qwen3_moe", false}, {"qwen3_moe", true}, {"qwen3_5_moe", false}, {"qwen3_5_moe", true}};

TEST(LlmExpertPacking, MappedExpertsArePackedWhenMemoryAllows) {
  const AvailableMemoryOverride plenty(int64_t{1} << 40);
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.arch) + (c.fp8 ? " fp8" : " bf16"));
    const Loaded l = load_experts(c.arch, c.fp8);
    expect_checkpoint_bytes(l);
    const SwigluWeights& first = l.experts.experts.front();
    const SwigluWeights& last = l.experts.experts.back();
    for (const Tensor* t : {&first.gate, &first.up, &first.down}) {
      EXPECT_FALSE(mapped(*t));
      EXPECT_TRUE(t->storage()->from_allocator);
    }
    // One allocation per projection (gate and up share the fused one).
    EXPECT_EQ(first.gate.storage(), last.gate.storage());
    EXPECT_EQ(first.down.storage(), last.down.storage());
  }
}

TEST(LlmExpertPacking, ExpertsStayMappedWhenMemoryIsShort) {
  // Less than the headroom: nothing fits, every expert stays a view of the mapping.
  const AvailableMemoryOverride short_of_memory(kPackingHeadroomBytes / 2);
  EXPECT_FALSE(may_pack_experts(1));
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.arch) + (c.fp8 ? " fp8" : " bf16"));
    const Loaded l = load_experts(c.arch, c.fp8);
    expect_checkpoint_bytes(l);
    for (const SwigluWeights& w : l.experts.experts) {
      EXPECT_TRUE(mapped(w.gate));
      EXPECT_TRUE(mapped(w.up));
      EXPECT_TRUE(mapped(w.down));
    }
  }
}

TEST(LlmExpertPacking, ALoaderToldNotToPackKeepsTheMapping) {
  const AvailableMemoryOverride plenty(int64_t{1} << 40);
  const Loaded l = load_experts("qwen3_moe", false, /*pack=*/false);
  expect_checkpoint_bytes(l);
  for (const SwigluWeights& w : l.experts.experts) EXPECT_TRUE(mapped(w.gate));
}

TEST(LlmExpertPacking, TheJudgementLeavesTheHeadroom) {
  const AvailableMemoryOverride some(kPackingHeadroomBytes + 1000);
  EXPECT_TRUE(may_pack_experts(1000));
  EXPECT_FALSE(may_pack_experts(1001));
}

// Packed or mapped, a whole model computes the same logits.
TEST(LlmExpertPacking, PackedAndMappedModelsGiveTheSameLogits) {
  const std::vector<int32_t> prompt = {17, 3, 250, 101, 42, 7};
  for (const char* arch : {"qwen3_moe", "qwen3_5_moe"}) {
    SCOPED_TRACE(arch);
    Tensor logits[2];
    for (int packed = 0; packed < 2; ++packed) {
      const AvailableMemoryOverride memory(packed ? std::optional<int64_t>(int64_t{1} << 40) : std::optional<int64_t>(0));
      auto model = Model::load(tiny_model_dir(arch), LoadOptions{});
      logits[packed] = model->forward(prompt);
    }
    EXPECT_TRUE(same_bytes(logits[0], logits[1]));
  }
}

}  // namespace
}  // namespace kiln::llm
