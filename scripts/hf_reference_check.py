#!/usr/bin/env python3
"""Compares kiln's logits with Hugging Face transformers' own modeling code on the same
synthetic checkpoints (`make check-hf`; kept out of `make test`: it needs torch and
transformers from PyPI, a multi-GB download).

Run it with a Python that has torch, transformers and accelerate (a virtual environment
outside the build); kiln's side runs in a child process under the Debian Python kiln is
built for (KILN_PYTHON, default /usr/bin/python3) with KILN_PYTHONPATH (default
build/release/python), and hands its logits over as an .npz file.

For each architecture it writes the `tiny` checkpoints with `kiln make-model` semantics
(kiln.llm.make_model: bf16, and HF FP8 block-scaled) and runs two prompts through both
sides: a short one and one of 150 tokens (three chunks of the hybrids' chunked prefill).
kiln generates a few tokens greedily after each prompt; transformers then sees the same
tokens. Compared, each against transformers' one pass (float32, eager attention) over
prompt + generated tokens:

- kiln's one pass over the same tokens;
- kiln's cache path: the prompt prefilled, then one decode step per generated token;
- a split prompt: a first prefill, then the rest as a continuation prefill on the cache
  (continuation mask, carried conv and recurrent state), then the decode steps;
- token by token: a short prefill, then every later token as its own decode step;
- transformers' own cache path (prefill + decode with its cache object) against kiln's;
- the greedy tokens: transformers' argmax at each step must be kiln's token unless its
  two best logits lie within the tolerance of each other (a near-tie).

Modes (--mode):
- f32: the bf16 checkpoint, kiln with float32 weights and cache;
- fp8-dequant: the FP8 checkpoint dequantised by kiln at load to float32 (which tensors
  are FP8, names, block scales), against transformers' FP8 checkpoint dequantised at load
  (what its quantizer does without a GPU; its FP8 GEMMs need one), float32 both. That
  dequantisation gets partial 128-blocks wrong in transformers 5.24; the script redoes
  those tensors with transformers' own GPU-path routine (redequantize_partial_blocks);
- bf16: the bf16 checkpoint as stored (bf16 weights, activations rounded to bf16 before
  each linear, bf16 KV cache); also reported: transformers in bfloat16 against its own
  float32 run, for scale;
- fp8: the FP8 checkpoint as stored (weight-only FP8 GEMMs on float32 activations; the
  tensors the checkpoint keeps in bf16, such as lm_head and routers, take bf16-rounded
  activations), float32 cache.

The difference is max|kiln - hf| / max(1, max|hf|) over the vocabulary, per position.
Tolerances come from the compute dtype's unit roundoff u and the sizes. Float32 modes: a
rounding error of u per operation grows like u·sqrt(n) over a reduction of length n and
adds up over the layers, so tol = 16 · u · sqrt(n) · (layers + 1), n the longest
reduction (sequence length, hidden or intermediate size); every position must be within
it. Rounded modes (bf16, fp8): about ten roundings of the activations per layer, each of
u_bf16 = 2^-9, so tol = 4 · u_bf16 · sqrt(10 · (layers + 1)), and
- every position before the first routing near-tie must be within tol. A near-tie is a
  position where some MoE layer's k-th and (k+1)-th selection scores (softmax
  probabilities, or LFM2's sigmoid + expert bias) in transformers' float32 run lie
  within 2^-7 (four bf16 roundings) of each other: rounding may pick the other expert
  there, which changes that position by O(0.1), and attention and the DeltaNet/conv
  state carry the change to every later position;
- the median over all positions must be within tol;
- bf16: kiln's median error must be at most twice that of transformers' own bfloat16 run
  (every op's output rounded to bf16) against the same float32 reference.
Exit status 1 if any case fails.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

ARCHS = ["qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "lfm2_moe"]
# mode: (checkpoint, kiln load dtype, kiln cache dtype, rounded?)
MODES = {
    "f32": ("bf16", "f32", "float32", False),
    "fp8-dequant": ("fp8", "f32", "float32", False),
    "bf16": ("bf16", "as-stored", "bfloat16", True),
    "fp8": ("fp8", "as-stored", "float32", True),
}
GREEDY_STEPS = 6
# A routing gap this small (2^-7, four bf16 roundings) can close under bf16 rounding.
NEAR_TIE = 2.0**-7
SEED = 5


def prompts():
    """(name, ids, split): split is where the first prefill of the split and token-by-token
    runs ends. The long prompt's split at 70 puts the continuation prefill across the
    hybrids' second chunk boundary (64 within the first prefill, 128 within the second)."""
    long_ids = np.random.default_rng(11).integers(3, 500, size=150).tolist()
    return [("short", [17, 3, 250, 101, 42, 7, 311, 5, 64, 198, 33, 2], 4), ("long", long_ids, 70)]


