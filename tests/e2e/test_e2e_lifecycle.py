"""Client -> fake over loopback HTTP: create, running, every op of both profiles, cancel."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from e2e_fake import Fake

from client import ConfigError, CortexHTTPError, create_client
from client.transports.base import COLOCATION_OPS

B, S = 2, 3000  # big enough that 16 KiB chunks cut forward-backward into several pieces


def _batch() -> dict[str, Any]:
    ids = torch.randint(0, 1000, (B, S), generator=torch.Generator().manual_seed(0))
    return {
        "batch": {"input_ids": ids, "attention_mask": torch.ones(B, S, dtype=torch.long),
                  "advantages": torch.zeros(B, S), "response_mask": torch.ones(B, S)},
        "meta": {"pad_token_id": 0, "calculate_entropy": True},
        "processing": {"loss_fn": "verl_grpo", "post": []},
    }


def _every_op(fake: Fake, *, profile: str) -> dict[str, Any]:
    route = "proposed" if profile == "proposed" else "operation"
    cfg = fake.config(max_chunk_bytes=16384, log_prob_gpus=1, forward_no_grad_route=route)
    seen: dict[str, Any] = {}
    with create_client(cfg) as client:
        job = client.job_id
        assert job and client.training_job_id == f"{job}:training:0"
        assert client.sampling_job_id == f"{job}:sampling:0"
        assert client.log_prob_job_id == f"{job}:log_prob:0"

        fb = client.fwd_bwd(_batch(), reference_model=False, router_replay=None)
        assert fb["loss"] == fb["avg_loss"] and isinstance(fb["avg_loss"], float)
        assert "grad_norm" in fb["metrics"] and fb["grad_norm"] is fb["metrics"]["grad_norm"]
        assert fb["post_process_outputs"] == {}
        seen["fb"] = fb

        fng = client.fwd_no_grad(_batch(), reference_model=False)
        for key in ("logprobs", "log_probs"):
            assert fng["batch"][key].shape == (B, S)
        assert fng["batch"]["entropy"].shape == (B, S)
        assert float(fng["batch"]["logprobs"].max()) <= 0.0

        step = client.step()
        assert step["global_steps"] == 1
        step2 = client.step(learning_rate=5e-6)
        assert step2["global_steps"] == 2 and step2["last_lr"] == 5e-6
        seen["step"] = step

        saved = client.save_checkpoint({"global_step": 2}, "/ckpt/global_step2")
        assert saved["checkpoint_id"]
        weights = client.save_weights(path="/w")
        assert weights["checkpoint_id"]
        client.step()
        loaded = client.load_checkpoint(saved["checkpoint_id"])
        assert loaded["checkpoint_id"] == saved["checkpoint_id"]

        gen = client.generate([[1, 2, 3], "hello"], {"max_tokens": 5, "logprobs": 1})
        assert len(gen) == 2  # the list of outputs, one per prompt
        for result in gen:
            assert isinstance(result["token_ids"], list) and 1 <= len(result["token_ids"]) <= 5
            assert isinstance(result["logprobs"], list)
            assert len(result["logprobs"]) == len(result["token_ids"])
            assert result["finish_reason"] in ("stop", "length")

        if profile == "proposed":
            lp = client.log_probs(["a b"], completions=[" c"])
            assert lp["results"]
        else:  # no log-probs route today: token prompts are scored by the forward operation
            lp = client.log_probs([[1, 2, 3], [4, 5]], completions=[[6, 7], [8]])
            assert [len(r["logprobs"]) for r in lp["results"]] == [2, 1]
            assert [r["token_ids"] for r in lp["results"]] == [[6, 7], [8]]
            with pytest.raises(ConfigError, match="token ids"):
                client.log_probs(["a b"])

        synced = client.sync_weights(cuda_ipc=True, low_memory=True)
        assert synced["target_sub_job_ids"] == [client.sampling_job_id]
        assert client.reset_prefix_cache()["sub_job_id"] == client.sampling_job_id
        logs = client.tail_logs(max_lines=2)
        assert len(logs["entries"]) <= 2 and "eof" in logs
        for op in sorted(COLOCATION_OPS):
            assert getattr(client, op)() == {}

        rest = client.transport.rest  # type: ignore[attr-defined]
        ids = [c["checkpoint_id"] for c in rest.list_checkpoints(job)["checkpoints"]]
        assert saved["checkpoint_id"] in ids
        export = rest.export_checkpoint(job, saved["checkpoint_id"])
        assert export["files"]
        rest.delete_checkpoint(job, saved["checkpoint_id"])
        with pytest.raises(CortexHTTPError) as missing:
            rest.delete_checkpoint(job, saved["checkpoint_id"])
        assert missing.value.status == 404
        assert rest.get_experiment_run(job)["experiment_run_name"]
        assert rest.get_capacity()["in_use_gpus"] >= 3
        assert any(j["job_id"] == job for j in rest.list_jobs()["jobs"])
        seen["job"] = job
        seen["live"] = fake.admin.state()
    after = fake.admin.state()
    seen["state"] = after
    assert after["jobs"][job]["status"] in ("cancelled", "cancelling")
    assert after["internal_errors"] == 0
    return seen


#: The kit's answer forms and the other forms the spec allows (fake-gs --dialect).
DIALECTS = ["kit", "spec"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_op_proposed_profile_strict(make_fake: Any, dialect: str) -> None:
    with make_fake(profile="proposed", strict=True, startup="polls:3", latency="polls:2",
                   dialect=dialect) as fake:
        seen = _every_op(fake, profile="proposed")
    groups = [g for g in seen["live"]["chunk_groups"] if g["route"] == "forward_backward"]
    assert groups and all(g["total_chunks"] > 3 for g in groups)
    assert all(g["executions"] == 1 for g in groups)
    assert seen["live"]["jobs"][seen["job"]]["forward_backward_executions"] == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_op_current_profile(make_fake: Any, dialect: str) -> None:
    with make_fake(profile="current", strict=True, startup="polls:2", dialect=dialect) as fake:
        seen = _every_op(fake, profile="current")
    # today's server has no metrics block: the loss-only answer is shaped for the integrations
    assert set(seen["fb"]["metrics"]) == {"loss", "grad_norm"}
    assert seen["fb"]["metrics"]["loss"] == seen["fb"]["avg_loss"]
    assert math.isnan(seen["fb"]["grad_norm"])  # reported by no one: NaN, never a guess


def test_proposed_route_against_a_current_server_is_a_clear_404(make_fake: Any) -> None:
    cfg_of = lambda fake, route: fake.config(retries=1, forward_no_grad_route=route)  # noqa: E731
    with make_fake(profile="current") as fake, create_client(cfg_of(fake, "proposed")) as client:
        with pytest.raises(CortexHTTPError) as info:
            client.fwd_no_grad(_batch())
        assert info.value.status == 404 and info.value.route == "forward_no_grad"
        assert "route=forward_no_grad" in str(info.value)
    with make_fake(profile="current") as fake, create_client(cfg_of(fake, "auto")) as client:
        for _ in range(2):  # the first call learns the route is absent, the second goes straight
            assert client.fwd_no_grad(_batch())["batch"]["logprobs"].shape == (B, S)
        assert client.transport.absent_routes == {"forward_no_grad"}  # type: ignore[attr-defined]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("style", ["short", "enum"])
def test_both_status_styles(make_fake: Any, style: str, dialect: str) -> None:
    with make_fake(status_style=style, startup="polls:2", latency="polls:2", dialect=dialect) as fake:
        with create_client(fake.config()) as client:
            raw = client.transport.rest.get_job(client.job_id)  # type: ignore[attr-defined]
            assert raw["status"] == ("JOB_STATE_RUNNING" if style == "enum" else "running")
            assert client.step()["global_steps"] == 1
            assert client.fwd_bwd(_batch())["avg_loss"] > 0
            assert client.save_checkpoint()["checkpoint_id"]
        assert fake.admin.state()["internal_errors"] == 0


def test_shutdown_cancels_the_job(shared_fake: Fake) -> None:
    client = create_client(shared_fake.config())
    client.start()
    job = client.job_id
    assert job is not None
    client.shutdown()
    status = shared_fake.admin.state()["jobs"][job]["status"]
    assert status in ("cancelled", "cancelling")
