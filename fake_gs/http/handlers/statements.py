"""``POST /api/v2/statements``: the one SQL statement the execution-log download sends.

The route sits outside the cortex-training prefix, as the Snowflake SQL API does (spec
§2.1), and goes through the same wrapper as every service route (auth, faults, error
envelope). It answers ``SELECT SYSTEM$GET_VSTAGE_WRITE_CREDS('snow://experiment/E/versions/R/')``
for a run of the caller's job with one row holding the stage credentials (spec §12.2);
any other statement is refused with 400: the fake is not a SQL engine.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from contract.errors import ErrorCode
from contract.logs import STATEMENTS_ROUTE, parse_stage_statement, stage_credentials_statement
from contract.models import StatementColumn, StatementMetaData, StatementResult
from fake_gs.answers.refusals import ApiError
from fake_gs.http.app_state import AppState
from fake_gs.http.dispatch import make_endpoint
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.execution_logs import job_id_of_run

#: Snowflake's SQL API success code and SQL state.
SQL_SUCCESS = "090001"


async def sql_statement(ctx: Ctx) -> Response:
    body = await ctx.json_object()
    statement = body.get("statement") if isinstance(body, dict) else None
    if not isinstance(statement, str) or not statement.strip():
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "body needs a non-empty 'statement' string")
    parsed = parse_stage_statement(statement)
    if parsed is None:
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "the fake runs one statement only: "
                       + stage_credentials_statement("<experiment>", "<run>"))
    experiment, run = parsed
    job_id = job_id_of_run(run)
    job = ctx.store.table.job_for(ctx.owner, job_id) if job_id else None
    if job is None or job.experiment_name != experiment:
        raise ApiError(ErrorCode.NOT_FOUND, f"no experiment run {experiment}/{run}")
    with ctx.store.lock:
        live = list(job.logs)
    logs = ctx.store.execution_logs
    lines = logs.lines(job, live)
    empty = ctx.store.rules.stage_logs_unwritten
    creds = await asyncio.to_thread(logs.publish, job, lines, empty=empty)
    handle = str(uuid.uuid4())
    column = StatementColumn(name="SYSTEM$GET_VSTAGE_WRITE_CREDS", type="text", nullable=False)
    return json_response(StatementResult(
        result_set_meta_data=StatementMetaData(num_rows=1, format="jsonv2", row_type=[column]),
        data=[[creds.to_json()]],
        code=SQL_SUCCESS,
        sql_state="00000",
        message="Statement executed successfully.",
        statement_handle=handle,
        statement_status_url=f"{STATEMENTS_ROUTE.path}/{handle}",
        created_on=int(time.time() * 1000),
    ))


def statement_routes(state: AppState) -> list[BaseRoute]:
    endpoint = make_endpoint(state, STATEMENTS_ROUTE, sql_statement)
    return [Route(STATEMENTS_ROUTE.path, endpoint, methods=["POST"], name=STATEMENTS_ROUTE.name)]
