"""The relay: an HTTP/1.1 reverse proxy on asyncio streams with h11 on both sides.

Why this build: the proxy must forward bodies of any size while its memory stays bounded by
a window, keep each exchange intact (headers in their order and spelling, the client's own
framing and keep-alive), and let a body be observed as it passes. asyncio streams give
back-pressure for free (``drain``); h11 is the sans-IO HTTP/1.1 parser uvicorn and httpx
use, so the proxy parses the heads exactly as a real server and client would, yet owns every
byte and never buffers a body. An ASGI server plus httpx would each re-frame the messages and
add headers of their own.

A request body of known size does not pass through h11 (which copies each byte twice): it
is read and written on as it comes, shown to the judge, and once the judge has what it
reads of it (a chunk's frame header) the rest moves socket to socket inside the kernel
(:mod:`conformance.proxy.splice`) when neither side speaks TLS. Answers, bodies in chunked
transfer coding and TLS connections go through h11 and userland.

Each downstream connection gets one upstream connection, kept alive as long as both sides
keep theirs: the upstream sees the client's connection pattern. Every request is relayed
as it arrived but for ``Host``, which names the upstream (a server routes by it);
``Authorization`` passes through and is never kept (the tape writes a label). While a
request's body streams up, the answer is read, so a server that answers early (a 413) is
relayed at once. Each finished exchange goes to ``on_exchange`` (the judge, the tape).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, cast
from urllib.parse import urlsplit

import h11
from requests.structures import CaseInsensitiveDict

from conformance.judge.exchange import Exchange
from conformance.proxy import splice as kernel
from conformance.proxy.observed import Observed
from contract.idempotency import IDEMPOTENCY_KEY_HEADER
from contract.routes import route_of
from contract.tape import BodySink
from contract.wire import ChunkHead

#: Bytes read from a socket at a time; a connection's relayed body holds about this much
#: read and :data:`WRITE_HIGH` queued per direction, whatever its size.
WINDOW = 1024 * 1024
#: A downstream reader's buffer limit (it holds up to twice this before it stops reading).
DOWN_LIMIT = 256 * 1024
#: Queued bytes past which a writer waits for its peer (asyncio's default is 64 KiB: a
#: proxy that waits that often halves a fast upload's throughput).
WRITE_HIGH = 4 * 1024 * 1024
#: A request body is kept for the judge up to this size (JSON calls); a larger one keeps
#: only its frame header (all the chunk rules read).
REQUEST_KEEP = 8 * 1024 * 1024
#: An answer is kept for the judge up to this size; a larger one (a page of hundreds of
#: result chunks) is relayed with its models unjudged, so the proxy's memory stays bounded.
ANSWER_KEEP = 32 * 1024 * 1024
#: The largest request or status line plus headers accepted.
MAX_HEAD = 256 * 1024
#: Bodies spliced at once (each holds a thread while its bytes pass).
SPLICE_THREADS = 64


class UpstreamGone(Exception):
    """The upstream closed or failed before the answer ended."""


#: Called with each finished exchange, its request and answer sinks (None unless recording).
OnExchange = Callable[[Exchange, "Relayed"], None]


@dataclass
class Relayed:
    """What the relay saw of one exchange besides the judge's view (for the tape)."""

    path: str
    query: list[tuple[str, str]]
    request_headers: dict[str, str]
    response_headers: dict[str, str]
    request_sink: BodySink | None
    response_sink: BodySink | None
    seconds: float
    error: str | None = None


def _headers(raw: list[tuple[bytes, bytes]]) -> CaseInsensitiveDict[str]:
    return CaseInsensitiveDict({k.decode("latin-1"): v.decode("latin-1") for k, v in raw})


class BodyReader(asyncio.StreamReader):
    """A downstream connection's reader that says how many bytes it holds, so a body can be
    taken off it up to its end and the rest left to pass through the kernel (splice)."""

    @property
    def buffered(self) -> int:
        return len(self._buffer)  # type: ignore[attr-defined]  # StreamReader's buffer, a bytearray


@dataclass
class Upstream:
    """The upstream connection of one downstream connection, and the bytes it read past an answer."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    carry: bytes = b""


def _content_length(req: h11.Request) -> int | None:
    """The request body's size when its head gives one (h11 checked it); None for a chunked body."""
    length = 0
    for name, value in req.headers:
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            length = int(value)
    return length


