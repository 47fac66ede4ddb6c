"""Judgements properties share: error envelopes, refusals with the contract's status and
code, the request-id header, JSON content types, submit answers.

Each takes a :class:`~conformance.reporting.violations.Soft` collector (or raises at once) and names
the clause it judges, so one answer can be held against every clause it bears on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from conformance.drivers.raw import Answer, RawDriver
from conformance.drivers.raw_answers import Settled
from conformance.reporting.violations import Soft, expect
from conformance.runtime import RUNTIME
from contract.clauses import Clause, clause
from contract.errors import (
    REQUEST_ID_HEADER,
    SPEC_STRING_CODES,
    STATUS_OF,
    ErrorCode,
    is_error_envelope,
)
from contract.forms import kit_form_judged
from contract.limits import TRANSIENT_STATUSES
from contract.states import JobState, RequestState, normalize_job_state

#: The 4xx statuses spec §3.5's client retries: a refusal answered so is retried ten times.
RETRIED = frozenset(s for s in TRANSIENT_STATUSES if s < 500)

UUID_RE = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
#: Why a semantic clause is not judged on the shape engine (its values are synthetic).
SHAPE_ENGINE_SKIP = (
    "semantic clauses need a real model; the target runs the shape engine, whose values are "
    "synthetic (run --gs-engine tiny, or against a real server)"
)
RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def envelope(ans: Answer, soft: Soft, cid: str = "ERR-ENVELOPE-1") -> None:
    """A 4xx/5xx answer is JSON carrying a non-empty code and message."""
    if ans.status < 400:
        return
    soft.expect(
        cid,
        ans.is_json and is_error_envelope(ans.body),
        f"{ans.status} answer is in none of the error forms spec §3.6 allows: {ans.raw[:200]!r}",
    )


def no_5xx(ans: Answer, soft: Soft | None = None, cid: str = "ERR-NO500-1") -> None:
    ok = ans.status < 500
    msg = f"server error {ans.status} for {ans.method} {ans.url}: {ans.raw[:200]!r}"
    if soft is None:
        expect(cid, ok, msg)
    else:
        soft.expect(cid, ok, msg)


def refused_or_taken(ans: Answer, soft: Soft, cid: str, statuses: Iterable[int],
                     taken: Callable[[Answer], str]) -> None:
    """Decided ``cid`` pins a refusal where the spec's words also allow taking the call (a
    body on a route the spec gives none, a routing hint the spec calls optional). On the fake
    in its kit dialect the refusal is judged; on any other target (a URL, the spec and any
    dialects) a 2xx is the other form, judged by ``taken``: '' when the answer is that
    call's own answer, else what is wrong with it."""
    if RUNTIME.forms and 200 <= ans.status < 300:
        problem = taken(ans)
        soft.expect(cid, not problem, f"taken ({ans.status}), but {problem}: {ans.raw[:200]!r}")
        return
    refused(ans, soft, cid, statuses=statuses)


def refused_or_failed(ans: Answer, soft: Soft, cid: str, settle: Callable[[str], Settled],
                      statuses: Iterable[int] | None = None) -> None:
    """A rule on an asynchronous call whose section names no refusal form: a 4xx at submit
    (judged as :func:`refused`), or a request that is accepted and ends failed (``settle``
    polls its request id to the end). Accepted with no request to poll, or a request that
    ends otherwise, is red on ``cid``."""
    rid = ans.field("request_id") if ans.ok else None
    if isinstance(rid, str):
        settled = settle(rid)
        soft.expect(cid, settled.status == RequestState.FAILED,
                    f"the request was accepted and ended {settled.raw_status}")
    elif ans.ok:
        soft.expect(cid, False, f"accepted ({ans.status}) with no request to poll: {ans.raw[:200]!r}")
    else:
        refused(ans, soft, cid, statuses=statuses)


def create_refused(
    driver: RawDriver, body: dict[str, Any], cid: str, field: str | None = None, soft: Soft | None = None,
    *, codes: Iterable[str | ErrorCode] | None = None, statuses: Iterable[int] | None = None,
) -> None:
    """A create-time rule whose section names no refusal form: a 4xx at create (judged as
    :func:`refused` with the kit's ``codes``/``statuses``, naming ``field``), or a job that
    is created and ends failed. Judged into ``soft`` when given (the caller checks), else
    at once."""
    own = soft is None
    soft = soft or Soft()
    ans = driver.create_job(body)
    job_id = ans.field("job_id") if ans.ok else None
    if isinstance(job_id, str):
        end, seen = driver.wait_job(job_id, until=(JobState.FAILED, JobState.RUNNING), timeout_s=60)
        state = normalize_job_state(end.field("status"))
        driver.cancel(job_id)
        soft.expect(cid, state == JobState.FAILED, f"create was accepted and the job is {state} ({seen})")
    else:
        refused(ans, soft, cid, codes=codes, statuses=statuses)
        if field is not None and 400 <= ans.status < 500:
            owner = cid if clause(cid).source == "decided" else "ERR-ENVELOPE-2"
            soft.expect(owner, names_field(ans, field), f"the refusal does not name {field!r}: {ans.body!r}")
    if own:
        soft.check()


def kit_form(cid: str) -> bool:
    """Whether kit-form clause ``cid`` is judged here: not when the target may answer in a
    form the spec allows instead (contract.forms; every form against a URL)."""
    return kit_form_judged(cid, RUNTIME.forms)


