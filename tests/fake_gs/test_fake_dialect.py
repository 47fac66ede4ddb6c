"""``--dialect spec``: the fake answers in the other forms the published spec allows, and
the kit dialect (the default) is unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_gs_api import Api, sampling_config, training_config

from contract.errors import is_error_envelope
from contract.states import normalize_job_state
from fake_gs import FakeServer, start_in_background
from fake_gs.cli import build_parser, settings_from_args
from fake_gs.settings import FakeSettings

UNKNOWN_JOB = "/00000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def spec_server() -> Iterator[FakeServer]:
    with start_in_background(dialect="spec") as srv:
        yield srv


@pytest.fixture
def spec(spec_server: FakeServer) -> Api:
    return Api(spec_server.base_url)


def test_errors_take_the_spec_forms(spec: Api, api: Api) -> None:
    unknown = spec.get(UNKNOWN_JOB)
    assert unknown.status_code == 404 and unknown.json()["code"] == 404
    assert isinstance(unknown.json()["message"], str) and is_error_envelope(unknown.json())
    bad = spec.post("/", json={"sub_job_configs": [{"job_type": "nope", "model_name": "m"}]})
    assert bad.status_code == 400 and set(bad.json()) == {"detail"}
    assert all(d["loc"][0] == "body" for d in bad.json()["detail"]), bad.json()
    # the kit dialect keeps its string codes
    assert api.get(UNKNOWN_JOB).json()["code"] == "job_not_found"


def test_restart_required_keeps_its_string_code(spec: Api) -> None:
    import uuid

    from contract import wire

    job = spec.running_job()
    frame = wire.dumps({"args": [], "kwargs": {}}, metadata=wire.standard_request_metadata())
    chunks = wire.encode_byte_chunks(frame, "request", operation="forward-backward", max_bytes=8192 + 64,
                                     chunk_group_id=str(uuid.uuid4()), force_chunk=True)
    assert len(chunks) > 1
    r = spec.post(f"/{job}/forward-backward", data=chunks[1], headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 409 and r.json()["code"] == "chunk_group_restart_required"


def test_poll_capacity_step_and_save(spec: Api) -> None:
    job = spec.running_job()
    done = spec.wait(job, spec.submit_json(job, "step", {"learning_rate": 0.01}))
    assert done["error"] == "" and done["next_cursor"] == ""
    assert done["result"]["last_lr"] == [0.01]
    cap = spec.get("/capacity").json()
    assert all(v not in (0, False) for v in cap.values()), cap  # false / zero: omitted
    assert cap["in_use_gpus"] >= 2 and cap["available_gpus"] == cap["max_total_gpus"] - cap["in_use_gpus"]
    saved = spec.wait(job, spec.submit_json(job, "save", {"checkpoint_id": "mine"}))["result"]
    assert saved["checkpoint_id"] != "mine"
    listed = [c["checkpoint_id"] for c in spec.get(f"/{job}/checkpoints").json()["checkpoints"]]
    assert listed == [saved["checkpoint_id"]]
    gone = spec.call("DELETE", f"/{job}/checkpoints/{saved['checkpoint_id']}")
    assert gone.status_code == 204 and gone.content == b""


def test_a_failed_request_error_becomes_its_message() -> None:
    from fake_gs.answers import forms as dialect

    view = {"status": "failed", "error": {"code": "invalid_argument", "message": "bad ids"}, "next_cursor": None}
    assert dialect.poll(view) == {"status": "failed", "error": "bad ids", "next_cursor": ""}


def test_cancel_shows_cancelling_once(spec: Api) -> None:
    job = spec.running_job()
    assert spec.post(f"/{job}:cancel").status_code == 200
    assert spec.job(job)["status"] == "cancelling"
    assert spec.job(job)["status"] == "cancelled"
    assert spec.post(f"/{job}:cancel").status_code == 200  # idempotent


def test_tail_logs_while_placing_is_an_empty_page(make_server: Callable[..., FakeServer]) -> None:
    spec = Api(make_server(dialect="spec", startup="polls:8").base_url)
    job = spec.create_job(training_config(), sampling_config())
    while normalize_job_state(spec.job(job)["status"]) != "placing":
        pass
    body: dict[str, Any] = {"operation_type": "tail-logs", "payload": {"max_lines": 5}, "sub_job_type": "training"}
    page = spec.post(f"/{job}/operation", json=body).json()
    assert page == {"entries": [], "next_cursor": "L0", "eof": False}
    spec.wait_running(job)
    body["payload"]["cursor"] = page["next_cursor"]
    later = spec.post(f"/{job}/operation", json=body).json()
    assert later["entries"] and later["next_cursor"].startswith("L")


def test_tail_logs_takes_an_integer_cursor_as_the_payload_allows(spec: Api) -> None:
    """The payload's schema allows an integer cursor: judged like any other (a 400 when
    negative), never a 500 (schemathesis' stateful phase sent one)."""
    job = spec.running_job()
    body: dict[str, Any] = {"operation_type": "tail-logs", "payload": {"cursor": -3}, "sub_job_type": "training"}
    refused = spec.post(f"/{job}/operation", json=body)
    assert refused.status_code == 400, refused.text
    body["payload"]["cursor"] = 0
    page = spec.post(f"/{job}/operation", json=body)
    assert page.status_code == 200 and page.json()["next_cursor"].startswith("L"), page.text


def test_the_option_is_on_the_cli_and_checked() -> None:
    assert settings_from_args(build_parser().parse_args(["--dialect", "spec"])).dialect == "spec"
    assert FakeSettings().dialect == "kit"
    with pytest.raises(ValueError, match="dialect"):
        FakeSettings(dialect="other")  # type: ignore[arg-type]
