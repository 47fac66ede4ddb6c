"""The service's own TUI (``dss_client.tui``), unchanged, against the fake: its job screen
lists a job created here and opens it, and its log screen lists the job's sub-jobs and
tails their logs, driven the way Textual tests an app (``App.run_test()``'s pilot).

The same checkout as ``test_service_client.py`` (``GS_SERVICE_CLIENT_DIR``, with textual
importable; skips otherwise), against ``fake-gs --tls --profile current`` in the
configurations a recipe author runs: the shape and tiny engines, ``--dialect spec`` and
``--dialect any`` with seeds 0 to 5. Only what a user changes is changed: the host, the PAT,
the CA bundle. Nothing of the client is copied here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_client import CONFIGURATIONS, PAT, _client, _training, service_dir, user_env  # noqa: F401 - fixtures

from fake_gs import FakeSettings
from fake_gs.server import FakeServer, start_in_background


@pytest.fixture(scope="module", params=sorted(CONFIGURATIONS))
def fake(request: pytest.FixtureRequest, service_dir: Path) -> Iterator[FakeServer]:  # noqa: F811
    pytest.importorskip("textual")
    settings = FakeSettings(tls=True, tokens=(PAT,), profile="current", max_total_gpus=64,
                            **CONFIGURATIONS[request.param])
    server = start_in_background(settings)
    try:
        yield server
    finally:
        server.stop()


def _running_job(client: Any) -> str:
    job_id = str(client.create_job_from_body({"sub_job_configs": [_training()]})["job_id"])
    client.wait_for_job(job_id)
    return job_id


async def _until(pilot: Any, what: str, predicate: Any, seconds: float = 60.0) -> None:
    """Let the app run until ``predicate()`` holds (its workers are threads doing HTTP)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"the TUI never showed {what}"
        await pilot.pause(0.05)


def _labels(view: Any) -> list[str]:
    from textual.widgets import Label

    return [str(label.render()) for label in view.query(Label)]


async def _job_and_log_screens(client: Any, job_id: str) -> dict[str, Any]:
    from dss_client.tui.app import JobListScreen, LogScreen, NeutrinoLogTUI
    from textual.widgets import ListView, Log

    app = NeutrinoLogTUI(client, None, poll_interval=0.05)
    seen: dict[str, Any] = {}
    async with app.run_test(size=(160, 48)) as pilot:
        assert isinstance(app.screen, JobListScreen)
        jobs = app.screen.query_one("#jobs", ListView)
        await _until(pilot, f"job {job_id} in its job list", lambda: any(job_id in t for t in _labels(jobs)))
        seen["job_rows"] = _labels(jobs)
        row = next(i for i, t in enumerate(seen["job_rows"]) if job_id in t)
        jobs.focus()
        jobs.index = row
        await pilot.press("enter")
        await _until(pilot, "the log screen", lambda: isinstance(app.screen, LogScreen))
        sources = app.screen.query_one("#sources", ListView)
        await _until(pilot, "the job's sub-jobs as log sources", lambda: bool(_labels(sources)))
        seen["sources"] = _labels(sources)
        log = app.screen.query_one("#logview", Log)
        await _until(pilot, "a log line past the tail's banner",
                     lambda: any(line.strip() and not line.startswith("—") for line in log.lines))
        seen["log"] = list(log.lines)
        seen["subtitle"] = app.sub_title
        app.workers.cancel_all()
        for _ in range(5):
            await pilot.pause()
    return seen


def test_the_tui_job_and_log_screens(fake: FakeServer, user_env: dict[str, str],  # noqa: F811
                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # its log cache and error log
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    client = _client(fake.host_port)
    job_id = _running_job(client)
    try:
        seen = asyncio.run(_job_and_log_screens(client, job_id))
    finally:
        client.cancel_job(job_id)
    assert any(job_id in row for row in seen["job_rows"]), seen
    assert any("training" in source.lower() for source in seen["sources"]), seen
    assert not any(line.startswith("[error]") for line in seen["log"]), seen["log"][-10:]
    assert job_id in seen["subtitle"], seen
