"""Fair shares under the red team's attacks, on a fake in a subprocess
so its RSS is its own. The figures at the attacks' own sizes: ``benchmarks/bench_hardening.py``."""

from __future__ import annotations

from hostile_attacks import MiB
from share_attacks import reservations, trickled_bodies
from stress_helpers import Admin, fake_process

ACCOUNTS = ["A", "B", "C", "D"]


def test_accounts_declaring_the_whole_chunk_budget_do_not_block_another() -> None:
    """Four accounts each send one tiny chunk 0 declaring a 2 GiB frame: the default 8 GiB
    server-wide budget is full, yet account E's chunked upload runs (one idle group gives way
    and its next chunk is told to restart); the fake holds what was sent, not what was declared."""
    tokens = [arg for t in [*ACCOUNTS, "E"] for arg in ("--token", t)]
    with fake_process(*tokens, "--admin-token", "Z") as fake:
        m = reservations(fake, accounts=ACCOUNTS, frame_size=2048 * MiB, victim="E")
        state = Admin(fake.base_url, "Z").budgets()
    assert m.statuses == [202] * 4, m.statuses
    assert "avg_loss" in m.extra["result"]
    assert state["reclaimed_chunk_groups"] == 1
    assert sorted(m.extra["next_chunk_codes"]) == ["202", "202", "202", "chunk_group_restart_required"]
    assert m.growth_mib < 64, m  # 8 GiB declared, ~2 KiB sent (and E's 4 MiB upload, freed)


def test_one_account_trickling_bodies_does_not_block_another() -> None:
    """Account A holds the in-flight body budget with bodies it trickles: its next body, all
    of it sent, is refused at once (not after --body-idle-s 60); account B's upload runs, one
    of A's bodies dropped for it (503 on its next byte) and its bytes freed."""
    args = ["--token", "A", "--token", "B", "--admin-token", "Z", "--max-inflight-mib", "8", "--body-idle-s", "60"]
    with fake_process(*args) as fake:
        m = trickled_bodies(fake, Admin(fake.base_url, "Z"), holder="A", other="B", bodies=4,
                            body_bytes=3 * MiB, sent_bytes=2 * MiB - 16 * 1024)
    status, code, seconds = m.extra["late_refusal"]
    assert (status, code) == (503, "unavailable") and seconds < 30, m.extra  # not held for the 60 s idle
    assert "avg_loss" in m.extra["result"]
    assert m.extra["evicted"] >= 1 and 503 in m.statuses, (m.extra, m.statuses)
    assert m.growth_mib < 8 * 1.5 + 32, m  # what arrived (8 MiB, then B's), never what was declared
