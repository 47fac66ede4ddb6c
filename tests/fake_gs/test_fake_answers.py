"""The answer check (fake_gs.answers.check): on for every fake the tests build, and an answer that
does not validate against its contract model becomes a 500 that is never sent."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import Response

from contract import models as m
from contract import wire
from contract.routes import ROUTES, answer_model, route
from fake_gs import FakeSettings
from fake_gs.answers import check as answers
from fake_gs.http.app_state import AppState
from fake_gs.http.dispatch import make_endpoint
from fake_gs.http.handlers.context import Ctx, json_response

JOB = "00000000-0000-4000-8000-000000000001"


def test_every_fake_built_in_tests_checks_its_answers() -> None:
    assert answers.on_by_env()
    assert FakeSettings().validate_answers
    with pytest.raises(ValueError, match="validate_answers"):
        AppState.build(FakeSettings(validate_answers=False))


def test_every_route_and_operation_names_its_answer_model() -> None:
    for r in ROUTES:
        if r.name != "operation":
            assert answer_model(r) is not None, r.name
        if r.kind == "async":
            assert r.result_model is not None, r.name
    for op in m.OPERATION_TYPES:
        assert answer_model(route("operation"), op) is not None, op
    for op in m.ASYNC_OPERATIONS:
        assert m.OPERATION_ANSWERS[op] is m.SubmitResponse
        assert op in m.OPERATION_RESULTS


def _call(state: AppState, name: str, answer: Response) -> Response:
    """``answer`` sent through the fake's route wrapper for route ``name``."""
    async def handler(ctx: Ctx) -> Response:
        return answer

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    spec = route(name)
    scope = {"type": "http", "method": spec.method, "path": "/", "raw_path": b"/", "headers": [],
             "query_string": b"", "path_params": {"job_id": JOB, "request_id": "r"}}
    return asyncio.run(make_endpoint(state, spec, handler)(Request(scope, receive)))


@pytest.mark.parametrize(("name", "body", "status"), [
    ("step", {"request_id": "r"}, 200),                                  # job_id missing
    ("step", {"request_id": "r", "job_id": JOB, "surprise": 1}, 200),    # undeclared field
    ("get_capacity", {"has_reservation": "yes"}, 200),                    # wrong type
    ("forward_backward", {"chunk_idx": "0"}, 202),                       # a bad chunk ack
    ("get_job", {"message": "gone"}, 404),                               # an error without code
    ("get_job", ["not", "an", "object"], 409),
])
def test_an_invalid_answer_is_a_500_never_sent(name: str, body: Any, status: int) -> None:
    state = AppState.build(FakeSettings())
    sent = _call(state, name, json_response(body, status))
    assert sent.status_code == 500
    envelope = json.loads(bytes(sent.body))
    assert envelope["code"] == "internal" and "invalid answer" in envelope["message"]
    assert state.store.internal_errors == 1
    state.store.close()


def test_a_valid_answer_goes_out_unchanged() -> None:
    state = AppState.build(FakeSettings())
    answer = json_response({"request_id": "r", "job_id": JOB})
    assert _call(state, "step", answer) is answer
    assert state.store.internal_errors == 0
    state.store.close()


def _poll(result: Any) -> Response:
    return json_response({"request_id": "r", "status": "done", "created_at": "t", "updated_at": "t",
                          "result": result, "error": None, "events": [], "next_cursor": None})


def test_a_poll_result_is_checked_against_its_route_result_model() -> None:
    scope: dict[str, Any] = {}
    answers.expect(scope, **answers.polled_result("step", "json"))
    assert answers.problem(route("get_request"), _poll({"global_steps": 1, "last_lr": 0.1}), scope) is None
    found = answers.problem(route("get_request"), _poll({"global_steps": -1, "last_lr": 0.1}), scope)
    assert found is not None and "StepResult" in found


def test_an_inline_result_frame_is_decoded_and_checked() -> None:
    scope: dict[str, Any] = {}
    answers.expect(scope, **answers.polled_result("generate", "inline"))
    good = wire.inline_frame(wire.dumps({"job_id": JOB, "results": [{"text": "hi"}]}))
    bad = wire.inline_frame(wire.dumps({"results": [{"text": "hi"}]}))
    assert answers.problem(route("get_request"), _poll(good), scope) is None
    found = answers.problem(route("get_request"), _poll(bad), scope)
    assert found is not None and "GenerateResult" in found


def test_an_operation_answer_is_checked_by_its_type() -> None:
    scope: dict[str, Any] = {}
    answers.expect(scope, model=m.OPERATION_ANSWERS["reset-prefix-cache"])
    ok = json_response({"reset": True, "sub_job_id": "s"})
    assert answers.problem(route("operation"), ok, scope) is None
    assert answers.problem(route("operation"), json_response({"reset": True}), scope) is not None
    # an idempotent replay (no handler ran): any operation answer's shape, nothing else
    assert answers.problem(route("operation"), ok, {}) is None
    assert answers.problem(route("operation"), json_response({"odd": 1}), {}) is not None
