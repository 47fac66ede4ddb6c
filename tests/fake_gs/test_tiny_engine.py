"""The tiny engine computes for real: losses fall, log-probs agree, state round-trips.

These run the engine in-process (no server), so they pin the semantics the RL example and
the conformance suite's semantic checks rely on.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402

from contract.models import GenerateRequest, LogProbsRequest, SubJobConfig  # noqa: E402
from contract.shapes import check_forward_result, check_generate_result  # noqa: E402
from fake_gs.engines.tiny import TinyEngine, TinySnapshot  # noqa: E402
from fake_gs.engines.tiny.byte_tokenizer import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer  # noqa: E402
from fake_gs.engines.tiny.model import shifted_logprobs  # noqa: E402

MODEL = "Qwen/Qwen3-0.6B"


def sub_jobs(
    lr: float = 3e-3, *, log_prob: bool = False, max_seq_len: int = 256
) -> list[SubJobConfig]:
    cfgs: list[dict[str, Any]] = [
        {
            "job_type": "training",
            "model_name": MODEL,
            "training_config": {
                "optimizer": {"name": "AdamW", "lr": lr},
                "max_seq_len": max_seq_len,
                "train_batch_size": 8,
                "n_gpus": 1,
            },
        },
        {
            "job_type": "sampling",
            "model_name": MODEL,
            "inference_config": {"max_seq_len": max_seq_len, "n_gpus": 1},
        },
    ]
    if log_prob:
        cfgs.append(
            {
                "job_type": "log_probability",
                "model_name": MODEL,
                "inference_config": {"max_seq_len": max_seq_len, "n_gpus": 1},
            }
        )
    return [SubJobConfig.model_validate(c) for c in cfgs]


@pytest.fixture
def engine() -> TinyEngine:
    eng = TinyEngine(seed=7)
    eng.create_job("job", sub_jobs(), seed=11)
    return eng


def sft_batch(b: int = 4, s: int = 24, seed: int = 0) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (b, s), generator=gen)
    return {"args": [], "kwargs": {"input_ids": ids, "labels": ids.clone()}}


def verl_batch(
    engine: TinyEngine, *, full_layout: bool = False, seed: int = 0
) -> tuple[dict[str, Any], int, int]:
    """A verl-style GRPO batch: left-padded prompts, right-padded responses, real old log-probs."""
    tok = ByteTokenizer()
    prompts = ["hi", "hello there", "abc", "x"]
    responses = ["aaaa", "ab", "a", "aaa"]
    p = max(len(tok.encode(t)) for t in prompts)
    r = max(len(t) for t in responses)
    b = len(prompts)
    input_ids = torch.full((b, p + r), PAD_ID)
    attn = torch.zeros((b, p + r), dtype=torch.long)
    resp = torch.full((b, r), PAD_ID)
    resp_mask = torch.zeros((b, r))
    for i, (pt, rt) in enumerate(zip(prompts, responses, strict=True)):
        pid, rid = tok.encode(pt), tok.encode(rt, add_bos=False)
        input_ids[i, p - len(pid) : p] = torch.tensor(pid)
        input_ids[i, p : p + len(rid)] = torch.tensor(rid)
        attn[i, p - len(pid) : p + len(rid)] = 1
        resp[i, : len(rid)] = torch.tensor(rid)
        resp_mask[i, : len(rid)] = 1
    pos = (attn.cumsum(-1) - 1).clamp_min(0)
    fwd = engine.forward(
        "job",
        {"batch": {"input_ids": input_ids, "attention_mask": attn, "position_ids": pos}},
        reference=False,
    )
    old = fwd["model_outputs"]["logprobs"][:, p - 1 : p + r - 1]
    gen = torch.Generator().manual_seed(seed)
    adv = torch.randn(b, 1, generator=gen).expand(b, r) * resp_mask
    batch = {
        "input_ids": input_ids,
        "attention_mask": attn,
        "position_ids": pos,
        "prompts": input_ids[:, :p],
        "responses": resp,
        "response_mask": resp_mask,
        "advantages": adv,
        "old_log_probs": old,
    }
    if full_layout:
        for key in ("response_mask", "advantages", "old_log_probs"):
            batch[key] = torch.nn.functional.pad(batch[key], (p, 0))
    payload = {
        "batch": batch,
        "meta": {"actor_config": {"clip_ratio": 0.2}, "temperature": 1.0},
        "processing": {"loss_fn": "verl_grpo", "post": []},
    }
    return payload, p, r


def test_sft_loss_falls_with_fwd_bwd_and_step(engine: TinyEngine) -> None:
    batch = sft_batch()
    losses = []
    for _ in range(8):
        out = engine.forward_backward("job", batch)
        assert set(out) >= {"avg_loss", "metrics", "post_process_outputs"}
        assert out["metrics"]["grad_norm"] > 0
        losses.append(out["avg_loss"])
        stepped = engine.step("job", None)
        assert stepped["last_lr"] == pytest.approx(3e-3)
        assert stepped["metrics"]["grad_norm"] == pytest.approx(out["metrics"]["grad_norm"])
    assert losses[-1] < losses[0] - 0.3


def test_gradients_accumulate_until_step(engine: TinyEngine) -> None:
    batch = sft_batch()
    first = engine.forward_backward("job", batch)["metrics"]["grad_norm"]
    second = engine.forward_backward("job", batch)["metrics"]["grad_norm"]
    assert second == pytest.approx(2 * first, rel=1e-4)
    assert engine.step("job", 0.0)["last_lr"] == 0.0
    assert engine.forward_backward("job", batch)["metrics"]["grad_norm"] == pytest.approx(
        first, rel=1e-4
    )


def test_step_learning_rate_overrides_and_sticks(engine: TinyEngine) -> None:
    engine.forward_backward("job", sft_batch())
    assert engine.step("job", 1e-4)["last_lr"] == pytest.approx(1e-4)
    assert engine.step("job", None)["last_lr"] == pytest.approx(1e-4)


def test_labels_minus_100_are_ignored(engine: TinyEngine) -> None:
    batch = sft_batch()
    masked = {"kwargs": dict(batch["kwargs"])}
    labels = batch["kwargs"]["labels"].clone()
    labels[:, 12:] = -100
    masked["kwargs"]["labels"] = labels
    truncated = {
        "kwargs": {"input_ids": batch["kwargs"]["input_ids"][:, :12], "labels": labels[:, :12]}
    }
    a = engine.forward_backward("job", masked)["avg_loss"]
    b = engine.forward_backward("job", truncated)["avg_loss"]
    assert a == pytest.approx(b, rel=1e-5)


def test_forward_logprobs_are_shifted_and_match_manual(engine: TinyEngine) -> None:
    ids = sft_batch(b=3, s=10)["kwargs"]["input_ids"]
    out = engine.forward(
        "job", {"kwargs": {"input_ids": ids}, "meta": {"calculate_entropy": True}}, reference=False
    )
    assert (
        check_forward_result(
            {"kwargs": {"input_ids": ids}, "meta": {"calculate_entropy": True}}, out
        )
        == []
    )
    lp = out["model_outputs"]["logprobs"]
    assert lp.dtype == torch.float32 and lp.shape == (3, 10)
    trainer = engine._jobs["job"].trainer
    assert trainer is not None
    model = trainer.model
    with torch.no_grad():
        logp = torch.log_softmax(model(ids), dim=-1)
    for i in range(9):
        assert torch.allclose(
            lp[:, i], logp[:, i].gather(-1, ids[:, i + 1, None]).squeeze(-1), atol=1e-5
        )
    assert torch.all(lp[:, -1] == 0.0)
    ent = out["model_outputs"]["entropy"]
    assert ent.shape == (3, 10) and torch.all(ent[:, :-1] > 0)


def test_left_padding_does_not_change_logprobs(engine: TinyEngine) -> None:
    ids = torch.tensor([[BOS_ID, 104, 105, 33]])
    plain = engine.forward("job", {"kwargs": {"input_ids": ids}}, reference=False)["model_outputs"][
        "logprobs"
    ]
    padded_ids = torch.tensor([[PAD_ID, PAD_ID, BOS_ID, 104, 105, 33]])
    attn = torch.tensor([[0, 0, 1, 1, 1, 1]])
    padded = engine.forward(
        "job", {"kwargs": {"input_ids": padded_ids, "attention_mask": attn}}, reference=False
    )["model_outputs"]["logprobs"]
    assert torch.allclose(padded[:, 2:], plain, atol=1e-5)


@pytest.mark.parametrize("full_layout", [False, True])
def test_ppo_kl_is_zero_before_any_step(engine: TinyEngine, full_layout: bool) -> None:
    payload, _, _ = verl_batch(engine, full_layout=full_layout)
    out = engine.forward_backward("job", payload)
    m = out["metrics"]
    assert abs(m["ppo_kl"]) < 1e-6
    assert m["pg_clipfrac"] == 0.0 and m["pg_clipfrac_lower"] == 0.0
    assert set(m) >= {"pg_loss", "ppo_kl", "pg_clipfrac_lower", "grad_norm", "kl_loss", "kl_coef"}


def test_both_rl_layouts_give_the_same_loss(engine: TinyEngine) -> None:
    short, _, _ = verl_batch(engine, full_layout=False)
    full, _, _ = verl_batch(engine, full_layout=True)
    a = engine.forward_backward("job", short)
    b = engine.forward_backward("job", full)
    assert a["avg_loss"] == pytest.approx(b["avg_loss"], abs=1e-6)
    assert b["metrics"]["grad_norm"] == pytest.approx(2 * a["metrics"]["grad_norm"], rel=1e-4)


def test_shifted_old_logprobs_show_up_as_kl(engine: TinyEngine) -> None:
    payload, p, r = verl_batch(engine)
    fwd = engine.forward("job", {"batch": payload["batch"]}, reference=False)["model_outputs"][
        "logprobs"
    ]
    payload["batch"]["old_log_probs"] = fwd[:, p : p + r]  # off by one: the classic bug
    assert abs(engine.forward_backward("job", payload)["metrics"]["ppo_kl"]) > 0.01


def test_grpo_pushes_towards_positive_advantage(engine: TinyEngine) -> None:
    payload, p, r = verl_batch(engine)
    batch = payload["batch"]
    batch["advantages"] = batch["response_mask"].clone()  # every response token is good

    def response_logprob() -> float:
        lp = engine.forward("job", {"batch": batch}, reference=False)["model_outputs"]["logprobs"]
        return float((lp[:, p - 1 : p + r - 1] * batch["response_mask"]).sum())

    before = response_logprob()
    for _ in range(3):
        engine.forward_backward("job", payload)
        engine.step("job", None)
    assert response_logprob() > before + 0.5


def test_kl_loss_against_reference(engine: TinyEngine) -> None:
    payload, _, _ = verl_batch(engine)
    payload["meta"]["actor_config"].update(use_kl_loss=True, kl_loss_coef=0.5)
    first = engine.forward_backward("job", payload)["metrics"]
    assert first["kl_loss"] == pytest.approx(0.0, abs=1e-6) and first["kl_coef"] == 0.5
    engine.step("job", None)
    for _ in range(3):
        engine.forward_backward("job", sft_batch())
        engine.step("job", None)
    assert engine.forward_backward("job", payload)["metrics"]["kl_loss"] > 1e-4


def test_reference_forward_uses_initial_weights(engine: TinyEngine) -> None:
    batch = sft_batch()
    ref0 = engine.forward("job", batch, reference=True)["model_outputs"]["logprobs"]
    engine.forward_backward("job", batch)
    engine.step("job", None)
    ref1 = engine.forward("job", batch, reference=True)["model_outputs"]["logprobs"]
    cur = engine.forward("job", batch, reference=False)["model_outputs"]["logprobs"]
    assert torch.equal(ref0, ref1)
    assert not torch.allclose(ref0, cur)


def gen_request(seed: int | None = 5, **params: Any) -> GenerateRequest:
    sp = {"max_tokens": 12, "temperature": 1.0, "logprobs": 1, "seed": seed, **params}
    return GenerateRequest(prompts=["hello", [BOS_ID, 97, 98]], sampling_params=sp)


def plain(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results with tensors turned into lists (what a client hands its caller)."""
    return [{k: v.tolist() if hasattr(v, "tolist") else v for k, v in r.items()} for r in results]


