// `kiln bench --device vulkan`: GB/s of the decode kernels on the Vulkan device against
// the device's own copy bandwidth, measured first by the same timing (a device-to-device
// clone, read + write bytes). Times come from device timestamps (VulkanEvent), over many
// calls recorded back to back, so they are the device's, not the host's recording.
//   gemv    linear for one token: bf16, f16 and f32 weights, FP8 with row and 128x128
//           block scales (Qwen3-30B-A3B's q_proj shape [4096, 2048])
//   experts moe_experts for one decode token, 8 experts of H 2048, I 768, bf16 and FP8
//           (block scales); calls cycle through disjoint expert sets, so weights are cold
//   delta   the gated delta rule of Qwen3-Next / Qwen3.5 (16 key heads, 32 value heads,
//           dk = dv = 128): a decode step (GB/s of the f32 state read and written, the
//           states of several layers cycled so each call's is cold) and a 512-token
//           prompt, which on the device is the recurrent kernel in one dispatch (GFLOP/s
//           at 7 flops per state entry and token; the chunked WY form is CPU-only)
// On lavapipe (Mesa's CPU driver) the figures say nothing about a GPU (docs/gpu.md).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench/harness.h"
#include "cli/bench/vulkan_bench.h"
#include "kiln/generator.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/gated_delta.h"
#include "kiln/ops/linear.h"
#include "kiln/ops/moe.h"
#include "kiln/vulkan.h"

