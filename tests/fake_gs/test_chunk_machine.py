"""The chunk-group state machine on plain values, without HTTP (spec §9.3, §6.1).

Each test states a group and a chunk and checks the one decision the fake carries out:
Ack, Execute, Replay or Refuse. The mutants' hooks are checked by name as well.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from contract.errors import ErrorCode
from fake_gs.chunking import hooks as chunk_hooks
from fake_gs.chunking import machine as cm
from fake_gs.controls.mutants import MUTANTS
from fake_gs.controls.seams import seams_for
from fake_gs.settings import FakeSettings

ROUTE = "forward_backward"
SHA = "ab" * 32


#: Small caps: two open groups per job, three per account.
LIMITS = FakeSettings(max_body_bytes=1000, max_open_groups_per_job=2, max_buffered_bytes_per_job=10_000,
                      max_open_groups_per_account=3, max_buffered_bytes_per_account=20_000,
                      max_buffered_bytes_total=30_000)


def Group(received: set[int] | None = None, **change: Any) -> cm.GroupState:  # noqa: N802 (reads as a type)
    """A known group of four chunks over 350 bytes (ranges of 100) as the machine sees it."""
    terms: dict[str, Any] = {"route": ROUTE, "total": 4, "frame_sha256": SHA, "frame_size": 350,
                             "operation": "forward-backward", "range_size": 100, **change}
    return cm.GroupState(**terms, received=set(received or ()))


def desc(idx: int, total: int = 4, size: int = 350, **extra: Any) -> dict[str, Any]:
    base = {"chunk_group_id": "g1", "chunk_idx": idx, "total_chunks": total, "frame_size_bytes": size,
            "frame_sha256": SHA, "operation": "forward-backward"}
    return {**base, **extra}


def chunk(idx: int, payload_len: int = 100, total: int = 4, size: int = 350, *, differs: bool = False,
          route: str = ROUTE, **extra: Any) -> cm.Chunk:
    return cm.Chunk("job-1", route, desc(idx, total, size, **extra), payload_len, differs)


def test_the_final_flag_is_the_last_index() -> None:
    assert [chunk(i, total=4).final for i in range(4)] == [False, False, False, True]
    assert chunk(2).position == ("g1", 2, 4)
    assert chunk(0, 350, total=1).final


@pytest.mark.parametrize(("idx", "total", "size", "payload", "words"), [
    (4, 4, 350, 100, "out of range"),
    (0, 2, 2001, 100, "cannot fit in 2 chunks"),
    (0, 4, 350, 351, "exceeds frame_size_bytes"),
    (0, 1, 350, 349, "single chunk carries 349 bytes"),
])
def test_descriptors_that_do_not_add_up_are_malformed(idx: int, total: int, size: int, payload: int,
                                                      words: str) -> None:
    refusal = cm.descriptor_refusal(desc(idx, total, size), payload, LIMITS.max_body_bytes)
    assert refusal is not None and refusal.code == ErrorCode.MALFORMED_FRAME
    assert words in refusal.message


def test_an_empty_group_id_is_malformed_and_a_good_descriptor_passes() -> None:
    blank = cm.descriptor_refusal(desc(0, chunk_group_id="  "), 100, LIMITS.max_body_bytes)
    assert blank is not None and "empty chunk_group_id" in blank.message
    assert cm.descriptor_refusal(desc(0), 100, LIMITS.max_body_bytes) is None


def test_chunk_zero_opens_a_group_and_is_acked() -> None:
    assert cm.decide(chunk(0), None, LIMITS) == cm.Ack(keep=True, new_range_size=100)


def test_a_single_chunk_group_executes_at_once() -> None:
    decision = cm.decide(chunk(0, 350, total=1), None, LIMITS)
    assert decision == cm.Execute(keep=True, new_range_size=350, missing=())


def test_chunks_of_an_open_group_are_acked_in_any_order() -> None:
    group = Group(received={0})
    assert cm.decide(chunk(2), group, LIMITS) == cm.Ack(keep=True)
    group.received.add(2)
    assert cm.decide(chunk(1), group, LIMITS) == cm.Ack(keep=True)


def test_the_last_chunk_with_all_others_in_executes() -> None:
    group = Group(received={0, 1, 2})
    assert cm.decide(chunk(3, 50), group, LIMITS) == cm.Execute(keep=True)


def test_an_unknown_group_must_restart_from_chunk_zero() -> None:
    refusal = cm.decide(chunk(2), None, LIMITS)
    assert isinstance(refusal, cm.Refuse) and refusal.code == ErrorCode.CHUNK_GROUP_RESTART_REQUIRED
    assert "resend the whole group from chunk 0" in refusal.message


def test_an_expired_group_is_unknown_so_its_next_chunk_restarts() -> None:
    """Expiry is the registry's (it drops idle groups); the machine then meets no group."""
    decision = cm.decide(chunk(1), None, LIMITS, cm.Usage())
    assert isinstance(decision, cm.Refuse) and decision.code == ErrorCode.CHUNK_GROUP_RESTART_REQUIRED


