"""``POST /api/v2/statements``: the one SQL statement the execution-log download sends.

The route sits outside the cortex-training prefix, as the Snowflake SQL API does (spec
§2.1), and goes through the same wrapper as every service route (auth, faults, error
envelope). The handler parses the body, hands it to the statement backend
(``fake_gs.state.backends.statements``: the one statement it runs, spec §12.2) and answers its
one row in the SQL API's result form.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from contract.logs import STATEMENTS_ROUTE
from contract.models import StatementColumn, StatementMetaData, StatementResult
from fake_gs.http.app_state import AppState
from fake_gs.http.dispatch import make_endpoint
from fake_gs.http.handlers.context import Ctx, json_response
from fake_gs.state.backends.statements import Statements

#: Snowflake's SQL API success code and SQL state.
SQL_SUCCESS = "090001"


async def sql_statement(ctx: Ctx) -> Response:
    body = await ctx.json_object()
    creds = await asyncio.to_thread(Statements(ctx.store).run, ctx.owner, body)
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
