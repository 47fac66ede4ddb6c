"""One result large enough that a conformant server sends it as result chunks.

The delivery clauses (POLL-CHUNKS-*, POLL-CURSOR-1, POLL-MAXEV-*, CHUNK-FORMAT/DESC/SIZE-1)
need a chunked result. The embedded fake has variants that force one; a real server chunks
only what is large. The contract bounds one HTTP body at ``MAX_BODY_BYTES`` (60 MiB), so a
result frame just past that bound cannot be carried in one answer: the run asks once for a
``forward`` (the operation of spec §7.1; beyond profile current, forward-no-grad when the
operation does not work) whose ``logprobs`` (float32, one per token) are that large, capped by
``--max-result-mib`` (default 64), and every delivery property re-reads that one request
(its pages are cursor-addressed, so re-reading is what the clauses are about). The request
itself stays small: uint8 token ids, a quarter of the result's bytes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.drivers.ops import Failed, RawOps, Refused
from conformance.drivers.raw import RawDriver, Settled
from conformance.inputs.strategies import tensor
from conformance.reporting.recorder import render_last
from conformance.reporting.verdicts import root_cause_skip
from conformance.runtime import RUNTIME
from contract.limits import MAX_BODY_BYTES, MiB
from contract.redact import scrub_text

#: Bytes of the result asked for: one MiB past what a single body may carry.
LARGE_RESULT_BYTES = MAX_BODY_BYTES + MiB
#: The clause a failed upload of the large forward breaks: a valid request within the body
#: bound answered with a server error (or none at all).
UPLOAD_CLAUSE = "ERR-NO500-1"
#: Bytes per token of a forward result (float32 logprobs).
BYTES_PER_TOKEN = 4
#: Token ids below this fit uint8 and any model's vocabulary.
TOKEN_HIGH = 127


def result_bytes(max_result_mib: int) -> int:
    """The size asked for: past one body's bound, never past the cap."""
    return max(BYTES_PER_TOKEN, min(LARGE_RESULT_BYTES, max_result_mib * MiB))


def dims(n_bytes: int, max_seq_len: int) -> tuple[int, int]:
    """``[batch, seq]`` of a forward whose result is at least ``n_bytes``, seq within the job's."""
    tokens = math.ceil(n_bytes / BYTES_PER_TOKEN)
    seq = max(1, min(max_seq_len, tokens))
    return math.ceil(tokens / seq), seq


def forward_body(batch: int, seq: int) -> dict[str, Any]:
    ids = tensor((batch, seq), "uint8", 11, high=TOKEN_HIGH)
    return {"args": [], "kwargs": {"input_ids": ids}, "meta": {}}


@dataclass
class _View:
    """What the delivery properties read: ``d`` (driver), ``job_id`` and ``last``."""

    d: RawDriver
    job_id: str
    last: Settled


class LargeResult:
    """The run's one large forward, requested on first use and kept for the session."""

    def __init__(self, ops: RawOps, max_result_mib: int, max_seq_len: int) -> None:
        self.ops = RawOps(ops.d, ops.job)
        self.size = result_bytes(max_result_mib)
        self.cap_mib = max_result_mib
        self.batch, self.seq = dims(self.size, max_seq_len)
        self._lock = threading.Lock()
        self._done = False
        self._skip = ""
        #: (summary, evidence) when the upload failed (a 5xx, or no answer): a root cause.
        self._cause: tuple[str, str] | None = None

    def describe(self) -> str:
        return (
            f"a forward of [{self.batch}, {self.seq}] tokens, a {self.size / MiB:.1f} MiB result "
            f"(capped by --max-result-mib {self.cap_mib})"
        )

    def _ask(self) -> None:
        """The forward operation (spec §7.1), else, beyond profile current, forward-no-grad."""
        body = forward_body(self.batch, self.seq)
        routes: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
            ("the forward operation", self.ops.forward_op)
        ]
        if self.ops.d.target.profile != "current":
            routes.append(("forward-no-grad", self.ops.forward_no_grad))
        reasons: list[str] = []
        for name, send in routes:
            try:
                send(body)
            except Refused as exc:
                if exc.answer.status >= 500:  # a server error, not a refusal: set-up failed
                    self._cause = (f"the upload of {self.describe()} to {name} answered "
                                   f"{exc.answer.status}", render_last() or str(exc.answer))
                    return
                reasons.append(f"{name} refused it: {str(exc.answer)[:200]}")
            except Failed as exc:
                reasons.append(f"{name} ended {exc.settled.raw_status}")
            except pytest.skip.Exception as exc:
                reasons.append(f"{name}: {exc.msg}")
            else:
                last = self.ops.last
                if last is not None and last.form != "chunks":
                    self._skip = (
                        f"the server delivered {self.describe()} {last.form}; chunks delivery "
                        "is not reached at this size (the embedded fake's variants force it)"
                    )
                return
        self._skip = f"no large result to judge, {self.describe()}: " + "; ".join(reasons)

    def _freed(self) -> bool:
        """Did the server free the result since (410 on a one-event page, which reads
        nothing to the end)?"""
        last = self.ops.last
        if last is None:
            return False
        return self.ops.d.poll(self.ops.job_id, last.request_id, max_events=1).status == 410

    def view(self) -> _View:
        """The settled large request (skips the calling property when it is not chunked)."""
        with self._lock:
            if not self._done:
                self._done = True
                try:
                    self._ask()
                except Exception as exc:  # no answer at all (reset, timeout)
                    self._cause = (f"the upload of {self.describe()} got no answer: {exc!r}"[:400],
                                   render_last())
            elif not self._skip and not self._cause and self._freed():
                self._ask()  # a server may free a result read to the end (POLL-EXPIRE-1)
        if self._cause is not None:
            # The shared upload failed: one root cause, every property needing it skipped
            # naming it (as for the session job), none red on its account.
            summary, evidence = self._cause
            pytest.skip(root_cause_skip(UPLOAD_CLAUSE, summary,
                                        scrub_text(evidence, RUNTIME.secrets)))
        if self._skip:
            pytest.skip(self._skip)
        assert self.ops.last is not None
        return _View(self.ops.d, self.ops.job_id, self.ops.last)


def chunked(source: Any, large: LargeResult | None, body: dict[str, Any]) -> tuple[Any, Any]:
    """(driver, ops) whose ``ops.last`` is a chunked result: on the embedded fake ``body``
    sent to a chunking variant; against a URL the run's one large result."""
    from conformance.judging.variants import need

    driver, ops = source("chunks")
    if large is not None:
        view = large.view()
        return view.d, view
    ops.forward_op(body)
    need(ops, "chunks")
    return driver, ops
