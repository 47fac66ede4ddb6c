"""Every knob of the fake in one dataclass, shared by the CLI, the app and the tests.

Defaults suit tests: loopback, any port, instant start-up and latency, the proposed profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from contract.idempotency import KEY_WINDOW_S
from contract.limits import MAX_BODY_BYTES, MAX_EVENTS_CAP, MiB
from contract.wire import MIN_RESULT_CHUNK_BYTES
from fake_gs.answers import on_by_env

Profile = Literal["current", "proposed"]
StatusStyle = Literal["short", "enum"]
Delivery = Literal["auto", "inline", "chunks"]
Dialect = Literal["kit", "spec"]


@dataclass(frozen=True)
class Timing:
    """``instant``, ``polls:N`` (ready on the N-th poll) or ``seconds:T`` (ready T s after start)."""

    kind: Literal["instant", "polls", "seconds"] = "instant"
    amount: float = 0.0

    @classmethod
    def parse(cls, text: str | Timing) -> Timing:
        if isinstance(text, Timing):
            return text
        raw = str(text).strip().lower()
        if raw in ("", "instant", "0"):
            return cls()
        kind, sep, value = raw.partition(":")
        if not sep or kind not in ("polls", "seconds"):
            raise ValueError(f"timing must be instant, polls:N or seconds:T, got {text!r}")
        try:
            amount = int(value) if kind == "polls" else float(value)
        except ValueError:
            raise ValueError(f"bad number in timing {text!r}") from None
        if amount < 0:
            raise ValueError(f"timing {text!r} must not be negative")
        if amount == 0:
            return cls()
        return cls(kind, float(amount))  # type: ignore[arg-type]

    def __str__(self) -> str:
        if self.kind == "instant":
            return "instant"
        if self.kind == "polls":
            return f"polls:{int(self.amount)}"
        return f"seconds:{self.amount:g}"


@dataclass(frozen=True)
class FakeSettings:
    """Options of the fake server; see ``fake-gs --help`` for each."""

    host: str = "127.0.0.1"
    port: int = 8080
    profile: Profile = "proposed"
    seed: int = 0
    tokens: tuple[str, ...] = ()
    strict: bool = False
    status_style: StatusStyle = "short"
    startup: Timing = field(default_factory=Timing)
    latency: Timing = field(default_factory=Timing)
    result_delivery: Delivery = "auto"
    result_chunk_bytes: int = 1 * MiB
    max_total_gpus: int = 64
    allow_any_model: bool = False
    engine: str = "shape"
    mutant: str | None = None
    faults: str | None = None
    log_level: str = "info"
    #: Serve HTTPS with a certificate from a throwaway CA made at start-up (``tls`` extra).
    tls: bool = False
    #: Answer forms: kit (the kit's own) or spec (the other forms the published spec allows;
    #: fake_gs.dialect).
    dialect: Dialect = "kit"
    #: Limits (rarely changed; tests use them to stay small and fast).
    max_body_bytes: int = MAX_BODY_BYTES
    max_open_groups_per_job: int = 64
    max_buffered_bytes_per_job: int = 2048 * MiB
    #: Chunk bytes buffered by every job together (429 chunk_group_limit beyond it).
    max_buffered_bytes_total: int = 8192 * MiB
    #: An open chunk group untouched this long is forgotten and its bytes freed.
    chunk_group_idle_s: float = 900.0
    #: Request-frame limits (LIMIT-FRAME-1): the safetensors header length, d/l/u nesting,
    #: tensor count, and the UTF-8 size of each JSON metadata string (dss, op).
    max_frame_header_bytes: int = 16 * MiB
    max_tree_depth: int = 64
    max_tensors: int = 10_000
    max_frame_json_bytes: int = 16 * MiB
    #: JSON arrays and objects in one JSON body or one frame header: bounds the memory and
    #: time a "[[],[],...]" bomb costs (json.loads makes a Python object of each).
    max_json_containers: int = 250_000
    #: ``max_events`` on a poll is clamped to this (the contract says 512).
    max_events_cap: int = MAX_EVENTS_CAP
    #: Hardening (issue 12). A request body with no new bytes for this long answers 408.
    body_idle_s: float = 30.0
    #: Bytes of every request body being received at once; beyond it 503 + Retry-After.
    max_inflight_bytes: int = 1024 * MiB
    #: Unread results one job keeps; beyond it the oldest are freed (their polls get 410).
    max_results_bytes: int = 1024 * MiB
    #: A result read to the end stays this long (a retried last page), or until newer reads
    #: of the job push it out of the ``results_read_kept`` newest.
    result_grace_s: float = 10.0
    results_read_kept: int = 4
    #: Chunk-group caps per account (bearer token) on top of those per job and per server,
    #: so one account's abandoned uploads cannot block another's.
    max_open_groups_per_account: int = 256
    max_buffered_bytes_per_account: int = 2048 * MiB
    #: With tokens set, the only credential of the admin API (/_fake/*, exports excepted).
    admin_token: str | None = None
    #: How long a poll waits for a request that is due but still executing.
    poll_wait_s: float = 1.0
    #: Write a parity tape of every exchange the fake serves to this file (``--record``).
    record: str | None = None
    export_ttl_s: float = 3600.0
    #: Proposed profile: how long an Idempotency-Key and its answer are kept, and how many
    #: keys one account keeps at most (the oldest go first).
    idempotency_window_s: float = KEY_WINDOW_S
    max_idempotency_keys: int = 10_000
    worker_threads: int = 4
    #: Exchanges kept per account for ``GET /_fake/traffic`` (0: no traffic log); with a
    #: log, unknown JSON fields are reported there rather than refused (unless ``strict``).
    traffic: int = 0
    #: Check every JSON answer against its contract model; one that does not validate is a
    #: 500, never sent (fake_gs.answers). On by default where ``FAKE_GS_VALIDATE_ANSWERS=1``
    #: (the test suite).
    validate_answers: bool = field(default_factory=on_by_env)

    def __post_init__(self) -> None:
        object.__setattr__(self, "startup", Timing.parse(self.startup))
        object.__setattr__(self, "latency", Timing.parse(self.latency))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        if self.profile not in ("current", "proposed"):
            raise ValueError(f"profile must be current or proposed, got {self.profile!r}")
        if self.status_style not in ("short", "enum"):
            raise ValueError(f"status_style must be short or enum, got {self.status_style!r}")
        if self.result_delivery not in ("auto", "inline", "chunks"):
            raise ValueError(f"result_delivery must be auto, inline or chunks, got {self.result_delivery!r}")
        if self.dialect not in ("kit", "spec"):
            raise ValueError(f"dialect must be kit or spec, got {self.dialect!r}")
        if self.result_chunk_bytes < MIN_RESULT_CHUNK_BYTES:
            raise ValueError(f"result_chunk_bytes must be at least {MIN_RESULT_CHUNK_BYTES} "
                             "(a result chunk's own header plus one payload byte)")
        if self.max_total_gpus < 0:
            raise ValueError("max_total_gpus must be >= 0")
        for name in ("max_body_bytes", "max_open_groups_per_job", "max_buffered_bytes_per_job",
                     "max_buffered_bytes_total", "max_frame_header_bytes", "max_tree_depth",
                     "max_tensors", "max_frame_json_bytes", "max_json_containers", "max_events_cap",
                     "max_idempotency_keys", "max_inflight_bytes", "max_results_bytes",
                     "results_read_kept", "max_open_groups_per_account",
                     "max_buffered_bytes_per_account"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.traffic, bool) or not isinstance(self.traffic, int) or self.traffic < 0:
            raise ValueError(f"traffic must be an integer >= 0, got {self.traffic!r}")
        for name in ("chunk_group_idle_s", "body_idle_s", "result_grace_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")
        if not self.idempotency_window_s > 0:
            raise ValueError("idempotency_window_s must be > 0")
        if self.admin_token is not None and (not self.admin_token or self.admin_token in self.tokens):
            raise ValueError("admin_token must be non-empty and differ from every service --token")
        if self.mutant is not None:
            from fake_gs.mutants import MUTANTS

            if self.mutant not in MUTANTS:
                raise ValueError(f"unknown mutant {self.mutant!r}; known: {', '.join(sorted(MUTANTS))}")
            if MUTANTS[self.mutant].engine not in (None, self.engine):
                raise ValueError(f"mutant {self.mutant!r} needs --engine {MUTANTS[self.mutant].engine}")

    def with_overrides(self, **overrides: Any) -> FakeSettings:
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        return replace(self, **overrides)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens)

    @property
    def spec_dialect(self) -> bool:
        return self.dialect == "spec"
