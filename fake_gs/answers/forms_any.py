"""The rows of ``contract.forms`` only ``--dialect any`` uses: the helpers that turn a
kit-form answer (a status word, an id, a job object, a page, an answer's fields) into the
form :class:`fake_gs.answers.forms.Forms` chose for it. In the kit and spec dialects each helper
returns the kit's form unchanged.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

from contract.forms import JOB_STATE_SYNONYMS, REQUEST_STATE_SYNONYMS
from contract.states import job_state_enum_spelling, request_state_enum_spelling
from fake_gs.answers.check import dumps
from fake_gs.answers.forms import Forms

#: Answers larger than this keep their fields as they are (re-encoding them costs too much).
DECORATE_MAX_BYTES = 64 * 1024


def request_state(forms: Forms, status: str, enum_style: bool) -> str:
    """A request status as spec §3.3 may spell it: the kit's word, a synonym, the enum name."""
    if enum_style:
        return request_state_enum_spelling(status)
    return forms.pick("request-state-spelling",
                      (status, *REQUEST_STATE_SYNONYMS.get(status, ()), request_state_enum_spelling(status)))


def job_state(forms: Forms, status: str, enum_style: bool) -> str:
    """A job status as spec §3.2 may spell it: the kit's word, ``canceled``, the enum name."""
    if enum_style:
        return job_state_enum_spelling(status)
    return forms.pick("job-state-spelling",
                      (status, *JOB_STATE_SYNONYMS.get(status, ()), job_state_enum_spelling(status)))


def new_job_id(forms: Forms) -> str:
    """A UUID, or an id shaped like the spec's examples (``b1fcb345``, ``job-...``)."""
    raw = uuid.uuid4()
    shape = forms.pick("id-shape", ("uuid", "hex8", "job"))
    return {"uuid": str(raw), "hex8": raw.hex[:8], "job": f"job-{raw.hex[:12]}"}[shape]


def new_request_id(forms: Forms) -> str:
    """A UUID, or an id shaped like the spec's ``request-id`` example."""
    raw = uuid.uuid4()
    return forms.pick("id-shape", (str(raw), f"request-{raw.hex[:16]}"))


def job_object(forms: Forms, job: dict[str, Any]) -> dict[str, Any]:
    """A job object without submitted_by and owner_role (best effort, spec §5.2)."""
    if not forms.use("job-optional-fields"):
        return job
    return {k: v for k, v in job.items() if k not in ("submitted_by", "owner_role")}


def list_entry(forms: Forms, job: dict[str, Any]) -> dict[str, Any]:
    """A listed job as spec §5.3 shows one: job_id, status and sub_jobs (maybe empty)."""
    if not forms.use("list-entry-minimal"):
        return job
    subs = job.get("sub_jobs") if forms.number("list-entry-minimal", 0, 1) else []
    return {"job_id": job["job_id"], "status": job["status"], "sub_jobs": subs or []}


def timestamp(forms: Forms, ts: float, kit: str) -> str:
    """``kit`` (RFC 3339, milliseconds, ``Z``), or the same instant with microseconds or a
    ``+00:00`` offset (RFC 3339 still)."""
    shape = forms.pick("timestamp-form", ("kit", "micro", "offset"))
    if shape == "kit":
        return kit
    moment = datetime.fromtimestamp(ts, UTC)
    return moment.isoformat(timespec="microseconds") if shape == "micro" else moment.isoformat(timespec="seconds")


def cancel_answer(forms: Forms, job_id: str, status: str) -> Response:
    """A cancel's success: 200 ``{}`` (the kit's), 204, 202 ``{}`` or 200 naming the job."""
    shape = forms.pick("cancel-answer", ("kit", "204", "202", "job"))
    if shape == "204":
        return Response(status_code=204)
    body: dict[str, Any] = {"job_id": job_id, "status": status} if shape == "job" else {}
    return Response(dumps(body), status_code=202 if shape == "202" else 200, media_type="application/json")


def delete_answer(forms: Forms) -> Response:
    """A delete's success: 200 ``{}`` (the kit's), 204 or 200 with no body (spec §5.9)."""
    shape = forms.pick("delete-answer", ("kit", "204", "empty"))
    if shape == "kit":
        return Response(b"{}", media_type="application/json")
    return Response(status_code=204 if shape == "204" else 200)


def page_size(forms: Forms, request_id: str, offset: int, max_events: int, left: int) -> int:
    """Events of the page a cursor names: all that fit, or (row short-pages) a seeded
    number of them fixed by the request and the offset, so a re-read is the same page."""
    full = min(max_events, left)
    key = f"{request_id}/{offset}"
    if full <= 1 or not forms.use("short-pages", key):
        return full
    return forms.number("short-pages", 1, full, key)


def result(forms: Forms, key: str, value: Any) -> Any:
    """A result with the fields no model declares (row unknown-fields), fixed by ``key``
    (the request) so every poll shows the same result; generate's items get some too."""
    if not isinstance(value, dict):
        return value
    out = {**value, **forms.extras(key)}
    items = out.get("results")
    if isinstance(items, list):
        out["results"] = [{**item, **forms.extras(f"{key}/{i}")} if isinstance(item, dict) else item
                          for i, item in enumerate(items)]
    return out


def decorate(forms: Forms, response: Response) -> Response:
    """A JSON object answer with fields no model declares added (row unknown-fields)."""
    body = bytes(response.body)
    if not body.startswith(b"{") or len(body) > DECORATE_MAX_BYTES:
        return response
    extra = forms.extras()
    if not extra:
        return response
    data = json.loads(body)
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return Response(dumps({**data, **extra}), status_code=response.status_code, headers=headers,
                    media_type=response.media_type)
