"""One HTTP session with the contract's retry policy, deadlines and typed errors.

Retried: connection errors, time-outs and the policy's transient statuses, except answers
whose error code says retrying cannot help (chunk-group codes, ``job_not_running``,
``job_conflict``, a missing checkpoint). Create-job is retried only when the connection
was provably never established, so an ambiguous failure never creates a second job.
``Retry-After`` is honoured, bounded by the back-off cap; the per-call deadline bounds
everything, sleeps included.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from client.errors import (
    ChunkGroupConflict,
    ChunkGroupMissingChunks,
    ChunkGroupRestartRequired,
    CortexConnectionError,
    CortexError,
    CortexHTTPError,
    DeadlineExceeded,
    InvalidArgument,
    ProtocolError,
)
from contract.auth import auth_headers
from contract.errors import NON_RETRYABLE_CODES, REQUEST_ID_HEADER, ErrorCode, find_error_code
from contract.limits import MAX_ANSWER_BYTES, RetryPolicy
from contract.routes import JSON, Route

_ERROR_CLASSES: dict[str, type[CortexHTTPError]] = {
    ErrorCode.CHUNK_GROUP_RESTART_REQUIRED: ChunkGroupRestartRequired,
    ErrorCode.CHUNK_GROUP_CONFLICT: ChunkGroupConflict,
    ErrorCode.CHUNK_GROUP_MISSING_CHUNKS: ChunkGroupMissingChunks,
}



@dataclass
class HttpSettings:
    """What a session needs; built from ``ClientConfig`` by the REST client."""

    base: str
    prefix: str
    pat: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 300.0
    call_timeout_s: float = 900.0


@dataclass
class Answer:
    """A successful answer: parsed JSON (``{}`` when empty) plus the request id header."""

    status: int
    body: Any
    snowflake_request_id: str | None


def connection_never_established(exc: BaseException) -> bool:
    """True only when the request provably never reached the server.

    A connect time-out or a refused/unresolvable connection qualifies; a read time-out or
    a reset after the request was sent does not (the server may have acted on it).
    """
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    if not isinstance(exc, requests.exceptions.ConnectionError):
        return False
    seen: set[int] = set()
    stack: list[Any] = [exc]
    while stack:
        item = stack.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, (NewConnectionError, ConnectTimeoutError)):
            return True
        if isinstance(item, BaseException):
            stack.extend(item.args)
            stack.append(item.__cause__)
            stack.append(item.__context__)
            stack.append(getattr(item, "reason", None))
    return False


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _error_message(body: Any, text: str) -> str:
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
        detail = body.get("detail")
        if isinstance(detail, list) and detail:
            parts = []
            for item in detail:
                if isinstance(item, Mapping):
                    loc = ".".join(str(p) for p in item.get("loc", []))
                    parts.append(f"{loc}: {item.get('msg')}" if loc else str(item.get("msg")))
            if parts:
                return "; ".join(parts)
        if isinstance(detail, str) and detail:
            return detail
    return text[:500] or "no error body"


def error_from_response(route: Route, method: str, url: str, response: requests.Response) -> CortexHTTPError:
    """Build the typed error for a non-2xx answer (code searched in nested/wrapped JSON)."""
    text = response.text or ""
    try:
        body: Any = response.json()
    except (ValueError, RecursionError):  # a deeply nested answer is text, not a crash
        body = text
    code = find_error_code(body)
    cls = _ERROR_CLASSES.get(code or "", CortexHTTPError)
    return cls(
        _error_message(body, text),
        body=body,
        route=route.name,
        method=method,
        url=url,
        status=response.status_code,
        code=code,
        snowflake_request_id=response.headers.get(REQUEST_ID_HEADER),
    )


class HttpSession:
    """Sends one route call with retries; raises typed errors; never retries blindly."""

    def __init__(
        self,
        settings: HttpSettings,
        *,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.session = session or requests.Session()
        self.sleep = sleep
        self.clock = clock
        self.rng = rng or random.Random()
        self.session.headers.update({"Accept": JSON})
        if settings.pat:
            self.session.headers.update(
                auth_headers(settings.pat)
            )

    def close(self) -> None:
        self.session.close()

    def url_for(self, route: Route, **path_params: str) -> str:
        try:
            return self.settings.base + self.settings.prefix + route.render(**path_params)
        except ValueError as exc:
            raise InvalidArgument(str(exc), route=route.name, method=route.method) from None

    def call(
        self,
        route: Route,
        *,
        path_params: Mapping[str, str] | None = None,
        json_body: Any = None,
        data: bytes | None = None,
        query: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> Answer:
        """Send ``route`` (retrying per policy) and return its parsed answer.

        ``deadline`` is an absolute ``clock()`` time; the call's own deadline
        (``call_timeout_s``) applies too, whichever comes first.
        """
        url = self.url_for(route, **dict(path_params or {}))
        method = route.method
        own = self.clock() + self.settings.call_timeout_s
        deadline = own if deadline is None else min(deadline, own)
        headers: dict[str, str] = {}
        if route.content_type is not None and (json_body is not None or data is not None):
            headers["Content-Type"] = route.content_type
        payload = data
        if json_body is not None:
            payload = json.dumps(json_body).encode()
        elif route.body == "json":
            payload = b"{}"
            headers["Content-Type"] = JSON
        params = {k: v for k, v in (query or {}).items() if v is not None}
        create = route.name == "create_job"
        policy = self.settings.retry
        attempt = 0
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise DeadlineExceeded(
                    f"deadline passed before {route.name} could be sent",
                    route=route.name, method=method, url=url,
                )
            timeout = (min(self.settings.connect_timeout_s, remaining),
                       min(self.settings.read_timeout_s, remaining))
            retry_after: float | None = None
            try:
                response = self.session.request(
                    method, url, data=payload, params=params or None, headers=headers,
                    timeout=timeout,
                )
            except requests.RequestException as exc:
                failure: CortexError = CortexConnectionError(
                    f"{type(exc).__name__}: {exc}", route=route.name, method=method, url=url
                )
                retryable = isinstance(exc, (requests.ConnectionError, requests.Timeout,
                                             requests.exceptions.ChunkedEncodingError))
                if create and not connection_never_established(exc):
                    retryable = False
                    failure = CortexConnectionError(
                        f"create-job outcome unknown ({type(exc).__name__}: {exc}); not retried "
                        "so no second job is created; list jobs before trying again",
                        route=route.name, method=method, url=url,
                    )
                if not retryable or attempt >= policy.retries:
                    raise failure from exc
            else:
                if response.status_code < 400:
                    return self._answer(route, method, url, response)
                failure = error_from_response(route, method, url, response)
                retryable = (
                    response.status_code in policy.statuses
                    and failure.code not in NON_RETRYABLE_CODES
                    and not create
                )
                if not retryable or attempt >= policy.retries:
                    raise failure
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
            delay = self._backoff(attempt, retry_after)
            if self.clock() + delay >= deadline:
                raise DeadlineExceeded(
                    f"deadline passed while retrying after: {failure.message}",
                    route=route.name, method=method, url=url, status=failure.status,
                    code=failure.code, snowflake_request_id=failure.snowflake_request_id,
                ) from failure
            self.sleep(delay)
            attempt += 1

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        policy = self.settings.retry
        if retry_after is not None:
            return min(retry_after, policy.backoff_cap_s)
        base = policy.delay(attempt)
        jittered = base * (1 + self.rng.uniform(-policy.jitter, policy.jitter))
        return max(0.0, min(jittered, policy.backoff_cap_s))

    @staticmethod
    def _answer(route: Route, method: str, url: str, response: requests.Response) -> Answer:
        """Every service route answers JSON: anything else (a proxy's HTML page, a cut-off
        body) is a ProtocolError naming the route, status and request id, never a bare
        ValueError from deep inside the caller."""
        body: Any = {}
        if len(response.content) > MAX_ANSWER_BYTES:
            raise ProtocolError(
                f"{route.name} answered {len(response.content)} bytes, over the client's "
                f"{MAX_ANSWER_BYTES}-byte bound for one answer",
                route=route.name, method=method, url=url, status=response.status_code,
                snowflake_request_id=response.headers.get(REQUEST_ID_HEADER),
            )
        if response.content:
            try:
                body = response.json()
            except (ValueError, RecursionError):  # RecursionError: a deeply nested answer
                raise ProtocolError(
                    f"{route.name} answered {response.status_code} with a body that is not JSON: "
                    f"{response.text[:200]!r}",
                    route=route.name, method=method, url=url, status=response.status_code,
                    snowflake_request_id=response.headers.get(REQUEST_ID_HEADER),
                ) from None
        return Answer(response.status_code, body, response.headers.get(REQUEST_ID_HEADER))
