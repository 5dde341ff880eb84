"""Runs a batch of cases in this process and reports each on stdout as one JSON line:
{"begin": id} before the case starts (so the parent knows which case a crash or a hang
belongs to), then {"id", "status", "detail"}. Statuses: ok, raised (a clear error),
mismatch, bad-error, setup-error, oracle-error."""

import json
import math
import resource
import sys

import numpy as np

import kiln

from .oracles import REFS, Expect, Violation, compare, to_np

# PyTorch's exception types for bad input; anything else (SystemError, AttributeError,
# AssertionError, ...) is a finding.
ALLOWED = (ValueError, TypeError, IndexError, RuntimeError, MemoryError, NotImplementedError, OverflowError,
           ZeroDivisionError, LookupError)
# Text that means an internal error escaped instead of a message for the user.
LEAKS = ("Unable to cast", "bad_alloc", "std::", "basic_string", "vector::", "_M_", "terminate called", "pybind11",
         "unordered_map", "stoll", "stoi")
# Results larger than this are spot-checked (first and last element) instead of read whole.
MAX_READ = 1 << 22


def namespace():
    return {"kiln": kiln, "np": np, "nan": math.nan, "inf": math.inf, "F": kiln.nn.functional}


def tensors_in(obj):
    if isinstance(obj, kiln.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in tensors_in(item)]
    return []


def classify_error(exc):
    msg = str(exc)
    if not isinstance(exc, ALLOWED):
        return "bad-error", f"{type(exc).__name__}: {msg}"
    if not msg.strip():
        return "bad-error", f"{type(exc).__name__} with an empty message"
    if any(leak in msg for leak in LEAKS):
        return "bad-error", f"{type(exc).__name__}: {msg}"
    return "raised", f"{type(exc).__name__}: {msg}"


def check_integrity(t):
    """Reads a result tensor (a result backed by too little memory crashes here) and
    checks that numel agrees with the shape."""
    n = math.prod(t.shape)
    if t.numel() != n:
        return f"numel() is {t.numel()} but the shape {tuple(t.shape)} holds {n} elements"
    if n == 0:
        return None  # nothing to read (numpy cannot even describe some empty shapes, e.g. (0, 2**63 - 1))
    if n <= MAX_READ:
        to_np(t)
    elif n > 0:
        t[(0,) * t.dim()].item()
        t[(-1,) * t.dim()].item()
    return None


def run_call(case, ns):
    if case.get("stmt"):
        exec(case["call"], ns)  # noqa: S102 (the sweep's own generated source)
        return ns[case["result"]]
    return eval(case["call"], ns)  # noqa: S307


def same_values(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    if not isinstance(a, kiln.Tensor):
        return a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b))
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape) or math.prod(a.shape) > MAX_READ:
        return a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    x, y = to_np(a), to_np(b)
    if x.dtype.kind in "fc":
        return bool(np.all((x == y) | (np.isnan(x) & np.isnan(y))))
    return bool(np.array_equal(x, y))


def check_invariance(case, ns, out):
    """The same call on contiguous copies of the non-contiguous inputs gives the same
    result (strided, transposed and broadcast kernels against the plain ones)."""
    swapped = {k: v.contiguous() for k, v in ns.items()
               if isinstance(v, kiln.Tensor) and not k.startswith("__") and not v.is_contiguous()
               and math.prod(v.shape) <= MAX_READ}
    if not swapped:
        return None
    ns2 = dict(ns)
    ns2.update(swapped)
    try:
        out2 = run_call(case, ns2)
    except Exception:  # noqa: BLE001 (only differing values are findings)
        return None
    if not same_values(out, out2):
        return f"result differs when the non-contiguous inputs {sorted(swapped)} are made contiguous"
    return None


def check_threads(case, ns, out):
    """Reductions promise the same result whatever the thread count (docs/ops.md)."""
    for n in (1, 3):
        try:
            with kiln.threads(n):
                again = run_call(case, dict(ns))
        except Exception:  # noqa: BLE001
            return None
        if not same_values(out, again):
            return f"result differs with {n} thread(s) from the default pool's"
    return None


def check_reference(case, inputs, out):
    name, params = case["ref"]
    try:
        exp = REFS[name](inputs, out, params)
    except Exception as e:  # noqa: BLE001 (a bug of the sweep, reported separately)
        return "oracle-error", f"{name}: {type(e).__name__}: {e}"
    if exp is None:
        return None
    if isinstance(exp, Violation):
        return "mismatch", exp.why
    outs = out if isinstance(out, (list, tuple)) else [out]
    exps = exp if isinstance(exp, list) else [exp]
    if len(outs) != len(exps):
        return "mismatch", f"{len(outs)} results, expected {len(exps)}"
    for i, (o, e) in enumerate(zip(outs, exps)):
        if not isinstance(o, kiln.Tensor) or not isinstance(e, Expect):
            continue
        try:
            diff = compare(o, e)
        except Exception as err:  # noqa: BLE001
            return "oracle-error", f"compare: {type(err).__name__}: {err}"
        if diff:
            return "mismatch", (f"result {i}: " if len(outs) > 1 else "") + diff
    return None


def run_case(case):
    ns = namespace()
    try:
        for stmt in case["setup"]:
            exec(stmt, ns)  # noqa: S102
    except Exception as e:  # noqa: BLE001
        return "setup-error", f"{type(e).__name__}: {e}"
    before = {k: v.clone() for k, v in ns.items() if isinstance(v, kiln.Tensor)} if case.get("mutates") else None
    try:
        out = run_call(case, ns)
    except Exception as e:  # noqa: BLE001
        return classify_error(e)
    for t in tensors_in(out):
        try:
            problem = check_integrity(t)
        except Exception as e:  # noqa: BLE001 (a returned tensor that cannot be read)
            problem = f"reading the result raised {type(e).__name__}: {e}"
        if problem:
            return "mismatch", problem
    if case.get("ref"):
        inputs = dict(ns)
        if before:
            inputs.update(before)
        found = check_reference(case, inputs, out)
        if found:
            return found
    if case.get("invariant", True) and not case.get("mutates"):
        problem = check_invariance(case, ns, out)
        if problem:
            return "mismatch", problem
    if case.get("threads"):
        problem = check_threads(case, ns, out)
        if problem:
            return "mismatch", problem
    return "ok", ""


def main(path, start, mem_limit):
    if mem_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
    with open(path) as f:
        cases = json.load(f)
    np.seterr(all="ignore")
    for case in cases[start:]:
        print(json.dumps({"begin": case["id"]}), flush=True)
        status, detail = run_case(case)
        print(json.dumps({"id": case["id"], "status": status, "detail": detail[:600]}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
