"""A recorded run (a gs-parity tape) as the exchanges the passive judge reads.

A tape keeps what the judge needs of each exchange: method, path and query, the request
headers a rule reads (the credential as a label, never its value), the request body's JSON
(or its bytes, when kept), a chunk's descriptor and payload size, the body's sha256, the
answer's status, headers and JSON. What it only outlines (an inline result frame, a result
chunk's payload) is judged as far as the outline allows; a clause judged on nothing stays
not seen, never green.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

from requests.structures import CaseInsensitiveDict

from conformance.judge.exchange import Exchange
from contract.idempotency import IDEMPOTENCY_KEY_HEADER
from contract.routes import route_of
from contract.tape import raw_body, read_tape

#: The host a tape's paths are put under (only their path is ever read).
TAPE_HOST = "http://tape.invalid"


def _request_body(body: Mapping[str, Any] | None,
                  blobs: Mapping[str, Mapping[str, Any]]) -> tuple[bytes | None, dict[str, Any] | None, int]:
    """The request's bytes as far as the tape kept them, its chunk descriptor and payload size."""
    if not body:
        return None, None, 0
    kept = raw_body(body, blobs)
    chunk = body.get("chunk")
    desc = chunk.get("descriptor") if isinstance(chunk, Mapping) else None
    payload = int(chunk.get("payload_bytes") or 0) if isinstance(chunk, Mapping) else 0
    if kept is None and "json" in body and body.get("exact"):
        kept = json.dumps(body["json"]).encode()
    return kept, dict(desc) if isinstance(desc, Mapping) else None, payload


def restored(value: Any) -> Any:
    """An answer's JSON as the tape outlined it, with each outlined piece back in its type:
    a long base64 text (``{"$b64": n}``) as an empty string, a folded list
    (``{"$list": n, "head", "tail"}``) as its two ends; an inline frame stays an outline
    (the judge rebuilds its object, :mod:`conformance.judge.passive`)."""
    if isinstance(value, dict):
        if set(value) == {"$b64"}:
            return ""
        if "$list" in value and "head" in value:
            return [restored(v) for v in (*(value.get("head") or []), *(value.get("tail") or []))]
        return {k: restored(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restored(v) for v in value]
    return value


def exchange_of(line: Mapping[str, Any], blobs: Mapping[str, Mapping[str, Any]] | None = None) -> Exchange:
    """One ``exchange`` line as an :class:`Exchange`."""
    req, resp = line.get("request") or {}, line.get("response") or {}
    method, path = str(req.get("method", "GET")), str(req.get("path", "/"))
    query = [(str(k), str(v)) for k, v in req.get("query") or []]
    url = TAPE_HOST + path + (f"?{urlencode(query)}" if query else "")
    headers = CaseInsensitiveDict({str(k): str(v) for k, v in (req.get("headers") or {}).items()})
    body_line = req.get("body") if isinstance(req.get("body"), Mapping) else None
    kept, desc, payload = _request_body(body_line, blobs or {})
    status = resp.get("status")
    answered = isinstance(status, int) and status >= 0 and not resp.get("error")
    answer = resp.get("body") if isinstance(resp.get("body"), Mapping) else None
    data = json.dumps(restored(answer["json"])).encode() if answer and "json" in answer else b""
    return Exchange(
        route_of(method, url), method, url, float(line.get("t", 0.0)), int((body_line or {}).get("bytes", 0)),
        request_body=kept, key=headers.get(IDEMPOTENCY_KEY_HEADER), query=dict(query),
        status=status if answered else None,
        headers=CaseInsensitiveDict({str(k): str(v) for k, v in (resp.get("headers") or {}).items()}),
        body=data, elapsed_ms=float(line.get("ms", 0.0)),
        error=None if answered else ConnectionError(str(resp.get("error") or "no answer")),
        request_headers=headers, chunk_desc=desc, chunk_payload=payload,
        body_sha256=str((body_line or {}).get("sha256", "")),
        body_whole=not (answer or {}).get("truncated", False))


def tape_exchanges(path: str) -> Iterator[Exchange]:
    """Every exchange of the tape at ``path``, in sequence order."""
    lines = read_tape(path)
    blobs = {str(x.get("sha256")): x for x in lines if x.get("kind") == "blob"}
    for line in lines:
        if line.get("kind") == "exchange":
            yield exchange_of(line, blobs)
