"""kiln.profiler from Python: the context managers and the report."""
import pytest

import kiln
import kiln.nn.functional as F


def test_profile_block_records_ops_by_phase():
    w = kiln.randn(64, 32, dtype=kiln.bfloat16)
    x = kiln.randn(1, 32, dtype=kiln.bfloat16)
    with kiln.profiler.profile() as prof:
        with kiln.profiler.phase("decode", tokens=1):
            F.linear(x, w)
        x + x
    report = prof.report
    ops = {(o.phase, o.op): o for o in report.ops}
    lin = ops[("decode", "linear")]
    assert lin.calls == 1
    assert lin.bytes == (64 * 32 + 32 + 64) * 2
    assert lin.flops == 2 * 64 * 32
    assert ops[("", "add")].calls == 1
    assert [(p.phase, p.tokens) for p in report.phases] == [("decode", 1)]
    text = report.table(roofline_gbps=10.0)
    assert "profile: decode" in text and "(between kernels)" in text
    assert not kiln.profiler.enabled()


def test_report_before_the_block_ends_is_an_error():
    prof = kiln.profiler.profile()
    with pytest.raises(RuntimeError, match="once the with block ended"):
        prof.report