def _parser(role: type[h11.SERVER] | type[h11.CLIENT], carry: bytes) -> h11.Connection:
    """A fresh h11 state machine for one exchange, fed the bytes read past the last one."""
    conn = h11.Connection(role, max_incomplete_event_size=MAX_HEAD)
    if carry:
        conn.receive_data(carry)
    return conn


class Relay:
    """Serves downstream connections and relays each to ``upstream``."""

    def __init__(self, upstream: str, on_exchange: OnExchange, *, upstream_ssl: ssl.SSLContext | None = None,
                 sinks: Callable[[Mapping[str, str]], tuple[BodySink, BodySink]] | None = None,
                 group_hash: Callable[[Exchange, ChunkHead], Any] | None = None) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be http(s)://host[:port], not {upstream!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.authority = parts.netloc.rpartition("@")[2].encode("latin-1")
        self.ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self.ssl = upstream_ssl or ssl.create_default_context()
        self.on_exchange = on_exchange
        self.sinks = sinks
        #: Asked for a request chunk's group frame hash as its header passes (the judge's).
        self.group_hash = group_hash
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = threading.Event()
        self._splicers = ThreadPoolExecutor(max_workers=SPLICE_THREADS, thread_name_prefix="gs-proxy-splice")

    async def start_server(self, host: str, port: int, server_ssl: ssl.SSLContext | None) -> asyncio.Server:
        """Listen on ``host:port`` (asyncio.start_server, with a :class:`BodyReader` per connection)."""
        loop = asyncio.get_running_loop()

        def protocol() -> asyncio.StreamReaderProtocol:
            return asyncio.StreamReaderProtocol(BodyReader(limit=DOWN_LIMIT, loop=loop), self.serve, loop=loop)

        return await loop.create_server(protocol, host, port, ssl=server_ssl)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One downstream connection, until either side closes it.

        Each exchange gets fresh h11 state machines for both connections, fed what was read past
        the previous one: h11 parses the heads (and frames the answers), while a body of known
        size goes by without h11, which would copy it twice on its way through."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH)
        up: Upstream | None = None
        carry = b""
        try:
            while True:
                down = _parser(h11.SERVER, carry)
                event = await _next(down, reader)
                if not isinstance(event, h11.Request):
                    break
                if up is None:
                    try:
                        up = await self._connect()
                    except OSError as exc:
                        await self._unreachable(down, writer, event, exc)
                        break
                going_on, carry = await self._exchange(down, reader, writer, event, up)
                if not going_on:
                    break
        except (h11.RemoteProtocolError, ConnectionError, UpstreamGone, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # shutdown: the connection ends here, quietly
            pass
        finally:
            if up is not None:
                up.writer.close()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                self._tasks.discard(task)

    async def close_all(self) -> None:
        """End every open connection (at shutdown)."""
        self._stopping.set()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        self._splicers.shutdown(wait=False, cancel_futures=True)

    async def _connect(self) -> Upstream:
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.ssl, server_hostname=self.host if self.ssl else None, limit=WINDOW)
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH)
        return Upstream(reader, writer)

    async def _unreachable(self, down: h11.Connection, writer: asyncio.StreamWriter, req: h11.Request,
                           exc: OSError) -> None:
        """The upstream cannot be reached: a 502 from the proxy itself (no server answer)."""
        body = f"gs-proxy: upstream {self.host}:{self.port} unreachable: {exc}\n".encode()
        writer.write(down.send(h11.Response(status_code=502, headers=[
            ("content-type", "text/plain"), ("content-length", str(len(body))), ("connection", "close")])))
        writer.write(down.send(h11.Data(data=body)) + down.send(h11.EndOfMessage()))
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        ex = _exchange_of(req, None)
        ex.error = exc
        self._finish(ex, None, {}, None, 0.0, f"upstream unreachable: {exc}")

    async def _exchange(self, down: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        req: h11.Request, up: Upstream) -> tuple[bool, bytes]:
        """Relay one request and its answer: whether the connection can go on, and the bytes
        read past this request (the next one's start)."""
        up_conn = _parser(h11.CLIENT, up.carry)
        self.in_flight += 1
        began = time.perf_counter()
        ex = _exchange_of(req, None)
        req_sink, resp_sink = self.sinks(ex.request_headers) if self.sinks is not None else (None, None)
        chunked = ex.route is not None and ex.route.chunked
        sent = Observed(REQUEST_KEEP if not chunked else 0, hash_it=not chunked, sink=req_sink,
                        group_hash=partial(self.group_hash, ex) if chunked and self.group_hash else None)
        got = Observed(ANSWER_KEEP, sink=resp_sink)
        headers = [(k, self.authority if k.lower() == b"host" else v) for k, v in req.headers.raw_items()]
        # A head goes out with the first piece of its body (one send, not two, per small call).
        up_head = up_conn.send(h11.Request(method=req.method, target=req.target, headers=headers,
                                           http_version=req.http_version)) or b""
        length = _content_length(req)
        carry = b""
        if length is None:
            body = self._send_h11_body(down, reader, up_conn, up.writer, sent, up_head)
        else:
            buffered = down.trailing_data[0]
            carry = buffered[length:]
            body = self._send_raw_body(buffered[:length], length, reader, writer, up.writer, sent, up_head)
        sending = asyncio.ensure_future(body)
        error: str | None = None
        answered = False
        try:
            await self._relay_answer(down, writer, up_conn, up.reader, ex, got)
            answered = True
            if not sending.done():
                await sending
            sending.result()
        except (UpstreamGone, ConnectionError, h11.RemoteProtocolError, h11.LocalProtocolError, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            if not sending.done():
                sending.cancel()
            with contextlib.suppress(BaseException):
                await sending
            self.in_flight -= 1
            self.last_activity = time.monotonic()
        ex.request_body, ex.sent = bytes(sent.kept) or None, sent.size
        ex.body_sha256, ex.frame_hash = sent.sha256, sent.frame_hash
        ex.body, ex.received, ex.body_whole = bytes(got.kept) if got.whole else b"", got.size, got.whole
        if not answered:
            ex.status = None
            ex.error = UpstreamGone(error or "the answer did not end")
        self._finish(ex, req_sink, dict(ex.headers), resp_sink, time.perf_counter() - began,
                     error if not answered or error else None)
        if length is None:
            carry = down.trailing_data[0]
        up.carry = up_conn.trailing_data[0]
        going_on = (answered and error is None and down.our_state is h11.DONE
                    and up_conn.their_state is h11.DONE)
        return going_on, carry

    async def _relay_answer(self, down: h11.Connection, writer: asyncio.StreamWriter, up_conn: h11.Connection,
                            up_reader: asyncio.StreamReader, ex: Exchange, got: Observed) -> None:
        """The upstream's answer to ``ex``, relayed downstream as it comes (its body shown to ``got``)."""
        resp = await _next(up_conn, up_reader)
        while isinstance(resp, h11.InformationalResponse):
            writer.write(down.send(resp))
            resp = await _next(up_conn, up_reader)
        if not isinstance(resp, h11.Response):
            raise UpstreamGone("no answer")
        ex.status = resp.status_code
        ex.headers = _headers(resp.headers.raw_items())
        head = down.send(h11.Response(status_code=resp.status_code, headers=resp.headers.raw_items(),
                                      reason=resp.reason, http_version=resp.http_version)) or b""
        await _relay_h11_body(up_conn, up_reader, down, writer, got, head,
                              lambda event: UpstreamGone(f"unexpected {type(event).__name__}"))

    async def _send_h11_body(self, down: h11.Connection, reader: asyncio.StreamReader, up_conn: h11.Connection,
                             up_writer: asyncio.StreamWriter, sent: Observed, head: bytes) -> None:
        """A body sent in chunked transfer coding: relayed chunk by chunk as h11 reads it."""
        await _relay_h11_body(down, reader, up_conn, up_writer, sent, head,
                              lambda _event: ConnectionError("the client closed mid-request"))

    async def _send_raw_body(self, first: bytes, length: int, reader: asyncio.StreamReader,
                             down_writer: asyncio.StreamWriter, up_writer: asyncio.StreamWriter,
                             sent: Observed, head: bytes) -> None:
        """A body of known size: read off the socket and written on as it came, each piece
        shown to the observer; once the observer has what it wants (a chunk's frame header),
        the rest moves socket to socket inside the kernel when both ends are plain TCP."""
        if first:
            sent.feed(first)
        up_writer.writelines([head, first])
        remaining = length - len(first)
        await up_writer.drain()
        splice = kernel.AVAILABLE and isinstance(reader, BodyReader) and _plain(down_writer) and _plain(up_writer)
        while remaining and not (splice and sent.satisfied):
            data = await reader.read(min(remaining, WINDOW))
            if not data:
                raise ConnectionError("the client closed mid-request")
            sent.feed(data)
            up_writer.write(data)
            remaining -= len(data)
            await up_writer.drain()
        if remaining:
            assert isinstance(reader, BodyReader)
            await self._splice(reader, down_writer, up_writer, remaining)
            sent.passed_unseen(remaining)

    async def _splice(self, reader: BodyReader, down_writer: asyncio.StreamWriter,
                      up_writer: asyncio.StreamWriter, size: int) -> None:
        """The last ``size`` bytes of a body, downstream socket to upstream socket: what the
        reader already holds first, then the rest through a kernel pipe (in a thread)."""
        while size and reader.buffered:  # no await suspends here: the reader has the bytes
            data = await reader.read(min(size, reader.buffered))
            up_writer.write(data)
            size -= len(data)
        if not size:
            await up_writer.drain()
            return
        down = cast(asyncio.Transport, down_writer.transport)
        down.pause_reading()
        try:
            limits = up_writer.transport.get_write_buffer_limits()
            up_writer.transport.set_write_buffer_limits(high=0)  # drain: until the queue is empty
            try:
                await up_writer.drain()
            finally:
                up_writer.transport.set_write_buffer_limits(low=limits[0], high=limits[1])
            src, dst = down_writer.get_extra_info("socket").fileno(), up_writer.get_extra_info("socket").fileno()
            await asyncio.get_running_loop().run_in_executor(self._splicers, kernel.splice, src, dst, size,
                                                             self._stopping)
        finally:
            down.resume_reading()

    def _finish(self, ex: Exchange, req_sink: BodySink | None, response_headers: dict[str, str],
                resp_sink: BodySink | None, seconds: float, error: str | None) -> None:
        ex.elapsed_ms = seconds * 1000.0
        parts = urlsplit(ex.url)
        query = [tuple(p.split("=", 1)) if "=" in p else (p, "") for p in parts.query.split("&") if p]
        self.on_exchange(ex, Relayed(parts.path, [(str(k), str(v)) for k, v in query],
                                     dict(ex.request_headers), response_headers, req_sink, resp_sink, seconds,
                                     error))


def _plain(writer: asyncio.StreamWriter) -> bool:
    """A connection on a plain TCP socket (no TLS layer between the socket and the bytes)."""
    return writer.get_extra_info("sslcontext") is None and writer.get_extra_info("socket") is not None


def _exchange_of(req: h11.Request, status: int | None) -> Exchange:
    method, target = req.method.decode("latin-1"), req.target.decode("latin-1")
    url = "http://proxy" + target
    headers = _headers(req.headers.raw_items())
    query = dict(p.split("=", 1) for p in urlsplit(url).query.split("&") if "=" in p)
    return Exchange(route_of(method, url), method, url, time.time(), 0, key=headers.get(IDEMPOTENCY_KEY_HEADER),
                    query=query, status=status, request_headers=headers)


async def _relay_h11_body(source: h11.Connection, reader: asyncio.StreamReader, sink: h11.Connection,
                          writer: asyncio.StreamWriter, seen: Observed, head: bytes,
                          broken: Callable[[Any], Exception]) -> None:
    """One message's body as ``source`` reads it, re-framed by ``sink`` and written after
    ``head`` (the message's head, not yet sent), each piece shown to ``seen``; any event but
    data or the message's end is ``broken(event)``."""
    while True:
        event = await _next(source, reader)
        if isinstance(event, h11.Data):
            seen.feed(event.data)
            writer.writelines([head, *(sink.send_with_data_passthrough(event) or ())])
            head = b""
            await writer.drain()
        elif isinstance(event, h11.EndOfMessage):
            writer.write(head + (sink.send(event) or b""))
            await writer.drain()
            return
        else:
            raise broken(event)


async def _next(conn: h11.Connection, reader: asyncio.StreamReader) -> Any:
    """The next h11 event of ``conn``, reading from ``reader`` as needed (an end of stream
    is h11's to judge: the end of a close-delimited body, or a cut)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(WINDOW))
