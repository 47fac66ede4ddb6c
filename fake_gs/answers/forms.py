"""Answer dialects: which of the forms the spec allows (``contract.forms``) an answer takes.

``kit`` (the default) answers in the kit's own forms; ``spec`` always in the rows of
``contract.forms`` marked ``spec`` (integer error codes and bare ``detail`` lists, ``""``
for empty poll fields, capacity without false/zero fields, ``last_lr`` lists, server-chosen
checkpoint ids, 204 deletes, empty log pages while placing, a visible ``cancelling``);
``any`` picks among every row, per answer, by a hash of the fake's ``--seed``, the row and
the answer (so a run is reproducible and a retried cursor page is the same page). Handlers
ask :meth:`Forms.use`; the helpers below turn a kit-form answer into the chosen one (the
last block holds the rows only ``any`` draws: status spellings, id shapes, timestamps,
optional fields, short pages, fields no model declares; in the kit and spec dialects each
returns the kit's form unchanged). :class:`FormsOutward` is what the store asks of them
(``fake_gs.state.outward``).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import uuid
from collections.abc import Callable, Container, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from starlette.responses import Response

from contract.errors import ErrorCode
from contract.forms import (
    DELIVERIES,
    DIALECTS,
    EXTRA_FIELDS,
    FORMS,
    JOB_STATE_SYNONYMS,
    REQUEST_STATE_SYNONYMS,
    SPEC_FORMS,
    Dialect,
)
from contract.models import DetailListError, ErrorEnvelope, MessageCodeError
from contract.states import job_state_enum_spelling, request_state_enum_spelling
from fake_gs.answers.render import dumps
from fake_gs.clock import rfc3339

__all__ = ["DIALECTS", "Dialect", "Forms", "FormsOutward", "forms_for"]
T = TypeVar("T")


class Forms:
    """The fake's choice of form for each answer (see the module docstring)."""

    def __init__(self, dialect: str, seed: int) -> None:
        self.dialect = dialect
        self.seed = seed
        self._count = itertools.count()

    def _draw(self, form: str, key: object, n: int) -> int:
        if key is None:
            key = next(self._count)
        digest = hashlib.blake2b(f"{self.seed}|{form}|{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % n

    def use(self, form: str, key: object = None) -> bool:
        """Whether this answer takes row ``form`` instead of the kit's form (``key``: what
        the choice is bound to, so it stays the same for it; None: this answer alone)."""
        if form not in FORMS:
            raise KeyError(f"unknown form {form!r} (contract.forms)")
        if self.dialect == "kit":
            return False
        if self.dialect == "spec":
            return form in SPEC_FORMS
        return self._draw(form, key, 2) == 1

    def pick(self, form: str, choices: Sequence[T], key: object = None) -> T:
        """One of ``choices`` (the first is the kit's form) for row ``form``."""
        if not self.use(form, key):
            return choices[0]
        if self.dialect == "spec" or len(choices) == 2:
            return choices[-1]
        return choices[1 + self._draw(form + "#", key, len(choices) - 1)]

    def number(self, form: str, low: int, high: int, key: object = None) -> int:
        """A seeded integer in ``low..high`` for row ``form``."""
        return low + self._draw(form + "%", key, high - low + 1)

    def extras(self, key: object = None) -> dict[str, Any]:
        """Fields no model declares, for row ``unknown-fields`` (empty when not chosen)."""
        if not self.use("unknown-fields", key):
            return {}
        name = EXTRA_FIELDS[self._draw("unknown-fields/name", key, len(EXTRA_FIELDS))]
        value: Any = {"etag": f"W/\"{self.number('unknown-fields', 1, 10**6, key)}\"",
                      "server_revision": self.number("unknown-fields", 1, 99, key),
                      "labels": {"zone": "us-west-2a"}}[name]
        return {name: value}


@functools.cache
def forms_for(dialect: str, seed: int) -> Forms:
    """The chooser of a fake with this dialect and seed (one per pair, shared by its parts)."""
    return Forms(dialect, seed)


# --- error bodies (spec §3.6) -------------------------------------------------------------

ErrorBody = ErrorEnvelope | MessageCodeError | DetailListError
#: The status row precondition-status answers a call on a job that is not running with.
PRECONDITION_FAILED = 412


def error(envelope: ErrorEnvelope, status: int, forms: Forms | None = None) -> tuple[ErrorBody, int]:
    """A kit error envelope in a form spec §3.6 allows, and its status: the documented
    string code stays (spec §9.3); a validation failure (a 400 naming fields) may become a
    ``detail`` list (``loc`` from ``body``), answered 422 where row validation-422 is
    chosen; anything else ``{"message", "code": <status>}``. ``forms`` None: the spec
    dialect's fixed choice."""
    message = envelope.message or "error"
    if envelope.code == ErrorCode.CHUNK_GROUP_RESTART_REQUIRED:
        return MessageCodeError(message=message, code=str(envelope.code)), status
    if forms is not None and envelope.code == ErrorCode.JOB_NOT_RUNNING and forms.use("precondition-status"):
        return MessageCodeError(message=message, code=PRECONDITION_FAILED), PRECONDITION_FAILED
    validation = bool(envelope.detail) and status in (400, 422)
    if forms is not None and not forms.use("error-forms"):
        return envelope, status
    if validation:
        detail = DetailListError(detail=[d.model_copy(update={"loc": ["body", *d.loc]}) for d in envelope.detail or ()])
        validation_failed = envelope.code == ErrorCode.VALIDATION_FAILED
        if forms is not None and validation_failed and forms.use("validation-422"):
            return detail, 422
        if forms is None or forms.pick("error-forms", (False, True)):
            return detail, status
    return MessageCodeError(message=message, code=status), status


# --- polls, capacity, steps, saves --------------------------------------------------------


def poll(view: dict[str, Any], forms: Forms | None = None) -> dict[str, Any]:
    """Empty ``error`` / ``next_cursor`` as ``""`` (per field in the any dialect); a
    failure's error as its message."""
    out = dict(view)
    err = out.get("error")
    if err is None:
        if forms is None or forms.use("poll-empty-fields"):
            out["error"] = ""
    elif isinstance(err, dict) and (forms is None or forms.use("poll-empty-fields")):
        out["error"] = str(err.get("message") or err.get("code") or "failed")
    if out.get("next_cursor") is None and "next_cursor" in out and (forms is None or forms.use("poll-empty-fields")):
        out["next_cursor"] = ""
    return out


def capacity(cap: dict[str, Any]) -> dict[str, Any]:
    """proto3 JSON: false and zero fields are omitted."""
    return {k: v for k, v in cap.items() if v not in (False, 0)}


def capped(cap: dict[str, Any], forms: Forms) -> dict[str, Any]:
    """``available_gpus`` capped by a (seeded) schedulable capacity below what is free."""
    free = int(cap.get("available_gpus") or 0)
    if free <= 0 or not forms.use("capacity-capped"):
        return cap
    return {**cap, "available_gpus": forms.number("capacity-capped", 0, free - 1)}


def step_result(result: dict[str, Any]) -> dict[str, Any]:
    """``last_lr`` as a list (one value per parameter group)."""
    lr = result.get("last_lr")
    return {**result, "last_lr": [lr]} if isinstance(lr, (int, float)) else result


def scheduled(result: dict[str, Any], forms: Forms) -> dict[str, Any]:
    """``last_lr`` as a warm-up scheduler set it (a fraction of the asked rate), not as asked."""
    lr = result.get("last_lr")
    if not isinstance(lr, (int, float)) or not forms.use("last-lr-scheduled"):
        return result
    steps = int(result.get("global_steps") or 1)
    return {**result, "last_lr": float(lr) * min(1.0, steps / 10)}


def save_id(wanted: str | None, global_steps: int, taken: Container[str]) -> str:
    """The id a save gets: the server's own, whatever the caller asked for (the control
    plane does not forward it); ``taken`` is the job's checkpoint dict."""
    base = f"ckpt-step{global_steps}"
    ckpt_id, n = base, 1
    while ckpt_id in taken:
        n += 1
        ckpt_id = f"{base}-{n}"
    return ckpt_id


# --- tail-logs (spec §7.8, §12.1) ---------------------------------------------------------


def log_cursor(text: str | int | None) -> str | int | None:
    """An opaque log cursor (``L<n>``) back to the kit's line index; any other value (an
    integer too, which the payload's schema allows) goes on to be judged as is."""
    return text[1:] if isinstance(text, str) and text.startswith("L") else text


def log_page(entries: list[Any], end: int, eof: bool, placing: bool,
             cursor_in: str | int | None) -> dict[str, Any]:
    """An opaque cursor; while the job is placing the pod is still appearing, so the page is
    empty and not EOF, with the cursor unchanged (the caller asks again)."""
    if placing:
        return {"entries": [], "next_cursor": cursor_in or "L0", "eof": False}
    return {"entries": entries, "next_cursor": f"L{end}", "eof": eof}


# --- the rows only the any dialect draws ---------------------------------------------------
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


def timestamp(forms: Forms, ts: float) -> str:
    """The kit's form (RFC 3339, milliseconds, ``Z``), or the same instant with
    microseconds or a ``+00:00`` offset (RFC 3339 still)."""
    shape = forms.pick("timestamp-form", ("kit", "micro", "offset"))
    if shape == "kit":
        return rfc3339(ts)
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


class FormsOutward:
    """The store's outward form (``fake_gs.state.outward.Outward``) as ``forms`` chooses it."""

    def __init__(self, forms: Forms) -> None:
        self.forms = forms

    def job_id(self) -> str:
        return new_job_id(self.forms)

    def request_id(self) -> str:
        return new_request_id(self.forms)

    def result(self, key: str, value: Any) -> Any:
        return result(self.forms, key, value)

    def delivery(self, mode: str, key: str) -> str:
        return self.forms.pick("result-delivery", DELIVERIES, key) if mode == "auto" else mode

    def shows_cancelling(self, job_id: str) -> bool:
        return self.forms.use("cancelling-visible", job_id)

    def page_size(self, request_id: str, offset: int, max_events: int, left: int) -> int:
        return page_size(self.forms, request_id, offset, max_events, left)

    def null_for_empty(self, request_id: str) -> bool:
        return self.forms.use("done-result-null", request_id)  # spec §6.8 (the client reads {})

    def empty_while_in_flight(self) -> bool:
        return self.forms.use("inflight-result-empty")  # spec §6.8's own empty form

    def step_result(self, result: dict[str, Any]) -> dict[str, Any]:
        result = scheduled(result, self.forms)
        return step_result(result) if self.forms.use("last-lr-list") else result

    def save_naming(self, wanted_id: str | None) -> Callable[[int, Container[str]], str] | None:
        # Without an id of the caller's, the kit's own step name is the server's naming
        # already (the spec dialect names every save itself).
        if self.forms.use("save-id-server") and (wanted_id is not None or self.forms.dialect == "spec"):
            return functools.partial(save_id, wanted_id)
        return None

    def bare_save_result(self) -> bool:
        return self.forms.use("save-result-fields")
