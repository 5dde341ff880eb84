"""kiln.llm on tiny synthetic checkpoints: loading, forward, generation, tokenizer, errors."""

import numpy as np
import pytest

import kiln


@pytest.fixture(scope="module", params=["qwen3_moe", "lfm2_moe"])
def model_dir(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param)
    kiln.llm.make_model(path, request.param, "tiny", seed=1)
    return path


def test_forward_shapes_and_incremental_decode(model_dir):
    model = kiln.llm.load(model_dir, "f32")
    ids = model.tokenizer.encode("The kiln is hot today.")
    full = model.forward(ids)
    assert full.dtype == np.float32 and full.shape == (len(ids), model.info["vocab_size"])
    assert model.position == len(ids)
    model.reset()
    model.forward(ids[:-1])
    last = model.forward(ids[-1:], last_only=True)
    # Same math, float32 throughout: the decode path and the batched path agree closely.
    np.testing.assert_allclose(last[0], full[-1], rtol=1e-4, atol=1e-4)


def test_fp8_quantised_model_stays_close(model_dir):
    ids = kiln.llm.load(model_dir).tokenizer.encode("hello world")
    ref = kiln.llm.load(model_dir, "f32").forward(ids)
    fp8 = kiln.llm.load(model_dir, "fp8")
    got = fp8.forward(ids)
    assert fp8.info["fp8_quantization"]["max_relative_error"] < 2 ** -4
    # e4m3 keeps 3 mantissa bits: ~2^-5 relative per weight, averaging out over the
    # dot products; the logits move by a small fraction of their spread.
    assert np.sqrt(np.mean((got - ref) ** 2)) < 0.25 * np.std(ref)


def test_generate_is_deterministic_and_streams(model_dir):
    model = kiln.llm.load(model_dir)
    pieces = []
    first = model.generate("Once upon a time", 12, on_text=pieces.append, return_details=True)
    second = model.generate("Once upon a time", 12, return_details=True)
    assert first["tokens"] == second["tokens"]
    assert "".join(pieces) == first["text"]
    assert first["stop_reason"] in ("max_tokens", "eos")
    assert first["generated_tokens"] == len(first["tokens"]) <= 12
    sampled = model.generate("Once upon a time", 8, temperature=0.9, top_p=0.95, seed=5)
    assert sampled == model.generate("Once upon a time", 8, temperature=0.9, top_p=0.95, seed=5)


def test_tokenizer_round_trip(model_dir):
    tok = kiln.llm.load(model_dir).tokenizer
    text = "Cafe\u0301 costs 1234 coins, naïve ümlaut!"
    ids = tok.encode(text, add_special_tokens=False)
    # Qwen's tokenizer normalises to NFC; the synthetic LFM2 one (like llama.cpp's view of
    # LFM2) has no normalizer and round-trips the text as given.
    nfc = "Caf\u00e9 costs 1234 coins, naïve ümlaut!"
    assert tok.decode(ids) == (nfc if "qwen" in model_dir.name else text)
    assert "<|im_start|>user" in tok.chat_prompt("hi")
    assert tok.eos_ids


def test_errors(model_dir, tmp_path):
    with pytest.raises(RuntimeError, match="config.json"):
        kiln.llm.load(tmp_path / "missing")
    with pytest.raises(ValueError, match="as-stored"):
        kiln.llm.load(model_dir, "int4")
    model = kiln.llm.load(model_dir, max_context=8)
    with pytest.raises(ValueError, match="no tokens"):
        model.forward([])
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model.forward([10 ** 6])
    with pytest.raises(ValueError, match="exceed the context"):
        model.forward(list(range(9)))
    with pytest.raises(ValueError):
        kiln.llm.make_model(tmp_path / "x", "llama", "tiny")
