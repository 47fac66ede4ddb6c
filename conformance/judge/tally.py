"""What one judge counted, in a form that adds up across processes.

The passive judge (:mod:`conformance.judge`) books every clause it judged (``judged``)
and every violation with the side that broke it (``sides``: client or server).

Each Locust worker keeps one :class:`Tally` and sends it to the master when its users have
stopped (a custom message); the master adds them (:meth:`Tally.merge`) and judges the run
on the sum. Everything is plain counters keyed by strings, so a tally travels as msgpack
and is written as JSON unchanged.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.reporting.clean import clip

#: Examples kept per clause (the report shows the first few; counts stay exact).
EXAMPLES_KEPT = 3
#: The tally's flat counters (route key or error -> count).
_COUNTERS = ("exchanges", "failures", "sent", "received", "loop_errors", "judged")
#: The tally's nested counters (key -> name -> count).
_NESTED = ("calls", "step_calls", "steps", "sides")
#: Width of one point of the latency-over-time picture, in seconds.
TIMELINE_BUCKET_S = 1


def route_key(method: str, name: str) -> str:
    """``POST step``: a route as Locust's statistics name it (method and name)."""
    return f"{method} {name}"


def rounded_ms(ms: float) -> int:
    """Milliseconds to two significant digits above 100 (Locust rounds the same way), so a
    histogram of a long run stays small."""
    value = int(round(ms))
    for limit, digits in ((100, 0), (1000, -1), (10000, -2)):
        if value < limit:
            return int(round(value, digits))
    return int(round(value, -3))


def percentile(histogram: Counter[int] | dict[int, int], fraction: float) -> int:
    """The value below which ``fraction`` of a histogram's samples lie (0 when empty)."""
    total = sum(histogram.values())
    if not total:
        return 0
    want, seen = fraction * total, 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= want:
            return value
    return max(histogram)


@dataclass
class Tally:
    """One process's counts. ``calls``: per fake op name (the route name, ``op:<type>`` for
    an operation) how many calls were attempted (distinct Idempotency-Keys) and accepted
    (distinct request ids); ``steps``: per job, each ``global_steps`` a step answered."""

    node: str = "local"
    exchanges: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)
    received: Counter[str] = field(default_factory=Counter)
    violations: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    calls: dict[str, Counter[str]] = field(default_factory=dict)
    step_calls: dict[str, Counter[str]] = field(default_factory=dict)
    steps: dict[str, Counter[str]] = field(default_factory=dict)
    timeline: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    loop_errors: Counter[str] = field(default_factory=Counter)
    #: Per clause, how many times it was judged (a clause never judged is not seen, never green).
    judged: Counter[str] = field(default_factory=Counter)
    #: Per clause, its violations by the side that broke it (``client`` or ``server``).
    sides: dict[str, Counter[str]] = field(default_factory=dict)
    cpu_s: float = 0.0
    #: Told of each violation as it is booked (the run feeds it to Locust's failures).
    listener: Callable[[str, str, int], None] | None = field(default=None, repr=False, compare=False)

    def saw(self, clause_id: str) -> None:
        """One judgement of a clause (green unless a violation is booked too)."""
        self.judged[clause_id] += 1

    def violation(self, clause_id: str, example: str, count: int = 1, side: str = "server") -> None:
        """Book ``count`` violations of a clause by ``side``; keep the first few examples."""
        if count <= 0:
            return
        self.judged[clause_id] += count
        self.violations[clause_id] += count
        self.sides.setdefault(clause_id, Counter())[side] += count
        kept = self.examples.setdefault(clause_id, [])
        if len(kept) < EXAMPLES_KEPT:
            kept.append(clip(example, 400))  # scrubbed, then cut
        if self.listener is not None:
            self.listener(clause_id, example, count)

    def call(self, op: str, figure: str, job_id: str | None = None) -> None:
        """Count one attempted or accepted call of a fake op (and, for a step, of its job)."""
        self.calls.setdefault(op, Counter())[figure] += 1
        if op == "step" and job_id:
            self.step_calls.setdefault(job_id, Counter())[figure] += 1

    def step_seen(self, job_id: str, global_steps: int) -> None:
        self.steps.setdefault(job_id, Counter())[str(global_steps)] += 1

    def exchange(self, key: str, sent: int, received: int, elapsed_ms: float,
                 when: float | None = None, failed: bool = False) -> None:
        """One HTTP exchange of route ``key``: its bytes and a point of the timeline."""
        self.exchanges[key] += 1
        self.failures[key] += int(failed)
        self.sent[key] += sent
        self.received[key] += received
        bucket = str(int((time.time() if when is None else when) // TIMELINE_BUCKET_S))
        by_bucket = self.timeline.setdefault(key, {})
        by_bucket.setdefault(bucket, Counter())[str(rounded_ms(elapsed_ms))] += 1

    def merge(self, other: Tally) -> Tally:
        """Add ``other``'s counts into this tally (examples: the first few of both)."""
        for name in _COUNTERS:
            getattr(self, name).update(getattr(other, name))
        for clause_id, count in other.violations.items():
            self.violations[clause_id] += count
            kept = self.examples.setdefault(clause_id, [])
            kept.extend(other.examples.get(clause_id, [])[: EXAMPLES_KEPT - len(kept)])
        for name in _NESTED:
            mine = getattr(self, name)
            for key, counts in getattr(other, name).items():
                mine.setdefault(key, Counter()).update(counts)
        for key, buckets in other.timeline.items():
            mine_b = self.timeline.setdefault(key, {})
            for bucket, hist in buckets.items():
                mine_b.setdefault(bucket, Counter()).update(hist)
        self.cpu_s += other.cpu_s
        return self

    def to_wire(self) -> dict[str, Any]:
        """Plain dicts and lists (msgpack for the master, JSON for the results file)."""
        return {
            "node": self.node, "cpu_s": self.cpu_s,
            **{name: dict(getattr(self, name)) for name in
               (*_COUNTERS, "violations")},
            "examples": {k: list(v) for k, v in self.examples.items()},
            **{name: {k: dict(v) for k, v in getattr(self, name).items()}
               for name in _NESTED},
            "timeline": {k: {b: dict(h) for b, h in v.items()} for k, v in self.timeline.items()},
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Tally:
        counters: dict[str, Any] = {name: Counter(data.get(name) or {}) for name in
                    (*_COUNTERS, "violations")}
        nested: dict[str, Any] = {name: {k: Counter(v) for k, v in (data.get(name) or {}).items()}
                  for name in _NESTED}
        timeline = {k: {b: Counter(h) for b, h in v.items()}
                    for k, v in (data.get("timeline") or {}).items()}
        return cls(node=str(data.get("node", "?")), cpu_s=float(data.get("cpu_s", 0.0)),
                   examples={k: list(v) for k, v in (data.get("examples") or {}).items()},
                   timeline=timeline, **counters, **nested)