def test_generate_shape_rule_and_reproducible(engine: TinyEngine) -> None:
    req = gen_request()
    a = plain(engine.generate("job", req))
    b = plain(engine.generate("job", req))
    assert a == b
    assert check_generate_result(req, {"results": a}) == []
    c = plain(engine.generate("job", gen_request(seed=6)))
    assert [r["token_ids"] for r in c] != [r["token_ids"] for r in a]


def test_seeded_prompt_samples_the_same_whatever_the_batch(engine: TinyEngine) -> None:
    sp = {"max_tokens": 10, "seed": 42, "logprobs": 1}
    alone = plain(engine.generate("job", GenerateRequest(prompts=["hello"], sampling_params=sp)))
    others = {"max_tokens": 3, "seed": 1}
    mixed = plain(
        engine.generate(
            "job",
            GenerateRequest(
                prompts=["a much longer prompt", "hello", "x"], sampling_params=[others, sp, others]
            ),
        )
    )
    assert mixed[1]["token_ids"] == alone[0]["token_ids"]
    assert mixed[1]["logprobs"] == pytest.approx(alone[0]["logprobs"], abs=1e-4)


def test_generate_greedy_stop_and_length(engine: TinyEngine) -> None:
    greedy = plain(engine.generate("job", gen_request(seed=None, temperature=0.0)))
    assert greedy == plain(engine.generate("job", gen_request(seed=None, temperature=0.0)))
    for r in greedy:
        assert 1 <= len(r["token_ids"]) <= 12
        assert r["finish_reason"] in ("stop", "length")
    first_char = ByteTokenizer().decode(greedy[0]["token_ids"][:1])
    stopped = plain(
        engine.generate("job", gen_request(seed=None, temperature=0.0, stop=[first_char]))
    )[0]
    assert (
        stopped["finish_reason"] == "stop"
        and stopped["text"] == ""
        and len(stopped["token_ids"]) == 1
    )
    one = plain(engine.generate("job", gen_request(max_tokens=1)))
    assert all(len(r["token_ids"]) == 1 and r["finish_reason"] in ("stop", "length") for r in one)


