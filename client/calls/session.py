"""One HTTP session with the contract's retry policy, deadlines and typed errors.

Retried: connection errors, time-outs and the policy's transient statuses, except answers
whose error code says retrying cannot help (chunk-group codes, ``job_not_running``,
``job_conflict``, a missing checkpoint). Create-job is retried only when the connection
was provably never established, so an ambiguous failure never creates a second job.
``Retry-After`` is honoured, bounded by the back-off cap; the per-call deadline bounds
everything, sleeps included. Answers are read as they arrive, under ``max_answer_bytes``
(``client.calls.answer_reading``), and each try's whole answer, head and body, within its read timeout
(``client.calls.bounded_read``: a drip of one byte every 0.5 s cannot outlive ``call_timeout_s``).

At most once (``contract.idempotency``): a failure that may follow execution (a read
time-out, a cut after sending, 500/502/504, 503 without ``Retry-After``) of a call that is
not idempotent is resent only when the server honours ``Idempotency-Key`` (declared, or
learnt from its echo) or ``retry_ambiguous`` asks for the reference behaviour; otherwise
it raises :class:`AmbiguousOutcome`. Every data-plane POST carries one key for all its tries.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from client.calls.answer_reading import ReadAnswer, answer_of, error_from_answer, read_answer
from client.calls.backoff import Backoff
from client.calls.bounded_read import mount_bounds
from client.errors import (
    AmbiguousOutcome,
    CortexConnectionError,
    CortexError,
    CortexHTTPError,
    DeadlineExceeded,
    InvalidArgument,
)
from contract.auth import auth_headers
from contract.errors import NON_RETRYABLE_CODES
from contract.idempotency import IDEMPOTENCY_KEY_HEADER, Idempotency
from contract.limits import MAX_ANSWER_BYTES, MAX_ANSWER_INFLATION, RetryPolicy, answer_bound
from contract.routes import JSON, Route

if TYPE_CHECKING:
    from client.config import ClientConfig

__all__ = ["ReadAnswer", "BeforeSend", "HttpSession", "HttpSettings", "Seams", "connection_never_established",
           "how_to_check", "parse_retry_after"]


@dataclass
class HttpSettings:
    """What a session needs; built from ``ClientConfig`` by the REST client."""

    base: str
    prefix: str
    pat: str | None = field(default=None, repr=False)
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
    #: Largest answer body read; more is refused as soon as it is declared or crossed.
    max_answer_bytes: int = MAX_ANSWER_BYTES
    #: How many times its wire bytes a compressed answer may decode to (``client.calls.bounded_read``).
    max_answer_inflation: float = MAX_ANSWER_INFLATION

    @classmethod
    def from_config(cls, config: ClientConfig, base: str, prefix: str) -> HttpSettings:
        """The settings of ``config``: same-named fields are copied, the rest derived."""
        own = {f.name for f in dataclasses.fields(cls)} & set(type(config).model_fields)
        same = {name: getattr(config, name) for name in own}
        return cls(**{**same, "base": base, "prefix": prefix, "pat": config.pat_value(),
                      "retry": config.retry_policy(),
                      "idempotency_keys": config.supports_idempotency_keys})


#: Sees each try's number (0 first) and the headers it is about to send, and may change them.
BeforeSend = Callable[[int, dict[str, str]], None]


class Seams(TypedDict, total=False):
    """What a test (or a second session sharing them) injects: the ``requests`` session,
    the sleep, the clock, the jitter's random source, and ``before_send``, which the
    conformance self-test uses to break the client on purpose (its client mutants)."""

    session: requests.Session | None
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    rng: random.Random | None
    before_send: BeforeSend | None


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
    """One logical call across its tries: where it goes, its key, what was seen so far.

    ``kind`` is the route's idempotency unless ``idempotency`` overrides it (a chunk
    upload is a ``group`` call); every data-plane POST gets one key for all its tries.
    ``only_if_unsent`` marks a call resent only when no try reached the server (the
    route's ``resend_only_if_unsent``: create-job, CLIENT-RETRY-2).
    """

    route: Route
    url: str
    deadline: float
    operation_type: str | None
    idempotency: InitVar[Idempotency | None]
    kind: Idempotency = field(init=False)
    key: str | None = field(init=False)
    only_if_unsent: bool = field(init=False)
    attempt: int = 0
    #: A try failed in a way that may have followed execution (unsafe calls only).
    ambiguous: bool = False
    last_failure: CortexError | None = None

    def __post_init__(self, idempotency: Idempotency | None) -> None:
        self.kind = idempotency or self.route.call_idempotency(operation_type=self.operation_type)
        self.key = str(uuid.uuid4()) if self.route.keyed else None
        self.only_if_unsent = self.route.resend_only_if_unsent


class PiecesBody(Protocol):
    """A body sent as pieces (``client.calls.upload.ChunkBody``): its length, then its pieces."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Any]: ...


Body = bytes | PiecesBody


def _encode(route: Route, json_body: Any, data: Body | None) -> tuple[Body | None, dict[str, str]]:
    """The body (bytes, or pieces sent as they are) and content type a call sends."""
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

    def __init__(self, settings: HttpSettings, **seams: Unpack[Seams]) -> None:
        self.settings = settings
        # The session made here reads every answer under the bounds of client.calls.bounded_read (an
        # injected one brings its own adapters: the suite mounts the same bounds on its).
        self.session = seams.get("session") or mount_bounds(
            requests.Session(), settings.max_answer_bytes, settings.max_answer_inflation)
        self.sleep = seams.get("sleep", time.sleep)
        self.clock = seams.get("clock", time.monotonic)
        self.rng = seams.get("rng") or random.Random()
        self.before_send = seams.get("before_send")
        #: Unsafe calls are resent after ambiguous failures (with their key) once True.
        self.keys_supported = settings.idempotency_keys is True
        #: Routes whose existence on this server is being learnt -> what says it is absent.
        self.probed_routes: dict[str, Callable[[CortexHTTPError], bool]] = {}
        self.session.headers.update({"Accept": JSON})
        if settings.pat:
            self.session.headers.update(
                auth_headers(settings.pat)
            )

    def close(self) -> None:
        self.session.close()

    @contextmanager
    def probing(self, route_name: str, absent: Callable[[CortexHTTPError], bool]) -> Iterator[None]:
        """Within the block, a failure of ``route_name`` that ``absent`` reads as "no such
        route here" is raised at once, not retried: the caller is learning whether this server
        has the route at all (a proposed route on today's service), and resending a frame ten
        times under the spec §3.5 policy to learn it would cost minutes."""
        self.probed_routes[route_name] = absent
        try:
            yield
        finally:
            self.probed_routes.pop(route_name, None)

    def seams(self) -> Seams:
        """This session's seams, for a second session that must share them."""
        return Seams(session=self.session, sleep=self.sleep, clock=self.clock, rng=self.rng,
                     before_send=self.before_send)

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
        data: Body | None = None,
        query: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        idempotency: Idempotency | None = None,
        operation_type: str | None = None,
    ) -> ReadAnswer:
        """Send ``route`` (retrying per policy) and return its parsed answer.

        ``deadline`` is an absolute ``clock()`` time; the call's own deadline
        (``call_timeout_s``) applies too, whichever comes first. ``idempotency`` overrides
        the route's (a chunk upload is a ``group`` call); an unsafe call is resent after an
        ambiguous failure only with an idempotency key the server honours (or when
        ``retry_ambiguous`` restores the reference client's behaviour).
        """
        own = self.clock() + self.settings.call_timeout_s
        call = _Call(route, self.url_for(route, **dict(path_params or {})),
                     own if deadline is None else min(deadline, own), operation_type, idempotency)
        payload, headers = _encode(route, json_body, data)
        params = {k: v for k, v in (query or {}).items() if v is not None}
        while True:
            outcome, retry_after = self._attempt(call, payload, headers, params)
            if isinstance(outcome, ReadAnswer):
                return outcome
            call.last_failure = outcome
            self._wait_before_resend(call, outcome, retry_after)
            call.attempt += 1

    def _attempt(self, call: _Call, payload: Body | None, headers: dict[str, str],
                 params: dict[str, Any]) -> tuple[ReadAnswer | CortexError, float | None]:
        """One try: the answer, or the failure to resend after (raises when not resent)."""
        route, method = call.route, call.route.method
        remaining = call.deadline - self.clock()
        if remaining <= 0:
            raise self._out_of_time(call, None, f"deadline passed before {route.name} could be sent")
        timeout = (min(self.settings.connect_timeout_s, remaining),
                   min(self.settings.read_timeout_s, remaining))
        sent = dict(headers)
        if call.key:
            sent[IDEMPOTENCY_KEY_HEADER] = call.key
        if self.before_send is not None:
            self.before_send(call.attempt, sent)
        try:
            response = self.session.request(method, call.url, data=payload, params=params or None,
                                            headers=sent, timeout=timeout, stream=True,
                                            **self._verify)
            received = read_answer(route, call.url, response,
                                   answer_bound(route.name, self.settings.max_answer_bytes))
        except requests.RequestException as exc:
            return self._resend_after_exception(call, exc), None
        self._learn_key_support(call, response)
        if response.status_code < 400:
            return answer_of(received), None
        failure = error_from_answer(received)
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
        if call.only_if_unsent and not never_ran:
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
                     and not call.only_if_unsent
                     and not self._route_absent(call.route.name, failure))
        # A 4xx is the server refusing the call; a 503 with Retry-After asks to come back
        # later; a 501 names a call the server does not have. Any other 5xx (a crash, a
        # gateway losing the backend) may follow execution.
        never_ran = (status < 500 or status == 501
                     or (status == 503 and bool(response.headers.get("Retry-After"))))
        self._judge(call, failure, never_ran=never_ran, retryable=retryable, cause=None)

    def _route_absent(self, route_name: str, failure: CortexHTTPError) -> bool:
        absent = self.probed_routes.get(route_name)
        return absent is not None and absent(failure)

    def _judge(self, call: _Call, failure: CortexError, *, never_ran: bool, retryable: bool,
               cause: BaseException | None) -> None:
        """Raise unless the failed try may be sent again (policy, budget, at-most-once)."""
        # An only-if-unsent call keeps its own rule (never resent once it may have landed).
        if not never_ran and call.kind == "unsafe" and not call.only_if_unsent:
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
