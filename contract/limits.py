"""Numbers the contract fixes: body limits, event paging, poll and retry policy.

One home for every figure a server or client must agree on (spec §2, §6, §9).
"""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1024 * 1024

#: One HTTP request body is at most 60 MiB; bigger frames travel as request chunks.
MAX_BODY_BYTES = 60 * MiB
#: The default chunk size clients cut request frames into.
DEFAULT_CHUNK_BYTES = MAX_BODY_BYTES
#: ``max_events`` on a request poll: default and cap.
DEFAULT_MAX_EVENTS = 16
MAX_EVENTS_CAP = 512
#: generate's default ``max_tokens`` when sampling params give none (generate, spec §6.6).
DEFAULT_MAX_TOKENS = 16
#: Decided bounds on sampling inputs: one small body must not make a server
#: allocate gigabytes (a 134-byte log-probs call with top_k=1000000 took the fake to 3.5 GB).
#: A server refuses more with 400 naming the limit.
SAMPLING_BOUNDS: dict[str, int] = {
    "top_k": 256,
    "max_tokens": 131_072,
    "n": 64,
    "prompts": 4_096,
    # Work a call asks for, not just each field: the prompts times n times max_tokens a
    # generate may produce, and the scored tokens times top_k of a log-probs call (a
    # one-prompt string of 60 MiB with top_k 256 asks for 15 G top entries). Tokens of a
    # string prompt are counted as its UTF-8 bytes, an upper bound under any tokenizer.
    # A large GRPO step (512 prompts, n 16, max_tokens 4096: 2**25) fits twice over.
    "generated_tokens": 1 << 26,
    "top_k_entries": 1 << 24,
}
#: Decided bounds on what a server keeps for one account: one free-text string
#: of a create body (``experiment_name``, model names, open config keys and values) in
#: UTF-8 bytes, the job configs of all its jobs (the memory they keep, not their JSON
#: size: a config of small values costs several times its JSON as objects; ``list_jobs``
#: answers them all), its jobs, its checkpoints over all its jobs, and its live exports
#: (oldest freed first). Before these bounds the fake's memory grew with every such create,
#: save and export (docs/client-teams/limits.md keeps today's measured figures). A server
#: refuses more with 400 naming the bound.
RETENTION_BOUNDS: dict[str, int] = {
    "text_bytes": 4096,
    "job_config_bytes": 64 * MiB,
    "jobs": 1024,
    "checkpoints": 64,
    "exports": 16,
}
#: The numbers a request body may carry (decided): an integer field takes a 64-bit signed
#: integer, the widest the service's JSON mapping has (proto3 int64); any other number,
#: open extras and pass-through dicts included, must be finite as a double (JSON has no
#: NaN or Infinity; 1e309 or a 400-digit integer overflows). A 4,000-digit
#: ``optimizer.lr`` made the fake fail with OverflowError. A server refuses any other
#: number with 400 naming the field.
MIN_BODY_INT = -(2**63)
MAX_BODY_INT = 2**63 - 1
#: Most JSON values (numbers, strings, arrays, objects) one JSON request body may hold, a
#: bound on the cost of parsing it: a 60 MiB float array is 15 M Python floats.
MAX_JSON_VALUES = 1 << 22
#: Largest answer the kit's client parses (a poll page of 512 one-MiB result chunks is
#: ~700 MiB); a bigger one is a ProtocolError, not a MemoryError deep in the JSON parser.
MAX_ANSWER_BYTES = 1024 * MiB
#: The largest answer each route can legitimately give, so a reader's cap follows the call
#: rather than the largest answer of any call (a hostile server's endless answer to a
#: capacity probe cost the client its whole 1 GiB cap): a job, with the create body it
#: echoes (``MAX_BODY_BYTES``); an account's job list, with the configs its jobs keep
#: (``RETENTION_BOUNDS``) and 64 KiB more per job; an operation's inline answer (logs) and
#: every other answer (ids, states, small objects, error envelopes) at most
#: ``SMALL_ANSWER_BYTES``. A route not named here but ``get_request`` (a poll page of result
#: chunks) is small; a poll is bounded by the reader's own cap (``MAX_ANSWER_BYTES``).
SMALL_ANSWER_BYTES = 16 * MiB
ANSWER_BOUNDS: dict[str, int] = {
    "get_job": MAX_BODY_BYTES + SMALL_ANSWER_BYTES,
    "list_jobs": RETENTION_BOUNDS["job_config_bytes"] + RETENTION_BOUNDS["jobs"] * 64 * 1024,
    "operation": 4 * SMALL_ANSWER_BYTES,
}
#: The one route whose answer carries results: bounded by the reader's cap alone.
RESULT_ROUTE = "get_request"


