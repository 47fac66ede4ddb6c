"""Retry policy, typed errors, create-job safety, deadlines and auth, over real loopback HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from client_loopback import FAST, Reply, Seen, loopback, sequence
from virtual_clock import Clock

from client.calls.session import HttpSettings, connection_never_established, parse_retry_after
from client.config import ClientConfig
from client.errors import (
    ChunkGroupConflict,
    ChunkGroupMissingChunks,
    CortexConnectionError,
    CortexHTTPError,
    DeadlineExceeded,
)
from client.rest import CortexRestClient
from contract.errors import REQUEST_ID_HEADER, error_body

OK_JOB = {"job_id": "j1", "status": "running", "created_at": "t", "updated_at": "t"}


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _rest(url: str, sleeps: Sleeps | None = None, **cfg: Any) -> CortexRestClient:
    settings = {**FAST, "retries": 3, **cfg}
    return CortexRestClient(ClientConfig(base_url=url, database="DB", schema="SC", **settings),
                            sleep=sleeps if sleeps is not None else Sleeps())


def test_429_with_retry_after_then_200() -> None:
    sleeps = Sleeps()
    script = sequence(Reply(429, error_body("rate_limited", "slow down"), {"Retry-After": "0"}),
                      Reply(200, OK_JOB))
    with loopback(script) as srv:
        assert _rest(srv.url, sleeps).get_job("j1")["job_id"] == "j1"
        assert len(srv.seen) == 2
        assert srv.seen[0].path == "/api/v2/databases/DB/schemas/SC/cortex-training/j1"
    assert sleeps == [0.0]


def test_retry_after_is_bounded_by_the_backoff_cap() -> None:
    sleeps = Sleeps()
    script = sequence(Reply(503, error_body("unavailable", "busy"), {"Retry-After": "120"}),
                      Reply(200, OK_JOB))
    with loopback(script) as srv:
        _rest(srv.url, sleeps, backoff_cap_s=0.01).get_job("j1")
    assert sleeps == [0.01]


@pytest.mark.parametrize("status", [404, 409, 429, 500, 502, 503, 504])
def test_transient_statuses_are_retried_then_surface(status: int) -> None:
    sleeps = Sleeps()
    with loopback(lambda s: Reply(status, {"message": "nope"},
                                  {REQUEST_ID_HEADER: "sf-123"})) as srv:
        with pytest.raises(CortexHTTPError) as info:
            _rest(srv.url, sleeps, retries=3).get_job("j1")
        assert len(srv.seen) == 4  # first try + three retries
    assert len(sleeps) == 3
    err = info.value
    assert (err.status, err.route, err.snowflake_request_id) == (status, "get_job", "sf-123")
    text = str(err)
    assert f"status={status}" in text and "route=get_job" in text
    assert "x-snowflake-request-id=sf-123" in text and "GET http://127.0.0.1" in text


def test_ten_retries_by_default() -> None:
    with loopback(lambda s: Reply(503, {})) as srv:
        with pytest.raises(CortexHTTPError):
            CortexRestClient(ClientConfig(base_url=srv.url, **FAST), sleep=Sleeps()).get_job("j")
        assert len(srv.seen) == 11


@pytest.mark.parametrize("status", [400, 401, 405, 413, 415, 501])
def test_other_statuses_are_not_retried(status: int) -> None:
    with loopback(lambda s: Reply(status, error_body("invalid_argument", "bad"))) as srv:
        with pytest.raises(CortexHTTPError, match="code=invalid_argument"):
            _rest(srv.url).get_job("j1")
        assert len(srv.seen) == 1


@pytest.mark.parametrize(("code", "cls"), [
    ("chunk_group_conflict", ChunkGroupConflict),
    ("chunk_group_missing_chunks", ChunkGroupMissingChunks),
    ("job_not_running", CortexHTTPError),
    ("job_conflict", CortexHTTPError),
])
def test_final_409_codes_are_not_retried(code: str, cls: type[Exception]) -> None:
    with loopback(lambda s: Reply(409, error_body(code, "no"))) as srv:
        with pytest.raises(cls) as info:
            _rest(srv.url).cancel_job("j1")
        assert len(srv.seen) == 1
    assert isinstance(info.value, CortexHTTPError) and info.value.code == code


def test_code_is_found_inside_a_gateway_wrapped_string() -> None:
    wrapped = {"message": json.dumps({"code": "chunk_group_missing_chunks", "message": "gap"})}
    with loopback(lambda s: Reply(409, wrapped)) as srv:
        with pytest.raises(ChunkGroupMissingChunks) as info:
            _rest(srv.url).step("j1")
        assert len(srv.seen) == 1
    assert info.value.code == "chunk_group_missing_chunks"


def test_validation_detail_becomes_the_message() -> None:
    body = {"detail": [{"loc": ["body", "checkpoint_id"], "msg": "field required", "type": "missing"}]}
    with loopback(lambda s: Reply(400, body)) as srv, pytest.raises(
            CortexHTTPError, match="body.checkpoint_id: field required"):
        _rest(srv.url).load("j1", "x")


def test_create_job_is_not_retried_on_an_http_error() -> None:
    with loopback(lambda s: Reply(503, error_body("unavailable", "busy"))) as srv:
        with pytest.raises(CortexHTTPError, match="status=503"):
            _rest(srv.url).create_job({"sub_job_configs": []})
        assert len(srv.seen) == 1


def test_create_job_is_not_retried_after_a_read_timeout() -> None:
    with loopback(lambda s: Reply(200, {"job_id": "j1"}, delay_s=0.6)) as srv:
        with pytest.raises(CortexConnectionError, match="outcome unknown"):
            _rest(srv.url, read_timeout_s=0.2).create_job({"sub_job_configs": []})
        assert len(srv.seen) == 1


def test_create_job_is_not_retried_after_a_reset() -> None:
    with loopback(lambda s: Reply(drop=True)) as srv:
        with pytest.raises(CortexConnectionError, match="outcome unknown"):
            _rest(srv.url).create_job({"sub_job_configs": []})
        assert len(srv.seen) == 1


def test_create_job_is_retried_when_the_connection_was_refused() -> None:
    with loopback(lambda s: Reply(200, {"job_id": "j1"}), listen=False) as srv:
        def start_listening(_: float) -> None:
            srv.listen()

        rest = _rest(srv.url, sleeps=start_listening)  # type: ignore[arg-type]
        assert rest.create_job({"sub_job_configs": []}) == {"job_id": "j1"}
        assert len(srv.seen) == 1


def test_refused_connection_is_provably_not_established() -> None:
    import requests

    with loopback(lambda s: Reply(), listen=False) as srv, pytest.raises(
            requests.ConnectionError) as info:
        requests.get(srv.url, timeout=1)
    assert connection_never_established(info.value)
    assert not connection_never_established(requests.ReadTimeout("read"))
    assert not connection_never_established(requests.ConnectionError("reset by peer"))


def test_read_timeout_and_reset_are_retried_for_other_routes() -> None:
    state = {"n": 0}

    def script(seen: Seen) -> Reply:
        state["n"] += 1
        if state["n"] == 1:
            return Reply(200, OK_JOB, delay_s=0.6)
        if state["n"] == 2:
            return Reply(drop=True)
        return Reply(200, OK_JOB)

    with loopback(script) as srv:
        assert _rest(srv.url, read_timeout_s=0.2).get_job("j1")["status"] == "running"
        assert len(srv.seen) == 3


def test_per_call_deadline_bounds_retries() -> None:
    clock = Clock()
    with loopback(lambda s: Reply(503, error_body("unavailable", "busy"),
                                  {REQUEST_ID_HEADER: "sf-9"})) as srv:
        rest = CortexRestClient(ClientConfig(base_url=srv.url, retries=1000, backoff_first_s=4,
                                             backoff_factor=2, backoff_cap_s=10, backoff_jitter=0,
                                             call_timeout_s=30),
                                sleep=clock.sleep, clock=clock)
        with pytest.raises(DeadlineExceeded) as info:
            rest.get_capacity()
    # Virtual time (each try still has seconds of real budget): of the 1000 allowed
    # retries, the 30 s call deadline leaves three waits; a fourth would pass it.
    assert clock.sleeps == [4.0, 8.0, 10.0]
    assert len(srv.seen) == 4
    assert info.value.route == "get_capacity"
    assert "x-snowflake-request-id=sf-9" in str(info.value)


def test_pat_headers_with_host_addressing() -> None:
    with loopback(lambda s: Reply(200, {})) as srv:
        CortexRestClient(ClientConfig(host=srv.url, pat="tok", **FAST)).get_capacity()
        CortexRestClient(ClientConfig(base_url=srv.url, **FAST)).get_capacity()
        with_pat, without = srv.seen
    assert with_pat.headers["authorization"] == "Bearer tok"
    assert with_pat.headers["x-snowflake-authorization-token-type"] == "PROGRAMMATIC_ACCESS_TOKEN"
    assert "authorization" not in without.headers


def test_a_netrc_entry_for_the_host_does_not_replace_the_pat(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """requests would send the netrc login as Basic auth over the session's bearer header."""
    with loopback(lambda s: Reply(200, {})) as srv:
        netrc = tmp_path / "netrc"
        netrc.write_text("machine 127.0.0.1 login someone password secret\n")
        netrc.chmod(0o600)
        monkeypatch.setenv("NETRC", str(netrc))
        CortexRestClient(ClientConfig(host=srv.url, pat="tok", **FAST)).get_capacity()
        (seen,) = srv.seen
    assert seen.headers["authorization"] == "Bearer tok"


