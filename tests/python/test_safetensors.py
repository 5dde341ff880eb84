"""kiln.load_safetensors / kiln.save_safetensors (the `safetensors` package's load_file
/ save_file): round trips of every dtype, path-like names, metadata, hostile files as
ValueErrors, bad arguments as TypeErrors, and a module state dict through a file."""

import json
import struct

import numpy as np
import pytest

import kiln
import kiln.nn as nn

DTYPES = [kiln.float32, kiln.float16, kiln.bfloat16, kiln.float64, kiln.int8, kiln.int16, kiln.int32, kiln.int64,
          kiln.uint8, kiln.bool, kiln.float8_e4m3fn]


def sample(dtype, shape=(3, 4)):
    values = kiln.from_numpy(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) - 5)
    return values.to(dtype)


def raw(t):
    """The tensor's bytes (via uint8 reinterpretation where numpy lacks the dtype)."""
    return t.contiguous().to(kiln.float32).numpy().tobytes() if t.dtype in (kiln.bfloat16, kiln.float8_e4m3fn) \
        else t.contiguous().numpy().tobytes()


def test_round_trip_every_dtype(tmp_path):
    tensors = {f"t_{i}": sample(d) for i, d in enumerate(DTYPES)}
    tensors["strided"] = sample(kiln.float32, (4, 5)).transpose(0, 1)
    tensors["scalar"] = kiln.tensor(2.5)
    tensors["empty"] = kiln.zeros(0, 3)
    path = tmp_path / "all.safetensors"
    assert kiln.save_safetensors(tensors, path) is None
    loaded = kiln.load_safetensors(str(path))
    assert isinstance(loaded, dict) and set(loaded) == set(tensors)
    for name, t in tensors.items():
        got = loaded[name]
        assert got.dtype == t.dtype and tuple(got.shape) == tuple(t.shape), name
        assert raw(got) == raw(t), name
    loaded["t_0"].add_(1.0)  # writable


def test_header_is_what_the_safetensors_package_reads(tmp_path):
    path = tmp_path / "h.safetensors"
    kiln.save_safetensors({"w": kiln.ones(2, 3, dtype=kiln.bfloat16), "b": kiln.zeros(3)}, path,
                          metadata={"format": "pt"})
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    assert n % 8 == 0
    assert header["__metadata__"] == {"format": "pt"}
    assert header["w"] == {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}
    assert header["b"] == {"dtype": "F32", "shape": [3], "data_offsets": [12, 24]}
    assert kiln.safetensors_metadata(path) == {"format": "pt"}


def test_requires_grad_tensors_are_saved_by_value(tmp_path):
    p = nn.Parameter(kiln.ones(2))
    kiln.save_safetensors({"p": p * 3}, tmp_path / "p.safetensors")
    got = kiln.load_safetensors(tmp_path / "p.safetensors")["p"]
    assert got.tolist() == [3.0, 3.0] and not got.requires_grad


def write(path, header, data=b"", header_len=None):
    text = json.dumps(header).encode() if not isinstance(header, bytes) else header
    path.write_bytes(struct.pack("<Q", len(text) if header_len is None else header_len) + text + data)


@pytest.mark.parametrize("header,data,header_len,needle", [
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, None, "past the data region"),
    ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, 10 ** 6, "header length"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12, None, "overlap"),
    ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "'w'"),
    ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}}, b"\0" * 8, None, "'w'"),
    ({"w": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 8]}}, b"\0" * 8, None, "'w'"),
    ({"w": {"dtype": "X9", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "unknown dtype"),
    (b"{not json", b"", None, "not valid JSON"),
    (b"[]", b"", None, "JSON object"),
])
def test_hostile_files_raise_value_errors(tmp_path, header, data, header_len, needle):
    path = tmp_path / "bad.safetensors"
    write(path, header, data, header_len)
    with pytest.raises(ValueError, match=needle):
        kiln.load_safetensors(path)


def test_truncated_and_missing_files(tmp_path):
    path = tmp_path / "t.safetensors"
    kiln.save_safetensors({"w": kiln.ones(100)}, path)
    full = path.read_bytes()
    for cut in (0, 5, 8, 20, len(full) - 1):
        path.write_bytes(full[:cut])
        with pytest.raises(ValueError):
            kiln.load_safetensors(path)
    with pytest.raises(RuntimeError, match="cannot open"):
        kiln.load_safetensors(tmp_path / "missing.safetensors")


def test_bad_arguments_are_type_or_value_errors(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="dict of str -> Tensor"):
        kiln.save_safetensors([kiln.ones(1)], path)
    with pytest.raises(TypeError, match="expected a Tensor"):
        kiln.save_safetensors({"a": [1.0]}, path)
    with pytest.raises(TypeError, match="names must be str"):
        kiln.save_safetensors({1: kiln.ones(1)}, path)
    with pytest.raises(TypeError, match="metadata"):
        kiln.save_safetensors({"a": kiln.ones(1)}, path, metadata={"k": 1})
    with pytest.raises(TypeError, match="no safetensors spelling"):
        kiln.save_safetensors({"c": kiln.zeros(2, dtype=kiln.complex64)}, path)
    with pytest.raises(ValueError, match="cannot be a tensor name"):
        kiln.save_safetensors({"__metadata__": kiln.zeros(2)}, path)
    assert not path.exists()


def test_module_state_dict_through_safetensors(tmp_path):
    src = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Embedding(5, 4, padding_idx=1))
    dst = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Embedding(5, 4, padding_idx=1))
    kiln.save_safetensors(src.state_dict(), tmp_path / "m.safetensors")
    result = dst.load_state_dict(kiln.load_safetensors(tmp_path / "m.safetensors"))
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (k, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    # A half-precision file loads into a float32 module (values cast on copy).
    kiln.save_safetensors({k: v.to(kiln.float16) for k, v in src.state_dict().items()}, tmp_path / "h.safetensors")
    dst.load_state_dict(kiln.load_safetensors(tmp_path / "h.safetensors"))
    assert dst[0].weight.dtype == kiln.float32
    np.testing.assert_allclose(dst[0].weight.detach().numpy(), src[0].weight.detach().numpy(), rtol=1e-3)
