"""The Gated DeltaNet pieces on the Vulkan device from Python (the gated delta rule, its
chunked entry, the gated rms_norm) and the hybrid models (qwen3_next, qwen3_5_moe) loaded
with device="vulkan" against the CPU: logits, generated text and `kiln run`. The C++
tests (test_vulkan_gated_delta.cpp, test_llm_vulkan.cpp) derive the tolerances; these
use looser round figures. Skipped, with the probe's reason, where no Vulkan device is
usable."""
import os
import subprocess

os.environ.setdefault("KILN_VULKAN_VALIDATION", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kiln  # noqa: E402

_avail = kiln.vulkan.availability()
pytestmark = pytest.mark.skipif(not _avail["usable"], reason="no usable Vulkan device: " + _avail["reason"])
RNG = np.random.default_rng(11)
CLI = os.path.join(os.path.dirname(kiln.__file__), "..", "..", "kiln")
HYBRIDS = ("qwen3_next", "qwen3_5_moe")


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


@pytest.mark.parametrize("chunked", [False, True])
def test_gated_delta_rule_prompt_then_step_on_the_device(chunked):
    T, Hk, Hv, dk, dv = 7, 1, 2, 9, 35  # dv past one 32-column work group
    q, key = RNG.uniform(-1, 1, (T + 1, Hk, dk)), RNG.uniform(-1, 1, (T + 1, Hk, dk))
    v = RNG.uniform(-1, 1, (T + 1, Hv, dv))
    g, beta = -RNG.uniform(0, 1, (T + 1, Hv)), RNG.uniform(0.5, 1, (T + 1, Hv))
    state = RNG.uniform(-0.5, 0.5, (Hv, dk, dv))
    host, dev = k(state), k(state).to("vulkan")
    prompt = kiln.gated_delta_rule_chunked if chunked else kiln.gated_delta_rule
    for rows, rule in ((slice(0, T), prompt), (slice(T, T + 1), kiln.gated_delta_rule)):
        args = [k(a[rows]) for a in (q, key, v, g, beta)]
        want = rule(*args, host)
        got = rule(*(a.to("vulkan") for a in args), dev)
        assert str(got.device).startswith("vulkan")
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dev.cpu().numpy(), host.numpy(), rtol=1e-5, atol=1e-5)


def test_gated_delta_rule_device_errors():
    q = k(np.ones((1, 1, 4))).to("vulkan")
    v, gate = k(np.ones((1, 1, 3))).to("vulkan"), k(np.ones((1, 1))).to("vulkan")
    with pytest.raises(RuntimeError, match="same device"):
        kiln.gated_delta_rule(q, q, v, gate, gate, k(np.zeros((1, 4, 3))))
    wide = k(np.ones((1, 1, 1025))).to("vulkan")
    with pytest.raises(NotImplementedError, match="key_dim up to 1024"):
        kiln.gated_delta_rule(wide, wide, v, gate, gate, k(np.zeros((1, 1025, 3))).to("vulkan"))


def test_gated_rms_norm_on_the_device():
    x, gate, w = RNG.uniform(-2, 2, (3, 17)), RNG.uniform(-4, 4, (3, 17)), RNG.uniform(0.5, 1.5, 17)
    want = kiln.rms_norm_gated(k(x), k(gate), k(w), 1e-6)
    got = kiln.rms_norm_gated(k(x).to("vulkan"), k(gate).to("vulkan"), k(w).to("vulkan"), 1e-6)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def hybrid_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vk_hybrid")
    for arch in HYBRIDS:
        kiln.llm.make_model(root / arch, arch, "tiny", seed=5)
    return root


@pytest.mark.parametrize("arch", HYBRIDS)
def test_hybrid_on_vulkan_matches_cpu(hybrid_dirs, arch):
    model_dir = hybrid_dirs / arch
    cpu = kiln.llm.load(model_dir, "f32", max_context=64, cache_dtype=kiln.float32)
    dev = kiln.llm.load(model_dir, "f32", max_context=64, cache_dtype=kiln.float32, device="vulkan")
    assert dev.info["device"] == "vulkan:0"
    for ids in ([3, 14, 15, 92, 65], [35], [89], [7, 9]):
        a, b = np.asarray(dev.forward(ids)), np.asarray(cpu.forward(ids))
        assert np.abs(a - b).max() <= 1e-4 * max(1.0, np.abs(b).max())
    cpu.reset()
    dev.reset()
    assert dev.generate("Pots crack when", max_new_tokens=10) == cpu.generate("Pots crack when", max_new_tokens=10)


@pytest.mark.parametrize("arch", HYBRIDS)
def test_cli_runs_the_hybrid_on_vulkan(hybrid_dirs, arch):
    def run(device):
        r = subprocess.run([CLI, "run", "--model", str(hybrid_dirs / arch), "--prompt", "The kiln", "-n", "12",
                            "--dtype", "f32", "--no-roofline", "--max-context", "64", "--device", device],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return r

    cpu, dev = run("cpu"), run("vulkan")
    assert dev.stdout == cpu.stdout
    assert "device: vulkan:0" in dev.stderr
