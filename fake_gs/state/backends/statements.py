"""The SQL statement route's backend: the one statement the execution-log download sends.

``SELECT SYSTEM$GET_VSTAGE_WRITE_CREDS('snow://experiment/E/versions/R/')`` for a run of the
caller's job writes the job's execution logs to its account's stage and answers the
stage credentials (spec §12.2); any other statement is refused with 400: the fake is not
a SQL engine.
"""

from __future__ import annotations

from typing import Any

from contract.errors import ErrorCode
from contract.logs import StageCredentials, parse_stage_statement, stage_credentials_statement
from fake_gs.answers.refusals import ApiError
from fake_gs.state.execution_logs import job_id_of_run
from fake_gs.state.store import Store


class Statements:
    """The statement route over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def run(self, owner: str, body: Any) -> StageCredentials:
        """Run the statement of a parsed body for ``owner``. Blocking (it writes to the
        stage): run it off the event loop."""
        statement = body.get("statement") if isinstance(body, dict) else None
        if not isinstance(statement, str) or not statement.strip():
            raise ApiError(ErrorCode.INVALID_ARGUMENT, "body needs a non-empty 'statement' string")
        parsed = parse_stage_statement(statement)
        if parsed is None:
            raise ApiError(ErrorCode.INVALID_ARGUMENT, "the fake runs one statement only: "
                           + stage_credentials_statement("<experiment>", "<run>"))
        experiment, run = parsed
        job_id = job_id_of_run(run)
        store = self.store
        job = store.table.job_for(owner, job_id) if job_id else None
        if job is None or job.experiment_name != experiment:
            raise ApiError(ErrorCode.NOT_FOUND, f"no experiment run {experiment}/{run}")
        with store.lock:
            live = list(job.logs)
        logs = store.execution_logs
        return logs.publish(job, logs.lines(job, live), empty=store.rules.stage_logs_unwritten)
