"""Fault injection: rules consulted before each service request (the hook point).

A rule *matches* a call by route name (``forward_backward``, ``get_request``, ... or ``*``),
HTTP ``method``, ``op`` (the ``operation_type`` of an ``operation`` call; for every other
route the route name itself), ``job`` (the job id in the path) and ``chunk`` (a request
chunk's index, ``first`` or ``final``; a body that is no request chunk never matches a
rule with ``chunk``). Among matching calls it
*fires* on the ``nth`` one, on every one ``after`` the first N, on every ``every``-th
one, and/or with a seeded ``probability``, at most ``times`` times (so ``{"after": 2,
"times": 3}`` fails the 3rd, 4th and 5th matching calls: a burst). When it fires it may:

* wait ``delay_s`` seconds first (latency; longer than the client's read time-out looks
  like a time-out to it);
* ``drop`` the connection before the call runs (the client sees a connection error, not an
  HTTP status);
* answer ``status`` with the contract's error envelope (``code``, ``message``) and, when
  ``retry_after`` is given, a ``Retry-After`` header (429 and 503 carry ``1`` by default);
* ``lose_group``: forget the job's unfinished chunk groups (as after a server restart),
  then run the call: a later chunk of a lost group answers ``chunk_group_restart_required``;
* ``lose_answer``: run the call, then drop the connection instead of answering (the
  client cannot tell whether it ran; a forward-backward final chunk must then resolve to
  the same single execution when replayed).

Rules come from ``--faults FILE`` (JSON or YAML: a list, or ``{"rules": [...]}``) and from
the admin API (``PUT``/``POST``/``DELETE /_fake/faults``). With no rules the injector costs
one attribute check per call.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass
class FaultRule:
    route: str = "*"
    method: str | None = None
    op: str | None = None
    job: str | None = None
    chunk: int | str | None = None
    nth: int | None = None
    after: int | None = None
    every: int | None = None
    probability: float | None = None
    times: int | None = None
    status: int | None = None
    code: str | None = None
    message: str | None = None
    retry_after: float | None = None
    delay_s: float = 0.0
    drop: bool = False
    lose_group: bool = False
    lose_answer: bool = False
    seen: int = field(default=0, repr=False)
    fired: int = field(default=0, repr=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FaultRule:
        if not isinstance(raw, dict):
            raise ValueError(f"a fault rule must be an object, got {type(raw).__name__}")
        known = {f.name for f in fields(cls)} - {"seen", "fired"}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown fault rule fields: {', '.join(sorted(unknown))}")
        rule = cls(**raw)
        rule.validate()
        return rule

    def validate(self) -> None:
        def is_int(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        for name in ("route", "method", "op", "job", "code", "message"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string")
        chunk = self.chunk
        if chunk is not None and not (
            (isinstance(chunk, int) and not isinstance(chunk, bool) and chunk >= 0) or chunk in ("first", "final")
        ):
            raise ValueError("chunk must be a chunk index >= 0, 'first' or 'final'")
        for name in ("nth", "every", "times"):
            value = getattr(self, name)
            if value is not None and not (is_int(value) and value >= 1):
                raise ValueError(f"{name} must be an integer >= 1")
        if self.after is not None and not (is_int(self.after) and self.after >= 0):
            raise ValueError("after must be an integer >= 0")
        if self.probability is not None and not (
            isinstance(self.probability, (int, float)) and not isinstance(self.probability, bool)
            and 0.0 <= self.probability <= 1.0
        ):
            raise ValueError("probability must be a number in [0, 1]")
        if self.status is not None and not (is_int(self.status) and 400 <= self.status <= 599):
            raise ValueError("status must be an HTTP error status (400-599)")
        for name in ("delay_s", "retry_after"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 3600
            ):
                raise ValueError(f"{name} must be a number of seconds in [0, 3600]")
        for name in ("drop", "lose_group", "lose_answer"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false")
        if self.status is None and not (self.drop or self.delay_s or self.lose_group or self.lose_answer):
            raise ValueError("a fault rule needs an action: status, drop, delay_s, lose_group or lose_answer")
        if sum(1 for x in (self.status is not None, self.drop, self.lose_answer) if x) > 1:
            raise ValueError("status, drop and lose_answer exclude each other")

    def matches(self, route: str, method: str, op: str | None, job: str | None,
                chunk: tuple[int, int] | None = None) -> bool:
        if self.route not in ("*", route):
            return False
        if self.method and self.method.upper() != method:
            return False
        if self.op is not None and self.op != op:
            return False
        if self.job is not None and self.job != job:
            return False
        if self.chunk is None:
            return True
        if chunk is None:
            return False
        idx, total = chunk
        if self.chunk == "first":
            return idx == 0
        if self.chunk == "final":
            return idx == total - 1
        return idx == self.chunk

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v is not False}


@dataclass(frozen=True)
class FaultAction:
    delay_s: float = 0.0
    drop: bool = False
    status: int | None = None
    code: str | None = None
    message: str | None = None
    retry_after: float | None = None
    lose_group: bool = False
    lose_answer: bool = False


class FaultInjector:
    """Decides, per service request, whether a fault fires (thread-safe, seeded)."""

    def __init__(self, rules: list[FaultRule] | None = None, seed: int = 0) -> None:
        self._rules = list(rules or [])
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | Path, seed: int = 0) -> FaultInjector:
        return cls(load_rules_file(path), seed)

    def set_rules(self, rules: list[FaultRule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def add_rules(self, rules: list[FaultRule]) -> None:
        with self._lock:
            self._rules.extend(rules)

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.public() for r in self._rules]

    @property
    def active(self) -> bool:
        return bool(self._rules)

    def wants_op(self, route: str) -> bool:
        """Does any rule on ``route`` need the operation type (so the body must be peeked)?"""
        return any(r.op is not None and r.route in ("*", route) for r in self._rules)

    def wants_chunk(self, route: str) -> bool:
        """Does any rule on ``route`` select by chunk index (so the body must be peeked)?"""
        return any(r.chunk is not None and r.route in ("*", route) for r in self._rules)

    def decide(self, route: str, method: str, *, op: str | None = None, job: str | None = None,
               chunk: tuple[int, int] | None = None) -> FaultAction | None:
        """The first rule that matches and fires, as an action (None: no fault)."""
        if not self._rules:
            return None
        with self._lock:
            for rule in self._rules:
                if not rule.matches(route, method, op, job, chunk):
                    continue
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                rule.seen += 1
                if rule.nth is not None and rule.seen != rule.nth:
                    continue
                if rule.after is not None and rule.seen <= rule.after:
                    continue
                if rule.every is not None and rule.seen % rule.every:
                    continue
                if rule.probability is not None and self._rng.random() >= rule.probability:
                    continue
                rule.fired += 1
                return FaultAction(rule.delay_s, rule.drop, rule.status, rule.code, rule.message,
                                   rule.retry_after, rule.lose_group, rule.lose_answer)
        return None


def parse_rules(data: Any) -> list[FaultRule]:
    if isinstance(data, dict):
        data = data.get("rules", [])
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValueError("fault rules must be a list (or {'rules': [...]})")
    return [FaultRule.from_dict(item) for item in data]


def load_rules_file(path: str | Path) -> list[FaultRule]:
    """Rules from a JSON or YAML file (``--faults FILE``)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except ValueError:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"fault rules file {path} is neither JSON nor YAML: {exc}") from None
    try:
        return parse_rules(data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"fault rules file {path}: {exc}") from None


__all__ = ["FaultAction", "FaultInjector", "FaultRule", "load_rules_file", "parse_rules"]
