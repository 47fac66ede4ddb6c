"""At most once end to end: the kit's client through the loopback fault proxy, against the
fake in both profiles, one lost answer at a time (deterministic), plus the proxy itself."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import requests

from client.config import ClientConfig
from client.errors import AmbiguousOutcome
from client.rest import CortexRestClient
from conformance.drivers.faultproxy import Action, FaultProxy
from conformance.judging.at_most_once import FAST_CLIENT, measure, open_job
from contract.routes import Profile
from fake_gs import FakeSettings, serve_in_background


def _posts(method: str, path: str) -> bool:
    """Only POSTs meet the proxy's faults."""
    return method == "POST"


def _steps(url: str, job: str) -> int:
    return int(requests.get(f"{url}/_fake/state", timeout=10).json()["jobs"][job]["global_steps"])


def _lost_step(profile: Profile, **config: Any) -> tuple[Any, int]:
    """One step whose first answer the proxy loses after forwarding: (outcome, steps run)."""
    with serve_in_background(FakeSettings(profile=profile, poll_wait_s=0.02)) as url:
        job = open_job(url)
        with FaultProxy(url, script=["drop_after"], match=_posts) as proxy:
            rest = CortexRestClient(ClientConfig(base_url=proxy.url, **{**FAST_CLIENT, **config}))
            try:
                outcome: Any = rest.result(job, rest.step(job), route_name="step")
            except AmbiguousOutcome as exc:
                outcome = exc
            rest.close()
            assert proxy.wait_idle(10)
        return outcome, _steps(url, job)


def test_default_client_raises_ambiguous_and_runs_once() -> None:
    outcome, steps = _lost_step("current")
    assert isinstance(outcome, AmbiguousOutcome) and outcome.route == "step"
    assert steps == 1


def test_keys_resend_safely() -> None:
    outcome, steps = _lost_step("proposed", supports_idempotency_keys=True)
    assert outcome["global_steps"] == 1 and steps == 1


def test_retry_ambiguous_brings_the_duplicate_back() -> None:
    """The reference behaviour, kept honest: the lost answer's step runs twice."""
    outcome, steps = _lost_step("current", retry_ambiguous=True)
    assert outcome["global_steps"] == 2 and steps == 2


MIXED: list[Action] = ["drop_after", "pass", "reset", "pass", "drop_before", "pass", "drop_after", "pass"]


def test_measurement_with_mixed_faults() -> None:
    """A small run of the docs' measurement (a fixed fault order), all three client modes."""
    figures = {}
    runs: list[tuple[Profile, dict[str, Any]]] = [
        ("proposed", {"supports_idempotency_keys": True}), ("current", {}),
        ("current", {"retry_ambiguous": True})]
    for profile, config in runs:
        with serve_in_background(FakeSettings(profile=profile, poll_wait_s=0.02)) as url:
            job = open_job(url)
            with FaultProxy(url, script=MIXED, match=_posts) as proxy:
                out = measure(url, job, proxy, ("step", "save"), 6, **config)
        figures[(profile, bool(config.get("retry_ambiguous")))] = out
    for key, out in figures.items():
        for name, tally in out.items():
            assert tally.unflagged == tally.phantom == 0, (key, name, tally)
    assert all(t.duplicates == 0 and t.executions == t.succeeded == 6
               for t in figures[("proposed", False)].values())
    assert all(t.duplicates == 0 for t in figures[("current", False)].values())
    assert sum(t.ambiguous for t in figures[("current", False)].values()) > 0
    assert sum(t.duplicates for t in figures[("current", True)].values()) > 0


def _exchange(url: str) -> Any:
    return requests.post(f"{url}/_fake/reset", timeout=2)


@pytest.mark.parametrize("action,error", [("drop_before", requests.ConnectionError),
                                          ("drop_after", requests.ConnectionError),
                                          ("reset", requests.RequestException),
                                          ("delay", requests.ReadTimeout)])
def test_proxy_actions(action: str, error: type[Exception]) -> None:
    with serve_in_background(FakeSettings()) as url, \
            FaultProxy(url, script=[action], delay_s=0.5) as proxy:  # type: ignore[list-item]
        with pytest.raises(error):
            requests.post(f"{proxy.url}/_fake/reset", timeout=(2, 0.25))
        assert _exchange(proxy.url).status_code == 200  # the script is spent: pass
        assert proxy.wait_idle(5)
        stats = proxy.stats()
    assert stats[action] == 1 and stats["pass"] == 1 and stats["in_flight"] == 0


def test_proxy_fronts_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy("http://example.com:80")
    with pytest.raises(ValueError):
        FaultProxy("http://127.0.0.1:1", rate=2.0)


def test_proxy_refuses_what_it_cannot_carry() -> None:
    with serve_in_background(FakeSettings()) as url, FaultProxy(url) as proxy:
        port = proxy.url.rsplit(":", 1)[1]
        with socket.create_connection(("127.0.0.1", int(port)), timeout=5) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            assert sock.recv(10) == b""  # closed, nothing forwarded
        assert proxy.wait_idle(5) and proxy.stats()["error"] == 1