def test_generate_never_samples_pad_or_bos_and_caps_at_max_seq_len() -> None:
    eng = TinyEngine(seed=1)
    eng.create_job("short", sub_jobs(max_seq_len=8), seed=0)
    out = plain(
        eng.generate(
            "short",
            GenerateRequest(prompts=["hello"], sampling_params={"max_tokens": 50, "seed": 1}),
        )
    )
    assert 1 <= len(out[0]["token_ids"]) <= 2  # 6 prompt tokens, max_seq_len 8
    assert not {PAD_ID, BOS_ID} & set(out[0]["token_ids"])


def test_sampler_changes_only_on_weight_sync(engine: TinyEngine) -> None:
    req = gen_request()
    before = plain(engine.generate("job", req))
    for _ in range(4):
        engine.forward_backward("job", sft_batch())
        engine.step("job", 1e-2)
    assert plain(engine.generate("job", req)) == before
    assert engine.weight_sync("job", "", []) == 1
    assert plain(engine.generate("job", req)) != before
    assert engine.weight_sync("job", "job:training:0", ["job:sampling:0"]) == 2


def k3_kl(p_logprobs: torch.Tensor, q_logprobs: torch.Tensor) -> float:
    diff = q_logprobs - p_logprobs
    return float((diff.exp() - diff - 1).mean())


