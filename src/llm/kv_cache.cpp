#include "llm/kv_cache.h"

#include <algorithm>

#include "kiln/error.h"
#include "kiln/int_math.h"
#include "kiln/ops/creation.h"
#include "kiln/runtime.h"

namespace kiln::llm {
namespace {

constexpr const char* kOp = "KvCache";

// float32 zeros on `device` (the fixed states start a sequence from zero history).
Tensor zeros_on(Device device, const Shape& sizes) {
  Tensor t = Tensor::empty(sizes, DType::Float32, device, kOp);
  t.zero_();
  return t;
}

}  // namespace

int64_t check_kv_cache_fits(const std::vector<MixerKind>& mixers, int64_t kv_heads, int64_t head_dim,
                            int64_t conv_kernel, int64_t conv_channels, int64_t capacity, DType dtype,
                            const DeltaNetGeometry& d) {
  // Products and sums that remember whether any of them left int64.
  bool fits = true;
  const auto mul = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    fits = checked_mul(a, b, &r) && fits;
    return r;
  };
  const auto add = [&](int64_t a, int64_t b) {
    int64_t r = 0;
    fits = checked_add(a, b, &r) && fits;
    return r;
  };
  const int64_t value_bytes = static_cast<int64_t>(itemsize(dtype));
  const int64_t float_bytes = static_cast<int64_t>(sizeof(float));
  int64_t bytes = 0;
  for (MixerKind mixer : mixers) {
    if (mixer == MixerKind::Attention) {
      // keys and values: 2 x [kv_heads, capacity, head_dim]
      bytes = add(bytes, mul(mul(mul(kv_heads, head_dim), 2 * value_bytes), capacity));
    } else if (mixer == MixerKind::GatedDeltaNet) {
      // float32 conv history [K-1, 2 Hk dk + Hv dv] and recurrent state [Hv, dk, dv].
      const int64_t values = mul(d.num_value_heads, d.value_head_dim);
      const int64_t channels = add(mul(mul(d.num_key_heads, d.key_head_dim), 2), values);
      const int64_t state = add(mul(values, d.key_head_dim), mul(std::max<int64_t>(d.conv_kernel - 1, 0), channels));
      bytes = add(bytes, mul(state, float_bytes));
    } else {
      bytes = add(bytes, mul(mul(std::max<int64_t>(conv_kernel - 1, 0), conv_channels), float_bytes));
    }
    if (!fits) break;
  }
  if (!fits) {
    fail(ErrorKind::Runtime, kOp, "a context of {} tokens needs more than 2^63 bytes of K/V cache; pass a smaller "
         "max_context", capacity);
  }
  const int64_t memory = cpu_info().total_memory_bytes;
  if (memory > 0 && bytes > memory) {
    fail(ErrorKind::Runtime, kOp, "a context of {} tokens needs {} bytes of K/V cache and conv state, more than the "
         "{} bytes of memory of this machine; pass a smaller max_context", capacity, bytes, memory);
  }
  return bytes;
}

