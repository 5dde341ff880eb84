// Running a loaded model on another device (docs/llm.md "Devices"): the weights go up
// once, right after loading, and the forward pass then calls the same ops as on the
// CPU, which dispatch to the device's kernels because their operands live there.
//
// Tensors that view one allocation stay views of one device allocation: a MoE layer's
// experts (packed per projection, or views of a fused [E, 2I, H] tensor) go up as one
// span per allocation, and a tensor that appears twice (a tied lm_head) goes up once.
#pragma once

#include "kiln/device.h"
#include "llm/decoder.h"

namespace kiln::llm {

// Moves every tensor of `weights` to `device` (nothing to do for the CPU).
void move_weights_to_device(DecoderWeights& weights, Device device);

// After the weights and the per-sequence state are on a non-CPU device: runs the
// forward pass on a few tokens (a prompt, a decode step, a continued prompt, as far as
// the context allows) and resets the sequence, so an op the device has no kernel for
// fails the load with a NotImplemented error naming the op, never the first request (and
// never by running elsewhere). Compiles the device's pipelines on the way.
void check_runs_on_device(Model& model, Device device, int64_t vocab_size);

}  // namespace kiln::llm
