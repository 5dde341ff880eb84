"""Hostile use of the Python module (issue classes 2, 4 and 5): read-only numpy memory,
Python ints past int64, messages that quote non-UTF-8 bytes, and one model shared by
several Python threads."""

import threading

import numpy as np
import pytest

import kiln

READ_ONLY = "cannot write to a read-only tensor"


# ---- class 2: read-only memory ----

def _in_place_writes(t):
    """Every way Python can write into an existing float tensor of 4 elements."""
    index = kiln.tensor([0], dtype=kiln.int64)

    def setitem():
        t[0] = 1.0

    def setitem_tensor():
        t[1:3] = kiln.ones(2)

    def iadd():
        u = t
        u += 1

    return {
        "add_": lambda: t.add_(1),
        "mul_": lambda: t.mul_(2),
        "iadd": iadd,
        "copy_": lambda: t.copy_(kiln.zeros(4)),
        "fill_": lambda: t.fill_(3),
        "zero_": lambda: t.zero_(),
        "setitem": setitem,
        "setitem_tensor": setitem_tensor,
        "index_add_": lambda: t.index_add_(0, index, kiln.ones(1)),
        "scatter_add_": lambda: t.scatter_add_(0, index, kiln.ones(1)),
        "masked_fill_": lambda: t.masked_fill_(kiln.ones(4, dtype=kiln.bool), 0.0),
    }


def test_read_only_array_gives_a_read_only_tensor():
    a = np.arange(4, dtype=np.float32)
    a.flags.writeable = False
    t = kiln.from_numpy(a)
    for name, write in _in_place_writes(t).items():
        with pytest.raises(RuntimeError, match=READ_ONLY):
            write()
    np.testing.assert_array_equal(a, [0, 1, 2, 3])
    # Reading and out-of-place ops share the memory; the way back to numpy stays read-only.
    assert (t + 1).tolist() == [1, 2, 3, 4]
    assert t.sum().item() == 6
    back = t.numpy()
    assert not back.flags.writeable
    with pytest.raises(ValueError):
        back[0] = 5
    # A clone is an ordinary tensor.
    c = t.clone()
    c.add_(1)
    assert c.tolist() == [1, 2, 3, 4]
    assert c.numpy().flags.writeable


def test_writable_array_still_shares_its_memory():
    a = np.arange(4, dtype=np.float32)
    t = kiln.from_numpy(a)
    t.add_(1)
    t[0] = 10
    np.testing.assert_array_equal(a, [10, 2, 3, 4])


def test_read_only_memmap_raises_instead_of_crashing(tmp_path):
    path = tmp_path / "weights.bin"
    np.arange(4, dtype=np.float32).tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(4,))
    t = kiln.from_numpy(mapped)
    for name, write in _in_place_writes(t).items():
        with pytest.raises(RuntimeError, match=READ_ONLY):
            write()
    assert t.tolist() == [0, 1, 2, 3]
    assert kiln.softmax(t, 0).sum().item() == pytest.approx(1.0)
    # A copy-on-write mapping is writable, and the file keeps its bytes.
    private = np.memmap(path, dtype=np.float32, mode="c", shape=(4,))
    kiln.from_numpy(private).add_(1)
    assert private.tolist() == [1, 2, 3, 4]
    assert np.fromfile(path, dtype=np.float32).tolist() == [0, 1, 2, 3]
    del mapped, private


# ---- class 5: ints past int64, and messages ----

def test_sizes_past_int64_name_the_op_and_the_value():
    with pytest.raises(RuntimeError, match=r"^zeros: size 9223372036854775808 is out of range for int64"):
        kiln.zeros(2**63)
    with pytest.raises(RuntimeError, match=r"^empty: size -9223372036854775809 is out of range for int64"):
        kiln.empty(-2**63 - 1)
    with pytest.raises(RuntimeError, match=r"^ones: size 18446744073709551616 is out of range"):
        kiln.ones((2, 2**64))
    with pytest.raises(RuntimeError, match=r"^view: size 18446744073709551616 is out of range"):
        kiln.zeros(2).view(2**64)
    with pytest.raises(RuntimeError, match=r"^full: size"):
        kiln.full((2**63,), 1.0)
    with pytest.raises(RuntimeError, match=r"^as_strided: stride 9223372036854775808"):
        kiln.zeros(4).as_strided((2,), (2**63,))
    with pytest.raises(RuntimeError, match=r"^randint: high 9223372036854775808"):
        kiln.randint(0, 2**63, (2,))
    with pytest.raises(RuntimeError, match=r"^sum: dim 9223372036854775808"):
        kiln.zeros(2).sum(2**63)
    with pytest.raises(RuntimeError, match=r"^max: dim -9223372036854775809"):
        kiln.zeros(2).max(-2**63 - 1)
    # An int too long to print is described by its length.
    with pytest.raises(RuntimeError, match=r"zeros: size \(an int of 20001 bits\)"):
        kiln.zeros(2**20000)


