"""Dependencies, not cascades: the later exchanges a replay must not judge once one they
depend on was not replayed, or was refused where the recording was answered.

An exchange depends on an earlier one when its request names an id that the earlier
exchange's recorded answer created (a job, a request, a checkpoint, a cursor, an export
URL: an id-like string no exchange before it had named) and the replay has not learned that
id's new spelling, or when it continues the chunk group the earlier request belonged to.
Such an exchange is skipped "after #N" with #N's reason, and what it would have created is
blocked in turn, so one lost call is one line of the report, not a hundred divergences.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

from conformance.parity.compare import is_id_key
from conformance.parity.resend import MIN_ID


def _strings(value: Any, key: str = "", ids_only: bool = False) -> Iterator[str]:
    """The strings inside a JSON value (only those under id-like keys, with ``ids_only``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k) if k not in ("json", "head", "tail") else key, ids_only)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key, ids_only)
    elif isinstance(value, str) and len(value) >= MIN_ID and (not ids_only or is_id_key(key)):
        yield value


def chunk_group(req: Mapping[str, Any]) -> str | None:
    """The chunk group a request chunk belongs to (None for any other request)."""
    body = req.get("body") or {}
    desc = (body.get("chunk") or {}).get("descriptor") or {}
    group = desc.get("chunk_group_id") or ((body.get("rebuild") or {}).get("chunk") or {}).get("group")
    return group if isinstance(group, str) and group else None


def request_ids(req: Mapping[str, Any]) -> set[str]:
    """Every id-like string a request names: path segments, query values, its chunk group,
    the strings of its JSON body."""
    out = {unquote(seg.partition(":")[0]) for seg in str(req.get("path", "")).split("/")}
    out |= {str(v) for _, v in req.get("query") or []}
    out |= set(_strings((req.get("body") or {}).get("json")))
    group = chunk_group(req)
    if group:
        out.add(group)
    return {s for s in out if len(s) >= MIN_ID}


def answer_ids(resp: Mapping[str, Any]) -> set[str]:
    """The strings under id-like keys of a recorded answer's JSON body."""
    return set(_strings((resp.get("body") or {}).get("json"), ids_only=True))


def polled_request(req: Mapping[str, Any]) -> str | None:
    """The request id a poll (the get_request route) names, else None."""
    if req.get("route") != "get_request":
        return None
    last = str(req.get("path", "")).split("?")[0].rstrip("/").rsplit("/", 1)[-1]
    return unquote(last) or None


def _next_cursor(resp: Mapping[str, Any]) -> str:
    body = (resp.get("body") or {}).get("json")
    cursor = body.get("next_cursor") if isinstance(body, Mapping) else None
    return cursor if isinstance(cursor, str) else ""


class Dependencies:
    """Ids created by exchanges that were not replayed, and who is blocked by them."""

    def __init__(self) -> None:
        #: id -> (#N, why, the skip kind of what depends on it).
        self.blocked: dict[str, tuple[int, str, str]] = {}
        self.seen: set[str] = set()
        #: recorded request id -> the poll whose new answer ended its result's pages.
        self.ended: dict[str, tuple[int, str, str]] = {}

    def blocker(self, ex: Mapping[str, Any], learned: Mapping[str, str]) -> tuple[int, str, str] | None:
        """``(#N, why, kind)`` when ``ex`` names an id a not-replayed exchange #N created."""
        for ident in sorted(request_ids(ex["request"])):
            hit = self.blocked.get(ident)
            if hit is not None and ident not in learned:
                return hit
        return self.ended.get(polled_request(ex["request"]) or "")

    def block(self, ex: Mapping[str, Any], root: tuple[int, str, str], learned: Mapping[str, str]) -> None:
        """``ex`` was not replayed (or was refused): what it created cannot be named later."""
        created = answer_ids(ex["response"]) - self.seen
        group = chunk_group(ex["request"])
        for ident in created | ({group} if group else set()):
            if ident not in learned:
                self.blocked.setdefault(ident, root)

    def block_ended_chain(self, ex: Mapping[str, Any], new: Mapping[str, Any], learned: Mapping[str, str]) -> None:
        """``ex`` was replayed and matched, but one of its two answers named a next cursor and
        the other none (a server may cut result pages otherwise, spec §6.8; a request read
        to its end may be freed): the recording's later polls of that request, by cursor or
        not, continue a chain the new server cut elsewhere."""
        self._block_inline(ex, new, learned)
        cursor, now = _next_cursor(ex["response"]), _next_cursor(new)
        if bool(cursor) == bool(now):
            return
        root = (int(ex["seq"]), "the new server cut this result's pages otherwise (an allowed form, spec §6.8)", "form")
        if cursor and cursor not in learned:
            self.blocked.setdefault(cursor, root)
        polled = polled_request(ex["request"])
        if polled:
            self.ended.setdefault(polled, root)

    def _block_inline(self, ex: Mapping[str, Any], new: Mapping[str, Any], learned: Mapping[str, str]) -> None:
        """The recording's answer named a request to poll, the new one answered inline (an
        allowed form, spec §7): the recording's polls of that request have nothing to poll."""
        was, now = ((r.get("body") or {}).get("json") for r in (ex["response"], new))
        made = was.get("request_id") if isinstance(was, Mapping) else None
        if isinstance(made, str) and made not in learned and not (isinstance(now, Mapping) and "request_id" in now):
            why = "the new server answered this call inline (an allowed form, spec §7)"
            self.blocked.setdefault(made, (int(ex["seq"]), why, "form"))

    def note(self, ex: Mapping[str, Any]) -> None:
        """``ex`` has been handled: the ids it names are no longer new."""
        self.seen |= request_ids(ex["request"]) | answer_ids(ex["response"])


def refused(recorded: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why the replay of an answered call created nothing (None when it did as recorded)."""
    was, now = int(recorded.get("status") or 0), int(new.get("status") or 0)
    if 200 <= was < 300 and not 200 <= now < 300:
        return f"it answered {now or new.get('error', 'no answer')} where the recording got {was}"
    return None
