"""Gated DeltaNet ops from Python (kiln.causal_conv1d, kiln.gated_delta_gates,
kiln.gated_delta_rule) against numpy float64 references, and the hybrid models through
kiln.llm."""

import os
import subprocess

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(7)


def k(a):
    return kiln.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def conv_reference(x, w, state, silu=True):
    u = np.concatenate([state, x]).astype(np.float64)
    K = w.shape[1]
    out = np.stack([(w.T * u[t:t + K]).sum(0) for t in range(x.shape[0])])
    if silu:
        out = out / (1 + np.exp(-out))
    return out, u[x.shape[0]:]


def test_causal_conv1d_matches_reference_and_updates_state():
    T, C, K = 5, 17, 4
    x, w, state = RNG.normal(size=(T, C)), RNG.normal(size=(C, K)), RNG.normal(size=(K - 1, C))
    want, want_state = conv_reference(x, w, state)
    s = k(state)
    got = kiln.causal_conv1d(k(x), k(w), s)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s.numpy(), want_state, rtol=1e-6, atol=1e-6)
    # One token per call continues the history.
    step = kiln.causal_conv1d(k(x[:1]), k(w), s, activation="none")
    want_step, _ = conv_reference(x[:1], w, want_state, silu=False)
    np.testing.assert_allclose(step.numpy(), want_step, rtol=1e-5, atol=1e-5)


def test_causal_conv1d_bad_input():
    with pytest.raises(RuntimeError, match="expected conv_state of shape"):
        kiln.causal_conv1d(k(np.zeros((2, 8))), k(np.zeros((8, 4))), k(np.zeros((2, 8))))
    with pytest.raises(ValueError, match="activation must be"):
        kiln.causal_conv1d(k(np.zeros((2, 8))), k(np.zeros((8, 4))), k(np.zeros((3, 8))), activation="gelu")
    with pytest.raises(TypeError, match="dtype float32"):
        kiln.causal_conv1d(k(np.zeros((2, 8))), k(np.zeros((8, 4))), k(np.zeros((3, 8))).to(kiln.bfloat16))


