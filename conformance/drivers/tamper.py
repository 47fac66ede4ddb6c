"""A man-in-the-middle for the client driver's session: rewrites answers on the way in.

Used to show that the client itself checks what it must (result-chunk sha256) without
needing a server that misbehaves on purpose: the adapter corrupts one announced digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import requests

from conformance.drivers.answer_bounds import RouteBounds

Rewrite = Callable[[dict[str, Any]], dict[str, Any] | None]


class TamperAdapter(RouteBounds):
    """Applies ``rewrite`` to JSON answers of GET requests; None leaves one untouched (under
    the same bounds as the adapter it replaces)."""

    def __init__(self, rewrite: Rewrite) -> None:
        super().__init__()
        self.rewrite = rewrite
        self.tampered = 0

    def send(
        self, request: requests.PreparedRequest, *args: Any, **kwargs: Any
    ) -> requests.Response:
        resp = super().send(request, *args, **kwargs)
        if request.method != "GET" or "json" not in resp.headers.get("content-type", ""):
            return resp
        try:
            body = json.loads(resp.content)
        except ValueError:
            return resp
        changed = self.rewrite(body) if isinstance(body, dict) else None
        if changed is not None:
            self.tampered += 1
            resp._content = json.dumps(changed).encode()
            resp.headers["content-length"] = str(len(resp._content))
        return resp


def corrupt_first_chunk_sha(body: dict[str, Any]) -> dict[str, Any] | None:
    """Flip the first result chunk's announced sha256 (once per page)."""
    for event in body.get("events") or []:
        if isinstance(event, dict) and event.get("type") == "result_chunk":
            sha = str(event.get("payload_sha256", ""))
            event["payload_sha256"] = ("0" if sha[:1] != "0" else "1") + sha[1:]
            return body
    return None


def install(session: requests.Session, rewrite: Rewrite) -> TamperAdapter:
    adapter = TamperAdapter(rewrite)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return adapter
