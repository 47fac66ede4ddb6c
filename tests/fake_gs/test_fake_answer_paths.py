"""Every answer the fake gives on the contract's paths is built from the contract's models
and goes through the answer check: route answers, polls, errors in both dialects, the
router's own 404/405 and the last-resort 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.responses import Response
from starlette.testclient import TestClient

from contract import models as m
from contract.errors import ErrorCode, detail_entry, error_body, is_error_envelope
from contract.routes import prefix, route
from fake_gs import FakeSettings, create_app
from fake_gs.answers import check as answers
from fake_gs.answers import forms
from fake_gs.answers.delivery import chunk_event
from fake_gs.answers.refusals import envelope
from fake_gs.answers.render import dumps, render
from fake_gs.http import app as app_module
from fake_gs.http import dispatch, middleware
from fake_gs.http.app_state import AppState
from fake_gs.http.handlers import polling
from fake_gs.http.handlers.context import json_response

PREFIX = prefix("DB", "PUBLIC")


@pytest.fixture(params=["kit", "spec"])
def fake(request: pytest.FixtureRequest) -> Iterator[tuple[TestClient, AppState]]:
    app = create_app(FakeSettings(dialect=request.param))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, app.state.fake


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    m.ErrorEnvelope.model_validate(body, strict=True)
    assert is_error_envelope(body)
    return body


def test_the_routers_404_and_405_pass_the_check(fake: tuple[TestClient, AppState]) -> None:
    client, state = fake
    assert state.settings.validate_answers
    _error(client.get("/totally/elsewhere"), 404)
    refused = client.put(PREFIX + route("get_capacity").path)
    _error(refused, 405)
    assert refused.headers["allow"] == "GET, HEAD"
    assert state.store.internal_errors == 0


def test_an_invalid_router_answer_is_a_500_never_sent(fake: tuple[TestClient, AppState],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    client, state = fake

    def codeless(state: AppState, found: m.ErrorEnvelope, status: int, headers: Any = None) -> Response:
        return json_response({"message": found.message}, status, headers)

    monkeypatch.setattr(app_module, "error_answer", codeless)
    for sent in (client.get("/totally/elsewhere"), client.put(PREFIX + route("get_capacity").path)):
        body = _error(sent, 500)
        assert body["code"] == "internal" and "invalid answer" in body["message"]
    assert state.store.internal_errors == 2


def test_the_last_resort_500_is_checked_too(fake: tuple[TestClient, AppState],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    client, state = fake
    seen: list[tuple[Any, int]] = []

    async def crash(*args: Any) -> Response:
        raise RuntimeError("escaped the route wrapper")

    def spy(state: AppState, found_route: Any, response: Response, scope: Any) -> Response:
        seen.append((found_route, response.status_code))
        return dispatch.guarded(state, found_route, response, scope)

    monkeypatch.setattr(dispatch, "serve", crash)
    monkeypatch.setattr(middleware, "guarded", spy)
    body = _error(client.get(PREFIX + route("get_capacity").path), 500)
    assert body == {"code": "internal", "message": "internal error"}
    assert seen == [(None, 500)]


def _status(**tail: Any) -> m.RequestStatus:
    return m.RequestStatus(request_id="r", status="done", created_at="t", updated_at="t", **tail)


def test_the_poll_answer_is_the_request_status_model_with_its_result_spliced_in() -> None:
    result = {"global_steps": 1, "last_lr": 0.1}
    events = [chunk_event(b"abc"), chunk_event(b"de")]
    sent = polling.render(_status(error=None, next_cursor="c"), dumps(result), events)
    data = json.loads(sent)
    assert list(data) == list(m.RequestStatus.model_fields)  # the model's fields, in its order
    assert data == {**render(_status(error=None, next_cursor="c")), "result": result,
                    "events": [json.loads(e) for e in events]}
    assert sent == dumps(data)  # compact JSON, as every answer
    m.RequestStatus.model_validate(data, strict=True)
    # a field left unset (the poll-next-cursor-missing mutant) is absent, not null
    assert "next_cursor" not in json.loads(polling.render(_status(error=None), b"null", []))
    with pytest.raises(ValueError, match="no field"):
        answers.encode(_status(), {"results": [b"null"]})


def test_an_invalid_poll_answer_is_a_500_never_sent() -> None:
    from test_fake_answers import _call

    state = AppState.build(FakeSettings())
    bad_event = [b'{"type":"result_chunk","payload_b64":"YQ=="}']  # its sha256 missing
    answer = Response(polling.render(_status(error=None, next_cursor=None), b"null", bad_event),
                      media_type="application/json")
    sent = _call(state, "get_request", answer)
    assert sent.status_code == 500 and "RequestStatus" in json.loads(bytes(sent.body))["message"]
    state.store.close()


def test_error_answers_are_built_from_the_contracts_error_models() -> None:
    detail = [detail_entry(["x"], "missing", "missing")]
    kit = envelope(ErrorCode.VALIDATION_FAILED, "bad", detail)
    assert isinstance(kit, m.ErrorEnvelope)
    assert render(kit) == error_body(ErrorCode.VALIDATION_FAILED, "bad", detail)
    assert render(envelope(ErrorCode.JOB_NOT_FOUND, "gone")) == error_body(ErrorCode.JOB_NOT_FOUND, "gone")
    listed, status = forms.error(kit, 400)
    assert isinstance(listed, m.DetailListError) and status == 400
    assert render(listed) == {"detail": [{"loc": ["body", "x"], "msg": "missing", "type": "missing"}]}
    coded, _ = forms.error(envelope(ErrorCode.JOB_NOT_FOUND, "gone"), 404)
    assert isinstance(coded, m.MessageCodeError) and list(render(coded)) == ["message", "code"]
    restart, _ = forms.error(envelope(ErrorCode.CHUNK_GROUP_RESTART_REQUIRED, "again"), 409)
    assert render(restart) == {"message": "again", "code": "chunk_group_restart_required"}
    for form in (kit, listed, coded, restart):  # every form is an answer the check accepts
        m.ErrorEnvelope.model_validate(render(form), strict=True)
