"""A green test: every call the client made is one the service accepts."""

from __future__ import annotations

from typing import Any


def test_step_sync_and_save(fake_gs: Any, rl_client: Any) -> None:
    rl_client.step(learning_rate=1e-5)
    rl_client.sync_weights()
    saved = rl_client.save_checkpoint()
    assert saved["checkpoint_id"]
    routes = {ex.route for ex in fake_gs.traffic()}
    assert {"create_job", "step", "operation", "save", "get_request"} <= routes
    assert list(fake_gs.state()["jobs"]) == [rl_client.job_id]  # this test's account only
