"""The last HTTP exchanges of the running test, kept for the report's failing examples.

Every :class:`requests.Session` the suite uses (raw driver, client driver) gets a response
hook that appends to the process-wide :data:`RECORDER`; the plugin clears it before each
test, so after a failure (hypothesis replays the shrunk example last) it holds the
exchanges of the minimal failing example.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

from contract.auth import AUTHORIZATION_HEADER, TOKEN_TYPE_HEADER
from contract.errors import REQUEST_ID_HEADER
from contract.limits import MAX_ANSWER_BYTES
from contract.redact import scrub_text
from contract.tape import Exchange as TapeExchange
from contract.tape import TapeWriter, sink_of

#: How many exchanges a test keeps, and how many the report shows.
KEEP = 12
SHOW = 3
_BODY_PREVIEW = 600
#: How much of a body its preview scrubs: far more than the preview shows and than any
#: credential is long (an STS session token is about 1 KiB), so a credential that starts
#: inside the preview is masked whole, while a 60 MiB result costs its first 64 KiB, not a
#: scan of every byte (the scan of whole large answers was a sixth of a suite run's CPU).
_SCRUBBED = 64 * 1024


@dataclass(frozen=True)
class Exchange:
    method: str
    url: str
    request_headers: dict[str, str]
    request_body: str
    status: int
    response_headers: dict[str, str]
    response_body: str

    def render(self) -> str:
        lines = [f"> {self.method} {self.url}"]
        lines += [f"> {k}: {v}" for k, v in self.request_headers.items()]
        if self.request_body:
            lines.append(f"> {self.request_body}")
        lines.append(f"< {self.status}")
        lines += [f"< {k}: {v}" for k, v in self.response_headers.items()]
        if self.response_body:
            lines.append(f"< {self.response_body}")
        return "\n".join(lines)


_SHOWN_REQUEST_HEADERS = ("content-type", "content-length", TOKEN_TYPE_HEADER.lower())
_SHOWN_RESPONSE_HEADERS = ("content-type", REQUEST_ID_HEADER.lower(), "retry-after")


def sent_body(body: Any) -> bytes | str | None:
    """A prepared request's body as bytes: a body sent as pieces (the kit client's chunk
    uploads) has ``__bytes__``; a stream of unknown kind is not read (None)."""
    if body is None or isinstance(body, (bytes, str)):
        return body
    return bytes(body) if hasattr(body, "__bytes__") else None


def preview(body: bytes | str | None, content_type: str = "") -> str:
    """A short, printable rendering of a body: JSON as text, binary as size + head."""
    if body is None or body == b"" or body == "":
        return ""
    data = body.encode() if isinstance(body, str) else bytes(body)
    if "json" in content_type or data[:1] in (b"{", b"["):
        try:
            # Re-spaced only when small: a large body's head is shown as it came.
            text = json.dumps(json.loads(data)) if len(data) <= _SCRUBBED else ""
        except ValueError:
            text = ""
        text = text or data[:_SCRUBBED].decode("utf-8", "replace")
        # Scrubbed before it is cut: a credential cut in two no longer looks like one.
        text = scrub_text(text[:_SCRUBBED])
        return (
            text
            if len(text) <= _BODY_PREVIEW
            else text[:_BODY_PREVIEW] + f"... ({len(data)} bytes)"
        )
    return (
        f"<{len(data)} bytes: {data[:48]!r}...>"
        if len(data) > 48
        else f"<{len(data)} bytes: {data!r}>"
    )


def _pick(headers: Any, names: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        value = headers.get(name)
        if value is not None:
            out[name] = value
    if AUTHORIZATION_HEADER in headers or AUTHORIZATION_HEADER.lower() in headers:
        out[AUTHORIZATION_HEADER.lower()] = "Bearer <redacted>"
    return out


#: A streamed JSON answer up to this declared size is read for the tape all the same:
#: schemathesis and the kit's client stream every call (the client to hold its own cap),
#: and a replay compares their bodies; the client's cap is the natural bound.
_SMALL_JSON = MAX_ANSWER_BYTES


def _small_json(response: requests.Response) -> bool:
    """Whether a streamed answer is a JSON body small enough to read now (the caller then
    reads it from requests' cache), so its ids reach the tape."""
    if "json" not in response.headers.get("Content-Type", ""):
        return False
    try:
        return int(response.headers.get("Content-Length", "")) <= _SMALL_JSON
    except ValueError:
        return False


class Recorder:
    """A bounded, thread-safe log of exchanges."""

    def __init__(self, keep: int = KEEP) -> None:
        self._items: deque[Exchange] = deque(maxlen=keep)
        self._lock = threading.Lock()
        #: A parity tape every exchange also goes to (``--gs-record``), and the server
        #: name of each base URL (``scheme://host:port``) it has seen described.
        self.tape: TapeWriter | None = None
        self._servers: dict[str, str] = {}
        #: Prefix of server names (``gw0/``): xdist workers' fakes are separate servers.
        self.tape_prefix = ""

    def start_tape(self, tape: TapeWriter) -> None:
        """Tape every exchange any ``requests`` session of this process makes (drivers, the
        client, the admin API, bare calls in properties) until :meth:`stop_tape`."""
        self.tape = tape
        self._servers.clear()
        _patch_send(self)

    def stop_tape(self) -> None:
        _unpatch_send()
        if self.tape is not None:
            self.tape.close()
        self.tape = None

    def tape_server(self, base_url: str, name: str, info: Mapping[str, Any],
                    tokens: tuple[str | None, ...] = (), admin: str | None = None) -> None:
        """Name the server at ``base_url`` in the tape (no-op when not recording)."""
        if self.tape is None:
            return
        parts = urlsplit(base_url)
        name = self.tape_prefix + name
        self._servers[f"{parts.scheme}://{parts.netloc}"] = name
        for token in tokens:
            self.tape.add_secret(token)
        self.tape.add_admin(admin)
        self.tape.server(name, info)

    def tape_answer(self, response: requests.Response, streamed: bool) -> None:
        """Tape one exchange; a body cut on the wire is taped as such, then re-raised. A
        streamed answer is taped without its body (reading it is the caller's business)."""
        seconds = response.elapsed.total_seconds()
        if streamed and not _small_json(response):
            self._tape(response.request, response, b"", seconds, streamed=True)
            return
        try:
            content = response.content
        except requests.RequestException as exc:
            self.tape_failure(response.request, exc, seconds, response)
            raise
        self._tape(response.request, response, content, seconds)

    def tape_failure(self, request: requests.PreparedRequest, exc: BaseException, seconds: float,
                     response: requests.Response | None = None) -> None:
        """Tape a request whose answer never (completely) arrived."""
        self._tape(request, response, b"", seconds, f"{type(exc).__name__}: {exc}"[:300])

    def _tape(self, req: requests.PreparedRequest, response: requests.Response | None,
              content: bytes, seconds: float, error: str | None = None, streamed: bool = False) -> None:
        tape = self.tape
        if tape is None:
            return
        parts = urlsplit(req.url or "")
        body = sent_body(req.body)
        tape.record(
            TapeExchange(
                method=req.method or "?",
                path=parts.path,
                query=parse_qsl(parts.query, keep_blank_values=True),
                request_headers=dict(req.headers),
                request_body=tape.request_sink(body),
                status=response.status_code if response is not None else 0,
                response_headers=dict(response.headers) if response is not None else {},
                response_body=sink_of(content),
                started=time.time() - seconds,
                seconds=seconds,
                server=self._servers.get(f"{parts.scheme}://{parts.netloc}", parts.netloc),
                error=error,
                extra={"streamed": True} if streamed else {},
            )
        )

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def add(self, exchange: Exchange) -> None:
        with self._lock:
            self._items.append(exchange)

    def __iter__(self) -> Iterator[Exchange]:
        with self._lock:
            return iter(list(self._items))

    def last(self, n: int = SHOW) -> list[Exchange]:
        with self._lock:
            return list(self._items)[-n:]

    def record_response(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        """A ``requests`` response hook."""
        req = response.request
        body = sent_body(req.body)
        self.add(
            Exchange(
                method=req.method or "?",
                url=req.url or "?",
                request_headers=_pick(req.headers, _SHOWN_REQUEST_HEADERS),
                request_body=preview(body, req.headers.get("content-type", "")),
                status=response.status_code,
                response_headers=_pick(response.headers, _SHOWN_RESPONSE_HEADERS),
                response_body=preview(response.content, response.headers.get("content-type", "")),
            )
        )

    def attach(self, session: requests.Session) -> requests.Session:
        """Record every response ``session`` receives."""
        hooks = session.hooks.setdefault("response", [])
        if self.record_response not in hooks:
            hooks.append(self.record_response)
        return session


_ORIGINAL_SEND = requests.Session.send


def _patch_send(recorder: Recorder) -> None:
    def send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        started = time.monotonic()
        try:
            response = _ORIGINAL_SEND(self, request, **kwargs)
        except requests.RequestException as exc:
            if recorder.tape is not None:
                recorder.tape_failure(request, exc, time.monotonic() - started)
            raise
        if recorder.tape is not None:
            recorder.tape_answer(response, streamed=bool(kwargs.get("stream")))
        return response

    requests.Session.send = send  # type: ignore[method-assign]


def _unpatch_send() -> None:
    requests.Session.send = _ORIGINAL_SEND  # type: ignore[method-assign]


#: The process-wide recorder (each xdist worker has its own).
RECORDER = Recorder()


# --- the run's parity tape (``--gs-record``), driven by the pytest plugin ------------------


def _tape_path(config: Any) -> str | None:
    path = config.getoption("--gs-record")
    if not path:
        return None
    worker = getattr(config, "workerinput", {}).get("workerid")
    return f"{path}.{worker}.part" if worker else str(path)  # parts are plain text


def start_run_tape(config: Any, options: Any) -> None:
    """Open the parity tape (``--gs-record``); each xdist worker writes its own part."""
    path = _tape_path(config)
    if path is None or (not hasattr(config, "workerinput") and _xdist_workers(config)):
        return
    meta = {"run": "gs-conformance", "target": options.url or "embedded fake",
            "database": options.database, "schema": options.schema,
            "endpoint": options.endpoint, **options.describe()}
    worker = getattr(config, "workerinput", {}).get("workerid")
    RECORDER.tape_prefix = f"{worker}/" if worker else ""
    RECORDER.start_tape(TapeWriter(path, "gs-conformance", meta=meta | {"worker": worker},
                                   bodies=options.record_bodies, budget_mib=options.record_budget_mib))
    if options.url:  # the run's first call (the probe) goes out before the target is described
        RECORDER.tape_server(options.url.rstrip("/"), "target", {"embedded": False, "url": options.url},
                             (options.with_env("token"), options.with_env("token2")))


def _xdist_workers(config: Any) -> int:
    value = getattr(config.option, "numprocesses", None)
    return int(value) if isinstance(value, int) else (1 if value else 0)


def finish_run_tape(config: Any) -> None:
    """At the end of a pytest session: under xdist the controller merges the workers' parts
    into one tape, each worker's stream in turn."""
    import glob

    from contract.tape import merge_parts, tape_summary

    path = config.getoption("--gs-record")
    parts = sorted(glob.glob(glob.escape(str(path)) + ".*.part")) if path else []
    if parts:
        merge_parts(str(path), parts)
        for part in parts:
            os.unlink(part)
    if path and os.path.exists(str(path)):
        print(tape_summary(str(path)), file=sys.stderr, flush=True)


def render_last(n: int = SHOW) -> str:
    return "\n\n".join(ex.render() for ex in RECORDER.last(n))