def test_waiving_restart_opens_a_group_at_any_chunk() -> None:
    waived = {cm.RESTART}
    assert cm.decide(chunk(1), None, LIMITS, waived=waived) == cm.Ack(keep=True, new_range_size=100)
    last_first = cm.decide(chunk(3, 50), None, LIMITS, waived=waived)
    assert isinstance(last_first, cm.Refuse) and last_first.code == ErrorCode.CHUNK_GROUP_MISSING_CHUNKS


def test_a_resend_with_the_same_bytes_is_acked_without_effect() -> None:
    assert cm.decide(chunk(1), Group(received={0, 1}), LIMITS) == cm.Ack(keep=False)


def test_a_resend_with_other_bytes_conflicts() -> None:
    refusal = cm.decide(chunk(1, differs=True), Group(received={0, 1}), LIMITS)
    assert isinstance(refusal, cm.Refuse) and refusal.code == ErrorCode.CHUNK_GROUP_CONFLICT
    assert "sent before with another payload" in refusal.message


@pytest.mark.parametrize(("change", "name"), [
    ({"route": "generate"}, "route"),
    ({"frame_sha256": "cd" * 32}, "frame_sha256"),
    ({"total": 5}, "total_chunks"),
    ({"frame_size": 360}, "frame_size_bytes"),
    ({"operation": "forward"}, "operation"),
    ({"operation": None}, "operation"),
])
def test_a_chunk_disagreeing_with_its_group_conflicts(change: dict[str, Any], name: str) -> None:
    refusal = cm.decide(chunk(1), Group(received={0}, **change), LIMITS)
    assert isinstance(refusal, cm.Refuse) and refusal.code == ErrorCode.CHUNK_GROUP_CONFLICT
    assert refusal.message.endswith(f"started with another {name}")
    assert refusal.detail[0]["loc"] == ["request_chunk", name]


def test_a_missing_operation_matches_a_group_without_one() -> None:
    bare = cm.Chunk("job-1", ROUTE, {k: v for k, v in desc(1).items() if k != "operation"}, 100)
    assert cm.decide(bare, Group(received={0}, operation=None), LIMITS) == cm.Ack(keep=True)


def test_a_final_chunk_with_gaps_names_the_missing_ones() -> None:
    refusal = cm.decide(chunk(3, 50), Group(received={1}), LIMITS)
    assert isinstance(refusal, cm.Refuse) and refusal.code == ErrorCode.CHUNK_GROUP_MISSING_CHUNKS
    assert "missing chunk_idx [0, 2];" in refusal.message
    assert [d["loc"] for d in refusal.detail] == [["request_chunk", "chunk_idx", 0], ["request_chunk", "chunk_idx", 2]]
    assert refusal.touches_group


