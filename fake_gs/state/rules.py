"""The rules the fake's border asks of the backend, in one object: how large a body may be,
whether a content type is checked, whether a job in a given state serves a call.

The running variation (``fake_gs/ops/seams.py``) may waive any of them; the border reads
this object and never the seams, so an HTTP handler reads a rule by its name here. The
settings are frozen, so the rules are decided once, when the store is built.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from contract.states import JOB_TERMINAL
from fake_gs.ops.seams import Rule
from fake_gs.settings import FakeSettings

#: How much larger a body may be when the body limit is waived.
WAIVED_BODY_FACTOR = 4


@dataclass(frozen=True)
class Rules:
    """The rules in force for the running fake."""

    #: The largest body a call may send (``--max-body-mib``; spec §9.1).
    body_limit: int
    #: The largest decoded operation payload (operations are not chunked: one body holds
    #: it whole); None when no limit is enforced.
    payload_limit: int | None
    #: Whether a body in the wrong content type is refused (415).
    checks_content_type: bool
    #: Whether an ended job still serves data-plane calls.
    ended_jobs_serve: bool

    @classmethod
    def of(cls, settings: FakeSettings) -> Rules:
        waived = settings.seams.waived
        limit = settings.max_body_bytes
        enforced = Rule.BODY_LIMIT not in waived
        return cls(body_limit=limit if enforced else limit * WAIVED_BODY_FACTOR,
                   payload_limit=limit if enforced else None,
                   checks_content_type=Rule.CONTENT_TYPE not in waived,
                   ended_jobs_serve=Rule.ENDED_JOB_REFUSES in waived)

    def job_serves(self, status: str, wanted: Container[str]) -> bool:
        """Whether a job in ``status`` serves a call that needs one of ``wanted``."""
        return status in wanted or (status in JOB_TERMINAL and self.ended_jobs_serve)
