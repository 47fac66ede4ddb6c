"""Clauses moved or rephrased when each binding clause was re-read against its section: what
a clause demanded before, what it demands now, and the section that decided it. The table
is the record a server team reads to see why a verdict changed (``docs/spec-coverage.md``
prints it; a test holds every row to name a clause that exists, with its text today).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass


@dataclass(frozen=True)
class Reread:
    """One clause moved or rephrased: its demand before and after, and why."""

    clause: str
    _: KW_ONLY
    before: str
    after: str
    why: str


#: One row per change: the clause, then by keyword its demand before and after, and why.
REREADS: tuple[Reread, ...] = (
    Reread("FB-RESULT-1", before="a result carrying job_id, a finite avg_loss, metrics and post_process_outputs", after="job_id and a finite avg_loss; metrics and post_process_outputs are objects where present", why="spec §6.1 shows a typical result and spec §11 calls its fields common, results not being closed schemas"),
    Reread("FB-RESULT-3", before="(new)", after="decided: the kit's result carries all four fields of spec §6.1's typical result", why="what FB-RESULT-1 no longer demands, kept as the kit's choice (advisory against a URL)"),
    Reread("FB-VERL-1", before="the verl batch's result carries job_id, avg_loss, metrics and post_process_outputs", after="the verl batch resolves to a result FB-RESULT-1 describes", why="the clause is about the kwargs taken, not about fields spec §11 leaves open"),
    Reread("CLIENT-SHAPE-1", before="the forward result carries a model_outputs object with logprobs", after="shape rules judged where the result carries model_outputs or generation results", why="spec §11: a forward result is backend-specific"),
    Reread("OP-ROUTER-1", before="judged with sample_ids [\"s1\", 2]", after="judged with sample_ids [\"s1\", \"s2\"]", why="spec §7.5 shows string sample ids only: the input stays inside what the section shows"),
    Reread("CG-MISSING-1", before="409 chunk_group_missing_chunks", after="409 chunk_group_missing_chunks or chunk_group_restart_required", why="spec §9.3 names chunk_group_restart_required as the code for a group to replay"),
    Reread("POLL-MAXEV-3", before="an invalid max_events is refused", after="refused with 400, or taken as the default (at most 16 events a page)", why="spec §6.8 says nothing of invalid values"),
    Reread("OP-RESET-2", before="a reset-prefix-cache on a training sub-job is refused (4xx)", after="a 4xx, or 501 Not Implemented, with a spec §3.6 body", why="501 is the status the kit's own OpenAPI document gives an operation a target does not implement"),
    Reread("ERR-SCHEMA-1", before="a create, submission, operation or poll answered 200 only", after="200, 201 or 202 with the same body (the current OpenAPI document)", why="spec §3.6 treats only a non-2xx answer as an error, and no section names a success status"),
    Reread("JOB-CREATE-1", before="the session job's create answered exactly 200", after="any 2xx {job_id}; a failure is one root cause, not a red on every clause", why="spec §5.1 shows the body only, spec §3.6 treats only non-2xx as an error"),
    Reread("JOB-STATE-1", before="start-up states never go backwards", after="also: initializing shown as a state of its own where the server shows the start-up (the slow-start fake)", why="spec §3.2: initializing is customer-visible and not collapsed by the server"),
    Reread("CG-IDEM-1", before="judged by request ids and the repeat's loss", after="also by an effect the API shows: the next step's micro-batch count", why="spec §9.3: a repeated final chunk does not run forward-backward again"),
    Reread("CANCEL-BODY-2", before="a cancel or an export with a body refused, on any target", after="refused by the fake in its kit dialect; elsewhere refused, or taken as the call without a body (then answered as that call: an export names its checkpoint and files)", why="spec §5.5 and §5.8 say only that neither call has a body, not how a server treats one"),
    Reread("OP-HINT-1", before="an operation naming no receiver on a job of several sub-jobs refused, on any target", after="refused by the fake in its kit dialect; elsewhere refused, or routed to a default receiver (a JSON answer)", why="spec §7 calls sub_job_id and sub_job_type optional routing hints; spec §7.4 only tells clients to name the receiver"),
    Reread("POLL-MAXEV-2", before="judged whatever the number of events pending", after="judged only with more than 512 events pending (skipped otherwise)", why="spec §6.8: the 512 cap is seen at work only past 512 events"),
)