# ---------------------------------------------------------------------------- kiln side

def kiln_side(model_dir, arch, checkpoint, modes, out_path):
    """Runs under kiln's Python: writes the checkpoint and, per mode, kiln's float32 logits
    for every prompt and path (see the module docstring)."""
    import kiln
    kiln.llm.make_model(model_dir, arch, "tiny", fp8=checkpoint == "fp8", seed=SEED)
    results = {}
    for mode in modes.split(","):
        _, dtype, cache_dtype, _ = MODES[mode]
        model = kiln.llm.load(model_dir, dtype, cache_dtype=getattr(kiln, cache_dtype))
        for name, ids, split in prompts():
            model.reset()
            rows = [model.forward(ids)]
            gen = []
            for _ in range(GREEDY_STEPS):
                gen.append(int(np.argmax(rows[-1][-1])))
                rows.append(model.forward([gen[-1]]))
            seq = ids + gen
            model.reset()
            one_pass = model.forward(seq)
            model.reset()
            split_rows = [model.forward(ids[:split]), model.forward(ids[split:])]
            split_rows += [model.forward([t]) for t in gen]
            model.reset()
            step_rows = [model.forward(seq[:split])] + [model.forward([t]) for t in seq[split:]]
            key = f"{mode}/{name}"
            results.update({f"{key}/gen": np.array(gen), f"{key}/one_pass": one_pass,
                            f"{key}/cached": np.concatenate(rows), f"{key}/split": np.concatenate(split_rows),
                            f"{key}/stepwise": np.concatenate(step_rows)})
    np.savez(out_path, **results)


# --------------------------------------------------------------------- transformers side

def load_hf(model_dir, arch, dtype):
    import torch
    import transformers
    # The Qwen3.5 folder has no vision tower tensors: transformers' report of them as
    # newly initialised is expected and not part of the comparison. Without a GPU its FP8
    # quantizer dequantises the weights at load and says so.
    transformers.logging.set_verbosity_error()
    cls = (transformers.Qwen3_5MoeForConditionalGeneration if arch == "qwen3_5_moe"
           else transformers.AutoModelForCausalLM)
    model = cls.from_pretrained(model_dir, dtype=getattr(torch, dtype), attn_implementation="eager")
    model.eval()
    return model


def redequantize_partial_blocks(model, model_dir):
    """transformers' dequantisation at load without a GPU (Fp8Dequantize._dequantize_one,
    v5.24) takes the block size from the scale grid, rows // grid rows; where a dimension
    is not a multiple of 128 the grid is ceil-sized (its own FP8Linear allocates it so) and
    that gives wrong blocks (192 rows, 2 grid rows: blocks of 96). Those tensors are
    dequantised again here with transformers' own _dequantize_fp8_weight and the
    configured 128x128 blocks, which is what its GPU path computes. Returns their names."""
    import glob
    import json
    import torch
    from safetensors import safe_open
    from transformers.integrations.finegrained_fp8 import _dequantize_fp8_weight
    with open(os.path.join(model_dir, "config.json")) as f:
        block = json.load(f)["quantization_config"]["weight_block_size"]
    params = dict(model.named_parameters())
    fixed = []
    for path in sorted(glob.glob(os.path.join(model_dir, "*.safetensors"))):
        with safe_open(path, "pt") as f:
            for scale_name in [k for k in f.keys() if k.endswith(".weight_scale_inv")]:
                name = scale_name[:-len("_scale_inv")]
                weight, scale = f.get_tensor(name), f.get_tensor(scale_name)
                rows, cols = weight.shape[-2:]
                if rows % scale.shape[-2] == 0 and rows // scale.shape[-2] in (rows, block[0]) and \
                        cols % scale.shape[-1] == 0 and cols // scale.shape[-1] in (cols, block[1]):
                    continue  # the load-time dequantisation got this one right
                if name not in params:
                    raise RuntimeError(f"{name}: partial FP8 blocks in a tensor not found in the model")
                with torch.no_grad():
                    params[name].copy_(_dequantize_fp8_weight(weight, scale, block, torch.float32))
                fixed.append(name)
    return fixed


