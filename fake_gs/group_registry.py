"""The chunk groups of every job: lookup, idle expiry, loss (fault injection) and usage.

The protocol of one group (accept, ack, execute, replay) lives with the frame handlers;
this registry only keeps the groups per job and frees them. It shares the store's lock.
"""

from __future__ import annotations

import threading

from fake_gs.chunks import DONE, FAILED, OPEN, ChunkGroup
from fake_gs.clock import Clock
from fake_gs.heap import trim_heap
from fake_gs.settings import FakeSettings

#: Group statuses that hold no open upload any more (FAILED: its execution was refused).
SETTLED = frozenset({DONE, FAILED})


class GroupRegistry:
    def __init__(self, settings: FakeSettings, clock: Clock, lock: threading.RLock) -> None:
        self.settings = settings
        self.clock = clock
        self.lock = lock
        #: job id -> chunk group id -> group.
        self.groups: dict[str, dict[str, ChunkGroup]] = {}

    def job_groups(self, job_id: str) -> dict[str, ChunkGroup]:
        with self.lock:
            return self.groups.setdefault(job_id, {})

    def expire(self, job_id: str | None = None) -> int:
        """Drop open groups idle longer than ``chunk_group_idle_s`` (abandoned uploads) of
        one job, or of every job when ``job_id`` is None; returns how many were dropped."""
        if self.settings.mutant == "group-never-expires":
            return 0
        limit = self.clock.monotonic() - self.settings.chunk_group_idle_s
        dropped = 0
        with self.lock:
            per_job = [self.groups.get(job_id, {})] if job_id is not None else list(self.groups.values())
            for groups in per_job:
                for gid in [g for g, grp in groups.items() if grp.status == OPEN and grp.touched_at < limit]:
                    groups.pop(gid).release()
                    dropped += 1
        if dropped:
            trim_heap()
        return dropped

    def lose(self, job_id: str) -> int:
        """Forget the job's open (unfinished) chunk groups, as a restarted server would.

        Groups already finalizing or done are kept: their execution is under way or over, and
        a replay must still resolve to it (fault injection, ``lose_group``)."""
        with self.lock:
            groups = self.groups.get(job_id, {})
            lost = [gid for gid, grp in groups.items() if grp.status == OPEN]
            for gid in lost:
                groups.pop(gid).release()
        return len(lost)

    def drop_job(self, job_id: str) -> None:
        """The job ended: free every group it had."""
        with self.lock:
            for group in self.groups.pop(job_id, {}).values():
                group.release()

    def all(self) -> list[ChunkGroup]:
        with self.lock:
            return [g for per_job in self.groups.values() for g in per_job.values()]

    def buffered_bytes(self) -> int:
        """Chunk bytes buffered by every job together."""
        with self.lock:
            return sum(g.buffered_bytes for g in self.all())

    def usage(self, owner: str) -> tuple[int, int, int]:
        """(open groups of ``owner``, bytes they reserve, bytes every open group reserves)."""
        account_open = account_bytes = total = 0
        with self.lock:
            for g in self.all():
                reserved = g.reserved_bytes
                total += reserved
                if g.owner == owner:
                    account_bytes += reserved
                    account_open += g.status not in SETTLED
        return account_open, account_bytes, total
