"""How a recorded request is sent again: learned ids put in place of recorded ones (paths,
queries, JSON bodies), real credentials in place of the tape's labels, and its body from
what the tape kept (``conformance.parity.rebuild``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, unquote

from conformance.parity.compare import is_id_key
from conformance.parity.rebuild import Bodies
from conformance.parity.targets import UNKNOWN_TOKEN, Skip
from contract import tape
from contract.auth import AUTHORIZATION_HEADER

#: Strings shorter than this are never taken for ids (learned or substituted).
MIN_ID = 6


def rewrite_path(req: dict[str, Any], prefix: str | None, ids: dict[str, str]) -> str:
    path = req["path"]
    if prefix and req.get("prefix") and path.startswith(req["prefix"]):
        path = prefix + path[len(req["prefix"]):]
    if not ids:
        return path
    out = []
    for segment in path.split("/"):
        head, colon, verb = segment.partition(":")
        for form in (head, unquote(head)):
            if form in ids:
                head = quote(ids[form], safe="")
                break
        out.append(head + colon + verb)
    return "/".join(out)


def request_headers(recorded: dict[str, str], tokens: tuple[str | None, ...],
                    admin_token: str | None = None) -> dict[str, str]:
    """The recorded headers with real credentials: the N-th token for ``<token-N>``, the
    target's admin token for the recorded admin credential."""
    headers = {k: v for k, v in recorded.items() if k != AUTHORIZATION_HEADER.lower()}
    label = recorded.get(AUTHORIZATION_HEADER.lower())
    if label is not None:
        headers[AUTHORIZATION_HEADER] = (f"Bearer {admin_token or UNKNOWN_TOKEN}"
                                    if label == tape.ADMIN_LABEL else _credential(label, tokens))
    if "content-type" not in headers:
        headers["Content-Type"] = ""  # requests would otherwise guess one
    return headers


def _credential(label: str, tokens: tuple[str | None, ...]) -> str:
    scheme, _, value = label.partition(" ")
    if value.startswith("<token-") and value.endswith(">"):
        index = value[len("<token-"):-1]
        token = tokens[int(index) - 1] if index.isdigit() and int(index) <= len(tokens) else None
        return f"{scheme} {token or UNKNOWN_TOKEN}"
    if value == "<credential>":
        return f"{scheme} {UNKNOWN_TOKEN}"
    return label


def request_bytes(req: dict[str, Any], ids: dict[str, str], bodies: Bodies | None = None) -> bytes | None:
    """The body to send: the kept bytes (inline or a blob), a one-byte fill, JSON rebuilt
    with new ids, or a frame rebuilt from its skeleton."""
    body = req.get("body")
    if not body:
        return None
    bodies = bodies or Bodies(())
    if bodies.must_rebuild(body):
        return bodies.rebuild(body)
    raw = bodies.kept(body)
    if raw is not None:
        if "json" in body or "text" in body:
            for old, new in sorted(ids.items(), key=lambda p: -len(p[0])):
                if len(old) >= MIN_ID and len(old) == len(new):
                    raw = raw.replace(old.encode(), new.encode())
        return raw
    if "fill" in body:
        return bytes([body["fill"]]) * int(body["bytes"])
    if "json" in body and body.get("exact"):
        return json.dumps(_swap(body["json"], ids)).encode()
    why = body.get("withheld") or body.get("not_kept") or (
        "a blob the tape lacks" if body.get("blob") else "too big to keep, recorded before tapes kept big bodies")
    raise Skip(f"the request body ({body.get('bytes')} bytes) was not kept in the recording: {why}", kind="bytes")


def _swap(value: Any, ids: dict[str, str]) -> Any:
    """Learned ids put in place of recorded ones, inside strings too (a SQL statement names
    a run by a name holding the job id)."""
    if isinstance(value, str):
        if value in ids:
            return ids[value]
        for old, new in sorted(ids.items(), key=lambda p: -len(p[0])):
            if len(old) >= MIN_ID and old in value:
                value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_swap(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _swap(v, ids) for k, v in value.items()}
    return value


def learn(recorded: Any, new: Any, ids: dict[str, str], key: str = "", listed: bool = False) -> None:
    """Walk both answers together; an id-like string that differs maps recorded -> new.

    The first mapping of an id holds, but for a checkpoint id outside a list: a server that
    names checkpoints itself (spec §6.3) may give a name again once its checkpoint is
    deleted, and the latest save answer says what the name now stands for."""
    if isinstance(recorded, dict) and isinstance(new, dict):
        for k, v in recorded.items():
            if k in new:
                learn(v, new[k], ids, k if k not in ("json", "head", "tail") else key, listed)
    elif isinstance(recorded, list) and isinstance(new, list):
        for a, b in zip(recorded, new, strict=False):
            learn(a, b, ids, key, True)
    elif isinstance(recorded, str) and isinstance(new, str) and is_id_key(key) and len(recorded) >= MIN_ID:
        renamed = key == "checkpoint_id" and not listed
        if recorded == new:
            if renamed:
                ids.pop(recorded, None)
            return
        if recorded in ids and not renamed:
            return
        ids[recorded] = new
        if "://" in recorded and "://" in new:  # an export URL: later calls use its path
            old_tail, new_tail = recorded.rstrip("/").rsplit("/", 1)[-1], new.rstrip("/").rsplit("/", 1)[-1]
            if old_tail != new_tail and len(old_tail) >= MIN_ID:
                ids.setdefault(unquote(old_tail), unquote(new_tail))
