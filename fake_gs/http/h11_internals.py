"""h11's and uvicorn's private state behind the fake's body bypass, fenced in one place.

:class:`fake_gs.http.connections.GuardedH11Protocol` hands a request's ``Content-Length``
body bytes to the handler without h11 (h11 and uvicorn copied each byte of a 60 MiB chunk
three times). That needs what neither library publishes: h11's body reader (the private
``h11._readers.ContentLengthReader``, ``Connection._reader`` and its ``_remaining``), its
receive buffer (``Connection._receive_buffer``) and uvicorn's
``H11Protocol._unset_keepalive_if_required``. Everything touching them is here.

At import :func:`probe` checks, on a live ``h11.Connection``, that the reader state is what
the bypass relies on and that both libraries are releases it was tested on
(:data:`TESTED_H11`, :data:`TESTED_UVICORN`: the ``server`` extra in ``pyproject.toml``
names the same ranges). When any of it is not, :data:`BYPASS_OFF` says why, one warning
says so, and every body byte goes through h11's public path (``receive_data`` /
``next_event``, as uvicorn does on its own): the same answers, a few more copies.
"""

from __future__ import annotations

import inspect
import logging
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

try:
    from h11._readers import ContentLengthReader
except ImportError:  # probe() says so
    ContentLengthReader = None  # type: ignore[assignment,misc]

log = logging.getLogger("fake_gs.http.h11_internals")

#: ``(lowest, first untested)`` release of each library the bypass was tested on.
TESTED_H11 = ((0, 16), (0, 17))
TESTED_UVICORN = ((0, 29), (0, 56))


def _release(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "(no package metadata)"


def _in_range(release: str, tested: tuple[tuple[int, int], tuple[int, int]]) -> bool:
    try:
        major_minor = tuple(int(part) for part in release.split(".")[:2])
    except ValueError:
        return False
    return tested[0] <= major_minor < tested[1]


def release_range(tested: tuple[tuple[int, int], tuple[int, int]]) -> str:
    (lo_major, lo_minor), (hi_major, hi_minor) = tested
    return f">={lo_major}.{lo_minor},<{hi_major}.{hi_minor}"


def probe() -> str | None:
    """None when the bypass may run; else what is missing or untested (one sentence)."""
    for dist, tested in (("h11", TESTED_H11), ("uvicorn", TESTED_UVICORN)):
        if not _in_range(_release(dist), tested):
            return f"{dist} {_release(dist)} is outside the tested range {release_range(tested)}"
    if ContentLengthReader is None:
        return f"h11 {_release('h11')} has no h11._readers.ContentLengthReader"
    if not callable(getattr(H11Protocol, "_unset_keepalive_if_required", None)):
        return f"uvicorn {_release('uvicorn')} has no H11Protocol._unset_keepalive_if_required"
    if "message_event" not in inspect.signature(RequestResponseCycle).parameters:
        return f"uvicorn {_release('uvicorn')}'s RequestResponseCycle takes no message_event"
    # A body of 10: 4 bytes handed past h11, the last 6 through it; h11 must end it there.
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(b"PUT / HTTP/1.1\r\nHost: probe\r\nContent-Length: 10\r\n\r\n")
    try:
        if type(conn.next_event()) is not h11.Request:
            return f"h11 {_release('h11')} did not parse the probe's request head"
        reader = getattr(conn, "_reader", None)
        if type(reader) is not ContentLengthReader or getattr(reader, "_remaining", None) != 10:
            return f"h11 {_release('h11')} keeps no ContentLengthReader._remaining on Connection._reader"
        if len(getattr(conn, "_receive_buffer", b"?")) != 0:
            return f"h11 {_release('h11')} keeps no empty Connection._receive_buffer after a head"
        reader._remaining -= 4
        conn.receive_data(b"567890")
        events = [conn.next_event(), conn.next_event()]
    except (h11.ProtocolError, AttributeError, TypeError) as exc:
        return f"h11 {_release('h11')} refused the probe's body ({type(exc).__name__}: {exc})"
    body, end = events
    if not isinstance(body, h11.Data) or bytes(body.data) != b"567890" or type(end) is not h11.EndOfMessage:
        return f"h11 {_release('h11')} did not end the body where its reader's _remaining said"
    return None


#: Why the bypass is off (checked once, at import); None: it is on.
BYPASS_OFF: str | None = probe()
if BYPASS_OFF is not None:
    log.warning("the fake reads request bodies through h11's public path (a few more copies of each "
                "body byte): %s", BYPASS_OFF)


def body_left(conn: h11.Connection) -> int:
    """Bytes left of the ``Content-Length`` body ``conn`` is receiving with nothing buffered
    ahead of them (so the next bytes received can only be body); 0 otherwise, or when the
    bypass is off."""
    if BYPASS_OFF is not None:
        return 0
    reader: Any = getattr(conn, "_reader", None)
    buffered = getattr(conn, "_receive_buffer", None)
    if type(reader) is not ContentLengthReader or buffered is None or len(buffered):
        return 0
    return int(reader._remaining)


def passed_h11(conn: h11.Connection, protocol: H11Protocol, n: int) -> None:
    """Tell h11 (the length left, the 100-continue wait) and uvicorn (keep-alive) that ``n``
    body bytes reached the request around them."""
    protocol._unset_keepalive_if_required()
    reader: Any = conn._reader
    reader._remaining -= n
    conn.client_is_waiting_for_100_continue = False
