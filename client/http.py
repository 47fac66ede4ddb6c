"""One HTTP session with the contract's retry policy, deadlines and typed errors.

Retried: connection errors, time-outs and the policy's transient statuses, except answers
whose error code says retrying cannot help (chunk-group codes, ``job_not_running``,
``job_conflict``, a missing checkpoint). Create-job is retried only when the connection
was provably never established, so an ambiguous failure never creates a second job.
``Retry-After`` is honoured, bounded by the back-off cap; the per-call deadline bounds
everything, sleeps included.

At most once (``contract.idempotency``): a failure that may follow execution (a read
time-out, a cut after sending, 500/502/504, 503 without ``Retry-After``) of a call that is
not idempotent is resent only when the server honours ``Idempotency-Key`` (declared, or
learnt from its echo) or ``retry_ambiguous`` asks for the reference behaviour; otherwise
it raises :class:`AmbiguousOutcome`. Every data-plane POST carries one key for all its tries.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from client.backoff import Backoff
from client.errors import (
    AmbiguousOutcome,
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
from contract.errors import (
    NON_RETRYABLE_CODES,
    REQUEST_ID_HEADER,
    ErrorCode,
    error_code_of,
    find_error_code,
)
from contract.idempotency import (
    CLIENT_MUTANT_KEY_DROPPED,
    DATA_PLANE_ROUTES,
    IDEMPOTENCY_KEY_HEADER,
    Idempotency,
    call_idempotency,
)
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
    #: A CA bundle path to verify TLS with; None leaves requests' default (which honours
    #: $REQUESTS_CA_BUNDLE). Passed per request: requests lets that variable win over
    #: ``session.verify``, never over a per-request value.
    ca_bundle: str | None = None
    #: Resend unsafe calls after ambiguous failures, without keys (the reference client).
    retry_ambiguous: bool = False
    #: Does the server honour ``Idempotency-Key``? None: learn it from the key's echo.
    idempotency_keys: bool | None = None
    #: A client mutant (``contract.idempotency``): for the conformance self-test only.
    mutant: str | None = None


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
    # Integer codes and bare detail lists (spec §3.6) still name a code in the error.
    code = code or error_code_of(body)
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


#: What to look at, per route (or operation), before calling again after AmbiguousOutcome.
_HOW_TO_CHECK: dict[str, str] = {
    "step": "the next step's global_steps: one more than expected means this step ran",
    "save": "list_checkpoints: a checkpoint newer than the last known one means the save ran",
    "load": "the next step's global_steps: it restarts from the checkpoint's if the load ran",
    "weight-sync": "the sampling sub-job's weight version (get_job or the next generate)",
    "generate": "nothing to repair: generate changes no model state; a new call only costs compute",
    "generate_stream": "nothing to repair: generate-stream changes no model state",
    "log_probs": "nothing to repair: log-probs changes no model state",
    "forward": "nothing to repair: forward changes no model state",
}


def how_to_check(route_name: str, operation_type: str | None = None) -> str:
    """How a caller finds out whether an ambiguous call ran (AmbiguousOutcome.how_to_check)."""
    key = operation_type if route_name == "operation" and operation_type else route_name
    return _HOW_TO_CHECK.get(key, "the job's state (get_job, list_checkpoints) before calling again")


@dataclass
class _Call:
    """One logical call across its tries: where it goes, its key, what was seen so far."""

    route: Route
    url: str
    deadline: float
    kind: Idempotency
    operation_type: str | None = None
    key: str | None = None
    attempt: int = 0
    #: A try failed in a way that may have followed execution (unsafe calls only).
    ambiguous: bool = False
    last_failure: CortexError | None = None


def _encode(route: Route, json_body: Any, data: bytes | None) -> tuple[bytes | None, dict[str, str]]:
    """The body bytes and content type a call sends."""
    headers: dict[str, str] = {}
    if route.content_type is not None and (json_body is not None or data is not None):
        headers["Content-Type"] = route.content_type
    payload = data
    if json_body is not None:
        payload = json.dumps(json_body).encode()
    elif route.body == "json":
        payload = b"{}"
        headers["Content-Type"] = JSON
    return payload, headers


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
        #: Unsafe calls are resent after ambiguous failures (with their key) once True.
        self.keys_supported = settings.idempotency_keys is True
        self.session.headers.update({"Accept": JSON})
        if settings.pat:
            self.session.headers.update(
                auth_headers(settings.pat)
            )

    def close(self) -> None:
        self.session.close()

    @property
    def _verify(self) -> dict[str, Any]:
        return {"verify": self.settings.ca_bundle} if self.settings.ca_bundle else {}

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
        idempotency: Idempotency | None = None,
        operation_type: str | None = None,
    ) -> Answer:
        """Send ``route`` (retrying per policy) and return its parsed answer.

        ``deadline`` is an absolute ``clock()`` time; the call's own deadline
        (``call_timeout_s``) applies too, whichever comes first. ``idempotency`` overrides
        the route's (a chunk upload is a ``group`` call); an unsafe call is resent after an
        ambiguous failure only with an idempotency key the server honours (or when
        ``retry_ambiguous`` restores the reference client's behaviour).
        """
        own = self.clock() + self.settings.call_timeout_s
        call = _Call(
            route=route, url=self.url_for(route, **dict(path_params or {})),
            deadline=own if deadline is None else min(deadline, own),
            kind=idempotency or call_idempotency(route.name, operation_type=operation_type),
            operation_type=operation_type,
        )
        payload, headers = _encode(route, json_body, data)
        if route.method == "POST" and route.name in DATA_PLANE_ROUTES:
            call.key = str(uuid.uuid4())
        params = {k: v for k, v in (query or {}).items() if v is not None}
        while True:
            outcome, retry_after = self._attempt(call, payload, headers, params)
            if isinstance(outcome, Answer):
                return outcome
            call.last_failure = outcome
            self._wait_before_resend(call, outcome, retry_after)
            call.attempt += 1

    def _attempt(self, call: _Call, payload: bytes | None, headers: dict[str, str],
                 params: dict[str, Any]) -> tuple[Answer | CortexError, float | None]:
        """One try: the answer, or the failure to resend after (raises when not resent)."""
        route, method = call.route, call.route.method
        remaining = call.deadline - self.clock()
        if remaining <= 0:
            raise self._out_of_time(call, None, f"deadline passed before {route.name} could be sent")
        timeout = (min(self.settings.connect_timeout_s, remaining),
                   min(self.settings.read_timeout_s, remaining))
        sent = dict(headers)
        if call.key and not (call.attempt and self.settings.mutant == CLIENT_MUTANT_KEY_DROPPED):
            sent[IDEMPOTENCY_KEY_HEADER] = call.key
        try:
            response = self.session.request(method, call.url, data=payload, params=params or None,
                                            headers=sent, timeout=timeout, **self._verify)
        except requests.RequestException as exc:
            return self._resend_after_exception(call, exc), None
        self._learn_key_support(call, response)
        if response.status_code < 400:
            return self._answer(route, method, call.url, response), None
        failure = error_from_response(route, method, call.url, response)
        self._resend_after_status(call, failure, response)
        return failure, parse_retry_after(response.headers.get("Retry-After"))

    def _resend_after_exception(self, call: _Call, exc: requests.RequestException) -> CortexError:
        """The failure, if a connection failure may be resent; raise the typed error otherwise."""
        route, method = call.route, call.route.method
        failure = CortexConnectionError(f"{type(exc).__name__}: {exc}", route=route.name,
                                        method=method, url=call.url)
        if not isinstance(exc, (requests.ConnectionError, requests.Timeout,
                                requests.exceptions.ChunkedEncodingError)):
            raise failure from exc
        never_ran = connection_never_established(exc)
        if route.name == "create_job" and not never_ran:
            raise CortexConnectionError(
                f"create-job outcome unknown ({type(exc).__name__}: {exc}); not retried "
                "so no second job is created; list jobs before trying again",
                route=route.name, method=method, url=call.url,
            ) from exc
        self._judge(call, failure, never_ran=never_ran, retryable=True, cause=exc)
        return failure

    def _resend_after_status(self, call: _Call, failure: CortexHTTPError,
                             response: requests.Response) -> None:
        """Return if an error answer may be resent; raise it (or AmbiguousOutcome) otherwise."""
        status = response.status_code
        policy = self.settings.retry
        retryable = (status in policy.statuses and failure.code not in NON_RETRYABLE_CODES
                     and call.route.name != "create_job")
        # A 4xx is the server refusing the call; a 503 with Retry-After asks to come back
        # later; a 501 names a call the server does not have. Any other 5xx (a crash, a
        # gateway losing the backend) may follow execution.
        never_ran = (status < 500 or status == 501
                     or (status == 503 and bool(response.headers.get("Retry-After"))))
        self._judge(call, failure, never_ran=never_ran, retryable=retryable, cause=None)

    def _judge(self, call: _Call, failure: CortexError, *, never_ran: bool, retryable: bool,
               cause: BaseException | None) -> None:
        """Raise unless the failed try may be sent again (policy, budget, at-most-once)."""
        # create-job keeps its own rule (never resent once it may have landed; CLIENT-RETRY-2).
        if not never_ran and call.kind == "unsafe" and call.route.name != "create_job":
            call.ambiguous = True
            if not (self.keys_supported and call.key) and not self.settings.retry_ambiguous:
                raise self._ambiguous(call, failure, "not resent: a resend could run it twice") \
                    from (cause or failure)
        if not retryable or call.attempt >= self.settings.retry.retries:
            if call.ambiguous:
                raise self._ambiguous(call, failure, "resends ran out") from (cause or failure)
            raise failure from cause

    def _wait_before_resend(self, call: _Call, failure: CortexError,
                            retry_after: float | None) -> None:
        backoff = Backoff.for_retries(self.settings.retry, sleep=self.sleep, clock=self.clock,
                                      rng=self.rng)
        if not backoff.pause(call.attempt, call.deadline, hint=retry_after):
            raise self._out_of_time(call, failure,
                                    f"deadline passed while retrying after: {failure.message}")

    def _out_of_time(self, call: _Call, failure: CortexError | None, message: str) -> CortexError:
        failure = failure or call.last_failure
        if failure is not None and call.ambiguous:
            return self._ambiguous(call, failure, "the deadline passed before an answer")
        route = call.route
        error = DeadlineExceeded(
            message, route=route.name, method=route.method, url=call.url,
            status=failure.status if failure else None, code=failure.code if failure else None,
            snowflake_request_id=failure.snowflake_request_id if failure else None,
        )
        error.__cause__ = failure
        return error

    def _ambiguous(self, call: _Call, failure: CortexError, why: str) -> AmbiguousOutcome:
        name = call.route.name if call.operation_type is None else f"{call.route.name} {call.operation_type}"
        return AmbiguousOutcome(
            f"{name} may have run on the server ({failure.message}); {why}",
            attempt=call.attempt + 1, how_to_check=how_to_check(call.route.name, call.operation_type),
            idempotency_key=call.key, route=call.route.name, method=call.route.method, url=call.url,
            status=failure.status, code=failure.code,
            snowflake_request_id=failure.snowflake_request_id,
        )

    def _learn_key_support(self, call: _Call, response: requests.Response) -> None:
        """A server that echoes the key honours keys (decided: learnt once per session)."""
        if (call.key and self.settings.idempotency_keys is None
                and response.headers.get(IDEMPOTENCY_KEY_HEADER) == call.key):
            self.keys_supported = True

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
