"""The chunk-group registry without HTTP: its figures over the live groups agree with a count
over every group kept, however many finished groups a long run leaves behind."""

from __future__ import annotations

import random
import threading

from fake_gs import FakeSettings, ManualClock
from fake_gs.chunking.groups import DONE, FAILED, FINALIZING, OPEN, ChunkGroup, new_group
from fake_gs.chunking.machine import Load
from fake_gs.chunking.registry import SETTLED, GroupRegistry
from fake_gs.state.rules import Rules


def _registry(clock: ManualClock | None = None) -> GroupRegistry:
    settings = FakeSettings()
    return GroupRegistry(settings, Rules.of(settings), clock or ManualClock(), threading.RLock())


def _open(reg: GroupRegistry, job: str, gid: str, owner: str, size: int = 4096) -> ChunkGroup:
    desc = {"chunk_group_id": gid, "total_chunks": 2, "frame_sha256": "0" * 64, "frame_size_bytes": size}
    group = new_group(job, "forward_backward", desc, size // 2, reg.clock.monotonic(), owner)
    reg.job_groups(job)[gid] = group
    return group


def _finish(group: ChunkGroup) -> None:
    group.release()
    group.status = DONE


def _counted(reg: GroupRegistry, owner: str) -> Load:
    """The account's load counted the slow way: over every group of every job."""
    mine = [g for g in reg.all() if g.owner == owner]
    return Load(sum(g.status not in SETTLED for g in mine), sum(g.reserved_bytes for g in mine))


def test_finished_groups_stay_for_replays_but_leave_the_live_set() -> None:
    reg = _registry()
    groups = [_open(reg, "j1", f"g{i}", "alice") for i in range(1000)]
    for group in groups[:-1]:
        _finish(group)
    assert len(reg.job_groups("j1")) == 1000  # a replayed final chunk still finds its group
    assert reg.live() == [groups[-1]]
    usage = reg.usage("alice", "j1")
    assert usage.job == usage.account == Load(1, 4096)
    assert (usage.server_open, usage.server_reserved) == (1, 4096)


def test_figures_over_the_live_groups_match_a_count_over_all_of_them() -> None:
    rng = random.Random(7)
    reg = _registry()
    owners, jobs = ("alice", "bob", "carol"), [f"j{i}" for i in range(6)]
    for step in range(600):
        job = rng.choice(jobs)
        owner = owners[jobs.index(job) % 3]
        group = _open(reg, job, f"g{step}", owner, size=rng.randrange(1, 9) * 1024)
        fate = rng.random()
        if fate < 0.5:
            _finish(group)
        elif fate < 0.6:
            group.status = FINALIZING
        elif fate < 0.7:  # refused at execution: dropped from its job, as finalize does
            del reg.job_groups(job)[group.group_id]
            group.release()
            group.status = FAILED
        elif fate < 0.75:
            reg.lose(job)
        if step % 50 == 0:
            loads = reg.loads()
            for who in owners:
                assert loads.get(who, Load()) == _counted(reg, who)
    for job in jobs:
        owner = owners[jobs.index(job) % 3]
        usage = reg.usage(owner, job)
        kept = list(reg.job_groups(job).values())
        assert usage.job == Load(sum(g.status not in SETTLED for g in kept), sum(g.reserved_bytes for g in kept))
        assert usage.account == _counted(reg, owner)


def test_idle_expiry_drops_only_open_groups_of_the_job_asked() -> None:
    clock = ManualClock()
    reg = _registry(clock)
    stale, done = _open(reg, "j1", "stale", "alice"), _open(reg, "j1", "done", "alice")
    other = _open(reg, "j2", "other", "alice")
    _finish(done)
    clock.advance(reg.settings.chunk_group_idle_s + 1)
    fresh = _open(reg, "j1", "fresh", "alice")
    assert reg.expire("j1") == 1
    assert set(reg.job_groups("j1")) == {"done", "fresh"} and stale.buffer is None
    assert reg.live() == [other, fresh]
    assert reg.expire() == 1 and reg.live() == [fresh]
    assert other.status == OPEN and other.buffer is None
