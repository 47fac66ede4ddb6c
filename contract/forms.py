"""The answer forms the published spec allows beyond the kit's own, one row each.

The kit's fake answers in one form per answer (the kit dialect); the spec allows others
(a request may read ``completed``, an id need not be a UUID, an error may be a bare
``detail`` list answered with 422, ...). Each row here names one such alternative, the
section of the spec that allows it, and the ``decided`` clauses that pin the kit's own
form instead (a server using the alternative is conformant, so those clauses are judged
only on a target that promises the kit's forms: :func:`kit_form_judged`).

One table, read by everything that must agree on it: ``fake-gs --dialect any`` picks
among every row per answer (seeded; ``fake_gs.answers.forms``), ``--dialect spec`` always takes
the rows marked ``spec``; the conformance suite skips the kit-form clauses of a target
that may use a row; ``gs-parity`` counts a difference a row explains as an equivalence;
``docs/spec-coverage.md`` shows which spec rules ``--dialect any`` exercises. A test holds
the fake and the parity comparer to implement every row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass
from typing import Literal, get_args

#: The fake's answer dialects: its own forms, the spec's other forms always, or any form
#: the spec allows chosen per answer (seeded by ``--seed``). Every tool's ``--dialect``
#: offers these and defaults to the first.
Dialect = Literal["kit", "spec", "any"]
DIALECTS: tuple[Dialect, ...] = get_args(Dialect)
DEFAULT_DIALECT: Dialect = DIALECTS[0]
#: How the fake spells states (``--status-style``): ``running``/``done``, or the enum names
#: ``JOB_STATE_RUNNING``/``REQUEST_STATE_DONE`` (spec §3.2, §3.3 show both).
StatusStyle = Literal["short", "enum"]
STATUS_STYLES: tuple[StatusStyle, ...] = get_args(StatusStyle)
DEFAULT_STATUS_STYLE: StatusStyle = STATUS_STYLES[0]
#: How the fake delivers a tensor result (``--result-delivery``; spec §9.4): inline base64
#: frames, result-chunk poll events, or by size.
Delivery = Literal["auto", "inline", "chunks"]
DELIVERIES: tuple[Delivery, ...] = get_args(Delivery)
DEFAULT_DELIVERY: Delivery = DELIVERIES[0]


@dataclass(frozen=True)
class Form:
    """One alternative form a conformant server may answer in."""

    name: str
    _: KW_ONLY
    #: The section of the spec that allows the alternative (``6.8``).
    section: str
    #: What the alternative looks like, in the kit's words.
    what: str
    #: Decided clauses pinning the kit's own form where this row allows another.
    relaxes: tuple[str, ...] = ()
    #: ``--dialect spec`` always answers in this form.
    spec: bool = False


#: Fields ``--dialect any`` adds to answers and results (spec §11: results are open; the
#: spec closes no answer): a client must ignore fields it does not know.
EXTRA_FIELDS: tuple[str, ...] = ("etag", "server_revision", "labels")

#: Request-state spellings spec §3.3 lists beyond the kit's, by the kit's state.
REQUEST_STATE_SYNONYMS: dict[str, tuple[str, ...]] = {
    "done": ("completed", "succeeded"),
    "cancelled": ("canceled",),
}
#: Job-state spellings spec §3.2 mentions beyond the kit's, by the kit's state.
JOB_STATE_SYNONYMS: dict[str, tuple[str, ...]] = {"cancelled": ("canceled",)}

#: One row per form: its name, then by keyword the section allowing it, whether ``--dialect
#: spec`` always answers in it, the decided clauses it relaxes and what it looks like.
_TABLE: tuple[Form, ...] = (
    Form("request-state-spelling", section="3.3", relaxes=("POLL-STATE-2",), what="a request status spelled completed, succeeded or canceled, or as its raw enum name (REQUEST_STATE_DONE), chosen per answer"),
    Form("job-state-spelling", section="3.2", relaxes=("JOB-STATE-2",), what="a job status spelled as its enum name (JOB_STATE_RUNNING) or canceled, chosen per answer"),
    Form("id-shape", section="5.1", relaxes=("JOB-CREATE-2",), what="job ids shaped like the spec's examples (b1fcb345, job-...), not UUIDs; request ids likewise"),
    Form("list-entry-minimal", section="5.3", relaxes=("JOB-LIST-3",), what="list entries carrying job_id, status and sub_jobs (possibly empty) only"),
    Form("job-optional-fields", section="5.2", what="submitted_by and owner_role left out of a job object"),
    Form("unknown-fields", section="11", what="fields no model declares added to answers, events and results"),
    Form("error-forms", section="3.6", spec=True, what="error bodies as {message, code: <status>} or a bare detail list instead of the kit's envelope"),
    Form("validation-422", section="3.6", relaxes=("ERR-STATUS-1",), what="a validation failure answered 422 with a detail list"),
    Form("delete-answer", section="5.9", spec=True, what="a delete answered 204, or 200 with no body"),
    Form("cancel-answer", section="5.5", relaxes=("CANCEL-ANSWER-1",), what="a cancel answered 204, 202 or 200 with the job's id and status"),
    Form("poll-empty-fields", section="6.8", spec=True, what="an empty poll error or next_cursor as \"\", a request's error as its message string"),
    Form("capacity-proto3", section="5.4", spec=True, what="capacity without its false and zero fields (proto3 JSON)"),
    Form("capacity-capped", section="5.4", relaxes=("CAP-COUNT-2",), what="available_gpus capped below max_total_gpus - in_use_gpus (schedulable capacity)"),
    Form("last-lr-list", section="6.2", spec=True, what="last_lr as a list (one rate per parameter group)"),
    Form("last-lr-scheduled", section="6.2", relaxes=("STEP-LR-1",), what="last_lr as a scheduler set it, not the learning_rate the step asked for"),
    Form("save-id-server", section="6.3", spec=True, relaxes=("SAVE-ID-2",), what="a save naming its checkpoint itself, whatever checkpoint_id the caller asked for"),
    Form("save-result-fields", section="6.3", relaxes=("SAVE-RESULT-2",), what="a save result without checkpoint_path or checkpoint_tag"),
    Form("request-id-header", section="2.4", relaxes=("ADDR-REQID-1",), what="an answer without the x-snowflake-request-id header"),
    Form("short-pages", section="6.8", relaxes=("POLL-MAXEV-4",), what="result-chunk pages holding fewer events than max_events allows (never none while some remain)"),
    Form("bootstrap-polled", section="7", relaxes=("OP-ROUTER-2",), what="bootstrap-router-replay answering a request_id to poll instead of an inline result"),
    Form("log-cursor", section="7.8", spec=True, what="opaque tail-logs cursors, and empty non-EOF pages while the job is placing (spec §12.1)"),
    Form("cancelling-visible", section="5.5", spec=True, what="a cancelled job seen as cancelling before it is cancelled"),
    Form("timestamp-form", section="5.2", what="timestamps with fractional seconds or a +00:00 offset (RFC 3339 still)"),
    Form("result-delivery", section="9.4", what="a tensor result inline or in result chunks (spec §9.5) whatever its size"),
    Form("success-status", section="3.6", what="a create answered 201 and a submission 202 (any 2xx is a success; the spec shows only the bodies)"),
    Form("done-result-null", section="6.8", what="a done request with an empty result ({}) carrying result null (the client reads either as {})"),
    Form("precondition-status", section="3.6", relaxes=("JOB-RUNNING-1",), what="a call on a job that is not running refused 412 Precondition Failed with a {message, code} body"),
    Form("inflight-result-empty", section="6.8", what="a page of a request still in flight carrying result {} (the spec's empty form) instead of null"),
)

FORMS: dict[str, Form] = {f.name: f for f in _TABLE}
#: The rows ``--dialect spec`` always answers in.
SPEC_FORMS: frozenset[str] = frozenset(f.name for f in FORMS.values() if f.spec)


def forms_of(dialect: str | None) -> frozenset[str]:
    """The rows a server in ``dialect`` may answer in; None is a server the kit did not
    build (a URL): it may use every form the spec allows."""
    if dialect == "kit":
        return frozenset()
    if dialect == "spec":
        return SPEC_FORMS
    return frozenset(FORMS)


def relaxing(cid: str) -> list[Form]:
    """The rows that allow another form than the one decided clause ``cid`` pins."""
    return [f for f in FORMS.values() if cid in f.relaxes]


def kit_form_judged(cid: str, forms: Iterable[str]) -> bool:
    """Whether kit-form clause ``cid`` is judged on a target that may use ``forms``: only
    when none of them relaxes it (any other clause: always)."""
    allowed = set(forms)
    return not any(f.name in allowed for f in relaxing(cid))


def why_not_judged(cid: str, forms: Iterable[str]) -> str:
    """The not-applicable reason of a kit-form clause on a target that may use ``forms``."""
    allowed = set(forms)
    rows = [f for f in relaxing(cid) if f.name in allowed]
    names = ", ".join(f"{f.name} (spec §{f.section})" for f in rows)
    return (f"the kit's own form: this target may answer in the form(s) {names} the spec allows "
            "instead (contract.forms); judged on the fake in its kit dialect")
