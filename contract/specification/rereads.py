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
    Reread("ERR-STATUS-1", before="every binding refusal clause whose section names no status red on a refusal answered 404, 409 or 429 (statuses spec §3.5's client retries)", after="any 4xx on the binding clause; a retried status where the kit answers another is ERR-STATUS-1's (decided)", why="spec §3.5 says which statuses the client retries, not which a server may refuse with; no section forbids them"),
    Reread("GEN-TOKENS-1", before="each result carries text, token_ids and finish_reason", after="each result is an object carrying its text or its token_ids", why="spec §6.6 shows a typical result and spec §11 leaves the fields of generation results open"),
    Reread("GEN-TOKENS-3", before="(new)", after="decided: the kit's generate results carry text, token_ids and finish_reason", why="what GEN-TOKENS-1 no longer demands, kept as the kit's choice (advisory against a URL)"),
    Reread("SAVE-LOAD-2", before="a load without checkpoint_id refused at submit (4xx)", after="a 4xx at submit, or a request that ends failed", why="spec §6.4 calls checkpoint_id required on an asynchronous route and names no refusal form for its absence"),
    Reread("GEN-ALIGN-1", before="a misaligned sampling_params or routing_key list refused at submit (4xx)", after="a 4xx at submit, or a request that ends failed", why="spec §6.6 states the alignment, not how an asynchronous generate refuses a misaligned list"),
    Reread("GEN-SAMPLER-1", before="generate and generate-stream on a job without a sampler refused at submit (4xx)", after="a 4xx at submit, or a request that ends failed", why="spec §1.1 gives generation to the sampling sub-job and names no refusal form"),
    Reread("OP-BOOTSTRAP-1", before="a bootstrap-router-replay the wrong way round refused (4xx)", after="a 4xx, or a request_id whose request ends failed", why="spec §7 lets a deployment answer bootstrap-router-replay with a request id to poll; spec §7.4 names no refusal form"),
    Reread("JOB-MODEL-1", before="an inference-only model in a training sub-job refused at create (4xx)", after="a 4xx at create, or a job that ends failed", why="spec §1.4's table says which models train, not how a server refuses one that does not"),
    Reread("JOBV-EMPTY-1", before="an empty or missing sub_job_configs refused at create (4xx)", after="a 4xx at create, or a job that ends failed", why="spec §5.1 states what the body must hold, not the form of the refusal"),
    Reread("JOBV-TYPE-1", before="another job_type refused at create (4xx)", after="a 4xx at create, or a job that ends failed", why="spec §8.1 gives the types, not the form of the refusal"),
    Reread("JOBV-MODEL-1", before="an empty or missing model_name refused at create (4xx)", after="a 4xx at create, or a job that ends failed", why="spec §8.1 requires the field, not the form of the refusal"),
    Reread("JOBV-CONFIG-1", before="a sub-job without exactly one config refused at create (4xx)", after="a 4xx at create, or a job that ends failed", why="spec §8.1 requires exactly one config, not the form of the refusal"),
    Reread("JOBV-FIELDS-1", before="an optional field of another type refused at create (4xx)", after="a 4xx at create, or a job that ends failed", why="spec §8.1 gives the types, not the form of the refusal"),
    Reread("CKPT-INIT-1", before="the sentence said refused at create (4xx) (the judge already took a job that ends failed)", after="a 4xx at create, or a job that ends failed (the sentence now says what is judged)", why="spec §8.2: a resume against another DP size fails fast, at create or as the job"),
    Reread("CKPT-INIT-2", before="the sentence said refused at create (4xx) (the judge already took a job that ends failed)", after="a 4xx at create, or a job that ends failed (the sentence now says what is judged)", why="spec §6.5 requires a weights-only checkpoint and names no refusal form"),
    Reread("WIRE-PICKLE-1", before="a pickle payload refused at submit (4xx)", after="a 4xx at submit, or a request that ends failed (its error names pickle: WIRE-LEGACY-1, decided)", why="spec §9.1 and §14 say DSSST1 rejects pickle, not in which answer"),
    Reread("WIRE-ZIP-1", before="a torch.save payload refused at submit (4xx)", after="a 4xx at submit, or a request that ends failed", why="spec §9.1 and §14 say DSSST1 rejects torch.save, not in which answer"),
    Reread("WIRE-VERSION-1", before="a frame of another dss version refused at submit (4xx)", after="a 4xx at submit, or a request that ends failed", why="spec §9.2 gives the version, not the form of the refusal"),
    Reread("ADDR-CT-4", before="judged with a forward-backward frame of input_ids alone and a tail-logs naming no sub-job", after="judged with spec §6.1's standard object (input_ids and labels) and a tail-logs naming its sub-job", why="spec §6.1 and §7.8 show these inputs: a server refusing the others (OP-HINT-1 lets it) was red for the input, not the content type"),
    Reread("FB-SHAPE-1", before="judged on any batch of the four spec kwargs, labels or not", after="judged on batches carrying input_ids and labels (attention_mask and position_ids optional); a batch without labels is FB-SHAPE-2's", why="spec §6.1's standard object and spec §10.1's minimal shape both carry input_ids and labels: a batch without labels is an input the sections never show"),
    Reread("FB-SHAPE-2", before="decided: other dtypes, extra tensors and a processing block", after="decided: also batches without labels", why="what FB-SHAPE-1 no longer judges, kept as the kit's choice (advisory against a URL)"),
    Reread("JOB-SUBJOB-2", before="the sub-jobs listed in the order of the create body's sub_job_configs", after="the sub-jobs the create body asked for, in any order", why="spec §5.2 shows the sub-jobs, not that the list keeps the body's order"),
    Reread("OP-LOGS-1", before="judged with a tail-logs naming no sub-job on the session job (several sub-jobs)", after="judged with a tail-logs naming its sub-job", why="spec §7.8 shows tail-logs with a sub_job_id; a server refusing one without (OP-HINT-1 lets it) was red for the input"),
    Reread("GEN-PROMPTS-1", before="a refused generate red on GEN-PROMPTS-1 whatever its sampling params (logprobs and seed among them)", after="red on GEN-PROMPTS-1 only for a request whose sampling params are the max_tokens and temperature spec §6.6 shows", why="spec §6.6 never shows logprobs or seed: a server refusing them was red for the input, not the prompt forms"),
    Reread("GEN-PARAMS-1", before="(new)", after="decided: generate takes logprobs and seed in sampling_params", why="what GEN-PROMPTS-1 no longer judges, kept as the kit's choice (advisory against a URL)"),
)
