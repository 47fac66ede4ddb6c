"""At most once on the client side, over real loopback HTTP: which failures are resent,
AmbiguousOutcome's content, idempotency keys (sent, kept across resends, learnt)."""

from __future__ import annotations

from typing import Any

import pytest
from client_loopback import FAST, Reply, Seen, loopback, sequence

from client.calls.session import how_to_check
from client.config import ClientConfig
from client.errors import AmbiguousOutcome, CortexHTTPError
from client.rest import CortexRestClient
from contract.errors import REQUEST_ID_HEADER, error_body
from contract.idempotency import IDEMPOTENCY_KEY_HEADER

KEY = IDEMPOTENCY_KEY_HEADER.lower()
SUBMIT = {"request_id": "r1", "job_id": "j1"}


def _rest(url: str, **cfg: Any) -> CortexRestClient:
    return CortexRestClient(ClientConfig(base_url=url, **{**FAST, "retries": 3, **cfg}),
                            sleep=lambda s: None)


@pytest.mark.parametrize("status,headers", [(500, {}), (502, {}), (504, {}), (503, {})])
def test_ambiguous_statuses_are_not_resent(status: int, headers: dict[str, str]) -> None:
    reply = Reply(status, error_body("internal", "boom"), {REQUEST_ID_HEADER: "sf-7", **headers})
    with loopback(lambda s: reply) as srv:
        with pytest.raises(AmbiguousOutcome) as info:
            _rest(srv.url).step("j1")
        assert len(srv.seen) == 1
    err = info.value
    assert (err.route, err.attempt, err.status, err.snowflake_request_id) == ("step", 1, status, "sf-7")
    assert err.idempotency_key == srv.seen[0].headers[KEY]
    text = str(err)
    assert "x-snowflake-request-id=sf-7" in text and "attempt 1" in text
    assert how_to_check("step") in text and "global_steps" in text


def test_read_timeout_and_cut_answers_are_not_resent() -> None:
    with loopback(lambda s: Reply(200, SUBMIT, delay_s=0.6)) as srv:
        with pytest.raises(AmbiguousOutcome, match="route=save"):
            _rest(srv.url, read_timeout_s=0.2).save("j1")
        assert len(srv.seen) == 1
    with loopback(lambda s: Reply(drop=True)) as srv:
        with pytest.raises(AmbiguousOutcome, match="weight-sync"):
            _rest(srv.url).operation("j1", "weight-sync", {})
        assert len(srv.seen) == 1


def test_failures_that_prove_nothing_ran_are_resent() -> None:
    script = sequence(Reply(429, error_body("rate_limited", "slow"), {"Retry-After": "0"}),
                      Reply(503, error_body("unavailable", "busy"), {"Retry-After": "0"}),
                      Reply(200, SUBMIT))
    with loopback(script) as srv:
        assert _rest(srv.url).step("j1") == SUBMIT
        assert len(srv.seen) == 3
    keys = {s.headers[KEY] for s in srv.seen}
    assert len(keys) == 1  # one call, one key, across its tries


def test_reads_and_idempotent_operations_are_resent_after_a_502() -> None:
    script = sequence(Reply(502, error_body("bad_gateway", "lb")), Reply(200, {"entries": []}))
    with loopback(script) as srv:
        assert _rest(srv.url).operation("j1", "tail-logs", {}) == {"entries": []}
        assert len(srv.seen) == 2


def test_chunk_uploads_are_resent_with_the_same_chunk() -> None:
    script = sequence(Reply(drop=True), Reply(200, SUBMIT))
    with loopback(script) as srv:
        assert _rest(srv.url).forward_backward("j1", {"x": 1})["request_id"] == "r1"
        assert len(srv.seen) == 2 and srv.seen[0].body == srv.seen[1].body


def test_keys_are_sent_on_data_plane_posts_only() -> None:
    with loopback(lambda s: Reply(200, SUBMIT)) as srv:
        rest = _rest(srv.url)
        rest.step("j1")
        rest.step("j1")
        rest.get_job("j1")
        rest.cancel_job("j1")
        rest.create_job({"sub_job_configs": []})
    step1, step2, get, cancel, create = srv.seen
    assert step1.headers[KEY] and step2.headers[KEY] and step1.headers[KEY] != step2.headers[KEY]
    assert all(KEY not in s.headers for s in (get, cancel, create))


def test_declared_key_support_resends_with_the_same_key() -> None:
    script = sequence(Reply(drop=True), Reply(502, error_body("bad_gateway", "lb")), Reply(200, SUBMIT))
    with loopback(script) as srv:
        assert _rest(srv.url, supports_idempotency_keys=True).step("j1") == SUBMIT
        assert len(srv.seen) == 3
        assert len({s.headers[KEY] for s in srv.seen}) == 1


def test_key_support_is_learnt_from_the_echo() -> None:
    state = {"n": 0}

    def echo(seen: Seen) -> Reply:
        state["n"] += 1
        if state["n"] == 2:
            return Reply(drop=True)
        return Reply(200, SUBMIT, {IDEMPOTENCY_KEY_HEADER: seen.headers.get(KEY, "")})

    with loopback(echo) as srv:
        rest = _rest(srv.url)
        assert not rest.http.keys_supported
        rest.step("j1")
        assert rest.http.keys_supported
        assert rest.step("j1") == SUBMIT  # cut once, resent with its key
        assert srv.seen[1].headers[KEY] == srv.seen[2].headers[KEY]


def test_declared_unsupported_is_not_overridden_by_an_echo() -> None:
    def echo(seen: Seen) -> Reply:
        return Reply(200, SUBMIT, {IDEMPOTENCY_KEY_HEADER: seen.headers.get(KEY, "")})

    with loopback(echo) as srv:
        rest = _rest(srv.url, supports_idempotency_keys=False)
        rest.step("j1")
        assert not rest.http.keys_supported


def test_retry_ambiguous_restores_the_reference_behaviour() -> None:
    script = sequence(Reply(drop=True), Reply(500, error_body("internal", "x")), Reply(200, SUBMIT))
    with loopback(script) as srv:
        assert _rest(srv.url, retry_ambiguous=True).step("j1") == SUBMIT
        assert len(srv.seen) == 3


def test_resends_running_out_after_an_ambiguous_try_is_ambiguous() -> None:
    script = sequence(Reply(drop=True), Reply(429, error_body("rate_limited", "x"), {"Retry-After": "0"}))
    with loopback(script) as srv:
        with pytest.raises(AmbiguousOutcome) as info:
            _rest(srv.url, supports_idempotency_keys=True, retries=2).step("j1")
        assert len(srv.seen) == 3
    assert info.value.attempt == 3 and info.value.status == 429


def test_a_final_refusal_is_not_ambiguous() -> None:
    with loopback(lambda s: Reply(409, error_body("idempotency_conflict", "other body"))) as srv:
        with pytest.raises(CortexHTTPError) as info:
            _rest(srv.url).step("j1")
        assert len(srv.seen) == 1
    assert not isinstance(info.value, AmbiguousOutcome)
    assert info.value.code == "idempotency_conflict"
