"""The admin API under ``/_fake/`` (outside the service prefix ``/api/v2``).

health, reset, a JSON state dump (execution counters for at-most-once proofs), the open
connections (what their deadlines and cap did), forcing a job's state, holding a job's
executor, fault rules at run time, the variations, the export downloads, and for plumbing gates (:mod:`fake_gs.controls.traffic`) minted per-test tokens and the
per-account traffic log. Export downloads need no bearer token: their random URL token is
the credential (like a presigned URL). With tokens configured, only the admin token
(``--admin-token``, or a random one printed at start-up) opens the rest: service tokens,
configured or minted, get 403.

The admin API is the fake's own, not part of the contract: no contract model describes its
answers, so they stay outside the answer check (``fake_gs.answers.check``); its refusals still
use the contract's error envelope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contract.errors import ErrorCode, detail_entry
from fake_gs.answers.check import json_response
from fake_gs.answers.refusals import ApiError, validation_error
from fake_gs.controls.faults import FaultRule, parse_rules
from fake_gs.controls.seams import VARIATIONS, VARIATIONS_ADMIN_ALIASES
from fake_gs.http.app_state import AppState
from fake_gs.http.auth import authenticate_admin
from fake_gs.http.body import BodyReader
from fake_gs.http.json_body import parse_json
from fake_gs.state.records import JobRec

ADMIN_PREFIX = "/_fake"

AdminHandler = Callable[[AppState, Request, BodyReader], Awaitable[Response]]


def _wrap(state: AppState, handler: AdminHandler, *, auth: bool = True) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        body = BodyReader(request, state.settings, state.inflight)
        try:
            if auth and state.store.rules.admin_token_required:
                authenticate_admin(state.settings, state.store.rules, request, state.admin_token, state.accounts)
            return await handler(state, request, body)
        except ApiError as exc:
            await body.drain()
            return json_response(exc.envelope(), exc.status, exc.headers)
        finally:
            body.release()

    return endpoint


async def health(state: AppState, request: Request, body: BodyReader) -> Response:
    s = state.settings
    return json_response({"status": "ok", "profile": s.profile, "engine": s.engine, "variation": s.variation})


async def reset(state: AppState, request: Request, body: BodyReader) -> Response:
    await body.drain()
    state.store.reset()
    return json_response({})


async def dump(state: AppState, request: Request, body: BodyReader) -> Response:
    return json_response(state.store.dump(labels=lambda owner: state.accounts.label(owner, state.settings.tokens)))


async def connections(state: AppState, request: Request, body: BodyReader) -> Response:
    """Open connections and what their deadlines and the cap did (fake_gs.http.connections)."""
    return json_response(state.connections.stats())


async def budgets(state: AppState, request: Request, body: BodyReader) -> Response:
    """The server-wide budgets as they stand (fair shares): bodies in flight, chunk
    groups reclaimed for another account's share, and whether start-up loading is over."""
    return json_response({"inflight": state.inflight.describe(),
                          "reclaimed_chunk_groups": state.store.chunk_groups.reclaimed,
                          "warmed_up": state.warmed_up.is_set()})


def admin_job(state: AppState, request: Request) -> JobRec:
    """The job an admin path names: by its key (the dump's ``jobs`` keys), or with
    ``?account=LABEL`` by its id in that account (job ids are per account: two accounts may
    each hold a job of one id, and the second one's key is not its id)."""
    name = request.path_params["job_id"]
    account = _account(request)
    if account is None:
        job = state.store.jobs.get(name)
    else:
        owner = state.accounts.owner_of(account, state.settings.tokens)
        key = state.store.table.key_for(owner, name) if owner is not None else None
        job = state.store.jobs.get(key) if key is not None else None
    if job is None:
        raise ApiError(ErrorCode.JOB_NOT_FOUND, f"job {name!r} not found")
    return job


async def force_job_state(state: AppState, request: Request, body: BodyReader) -> Response:
    data = parse_json(await body.read(1024 * 1024) or b"{}")
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(status, str) or not status:
        raise ApiError(ErrorCode.VALIDATION_FAILED, "body must be {\"status\": ..., \"reason\"?: ...}",
                       [{"loc": ["status"], "msg": "required string", "type": "missing"}])
    reason = data.get("reason") or ""
    job = admin_job(state, request)
    state.store.table.force_state(job, status, str(reason))
    return json_response({"job_id": job.job_id, "status": state.store.table.status(job), "reason": job.reason})


async def hold_job(state: AppState, request: Request, body: BodyReader) -> Response:
    """``{"hold": true}`` blocks the job's executor (requests stay queued, not started) until
    ``{"hold": false}``; tests use it to cancel a request that certainly has not started."""
    data = parse_json(await body.read(1024 * 1024) or b"{}")
    on = data.get("hold", True) if isinstance(data, dict) else None
    if not isinstance(on, bool):
        raise ApiError(ErrorCode.VALIDATION_FAILED, "body must be {\"hold\": true|false}",
                       [{"loc": ["hold"], "msg": "a boolean", "type": "bool_type"}])
    job = admin_job(state, request)
    state.store.executors.hold(job.job_id, on)
    return json_response({"job_id": job.job_id, "hold": on})