def test_a_large_gap_names_the_first_twenty() -> None:
    group = Group(total=40, frame_size=3950, received={0})
    refusal = cm.decide(chunk(39, 50, total=40, size=3950), group, LIMITS)
    assert isinstance(refusal, cm.Refuse)
    assert [d["loc"][-1] for d in refusal.detail] == list(range(1, 21))


def test_waiving_missing_executes_with_the_gaps_named() -> None:
    decision = cm.decide(chunk(3, 50), Group(received={1}), LIMITS, waived={cm.MISSING})
    assert decision == cm.Execute(keep=True, missing=(0, 2))


@pytest.mark.parametrize(("idx", "payload"), [(1, 99), (3, 51), (0, 101)])
def test_a_chunk_off_its_range_is_malformed(idx: int, payload: int) -> None:
    refusal = cm.decide(chunk(idx, payload), Group(received={2}), LIMITS)
    assert isinstance(refusal, cm.Refuse) and refusal.code == ErrorCode.MALFORMED_FRAME
    assert f"chunk {idx} carries {payload} bytes" in refusal.message and refusal.touches_group


@pytest.mark.parametrize(("payload", "size"), [(100, 401), (100, 300), (0, 350)])
def test_a_first_chunk_that_cannot_make_the_frame_is_malformed(payload: int, size: int) -> None:
    refusal = cm.decide(chunk(0, payload, size=size), None, LIMITS)
    assert isinstance(refusal, cm.Refuse) and "chunk sizes do not add up" in refusal.message
    assert not refusal.touches_group


@pytest.mark.parametrize("status", [cm.FINALIZING, cm.DONE])
def test_a_finished_group_replays_its_final_chunk_and_acks_the_rest(status: str) -> None:
    group = Group(status=status, received={0, 1, 2, 3})
    assert cm.decide(chunk(3, 50), group, LIMITS) == cm.Replay()
    assert cm.decide(chunk(1), group, LIMITS) == cm.Ack(keep=False)


@pytest.mark.parametrize(("usage", "code", "words"), [
    (cm.Usage(job=cm.Load(open_groups=2)), ErrorCode.CHUNK_GROUP_LIMIT, "job job-1 already has 2 open chunk groups"),
    (cm.Usage(job=cm.Load(reserved=9_700)), ErrorCode.BUFFER_LIMIT, "job job-1 cannot buffer 350 more bytes"),
    (cm.Usage(account=cm.Load(open_groups=3)), ErrorCode.CHUNK_GROUP_LIMIT, "this account already has 3 open"),
    (cm.Usage(account=cm.Load(reserved=19_700)), ErrorCode.BUFFER_LIMIT, "this account cannot buffer 350"),
    (cm.Usage(server_reserved=29_700), ErrorCode.CHUNK_GROUP_LIMIT, "the server is buffering 29700"),
])
def test_a_new_group_over_a_cap_is_refused(usage: cm.Usage, code: ErrorCode, words: str) -> None:
    refusal = cm.decide(chunk(0), None, LIMITS, usage)
    assert isinstance(refusal, cm.Refuse) and refusal.code == code and words in refusal.message
    assert cm.decide(chunk(0), None, LIMITS, usage, waived={cm.CAPS}) == cm.Ack(keep=True, new_range_size=100)


def test_waiving_account_caps_keeps_the_job_and_server_caps() -> None:
    waived = {cm.ACCOUNT_CAPS}
    account_full = cm.Usage(account=cm.Load(open_groups=3, reserved=19_700))
    assert cm.decide(chunk(0), None, LIMITS, account_full, waived) == cm.Ack(keep=True, new_range_size=100)
    assert isinstance(cm.decide(chunk(0), None, LIMITS, cm.Usage(job=cm.Load(open_groups=2)), waived), cm.Refuse)
    assert isinstance(cm.decide(chunk(0), None, LIMITS, cm.Usage(server_reserved=29_700), waived), cm.Refuse)
    roomy = replace(LIMITS, max_buffered_bytes_per_job=10**6, max_buffered_bytes_total=10**6)
    too_big = cm.decide(chunk(0, size=25_000), None, roomy, cm.Usage(), waived)
    assert isinstance(too_big, cm.Refuse) and "this account cannot buffer 25000" in too_big.message