def test_generate_logprobs_agree_with_forward_after_sync(engine: TinyEngine) -> None:
    for _ in range(3):
        engine.forward_backward("job", sft_batch())
        engine.step("job", 1e-2)
    engine.weight_sync("job", "", [])
    tok = ByteTokenizer()
    prompts = ["hello", "a much longer prompt", "x"]
    req = GenerateRequest(
        prompts=prompts,
        sampling_params={"max_tokens": 10, "logprobs": 1, "seed": 3, "temperature": 0.7},
    )
    results = plain(engine.generate("job", req))
    gen_lp, fwd_lp = [], []
    for prompt, res in zip(prompts, results, strict=True):
        ids = torch.tensor([tok.encode(prompt) + res["token_ids"]])
        lp = engine.forward("job", {"kwargs": {"input_ids": ids}}, reference=False)[
            "model_outputs"
        ]["logprobs"]
        n = len(res["token_ids"])
        p = ids.shape[1] - n
        fwd_lp.append(lp[0, p - 1 : p + n - 1])
        gen_lp.append(torch.tensor(res["logprobs"]))
    g, f = torch.cat(gen_lp), torch.cat(fwd_lp)
    assert k3_kl(g, f) <= 0.05
    assert torch.allclose(g, f, atol=1e-4)


