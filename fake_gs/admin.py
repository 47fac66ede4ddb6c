"""The admin API under ``/_fake/`` (outside the service prefix ``/api/v2``).

health, reset, a JSON state dump (execution counters for at-most-once proofs), forcing a
job's state, fault rules at run time, mutant info, and the export downloads. With tokens
configured every admin route needs a bearer token, except export downloads, whose random
URL token is the credential (like a presigned URL). With tokens, only the admin token
(``--admin-token``, or a random one printed at start-up) opens it: service tokens get 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from contract.errors import ErrorCode
from fake_gs.auth import authenticate_admin
from fake_gs.errors import ApiError
from fake_gs.faults import FaultRule, parse_rules
from fake_gs.handlers.common import BodyReader, json_response, parse_json
from fake_gs.mutants import MUTANTS
from fake_gs.state import AppState

ADMIN_PREFIX = "/_fake"

AdminHandler = Callable[[AppState, Request, BodyReader], Awaitable[Response]]


def _wrap(state: AppState, handler: AdminHandler, *, auth: bool = True) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        body = BodyReader(request, state.settings, state.inflight)
        try:
            if auth and not state.mutant("admin-open"):
                authenticate_admin(state.settings, request, state.admin_token)
            return await handler(state, request, body)
        except ApiError as exc:
            await body.drain()
            return json_response(exc.body(), exc.status, exc.headers)
        finally:
            body.release()

    return endpoint


async def health(state: AppState, request: Request, body: BodyReader) -> Response:
    s = state.settings
    return json_response({"status": "ok", "profile": s.profile, "engine": s.engine, "mutant": s.mutant})


async def reset(state: AppState, request: Request, body: BodyReader) -> Response:
    await body.drain()
    state.store.reset()
    return json_response({})


async def dump(state: AppState, request: Request, body: BodyReader) -> Response:
    return json_response(state.store.dump())


async def force_job_state(state: AppState, request: Request, body: BodyReader) -> Response:
    data = parse_json(await body.read(1024 * 1024) or b"{}")
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(status, str) or not status:
        raise ApiError(ErrorCode.VALIDATION_FAILED, "body must be {\"status\": ..., \"reason\"?: ...}",
                       [{"loc": ["status"], "msg": "required string", "type": "missing"}])
    reason = data.get("reason") or ""
    job = state.store.jobs.get(request.path_params["job_id"])
    if job is None:
        raise ApiError(ErrorCode.JOB_NOT_FOUND, f"job {request.path_params['job_id']!r} not found")
    state.store.force_state(job, status, str(reason))
    return json_response({"job_id": job.job_id, "status": state.store.status(job), "reason": job.reason})


async def get_faults(state: AppState, request: Request, body: BodyReader) -> Response:
    return json_response({"rules": state.faults.rules()})


async def _read_rules(body: BodyReader) -> list[FaultRule]:
    """Parse fault rules from an admin body; bad rules are a 400 naming the problem."""
    data = parse_json(await body.read(1024 * 1024) or b"[]")
    try:
        return parse_rules(data)
    except (TypeError, ValueError) as exc:
        raise ApiError(ErrorCode.VALIDATION_FAILED, f"bad fault rules: {exc}") from None


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


async def mutants(state: AppState, request: Request, body: BodyReader) -> Response:
    return json_response({
        "active": state.settings.mutant,
        "known": [{"name": m.name, "clauses": list(m.clauses), "description": m.description}
                  for m in MUTANTS.values()],
    })


async def export_download(state: AppState, request: Request, body: BodyReader) -> Response:
    rec = state.store.export(request.path_params["token"])
    if rec is None:
        raise ApiError(ErrorCode.NOT_FOUND, "export not found or expired")
    return Response(rec.data, media_type="application/octet-stream",
                    headers={"content-disposition": f'attachment; filename="{rec.filename}"'})


def admin_routes(state: AppState) -> list[Route]:
    p = ADMIN_PREFIX
    return [
        Route(f"{p}/health", _wrap(state, health), methods=["GET"]),
        Route(f"{p}/reset", _wrap(state, reset), methods=["POST"]),
        Route(f"{p}/state", _wrap(state, dump), methods=["GET"]),
        Route(f"{p}/jobs/{{job_id}}/state", _wrap(state, force_job_state), methods=["POST"]),
        Route(f"{p}/faults", _wrap(state, get_faults), methods=["GET"]),
        Route(f"{p}/faults", _wrap(state, put_faults), methods=["PUT"]),
        Route(f"{p}/faults", _wrap(state, post_faults), methods=["POST"]),
        Route(f"{p}/faults", _wrap(state, delete_faults), methods=["DELETE"]),
        Route(f"{p}/mutants", _wrap(state, mutants), methods=["GET"]),
        Route(f"{p}/exports/{{token}}", _wrap(state, export_download, auth=False), methods=["GET"]),
    ]
