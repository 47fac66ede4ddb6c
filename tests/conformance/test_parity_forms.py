"""Parity counts the forms the spec allows as equivalences: a recording replayed against a
fake in the any dialect diverges nowhere, while the same differences against the kit's own
fake (which promises its forms) still are divergences."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from conformance.parity.cli import replay_tape
from conformance.parity.compare import compare
from contract.forms import FORMS

TOKEN = "tok-parity-forms-3d9e"


def _answer(status: int, body: object = None, **headers: str) -> dict[str, object]:
    out: dict[str, object] = {"status": status, "headers": {"content-type": "application/json", **headers}}
    if body is not None:
        out["body"] = {"json": body}
    return out


#: form -> (recorded, new): one difference each row allows.
PAIRS = {
    "request-state-spelling": (_answer(200, {"status": "done"}), _answer(200, {"status": "completed"})),
    "validation-422": (_answer(400, {"detail": [{"loc": ["x"], "msg": "bad", "type": "t"}]}),
                       _answer(422, {"detail": [{"loc": ["x"], "msg": "bad", "type": "t"}]})),
    "error-forms": (_answer(404, {"code": "job_not_found", "message": "no"}), _answer(404, {"message": "no", "code": 404})),
    "unknown-fields": (_answer(200, {"jobs": []}), _answer(200, {"jobs": [], "etag": "W/1"})),
    "poll-empty-fields": (_answer(200, {"error": None, "next_cursor": None}), _answer(200, {"error": "", "next_cursor": ""})),
    "capacity-capped": (_answer(200, {"max_total_gpus": 8, "in_use_gpus": 0, "available_gpus": 8}),
                        _answer(200, {"max_total_gpus": 8, "in_use_gpus": 0, "available_gpus": 3})),
    "last-lr-list": (_answer(200, {"result": {"last_lr": 0.1}}), _answer(200, {"result": {"last_lr": [0.1]}})),
    "delete-answer": (_answer(200, {}), {"status": 204, "headers": {}}),
    "request-id-header": (_answer(200, {}, **{"x-snowflake-request-id": "r"}), _answer(200, {})),
}


@pytest.mark.parametrize("form", sorted(PAIRS))
def test_an_allowed_form_is_an_equivalence_unless_the_target_promises_the_kits(form: str) -> None:
    recorded, new = PAIRS[form]
    found = compare(recorded, new, {})
    assert found and all(d.accepted for d in found), [d.describe() for d in found]
    assert any(form in (d.accepted or "") and f"§{FORMS[form].section}" in (d.accepted or "") for d in found)
    strict = compare(recorded, new, {}, forms=frozenset())
    assert any(d.accepted is None for d in strict)


def test_capacity_over_its_free_gpus_is_still_a_divergence() -> None:
    """A capped available_gpus is allowed on either side; one above max_total_gpus -
    in_use_gpus is not a form the spec allows."""
    def cap(available: int) -> dict[str, object]:
        return _answer(200, {"max_total_gpus": 8, "in_use_gpus": 2, "available_gpus": available})

    assert all(d.accepted for d in compare(cap(6), cap(1), {}) + compare(cap(1), cap(6), {}))
    assert [d.accepted for d in compare(cap(6), cap(7), {})] == [None]


def test_a_declared_field_appearing_is_still_a_divergence() -> None:
    """Unknown fields are allowed; a field the contract declares (a non-final chunk's
    request_id) turning up is a real difference."""
    found = compare(_answer(202, {"chunk_idx": 0}), _answer(202, {"chunk_idx": 0, "request_id": "r"}), {})
    assert [d.accepted for d in found] == [None]


def _control_plane(base: str) -> None:
    """A job's control-plane life, and two refusals, through plain HTTP (no polls, whose
    timing a replay cannot repeat)."""
    import requests

    from conformance.inputs.valid_bodies import small_job
    from contract.auth import auth_headers
    from contract.routes import prefix

    url, headers = base + prefix("PARITY_DB", "PUBLIC"), auth_headers(TOKEN)
    with requests.Session() as s:
        s.headers.update(headers)
        job = s.post(url + "/", json=small_job("Qwen/Qwen3-0.6B"), timeout=30).json()["job_id"]
        for _ in range(4):
            s.get(f"{url}/{job}", timeout=30)
            s.get(url + "/", timeout=30)
            s.get(url + "/capacity", timeout=30)
        s.post(url + "/", json={"sub_job_configs": []}, timeout=30)
        s.delete(f"{url}/{job}/checkpoints/gs-missing", timeout=30)
        s.post(f"{url}/{job}:cancel", timeout=30)
        s.post(f"{url}/{job}:cancel", timeout=30)


def test_a_control_plane_run_replays_clean_against_the_any_dialect(tmp_path: Path) -> None:
    """Calls recorded by the kit-dialect fake (``fake-gs --record``), replayed against
    another fake in the any dialect as a URL: every difference is an allowed form."""
    from fake_gs import FakeSettings, serve_in_background

    tape = tmp_path / "control.gsrec"
    with serve_in_background(FakeSettings(port=0, tokens=(TOKEN,), record=str(tape), log_level="warning")) as base:
        _control_plane(base)
    settings = FakeSettings(port=0, tokens=(TOKEN,), dialect="any", seed=4, log_level="warning")
    with serve_in_background(settings) as url:
        ns = argparse.Namespace(url=url, token=TOKEN, token2=None, database=None, schema=None, endpoint=None,
                                mutant=None, engine=None, status_style=None, delivery=None,
                                poll_timeout=30.0, timeout=60.0)
        rep = replay_tape(str(tape), ns)
    assert rep.ok, [d.describe() for r in rep.divergent for d in r.divergences if d.accepted is None]
    assert sum(1 for r in rep.results for d in r.divergences if d.accepted) > 0  # the forms did differ
