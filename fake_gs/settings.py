"""Every knob of the fake in one dataclass, shared by the CLI, the app and the tests.

Each field is declared once, as a row of the option table: its type, default, bound and,
for those the command line sets, its ``fake-gs`` flag, help and group (``fake_gs.options``;
``fake_gs.cli`` builds its parser from these rows). Defaults suit tests: loopback, any
port, instant start-up and latency, the proposed profile.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from contract.forms import (
    DEFAULT_DELIVERY,
    DEFAULT_DIALECT,
    DEFAULT_STATUS_STYLE,
    Delivery,
    Dialect,
    StatusStyle,
)
from contract.idempotency import KEY_WINDOW_S
from contract.limits import MAX_BODY_BYTES, MAX_EVENTS_CAP, MAX_JSON_VALUES, RETENTION_BOUNDS, MiB
from contract.routes import DEFAULT_PROFILE, Profile
from contract.tape.body_store import BODY_MODES, BUDGET_MIB, DEFAULT_BODY_MODE
from contract.wire import MIN_RESULT_CHUNK_BYTES
from fake_gs.answers.check import on_by_env
from fake_gs.answers.forms import Forms, forms_for
from fake_gs.controls.seams import VARIATION_FLAG_ALIASES, VARIATIONS, Seams, seams_for
from fake_gs.engines import ENGINES
from fake_gs.options import bound_of, option

#: The variable that sets the default answer dialect (``--dialect``) of every fake built.
DIALECT_ENV = "FAKE_GS_DIALECT"


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
        return cls("polls" if kind == "polls" else "seconds", float(amount))

    def __str__(self) -> str:
        if self.kind == "instant":
            return "instant"
        if self.kind == "polls":
            return f"polls:{int(self.amount)}"
        return f"seconds:{self.amount:g}"


#: The option groups of ``fake-gs --help`` (title: description), in the order shown.
FLAG_GROUPS = {
    "limits": "bounds so no client can exhaust the fake (LIMIT-* clauses)",
    "hardening": "bounds on what a hostile or buggy client can hold",
    "TLS and recipes": "what a recipe needs to reach the fake as it reaches the service",
}
_LIM, _HARD, RECIPE_GROUP = FLAG_GROUPS
_TIMING = "instant|polls:N|seconds:T"


@dataclass(frozen=True)
class FakeSettings:
    """Options of the fake server, one row each: type, default, then the flag, its help and how
    it parses (fields without a flag are set by the app, the pytest plugin or the tests)."""

    host: str = option("127.0.0.1", "--host", "interface to bind (loopback by default)")
    port: int = option(8080, "--port", "port to listen on; 0 picks a free one (printed)")
    profile: Profile = option(DEFAULT_PROFILE, "--profile", "current: today's documented surface (proposed routes answer 404); proposed: everything")
    seed: int = option(0, "--seed", "seed of every synthesised value")
    tokens: tuple[str, ...] = option((), "--token", "accept this bearer token (repeatable); enables auth and per-token job isolation", metavar="TOKEN", secret=True)
    strict: bool = option(False, "--strict", "refuse unknown JSON fields with 400 unknown_field naming the field")
    status_style: StatusStyle = option(DEFAULT_STATUS_STYLE, "--status-style", "spell statuses 'running'/'done' or 'JOB_STATE_RUNNING'/'REQUEST_STATE_DONE'")
    startup: Timing = option(Timing(), "--startup", "job start-up: running at once, after N GETs of the job, or T seconds after placement", metavar=_TIMING)
    latency: Timing = option(Timing(), "--latency", "async request latency: done on the first poll, on the N-th poll, or T seconds after submit", metavar=_TIMING)
    result_delivery: Delivery = option(DEFAULT_DELIVERY, "--result-delivery", "tensor results: inline base64 frames, result-chunk events, or auto by size")
    result_chunk_bytes: int = option(1 * MiB, "--result-chunk-bytes", "result chunk size, and the auto-mode inline threshold (any size that holds a chunk header plus one payload byte)")
    max_total_gpus: int = option(64, "--max-total-gpus", "account GPU capacity; jobs that do not fit stay pending")
    allow_any_model: bool = option(False, "--allow-any-model", "accept any model name (default: only the models the real service caches)")
    engine: str = option("shape", "--engine", "shape: seeded synthetic results; tiny: a small real causal LM on CPU", choices=tuple(sorted(ENGINES)))
    tiny_max_batch_tokens: int = option(65_536, "--tiny-max-batch-tokens", "tiny engine: tokens (rows x sequence length) of one forward(-backward) batch; more answers 400 limit_exceeded, as does rows x length^2 over 1024 times it", bound="positive")
    variation: str | None = option(None, "--variation", "run with a deliberate violation of the contract (for conformance self-tests): %(choices)s", metavar="NAME", choices=tuple(sorted(VARIATIONS)), aliases=VARIATION_FLAG_ALIASES)
    faults: str | None = option(None, "--faults", "fault rules file (JSON or YAML); also set at run time via /_fake/faults", metavar="FILE")
    log_level: str = option("info", "--log-level", "log verbosity", choices=("critical", "error", "warning", "info", "debug"))
    tls: bool = option(False, "--tls", "serve HTTPS with a certificate from a throwaway CA made now (needs the tls extra); prints the CA bundle and the exports a client needs", group=RECIPE_GROUP)
    #: Answer forms (fake_gs.answers.forms); $FAKE_GS_DIALECT sets the default (the e2e tests: any).
    dialect: Dialect = option(DEFAULT_DIALECT, "--dialect", env=DIALECT_ENV, help="answer forms: kit (string error codes, null for empty poll fields, ...), spec (the other forms the published spec allows: integer codes and detail lists, '' for empty poll fields, omitted zero capacity fields, last_lr lists, server-chosen checkpoint ids, 204 deletes, empty log pages while placing, a visible cancelling) or any (per answer, a choice seeded by --seed among every form of contract.forms: request-state synonyms, non-UUID ids, 422 detail lists, unknown fields, capped capacity, ...)")
    #: Limits (rarely changed; tests use them to stay small and fast).
    max_body_bytes: int = option(MAX_BODY_BYTES, "--max-body-mib", "largest accepted request body in MiB (the contract says 60)", bound="positive", unit=MiB)
    max_open_groups_per_job: int = option(64, "--max-open-groups", "open chunk groups per job; one more answers 429 chunk_group_limit", bound="positive", group=_LIM)
    max_buffered_bytes_per_job: int = option(2048 * MiB, "--max-buffered-mib", "chunk bytes buffered per job; more answers 413 buffer_limit", bound="positive", group=_LIM, unit=MiB)
    max_buffered_bytes_total: int = option(8192 * MiB, "--max-total-buffered-mib", "chunk bytes buffered by all jobs together, shared fairly between accounts; more answers 429 chunk_group_limit", bound="positive", group=_LIM, unit=MiB)
    max_open_groups_total: int = option(1024, "--max-open-groups-total", "open chunk groups of all accounts together, shared fairly between them; one more answers 429 chunk_group_limit", bound="positive", group=_LIM)
    chunk_group_idle_s: float = option(900.0, "--chunk-group-idle-s", "an unfinished chunk group idle this long is forgotten and its bytes freed", bound="non_negative", group=_LIM)
    #: Request-frame limits (LIMIT-FRAME-1), checked before a frame is parsed.
    max_frame_header_bytes: int = option(16 * MiB, "--max-frame-header-bytes", "largest safetensors header of a request frame (checked before parsing)", bound="positive", group=_LIM)
    max_tree_depth: int = option(64, "--max-tree-depth", "deepest d/l/u nesting of a request frame's tree", bound="positive", group=_LIM)
    max_tensors: int = option(10_000, "--max-tensors", "most tensors in one request frame", bound="positive", group=_LIM)
    max_frame_json_bytes: int = option(16 * MiB, "--max-frame-json-bytes", "largest dss/op JSON metadata string in a request frame", bound="positive", group=_LIM)
    #: Bounds the memory and time a "[[],[],...]" bomb costs (json.loads makes an object of each).
    max_json_containers: int = option(250_000, "--max-json-containers", "JSON arrays/objects allowed in one JSON body or frame header", bound="positive", group=_LIM)
    #: Bounds the cost of parsing one JSON body: values, counted before parsing.
    max_json_values: int = option(MAX_JSON_VALUES, "--max-json-values", "JSON values (numbers, strings, arrays, objects) allowed in one JSON body; more answers 413 naming the bound, before parsing", bound="positive", group=_LIM)
    max_events_cap: int = option(MAX_EVENTS_CAP, "--max-events-cap", "max_events on a poll is clamped to this (the contract says 512)", bound="positive", group=_LIM)
    #: Hardening.
    body_idle_s: float = option(30.0, "--body-idle-s", "a request body with no new bytes this long answers 408 and is freed (0: never)", bound="non_negative", group=_HARD)
    max_inflight_bytes: int = option(1024 * MiB, "--max-inflight-mib", "bytes of all request bodies being received at once, shared fairly between accounts; more answers 503 + Retry-After", bound="positive", group=_HARD, unit=MiB)
    max_results_bytes: int = option(1024 * MiB, "--max-results-mib", "unread results one job keeps; beyond it the oldest are freed (polls get 410)", bound="positive", group=_HARD, unit=MiB)
    #: A result read to the end stays this long (a retried last page), or until newer reads
    #: of the job push it out of the ``results_read_kept`` newest.
    result_grace_s: float = option(10.0, bound="non_negative")
    results_read_kept: int = option(4, bound="positive")
    #: Per account (bearer token), on top of the caps per job and per server, so one
    #: account's abandoned uploads cannot block another's.
    max_open_groups_per_account: int = option(256, "--max-open-groups-per-account", "open chunk groups of one account (token) over all its jobs", bound="positive", group=_HARD)
    max_buffered_bytes_per_account: int = option(2048 * MiB, "--max-account-buffered-mib", "chunk bytes one account (token) may buffer over all its jobs", bound="positive", group=_HARD, unit=MiB)
    #: The execution-log stage (spec §12.2) holds the fake's own log files: a cache, so past
    #: a cap the least recently written runs' files are dropped (rewritten when asked for).
    max_stage_bytes_per_account: int = option(64 * MiB, "--max-stage-mib-per-account", "execution-log stage bytes one account (token) holds; its least recently fetched runs' files go first", bound="positive", group=_HARD, unit=MiB)
    max_stage_bytes_total: int = option(512 * MiB, "--max-stage-mib", "execution-log stage bytes of all accounts together (the stage process refuses more)", bound="positive", group=_HARD, unit=MiB)
    #: Per-account retention caps (fake_gs.state.quotas), defaults from contract.limits.
    max_text_bytes: int = option(RETENTION_BOUNDS["text_bytes"], "--max-text-bytes", "UTF-8 bytes of one free-text string of a create body (experiment_name, model names, config keys and values); more answers 400 limit_exceeded", bound="positive", group=_HARD)
    max_account_config_bytes: int = option(RETENTION_BOUNDS["job_config_bytes"], "--max-account-config-mib", "memory one account's job configs keep, counted as the objects kept (several times the JSON of small values; list_jobs answers them all); more answers 400 limit_exceeded", bound="positive", group=_HARD, unit=MiB)
    max_config_bytes_total: int = option(256 * MiB, "--max-config-mib", "memory the job configs of all accounts together keep, counted as --max-account-config-mib counts; more answers 400 limit_exceeded", bound="positive", group=_HARD, unit=MiB)
    max_jobs_per_account: int = option(RETENTION_BOUNDS["jobs"], "--max-jobs-per-account", "jobs one account (token) holds, ended ones included; one more answers 400 limit_exceeded", bound="positive", group=_HARD)
    max_checkpoints_per_account: int = option(RETENTION_BOUNDS["checkpoints"], "--max-checkpoints-per-account", "checkpoints one account keeps over all its jobs; a save past it answers 400 limit_exceeded (delete some)", bound="positive", group=_HARD)
    max_exports_per_account: int = option(RETENTION_BOUNDS["exports"], "--max-exports-per-account", "live exports of one account; one more frees its oldest (that URL then answers 404)", bound="positive", group=_HARD)
    #: Connection deadlines and cap (fake_gs.http.connections).
    head_timeout_s: float = option(10.0, "--head-timeout-s", "a request head not complete this long after the connection opened (or its first byte after an answer) is answered 408 and closed (0: never)", bound="non_negative", group=_HARD)
    body_timeout_s: float = option(120.0, "--body-timeout-s", "a request body not complete this long after its head is answered 408 and closed, however steadily it trickles (0: never)", bound="non_negative", group=_HARD)
    max_connections: int = option(1000, "--max-connections", "open connections; one more closes the one waiting longest for a request head (503 when all are busy); lowered to fit the descriptor limit", bound="positive", group=_HARD)
    admin_token: str | None = option(None, "--admin-token", "the admin API's only credential when --token is set (service tokens get 403)", group=_HARD, metavar="TOKEN", secret=True)
    #: How long a poll waits for a request that is due but still executing.
    poll_wait_s: float = 1.0
    record: str | None = option(None, "--record", "write a parity tape (JSON lines) of every exchange served, for gs-parity", metavar="FILE")
    # -- parity tapes --
    record_bodies: str = option(DEFAULT_BODY_MODE, "--record-bodies", "what --record keeps of a request body too big to keep inline: bytes (out of line, each distinct body once, within --record-budget-mib) or outline (a frame's skeleton; gs-parity rebuilds it with seeded values)", choices=BODY_MODES)
    record_budget_mib: int = option(BUDGET_MIB, "--record-budget-mib", "size budget of the bodies --record keeps out of line; past it bodies are kept as their skeleton, with a warning", bound="positive")
    export_ttl_s: float = 3600.0
    idempotency_window_s: float = option(KEY_WINDOW_S, "--idempotency-window-s", "proposed profile: how long an Idempotency-Key and its answer are kept", group=_LIM)
    max_idempotency_keys: int = option(10_000, "--max-idempotency-keys", "Idempotency-Keys kept per account (the oldest go first)", bound="positive", group=_LIM)
    worker_threads: int = 4
    example_data: bool = option(False, "--example-data", "hold the resources the OpenAPI document's examples name (a running job, two checkpoints, a done save request, a job to cancel), so a generic tool's examples phase reaches every operation (schemathesis' CLI; see the docs' schemathesis page)", group=RECIPE_GROUP)
    traffic: int = option(0, "--traffic", "keep the last N exchanges per account for GET /_fake/traffic (0: off); unknown JSON fields are then reported there instead of refused (unless --strict)", metavar="N")
    #: Check every JSON answer against its contract model; one that does not validate is a
    #: 500, never sent (fake_gs.answers.check). On by default where ``FAKE_GS_VALIDATE_ANSWERS=1``
    #: (the test suite).
    validate_answers: bool = field(default_factory=on_by_env)

    def __post_init__(self) -> None:
        object.__setattr__(self, "startup", Timing.parse(self.startup))
        object.__setattr__(self, "latency", Timing.parse(self.latency))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        self._check_choices()
        self._check_bounds()
        if self.result_chunk_bytes < MIN_RESULT_CHUNK_BYTES:
            raise ValueError(f"result_chunk_bytes must be at least {MIN_RESULT_CHUNK_BYTES} "
                             "(a result chunk's own header plus one payload byte)")
        if self.max_total_gpus < 0:
            raise ValueError("max_total_gpus must be >= 0")
        if isinstance(self.traffic, bool) or not isinstance(self.traffic, int) or self.traffic < 0:
            raise ValueError(f"traffic must be an integer >= 0, got {self.traffic!r}")
        if not self.idempotency_window_s > 0:
            raise ValueError("idempotency_window_s must be > 0")
        if self.admin_token is not None and (not self.admin_token or self.admin_token in self.tokens):
            raise ValueError("admin_token must be non-empty and differ from every service --token")
        if self.variation is not None:
            self._check_variation(self.variation)

    def _check_choices(self) -> None:
        """Fields typed with a Literal take only its values (the CLI offers the same)."""
        for name, values in literal_choices().items():
            if getattr(self, name) not in values:
                either = f"{', '.join(values[:-1])} or {values[-1]}"
                raise ValueError(f"{name} must be {either}, got {getattr(self, name)!r}")

    def _check_bounds(self) -> None:
        for f in fields(self):
            bound, value = bound_of(f), getattr(self, f.name)
            if bound == "positive" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{f.name} must be a positive integer, got {value!r}")
            if bound == "non_negative" and not value >= 0:
                raise ValueError(f"{f.name} must be >= 0")

    def _check_variation(self, name: str) -> None:
        if name not in VARIATIONS:
            raise ValueError(f"unknown variation {name!r}; known: {', '.join(sorted(VARIATIONS))}")
        if VARIATIONS[name].engine not in (None, self.engine):
            raise ValueError(f"variation {name!r} needs --engine {VARIATIONS[name].engine}")

    def with_overrides(self, **overrides: Any) -> FakeSettings:
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        return replace(self, **overrides)

    @property
    def seams(self) -> Seams:
        """Where the running variation acts (``fake_gs/controls/seams.py``; none for the plain fake)."""
        return seams_for(self.variation)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens)

    @property
    def forms(self) -> Forms:
        """The choice of answer form for this fake's dialect and seed (fake_gs.answers.forms)."""
        return forms_for(self.dialect, self.seed)


@functools.cache
def literal_choices() -> dict[str, tuple[str, ...]]:
    """``{field: values}`` of every field typed with a Literal, read from the annotations."""
    hints = typing.get_type_hints(FakeSettings)
    return {name: typing.get_args(hint) for name, hint in hints.items()
            if typing.get_origin(hint) is Literal}
