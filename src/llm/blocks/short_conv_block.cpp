#include "llm/blocks/short_conv_block.h"

#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/shape.h"

namespace kiln::llm {

Tensor ShortConvBlock::forward(const Tensor& h, KvCache& cache, int64_t layer) const {
  const int64_t count = h.size(0);
  const int64_t taps = kernel.size(0);
  Tensor bcx = in_proj(h).to(DType::Float32);  // [T, 3H]; the gating products stay float32
  Tensor u = mul(bcx.narrow(1, 0, hidden), bcx.narrow(1, 2 * hidden, hidden));

  Tensor& state = cache.conv_state(layer);
  Tensor conv;
  if (count > 1) {
    // A prompt: one causal_conv1d call over every token, which reads the carried
    // history and leaves the last L-1 values of u in the state.
    conv = causal_conv1d(u, kernel.t(), state, "none");
  } else {
    // One decode token: the conv input with its history [L-1 past values of u, then
    // u], one tap at a time.
    Tensor history = cat({state, u}, 0);  // [L-1+T, H]
    conv = mul(history.narrow(0, 0, count), kernel.select(0, 0));
    for (int64_t j = 1; j < taps; ++j) add_(conv, mul(history.narrow(0, j, count), kernel.select(0, j)));
    if (taps > 1) state.copy_(history.narrow(0, count, taps - 1));
  }

  return out_proj(mul(bcx.narrow(1, hidden, hidden), conv));
}

int64_t ShortConvBlock::decode_bytes() const {
  return in_proj.bytes() + out_proj.bytes() + static_cast<int64_t>(kernel.nbytes());
}

}  // namespace kiln::llm
