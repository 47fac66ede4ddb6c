"""How long a finished request keeps its result: freed once read, bounded while unread.

A running job used to keep every result until it ended: 600 forward-no-grad calls with
1 MiB results grew the fake by 1.5 GiB. Now a result read to the end stays only
for a short grace (a client retrying its last page after a lost answer), at most the
``results_read_kept`` most recently read per job; unread results count against
``max_results_bytes`` per job and the oldest go first. A poll of a freed result answers
410 ``result_expired``. Every function runs under the store lock; ``now`` is the store
clock's monotonic reading.
"""

from __future__ import annotations

from fake_gs.settings import FakeSettings
from fake_gs.state.records import JobRec, RequestRec
from fake_gs.state.rules import Rules


def free(job: JobRec, req: RequestRec) -> None:
    """Drop a request's result bytes; later polls of it answer 410."""
    if job.results.pop(req.request_id, None) is not None:
        job.results_bytes -= req.result_bytes
    req.result_raw = req.events_raw = None
    req.result_bytes = 0
    req.expired = True


def stored(settings: FakeSettings, rules: Rules, job: JobRec, req: RequestRec, now: float) -> None:
    """A result was just stored: count it, then free what the budget no longer holds (read
    results first, then the oldest unread; never the one just stored)."""
    job.results[req.request_id] = req
    job.results_bytes += req.result_bytes
    sweep(settings, rules, job, now)
    if job.results_bytes <= settings.max_results_bytes:
        return
    order = sorted(job.results.values(), key=lambda r: (r.read_at is None, r.read_at or 0.0))
    for old in order:
        if job.results_bytes <= settings.max_results_bytes:
            break
        if old is not req:
            free(job, old)


def read_to_end(settings: FakeSettings, rules: Rules, job: JobRec, req: RequestRec, now: float) -> None:
    """A poll delivered the result's last page."""
    if req.read_at is None and req.request_id in job.results:
        req.read_at = now
    sweep(settings, rules, job, now)


def sweep(settings: FakeSettings, rules: Rules, job: JobRec, now: float) -> None:
    """Free read results past their grace, or beyond the newest ``results_read_kept``."""
    read = [r for r in job.results.values() if r.read_at is not None]
    if not read or not rules.read_results_freed:
        return
    read.sort(key=lambda r: r.read_at or 0.0, reverse=True)
    limit = now - settings.result_grace_s
    for rank, r in enumerate(read):
        if rank >= settings.results_read_kept or (r.read_at or 0.0) < limit:
            free(job, r)


def forget(job: JobRec) -> None:
    """The job ended: none of its results can be polled any more."""
    for req in list(job.results.values()):
        free(job, req)
    job.results_bytes = 0
