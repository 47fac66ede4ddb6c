"""The plugin is inert for ordinary test sessions, aggregates the same under xdist, and the
CLI fails fast and plainly when nothing answers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PY = sys.executable


def run(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def run_pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A pytest session in a subprocess, without the cache (the tmp dir stays as it ran)."""
    return run("-m", "pytest", "-q", "-p", "no:cacheprovider", *args, cwd=cwd)


def test_plugin_is_inert_for_other_sessions(tmp_path):
    (tmp_path / "test_plain.py").write_text(
        textwrap.dedent("""
        import threading

        def test_nothing_started():
            assert not [t for t in threading.enumerate() if t.name.startswith("fake-gs")]
    """)
    )
    proc = run_pytest(str(tmp_path / "test_plain.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gs-conformance" not in proc.stdout
    assert not list(tmp_path.glob("*.json"))


CHEAP = "ADDR-REQID-1,ADDR-ROUTE-1,JOB-GET-1,CANCEL-UNKNOWN-1,JOBV-EMPTY-1"


def _suite(tmp_path: Path, name: str, *extra: str, clauses: str = CHEAP) -> dict:
    out = tmp_path / f"{name}.json"
    proc = run_pytest("--pyargs", "conformance.properties", "--gs-clauses", clauses,
                      "--gs-examples", "2", "--gs-json", str(out), *extra, cwd=tmp_path)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.long  # three pytest sessions; the CLI's -n 2 runs (test_false_reds, the slow plain runs) aggregate under xdist in CI
@pytest.mark.heavy
def test_xdist_aggregates_like_a_single_process(tmp_path):
    serial = _suite(tmp_path, "serial")
    parallel = _suite(tmp_path, "parallel", "-n", "2")
    status = lambda r: {v["id"]: v["status"] for v in r["verdicts"]}  # noqa: E731
    assert status(serial) == status(parallel)
    assert serial["tests"] == parallel["tests"]
    assert set(status(serial).values()) == {"green"}


@pytest.mark.heavy
def test_red_clause_report_carries_the_exchange(tmp_path):
    html, xml = tmp_path / "r.html", tmp_path / "r.xml"
    res = _suite(
        tmp_path,
        "red",
        "--gs-mutant",
        "bare-400",
        "--gs-report",
        str(html),
        "--gs-junit",
        str(xml),
        "--gs-no-shrink",
        clauses="ERR-ENVELOPE-1,JOBV-EMPTY-1",
    )
    red = [v for v in res["verdicts"] if v["status"] == "red"]
    assert red and all(v["examples"] for v in red)
    page = html.read_text()
    assert "<details>" in page and "last HTTP exchanges" in page
    assert "<failure" in xml.read_text()


def test_cli_fails_fast_when_nothing_answers():
    """Exit 3 with a plain message (no traceback); a CLI that kept waiting fails on the
    subprocess time-out rather than on a timed assertion."""
    proc = run("-m", "conformance.cli", "--url", "http://127.0.0.1:9", timeout=60)
    assert proc.returncode == 3
    assert "no server answering at http://127.0.0.1:9" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.heavy
def test_cli_writes_every_report_form(tmp_path):
    outs = {
        "--report": "out.html",
        "--markdown": "out.md",
        "--junit": "out.xml",
        "--json": "out.json",
    }
    flags = [x for flag, name in outs.items() for x in (flag, str(tmp_path / name))]
    proc = run(
        "-m",
        "conformance.cli",
        "--clauses",
        "ADDR-REQID-1,JOB-GET-1",
        "--examples",
        "2",
        "-n",
        "0",
        *flags,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in outs.values():
        assert (tmp_path / name).stat().st_size > 200, name
    assert "PASS" in proc.stdout and "CONFORMS" in proc.stdout
