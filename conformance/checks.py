"""Judgements properties share: error envelopes, refusals with the contract's status and
code, the request-id header, JSON content types, submit answers.

Each takes a :class:`~conformance.verdict.Soft` collector (or raises at once) and names
the clause it judges, so one answer can be held against every clause it bears on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from conformance.driver_raw import Answer
from conformance.verdict import Soft, expect
from contract.clauses import clause
from contract.errors import (
    REQUEST_ID_HEADER,
    SPEC_STRING_CODES,
    STATUS_OF,
    ErrorCode,
    is_error_envelope,
)

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


def refused(
    ans: Answer,
    soft: Soft,
    cid: str,
    codes: Iterable[str | ErrorCode] | None = None,
    statuses: Iterable[int] | None = None,
) -> bool:
    """``ans`` is a refusal: 4xx, never 5xx, enveloped, with one of ``codes`` / ``statuses``.

    The clause ``cid`` gets the status judgement. The kit's string codes are decided: a
    server may answer an integer code or a bare detail list instead (spec §3.6), so a code
    is judged only when the body carries a string one, and a wrong one fails ``cid`` only
    when ``cid`` is itself decided (else ERR-CODE-1). The spec's own string code
    (chunk_group_restart_required) is always required. ERR-CODE-1 also checks the status
    matches the string code the server chose (contract.errors.STATUS_OF); ERR-NO500-1 and
    ERR-ENVELOPE-1 are judged too.
    """
    no_5xx(ans, soft)
    envelope(ans, soft)
    wanted = [str(c) for c in codes or ()]
    allowed = set(
        statuses or {STATUS_OF[ErrorCode(c)] for c in wanted if c in ErrorCode._value2member_map_}
    )
    if not soft.expect(
        cid, 400 <= ans.status < 500, f"expected a 4xx refusal, got {ans.status}: {ans.raw[:200]!r}"
    ):
        return False
    ok = True
    if allowed:
        ok = soft.expect(
            cid,
            ans.status in allowed,
            f"expected status {sorted(allowed)}, got {ans.status}: {ans.raw[:200]!r}",
        )
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
