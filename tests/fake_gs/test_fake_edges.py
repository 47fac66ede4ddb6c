"""The small holes a red-team pass found, each tried again.

- A non-ASCII bearer token answers 401 ``unauthenticated`` on every route of the app
  (service, SQL statement, admin), never a 500.
- ``Content-Length`` plus ``Transfer-Encoding`` is refused with 400 and the connection
  closed: a request smuggled in the body is never answered (RFC 9112 §6.1).
- ``--env-file`` writes through no planted ``PATH.tmp`` symlink, nor through a symlink at
  the path itself.
- Creating a job with another account's ``job_id``: ``test_job_names.py`` (job ids are
  names in the caller's account).
"""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import requests

from contract.auth import TOKEN_TYPE, TOKEN_TYPE_HEADER
from contract.errors import REQUEST_ID_HEADER
from fake_gs.cli import write_env_file

NON_ASCII = b"Bearer \xc3\xa9t\xe9-\xff"


def _routes(app: Any) -> list[tuple[str, str]]:
    """Every (method, concrete path) the app routes, path parameters filled with an id."""
    out = []
    for route in app.routes:
        path = route.path
        for name in getattr(route, "param_convertors", {}):
            path = path.replace("{" + name + "}", str(uuid.uuid4()))
        for method in sorted(set(getattr(route, "methods", None) or ()) - {"HEAD"}):
            out.append((method, path))
    return out


def test_a_non_ascii_bearer_token_is_401_on_every_route(make_server) -> None:
    srv = make_server(tokens=("tok-a",), admin_token="adm-z")
    routes = _routes(srv.app)
    statuses: dict[int, list[str]] = {}
    for method, path in routes:
        answer = requests.request(method, srv.base_url + path, timeout=10,
                                  headers={"Authorization": NON_ASCII, TOKEN_TYPE_HEADER: TOKEN_TYPE})
        statuses.setdefault(answer.status_code, []).append(f"{method} {path}")
        if answer.status_code == 401:
            assert answer.json()["code"] == "unauthenticated"
    exports = [p for p in statuses.get(404, []) if "/_fake/exports/" in p]
    assert set(statuses) <= {401, 404} and statuses.get(404, []) == exports, statuses
    assert len(statuses[401]) >= 30 and srv.state.store.internal_errors == 0


def _raw(base_url: str, data: bytes) -> bytes:
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):  # the fake closes: recv answers b""
            out += chunk
    return out


def test_content_length_with_transfer_encoding_is_refused_and_closed(server) -> None:
    smuggled = b"GET /_fake/health HTTP/1.1\r\nHost: x\r\n\r\n"
    body = b"0\r\n\r\n" + smuggled
    head = (b"POST /api/v2/statements HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(body))
    answer = _raw(server.base_url, head + body)
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # the smuggled request got no answer
    assert answer.startswith(b"HTTP/1.1 400") and b"connection: close" in answer.lower()
    assert b'"invalid_argument"' in answer and REQUEST_ID_HEADER.lower().encode() in answer.lower()


def test_env_file_follows_no_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    env = tmp_path / "fake.env"
    (tmp_path / "fake.env.tmp").symlink_to(victim)
    write_env_file(env, {"CORTEX_BASE_URL": "http://127.0.0.1:1"})
    assert victim.read_text() == "untouched\n" and not env.is_symlink()
    assert env.read_text() == "export CORTEX_BASE_URL=http://127.0.0.1:1\n"
    env.unlink()
    env.symlink_to(victim)  # the path itself planted: replaced, not written through
    write_env_file(env, {"CORTEX_BASE_URL": "http://127.0.0.1:2"})
    assert victim.read_text() == "untouched\n" and not env.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fake.env", "fake.env.tmp", "victim.txt"]
