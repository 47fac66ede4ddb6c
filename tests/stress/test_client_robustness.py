"""The client under the fake's faults: deadlines bound everything (Retry-After waits and
multi-chunk uploads included), and every failure is a typed error naming the route, the
status, the code and the x-snowflake-request-id."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from stress_helpers import Admin, job_body, rest_client

from client.errors import (
    AmbiguousOutcome,
    CortexError,
    DeadlineExceeded,
    ProtocolError,
    RequestFailed,
)
from client.rest import CortexRestClient
from contract.errors import REQUEST_ID_HEADER
from fake_gs import FakeServer, start_in_background


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with start_in_background(log_level="critical") as server:
        yield server


@pytest.fixture
def admin(fake: FakeServer) -> Iterator[Admin]:
    a = Admin(fake.base_url)
    yield a
    a.set_faults([])


@pytest.fixture(scope="module")
def job(fake: FakeServer) -> str:
    client = rest_client(fake.base_url)
    job_id = str(client.create_job(job_body(11))["job_id"])
    client.wait_running(job_id)
    return job_id


def test_retry_after_beyond_the_deadline_fails_at_once(fake: FakeServer, admin: Admin) -> None:
    """A Retry-After longer than what is left of the deadline is not slept through."""
    admin.set_faults([{"route": "get_capacity", "status": 503, "retry_after": 30}])
    slept: list[float] = []
    client = CortexRestClient(rest_client(fake.base_url, backoff_cap_s=60.0, call_timeout_s=1.0).config,
                              sleep=slept.append)
    with pytest.raises(DeadlineExceeded) as info:
        client.get_capacity()
    assert sum(slept) < 1.0, f"slept {slept} inside a 1 s deadline"
    err = info.value
    assert (err.route, err.status, err.code) == ("get_capacity", 503, "unavailable")
    assert err.snowflake_request_id and err.snowflake_request_id in str(err)


def test_retry_after_is_waited_for_up_to_the_cap(fake: FakeServer, admin: Admin) -> None:
    admin.set_faults([{"route": "get_capacity", "status": 429, "retry_after": 0.3, "times": 1}])
    slept: list[float] = []
    client = CortexRestClient(rest_client(fake.base_url, backoff_cap_s=0.2).config, sleep=slept.append)
    assert "max_total_gpus" in client.get_capacity()
    assert slept == [0.2]  # Retry-After 0.3 s, bounded by the 0.2 s back-off cap


def test_one_deadline_bounds_a_whole_chunked_upload(fake: FakeServer, admin: Admin, job: str) -> None:
    """Every chunk is slow: the upload as a whole gives up at call_timeout_s."""
    admin.set_faults([{"route": "forward_backward", "delay_s": 0.3}])
    client = rest_client(fake.base_url, call_timeout_s=1.0, read_timeout_s=5.0)
    import torch

    payload = {"args": [], "kwargs": {"input_ids": torch.arange(8000).reshape(1, 8000) % 100}}
    with pytest.raises(CortexError) as info:
        client.forward_backward(job, payload, max_chunk_bytes=8192 + 8192)  # 8 chunks of 8 KiB
    assert info.value.route == "forward_backward"
    # Each chunk takes 0.3 s on the server: within 1 s at most four are sent, never all 8
    # (per-chunk deadlines would send every one).
    seen = admin.faults()[0].get("seen", 0)
    assert 1 <= seen < 8, f"{seen} chunks sent past a 1 s deadline for the whole upload"


def test_exhausted_budget_names_route_status_code_and_request_id(fake: FakeServer, admin: Admin, job: str) -> None:
    admin.set_faults([{"route": "step", "status": 502, "code": "bad_gateway"}])
    # A 502 may follow execution: the step is resent only with its idempotency key, and a
    # budget exhausted after it is an AmbiguousOutcome that still names all four.
    client = rest_client(fake.base_url, retries=2, supports_idempotency_keys=True)
    with pytest.raises(AmbiguousOutcome) as info:
        client.step(job)
    err = info.value
    assert (err.route, err.status, err.code) == ("step", 502, "bad_gateway")
    assert err.snowflake_request_id
    for part in ("route=step", "status=502", "code=bad_gateway", f"x-snowflake-request-id={err.snowflake_request_id}"):
        assert part in str(err)
    assert admin.faults()[0]["fired"] == 3  # the first try and two retries


def test_dropped_connections_surface_as_typed_errors(fake: FakeServer, admin: Admin, job: str) -> None:
    admin.set_faults([{"route": "get_job", "drop": True}])
    client = rest_client(fake.base_url, retries=1)
    with pytest.raises(CortexError) as info:
        client.get_job(job)
    assert info.value.route == "get_job" and "get_job" in str(info.value)


# --- answers the fake never gives: a scripted transport ---------------------------------------


class Scripted(requests.adapters.BaseAdapter):
    """Answers every request from ``reply(request) -> (status, body bytes, content type)``."""

    def __init__(self, reply: Callable[[requests.PreparedRequest], tuple[int, bytes, str]]) -> None:
        super().__init__()
        self.reply = reply

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        status, body, ctype = self.reply(request)
        resp = requests.Response()
        resp.status_code, resp.raw, resp.url, resp.request = status, io.BytesIO(body), str(request.url), request
        resp.headers["Content-Type"] = ctype
        resp.headers[REQUEST_ID_HEADER] = "sf-req-42"
        return resp

    def close(self) -> None:
        pass


def scripted_client(reply: Callable[[requests.PreparedRequest], tuple[int, bytes, str]]) -> CortexRestClient:
    session = requests.Session()
    session.mount("http://", Scripted(reply))
    return CortexRestClient(rest_client("http://scripted.invalid").config, session=session)


def test_a_2xx_that_is_not_json_is_a_protocol_error() -> None:
    client = scripted_client(lambda r: (200, b"<html>gateway says hi</html>", "text/html"))
    with pytest.raises(ProtocolError) as info:
        client.get_capacity()
    err = info.value
    assert (err.route, err.status, err.snowflake_request_id) == ("get_capacity", 200, "sf-req-42")


def test_a_json_answer_that_is_not_an_object_is_a_protocol_error() -> None:
    client = scripted_client(lambda r: (200, b"[1, 2, 3]", "application/json"))
    with pytest.raises(ProtocolError) as info:
        client.get_job("j")
    assert info.value.route == "get_job" and info.value.snowflake_request_id == "sf-req-42"


def test_a_failed_request_quotes_the_poll_that_reported_it() -> None:
    failed: dict[str, Any] = {"request_id": "r1", "status": "failed", "created_at": "t", "updated_at": "t", "result": None,
              "error": {"code": "invalid_argument", "message": "bad batch"}, "events": [], "next_cursor": None}
    client = scripted_client(lambda r: (200, json.dumps(failed).encode(), "application/json"))
    with pytest.raises(RequestFailed) as info:
        client.wait("j", "r1", route_name="forward_backward")
    err = info.value
    assert (err.route, err.code, err.request_id, err.job_id) == ("forward_backward", "invalid_argument", "r1", "j")
    assert err.snowflake_request_id == "sf-req-42" and "x-snowflake-request-id=sf-req-42" in str(err)