def test_log_probs_score_completions_like_forward(engine: TinyEngine) -> None:
    out = engine.log_probs(
        "job", LogProbsRequest(prompts=["hi", "yo"], completions=["abc", [100, 101]], top_k=3)
    )
    tok = ByteTokenizer()
    ids = torch.tensor([tok.encode("hi") + list(b"abc")])
    fwd = engine.forward("job", {"kwargs": {"input_ids": ids}}, reference=False)["model_outputs"][
        "logprobs"
    ]
    first = out["results"][0]
    assert first["token_ids"] == list(b"abc")
    assert torch.allclose(first["logprobs"], fwd[0, 2:5], atol=1e-5)
    assert first["top_logprobs"].shape == (3, 3) and first["top_token_ids"].shape == (3, 3)
    own = engine.log_probs("job", LogProbsRequest(prompts=["hey"]))["results"][0]
    assert own["token_ids"] == list(b"hey") and own["logprobs"].shape == (3,)


def test_resumable_load_restores_losses_and_trajectory(engine: TinyEngine) -> None:
    batch = sft_batch()
    engine.forward_backward("job", batch)
    engine.step("job", None)
    snap = engine.save("job", "resumable")
    assert isinstance(snap, TinySnapshot) and snap.optimizer_state is not None
    trajectory = []
    for _ in range(3):
        trajectory.append(engine.forward_backward("job", batch)["avg_loss"])
        engine.step("job", None)
    engine.load("job", snap)
    replay = []
    for _ in range(3):
        replay.append(engine.forward_backward("job", batch)["avg_loss"])
        engine.step("job", None)
    assert replay == trajectory  # exact: weights and AdamW moments restored
    engine.load("job", snap)  # the snapshot was not mutated by training after the load
    assert engine.forward_backward("job", batch)["avg_loss"] == trajectory[0]


