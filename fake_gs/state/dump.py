"""The admin dump of a store (``GET /_fake/state``): everything tests want to assert on.

Tokens never appear, only indices; ``labels`` names owners (e.g. minted tokens as their
accounts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fake_gs.chunking.groups import DONE
from fake_gs.state.records import JobRec

if TYPE_CHECKING:
    from fake_gs.state.store import Store


def _owner(tokens: tuple[str, ...], owner: str, labels: Callable[[str], str] | None) -> str:
    if labels is not None:
        return labels(owner)
    return f"token#{tokens.index(owner)}" if owner in tokens else "anonymous"


def _job(store: Store, job: JobRec, owner: str) -> dict[str, Any]:
    """One job of the dump. The dump keys jobs by their key; a job whose id in its account
    differs from it (another account held that id first) carries that id as ``job_id``."""
    named = {"job_id": job.public_id} if job.public_id != job.job_id else {}
    return {
        **named,
        "status": store.status(job),
        "reason": job.reason,
        "owner": owner,
        "gpus": job.gpus,
        "admitted": job.admitted_at is not None,
        "global_steps": job.global_steps,
        "forward_backward_executions": job.fb_executions,
        "requests": job.requests_total,
        "checkpoints": list(job.checkpoints),
        "weight_versions": {s.sub_job_id: s.weight_version for s in job.sub_jobs if s.job_type != "training"},
        "sub_jobs": [s.sub_job_id for s in job.sub_jobs],
    }


def _settings(store: Store) -> dict[str, Any]:
    s = store.settings
    return {
        "profile": s.profile,
        "engine": s.engine,
        "mutant": s.mutant,
        "status_style": s.status_style,
        "startup": str(s.startup),
        "latency": str(s.latency),
        "result_delivery": s.result_delivery,
        "auth": bool(s.tokens),
    }


def dump(store: Store, labels: Callable[[str], str] | None = None) -> dict[str, Any]:
    """The store as JSON (taken under its lock, so one consistent moment)."""
    tokens = tuple(store.settings.tokens)
    with store.lock:
        jobs = {job.job_id: _job(store, job, _owner(tokens, job.owner, labels)) for job in store.jobs.values()}
        groups = [g.describe() for g in store.chunk_groups.all()]
        queue = store.queue
        return {
            "jobs": jobs,
            "chunk_groups": groups,
            "open_chunk_groups": sum(1 for g in groups if g["status"] != DONE),
            "buffered_bytes": sum(g["buffered_bytes"] for g in groups),
            "requests": {
                "total": queue.requests_submitted,
                "by_op": dict(queue.requests_by_op),
                "executed_by_op": dict(queue.executed_by_op),
                "in_flight": sum(1 for r in queue.requests.values() if not r.executed and not r.cancelled),
            },
            "exports": len(store.table.exports),
            "idempotency": store.idempotency.describe(),
            "http_requests": store.http_requests,
            "internal_errors": store.internal_errors,
            "settings": _settings(store),
        }