def test_caps_bind_only_new_groups() -> None:
    full = cm.Usage(job=cm.Load(2, 10_000), server_reserved=30_000)
    assert cm.decide(chunk(1), Group(received={0}), LIMITS, full) == cm.Ack(keep=True)


def test_the_default_settings_let_a_first_group_open() -> None:
    assert cm.decide(chunk(0), None, FakeSettings()) == cm.Ack(keep=True, new_range_size=100)


def test_every_chunk_point_is_named_by_a_mutant_and_every_machine_rule_is_a_point() -> None:
    named = {point for m in MUTANTS.values() for seam, _, point in (p.partition(":") for p in m.seams)
             if seam == "chunk"}
    assert named == chunk_hooks.POINTS
    assert chunk_hooks.WAIVERS == cm.RULES
    assert seams_for(None).named("chunk") == frozenset() and seams_for("frame-500").named("chunk") == frozenset()


@pytest.mark.parametrize(("mutant", "group", "the_chunk", "expected"), [
    (None, Group(received={0}), chunk(1), cm.Ack(keep=True)),
    ("frame-500", Group(received={0}), chunk(1), cm.Ack(keep=True)),
    ("nonfinal-chunk-request-id", Group(received={0}), chunk(1), cm.Ack(keep=True, leak_request_id=True)),
    ("chunk-sha-unchecked", Group(received={0, 1, 2}), chunk(3, 50), cm.Execute(keep=True, verify_sha=False)),
    ("group-bytes-kept", Group(received={0, 1, 2}), chunk(3, 50), cm.Execute(keep=True, release_bytes=False)),
    ("chunked-limits-skipped", Group(received={0, 1, 2}), chunk(3, 50), cm.Execute(keep=True, frame_limits=False)),
    ("replay-double-exec", Group(received={0, 1, 2}), chunk(3, 50), cm.Execute(keep=True, keep_decoded=True)),
    ("replay-double-exec", Group(status=cm.DONE), chunk(3, 50), cm.Replay(execute_again=True)),
    ("replay-double-exec", Group(received={0}), chunk(1), cm.Ack(keep=True)),
    ("missing-chunks-accepted", Group(received={0}), chunk(3, 50), cm.Execute(keep=True, missing=(1, 2))),
    ("restart-not-required", None, chunk(2), cm.Ack(keep=True, new_range_size=100)),
    ("groups-uncapped", None, chunk(0), cm.Ack(keep=True, new_range_size=100)),
    ("account-caps-ignored", None, chunk(0), cm.Ack(keep=True, new_range_size=100)),
])
def test_mutants_change_decisions_at_their_chunk_points(mutant: str | None, group: cm.GroupState | None, the_chunk: cm.Chunk,
                                          expected: cm.Decision) -> None:
    full = {"groups-uncapped": cm.Usage(job=cm.Load(open_groups=2)),
            "account-caps-ignored": cm.Usage(account=cm.Load(open_groups=3))}
    usage = full.get(mutant or "", cm.NO_USAGE)
    assert chunk_hooks.decide(seams_for(mutant).named("chunk"), the_chunk, group, LIMITS, usage) == expected


def test_a_refusal_is_no_mutant_business() -> None:
    """Transforms change what a decision does, never turn a refusal into an acceptance."""
    for point in chunk_hooks.TRANSFORMS:
        refusal = chunk_hooks.decide(frozenset({point}), chunk(1, differs=True), Group(received={0, 1}), LIMITS)
        assert isinstance(refusal, cm.Refuse) and refusal.code == ErrorCode.CHUNK_GROUP_CONFLICT