def test_weights_only_snapshot_and_cross_job_load(engine: TinyEngine) -> None:
    batch = sft_batch()
    for _ in range(2):
        engine.forward_backward("job", batch)
        engine.step("job", None)
    loss = engine.forward("job", batch, reference=False)["model_outputs"]["logprobs"]
    snap = engine.save("job", "weights-only")
    assert snap.optimizer_state is None
    engine.create_job("other", sub_jobs(), seed=3)
    fresh = engine.forward("other", batch, reference=False)["model_outputs"]["logprobs"]
    assert torch.equal(
        fresh, engine.forward("job", batch, reference=True)["model_outputs"]["logprobs"]
    )
    engine.load("other", snap)
    assert torch.equal(
        engine.forward("other", batch, reference=False)["model_outputs"]["logprobs"], loss
    )


def test_export_tensors_are_the_real_weights(engine: TinyEngine, tmp_path: Any) -> None:
    safetensors_torch = pytest.importorskip("safetensors.torch")
    engine.forward_backward("job", sft_batch())
    engine.step("job", None)
    tensors = engine.export_tensors(engine.save("job", "weights-only"))
    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(tensors, str(path))
    loaded = safetensors_torch.load_file(str(path))
    trainer = engine._jobs["job"].trainer
    assert trainer is not None
    model = trainer.model
    for name, value in model.state_dict().items():
        assert torch.equal(loaded[f"model.{name}"], value)


def test_out_of_vocab_ids_fold_and_lists_work(engine: TinyEngine) -> None:
    ids = [[151643, 5, 6, 300]]
    out = engine.forward("job", {"kwargs": {"input_ids": ids}}, reference=False)
    lp = out["model_outputs"]["logprobs"]
    assert lp.shape == (1, 4) and bool(torch.all(lp <= 0)) and bool(torch.all(torch.isfinite(lp)))


def test_unknown_loss_fn_is_a_value_error(engine: TinyEngine) -> None:
    batch = sft_batch()
    batch["processing"] = {"loss_fn": "nonsense"}
    with pytest.raises(ValueError, match="loss_fn"):
        engine.forward_backward("job", batch)


def test_initial_weights_depend_on_seed_and_model_only() -> None:
    a, b = TinyEngine(seed=1), TinyEngine(seed=1)
    a.create_job("j", sub_jobs(), seed=1)
    b.create_job("j", sub_jobs(), seed=99)
    ids = torch.tensor([[BOS_ID, 1, 2, 3, EOS_ID]])
    la = a.forward("j", {"kwargs": {"input_ids": ids}}, reference=False)["model_outputs"][
        "logprobs"
    ]
    lb = b.forward("j", {"kwargs": {"input_ids": ids}}, reference=False)["model_outputs"][
        "logprobs"
    ]
    assert torch.equal(la, lb)
    trainer = a._jobs["j"].trainer
    assert trainer is not None
    model = trainer.model
    with torch.no_grad():
        assert torch.allclose(la, shifted_logprobs(model(ids), ids))


def test_post_processors_return_pre_update_logprobs(engine: TinyEngine) -> None:
    batch = sft_batch(b=2, s=8)
    batch["processing"] = {"loss_fn": "sft", "post": ["logprobs", {"name": "entropy"}]}
    out = engine.forward_backward("job", batch)["post_process_outputs"]
    fwd = engine.forward("job", batch, reference=False)["model_outputs"]["logprobs"]
    assert torch.allclose(out["logprobs"], fwd, atol=1e-5)
    assert out["entropy"].shape == (2, 8)


def test_step_reports_the_metrics_block_of_its_micro_batches(engine: TinyEngine) -> None:
    payload, _, _ = verl_batch(engine)
    fb = engine.forward_backward("job", payload)["metrics"]
    stepped = engine.step("job", None)["metrics"]
    for key in ("pg_loss", "ppo_kl", "pg_clipfrac_lower", "kl_loss", "kl_coef"):
        assert stepped[key] == pytest.approx(fb[key])
    assert stepped["grad_norm"] == pytest.approx(fb["grad_norm"]) and stepped[
        "lr"
    ] == pytest.approx(3e-3)
