#include "llm/device_placement.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "kiln/error.h"
#include "kiln/ops/shape.h"

namespace kiln::llm {
namespace {

constexpr const char* kLoad = "load model";

// Byte range [begin, end) of its storage that a tensor's elements cover.
struct ByteSpan {
  int64_t begin = 0, end = 0;
};
ByteSpan byte_span(const Tensor& t) {
  const int64_t item = static_cast<int64_t>(t.element_size());
  int64_t extent = t.numel() == 0 ? 0 : 1;
  for (int64_t d = 0; d < t.dim() && extent > 0; ++d) extent += (t.size(d) - 1) * t.stride(d);
  return {t.storage_offset() * item, (t.storage_offset() + extent) * item};
}

class Placer {
 public:
  explicit Placer(Device device) : device_(device) {}

  void move(Tensor& t) { move_together({&t}); }
  void move(std::optional<Tensor>& t) {
    if (t) move(*t);
  }
  void move(Linear& l) { move_together({&l.weight, l.scale ? &*l.scale : nullptr}); }
  void move(SwigluWeights& w, std::vector<Tensor*>& out) {
    for (Tensor* t : {&w.gate, &w.up, &w.down}) out.push_back(t);
    for (std::optional<Tensor>* t : {&w.gate_scale, &w.up_scale, &w.down_scale}) {
      if (*t) out.push_back(&**t);
    }
  }
  // Every tensor of the experts at once: views of one allocation stay one allocation. A
  // device's expert kernels read each projection as one tensor at a constant stride per
  // expert; a projection whose experts are not laid out so on the host (separate tensors
  // of an as-stored checkpoint) is stacked into one [E, ...] tensor on the way up.
  void move(MoeExperts& e) {
    std::vector<Tensor*> all;
    for (Tensor SwigluWeights::*field : {&SwigluWeights::gate, &SwigluWeights::up, &SwigluWeights::down}) {
      std::vector<Tensor*> projection;
      for (SwigluWeights& w : e.experts) projection.push_back(&(w.*field));
      if (!stride_stacked(projection)) stack_up(projection);
      all.insert(all.end(), projection.begin(), projection.end());
    }
    using Scale = std::optional<Tensor> SwigluWeights::*;
    for (Scale field : {&SwigluWeights::gate_scale, &SwigluWeights::up_scale, &SwigluWeights::down_scale}) {
      std::vector<Tensor*> projection;
      for (SwigluWeights& w : e.experts) {
        if (w.*field) projection.push_back(&*(w.*field));
      }
      if (projection.size() == e.experts.size() && !stride_stacked(projection)) stack_up(projection);
      all.insert(all.end(), projection.begin(), projection.end());
    }
    move_together(all);
  }
  void move(std::optional<SharedExpert>& s) {
    if (!s) return;
    std::vector<Tensor*> all;
    move(s->weights, all);
    all.push_back(&s->gate_weight);
    move_together(all);
  }

  // Tensors of `group` sharing a storage go up as one span covering them all (when each
  // one's start is a whole number of its elements into the span, as a device binding
  // needs); the others one by one.
  void move_together(std::vector<Tensor*> group) {
    std::map<const Storage*, std::vector<Tensor*>> by_storage;
    for (Tensor* t : group) {
      if (t == nullptr || !t->defined() || t->device() == device_) continue;
      if (Tensor* done = find_moved(*t)) {
        *t = *done;
        continue;
      }
      by_storage[t->storage().get()].push_back(t);
    }
    for (auto& [storage, members] : by_storage) {
      ByteSpan span = byte_span(*members.front());
      for (Tensor* t : members) {
        const ByteSpan s = byte_span(*t);
        span = {std::min(span.begin, s.begin), std::max(span.end, s.end)};
      }
      std::vector<Tensor*> shared, alone;
      for (Tensor* t : members) {
        const bool aligned = (byte_span(*t).begin - span.begin) % static_cast<int64_t>(t->element_size()) == 0;
        (aligned && members.size() > 1 ? shared : alone).push_back(t);
      }
      if (!shared.empty()) upload_span(shared, span);
      for (Tensor* t : alone) upload_span({t}, byte_span(*t));
    }
  }

 private:
  using Key = std::tuple<const Storage*, int64_t, Shape, Shape, DType>;
  static Key key_of(const Tensor& t) {
    return {t.storage().get(), t.storage_offset(), t.sizes(), t.strides(), t.dtype()};
  }
  Tensor* find_moved(const Tensor& t) {
    auto it = moved_.find(key_of(t));
    return it == moved_.end() ? nullptr : &it->second;
  }

