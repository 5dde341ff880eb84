"""kiln.gated_delta_rule_chunked (the chunked WY form of the gated delta rule, for
prompts) against the float64 recurrent reference and the recurrent kernel."""

import numpy as np
import pytest

import kiln
from test_gated_delta import k, rule_reference

RNG = np.random.default_rng(17)


def inputs(T, Hk, Hv, dk, dv):
    q, key, v = RNG.normal(size=(T, Hk, dk)), RNG.normal(size=(T, Hk, dk)), RNG.normal(size=(T, Hv, dv))
    g, beta = -np.abs(RNG.normal(size=(T, Hv))), RNG.uniform(0, 1, size=(T, Hv))
    S0 = RNG.normal(size=(Hv, dk, dv)) * 0.5
    return q, key, v, g, beta, S0


@pytest.mark.parametrize("T", [1, 5, 63, 64, 65, 130])
def test_chunked_matches_reference_and_recurrent(T):
    Hk, Hv, dk, dv = 2, 4, 16, 8
    q, key, v, g, beta, S0 = inputs(T, Hk, Hv, dk, dv)
    want, want_S = rule_reference(q, key, v, g, beta, S0, dk ** -0.5)
    S = k(S0)
    got = kiln.gated_delta_rule_chunked(k(q), k(key), k(v), k(g), k(beta), S)
    # float32 against float64: a few hundred roundings per token, added up over T.
    tol = 4 * T * (dk + dv + 2 * 64 + 8) * 2.0 ** -24 * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=tol)
    np.testing.assert_allclose(S.numpy(), want_S, rtol=0, atol=4 * tol)
    S_rec = k(S0)
    recurrent = kiln.gated_delta_rule(k(q), k(key), k(v), k(g), k(beta), S_rec)
    np.testing.assert_allclose(got.numpy(), recurrent.numpy(), rtol=0, atol=2 * tol)


def test_chunked_prefill_then_recurrent_decode_and_chunk_size():
    T, Hk, Hv, dk, dv = 70, 1, 2, 8, 8
    q, key, v, g, beta, S0 = inputs(T, Hk, Hv, dk, dv)
    want, want_S = rule_reference(q, key, v, g, beta, S0, 0.5)
    S = k(S0)
    first = kiln.gated_delta_rule_chunked(k(q[:67]), k(key[:67]), k(v[:67]), k(g[:67]), k(beta[:67]), S,
                                          scale=0.5, chunk_size=16)
    rest = [kiln.gated_delta_rule(k(q[t:t + 1]), k(key[t:t + 1]), k(v[t:t + 1]), k(g[t:t + 1]), k(beta[t:t + 1]), S,
                                  scale=0.5) for t in range(67, T)]
    got = np.concatenate([first.numpy()] + [r.numpy() for r in rest])
    tol = 4 * T * (dk + dv + 2 * 16 + 8) * 2.0 ** -24 * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    np.testing.assert_allclose(S.numpy(), want_S, rtol=0, atol=4 * tol)


def test_chunked_bad_input():
    q, v, g, S = k(np.zeros((2, 2, 4))), k(np.zeros((2, 4, 3))), k(np.zeros((2, 4))), k(np.zeros((4, 4, 3)))
    with pytest.raises(ValueError, match=r"gated_delta_rule_chunked: chunk_size must be in \[1, 64\], got 65"):
        kiln.gated_delta_rule_chunked(q, q, v, g, g, S, chunk_size=65)
    with pytest.raises(ValueError, match="chunk_size must be in"):
        kiln.gated_delta_rule_chunked(q, q, v, g, g, S, chunk_size=0)
    with pytest.raises(RuntimeError, match="expected state of shape"):
        kiln.gated_delta_rule_chunked(q, q, v, g, g, k(np.zeros((4, 3, 4))))
    with pytest.raises(TypeError, match="expected state of dtype float32"):
        kiln.gated_delta_rule_chunked(q, q, v, g, g, S.to(kiln.bfloat16))
