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
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

#: Counters (``nth``, ``every``, ``times``) start at one; ``after`` may be zero.
_Count = Annotated[int, Field(ge=1)]
_Seconds = Annotated[float, Field(ge=0, le=3600)]


class FaultRule(BaseModel):
    """One rule, validated strictly: a bad field is refused by name (no coercion, so
    ``"drop": "yes"`` or ``"nth": true`` is an error, not a surprise)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    route: str = Field("*", description="Route name (create_job, get_job, forward_backward, get_request, step, operation, ...; see contract.routes) or * for every route.")
    method: str | None = Field(None, description="Only calls with this HTTP method.")
    op: str | None = Field(None, description="Only operation calls of this operation_type (for other routes: the route name).")
    job: str | None = Field(None, description="Only calls on this job id.")
    chunk: int | str | None = Field(None, description="Only request chunks with this chunk_idx, or first / final (a body that is no request chunk does not match).")
    nth: _Count | None = Field(None, description="Fire on the n-th matching call only.")
    after: Annotated[int, Field(ge=0)] | None = Field(None, description="Fire only after the first N matching calls (with times: a burst).")
    every: _Count | None = Field(None, description="Fire on every k-th matching call.")
    probability: Annotated[float, Field(ge=0, le=1)] | None = Field(None, description="Fire with this probability (seeded by the fake's --seed).")
    times: _Count | None = Field(None, description="Fire at most this often.")
    status: Annotated[int, Field(ge=400, le=599)] | None = Field(None, description="Answer this HTTP status with the error envelope.")
    code: str | None = Field(None, description="The envelope's code (default: the status's general code: 429 rate_limited, 503 unavailable, 409 conflict, ...).")
    message: str | None = Field(None, description="The envelope's message.")
    retry_after: _Seconds | None = Field(None, description="Seconds for the Retry-After header (429 and 503 carry 1 by default).")
    delay_s: _Seconds = Field(0.0, description="Wait this long first (latency; longer than a client's read time-out is a time-out).")
    drop: bool = Field(False, description="Cut the connection before the call runs: the client sees a connection error, not a status.")
    lose_group: bool = Field(False, description="Forget the job's unfinished chunk groups (as after a restart), then run the call: the next chunk of a lost group answers 409 chunk_group_restart_required.")
    lose_answer: bool = Field(False, description="Run the call, then cut the connection instead of answering (the client cannot tell it ran).")
    _seen: int = PrivateAttr(0)
    _fired: int = PrivateAttr(0)

    @field_validator("chunk", mode="before")
    @classmethod
    def _chunk(cls, value: Any) -> Any:
        if value is None or value in ("first", "final") or (
                type(value) is int and value >= 0):
            return value
        raise ValueError("chunk must be a chunk index >= 0, 'first' or 'final'")

    @model_validator(mode="after")
    def _one_action(self) -> FaultRule:
        if self.status is None and not (self.drop or self.delay_s or self.lose_group or self.lose_answer):
            raise ValueError("a fault rule needs an action: status, drop, delay_s, lose_group or lose_answer")
        if sum(1 for x in (self.status is not None, self.drop, self.lose_answer) if x) > 1:
            raise ValueError("status, drop and lose_answer exclude each other")
        return self

    @property
    def seen(self) -> int:
        """Matching calls counted so far (while the rule could still fire)."""
        return self._seen

    @property
    def fired(self) -> int:
        return self._fired

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

    def fires(self, rng: random.Random) -> bool:
        """Count one matching call; does the rule act on it? (Caller holds the lock.)"""
        if self.times is not None and self._fired >= self.times:
            return False
        self._seen += 1
        seen = self._seen
        if ((self.nth is not None and seen != self.nth)
                or (self.after is not None and seen <= self.after)
                or (self.every is not None and seen % self.every)
                or (self.probability is not None and rng.random() >= self.probability)):
            return False
        self._fired += 1
        return True

    def action(self) -> FaultAction:
        return FaultAction(self.delay_s, self.drop, self.status, self.code, self.message,
                           self.retry_after, self.lose_group, self.lose_answer)

    def public(self) -> dict[str, Any]:
        shown = {k: v for k, v in self.model_dump().items() if v is not None and v is not False}
        return {**shown, "seen": self._seen, "fired": self._fired}


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
                if rule.matches(route, method, op, job, chunk) and rule.fires(self._rng):
                    return rule.action()
        return None


_RULES = TypeAdapter(list[FaultRule])


def parse_rules(data: Any) -> list[FaultRule]:
    """Rules from parsed JSON/YAML: a list, or ``{"rules": [...]}``. Raises pydantic's
    ``ValidationError`` (locations ``index.field``) or ``ValueError`` for the outer shape."""
    if isinstance(data, dict):
        data = data.get("rules", [])
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValueError("fault rules must be a list (or {'rules': [...]})")
    return _RULES.validate_python(data)


def describe(exc: ValidationError) -> str:
    """One line per bad field: ``rule 0: delay_s: Input should be ...``."""
    lines = []
    for err in exc.errors(include_url=False, include_input=False):
        index, *where = err.get("loc", ()) or ("?",)
        lines.append(f"rule {index}: {'.'.join(str(p) for p in where) or 'rule'}: {err.get('msg')}")
    return "; ".join(lines)


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
    except ValidationError as exc:
        raise ValueError(f"fault rules file {path}: {describe(exc)}") from None
    except ValueError as exc:
        raise ValueError(f"fault rules file {path}: {exc}") from None


__all__ = ["FaultAction", "FaultInjector", "FaultRule", "describe", "load_rules_file", "parse_rules"]
