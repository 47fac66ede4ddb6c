"""Per-account caps on what the fake keeps for good.

12 creates with a 50 MiB ``experiment_name`` kept +602 MiB (and ``list_jobs`` answered
600 MiB); 400 saves and 400 exports kept about +210 MiB each, exports for an hour. Now,
with defaults from ``contract.limits.RETENTION_BOUNDS``:

- every string of a create body (experiment_name, model names, config keys and values) is
  at most ``max_text_bytes`` of UTF-8;
- the create bodies one account's jobs keep add up to at most ``max_account_config_bytes``;
- one account keeps at most ``max_checkpoints_per_account`` checkpoints over all its jobs
  (a save naming a checkpoint its job already has replaces it and is always taken);
- one account has at most ``max_exports_per_account`` live exports: one more frees its
  oldest (``fake_gs.state.job_table.JobTable.add_export``).

A refusal is a 400 ``limit_exceeded`` naming the cap; it changes no state.
"""

from __future__ import annotations

from typing import Any

from contract.errors import ErrorCode, detail_entry
from fake_gs.answers.refusals import ApiError
from fake_gs.settings import FakeSettings
from fake_gs.state.records import JobRec
from fake_gs.state.store import Store


def check_texts(data: Any, settings: FakeSettings) -> None:
    """Refuse a create body holding a string (or key) over ``max_text_bytes``."""
    cap = settings.max_text_bytes
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(loc + (str(key),), str(key), cap)
                stack.append((loc + (str(key),), item))
        elif isinstance(value, list):
            stack.extend((loc + (i,), item) for i, item in enumerate(value))
        elif isinstance(value, str):
            _check_text(loc, value, cap)


def _check_text(loc: tuple[str | int, ...], text: str, cap: int) -> None:
    if len(text) > cap // 4 and len(text.encode("utf-8", "surrogatepass")) > cap:
        where = ".".join(str(p) for p in loc) or "body"
        message = f"{where} is over the fake's max_text_bytes {cap} (UTF-8 bytes of one string)"
        raise ApiError(ErrorCode.LIMIT_EXCEEDED, message, [detail_entry(loc, message, "max_text_bytes")])


def check_config_room(store: Store, owner: str, size: int) -> None:
    """Refuse a create whose body would take its account past ``max_account_config_bytes``."""
    cap = store.settings.max_account_config_bytes
    with store.lock:
        used = sum(j.config_bytes for j in store.jobs.values() if j.owner == owner)
    if used + size > cap:
        raise ApiError(ErrorCode.LIMIT_EXCEEDED,
                       f"this account's jobs keep {used} bytes of create bodies; {size} more is over the "
                       f"fake's max_account_config_bytes {cap}")


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
