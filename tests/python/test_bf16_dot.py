"""The KILN_BF16_DOT environment switch end to end: `kiln doctor --json` reports whether
the prefill GEMMs use the CPU's bf16 dot instruction, and the variable set to 0 turns
that off (the float32 paths then run; the C++ tests cover both paths' numbers)."""

import json
import os
import subprocess

import pytest

import kiln

CLI = os.path.join(os.path.dirname(kiln.__file__), "..", "..", "kiln")


def doctor_compute(env_value):
    env = dict(os.environ)
    env.pop("KILN_BF16_DOT", None)
    if env_value is not None:
        env["KILN_BF16_DOT"] = env_value
    done = subprocess.run([CLI, "doctor", "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["compute"]


@pytest.mark.skipif(not os.path.exists(CLI), reason="the kiln executable is not next to the module")
def test_kiln_bf16_dot_env_switch():
    default = doctor_compute(None)
    # Used exactly where the instruction exists, and measured there.
    assert default["bf16_dot_used"] == default["bf16_dot_available"]
    assert (default["bf16_dot_gflops_all"] > 0) == default["bf16_dot_available"]
    off = doctor_compute("0")
    assert off["bf16_dot_used"] is False
    assert off["bf16_dot_available"] == default["bf16_dot_available"]
    # Any other value leaves it on where the CPU has it.
    assert doctor_compute("1")["bf16_dot_used"] == default["bf16_dot_available"]
