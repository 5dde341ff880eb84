"""Hostile model folders and memory limits through kiln.llm: typed exceptions, never a
crash or a hang (the C++ suite test_hostile_model_files covers every file kind)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import kiln


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny")
    kiln.llm.make_model(path, "qwen3_moe", "tiny", seed=1)
    return path


def copy_with_config(src, dst, **changes):
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())
    config = json.loads((dst / "config.json").read_text())
    config.update(changes)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_deep_json_is_a_value_error(tiny, tmp_path):
    folder = copy_with_config(tiny, tmp_path / "deep")
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text('{"zz": ' + "[" * 300000 + "]" * 300000 + ", " + text[1:])
    with pytest.raises(ValueError, match="config.json: JSON nests deeper than 64 levels"):
        kiln.llm.load(folder)


def test_invalid_utf8_quoted_by_the_parser_keeps_the_message(tiny, tmp_path):
    # The JSON parser quotes the bytes it last read; raw 0xFF made the Python message empty.
    folder = copy_with_config(tiny, tmp_path / "bytes")
    (folder / "config.json").write_bytes(b'{"a": \xff}')
    with pytest.raises(ValueError, match="config.json: not valid JSON: .*last read: '\"a\": \ufffd'"):
        kiln.llm.load(folder)


def test_fifo_is_named_not_opened(tiny, tmp_path):
    folder = copy_with_config(tiny, tmp_path / "fifo")
    os.remove(folder / "tokenizer.json")
    os.mkfifo(folder / "tokenizer.json")
    with pytest.raises(RuntimeError, match="tokenizer.json is a FIFO, expected a regular file"):
        kiln.llm.load(folder)


def test_context_beyond_memory_is_refused_at_load(tiny, tmp_path):
    # max_context=2**58 overflowed the cache size and crashed on the first forward pass.
    with pytest.raises(ValueError, match="exceeds the model's max_position_embeddings"):
        kiln.llm.load(tiny, max_context=2**58)
    folder = copy_with_config(tiny, tmp_path / "long", max_position_embeddings=2**40)
    with pytest.raises(RuntimeError, match="tokens needs .* bytes of K/V cache .* pass a smaller max_context"):
        kiln.llm.load(folder, max_context=2**40)
    folder = copy_with_config(tiny, tmp_path / "longer", max_position_embeddings=2**62)
    with pytest.raises(ValueError, match="'max_position_embeddings' is 4611686018427387904, more than kiln's bound"):
        kiln.llm.load(folder, max_context=2**58)


def test_matmul_at_the_address_space_limit_fails_instead_of_hanging():
    # OpenBLAS retries a failed buffer allocation forever; under `ulimit -v` the process
    # hung inside the first matmul. A fresh interpreter gets 64 MiB of headroom, less
    # than OpenBLAS's 128 MiB work buffer, and must see a RuntimeError.
    script = textwrap.dedent("""
        import resource
        import kiln
        (kiln.ones(1 << 22) * 2).sum()  # the thread pool is up before the limit
        a = kiln.ones(256, 256)
        with open("/proc/self/status") as f:
            vm = int(f.read().split("VmSize:")[1].split()[0]) * 1024
        limit = vm + (64 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            a @ a
        except RuntimeError as e:
            print("RuntimeError:", e)
        else:
            print("no error")
    """)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(kiln.__file__))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "RuntimeError: matmul: out of memory: OpenBLAS needs a" in done.stdout, done.stdout
