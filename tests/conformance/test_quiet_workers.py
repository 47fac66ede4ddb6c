"""A worker that finishes slowly prints nothing on the user's terminal.

When the controller ends a run, execnet gives each xdist worker 5 s to finish and then sends
it SIGINT. On a loaded machine the worker is still in its last garbage collection, the
KeyboardInterrupt lands in a finalizer, and pytest prints a PytestUnraisableExceptionWarning
with its traceback on the worker's stderr (the user's terminal), before gs-conformance -q
prints its report. Here a finalizer that takes longer than those 5 s stands in for the
loaded machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SLOW_FINALIZER = '''
import os, time
import pytest

class SlowToCollect:
    def __del__(self) -> None:
        time.sleep(7)

@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        cycle = SlowToCollect()
        cycle.me = cycle  # freed by the worker's last gc.collect(), after its results are sent
'''


@pytest.mark.long  # an 8 s finalizer in each of two workers
def test_a_worker_slow_to_finish_prints_no_keyboard_interrupt(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(SLOW_FINALIZER)
    (tmp_path / "test_one.py").write_text("def test_one() -> None:\n    assert True\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "1", "-p", "no:cacheprovider", "-o", "addopts=",
         "-q", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "KeyboardInterrupt" not in done.stderr + done.stdout
    assert "PytestUnraisableExceptionWarning" not in done.stderr + done.stdout
