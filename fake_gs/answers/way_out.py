"""The one hook chain an answer passes on its way out of the fake.

A handler builds the answer the contract asks for and hands it, or the value of one of
its parts, to :class:`WayOut`; the chain gives it the form it leaves in. In order: the
running variation's rewrite of the kit's own value and its bends of the answer's shape
(``fake_gs/controls/seams.py``: status names, the create answer, the error answer), then the
answer forms of ``--dialect`` and ``--status-style`` (:mod:`fake_gs.answers.forms`). The
fault rules act at the border (``fake_gs/http/dispatch.py``): an answer they pick replaces
the handler's. So the HTTP side asks this object and never a seam. Built once per app:
the settings are frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from starlette.responses import PlainTextResponse, Response

from contract.errors import ErrorCode
from contract.models import (
    CreateJobResponse,
    ErrorEnvelope,
    GenerateStreamSubmitResponse,
    SubmitResponse,
)
from contract.states import JobState
from fake_gs.answers import forms as dialect
from fake_gs.answers.check import json_response
from fake_gs.answers.forms import Forms
from fake_gs.answers.refusals import ApiError, envelope
from fake_gs.answers.render import render
from fake_gs.controls.seams import Bend, Rewrite, Seams

T = TypeVar("T")

#: The parts of an answer whose value the chain may rewrite (the seam's rewrite points).
AnswerPart = Rewrite


@dataclass(frozen=True)
class WayOut:
    """The way out of the running fake: its answer forms and the variation's answer hooks."""

    forms: Forms
    #: ``--dialect``: ``kit`` (the kit's own forms), ``spec`` (spec's fixed choice), ``any``.
    dialect: str
    #: ``--status-style enum``: states spelled as enum names.
    enum_states: bool
    _seams: Seams
    #: A 405's Allow lists the methods of one matched route, not of the path (bent on purpose).
    allow_one_route: bool
    #: Whether each answer is checked against the OpenAPI document before it leaves (never
    #: while a variation changes answers on purpose).
    checks_answers: bool

    @classmethod
    def of(cls, seams: Seams, *, forms: Forms, dialect: str, status_style: str, validate_answers: bool) -> WayOut:
        """The way out of a fake with these settings (``fake_gs.settings.FakeSettings``)."""
        return cls(forms=forms, dialect=dialect, enum_states=status_style == "enum",
                   _seams=seams, allow_one_route=Bend.ALLOW_ONE_ROUTE in seams.bent,
                   checks_answers=validate_answers and not seams.points)

    def part(self, part: AnswerPart, value: T) -> T:
        """``value`` as it leaves at ``part`` (rewritten when the running variation acts there)."""
        return self._seams.rewrite(part, value)

    def job_state(self, status: str) -> str:
        """A job state as the answer spells it."""
        if status == JobState.INITIALIZING and Bend.INITIALIZING_AS_PLACING in self._seams.bent:
            status = JobState.PLACING
        return dialect.job_state(self.forms, status, self.enum_states or Bend.STATUS_ENUM_NAMES in self._seams.bent)

    def request_state(self, status: str) -> str:
        """A request state as the answer spells it."""
        return dialect.request_state(self.forms, status, self.enum_states)

    def created(self, job_id: str) -> tuple[BaseModel | dict[str, Any], int]:
        """A create's answer and its status."""
        if Bend.CREATE_NO_JOB_ID in self._seams.bent:
            return {}, 200
        created = Bend.CREATE_201 in self._seams.bent or self.forms.use("success-status")
        return CreateJobResponse(job_id=job_id), 201 if created else 200

    def submission(self, request_id: str, job_id: str, count: int | None = None) -> Response:
        """The answer to a call that submitted request ``request_id`` (generate-stream's
        carries the prompt ``count``): rendered, rewritten where the running variation acts,
        then written with its status."""
        answer = SubmitResponse(request_id=request_id, job_id=job_id) if count is None else \
            GenerateStreamSubmitResponse(request_id=request_id, job_id=job_id, count=count)
        rendered = self._seams.rewrite(AnswerPart.SUBMIT_ANSWER, render(answer))
        return json_response(rendered, 202 if self.forms.use("success-status") else 200)

    def error(self, exc: ApiError, headers: Mapping[str, str] | None = None) -> Response:
        """A refusal as the answer (``headers``: those it keeps)."""
        bent = self._seams.bent
        if exc.code == ErrorCode.MALFORMED_FRAME and Bend.MALFORMED_FRAME_500 in bent:
            return json_response(envelope(ErrorCode.INTERNAL, exc.message), 500)
        if exc.status == 400 and Bend.PLAIN_400 in bent:
            return PlainTextResponse("Bad Request", 400)
        return self.error_envelope(self.part(AnswerPart.ERROR_ENVELOPE, exc.envelope()), exc.status, headers)

    def error_envelope(self, found: ErrorEnvelope, status: int, headers: Mapping[str, str] | None = None) -> Response:
        """An error envelope as the answer, in the fake's dialect (the spec dialect's fixed
        choice, or the any dialect's per answer: contract.forms error-forms, validation-422)."""
        answer: BaseModel = found
        if self.dialect != "kit":
            answer, status = dialect.error(found, status, self.forms if self.dialect == "any" else None)
        return json_response(answer, status, headers)