def test_gated_delta_gates():
    a, b = RNG.normal(size=(3, 4)) * 10, RNG.normal(size=(3, 4))
    A_log, dt = RNG.normal(size=4), RNG.normal(size=4)
    g, beta = kiln.gated_delta_gates(k(a), k(b), k(A_log), k(dt))
    x = (a + dt).astype(np.float64)
    softplus = np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))
    np.testing.assert_allclose(g.numpy(), -np.exp(A_log) * softplus, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(beta.numpy(), 1 / (1 + np.exp(-b)), rtol=1e-6, atol=1e-7)


def rule_reference(q, key, v, g, beta, S, scale):
    T, Hk, dk = q.shape
    Hv = v.shape[1]
    q = np.repeat(q, Hv // Hk, axis=1).astype(np.float64)
    key = np.repeat(key, Hv // Hk, axis=1).astype(np.float64)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) * scale
    key = key / np.sqrt((key * key).sum(-1, keepdims=True) + 1e-6)
    S = S.astype(np.float64).copy()
    out = np.zeros(v.shape)
    for t in range(T):
        S *= np.exp(g[t])[:, None, None]
        mem = np.einsum("hkv,hk->hv", S, key[t])
        delta = beta[t][:, None] * (v[t] - mem)
        S += np.einsum("hk,hv->hkv", key[t], delta)
        out[t] = np.einsum("hkv,hk->hv", S, q[t])
    return out, S


def test_gated_delta_rule_prefill_then_decode():
    T, Hk, Hv, dk, dv = 6, 2, 4, 16, 8
    q, key, v = RNG.normal(size=(T, Hk, dk)), RNG.normal(size=(T, Hk, dk)), RNG.normal(size=(T, Hv, dv))
    g, beta = -np.abs(RNG.normal(size=(T, Hv))), RNG.uniform(0, 1, size=(T, Hv))
    S0 = RNG.normal(size=(Hv, dk, dv)) * 0.5
    want, want_S = rule_reference(q, key, v, g, beta, S0, dk ** -0.5)
    S = k(S0)
    first = kiln.gated_delta_rule(k(q[:4]), k(key[:4]), k(v[:4]), k(g[:4]), k(beta[:4]), S)
    rest = [kiln.gated_delta_rule(k(q[t:t + 1]), k(key[t:t + 1]), k(v[t:t + 1]), k(g[t:t + 1]), k(beta[t:t + 1]), S)
            for t in range(4, T)]
    got = np.concatenate([first.numpy()] + [r.numpy() for r in rest])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(S.numpy(), want_S, rtol=1e-4, atol=1e-4)


def test_gated_delta_rule_bad_input():
    q, v, g = k(np.zeros((2, 2, 4))), k(np.zeros((2, 3, 4))), k(np.zeros((2, 3)))
    with pytest.raises(RuntimeError, match="must be a multiple of key heads"):
        kiln.gated_delta_rule(q, q, v, g, g, k(np.zeros((3, 4, 4))))


@pytest.mark.parametrize("arch", ["qwen3", "qwen3_next", "qwen3_5_moe"])
def test_new_architectures_load_and_decode(tmp_path, arch):
    kiln.llm.make_model(str(tmp_path), arch, "tiny", seed=3)
    model = kiln.llm.load(str(tmp_path), dtype="f32")
    ids = model.tokenizer.encode("The kiln was hot")
    full = model.forward(ids)
    model.reset()
    model.forward(ids[:-1])
    last = model.forward(ids[-1:])
    np.testing.assert_allclose(last[-1], full[-1], rtol=1e-4, atol=1e-4 * np.abs(full).max())


def test_chat_prompt_thinking_switch(tmp_path):
    kiln.llm.make_model(str(tmp_path), "qwen3_5_moe", "tiny")
    model = kiln.llm.load(str(tmp_path))
    on = model.tokenizer.chat_prompt("Hi")
    assert on.endswith("<|im_start|>assistant\n")
    assert model.tokenizer.chat_prompt("Hi", enable_thinking=False) == on + "<think>\n\n</think>\n\n"
    text = model.generate("Hi", max_new_tokens=2, chat=True, enable_thinking=False, return_details=True)
    assert text["prompt_tokens"] > len(model.tokenizer.encode(on, add_special_tokens=False))


def test_composites_match_fused():
    T, Hk, Hv, dk, dv = 5, 1, 2, 8, 4
    q, key, v = RNG.normal(size=(T, Hk, dk)), RNG.normal(size=(T, Hk, dk)), RNG.normal(size=(T, Hv, dv))
    g, beta = -np.abs(RNG.normal(size=(T, Hv))), RNG.uniform(0, 1, size=(T, Hv))
    S0 = RNG.normal(size=(Hv, dk, dv))
    s1, s2 = k(S0), k(S0)
    fused = kiln.gated_delta_rule(k(q), k(key), k(v), k(g), k(beta), s1)
    unfused = kiln.composite.gated_delta_rule(k(q), k(key), k(v), k(g), k(beta), s2)
    np.testing.assert_allclose(fused.numpy(), unfused.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s1.numpy(), s2.numpy(), rtol=1e-4, atol=1e-4)
    x, w, st = RNG.normal(size=(3, 9)), RNG.normal(size=(9, 4)), RNG.normal(size=(3, 9))
    c1, c2 = k(st), k(st)
    np.testing.assert_allclose(kiln.causal_conv1d(k(x), k(w), c1).numpy(),
                               kiln.composite.causal_conv1d(k(x), k(w), c2).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(c1.numpy(), c2.numpy())


CLI = os.path.join(os.path.dirname(kiln.__file__), "..", "..", "kiln")


@pytest.mark.skipif(not os.path.exists(CLI), reason="the kiln executable is not next to the module")
@pytest.mark.parametrize("arch", ["qwen3", "qwen3_next", "qwen3_5_moe"])
def test_cli_makes_and_runs_the_new_architectures(tmp_path, arch):
    out = str(tmp_path / arch)
    made = subprocess.run([CLI, "make-model", "--arch", arch, "--preset", "tiny", "--out", out],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    ran = subprocess.run([CLI, "run", "--model", out, "--prompt", "The kiln", "-n", "4", "--chat", "--no-thinking",
                          "--no-roofline", "--max-context", "64"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert f"model: {arch} (" in ran.stderr
    # The per-sequence state line: K/V for the 64-token context, plus the DeltaNet state.
    assert "state: " in ran.stderr and "K/V cache for 64 tokens" in ran.stderr
    assert "stop: " in ran.stderr
