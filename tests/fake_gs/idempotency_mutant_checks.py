"""Liveness checks for the at-most-once mutants, merged into test_fake_mutants.CHECKS.

The client mutant (``client=True``) lives in the kit's client, not in the fake: its check
shows the fake running it still honours keys (the client side is proven by the
conformance self-test).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_gs_api import Api

from contract.idempotency import CLIENT_MUTANT_KEY_DROPPED, IDEMPOTENCY_KEY_HEADER


def _step(api: Api, job: str, key: str) -> Any:
    return api.post(f"/{job}/step", json={}, headers={IDEMPOTENCY_KEY_HEADER: key})


def repeats_execute(api: Api) -> None:
    job = api.running_job()
    first, repeat = _step(api, job, "k1"), _step(api, job, "k1")
    assert first.json()["request_id"] != repeat.json()["request_id"]
    assert api.state()["requests"]["by_op"]["step"] == 2


def crossed_answer(api: Api) -> None:
    job = api.running_job()
    first = _step(api, job, "k1").json()["request_id"]
    other = _step(api, job, "k2").json()["request_id"]
    assert _step(api, job, "k1").json()["request_id"] == other != first


def client_key_dropped(api: Api) -> None:
    job = api.running_job()
    assert _step(api, job, "k1").json() == _step(api, job, "k1").json()


IDEMPOTENCY_CHECKS: dict[str, tuple[Callable[[Api], None], dict[str, Any]]] = {
    "idempotency-repeats-execute": (repeats_execute, {}),
    "idempotency-crossed-answer": (crossed_answer, {}),
    CLIENT_MUTANT_KEY_DROPPED: (client_key_dropped, {}),
}
