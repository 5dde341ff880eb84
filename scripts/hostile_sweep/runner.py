"""The parent side: generates the cases, runs them in worker processes (batches, several
at a time), turns a worker's death into a crash finding for the case it was running and
a silent worker into a hang, restarts after either, and reports."""

import argparse
import collections
import json
import os
import random
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from .generators import FAMILIES, generate

FAILURES = ("crash", "hang", "mismatch", "bad-error")
PRELUDE = "import kiln, numpy as np; from math import nan, inf; F = kiln.nn.functional"


def reproducer(case):
    """One shell line that replays a case against the build the sweep ran with."""
    lines = [PRELUDE] + case["setup"]
    if case.get("stmt"):
        lines += [case["call"], f"print({case['result']})"]
    else:
        lines.append(f"print({case['call']})")
    code = "; ".join(lines)
    if not any(ch in code for ch in '"$`\\'):
        return f'python3 -c "{code}"'
    return f"python3 -c {shlex.quote(code)}"


class Worker:
    """One worker process over cases[start:] of a batch file."""

    def __init__(self, script, batch_path, start, mem_limit):
        env = os.environ.copy()
        # Temporary files of the cases (model folders) go under the run's own directory,
        # which is removed at the end even when a crash skipped a case's clean-up.
        env["TMPDIR"] = os.path.dirname(batch_path)
        self.proc = subprocess.Popen(
            [sys.executable, script, "--worker", batch_path, str(start), str(mem_limit)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.current = None  # id of the case begun and not finished
        self.started = time.monotonic()

    def lines(self):
        try:
            chunk = self.proc.stdout.read()
        except BlockingIOError:
            chunk = None
        if chunk:
            self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        return [json.loads(line) for line in done if line.strip()]

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def stderr_tail(self):
        try:
            return self.proc.stderr.read().decode(errors="replace")[-300:].strip().replace("\n", " | ")
        except (OSError, ValueError):
            return ""


class Batch:
    def __init__(self, cases, tmpdir, index):
        self.cases = cases
        self.path = os.path.join(tmpdir, f"batch{index}.json")
        with open(self.path, "w") as f:
            json.dump(cases, f)
        self.pos = {c["id"]: i for i, c in enumerate(cases)}
        self.next = 0  # index of the first case not yet reported


def run(args):
    rng = random.Random(args.seed)
    cases = generate(rng, args.cases, large=not args.quick, only=args.family)
    by_id = {c["id"]: c for c in cases}
    results = {}
    script = os.path.abspath(args.script)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hostile-sweep-") as tmp:
        batches = [Batch(cases[i:i + args.batch], tmp, i // args.batch) for i in range(0, len(cases), args.batch)]
        pending = collections.deque(batches)
        running = {}  # Worker -> Batch
        sel = selectors.DefaultSelector()

        def start(batch):
            w = Worker(script, batch.path, batch.next, args.mem_limit)
            running[w] = batch
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
            return w

        def retire(w):
            sel.unregister(w.proc.stdout)
            del running[w]

        while pending or running:
            while pending and len(running) < args.jobs:
                start(pending.popleft())
            for key, _ in sel.select(timeout=0.5):
                w = key.data
                batch = running[w]
                for msg in w.lines():
                    if "begin" in msg:
                        w.current = msg["begin"]
                        w.started = time.monotonic()
                    else:
                        results[msg["id"]] = (msg["status"], msg["detail"])
                        w.current = None
                        batch.next = batch.pos[msg["id"]] + 1
                if w.proc.poll() is not None and not w.lines():
                    retire(w)
                    if w.current is not None:
                        rc = w.proc.returncode
                        name = signal.Signals(-rc).name if rc < 0 else f"exit status {rc}"
                        results[w.current] = ("crash", f"{name}; stderr: {w.stderr_tail()}")
                        batch.next = batch.pos[w.current] + 1
                    elif batch.next < len(batch.cases):
                        rc = w.proc.returncode
                        results[batch.cases[batch.next]["id"]] = (
                            "crash", f"worker ended (status {rc}) before the case began: {w.stderr_tail()}")
                        batch.next += 1
                    if batch.next < len(batch.cases):
                        pending.appendleft(batch)
            now = time.monotonic()
            for w in list(running):
                if w.current is not None and now - w.started > args.timeout:
                    batch = running[w]
                    retire(w)
                    w.kill()
                    results[w.current] = ("hang", f"no result after {args.timeout:.0f} s")
                    batch.next = batch.pos[w.current] + 1
                    if batch.next < len(batch.cases):
                        pending.appendleft(batch)
        elapsed = time.monotonic() - t0
    return report(args, cases, by_id, results, elapsed)


def report(args, cases, by_id, results, elapsed):
    counts = collections.Counter(status for status, _ in results.values())
    findings = [(by_id[i], s, d) for i, (s, d) in sorted(results.items()) if s in FAILURES]
    info = [(by_id[i], s, d) for i, (s, d) in sorted(results.items()) if s in ("setup-error", "oracle-error")]
    out = sys.stdout
    print(f"hostile sweep: {len(cases)} cases in {elapsed:.0f} s (seed {args.seed}): " +
          ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), file=out)
    by_kind = collections.defaultdict(list)
    for c, s, d in findings:
        by_kind[(s, c["op"], d.split(":")[0][:60] if s == "bad-error" else "")].append((c, d))
    for (s, op, _), items in sorted(by_kind.items()):
        c, d = items[0]
        more = f" (+{len(items) - 1} similar)" if len(items) > 1 else ""
        print(f"\n{s.upper()} {op}{more}: {d}\n  {reproducer(c)}", file=out)
        for c2, d2 in items[1:args.examples]:
            print(f"  {reproducer(c2)}\n    -> {d2[:200]}", file=out)
    if args.verbose:
        for c, s, d in info:
            print(f"\n[{s}] {c['op']}: {d}\n  {reproducer(c)}", file=out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"status": s, "op": c["op"], "family": c["family"], "detail": d, "reproducer": reproducer(c)}
                       for c, s, d in findings + info], f, indent=1)
    return 1 if findings else 0


def parse_args(argv):
    p = argparse.ArgumentParser(prog="hostile-sweep", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a CI-sized run (well under a minute on 2 cores)")
    p.add_argument("--cases", type=int, help="number of cases (default 55000, or 8000 with --quick)")
    p.add_argument("--seed", type=int, default=0, help="seed of the case generator (default 0)")
    p.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)), help="worker processes at once")
    p.add_argument("--batch", type=int, default=500, help="cases per worker process")
    p.add_argument("--timeout", type=float, help="seconds one case may run before it is a hang (default 20, 10 quick)")
    p.add_argument("--mem-limit", type=int, default=4 << 30, help="address-space limit of a worker in bytes "
                   "(allocations past it fail instead of thrashing; 0 = none)")
    p.add_argument("--family", action="append", choices=sorted(FAMILIES), help="only these families (repeatable)")
    p.add_argument("--examples", type=int, default=3, help="reproducers shown per group of similar findings")
    p.add_argument("--json", help="also write the findings to this file")
    p.add_argument("--verbose", action="store_true", help="also list setup and oracle errors (the sweep's own)")
    args = p.parse_args(argv)
    if args.cases is None:
        args.cases = 8000 if args.quick else 55000
    if args.timeout is None:
        args.timeout = 10.0 if args.quick else 20.0
    return args
