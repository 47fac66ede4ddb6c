"""The chunk groups of every job: lookup, idle expiry, loss (fault injection) and usage.

The protocol of one group (accept, ack, execute, replay) lives in the intake (``intake``);
this registry only keeps the groups per job, measures what each account holds, and frees
them (idle, lost, or reclaimed for another account's fair share). It shares the store's
lock.

A job keeps its finished groups (a replayed final chunk resolves to the original
execution), so a long run holds thousands of them; the measures and the idle expiry walk
only the *live* groups (open, finalizing, or still holding their buffer), which a
finished group leaves for good: a request costs the same at its ten-thousandth call.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from fake_gs.chunking import shares
from fake_gs.chunking.groups import DONE, FAILED, OPEN, ChunkGroup
from fake_gs.chunking.machine import Load, Reclaim, Usage
from fake_gs.clock import Clock
from fake_gs.heap import trim_heap
from fake_gs.settings import FakeSettings

#: Group statuses that hold no open upload any more (FAILED: its execution was refused).
SETTLED = frozenset({DONE, FAILED})

log = logging.getLogger("fake_gs.chunking.groups")


class RegistryRules(Protocol):
    """The rules the registry reads, decided once for the running fake (the store's
    ``fake_gs.state.rules.Rules``)."""

    @property
    def idle_groups_expire(self) -> bool: ...


class JobGroups(dict[str, ChunkGroup]):
    """One job's groups by id; a group stored here is also entered among the live ones."""

    def __init__(self, live: dict[tuple[str, str], ChunkGroup]) -> None:
        super().__init__()
        self._live = live

    def __setitem__(self, group_id: str, group: ChunkGroup) -> None:
        super().__setitem__(group_id, group)
        self._live[(group.job_id, group_id)] = group


class GroupRegistry:
    def __init__(self, settings: FakeSettings, rules: RegistryRules, clock: Clock, lock: threading.RLock) -> None:
        self.settings = settings
        self.rules = rules
        self.clock = clock
        self.lock = lock
        #: job id -> chunk group id -> group.
        self.groups: dict[str, dict[str, ChunkGroup]] = {}
        #: (job id, group id) -> a group that may still count: see :meth:`live`.
        self._live: dict[tuple[str, str], ChunkGroup] = {}
        #: Open groups dropped to give another account its fair share (the state dump shows it).
        self.reclaimed = 0

    def job_groups(self, job_id: str) -> dict[str, ChunkGroup]:
        with self.lock:
            groups = self.groups.get(job_id)
            if groups is None:
                groups = self.groups[job_id] = JobGroups(self._live)
            return groups

    def live(self, job_id: str | None = None) -> list[ChunkGroup]:
        """The groups still held (of one job, or of all): those in their job's table that
        are unsettled or keep their buffer. Any other one is forgotten here, for good: a
        settled group never reopens and a released buffer never comes back."""
        held: list[ChunkGroup] = []
        with self.lock:
            for key, group in list(self._live.items()):
                kept = self.groups.get(group.job_id, {}).get(group.group_id) is group
                if not kept or (group.status in SETTLED and group.buffer is None):
                    del self._live[key]
                elif job_id is None or group.job_id == job_id:
                    held.append(group)
        return held

    def expire(self, job_id: str | None = None) -> int:
        """Drop open groups idle longer than ``chunk_group_idle_s`` (abandoned uploads) of
        one job, or of every job when ``job_id`` is None; returns how many were dropped."""
        if not self.rules.idle_groups_expire:
            return 0
        limit = self.clock.monotonic() - self.settings.chunk_group_idle_s
        dropped = 0
        with self.lock:
            for group in self.live(job_id):
                if group.status == OPEN and group.touched_at < limit:
                    self.groups[group.job_id].pop(group.group_id).release()
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

    def loads(self, groups: list[ChunkGroup] | None = None) -> dict[str, Load]:
        """Every account's open groups and the bytes its groups reserve, over the server
        (or over ``groups``, when given)."""
        opened: dict[str, int] = {}
        reserved: dict[str, int] = {}
        for g in self.live() if groups is None else groups:
            reserved[g.owner] = reserved.get(g.owner, 0) + g.reserved_bytes
            opened[g.owner] = opened.get(g.owner, 0) + (g.status not in SETTLED)
        return {owner: Load(opened[owner], reserved[owner]) for owner in opened}

    def usage(self, owner: str, job_id: str) -> Usage:
        """The load a new group of ``owner`` meets: its job's, its account's, the server's,
        and every account's (for the fair shares)."""
        with self.lock:
            held = self.live()
            loads = self.loads(held)
            mine = [g for g in held if g.job_id == job_id]
        job = Load(sum(g.status not in SETTLED for g in mine), sum(g.reserved_bytes for g in mine))
        return Usage(job, loads.get(owner, Load()), sum(u.reserved for u in loads.values()),
                     sum(u.open_groups for u in loads.values()), loads, owner)

    def reclaim(self, asker: str, room: Reclaim) -> int:
        """Free ``room`` for ``asker`` from the accounts over their fair share of the server's
        budgets: their least recently touched open groups are dropped (their next chunk is
        told to restart the group). Returns how many groups were dropped."""
        need_bytes, need_groups = room.bytes, room.groups
        dropped = 0
        with self.lock:
            while need_bytes > 0 or need_groups > 0:
                victim = self._victim(asker, bytes_wanted=need_bytes > 0)
                if victim is None:
                    break
                self.groups.get(victim.job_id, {}).pop(victim.group_id, None)
                need_bytes -= victim.reserved_bytes
                need_groups -= 1
                victim.release()
                dropped += 1
            self.reclaimed += dropped
        if dropped:
            log.info("dropped %d idle chunk group(s) of accounts over their fair share for another account", dropped)
            trim_heap()
        return dropped

    def _victim(self, asker: str, *, bytes_wanted: bool) -> ChunkGroup | None:
        """The least recently touched open group (none of its chunks arriving right now) of
        the account most over its share of the budget that is short (bytes when
        ``bytes_wanted``, else open groups)."""
        loads = self.loads()
        if bytes_wanted:
            held, cap = {a: u.reserved for a, u in loads.items()}, self.settings.max_buffered_bytes_total
        else:
            held, cap = {a: u.open_groups for a, u in loads.items()}, self.settings.max_open_groups_total
        for account in shares.over_share(held, asker, cap):
            candidates = [g for g in self.live() if g.owner == account and g.status == OPEN and not g.arriving]
            if candidates:
                return min(candidates, key=lambda g: g.touched_at)
        return None
