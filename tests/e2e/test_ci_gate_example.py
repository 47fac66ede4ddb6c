"""``examples/ci_gate``, a client team's project using the ``fake_gs`` plugin, run as that
team would: under xdist (``-n 2``, a worker per test: the docs' ``-n 4`` only adds idle
workers), with the coverage report. Its green test passes, its bad test
is failed by the gate with the refused exchange named, and neither disturbs the other.

Plugin autoloading is off in the child so the run needs nothing but pytest, xdist and the
kit (no hypothesis or schemathesis, as in a client team's environment), and starts fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ci_gate"


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "fake_gs.testing.plugin",
           "-p", "conformance.gate_client", "-rA", "--color=no", *args]
    return subprocess.run(cmd, cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.heavy
def test_example_project_gate_and_coverage_under_xdist():
    proc = run_example("-n", "2", "--fake-gs-coverage")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr  # the bad test failed, nothing else broke
    assert "PASSED test_plumbing_green.py::test_step_sync_and_save" in out, out
    assert "FAILED test_bad_upload.py::test_upload_a_batch" in out, out
    assert "1 failed, 1 passed" in out, out
    gate = out[out.index("fake_gs gate:"):]
    assert "test_bad_upload.py::test_upload_a_batch (call)" in gate.splitlines()[0]
    assert "POST /{job_id}/forward-backward [forward_backward] -> 400 malformed_frame" in gate, gate
    assert "(forward_backward) left open: 2 of 3 chunks received" in gate, gate
    report = out[out.index("fake_gs coverage of the contract"):]
    lines = {line.split()[0]: line for line in report.splitlines()[1:] if line.startswith("  ") and "%" in line}
    assert lines["routes"].split()[1:3] == ["8/19", "42.1%"], report
    # the bad upload's first two chunks were accepted (202): forward_backward counts
    assert ("exercised: cancel_job, create_job, forward_backward, get_job, get_request, operation, "
            "save, step") in report
    assert "exercised: weight-sync" in report and "exercised: malformed_frame" in report
