#!/usr/bin/env python3
"""Compares kiln's logits with Hugging Face transformers' own modeling code on the same
synthetic checkpoints (`make check-hf`; kept out of `make test`: it needs torch and
transformers from PyPI, a multi-GB download).

Run it with a Python that has torch and transformers (a virtual environment outside the
build); kiln's side runs in a child process under the Debian Python kiln is built for
(KILN_PYTHON, default /usr/bin/python3) with KILN_PYTHONPATH (default
build/release/python), and hands its logits over as .npy files.

For each architecture it writes the `tiny` checkpoint with `kiln make-model` semantics
(kiln.llm.make_model), loads it in transformers in float32 with eager attention, runs the
same prompt through both, and reports the largest logit difference relative to the
largest logit. Exit status 1 if any architecture differs by more than --tolerance.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

PROMPT_IDS = [17, 3, 250, 101, 42, 7, 311, 5, 64, 198, 33, 2]
ARCHS = ["qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "lfm2_moe"]


def kiln_side(model_dir, arch, out_path):
    """Runs under kiln's Python: writes the checkpoint and kiln's float32 logits, both as
    one pass and as prefill + token-by-token decode."""
    import kiln
    kiln.llm.make_model(model_dir, arch, "tiny", seed=5)
    model = kiln.llm.load(model_dir, "f32", cache_dtype=kiln.float32)
    full = model.forward(PROMPT_IDS)
    model.reset()
    rows = [model.forward(PROMPT_IDS[:4])[-1]]
    for t in range(4, len(PROMPT_IDS)):
        rows.append(model.forward(PROMPT_IDS[t:t + 1])[-1])
    np.save(out_path, np.stack([full, np.concatenate([full[:3], np.stack(rows)])]))


def hf_logits(model_dir, arch):
    import torch
    import transformers
    # The Qwen3.5 folder has no vision tower tensors: transformers' report of them as
    # newly initialised is expected and not part of the comparison.
    transformers.logging.set_verbosity_error()
    if arch == "qwen3_5_moe":
        cls = transformers.Qwen3_5MoeForConditionalGeneration
    else:
        cls = transformers.AutoModelForCausalLM
    model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor([PROMPT_IDS]), use_cache=False)
    return out.logits[0].float().numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", action="append", choices=ARCHS, help="architectures to check (default: all)")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest allowed max|kiln - hf| / max(1, max|hf|) (default 1e-3)")
    parser.add_argument("--kiln-side", nargs=3, metavar=("DIR", "ARCH", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kiln_side:
        kiln_side(*args.kiln_side)
        return 0

    kiln_python = os.environ.get("KILN_PYTHON", "/usr/bin/python3")
    env = dict(os.environ, PYTHONPATH=os.environ.get("KILN_PYTHONPATH", "build/release/python"))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for arch in args.arch or ARCHS:
            model_dir, out = os.path.join(tmp, arch), os.path.join(tmp, arch + ".npy")
            subprocess.run([kiln_python, os.path.abspath(__file__), "--kiln-side", model_dir, arch, out], env=env,
                           check=True)
            full, stepped = np.load(out)
            want = hf_logits(model_dir, arch)
            scale = max(1.0, float(np.abs(want).max()))
            diff = float(np.abs(full - want).max()) / scale
            diff_steps = float(np.abs(stepped - want).max()) / scale
            ok = diff <= args.tolerance and diff_steps <= args.tolerance
            failed |= not ok
            print(f"{arch:12s} one pass {diff:.2e}  prefill+decode {diff_steps:.2e}  "
                  f"(max |logit| {scale:.2f})  {'ok' if ok else 'MISMATCH'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