def routing_margins(model):
    """Hooks every MoE router: after a forward, margins() is per position the smallest gap
    between the k-th and (k+1)-th selection score over the MoE layers (inf without MoE)."""
    import torch
    gaps = []

    def hook(router, args, output):
        scores = output[0].float()
        if type(router).__name__.startswith("Lfm2"):
            scores = scores.sigmoid() + (args[1].float() if len(args) > 1 and args[1] is not None else 0)
        else:
            scores = torch.softmax(scores, dim=-1)
        top = torch.topk(scores, router.top_k + 1, dim=-1).values
        gaps.append((top[:, -2] - top[:, -1]).numpy())

    for module in model.modules():
        if type(module).__name__.endswith("TopKRouter"):
            module.register_forward_hook(hook)

    def margins(count):
        # The one pass is the only forward of `count` positions (the cache path's are shorter).
        full = [g for g in gaps if len(g) == count]
        return np.min(np.stack(full), axis=0) if full else np.full(count, np.inf)
    return gaps, margins


def hf_runs(model, ids, gen):
    """transformers' one pass over ids + gen, and its cache path: the prompt, then one
    step per generated token with the cache object its forward returns."""
    import inspect
    import torch
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def cache_of(out):
        return out.cache if getattr(out, "cache", None) is not None else out.past_key_values

    with torch.no_grad():
        one_pass = model(input_ids=torch.tensor([ids + gen]), use_cache=False).logits[0].float().numpy()
        out = model(input_ids=torch.tensor([ids]), use_cache=True)
        rows = [out.logits[0].float().numpy()]
        for t in gen:
            out = model(input_ids=torch.tensor([[t]]), use_cache=True, **{cache_kw: cache_of(out)})
            rows.append(out.logits[0].float().numpy())
    return one_pass, np.concatenate(rows)


# ------------------------------------------------------------------------------ checking

def model_sizes(model_dir):
    import json
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    config = config.get("text_config", config)
    widths = [config["hidden_size"], config.get("intermediate_size") or 0, config.get("moe_intermediate_size") or 0]
    return config["num_hidden_layers"], max(widths)


def tolerance(rounded, layers, width, seq_len):
    if rounded:
        return 4 * 2.0**-9 * math.sqrt(10 * (layers + 1))
    return 16 * 2.0**-24 * math.sqrt(max(width, seq_len)) * (layers + 1)


def per_position(got, want):
    return np.abs(got - want).max(axis=1) / max(1.0, float(np.abs(want).max()))


def greedy_mismatches(hf_rows, prompt_len, gen, tol):
    """Steps where transformers' argmax is not kiln's token and no near-tie explains it."""
    bad = []
    for i, token in enumerate(gen):
        row = hf_rows[prompt_len - 1 + i]
        scale = max(1.0, float(np.abs(row).max()))
        if int(np.argmax(row)) != token and float(row.max() - row[token]) > 2 * tol * scale:
            bad.append(i)
    return bad


