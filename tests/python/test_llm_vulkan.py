"""The LLM runtime on the Vulkan device from Python and the command line: kiln.llm.load(...,
device="vulkan") against the CPU model, `kiln run --device vulkan` decoding the tiny
dense Qwen3 checkpoint with the CPU's tokens, the profiler's submits and waits per token,
and the NotImplementedError of a family whose ops the device lacks. Skipped, with the
probe's reason, where no Vulkan device is usable."""
import os
import subprocess

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])

CLI = os.path.join(os.path.dirname(kiln.__file__), "..", "..", "kiln")


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("vk") / "qwen3"
    kiln.llm.make_model(out, "qwen3", "tiny", seed=3)
    return out


def test_load_on_vulkan_matches_cpu_logits(qwen3_dir):
    cpu = kiln.llm.load(qwen3_dir, "f32", max_context=32, cache_dtype=kiln.float32)
    dev = kiln.llm.load(qwen3_dir, "f32", max_context=32, cache_dtype=kiln.float32, device=kiln.device("vulkan"))
    assert dev.info["device"] == "vulkan:0" and cpu.info["device"] == "cpu"
    # Float32 on both sides: sums of at most 128 products in another order and Vulkan's
    # exp/rsqrt; test_llm_vulkan.cpp derives the bound 2 (2 K + 16) eps (layers + 1).
    bound = 2 * (2 * 128 + 16) * np.finfo(np.float32).eps * 4
    for ids in ([3, 14, 15, 92, 65], [35], [89], [7, 9]):
        a, b = np.asarray(dev.forward(ids)), np.asarray(cpu.forward(ids))
        assert np.abs(a - b).max() <= bound * max(1.0, np.abs(b).max())
    assert dev.position == cpu.position == 9


def test_generate_on_vulkan_gives_the_cpu_text_and_profiles_the_queue(qwen3_dir):
    cpu = kiln.llm.load(qwen3_dir, "f32", max_context=64)
    dev = kiln.llm.load(qwen3_dir, "f32", max_context=64, device="vulkan")
    want = cpu.generate("Pots crack when", max_new_tokens=12)
    with kiln.profiler.profile() as prof:
        got = dev.generate("Pots crack when", max_new_tokens=12)
    assert got == want
    decode = [p for p in prof.report.phases if p.phase == "decode"][0]
    # One host wait per decode step (the logits), commands batched into fewer submits.
    assert decode.device_waits == decode.tokens
    assert 0 < decode.device_submits < decode.device_commands
    assert "vulkan:" in prof.report.table()


def test_family_without_device_kernels_fails_at_load(tmp_path):
    out = tmp_path / "moe"
    kiln.llm.make_model(out, "qwen3_moe", "tiny")
    try:
        kiln.llm.load(out, device="vulkan", max_context=16)
    except NotImplementedError as e:
        assert "cannot run on vulkan:0" in str(e) and "kernel" in str(e)
    # Once the device has MoE kernels the load succeeds; test_llm_vulkan.cpp then checks
    # the logits against the CPU's.


def test_cli_run_on_vulkan_decodes_the_cpu_tokens(qwen3_dir):
    def run(device):
        r = subprocess.run([CLI, "run", "--model", str(qwen3_dir), "--prompt", "The kiln", "-n", "16", "--dtype",
                            "f32", "--no-roofline", "--max-context", "64", "--device", device],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r

    cpu, dev = run("cpu"), run("vulkan")
    assert dev.stdout == cpu.stdout
    assert "device: vulkan:0" in dev.stderr
    assert "host waits" in dev.stderr
    bad = subprocess.run([CLI, "run", "--model", str(qwen3_dir), "--prompt", "x", "--device", "metal"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "metal" in bad.stderr