KvCache::KvCache(const std::vector<MixerKind>& mixers, int64_t kv_heads, int64_t head_dim, int64_t conv_kernel,
                 int64_t conv_channels, int64_t capacity, DType dtype, const DeltaNetGeometry& delta_net,
                 Device device)
    : capacity_(capacity), dtype_(dtype) {
  KILN_CHECK_KIND(dtype == DType::Float32 || dtype == DType::BFloat16, Value, kOp,
                  "the cache dtype must be float32 or bfloat16, got {}", dtype_name(dtype));
  KILN_CHECK_KIND(capacity > 0, Value, kOp, "the context must hold at least one token, got {}", capacity);
  total_bytes_ = check_kv_cache_fits(mixers, kv_heads, head_dim, conv_kernel, conv_channels, capacity, dtype, delta_net);
  slots_.resize(mixers.size());
  for (size_t i = 0; i < mixers.size(); ++i) {
    if (mixers[i] == MixerKind::Attention) {
      slots_[i].keys = Tensor::empty({1, kv_heads, capacity, head_dim}, dtype, device, kOp);
      slots_[i].values = Tensor::empty({1, kv_heads, capacity, head_dim}, dtype, device, kOp);
      kv_bytes_per_token_ += 2 * kv_heads * head_dim * static_cast<int64_t>(itemsize(dtype));
    } else if (mixers[i] == MixerKind::GatedDeltaNet) {
      const DeltaNetGeometry& d = delta_net;
      KILN_CHECK_KIND(d.conv_kernel >= 1 && d.num_value_heads > 0 && d.key_head_dim > 0 && d.value_head_dim > 0,
                      Value, kOp, "layer {} is a Gated DeltaNet layer but its state geometry is empty", i);
      slots_[i].delta_conv = zeros_on(device, {d.conv_kernel - 1, d.conv_channels()});
      slots_[i].recurrent = zeros_on(device, {d.num_value_heads, d.key_head_dim, d.value_head_dim});
    } else {
      KILN_CHECK_KIND(conv_kernel >= 1, Value, kOp, "layer {} is a short conv but the conv kernel size is {}", i,
                      conv_kernel);
      slots_[i].conv = zeros_on(device, {conv_kernel - 1, conv_channels});
    }
  }
}

const KvCache::Slot& KvCache::slot(int64_t layer, MixerKind kind) const {
  KILN_CHECK_KIND(layer >= 0 && layer < static_cast<int64_t>(slots_.size()), Index, kOp,
                  "layer {} is outside the {} layers", layer, slots_.size());
  const Slot& s = slots_[layer];
  const bool present = kind == MixerKind::Attention ? s.keys.defined()
                       : kind == MixerKind::ShortConv ? s.conv.defined()
                                                      : s.recurrent.defined();
  KILN_CHECK(present, kOp, "layer {} is not {}", layer,
             kind == MixerKind::Attention   ? "an attention layer"
             : kind == MixerKind::ShortConv ? "a short-conv layer"
                                            : "a Gated DeltaNet layer");
  return s;
}

void KvCache::write(int64_t layer, int64_t start, const Tensor& keys, const Tensor& values) {
  const Slot& s = slot(layer, MixerKind::Attention);
  const int64_t count = keys.size(0);
  KILN_CHECK_KIND(start >= 0 && start + count <= capacity_, Index, kOp,
                  "writing {} tokens at position {} exceeds the context of {} tokens", count, start, capacity_);
  // [T, kv_heads, head_dim] -> the [kv_heads, T, head_dim] window of the cache; copy_
  // casts to the cache dtype.
  s.keys.select(0, 0).narrow(1, start, count).copy_(keys.transpose(0, 1));
  s.values.select(0, 0).narrow(1, start, count).copy_(values.transpose(0, 1));
}

const Tensor& KvCache::keys(int64_t layer) const { return slot(layer, MixerKind::Attention).keys; }
const Tensor& KvCache::values(int64_t layer) const { return slot(layer, MixerKind::Attention).values; }

Tensor& KvCache::conv_state(int64_t layer) {
  slot(layer, MixerKind::ShortConv);
  return slots_[layer].conv;
}

Tensor& KvCache::delta_conv_state(int64_t layer) {
  slot(layer, MixerKind::GatedDeltaNet);
  return slots_[layer].delta_conv;
}

Tensor& KvCache::delta_recurrent_state(int64_t layer) {
  slot(layer, MixerKind::GatedDeltaNet);
  return slots_[layer].recurrent;
}

void KvCache::reset() {
  for (Slot& s : slots_) {
    if (s.conv.defined()) s.conv.zero_();
    if (s.delta_conv.defined()) s.delta_conv.zero_();
    if (s.recurrent.defined()) s.recurrent.zero_();
  }
}

}  // namespace kiln::llm