def check_arch(tmp, arch, modes, kiln_python, env):
    """Returns (ok, summary rows, detail lines) for one architecture's modes."""
    ok, rows, lines = True, [], []
    for checkpoint in ("bf16", "fp8"):
        ck_modes = [m for m in modes if MODES[m][0] == checkpoint]
        if not ck_modes:
            continue
        model_dir, out = os.path.join(tmp, f"{arch}-{checkpoint}"), os.path.join(tmp, f"{arch}-{checkpoint}.npz")
        subprocess.run([kiln_python, os.path.abspath(__file__), "--kiln-side", model_dir, arch, checkpoint,
                        ",".join(ck_modes), out], env=env, check=True)
        kiln = np.load(out)
        layers, width = model_sizes(model_dir)
        hf = load_hf(model_dir, arch, "float32")
        if checkpoint == "fp8":
            fixed = redequantize_partial_blocks(hf, model_dir)
            if fixed:
                lines.append(f"  (fp8: {len(fixed)} tensors with partial 128-blocks re-dequantised, see "
                             f"redequantize_partial_blocks: {', '.join(fixed)})")
        gaps, margins = routing_margins(hf)
        hf_bf16 = load_hf(model_dir, arch, "bfloat16") if "bf16" in ck_modes else None
        for mode in ck_modes:
            rounded = MODES[mode][3]
            worst, worst_strict, strict_count, worst_median, worst_abs, mode_ok = 0.0, 0.0, 0, 0.0, 0.0, True
            for name, ids, _ in prompts():
                key = f"{mode}/{name}"
                gen = kiln[f"{key}/gen"].tolist()
                tol = tolerance(rounded, layers, width, len(ids) + len(gen))
                gaps.clear()
                want, hf_cached = hf_runs(hf, ids, gen)
                # Rounded modes: positions from the first routing near-tie on may have taken
                # another expert (and causal mixing carries that to every later position).
                ties = np.flatnonzero(margins(len(want)) <= NEAR_TIE) if rounded else []
                strict = int(ties[0]) if len(ties) else len(want)
                diffs = {path: per_position(kiln[f"{key}/{path}"], want)
                         for path in ("one_pass", "cached", "split", "stepwise")}
                diffs["vs_hf_cache"] = per_position(kiln[f"{key}/cached"], hf_cached)
                beyond = {path: np.flatnonzero(d[:strict] > tol).tolist() for path, d in diffs.items()}
                medians = {path: float(np.median(d)) for path, d in diffs.items()}
                greedy_bad = greedy_mismatches(hf_cached, len(ids), gen, tol)
                case_ok = not any(beyond.values()) and max(medians.values()) <= tol and not greedy_bad
                mode_ok &= case_ok
                worst = max(worst, max(float(d.max()) for d in diffs.values()))
                worst_strict = max(worst_strict, max(float(d[:strict].max(initial=0.0)) for d in diffs.values()))
                strict_count += strict
                worst_abs = max(worst_abs, max(float(np.abs(kiln[f"{key}/{path}"] - want).max())
                                               for path in ("one_pass", "cached", "split", "stepwise")))
                worst_median = max(worst_median, max(medians.values()))
                line = (f"  {mode:11s} {name:5s} T={len(ids):3d}+{len(gen)} tol {tol:.1e}: " +
                        "  ".join(f"{k} {float(d.max()):.2e}" for k, d in diffs.items()) +
                        f"  median {medians['one_pass']:.1e}" +
                        f"  hf cache vs one pass {float(per_position(hf_cached, want).max()):.1e}")
                if rounded:
                    line += f"  strict positions {strict}/{len(want)}"
                    if strict < len(want):
                        line += f" (first routing near-tie at {strict})"
                if hf_bf16 is not None and mode == "bf16":
                    # kiln keeps more in float32 than transformers' bf16 run (norms, routing
                    # weights, the DeltaNet state's inputs), so its typical error is no larger.
                    want_bf16, _ = hf_runs(hf_bf16, ids, gen)
                    hf_err = per_position(want_bf16, want)
                    line += (f"  [hf bf16 vs hf f32: max {float(hf_err.max()):.1e},"
                             f" median {float(np.median(hf_err)):.1e}]")
                    if medians["one_pass"] > 2 * float(np.median(hf_err)):
                        line += "  MEDIAN ABOVE TWICE TRANSFORMERS' BF16"
                        mode_ok = False
                if any(beyond.values()):
                    line += "  BEYOND TOL " + ", ".join(
                        f"{k}: {len(v)} positions from {v[0]}" for k, v in beyond.items() if v)
                if max(medians.values()) > tol:
                    line += "  MEDIAN BEYOND TOL"
                if greedy_bad:
                    line += f"  GREEDY DIFFERS at steps {greedy_bad}"
                lines.append(line)
            ok &= mode_ok
            rows.append(f"{arch:12s} {mode:11s} max {worst:.2e} (absolute {worst_abs:.2e}), median {worst_median:.1e}" +
                        (f", before routing near-ties {worst_strict:.2e} ({strict_count} positions)"
                         if rounded and strict_count else
                         ", every position after a routing near-tie" if rounded else "") +
                        f"  {'ok' if mode_ok else 'MISMATCH'}")
    return ok, rows, lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", choices=ARCHS, help="architectures to check (default: all)")
    parser.add_argument("--mode", action="append", choices=list(MODES), help="modes to check (default: all)")
    parser.add_argument("--kiln-side", nargs=5, metavar=("DIR", "ARCH", "CHECKPOINT", "MODES", "OUT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kiln_side:
        kiln_side(*args.kiln_side)
        return 0

    import torch
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    kiln_python = os.environ.get("KILN_PYTHON", "/usr/bin/python3")
    env = dict(os.environ, PYTHONPATH=os.environ.get("KILN_PYTHONPATH", "build/release/python"))
    modes = args.mode or list(MODES)
    failed, summary = False, []
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch or ARCHS:
            ok, rows, lines = check_arch(tmp, arch, modes, kiln_python, env)
            failed |= not ok
            print("\n".join(rows + lines), flush=True)
            summary += rows
    print("\nsummary (|kiln - hf| / max(1, max |hf|): the largest and the largest per-prompt median over prompts"
          " and paths):")
    print("\n".join(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