async def get_faults(state: AppState, request: Request, body: BodyReader) -> Response:
    return json_response({"rules": state.faults.rules()})


async def _read_rules(body: BodyReader) -> list[FaultRule]:
    """Parse fault rules from an admin body; bad rules are a 400 naming the problem."""
    data = parse_json(await body.read(1024 * 1024) or b"[]")
    try:
        return parse_rules(data)
    except ValidationError as exc:  # 400 validation_failed, each bad field by loc
        raise validation_error(exc, ("rules",)) from None
    except ValueError as exc:
        raise ApiError(ErrorCode.VALIDATION_FAILED, f"bad fault rules: {exc}",
                       [detail_entry(("rules",), str(exc), "list_type")]) from None


async def put_faults(state: AppState, request: Request, body: BodyReader) -> Response:
    """Replace the rules in force."""
    state.faults.set_rules(await _read_rules(body))
    return json_response({"rules": state.faults.rules()})


async def post_faults(state: AppState, request: Request, body: BodyReader) -> Response:
    """Append rules to the ones in force (PUT replaces them all)."""
    state.faults.add_rules(await _read_rules(body))
    return json_response({"rules": state.faults.rules()})


async def delete_faults(state: AppState, request: Request, body: BodyReader) -> Response:
    await body.drain()
    state.faults.set_rules([])
    return json_response({"rules": []})


async def mint_token(state: AppState, request: Request, body: BodyReader) -> Response:
    """A fresh service token: its own account (jobs, traffic), e.g. one per test."""
    await body.drain()
    if not state.settings.tokens:
        raise ApiError(ErrorCode.CONFLICT, "auth is off (no --token): every caller is one account, "
                                           "so a minted token would isolate nothing")
    try:
        token, account = state.accounts.mint()
    except ValueError as exc:
        raise ApiError(ErrorCode.CONFLICT, str(exc)) from None
    return json_response({"token": token, "account": account})


def _account(request: Request) -> str | None:
    value = request.query_params.get("account")
    return value if value else None


async def get_traffic(state: AppState, request: Request, body: BodyReader) -> Response:
    """One account's exchanges and tally (``?account=minted#3``), or every account's; an
    account's answer also lists its jobs' chunk groups still open."""
    if not state.traffic.enabled:
        raise ApiError(ErrorCode.CONFLICT, "the traffic log is off; start the fake with --traffic N")
    account = _account(request)
    view = state.traffic.view(account)
    if account is not None:
        view["open_chunk_groups"] = open_groups(state, account)
    return json_response(view)


def open_groups(state: AppState, account: str) -> list[dict[str, object]]:
    """Chunk groups still open (chunks missing) on the jobs of one account, named by the
    job ids the account uses."""
    store = state.store
    owner = state.accounts.owner_of(account, state.settings.tokens)
    if owner is None:
        return []
    with store.lock:
        names = {j.job_id: j.public_id for j in store.jobs.values() if j.owner == owner}
        return [{**g.describe(), "job_id": name} for key, name in names.items()
                for g in store.groups.get(key, {}).values() if g.status == "open"]


async def delete_traffic(state: AppState, request: Request, body: BodyReader) -> Response:
    await body.drain()
    state.traffic.clear(_account(request))
    return json_response({})


async def variations(state: AppState, request: Request, body: BodyReader) -> Response:
    """The variation the fake runs with, and every one it knows."""
    return json_response({
        "active": state.settings.variation,
        "known": [{"name": v.name, "clauses": list(v.clauses), "description": v.description}
                  for v in VARIATIONS.values()],
    })


async def export_download(state: AppState, request: Request, body: BodyReader) -> Response:
    rec = state.store.table.export(request.path_params["token"])
    if rec is None:
        raise ApiError(ErrorCode.NOT_FOUND, "export not found or expired")
    return Response(rec.data, media_type="application/octet-stream",
                    headers={"content-disposition": f'attachment; filename="{rec.filename}"'})


#: The admin API: method, path under ADMIN_PREFIX, handler (every one token-checked
#: except the export download, whose URL carries its own secret).
_ADMIN_TABLE: tuple[tuple[str, str, AdminHandler], ...] = (
    ("GET", "/health", health),
    ("POST", "/reset", reset),
    ("GET", "/state", dump),
    ("GET", "/connections", connections),
    ("GET", "/budgets", budgets),
    ("POST", "/jobs/{job_id}/state", force_job_state),
    ("POST", "/jobs/{job_id}/hold", hold_job),
    ("GET", "/faults", get_faults),
    ("PUT", "/faults", put_faults),
    ("POST", "/faults", post_faults),
    ("DELETE", "/faults", delete_faults),
    ("GET", "/variations", variations),
    *(("GET", path, variations) for path in VARIATIONS_ADMIN_ALIASES),  # older spellings
    ("POST", "/tokens", mint_token),
    ("GET", "/traffic", get_traffic),
    ("DELETE", "/traffic", delete_traffic),
    ("GET", "/exports/{token}", export_download),
)


def admin_routes(state: AppState) -> list[Route]:
    return [
        Route(ADMIN_PREFIX + path, _wrap(state, handler, auth=handler is not export_download), methods=[method])
        for method, path, handler in _ADMIN_TABLE
    ]
