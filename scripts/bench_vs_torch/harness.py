"""Same-run timing of kiln against PyTorch (Debian's python3-torch 1.13).

The build machines are shared and their speed drifts by up to 2x within an hour, so a
figure measured in another run means little. Each row here times the kiln call and the
PyTorch call in alternating blocks (see _median_pairs), in one process with the same
thread count, and reports the ratio of the medians. A target is a ratio ("kiln at least as fast" is 1.0).
"""
import os
import statistics
import time

THREADS = int(os.environ.get("KILN_NUM_THREADS", "2"))
# Long enough for libgomp's spinning workers to go to sleep (GOMP_SPINCOUNT, ~ms).
_PAUSE_SECONDS = 0.2
# Each library's block of back-to-back calls lasts at least this long.
_BLOCK_SECONDS = 0.05
_MIN_ROUNDS = 3


def _timed_block(fn, min_calls, times):
    """Times fn back to back for at least min_calls calls and _BLOCK_SECONDS."""
    fn()  # the block's first call wakes the library's threads; not counted
    start = time.perf_counter()
    calls = 0
    while calls < min_calls or (time.perf_counter() - start < _BLOCK_SECONDS and calls < 1000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        calls += 1


def _median_pairs(kiln_fn, torch_fn, pairs, min_seconds, block=5):
    """Medians of both, timed in alternating blocks (at least `block` calls and
    _BLOCK_SECONDS each, at least _MIN_ROUNDS rounds).

    Each block starts after a short pause: PyTorch's OpenMP workers keep spinning for
    some milliseconds after its last call, and on a 2-core machine those spins take a
    core from whatever runs next (kiln's calls measured right after PyTorch's came out
    2-3x slower than alone). The pause lets the other library's threads park, so each
    library is timed in its own steady state, back to back, as its users call it; a
    block long enough for a millisecond call to reach that state (the first calls after
    a pause run on parked threads and cold caches), several rounds so that a drift of
    the machine's speed touches both.
    """
    kiln_times, torch_times = [], []
    start = time.perf_counter()
    rounds = 0
    while rounds < _MIN_ROUNDS or len(kiln_times) < pairs or time.perf_counter() - start < min_seconds:
        for fn, times in ((kiln_fn, kiln_times), (torch_fn, torch_times)):
            time.sleep(_PAUSE_SECONDS)
            _timed_block(fn, block, times)
        rounds += 1
        if rounds >= 4 * _MIN_ROUNDS:
            break
    return statistics.median(kiln_times), statistics.median(torch_times)


def _fmt(seconds):
    if seconds >= 1e-3:
        return f"{seconds * 1e3:9.2f} ms"
    return f"{seconds * 1e6:9.1f} us"


class Table:
    def __init__(self):
        self.missed = 0
        print(f"kiln vs PyTorch, same process, {THREADS} threads, medians of interleaved pairs")
        print(f"{'row':58s} {'kiln':>12s} {'torch':>12s} {'speed-up':>9s}  target")

    def compare(self, name, kiln_fn, torch_fn, target_speedup=None, pairs=15, min_seconds=0.5):
        """Times both, prints one row; target_speedup is torch_time / kiln_time to reach."""
        k, t = _median_pairs(kiln_fn, torch_fn, pairs, min_seconds)
        speedup = t / k
        target = ""
        if target_speedup is not None:
            met = speedup >= target_speedup
            self.missed += not met
            target = f">= {target_speedup:.2f}x ({'met' if met else 'MISSED'})"
        print(f"{name:58s} {_fmt(k)} {_fmt(t)} {speedup:8.2f}x  {target}", flush=True)
        return speedup
