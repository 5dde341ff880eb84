"""Thread counts from Python: kiln.set_num_threads, kiln.get_num_threads and
``with kiln.threads(n):``, also while other threads compute."""

import threading

import numpy as np
import pytest

import kiln


def _ops(x):
    # Ops that split rows over the pool; the thread count changes no value.
    return kiln.softmax(x, 1).to(kiln.bfloat16).to(kiln.float32).clone().numpy()


@pytest.fixture()
def restore_threads():
    before = kiln.get_num_threads()
    yield before
    kiln.set_num_threads(before)


def test_threads_block_sets_the_count_inside_and_restores_it(restore_threads):
    x = kiln.randn(300, 97)
    ref = _ops(x)
    outside = kiln.get_num_threads()
    with kiln.threads(2) as block:
        assert block.num_threads == 2
        assert kiln.get_num_threads() == 2
        np.testing.assert_array_equal(_ops(x), ref)
        with kiln.threads(3):
            assert kiln.get_num_threads() == 3
            np.testing.assert_array_equal(_ops(x), ref)
        assert kiln.get_num_threads() == 2
        # The default pool changes; the block's does not.
        kiln.set_num_threads(1)
        assert kiln.get_num_threads() == 2
    assert kiln.get_num_threads() == 1
    kiln.set_num_threads(outside)
    assert kiln.get_num_threads() == outside


def test_threads_block_is_per_thread():
    outside = kiln.get_num_threads()
    seen = []
    with kiln.threads(2):
        worker = threading.Thread(target=lambda: seen.append(kiln.get_num_threads()))
        worker.start()
        worker.join()
    assert seen == [outside]


def test_threads_block_restores_after_an_exception():
    outside = kiln.get_num_threads()
    with pytest.raises(KeyError):
        with kiln.threads(2):
            raise KeyError("inside")
    assert kiln.get_num_threads() == outside


def test_threads_block_misuse_is_an_error():
    outside = kiln.get_num_threads()
    with pytest.raises(ValueError, match="num_threads"):
        with kiln.threads(0):
            pass
    # Exited on another thread: refused, and the block stays usable where it was entered.
    block = kiln.threads(2)
    block.__enter__()
    errors = []

    def exit_elsewhere():
        try:
            block.__exit__(None, None, None)
        except RuntimeError as e:
            errors.append(str(e))

    worker = threading.Thread(target=exit_elsewhere)
    worker.start()
    worker.join()
    assert errors and "thread that entered it" in errors[0]
    assert kiln.get_num_threads() == 2
    # Out of order: refused; innermost first works.
    inner = kiln.threads(3)
    inner.__enter__()
    with pytest.raises(RuntimeError, match="innermost first"):
        block.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="already entered"):
        inner.__enter__()
    inner.__exit__(None, None, None)
    block.__exit__(None, None, None)
    with pytest.raises(RuntimeError, match="without a matching enter"):
        block.__exit__(None, None, None)
    assert kiln.get_num_threads() == outside


def _cycle_thread_counts(stop, changes):
    i = 0
    while not stop.is_set():
        kiln.set_num_threads(1 + i % 4)
        changes.append(i)
        i += 1


def test_set_num_threads_from_another_thread_while_ops_run(restore_threads):
    x = kiln.randn(513, 130)
    ref = _ops(x)
    stop, changes = threading.Event(), []
    changer = threading.Thread(target=_cycle_thread_counts, args=(stop, changes))
    changer.start()
    try:
        for _ in range(300):
            np.testing.assert_array_equal(_ops(x), ref)
    finally:
        stop.set()
        changer.join()
    assert changes


def test_set_num_threads_from_another_thread_during_forward(restore_threads, tmp_path):
    # Model.forward runs without the GIL, so the changes land in the middle of it.
    kiln.llm.make_model(tmp_path, "qwen3_moe", "demo", layers=1, seed=3)
    model = kiln.llm.load(tmp_path, "f32", max_context=64)
    ids = [(i * 977 + 5) % 600 for i in range(16)]
    ref = model.forward(ids)
    stop, changes = threading.Event(), []
    changer = threading.Thread(target=_cycle_thread_counts, args=(stop, changes))
    changer.start()
    try:
        for _ in range(40):
            model.reset()
            np.testing.assert_allclose(model.forward(ids), ref, rtol=1e-5, atol=1e-5)
    finally:
        stop.set()
        changer.join()
    assert changes