namespace kiln::bench {

namespace {

constexpr int64_t kHidden = 2048;
constexpr int64_t kTopK = 8;

// Seconds per call of fn(i), from device timestamps over `calls` calls recorded back to
// back, repeated; fn(0) runs once first (pipeline creation, first-touch of memory).
Timing device_timing(const std::function<void(int)>& fn, bool quick) {
  const int calls = quick ? 4 : 20, repeats = quick ? 3 : 7;
  fn(0);
  vulkan_synchronize();
  std::vector<double> per_call;
  int i = 0;
  for (int r = 0; r < repeats; ++r) {
    VulkanEvent start(true), end(true);
    start.record();
    for (int c = 0; c < calls; ++c) fn(i++);
    end.record();
    end.synchronize();
    per_call.push_back(start.elapsed_time(end) * 1e-3 / calls);
  }
  return summarize(per_call);
}

Tensor random_weights(const Shape& shape, int64_t fan_in, DType dt, uint64_t seed) {
  Generator g(seed);
  const Tensor w = mul(sub(rand(shape, DType::Float32, &g), Scalar(0.5)), Scalar(2.0 / std::sqrt(double(fan_in))));
  return w.to(dt).to(kVulkan);
}

std::string shape_str(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  for (int64_t d : dims) s += (s.size() > 1 ? "," : "") + std::to_string(d);
  return s + "]";
}

// Device memory to cycle through so each call reads weights no cache holds.
size_t rotation_bytes(bool quick) { return quick ? size_t{64} << 20 : size_t{512} << 20; }

double copy_row(Table& table, bool quick) {
  const int64_t n = (quick ? int64_t{8} : int64_t{32}) << 20;  // floats
  const Tensor src = zeros({n}).to(kVulkan);
  Row row{"vulkan copy f32", shape_str({n}), device_timing([&](int) { (void)src.clone(); }, quick)};
  row.bytes = 2.0 * static_cast<double>(n) * 4;
  table.add(row);
  return row.bytes / row.timing.median_s / 1e9;
}

void gemv_row(Table& table, DType dt, int scales, bool quick) {
  const int64_t N = 4096, K = kHidden;
  const double item = static_cast<double>(itemsize(dt));
  const double weight_bytes = item * N * K;
  struct Weights {
    Tensor w, scale;
  };
  uint64_t seed = 1;
  const auto copies = rotated_copies<Weights>(
      static_cast<size_t>(weight_bytes),
      [&] {
        Weights c{random_weights({N, K}, K, dt, seed++), Tensor()};
        if (scales == 1) c.scale = full({N}, Scalar(0.01)).to(kVulkan);
        if (scales == 2) c.scale = full({N / 128, K / 128}, Scalar(0.01)).to(kVulkan);
        return c;
      },
      rotation_bytes(quick));
  const DType act = dt == DType::Float8_e4m3fn ? DType::BFloat16 : dt;
  const Tensor x = random_weights({1, K}, 1, act, 99);
  const auto call = [&](int i) {
    const Weights& c = copies[static_cast<size_t>(i) % copies.size()];
    if (scales == 0) {
      (void)linear(x, c.w);
    } else {
      (void)linear_fp8(x, c.w, c.scale);
    }
  };
  const char* name = dt == DType::BFloat16 ? "bf16" : dt == DType::Float16 ? "f16" : dt == DType::Float32 ? "f32"
                     : scales == 1                ? "fp8 row"
                                                  : "fp8 block";
  Row row{std::string("vulkan gemv ") + name, shape_str({1, K}) + "x" + shape_str({N, K}),
          device_timing(call, quick)};
  row.bytes = weight_bytes + (scales == 1 ? 4.0 * N : scales == 2 ? 4.0 * (N / 128) * (K / 128) : 0.0) +
              static_cast<double>(itemsize(act)) * (K + N);
  table.add(row);
}

void experts_row(Table& table, bool fp8, bool quick) {
  const int64_t I = 768, E = 16;  // 2 disjoint sets of 8 experts: 151 MB of bf16
  const DType dt = fp8 ? DType::Float8_e4m3fn : DType::BFloat16;
  const double item = fp8 ? 1.0 : 2.0;
  const Tensor gate_up = random_weights({E, 2 * I, kHidden}, kHidden, dt, 1);
  const Tensor down = random_weights({E, kHidden, I}, I, dt, 2);
  std::optional<Tensor> gu_scale, d_scale;
  if (fp8) {
    gu_scale = full({E, 2 * I / 128, kHidden / 128}, Scalar(0.01)).to(kVulkan);
    d_scale = full({E, kHidden / 128, I / 128}, Scalar(0.01)).to(kVulkan);
  }
  const MoeExperts experts = MoeExperts::from_fused(gate_up, down, gu_scale, d_scale);
  std::vector<Tensor> ids;
  for (int64_t p = 0; p < E / kTopK; ++p) {
    Tensor id = Tensor::empty({1, kTopK}, DType::Int32);
    for (int64_t j = 0; j < kTopK; ++j) id.data<int32_t>()[j] = static_cast<int32_t>(p + j * (E / kTopK));
    ids.push_back(id.to(kVulkan));
  }
  const Tensor weights = full({1, kTopK}, Scalar(1.0 / kTopK)).to(kVulkan);
  const Tensor x = random_weights({1, kHidden}, 1, DType::BFloat16, 7);
  const auto call = [&](int i) {
    (void)moe_experts(x, weights, ids[static_cast<size_t>(i) % ids.size()], experts);
  };
  Row row{std::string("vulkan experts ") + (fp8 ? "fp8 block" : "bf16"), fmt::format("8/{}x[{},{}]", E, kHidden, I),
          device_timing(call, quick)};
  const double scale_bytes = fp8 ? 4.0 * 3 * (kHidden / 128) * (I / 128) : 0.0;
  row.bytes = kTopK * (3.0 * kHidden * I * item + scale_bytes) + 2.0 * 2 * kHidden;
  table.add(row);
}

void delta_rows(Table& table, bool quick) {
  constexpr int64_t kKeyHeads = 16, kValueHeads = 32, kDim = 128;
  const double state_bytes = 4.0 * kValueHeads * kDim * kDim;
  auto states = rotated_copies<Tensor>(
      static_cast<size_t>(state_bytes), [] { return zeros({kValueHeads, kDim, kDim}).to(kVulkan); },
      rotation_bytes(quick));
  for (const int64_t tokens : {int64_t{1}, int64_t{512}}) {
    const Tensor q = random_weights({tokens, kKeyHeads, kDim}, 1, DType::Float32, 11);
    const Tensor k = random_weights({tokens, kKeyHeads, kDim}, 1, DType::Float32, 12);
    const Tensor v = random_weights({tokens, kValueHeads, kDim}, 1, DType::Float32, 13);
    const Tensor g = full({tokens, kValueHeads}, Scalar(-0.1)).to(kVulkan);
    const Tensor beta = full({tokens, kValueHeads}, Scalar(0.5)).to(kVulkan);
    const auto call = [&](int i) {
      (void)gated_delta_rule(q, k, v, g, beta, states[static_cast<size_t>(i) % states.size()]);
    };
    const bool decode = tokens == 1;
    Row row{decode ? "vulkan delta decode" : "vulkan delta prefill",
            fmt::format("{}x{}/{}x{}", tokens, kValueHeads, kKeyHeads, kDim), device_timing(call, quick)};
    const double io = 4.0 * static_cast<double>(tokens) * (2 * kKeyHeads * kDim + 2 * kValueHeads * kDim + 2 * kValueHeads);
    if (decode) {
      row.bytes = 2 * state_bytes + io;
    } else {
      row.flops = 7.0 * static_cast<double>(tokens) * kValueHeads * kDim * kDim;
    }
    table.add(row);
  }
}

}  // namespace

int run_vulkan_bench(const std::string& filter, bool quick) {
  const VulkanAvailability a = vulkan_availability();
  if (!a.usable) {
    fmt::print(stderr, "kiln bench --device vulkan: Vulkan is not usable: {}\n", a.reason);
    return 2;
  }
  const VulkanDeviceInfo& device = a.devices[static_cast<size_t>(a.selected)];
  Table scratch(0);
  const double copy_gbps = copy_row(scratch, quick);
  Table table(copy_gbps);
  for (const Row& r : scratch.rows()) table.add(r);
  const auto wanted = [&](const std::string& name) { return filter.empty() || name.find(filter) != std::string::npos; };
  if (wanted("gemv")) {
    for (DType dt : {DType::BFloat16, DType::Float16, DType::Float32}) gemv_row(table, dt, 0, quick);
    gemv_row(table, DType::Float8_e4m3fn, 1, quick);
    gemv_row(table, DType::Float8_e4m3fn, 2, quick);
  }
  if (wanted("experts") || wanted("moe")) {
    experts_row(table, false, quick);
    experts_row(table, true, quick);
  }
  if (wanted("delta")) delta_rows(table, quick);
  fmt::print("device: {} ({}), driver {}\n", device.name, device.type, device.driver);
  fmt::print("roofline: {:.1f} GB/s, the device's own copy bandwidth (a clone, read + write bytes)\n", copy_gbps);
  if (device.type == "CPU") {
    fmt::print("note: this is a CPU implementation of Vulkan (lavapipe): its figures say nothing about a GPU\n");
  }
  fmt::print("\n{}", table.format());
  if (table.rows().size() == 1 && !filter.empty()) {
    fmt::print(stderr, "kiln bench --device vulkan: no row matches '{}' (gemv, experts, delta)\n", filter);
    return 2;
  }
  return 0;
}

}  // namespace kiln::bench