def test_scalars_past_int64_and_uint64():
    t = kiln.zeros(2, dtype=kiln.int64)
    with pytest.raises(RuntimeError, match=r"^add: value 18446744073709551616 is out of range for int64 and uint64"):
        t + 2**64
    with pytest.raises(RuntimeError, match=r"^full: value -9223372036854775809"):
        kiln.full((1,), -2**63 - 1)
    with pytest.raises(RuntimeError, match=r"^fill_: value"):
        t.fill_(2**70)
    # [2**63, 2**64) is a uint64 scalar, as before.
    u = kiln.zeros(2, dtype=kiln.uint64) + 2**63
    assert u.tolist() == [2**63, 2**63]


def test_indices_past_int64():
    t = kiln.arange(4)
    with pytest.raises(IndexError, match=r"index 9223372036854775808 is out of bounds for dimension 0 with size 4"):
        t[2**63]
    with pytest.raises(IndexError, match=r"index -9223372036854775809 is out of bounds"):
        t[-2**63 - 1]
    # Slice bounds clamp, as Python's do.
    assert t[2**63:].tolist() == []
    assert t[-2**70:2**70].tolist() == [0, 1, 2, 3]
    assert t[1:2**64].tolist() == [1, 2, 3]


def _model_dir(tmp_path, arch="qwen3_moe"):
    path = tmp_path / arch
    kiln.llm.make_model(path, arch, "tiny", seed=3)
    return path


def test_token_ids_past_int64(tmp_path):
    model = kiln.llm.load(_model_dir(tmp_path))
    with pytest.raises(ValueError, match=r"token id 1180591620717411303424 is out of range"):
        model.forward([2**70])
    with pytest.raises(ValueError, match=r"token id 2147483648 is out of range"):
        model.tokenizer.decode([2**31])


def test_non_utf8_bytes_in_a_message_survive(tmp_path):
    path = _model_dir(tmp_path)
    shard = path / "model.safetensors"
    # A header whose JSON holds a byte that is not UTF-8: the parser quotes it.
    header = b'{"\xff\xfe": 1}'
    shard.write_bytes(len(header).to_bytes(8, "little") + header)
    with pytest.raises(ValueError) as info:
        kiln.llm.load(path)
    message = str(info.value)
    assert "model.safetensors" in message
    # The loader repairs the quoted bytes to U+FFFD; bytes that reach the translation
    # unrepaired come out as backslash escapes. Either way the message survives.
    assert "\\xff" in message or "\ufffd" in message


def test_an_index_too_large_for_memory_names_the_op():
    # 2**61 entries: the output they ask for is refused before the entries are read.
    index = kiln.zeros(1, dtype=kiln.int64).expand(2**61)
    with pytest.raises(RuntimeError, match=r"^index_select: Storage size calculation overflowed with "
                                           r"sizes=\[2305843009213693952\]"):
        kiln.index_select(kiln.zeros(3), 0, index)
    with pytest.raises(RuntimeError, match=r"^embedding: Storage size calculation overflowed"):
        kiln.nn.functional.embedding(index, kiln.zeros(3, 2))
    # An output of no bytes (rows of 0 elements) leaves the index itself too large to read.
    with pytest.raises(RuntimeError, match=r"^index_select: the index holds 2305843009213693952 entries"):
        kiln.index_select(kiln.zeros(3, 0), 0, index)


