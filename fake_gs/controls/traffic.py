"""Per-account traffic of a fake, for client teams' plumbing gates (``--traffic N``).

A test that catches a client exception or ignores a 4xx stays green; the fake is the only
party that saw the refusal. With ``traffic > 0`` it keeps, per account (the bearer token a
call presented), the last N exchanges and, apart, the last N *flagged* ones (answered
4xx/5xx, or carrying JSON fields the contract does not know), so a flood of polls never
pushes a refusal out. A small tally per account (routes by status class, operation types,
delivery forms, error codes) is exact however many exchanges pass. All of it is in memory
and bounded: N per account and at most :data:`MAX_ACCOUNTS` accounts (oldest forgotten).

Handlers add what only they know (the error code they meant, the operation type, the
result's delivery form, unknown fields) to the ASGI scope with :func:`note`; the outermost
middleware turns scope and answer into one exchange. ``/_fake/*`` calls are never logged.

Accounts: the tokens of ``--token`` are ``token#i``; the admin API can mint more service
tokens at run time (``POST /_fake/tokens``), one per test, so parallel tests do not see
each other's jobs or traffic. Minted tokens are service tokens only: never admin.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from contract.auth import bearer_token
from contract.routes import ROUTES_BY_NAME

#: Scope key of the facts handlers add to an exchange.
NOTES = "fake_gs.notes"
#: Accounts whose traffic is kept; the least recently active one is forgotten beyond it.
MAX_ACCOUNTS = 512
#: Minted tokens a fake accepts in its lifetime (each test mints one).
MAX_MINTED = 100_000
#: Exchanges kept by all accounts together: at least this many, or 4 accounts' worth;
#: the least recently active accounts are forgotten beyond it (about 1 KiB each).
MIN_STORED = 50_000
#: Bytes of an error answer kept to read its code and message.
ERROR_BODY_CAP = 8192
#: Unknown field names kept per exchange; characters of a path, a query and of every
#: other text a caller chose (a field name, an operation type): 10 unknown field names of
#: 50 MiB each were kept whole (+511 MiB, and GET /_fake/traffic answered 500 MiB).
MAX_UNKNOWN_NAMES = 50
MAX_TEXT = 512
#: Distinct keys of each tally counter (operation types a caller names are its text);
#: past it, exchanges are counted under :data:`OTHER`.
MAX_TALLY_KEYS = 256
OTHER = "<other>"
ANONYMOUS = "anonymous"
UNAUTHENTICATED = "unauthenticated"


def note(scope: MutableMapping[str, Any], key: str, value: Any) -> None:
    """Attach a fact to the exchange being served (a no-op cost when traffic is off)."""
    scope.setdefault(NOTES, {})[key] = value


#: The forms a finished request's result reaches the client in (spec §6.8, §9.4):
#: plain JSON, an inline base64 frame, result-chunk events, or generate-stream events.
RESULT_FORMS = ("json", "inline", "chunks", "stream")


def short(text: Any) -> Any:
    """A caller's text as kept: at most :data:`MAX_TEXT` characters, a longer one cut with
    its length said (non-text values as they are)."""
    if not isinstance(text, str) or len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}... ({len(text)} characters)"


def note_unknown(scope: MutableMapping[str, Any], names: list[str]) -> None:
    """Report unknown JSON fields of this exchange (the first :data:`MAX_UNKNOWN_NAMES`,
    each :func:`short`)."""
    found: list[str] = scope.setdefault(NOTES, {}).setdefault("unknown_fields", [])
    found.extend(short(name) for name in names[: max(0, MAX_UNKNOWN_NAMES - len(found))])


def _count(counter: Counter[str], key: str) -> None:
    """Count ``key``, or :data:`OTHER` once the counter holds :data:`MAX_TALLY_KEYS` keys."""
    counter[key if key in counter or len(counter) < MAX_TALLY_KEYS else OTHER] += 1


class Accounts:
    """Tokens minted at run time (``POST /_fake/tokens``) and every account's label."""

    def __init__(self) -> None:
        self._minted: dict[str, str] = {}
        self._by_label: dict[str, str] = {}
        self._lock = threading.Lock()

    def __contains__(self, token: object) -> bool:
        return token in self._minted

    def __len__(self) -> int:
        return len(self._minted)

    def mint(self) -> tuple[str, str]:
        """A fresh service token and its account label; ValueError past :data:`MAX_MINTED`."""
        with self._lock:
            if len(self._minted) >= MAX_MINTED:
                raise ValueError(f"this fake has minted {MAX_MINTED} tokens already; restart it")
            token = "minted-" + secrets.token_urlsafe(24)
            label = f"minted#{len(self._minted)}"
            self._minted[token] = label
            self._by_label[label] = token
            return token, label

    def owner_of(self, label: str, configured: tuple[str, ...]) -> str | None:
        """The owner key (token) of an account label; None for a label no account has."""
        if label == ANONYMOUS and not configured:
            return ""
        index = label.removeprefix("token#")
        if index != label and index.isdigit() and int(index) < len(configured):
            return configured[int(index)]
        return self._by_label.get(label)

    def label(self, token: str | None, configured: tuple[str, ...]) -> str:
        """``token#i`` for a ``--token``, ``minted#k`` for a minted one, else anonymous or
        unauthenticated (a token the fake does not know)."""
        if not token:
            return ANONYMOUS
        if token in configured:
            return f"token#{configured.index(token)}"
        return self._minted.get(token, UNAUTHENTICATED)


