"""Clauses moved or rephrased when each binding clause was re-read against its section: what
a clause demanded before, what it demands now, and the section that decided it. The table
is the record a server team reads to see why a verdict changed (``docs/spec-coverage.md``
prints it; a test holds every row to name a clause that exists, with its text today).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reread:
    """One clause moved or rephrased: its demand before and after, and why."""

    clause: str
    before: str
    after: str
    why: str


#: One row per change; ``clause | before | after | why``.
_TABLE = """
FB-RESULT-1 | a result carrying job_id, a finite avg_loss, metrics and post_process_outputs | job_id and a finite avg_loss; metrics and post_process_outputs are objects where present | spec §6.1 shows a typical result and spec §11 calls its fields common, results not being closed schemas
FB-RESULT-3 | (new) | decided: the kit's result carries all four fields of spec §6.1's typical result | what FB-RESULT-1 no longer demands, kept as the kit's choice (advisory against a URL)
FB-VERL-1 | the verl batch's result carries job_id, avg_loss, metrics and post_process_outputs | the verl batch resolves to a result FB-RESULT-1 describes | the clause is about the kwargs taken, not about fields spec §11 leaves open
CLIENT-SHAPE-1 | the forward result carries a model_outputs object with logprobs | shape rules judged where the result carries model_outputs or generation results | spec §11: a forward result is backend-specific
OP-ROUTER-1 | judged with sample_ids ["s1", 2] | judged with sample_ids ["s1", "s2"] | spec §7.5 shows string sample ids only: the input stays inside what the section shows
CG-MISSING-1 | 409 chunk_group_missing_chunks | 409 chunk_group_missing_chunks or chunk_group_restart_required | spec §9.3 names chunk_group_restart_required as the code for a group to replay
POLL-MAXEV-3 | an invalid max_events is refused | refused with 400, or taken as the default (at most 16 events a page) | spec §6.8 says nothing of invalid values
OP-RESET-2 | a reset-prefix-cache on a training sub-job is refused (4xx) | a 4xx, or 501 Not Implemented, with a spec §3.6 body | 501 is the status the kit's own OpenAPI document gives an operation a target does not implement
ERR-SCHEMA-1 | a create, submission, operation or poll answered 200 only | 200, 201 or 202 with the same body (the current OpenAPI document) | spec §3.6 treats only a non-2xx answer as an error, and no section names a success status
JOB-CREATE-1 | the session job's create answered exactly 200 | any 2xx {job_id}; a failure is one root cause, not a red on every clause | spec §5.1 shows the body only, spec §3.6 treats only non-2xx as an error
JOB-STATE-1 | start-up states never go backwards | also: initializing shown as a state of its own where the server shows the start-up (the slow-start fake) | spec §3.2: initializing is customer-visible and not collapsed by the server
CG-IDEM-1 | judged by request ids and the repeat's loss | also by an effect the API shows: the next step's micro-batch count | spec §9.3: a repeated final chunk does not run forward-backward again
CANCEL-BODY-2 | a cancel or an export with a body refused, on any target | refused by the fake in its kit dialect; elsewhere refused, or taken as the call without a body (then answered as that call: an export names its checkpoint and files) | spec §5.5 and §5.8 say only that neither call has a body, not how a server treats one
OP-HINT-1 | an operation naming no receiver on a job of several sub-jobs refused, on any target | refused by the fake in its kit dialect; elsewhere refused, or routed to a default receiver (a JSON answer) | spec §7 calls sub_job_id and sub_job_type optional routing hints; spec §7.4 only tells clients to name the receiver
POLL-MAXEV-2 | judged whatever the number of events pending | judged only with more than 512 events pending (skipped otherwise) | spec §6.8: the 512 cap is seen at work only past 512 events
"""


def _parse(table: str) -> tuple[Reread, ...]:
    rows = []
    for line in table.strip().splitlines():
        clause, before, after, why = (cell.strip() for cell in line.split(" | "))
        rows.append(Reread(clause, before, after, why))
    return tuple(rows)


REREADS: tuple[Reread, ...] = _parse(_TABLE)
