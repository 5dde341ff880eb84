// The pieces every decoder family loads the same way, whatever its tensor names: the
// dense SwiGLU FFN and the output head.
#include "llm/decoder.h"

namespace kiln::llm {

DenseFfn load_dense_ffn(const ModelConfig& c, WeightLoader& loader, const std::string& prefix,
                        const std::string& gate, const std::string& up, const std::string& down) {
  const int64_t hidden = c.hidden_size, width = c.intermediate_size;
  return DenseFfn{loader.linear(prefix + gate + ".weight", width, hidden, LinearRole::Projection),
                  loader.linear(prefix + up + ".weight", width, hidden, LinearRole::Projection),
                  loader.linear(prefix + down + ".weight", hidden, width, LinearRole::Projection)};
}

Linear load_lm_head(const ModelConfig& c, WeightLoader& loader, const Tensor& embedding) {
  return c.tie_word_embeddings ? loader.tied_lm_head(embedding)
                               : loader.linear("lm_head.weight", c.vocab_size, c.hidden_size, LinearRole::LmHead);
}

}  // namespace kiln::llm