@dataclass
class _Log:
    recent: deque[dict[str, Any]]
    flagged: deque[dict[str, Any]]
    total: int = 0
    flagged_total: int = 0
    routes: Counter[str] = field(default_factory=Counter)
    ops: Counter[str] = field(default_factory=Counter)
    delivery: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)

    def tally(self, ex: dict[str, Any]) -> None:
        ok = 200 <= ex["status"] < 300
        if ex["route"]:
            _count(self.routes, f"{ex['route']} {ex['status'] // 100 if ex['status'] > 0 else 0}xx")
        if ok and ex.get("op"):
            _count(self.ops, ex["op"])
        if ok and ex.get("delivery"):
            _count(self.delivery, ex["delivery"])
        if ex["status"] >= 400 and ex.get("code"):
            _count(self.codes, str(ex["code"]))

    def public(self, account: str) -> dict[str, Any]:
        seen = {ex["seq"] for ex in self.recent}
        exchanges = sorted([*self.recent, *(ex for ex in self.flagged if ex["seq"] not in seen)],
                           key=lambda ex: ex["seq"])
        return {
            "account": account,
            "exchanges": exchanges,
            "total": self.total,
            "flagged_total": self.flagged_total,
            "dropped": self.total - len(exchanges),
            "tally": {"routes": dict(self.routes), "operations": dict(self.ops),
                      "delivery": dict(self.delivery), "codes": dict(self.codes)},
        }


class TrafficLog:
    """Bounded per-account exchange logs (thread-safe; ``limit == 0`` keeps nothing)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._logs: OrderedDict[str, _Log] = OrderedDict()
        self._lock = threading.Lock()
        self._seq = 0
        self._stored = 0
        self.budget = max(MIN_STORED, 4 * limit)

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def note(self, scope: MutableMapping[str, Any], key: str, value: Any) -> None:
        """:func:`note`, when the log keeps anything."""
        if self.enabled:
            note(scope, key, value)

    def note_unknown(self, scope: MutableMapping[str, Any], names: list[str]) -> None:
        """:func:`note_unknown`, when the log keeps anything."""
        if self.enabled:
            note_unknown(scope, names)

    def record(self, account: str, exchange: dict[str, Any]) -> None:
        with self._lock:
            self._seq += 1
            exchange["seq"] = self._seq
            log = self._logs.get(account)
            if log is None:
                log = self._logs[account] = _Log(deque(maxlen=self.limit), deque(maxlen=self.limit))
                while len(self._logs) > MAX_ACCOUNTS:
                    _, old = self._logs.popitem(last=False)
                    self._stored -= len(old.recent) + len(old.flagged)
            else:
                self._logs.move_to_end(account)
            before = len(log.recent) + len(log.flagged)
            log.total += 1
            log.recent.append(exchange)
            if exchange["status"] >= 400 or exchange["status"] < 0 or exchange.get("unknown_fields"):
                log.flagged_total += 1
                log.flagged.append(exchange)
            log.tally(exchange)
            self._stored += len(log.recent) + len(log.flagged) - before
            while self._stored > self.budget and len(self._logs) > 1:
                _, old = self._logs.popitem(last=False)
                self._stored -= len(old.recent) + len(old.flagged)

    def view(self, account: str | None) -> dict[str, Any]:
        """One account's log, or every account's when ``account`` is None."""
        with self._lock:
            if account is not None:
                log = self._logs.get(account)
                return log.public(account) if log else _Log(deque(), deque()).public(account)
            return {"accounts": {name: log.public(name) for name, log in self._logs.items()}}

    def clear(self, account: str | None) -> None:
        with self._lock:
            if account is None:
                self._logs.clear()
                self._stored = 0
            else:
                old = self._logs.pop(account, None)
                if old is not None:
                    self._stored -= len(old.recent) + len(old.flagged)


def _error_fields(body: bytes) -> tuple[str | None, str | None]:
    """Code and message of an error answer (either envelope form; missing parts None)."""
    import json

    try:
        data = json.loads(body)
    except (ValueError, UnicodeError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    code = data.get("code")
    message = data.get("message")
    if message is None and isinstance(data.get("detail"), list):
        message = "; ".join(str(d.get("msg")) for d in data["detail"][:5] if isinstance(d, dict))
    return (str(code) if code is not None else None), (str(message)[:300] if message is not None else None)


def bearer_of(scope: dict[str, Any]) -> str | None:
    """The bearer token a raw ASGI request presented."""
    for key, value in scope.get("headers") or ():
        if key == b"authorization":
            return bearer_token(value.decode("latin-1"))
    return None


def exchange(scope: dict[str, Any], status: int, error_body: bytes, started: float,
             request_id: str) -> dict[str, Any]:
    """The record of one finished exchange (``status`` -1: the connection was cut)."""
    notes: dict[str, Any] = scope.get(NOTES) or {}
    name = notes.get("route") or getattr(scope.get("endpoint"), "__name__", None)
    spec = ROUTES_BY_NAME.get(name) if isinstance(name, str) else None
    code, message = _error_fields(error_body) if status >= 400 and error_body else (None, None)
    query = scope.get("query_string") or b""
    return {
        "method": scope.get("method"),
        "path": str(scope.get("path", ""))[:MAX_TEXT],
        "query": query[:MAX_TEXT].decode("latin-1") if query else "",
        "route": spec.name if spec else None,
        "template": spec.path if spec else None,
        "status": status,
        "code": short(notes.get("code") or code),
        "message": message,
        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
        "at": time.time(),
        "request_id": request_id,
        "op": short(notes.get("op")),
        "delivery": short(notes.get("delivery")),
        "unknown_fields": notes.get("unknown_fields", []),  # short already (note_unknown)
        "injected": bool(notes.get("fault")),
    }


__all__ = ["RESULT_FORMS", "Accounts", "TrafficLog", "bearer_of", "exchange", "note", "note_unknown",
           "short"]
