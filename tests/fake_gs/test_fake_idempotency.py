"""The proposed Idempotency-Key on the fake: replay, conflict, per-account scope, window,
bound, concurrent repeats, refusals that free the key, and the current profile ignoring it."""

from __future__ import annotations

import threading
from typing import Any

from fake_gs_api import Api

from contract.idempotency import IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER
from fake_gs.clock import ManualClock


def _step(api: Api, job: str, key: str | None, body: Any = None) -> Any:
    headers = {IDEMPOTENCY_KEY_HEADER: key} if key is not None else {}
    return api.post(f"/{job}/step", json={} if body is None else body, headers=headers)


def _steps(api: Api) -> int:
    return int(api.state()["requests"]["by_op"].get("step", 0))


def test_repeat_replays_the_answer_and_runs_nothing(make_api) -> None:
    api = make_api()
    job = api.running_job()
    first, repeat = _step(api, job, "k"), _step(api, job, "k")
    assert first.status_code == repeat.status_code == 200
    assert first.json() == repeat.json()
    assert first.headers[IDEMPOTENCY_KEY_HEADER] == "k" and REPLAYED_HEADER.lower() not in first.headers
    assert repeat.headers[REPLAYED_HEADER] == "true"
    assert _steps(api) == 1
    assert api.state()["idempotency"]["replays"] == 1


def test_other_body_or_path_conflicts(make_api) -> None:
    api = make_api()
    job = api.running_job()
    _step(api, job, "k")
    other_body = _step(api, job, "k", {"learning_rate": 0.1})
    other_path = api.post(f"/{job}/save", json={}, headers={IDEMPOTENCY_KEY_HEADER: "k"})
    for answer in (other_body, other_path):
        assert answer.status_code == 409 and answer.json()["code"] == "idempotency_conflict"
    assert _steps(api) == 1 and "save" not in api.state()["requests"]["by_op"]


def test_keys_are_per_account(make_api) -> None:
    a = make_api(token="a", tokens=("a", "b"))
    b = Api(a.base_url, token="b")
    job_a, job_b = a.running_job(), b.running_job()
    first = _step(a, job_a, "k").json()
    assert _step(b, job_a, "k").status_code == 404  # a's key on a's job: not b's to replay
    theirs = _step(b, job_b, "k")
    assert theirs.status_code == 200 and theirs.json()["request_id"] != first["request_id"]


def test_refusals_free_the_key(make_api) -> None:
    api = make_api()
    job = api.running_job()
    assert _step(api, job, "k", {"learning_rate": "fast"}).status_code == 400
    assert _step(api, job, "k", {"learning_rate": 0.1}).status_code == 200
    assert _steps(api) == 1


def test_window_and_bound(make_api) -> None:
    clock = ManualClock()
    api = make_api(idempotency_window_s=0.2, max_idempotency_keys=2, clock=clock)
    job = api.running_job()
    first = _step(api, job, "k").json()
    clock.advance(0.15)
    assert _step(api, job, "k").json() == first  # within the window: the stored answer
    clock.advance(0.1)
    assert _step(api, job, "k").json() != first  # expired: a new call
    for key in ("x", "y", "z"):
        _step(api, job, key)
    assert api.state()["idempotency"]["keys"] <= 3
    assert _steps(api) == 5


def test_concurrent_repeats_run_once(make_api) -> None:
    api = make_api()
    job = api.running_job()
    api.call("PUT", "/_fake/faults", json={"rules": [{"route": "step", "delay_s": 0.3, "times": 1}]})
    answers: list[Any] = []
    threads = [threading.Thread(target=lambda: answers.append(_step(api, job, "k").json()))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(answers) == 3 and len({a["request_id"] for a in answers}) == 1
    assert _steps(api) == 1


def test_bad_keys_are_refused(make_api) -> None:
    api = make_api()
    job = api.running_job()
    for key in ("", "x" * 300):
        answer = _step(api, job, key)
        assert answer.status_code == 400 and answer.json()["code"] == "invalid_argument"
    assert _steps(api) == 0


def test_current_profile_ignores_the_header(make_api) -> None:
    api = make_api(profile="current")
    job = api.running_job()
    first, repeat = _step(api, job, "k"), _step(api, job, "k")
    assert first.json()["request_id"] != repeat.json()["request_id"]
    assert IDEMPOTENCY_KEY_HEADER.lower() not in first.headers
    assert _steps(api) == 2
