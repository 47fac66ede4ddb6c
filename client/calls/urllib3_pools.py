"""The urllib3 hooks the bounded reader's watchdog learns each connection from, in one place.

The watchdog bounds a whole exchange by shutting its socket down, so it must learn which
connection an exchange uses before the first byte is sent or read (a TLS handshake, a head
dripped one byte at a time). urllib3 says so through public names only: a pool manager
builds its pools from ``pool_classes_by_scheme``, a pool its connections from
``ConnectionCls``, and a connection is opened by ``connect()`` and sent on by
``request()``. The watched connections below tell the exchange being sent on this thread
(:data:`SENDING`) that they carry it, from both. (The kit used to override the pools'
private ``_make_request``; nothing here is private.)

At import :func:`check` builds a pool manager and a connection the way requests will, and
raises ``ImportError`` naming the tested urllib3 range (:data:`TESTED_URLLIB3`, the same
as ``pyproject.toml``'s) when the hooks are gone: without them no exchange is bounded in
time, and there is no slower path that bounds it.
"""

from __future__ import annotations

import threading
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.poolmanager import PoolManager

#: The urllib3 releases the hooks were tested on (``>=2,<3``).
TESTED_URLLIB3 = ">=2,<3"
#: ``SENDING.exchange``: the exchange this thread is sending (anything with a ``connection``
#: attribute), set by the caller around the send; None or unset: nothing is watched.
SENDING = threading.local()


class _WatchedConnection:
    """A connection that tells the exchange being sent which connection carries it."""

    def _carry(self) -> None:
        exchange = getattr(SENDING, "exchange", None)
        if exchange is not None:
            exchange.connection = self

    def connect(self) -> None:
        self._carry()  # a new connection: before its TCP and TLS handshakes
        super().connect()  # type: ignore[misc]

    def request(self, *args: Any, **kwargs: Any) -> None:
        self._carry()  # every exchange, on a new or a reused connection
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_WatchedConnection, HTTPConnection):
    pass


class _WatchedHTTPSConnection(_WatchedConnection, HTTPSConnection):
    pass


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def watched_pools() -> dict[str, type[HTTPConnectionPool]]:
    """A pool manager's ``pool_classes_by_scheme`` whose connections are watched."""
    return {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


def check() -> None:
    """Raise ``ImportError`` when urllib3 no longer builds pools and connections from the
    hooks above, or a connection no longer opens and sends through them."""
    try:
        release = version("urllib3")
    except PackageNotFoundError:
        release = "(no package metadata)"
    manager = PoolManager()
    if not isinstance(getattr(manager, "pool_classes_by_scheme", None), dict):
        missing = "PoolManager.pool_classes_by_scheme"
    else:
        manager.pool_classes_by_scheme = watched_pools()
        pools = [manager.connection_from_host("127.0.0.1", 9, scheme) for scheme in ("http", "https")]
        missing = next((f"{type(p).__name__}.ConnectionCls" for p, want in
                        zip(pools, (_WatchedHTTPConnection, _WatchedHTTPSConnection), strict=True)
                        if getattr(p, "ConnectionCls", None) is not want), "")
        for name in ("connect", "request"):  # urllib3's own (2.x), not http.client's
            if not missing and name not in vars(HTTPConnection):
                missing = f"urllib3.connection.HTTPConnection.{name}"
        manager.clear()
    if missing:
        raise ImportError(f"client.calls.bounded_read needs urllib3 {TESTED_URLLIB3} (found {release}): "
                          f"{missing} is gone, so no answer could be bounded in time")


check()
