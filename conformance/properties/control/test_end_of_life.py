"""The session job's end: cancelled as spec §5.5 describes, and judged while it dies.

Ordered last (conftest ``gs_last``): in a single-process run this cancels the job every
other property used, so a URL run judges the cancel clauses without a second job. A reused
job (``--job-id``) is never cancelled: then a job of its own is needed (``--max-jobs``).
"""

from __future__ import annotations

import pytest

from conformance.drivers.raw import RawDriver
from conformance.jobs import SharedJob
from conformance.judging.lifecycle import end_of_life, judge, may_end_shared_job
from conformance.options import GsOptions
from conformance.reporting.cost import COST
from conformance.reporting.violations import Soft
from contract.clauses import checks
from contract.states import JobState


@checks("CANCEL-ACTIVE-1", "CANCEL-IDEM-1", "CANCEL-BODY-1", "CANCEL-ANSWER-1", "JOB-RUNNING-2",
        "POLL-TERMINAL-1")
@pytest.mark.gs_last
def test_session_job_end_of_life(
    gs_raw: RawDriver, gs_job: SharedJob, gs_opts: GsOptions, request: pytest.FixtureRequest
) -> None:
    """Cancel with no body (2xx, then cancelling/cancelled), cancel again (2xx), wait for cancelled,
    cancel once more (2xx); the cancelled job refuses data-plane calls with a 4xx; a request
    that ended before the cancel, if still readable, reads as it ended."""
    own, why_not = may_end_shared_job(gs_job.created, hasattr(request.config, "workerinput"))
    if own:
        job_id = gs_job.job_id
    else:  # a budgeted job of its own (asked for only here, so the plan counts no extra job)
        new_job = request.getfixturevalue("gs_new_job")
        job_id, _ = new_job(why=f"a job to cancel at the end; {why_not}")
    eol = end_of_life(gs_raw, job_id, gs_opts.startup_timeout_s)
    if eol.final_state == JobState.CANCELLED:
        COST.job_ended(job_id)
    soft = Soft()
    judge(eol, soft)
    soft.check()