def answer_bound(route_name: str, reader_cap: int) -> int:
    """The most a reader with cap ``reader_cap`` reads of an answer of ``route_name``."""
    if route_name == RESULT_ROUTE:
        return reader_cap
    return min(reader_cap, ANSWER_BOUNDS.get(route_name, SMALL_ANSWER_BYTES))


#: Bounds on what one answer may make a reader hold: a compressed answer may
#: decode to at most ``MAX_ANSWER_INFLATION`` times its bytes on the wire once past
#: ``INFLATION_FREE_BYTES`` (a 0.6 MB gzip of JSON floats decoded to 600 MiB and took the
#: client past 4 GiB); one request's result pages carry at most ``MAX_RESULT_BYTES`` of
#: result chunks in at most ``MAX_RESULT_PAGES`` pages (endless valid pages took 2.4 GiB).
MAX_ANSWER_INFLATION = 64.0
INFLATION_FREE_BYTES = 64 * MiB
MAX_RESULT_BYTES = 1024 * MiB
MAX_RESULT_PAGES = 65_536
#: HTTP statuses a client retries (besides connection errors and time-outs).
TRANSIENT_STATUSES = frozenset({404, 409, 429, 500, 502, 503, 504})


def capped_exponential(first_s: float, factor: float, cap_s: float, attempt: int) -> float:
    """``first_s * factor**attempt`` capped at ``cap_s``: the one back-off curve of the kit
    (retries and polls differ only in their numbers)."""
    return min(cap_s, first_s * factor**attempt)


@dataclass(frozen=True)
class WaitCurve:
    """The kit's one back-off curve, as a value: a policy's waits before tries 1, 2, ..."""

    first_s: float
    factor: float
    cap_s: float

    def delay(self, attempt: int) -> float:
        """Wait before try ``attempt + 1`` (``attempt`` 0-based), jitter excluded."""
        return capped_exponential(self.first_s, self.factor, self.cap_s, attempt)


@dataclass(frozen=True)
class RetryPolicy:
    """Client retry policy: ten retries after the first try, exponential back-off + jitter."""

    retries: int = 10
    backoff_first_s: float = 0.5
    backoff_factor: float = 2.0
    backoff_cap_s: float = 6.0
    jitter: float = 0.25
    statuses: frozenset[int] = field(default=TRANSIENT_STATUSES)

    @property
    def curve(self) -> WaitCurve:
        """The back-off curve (its numbers are spelled ``backoff_*``, as the client config's)."""
        return WaitCurve(self.backoff_first_s, self.backoff_factor, self.backoff_cap_s)

    def delay(self, attempt: int) -> float:
        """Back-off before retry number ``attempt`` (0-based), jitter excluded."""
        return self.curve.delay(attempt)


@dataclass(frozen=True)
class PollPolicy(WaitCurve):
    """Client poll timing: a wait curve (0.5 s first, x1.25 each time, capped at 6 s) and
    an overall timeout (1800 s); and the budget of one request's result pages (bytes of
    result chunks, pages that brought them)."""

    first_s: float = 0.5
    factor: float = 1.25
    cap_s: float = 6.0
    timeout_s: float = 1800.0
    max_result_bytes: int = MAX_RESULT_BYTES
    max_result_pages: int = MAX_RESULT_PAGES
