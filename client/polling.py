"""Waiting on asynchronous requests and jobs, and decoding what they deliver.

Polls back off per ``PollPolicy``; draining result-chunk pages by cursor does not (the
result is ready, only its pages remain). Each chunk's sha256 is checked before the frame
is reassembled. The DSSST1 codec (torch) is imported only when a frame actually arrives,
so JSON-only paths such as step/save stay light.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from client.errors import (
    DeadlineExceeded,
    JobFailed,
    PollTimeout,
    ProtocolError,
    RequestCancelled,
    RequestFailed,
)
from contract.limits import PollPolicy
from contract.states import (
    JOB_TERMINAL,
    REQUEST_IN_FLIGHT,
    JobState,
    RequestState,
    normalize_job_state,
    normalize_request_state,
)

RESULT_CHUNK = "result_chunk"

#: Fetches one poll page: (cursor, deadline) -> request status object.
PageFetcher = Callable[[str | None, float], Mapping[str, Any]]


def is_inline_frame(result: Any) -> bool:
    """An inline base64 DSSST1 result (the codec's check needs no torch)."""
    from contract import wire

    return wire.is_inline_frame(result)


def check_chunk_event(event: Mapping[str, Any], *, route: str, request_id: str) -> None:
    """Refuse a result chunk whose bytes do not match its ``payload_sha256``."""
    try:
        raw = base64.b64decode(str(event.get("payload_b64", "")), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"result chunk is not valid base64: {exc}", route=route,
                            request_id=request_id) from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != str(event.get("payload_sha256", "")).lower():
        raise ProtocolError(
            f"result chunk sha256 mismatch: got {digest}, announced {event.get('payload_sha256')!r}",
            route=route, request_id=request_id,
        )


def decode_result(result: Any, chunk_events: list[Mapping[str, Any]]) -> Any:
    """Turn a terminal request's delivery (chunks, inline frame or JSON) into an object."""
    if chunk_events:
        from contract import wire

        return wire.loads(wire.decode_result_chunk_events([dict(e) for e in chunk_events]))
    if result is None:
        return {}
    if is_inline_frame(result):
        from contract import wire

        return wire.loads(wire.decode_inline(dict(result)))
    return result


def wait_request(
    fetch: PageFetcher,
    *,
    route: str,
    job_id: str,
    request_id: str,
    policy: PollPolicy,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """Poll until terminal; return the decoded result or raise a typed failure."""
    deadline = clock() + policy.timeout_s
    cursor: str | None = None
    chunks: list[Mapping[str, Any]] = []
    attempt = 0
    context: dict[str, Any] = {"route": route, "job_id": job_id, "request_id": request_id}
    status = str(RequestState.PENDING)
    while True:
        late = f"request still {status} after {policy.timeout_s:g} s"
        page = _within(late, context, fetch, cursor, deadline)
        status = normalize_request_state(page.get("status"))
        events = page.get("events") or []
        for event in events:
            if isinstance(event, Mapping) and event.get("type") == RESULT_CHUNK:
                check_chunk_event(event, route=route, request_id=request_id)
                chunks.append(event)
        next_cursor = page.get("next_cursor")
        if next_cursor:
            cursor = str(next_cursor)
            if events:
                continue  # more pages of a ready result: fetch at once, no back-off
        if status == RequestState.DONE:
            try:
                return decode_result(page.get("result"), chunks)
            except Exception as exc:  # the codec's WireError and friends
                if isinstance(exc, ProtocolError):
                    raise
                raise ProtocolError(f"cannot decode result: {exc}", **context) from exc
        if status == RequestState.FAILED:
            raise RequestFailed(f"request failed: {_describe(page.get('error'))}",
                                error=page.get("error"), code=_code_of(page.get("error")), **context)
        if status == RequestState.CANCELLED:
            raise RequestCancelled("request was cancelled", error=page.get("error"), **context)
        if status not in REQUEST_IN_FLIGHT:
            raise ProtocolError(f"unknown request status {page.get('status')!r}", **context)
        delay = policy.delay(attempt)
        attempt += 1
        if clock() + delay > deadline:
            raise PollTimeout(
                f"request still {status} after {policy.timeout_s:g} s", **context
            )
        sleep(delay)


def iter_stream_events(
    fetch: PageFetcher,
    *,
    route: str,
    job_id: str,
    request_id: str,
    policy: PollPolicy,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[dict[str, Any]]:
    """Drain generate-stream events (each returned once) until the ``done`` event."""
    deadline = clock() + policy.timeout_s
    attempt = 0
    context: dict[str, Any] = {"route": route, "job_id": job_id, "request_id": request_id}
    status = str(RequestState.PENDING)
    while True:
        late = f"stream still {status} after {policy.timeout_s:g} s"
        page = _within(late, context, fetch, None, deadline)
        events = [dict(e) for e in page.get("events") or [] if isinstance(e, Mapping)]
        for event in events:
            yield event
            if event.get("type") == "done":
                return
        status = normalize_request_state(page.get("status"))
        if status == RequestState.FAILED:
            raise RequestFailed(f"stream failed: {_describe(page.get('error'))}",
                                error=page.get("error"), **context)
        if status == RequestState.CANCELLED:
            raise RequestCancelled("stream was cancelled", **context)
        if status == RequestState.DONE and not events:
            return
        if events:
            attempt = 0
            continue
        delay = policy.delay(attempt)
        attempt += 1
        if clock() + delay > deadline:
            raise PollTimeout(f"stream still {status} after {policy.timeout_s:g} s", **context)
        sleep(delay)


def wait_job_running(
    get_job: Callable[[float], Mapping[str, Any]],
    *,
    job_id: str,
    policy: PollPolicy,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Poll the job until ``running``; a terminal state raises ``JobFailed`` with its reason."""
    deadline = clock() + policy.timeout_s
    attempt = 0
    state = str(JobState.PENDING)
    while True:
        late = f"job still {state} after {policy.timeout_s:g} s"
        job = dict(_within(late, {"route": "get_job", "job_id": job_id}, get_job, deadline))
        state = normalize_job_state(job.get("status"))
        if state == JobState.RUNNING:
            return job
        if state in JOB_TERMINAL or state == JobState.CANCELLING:
            reason = str(job.get("reason") or "")
            raise JobFailed(
                f"job ended {state} before running" + (f": {reason}" if reason else ""),
                state=state, reason=reason, route="get_job", job_id=job_id,
            )
        delay = policy.delay(attempt)
        attempt += 1
        if clock() + delay > deadline:
            raise PollTimeout(f"job still {state} after {policy.timeout_s:g} s",
                              route="get_job", job_id=job_id)
        sleep(delay)


def _within(
    late: str, context: dict[str, Any], poll: Callable[..., Any], *args: Any
) -> Any:
    """One poll; the poll deadline running out mid-call is the poll's timeout (message
    ``late``), named for the polled route, not a deadline of the poll route itself."""
    try:
        return poll(*args)
    except PollTimeout:
        raise
    except DeadlineExceeded as exc:
        raise PollTimeout(late, **context) from exc


def _describe(error: Any) -> str:
    if isinstance(error, Mapping):
        message = error.get("message") or error.get("msg")
        code = error.get("code")
        if message or code:
            return f"{code or '-'}: {message or ''}".strip()
    return str(error) if error else "no error detail"


def _code_of(error: Any) -> str | None:
    from contract.errors import find_error_code

    return find_error_code(error)
