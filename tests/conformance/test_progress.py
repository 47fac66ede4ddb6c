"""The CLI's progress lines: something within seconds, before the first property's result."""

from __future__ import annotations

import io

from conformance.reporting.progress import Progress


def test_a_worker_collection_is_announced_once_under_xdist() -> None:
    """Under pytest-xdist the controller collects nothing itself; the first worker's
    collection is the first sign of life (the first result may be a minute away)."""
    out = io.StringIO()
    progress = Progress(out, colour=False)
    progress.pytest_xdist_node_collection_finished(None, ["t::a", "t::b", "t::c"])
    progress.pytest_xdist_node_collection_finished(None, ["t::a", "t::b", "t::c"])
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collected 3 properties in ")
    assert "first result can take a minute" in lines[0]
    assert progress.total == 3


def test_the_workers_start_is_announced() -> None:
    out = io.StringIO()
    Progress(out, colour=False).pytest_xdist_setupnodes(None, ["popen", "popen"])  # type: ignore[arg-type]
    assert out.getvalue().startswith("starting 2 worker processes (pytest-xdist)")
