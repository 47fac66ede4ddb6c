"""Per-account caps on what the fake keeps for good.

12 creates with a 50 MiB ``experiment_name`` kept +602 MiB (and ``list_jobs`` answered
600 MiB); 400 saves and 400 exports kept about +210 MiB each, exports for an hour. Now,
with defaults from ``contract.limits.RETENTION_BOUNDS``:

- every string of a create body (experiment_name, model names, config keys and values) is
  at most ``max_text_bytes`` of UTF-8;
- a job's config is counted at what it costs in memory as the Python objects kept, not its
  JSON size (:func:`weigh_config`: two accounts' 130 MiB of JSON configs kept +1.3 GiB); the
  configs one account's jobs keep add up to at most ``max_account_config_bytes``, those of
  all accounts to ``max_config_bytes_total``;
- one account holds at most ``max_jobs_per_account`` jobs (5,000 jobs of one account kept
  +219 MiB);
- one account keeps at most ``max_checkpoints_per_account`` checkpoints over all its jobs
  (a save naming a checkpoint its job already has replaces it and is always taken);
- one account has at most ``max_exports_per_account`` live exports: one more frees its
  oldest (``fake_gs.state.job_table.JobTable.add_export``).

A refusal is a 400 ``limit_exceeded`` naming the cap; it changes no state.
"""

from __future__ import annotations

import sys
from typing import Any

from contract.errors import ErrorCode, detail_entry
from fake_gs.answers.refusals import ApiError
from fake_gs.settings import FakeSettings
from fake_gs.state.records import JobRec
from fake_gs.state.store import Store

#: What one sub-job's records cost beside its config's own objects (its SubJobRec, the
#: models holding the config, its ids).
SUB_JOB_RECORD_BYTES = 4096


def weigh_config(data: Any, settings: FakeSettings) -> int:
    """Refuse a create body holding a string (or key) over ``max_text_bytes``; else the
    bytes its config costs kept in memory: the sizes of the objects ``data`` (the body as
    the job keeps it) is made of, plus each sub-job's records. A JSON string of 13 bytes is
    a 60-byte object and a pointer; a body of small values costs several times its JSON (about 9 to 13 times)."""
    cap = settings.max_text_bytes
    cost = 0
    stack: list[Any] = [data]
    while stack:  # no locations kept on the way: they would cost more than the body
        value = stack.pop()
        cost += sys.getsizeof(value)
        if isinstance(value, dict):
            for key in value:
                cost += sys.getsizeof(key)
                if _over(str(key), cap):
                    _refuse_text(data, cap)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and _over(value, cap):
            _refuse_text(data, cap)
    subs = data.get("sub_job_configs") if isinstance(data, dict) else None
    return cost + SUB_JOB_RECORD_BYTES * (len(subs) if isinstance(subs, list) else 1)


def _over(text: str, cap: int) -> bool:
    return len(text) > cap // 4 and len(text.encode("utf-8", "surrogatepass")) > cap


def _refuse_text(data: Any, cap: int) -> None:
    """Raise the refusal naming the first string (or key) over ``cap`` by its location."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if _over(str(key), cap):
                    _check_text(loc + (str(key),), str(key), cap)
                stack.append((loc + (str(key),), item))
        elif isinstance(value, list):
            stack.extend((loc + (i,), item) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(loc, value, cap)


def _check_text(loc: tuple[str | int, ...], text: str, cap: int) -> None:
    if _over(text, cap):
        where = ".".join(str(p) for p in loc) or "body"
        message = f"{where} is over the fake's max_text_bytes {cap} (UTF-8 bytes of one string)"
        raise ApiError(ErrorCode.LIMIT_EXCEEDED, message, [detail_entry(loc, message, "max_text_bytes")])


def check_job_room(store: Store, owner: str, cost: int) -> None:
    """Refuse a create that would give its account more than ``max_jobs_per_account`` jobs,
    or take the configs kept (``cost`` bytes more, :func:`weigh_config`) past the account's
    ``max_account_config_bytes`` or every account's ``max_config_bytes_total``."""
    settings = store.settings
    held = store.table.held()  # jobs being created count: a create awaits the engine
    jobs = [j for j in held if j.owner == owner]
    used = sum(j.config_bytes for j in jobs)
    used_total = sum(j.config_bytes for j in held)
    if len(jobs) >= settings.max_jobs_per_account:
        raise ApiError(ErrorCode.LIMIT_EXCEEDED,
                       f"this account holds {len(jobs)} jobs, the fake's max_jobs_per_account "
                       f"{settings.max_jobs_per_account}; no more jobs can be created for it")
    if used + cost > settings.max_account_config_bytes:
        raise ApiError(ErrorCode.LIMIT_EXCEEDED,
                       f"this account's job configs keep {used} bytes in memory; this one would "
                       f"add {cost}, over the fake's max_account_config_bytes "
                       f"{settings.max_account_config_bytes} (configs are counted as kept, "
                       "several times their JSON for small values)")
    if used_total + cost > settings.max_config_bytes_total:
        raise ApiError(ErrorCode.LIMIT_EXCEEDED,
                       f"the fake's job configs keep {used_total} bytes in memory over all "
                       f"accounts; this one would add {cost}, over its max_config_bytes_total "
                       f"{settings.max_config_bytes_total}")


def check_checkpoint_room(store: Store, job: JobRec, wanted_id: str | None) -> None:
    """Refuse a save that would give the job's account more than its checkpoint cap."""
    cap = store.settings.max_checkpoints_per_account
    with store.lock:
        if wanted_id is not None and wanted_id in job.checkpoints:
            return  # replaces one
        mine = {j.job_id for j in store.jobs.values() if j.owner == job.owner}
        kept = sum(len(store.jobs[j].checkpoints) for j in mine)
        coming = sum(1 for r in store.requests.values()
                     if r.job_id in mine and r.op == "save" and not r.executed and not r.cancelled)
    if kept + coming >= cap:
        raise ApiError(ErrorCode.LIMIT_EXCEEDED,
                       f"this account keeps {kept} checkpoints (+{coming} being saved), the fake's "
                       f"max_checkpoints_per_account is {cap}; delete some before saving more")
