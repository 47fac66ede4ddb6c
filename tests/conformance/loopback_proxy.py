"""A transparent HTTP reverse proxy on loopback, for judging the fake as any URL.

It forwards only the service prefix (``/api/v2/...``): the fake's admin API and anything
else fake-only answer 404, so a run through it can use nothing a real server lacks. Bodies
are relayed as bytes with their headers (hop-by-hop ones dropped); every request gets its
own upstream connection.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

#: Headers that belong to one connection, not to the request (RFC 9110 section 7.6.1).
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host"}
)
SERVICE_PREFIX = "/api/v2/"


#: Turns an answer's body into what the proxy sends: (status, request headers, body) -> body.
Rewrite = Callable[[int, dict[str, str], bytes], bytes]
#: Turns a request's body into what the upstream receives: (method, path, body) -> body.
RewriteRequest = Callable[[str, str, bytes | None], bytes | None]


def _handler(upstream: str, rewrite: Rewrite | None = None,
             rewrite_request: RewriteRequest | None = None) -> type[BaseHTTPRequestHandler]:
    parts = urlsplit(upstream)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        #: Headers and body go out in separate writes: without TCP_NODELAY each answer
        #: would wait out a delayed ACK (tens of ms per call).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

        def _relay(self) -> None:
            if not self.path.startswith(SERVICE_PREFIX):
                self._answer(404, {"content-type": "text/plain"}, b"not proxied\n")
                return
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            if rewrite_request is not None:
                body = rewrite_request(self.command, self.path, body)
                headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
                if body is None:
                    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            conn = http.client.HTTPConnection(host, port, timeout=600)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if rewrite is not None:
                    data = rewrite(resp.status, dict(self.headers.items()), data)
                kept = {k: v for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP}
                self._answer(resp.status, kept, data)
            except (OSError, http.client.HTTPException):
                self._answer(502, {"content-type": "text/plain"}, b"upstream failed\n")
            finally:
                conn.close()

        def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response_only(status)
            for key, value in headers.items():
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _relay

    return Relay


@contextmanager
def loopback_proxy(upstream: str, rewrite: Rewrite | None = None,
                   rewrite_request: RewriteRequest | None = None) -> Iterator[str]:
    """Serve a proxy to ``upstream`` on a free loopback port; yields its base URL.
    ``rewrite``: change each answer's body on the way (a hostile server's habits);
    ``rewrite_request``: change each request's body (a server that reads requests its way)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream, rewrite, rewrite_request))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="loopback-proxy", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