def test_bodies_and_content_types() -> None:
    with loopback(lambda s: Reply(200, {"request_id": "r", "job_id": "j"})) as srv:
        rest = _rest(srv.url)
        rest.step("j")
        rest.step("j", 0.5)
        rest.save("j", checkpoint_type="weights-only")
        rest.operation("j", "tail-logs", {"max_lines": 2}, sub_job_type="sampling")
        rest.get_request("j", "r", cursor="c2", max_events=5)
        rest.list_jobs(status="running")
        rest.generate_stream("j", {"prompts": ["a"]})
    step, step_lr, save, op, poll, jobs, stream = srv.seen
    assert step.json() == {} and step.headers["content-type"] == "application/json"
    assert step_lr.json() == {"learning_rate": 0.5}
    assert save.json() == {"checkpoint_type": "weights-only"}
    assert op.json() == {"operation_type": "tail-logs", "payload": {"max_lines": 2},
                         "sub_job_type": "sampling"}
    assert poll.path.endswith("/j/requests/r") and poll.query == {"cursor": ["c2"], "max_events": ["5"]}
    assert jobs.query == {"status": ["running"]}
    assert stream.headers["content-type"] == "application/octet-stream"
    assert json.loads(stream.body) == {"prompts": ["a"]}


def test_retry_after_parsing() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("garbage") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


def test_the_session_settings_carry_every_config_knob() -> None:
    """The settings are read off the config by field name: each knob arrives unchanged."""
    cfg = ClientConfig(base_url="http://h", pat="tok", connect_timeout_s=1.5, read_timeout_s=2.5,
                       call_timeout_s=3.5, ca_bundle="/ca.pem", retry_ambiguous=True,
                       supports_idempotency_keys=False, max_answer_bytes=4096, retries=3)
    settings = HttpSettings.from_config(cfg, "http://h", "/p")
    assert settings == HttpSettings(
        base="http://h", prefix="/p", pat="tok", retry=cfg.retry_policy(), connect_timeout_s=1.5,
        read_timeout_s=2.5, call_timeout_s=3.5, ca_bundle="/ca.pem", retry_ambiguous=True,
        idempotency_keys=False, max_answer_bytes=4096,
    )
    assert settings.retry.retries == 3

