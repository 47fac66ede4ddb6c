"""The gate's judgement: which exchanges of a test the service would have refused.

Pure data in, a list of offences out (no pytest, no HTTP), so the rules are easy to read
and to test: an answer 4xx/5xx the test did not declare (faults the test installed are
not the client's doing), JSON fields the contract does not know, chunk groups left open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contract.errors import ErrorCode

#: What a test may relax with ``@pytest.mark.fake_gs_gate(allow=...)``.
CHECKS = ("errors", "unknown_fields", "open_chunk_groups")
MODES = ("off", "warn", "fail")


@dataclass(frozen=True)
class Exchange:
    """One call the fake answered (an entry of ``GET /_fake/traffic``)."""

    seq: int
    method: str
    path: str
    route: str | None
    template: str | None
    status: int
    code: str | None = None
    message: str | None = None
    duration_ms: float = 0.0
    request_id: str | None = None
    op: str | None = None
    delivery: str | None = None
    unknown_fields: tuple[str, ...] = ()
    injected: bool = False
    query: str = ""
    at: float = 0.0

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Exchange:
        known = cls.__dataclass_fields__
        data = {k: v for k, v in raw.items() if k in known}
        data["unknown_fields"] = tuple(raw.get("unknown_fields") or ())
        return cls(**data)

    @property
    def refused(self) -> bool:
        """Answered 4xx/5xx, or cut off (status -1)."""
        return self.status >= 400 or self.status < 0

    def describe(self) -> str:
        where = f"{self.template} [{self.route}]" if self.template else f"{self.path} [no such route]"
        status = "connection cut" if self.status < 0 else str(self.status)
        what = f" {self.code}" if self.code else ""
        said = f": {self.message}" if self.message else ""
        return f"#{self.seq} {self.method} {where} -> {status}{what}{said} (request id {self.request_id})"


@dataclass
class Expectations:
    """Refusals a test declared (codes or statuses) and checks it relaxed."""

    errors: set[str | int] = field(default_factory=set)
    allowed: set[str] = field(default_factory=set)

    def declares(self, ex: Exchange) -> bool:
        return ex.status in self.errors or (ex.code is not None and ex.code in self.errors)


def offences(exchanges: Iterable[Exchange], open_groups: Iterable[Mapping[str, Any]],
             expected: Expectations) -> list[str]:
    """One line per problem, in the order the exchanges happened."""
    found: list[str] = []
    unknown_declared = ErrorCode.UNKNOWN_FIELD in expected.errors or "unknown_fields" in expected.allowed
    for ex in exchanges:
        if ex.refused and not ex.injected and "errors" not in expected.allowed and not expected.declares(ex):
            found.append(ex.describe())
        if ex.unknown_fields and not unknown_declared:
            names = ", ".join(ex.unknown_fields)
            found.append(f"unknown field(s) {names} sent in {ex.describe()}")
    if "open_chunk_groups" not in expected.allowed:
        for g in open_groups:
            found.append(f"chunk group {g.get('chunk_group_id')} of job {g.get('job_id')} ({g.get('route')}) "
                         f"left open: {g.get('received_chunks')} of {g.get('total_chunks')} chunks received")
    return found


def message(test: str, problems: list[str], more: int = 0) -> str:
    lines = [f"fake_gs gate: {len(problems)} problem(s) the service would refuse in {test}:"]
    lines += [f"  - {p}" for p in problems]
    if more > 0:
        lines.append(f"  (and {more} earlier flagged exchange(s) no longer kept by the fake's traffic log)")
    lines.append('Declare an expected refusal with fake_gs.expect_error("<code>") or its status, '
                 'or relax the gate with @pytest.mark.fake_gs_gate("warn") / allow=(...).')
    return "\n".join(lines)