  // Whether the tensors view one storage with one geometry, each a fixed number of
  // elements after the one before (a stacked or fused layout).
  static bool stride_stacked(const std::vector<Tensor*>& ts) {
    if (ts.size() < 2) return true;
    const Tensor& a = *ts[0];
    const int64_t step = ts[1]->storage_offset() - a.storage_offset();
    for (size_t i = 1; i < ts.size(); ++i) {
      const Tensor& t = *ts[i];
      if (t.storage() != a.storage() || t.sizes() != a.sizes() || t.strides() != a.strides() ||
          t.dtype() != a.dtype() || t.storage_offset() - ts[i - 1]->storage_offset() != step) {
        return false;
      }
    }
    return true;
  }

  // Stacks the tensors (of one shape and dtype) into one [n, ...] tensor on the device;
  // each becomes its slice.
  void stack_up(const std::vector<Tensor*>& ts) {
    std::vector<Tensor> host;
    for (Tensor* t : ts) host.push_back(*t);
    const Tensor up = stack(host, 0).to(device_);
    for (size_t i = 0; i < ts.size(); ++i) *ts[i] = up.select(0, static_cast<int64_t>(i));
  }

  // One device allocation holding bytes [span.begin, span.end) of the tensors' storage;
  // each tensor becomes the same view of it.
  void upload_span(const std::vector<Tensor*>& tensors, ByteSpan span) {
    const Tensor& first = *tensors.front();
    const int64_t bytes = std::max<int64_t>(span.end - span.begin, 1);
    const Tensor raw = Tensor::from_storage(first.storage(), {bytes}, {1}, span.begin, DType::UInt8);
    const Tensor up = raw.to(device_);
    for (Tensor* t : tensors) {
      const int64_t item = static_cast<int64_t>(t->element_size());
      const int64_t offset = (byte_span(*t).begin - span.begin) / item;
      Tensor placed = Tensor::from_storage(up.storage(), t->sizes(), t->strides(), offset, t->dtype());
      moved_.emplace(key_of(*t), placed);
      *t = std::move(placed);
    }
  }

  Device device_;
  std::map<Key, Tensor> moved_;
};

}  // namespace

void move_weights_to_device(DecoderWeights& w, Device device) {
  if (device.type == DeviceType::CPU) return;
  Placer p(device);
  p.move(w.embedding);
  for (DecoderLayer& layer : w.layers) {
    p.move(layer.mixer_norm);
    p.move(layer.ffn_norm);
    if (layer.attention) {
      AttentionBlock& a = *layer.attention;
      for (Linear* l : {&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj}) p.move(*l);
      p.move(a.q_norm);
      p.move(a.k_norm);
    }
    if (layer.conv) {
      p.move(layer.conv->in_proj);
      p.move(layer.conv->out_proj);
      p.move(layer.conv->kernel);
    }
    if (layer.delta_net) {
      DeltaNetBlock& d = *layer.delta_net;
      for (Linear* l : {&d.in_proj_qkv, &d.in_proj_z, &d.in_proj_b, &d.in_proj_a, &d.out_proj}) p.move(*l);
      for (Tensor* t : {&d.conv_weight, &d.A_log, &d.dt_bias, &d.norm_weight}) p.move(*t);
    }
    if (layer.moe) {
      MoeBlock& m = *layer.moe;
      p.move(m.router);
      p.move(m.experts);
      p.move(m.selection_bias);
      p.move(m.shared);
    }
    if (layer.dense) {
      for (Linear* l : {&layer.dense->gate, &layer.dense->up, &layer.dense->down}) p.move(*l);
    }
  }
  p.move(w.final_norm);
  p.move(w.lm_head);
}

void check_runs_on_device(Model& model, Device device, int64_t vocab_size) {
  if (device.type == DeviceType::CPU) return;
  const int64_t capacity = model.max_context();
  const auto id = [&](int32_t i) { return static_cast<int32_t>(i % vocab_size); };
  try {
    // A prompt from position 0 (causal attention), a decode step (attention against the
    // cache), and a prompt continuing the sequence (an explicit mask).
    if (capacity >= 2) {
      model.forward(std::vector<int32_t>{id(1), id(2)});
      if (capacity >= 3) model.forward(std::vector<int32_t>{id(3)});
      if (capacity >= 5) model.forward(std::vector<int32_t>{id(4), id(5)});
    } else {
      model.forward(std::vector<int32_t>{id(1)});
    }
    model.reset();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::NotImplemented) throw;
    fail(ErrorKind::NotImplemented, kLoad, "this model cannot run on {}: {}", device.str(), e.what());
  }
}

}  // namespace kiln::llm