def refused(
    ans: Answer,
    soft: Soft,
    cid: str,
    codes: Iterable[str | ErrorCode] | None = None,
    statuses: Iterable[int] | None = None,
) -> bool:
    """``ans`` is a refusal, judged by the letter for ``cid``: a 4xx with a spec §3.6 body
    (ERR-ENVELOPE-1), never a 5xx (ERR-NO500-1), with the status the cited section names
    (``Clause.statuses``) where it names one; else any 4xx, and for a refusal the kit
    answers with another status, held to it under ERR-STATUS-1 only (a decided clause):
    spec §3.5's client retrying 404, 409 and 429 forbids no server those statuses.

    ``codes`` / ``statuses`` are the kit's: a decided ``cid`` whose kit status is not the
    invalid-input 400 is held to them itself (415, 404, 409: what the clause decides);
    otherwise the kit's status is judged under ERR-STATUS-1 (a kit form: a server may
    answer a validation failure 422, spec §3.6). A string code is judged when the body
    carries one (ERR-CODE-1, or ``cid`` for the spec's own code or a decided ``cid``).
    """
    no_5xx(ans, soft)
    envelope(ans, soft)
    wanted = [str(c) for c in codes or ()]
    kit = set(statuses or {STATUS_OF[ErrorCode(c)] for c in wanted if c in ErrorCode._value2member_map_})
    if not soft.expect(cid, 400 <= ans.status < 500,
                       f"expected a 4xx refusal, got {ans.status}: {ans.raw[:200]!r}"):
        return False
    ok = _refusal_status(ans, soft, clause(cid), kit)
    code = ans.code
    spec_code = any(c in SPEC_STRING_CODES for c in wanted)
    if wanted and (code is not None or spec_code):
        owner = cid if spec_code or clause(cid).source == "decided" else "ERR-CODE-1"
        ok = soft.expect(owner, code in wanted, f"expected code {wanted}, got {code!r}") and ok
    if code is not None and code in ErrorCode._value2member_map_:
        want = STATUS_OF[ErrorCode(code)]
        soft.expect(
            "ERR-CODE-1",
            ans.status == want,
            f"code {code} must be answered with {want}, got {ans.status}",
        )
    return ok


def _refusal_status(ans: Answer, soft: Soft, c: Clause, kit: set[int]) -> bool:
    """The status of a 4xx refusal: the clause's own statuses where its section names some
    (any 4xx else: no section forbids one spec §3.5's client retries, so a retried status is
    the kit's ERR-STATUS-1, never the binding clause's); then the kit's (on the clause when
    it decides that status, else ERR-STATUS-1)."""
    got = f"{ans.status}: {ans.raw[:200]!r}"
    named = set(c.statuses)
    ok = True
    if named:
        ok = soft.expect(c.id, ans.status in named, f"spec §{c.spec_section} names {sorted(named)}, got {got}")
    if not kit or kit <= named:
        return ok
    if c.source == "decided" and kit != {400}:
        return soft.expect(c.id, ans.status in kit, f"expected status {sorted(kit)}, got {got}") and ok
    if kit_form("ERR-STATUS-1"):
        retried = " (a status spec §3.5's client retries as transient)" if ans.status in RETRIED else ""
        soft.expect("ERR-STATUS-1", ans.status in kit, f"the kit answers this refusal {sorted(kit)}, got {got}{retried}")
    return ok


def cancel_answer(ans: Answer, soft: Soft, cid: str, when: str) -> None:
    """A cancel taken: a 2xx (``cid``; sent with no body, CANCEL-BODY-1), the kit's 200 {}
    (CANCEL-ANSWER-1, where kit forms are judged)."""
    got = f"{ans.status}: {ans.raw[:200]!r}"
    soft.expect(cid, ans.ok, f"cancel of a {when} job answered {got}")
    soft.expect("CANCEL-BODY-1", ans.ok, f"a cancel with no body and no content type answered {got}")
    if kit_form("CANCEL-ANSWER-1"):
        soft.expect("CANCEL-ANSWER-1", ans.status == 200 and ans.body == {}, f"the kit answers 200 {{}}, got {got}")


def has_request_id_header(ans: Answer, soft: Soft, cid: str = "ADDR-REQID-1") -> None:
    soft.expect(
        cid,
        bool(ans.request_id_header),
        f"{ans.method} {ans.url} -> {ans.status} lacks {REQUEST_ID_HEADER}",
    )


def json_answer(ans: Answer, soft: Soft, cid: str = "ADDR-CT-1") -> None:
    if ans.status == 204 or not ans.raw:
        return
    soft.expect(
        cid,
        ans.is_json,
        f"{ans.method} {ans.url} answered content-type {ans.content_type!r}, not JSON",
    )


def submitted(ans: Answer, job_id: str, soft: Soft, cid: str = "REQ-SUBMIT-1") -> str | None:
    """An async call's answer: 2xx ``{request_id, job_id}`` with the caller's job id."""
    if not soft.expect(cid, ans.ok, f"submission refused: {ans}"):
        return None
    rid = ans.field("request_id")
    soft.expect(cid, isinstance(rid, str) and rid, f"answer lacks request_id: {ans.body!r}")
    soft.expect(
        cid,
        ans.field("job_id") == job_id,
        f"answer job_id {ans.field('job_id')!r} is not the caller's {job_id!r}",
    )
    return rid if isinstance(rid, str) else None


def names_field(ans: Answer, name: str) -> bool:
    """The error body names ``name`` in a detail loc or in its message."""
    body = ans.body if isinstance(ans.body, dict) else {}
    for item in body.get("detail") or []:
        if isinstance(item, dict) and name in [str(p) for p in item.get("loc") or []]:
            return True
    return name in str(body.get("message", ""))


def detail_locs(ans: Answer) -> list[list[Any]]:
    body = ans.body if isinstance(ans.body, dict) else {}
    return [list(d.get("loc") or []) for d in body.get("detail") or [] if isinstance(d, dict)]
