"""Fault injection: rules consulted before each service request (the hook point).

A rule matches a route (by name, e.g. ``forward_backward``, or ``*``) and method, fires on
the ``nth`` matching call or with a seeded ``probability`` (at most ``times`` times), and
then delays, drops the connection, or answers ``status`` with an error envelope. Rules come
from ``--faults FILE`` (JSON or YAML: a list, or ``{"rules": [...]}``) or from
``PUT /_fake/faults``. With no rules the injector is a no-op.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class FaultRule:
    route: str = "*"
    method: str | None = None
    nth: int | None = None
    probability: float | None = None
    times: int | None = None
    status: int | None = None
    code: str | None = None
    message: str | None = None
    delay_s: float = 0.0
    drop: bool = False
    seen: int = field(default=0, repr=False)
    fired: int = field(default=0, repr=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FaultRule:
        if not isinstance(raw, dict):
            raise ValueError(f"a fault rule must be an object, got {type(raw).__name__}")
        known = {"route", "method", "nth", "probability", "times", "status", "code", "message", "delay_s", "drop"}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown fault rule fields: {', '.join(sorted(unknown))}")
        rule = cls(**raw)
        if rule.status is None and not rule.drop and not rule.delay_s:
            raise ValueError("a fault rule needs a status, drop or delay_s")
        return rule

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class FaultAction:
    delay_s: float = 0.0
    drop: bool = False
    status: int | None = None
    code: str | None = None
    message: str | None = None


class FaultInjector:
    """Decides, per service request, whether a fault fires (thread-safe, seeded)."""

    def __init__(self, rules: list[FaultRule] | None = None, seed: int = 0) -> None:
        self._rules = list(rules or [])
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str | Path, seed: int = 0) -> FaultInjector:
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except ValueError:
            import yaml

            data = yaml.safe_load(text)
        return cls(parse_rules(data), seed)

    def set_rules(self, rules: list[FaultRule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def rules(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.public() for r in self._rules]

    def decide(self, route: str, method: str) -> FaultAction | None:
        if not self._rules:
            return None
        with self._lock:
            for rule in self._rules:
                if rule.route not in ("*", route) or (rule.method and rule.method.upper() != method):
                    continue
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                rule.seen += 1
                if rule.nth is not None and rule.seen != rule.nth:
                    continue
                if rule.probability is not None and self._rng.random() >= rule.probability:
                    continue
                rule.fired += 1
                return FaultAction(rule.delay_s, rule.drop, rule.status, rule.code, rule.message)
        return None


def parse_rules(data: Any) -> list[FaultRule]:
    if isinstance(data, dict):
        data = data.get("rules", [])
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValueError("fault rules must be a list (or {'rules': [...]})")
    return [FaultRule.from_dict(item) for item in data]
