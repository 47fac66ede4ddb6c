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
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from client.calls.backoff import Backoff
from client.errors import (
    DeadlineExceeded,
    JobFailed,
    PollTimeout,
    ProtocolError,
    RequestCancelled,
    RequestFailed,
    ResultTooLarge,
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


class Timing(TypedDict, total=False):
    """Injected time for a wait (tests pass a virtual clock and sleep)."""

    sleep: Callable[[float], None]
    clock: Callable[[], float]


@dataclass
class Turn:
    """What one poll page means to the loop: values to hand out, then stop, go on at once
    (the page brought progress and more is ready: no back-off, back-off restarts), or
    back off and poll again."""

    values: tuple[Any, ...] = ()
    done: bool = False
    progress: bool = False
    #: Raised once ``values`` are handed out (a stream's last events precede its failure).
    error: Exception | None = None


def poll(
    fetch: Callable[[float], Mapping[str, Any]],
    judge: Callable[[Mapping[str, Any]], Turn],
    *,
    late: Callable[[], str],
    context: dict[str, Any],
    policy: PollPolicy,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Any]:
    """The client's one poll loop: fetch a page, let ``judge`` read it (it raises typed
    failures), hand out its values, and back off while nothing moves. Running past
    ``policy.timeout_s`` is a ``PollTimeout`` (message ``late()``) named by ``context``."""
    backoff = Backoff.for_polls(policy, sleep=sleep, clock=clock)
    deadline = clock() + policy.timeout_s
    attempt = 0
    while True:
        turn = judge(_within(late(), context, fetch, deadline))
        yield from turn.values
        if turn.error is not None:
            raise turn.error
        if turn.done:
            return
        if turn.progress:
            attempt = 0
            continue
        if not backoff.pause(attempt, deadline):
            raise PollTimeout(late(), **context)
        attempt += 1


def _first(values: Iterator[Any]) -> Any:
    for value in values:
        return value
    raise AssertionError("a poll ended without a value")  # pragma: no cover - judge bug


class _Budget:
    """What one request's pages may bring: result-chunk bytes and pages that brought some
    (``PollPolicy.max_result_bytes`` / ``max_result_pages``); past either, ResultTooLarge."""

    def __init__(self, policy: PollPolicy, context: dict[str, Any]) -> None:
        self.policy, self.context = policy, context
        self.bytes = self.pages = 0

    def spend(self, nbytes: int) -> None:
        self.pages += 1
        self.bytes += nbytes
        if self.bytes > self.policy.max_result_bytes:
            raise ResultTooLarge(f"the result's chunks passed {self.policy.max_result_bytes} bytes "
                                 f"(max_result_bytes) in {self.pages} pages; stopped reading", **self.context)
        if self.pages > self.policy.max_result_pages:
            raise ResultTooLarge(f"the result took more than {self.policy.max_result_pages} pages "
                                 "(max_result_pages); stopped reading", **self.context)


class _RequestWatch:
    """Reads request-status pages: collects checked result chunks, follows the cursor."""

    def __init__(self, fetch: PageFetcher, context: dict[str, Any], policy: PollPolicy) -> None:
        self.page_fetcher, self.context, self.timeout_s = fetch, context, policy.timeout_s
        self.status = str(RequestState.PENDING)
        self.cursor: str | None = None
        self.chunks: list[Mapping[str, Any]] = []
        self.budget = _Budget(policy, context)

    def fetch(self, deadline: float) -> Mapping[str, Any]:
        return self.page_fetcher(self.cursor, deadline)

    def late(self) -> str:
        return f"request still {self.status} after {self.timeout_s:g} s"

    def judge(self, page: Mapping[str, Any]) -> Turn:
        self.status = normalize_request_state(page.get("status"))
        events = page.get("events") or []
        chunks = [e for e in events if isinstance(e, Mapping) and e.get("type") == RESULT_CHUNK]
        if chunks:
            self.budget.spend(sum(len(str(e.get("payload_b64", ""))) for e in chunks))
        for event in chunks:
            check_chunk_event(event, route=self.context["route"], request_id=self.context["request_id"])
            self.chunks.append(event)
        if page.get("next_cursor"):
            self.cursor = str(page["next_cursor"])
            if events:
                return Turn(progress=True)  # more pages of a ready result
        if self.status == RequestState.DONE:
            return Turn((self._decode(page.get("result")),), done=True)
        ended = _ending(page, self.status, "request", self.context)
        if ended is not None:
            raise ended
        if self.status not in REQUEST_IN_FLIGHT:
            raise ProtocolError(f"unknown request status {page.get('status')!r}", **self.context)
        return Turn()

    def _decode(self, result: Any) -> Any:
        try:
            return decode_result(result, self.chunks)
        except ProtocolError:
            raise
        except Exception as exc:  # the codec's WireError and friends
            raise ProtocolError(f"cannot decode result: {exc}", **self.context) from exc


def _ending(page: Mapping[str, Any], status: str, what: str,
            context: dict[str, Any]) -> Exception | None:
    """The typed failure of a failed or cancelled request (or stream), else None."""
    error = page.get("error")
    if status == RequestState.FAILED:
        return RequestFailed(f"{what} failed: {_describe(error)}", error=error,
                             code=_code_of(error), **context)
    if status == RequestState.CANCELLED:
        return RequestCancelled(f"{what} was cancelled", error=error, **context)
    return None


def wait_request(
    fetch: PageFetcher,
    *,
    route: str,
    job_id: str,
    request_id: str,
    policy: PollPolicy,
    **timing: Unpack[Timing],
) -> Any:
    """Poll until terminal; return the decoded result or raise a typed failure."""
    context = {"route": route, "job_id": job_id, "request_id": request_id}
    watch = _RequestWatch(fetch, context, policy)
    return _first(poll(watch.fetch, watch.judge, late=watch.late, context=context,
                       policy=policy, **timing))


def iter_stream_events(
    fetch: PageFetcher,
    *,
    route: str,
    job_id: str,
    request_id: str,
    policy: PollPolicy,
    **timing: Unpack[Timing],
) -> Iterator[dict[str, Any]]:
    """Drain generate-stream events (each returned once) until the ``done`` event."""
    context: dict[str, Any] = {"route": route, "job_id": job_id, "request_id": request_id}
    seen = {"status": str(RequestState.PENDING)}
    budget = _Budget(policy, context)

    def judge(page: Mapping[str, Any]) -> Turn:
        events = [dict(e) for e in page.get("events") or [] if isinstance(e, Mapping)]
        if events:
            budget.spend(0)  # a stream hands its events on: only its pages are counted
        for at, event in enumerate(events):
            if event.get("type") == "done":
                return Turn(tuple(events[:at + 1]), done=True)
        seen["status"] = status = normalize_request_state(page.get("status"))
        return Turn(tuple(events), done=status == RequestState.DONE and not events,
                    progress=bool(events), error=_ending(page, status, "stream", context))

    return poll(lambda deadline: fetch(None, deadline), judge,
                late=lambda: f"stream still {seen['status']} after {policy.timeout_s:g} s",
                context=context, policy=policy, **timing)


def wait_job_running(
    get_job: Callable[[float], Mapping[str, Any]],
    *,
    job_id: str,
    policy: PollPolicy,
    **timing: Unpack[Timing],
) -> dict[str, Any]:
    """Poll the job until ``running``; a terminal state raises ``JobFailed`` with its reason."""
    context: dict[str, Any] = {"route": "get_job", "job_id": job_id}
    seen = {"state": str(JobState.PENDING)}

    def judge(page: Mapping[str, Any]) -> Turn:
        job = dict(page)
        seen["state"] = state = normalize_job_state(job.get("status"))
        if state == JobState.RUNNING:
            return Turn((job,), done=True)
        if state in JOB_TERMINAL or state == JobState.CANCELLING:
            reason = str(job.get("reason") or "")
            raise JobFailed(
                f"job ended {state} before running" + (f": {reason}" if reason else ""),
                state=state, reason=reason, **context,
            )
        return Turn()

    return _first(poll(get_job, judge,
                       late=lambda: f"job still {seen['state']} after {policy.timeout_s:g} s",
                       context=context, policy=policy, **timing))


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