def test_floats_past_float64():
    with pytest.raises(RuntimeError, match=r"^var: correction \(an int of 2001 bits\) is out of range for float64"):
        kiln.zeros(3).var(correction=2**2000)
    with pytest.raises(RuntimeError, match=r"^norm: p \(an int of 2001 bits\)"):
        kiln.norm(kiln.zeros(3), 2**2000)


def test_internal_names_do_not_leak():
    fp8 = kiln.zeros(3).to(kiln.float8_e4m3fn)
    one = kiln.zeros(1).to(kiln.float8_e4m3fn)
    with pytest.raises(TypeError, match=r"^index_add_: not implemented for float8_e4m3fn"):
        fp8.index_add_(0, kiln.tensor([0]), one)
    with pytest.raises(TypeError, match=r"^index_add_:"):
        kiln.index_add(fp8, 0, kiln.tensor([0]), one)


# ---- class 4: one model, several Python threads ----

def _run_threads(targets):
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_generate_matches_sequential(tmp_path):
    model = kiln.llm.load(_model_dir(tmp_path, "lfm2_moe"))
    prompts = ["The kiln", "Pots crack when", "A long time ago", "Glaze and fire"]
    sequential = [model.generate(p, max_new_tokens=10) for p in prompts]
    sampled = [model.generate(p, max_new_tokens=10, temperature=0.8, seed=4) for p in prompts]
    got, got_sampled = [None] * len(prompts), [None] * len(prompts)

    def worker(i):
        def run():
            got[i] = model.generate(prompts[i], max_new_tokens=10)
            got_sampled[i] = model.generate(prompts[i], max_new_tokens=10, temperature=0.8, seed=4)
        return run

    _run_threads([worker(i) for i in range(len(prompts))])
    assert got == sequential
    assert got_sampled == sampled


def test_concurrent_forward_calls_each_run_whole(tmp_path):
    model = kiln.llm.load(_model_dir(tmp_path))
    calls = 6
    # After a varied prefix, one token at positions 4..9: each result belongs to one
    # position (the attention sees a different history at each).
    prefix = [3, 9, 1, 4]
    model.forward(prefix)
    sequential = [model.forward([7]) for _ in range(calls)]
    assert all(not np.array_equal(a, b) for i, a in enumerate(sequential) for b in sequential[i + 1:])
    model.reset()
    model.forward(prefix)
    got = [None] * calls

    def worker(i):
        def run():
            got[i] = model.forward([7])
        return run

    _run_threads([worker(i) for i in range(calls)])
    assert model.position == len(prefix) + calls
    positions = []
    for logits in got:
        matches = [p for p, ref in enumerate(sequential) if np.array_equal(logits, ref)]
        assert len(matches) == 1, "a concurrent forward matches no sequential position"
        positions.append(matches[0])
    assert sorted(positions) == list(range(calls))


def test_streaming_generate_with_other_threads_using_the_model(tmp_path):
    # generate's callback takes the GIL while generate holds the model; a thread
    # waiting on the model must not hold the GIL meanwhile (no deadlock).
    model = kiln.llm.load(_model_dir(tmp_path))
    expected = model.generate("The kiln", max_new_tokens=8)
    pieces, positions = [], []

    def stream():
        pieces.append(model.generate("The kiln", max_new_tokens=8, on_text=lambda p: pieces.append(p) or True))

    def poke():
        for _ in range(20):
            positions.append(model.position)
            model.reset()

    _run_threads([stream, poke])
    assert pieces[-1] == expected
    assert "".join(pieces[:-1]) == expected


def test_calling_the_model_from_its_own_callback_is_an_error(tmp_path):
    model = kiln.llm.load(_model_dir(tmp_path))
    with pytest.raises(RuntimeError, match="Model.forward: this thread is already using the model"):
        model.generate("The kiln", max_new_tokens=4, on_text=lambda piece: model.forward([1]) is None)
    with pytest.raises(RuntimeError, match="Model.reset: this thread is already using the model"):
        model.generate("The kiln", max_new_tokens=4, on_text=lambda piece: model.reset())
    assert len(model.generate("The kiln", max_new_tokens=2, return_details=True)["tokens"]) == 2
    # Reading the position from the callback is fine.
    positions = []
    model.generate("The kiln", max_new_tokens=4, on_text=lambda piece: positions.append(model.position) or True)
    assert positions and positions == sorted(positions)
