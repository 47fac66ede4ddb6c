"""Fakes for the integration replays: one per (engine, profile) a module asks for, started on
first use and shared by the module's tests, plus the launcher environment the integrations
run under (they set no client knob, so the knobs come in as ``CORTEX_*`` variables)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest
import requests

from contract.routes import Profile

#: Every engine the fake has, on both profiles.
SETUPS: list[tuple[str, str]] = [(e, p) for e in ("shape", "tiny") for p in ("current", "proposed")]
#: What a launcher exports to put an integration on the fake, fast polls included.
LAUNCHER_ENV: dict[str, str] = {
    "ARCTIC_RL_BACKEND": "cortex",
    "CORTEX_POLL_FIRST_S": "0.002",
    "CORTEX_POLL_CAP_S": "0.02",
    "CORTEX_BACKOFF_FIRST_S": "0.002",
    "CORTEX_BACKOFF_CAP_S": "0.01",
    "CORTEX_JOB_START_TIMEOUT_S": "20",
    "CORTEX_POLL_TIMEOUT_S": "20",
}


class Fakes:
    """Running fakes by (engine, profile); their URLs and job states."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._urls: dict[tuple[str, str], str] = {}

    def url(self, engine: str, profile: Profile) -> str:
        key = (engine, profile)
        if key not in self._urls:
            from fake_gs import FakeSettings, serve_in_background

            self._urls[key] = self._stack.enter_context(
                serve_in_background(FakeSettings(engine=engine, profile=profile)))
        return self._urls[key]

    @staticmethod
    def jobs(url: str) -> dict[str, Any]:
        """Every job the fake at ``url`` holds, by id (its admin state)."""
        answer = requests.get(f"{url}/_fake/state", timeout=10)
        answer.raise_for_status()
        return dict(answer.json()["jobs"])

    def job(self, url: str, job_id: str) -> dict[str, Any]:
        return dict(self.jobs(url)[job_id])

    def launch(self, monkeypatch: pytest.MonkeyPatch, engine: str,
               profile: Profile) -> tuple[str, set[str]]:
        """Point the launcher variables at that fake: its URL and the jobs it held before."""
        url = self.url(engine, profile)
        launch_on(monkeypatch, url)
        return url, set(self.jobs(url))


def launch_on(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Export the launcher variables pointing the integration at ``url``."""
    for name, value in {**LAUNCHER_ENV, "CORTEX_BASE_URL": url}.items():
        monkeypatch.setenv(name, value)


def rollout_batch(prompts: list[list[int]], responses: list[list[int]], pad: int = 0) -> dict[str, Any]:
    """The dense verl-layout batch both integrations send (spec §10): prompts
    left-padded to P, responses right-padded to R, the response-only tensors left-padded to
    P + R, advantages one value per row."""
    import torch

    width_p, width_r = max(map(len, prompts)), max(map(len, responses))
    rows = len(prompts)
    ids = torch.full((rows, width_p + width_r), pad, dtype=torch.long)
    attention = torch.zeros_like(ids)
    response_mask = torch.zeros_like(ids)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        ids[i, width_p - len(p):width_p] = torch.tensor(p)
        ids[i, width_p:width_p + len(r)] = torch.tensor(r)
        attention[i, width_p - len(p):width_p + len(r)] = 1
        response_mask[i, width_p:width_p + len(r)] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0) * attention
    advantages = torch.linspace(-1.0, 1.0, rows)[:, None] * response_mask
    return {"input_ids": ids, "attention_mask": attention, "position_ids": positions,
            "prompts": ids[:, :width_p], "responses": ids[:, width_p:],
            "response_mask": response_mask, "loss_mask": response_mask,
            "advantages": advantages, "old_log_probs": torch.zeros(ids.shape)}


def rollout_meta(batch: dict[str, Any], rollout_n: int, pad: int = 0) -> dict[str, Any]:
    """The per-call ``meta`` block the integrations send beside the batch."""
    return {"pad_token_id": pad, "rollout_n": rollout_n,
            "max_prompt_len": int(batch["prompts"].shape[1]),
            "max_response_len": int(batch["responses"].shape[1]),
            "temperature": 1.0, "calculate_entropy": True, "dp_size": 1,
            "batch_num_tokens": int(batch["response_mask"].sum()),
            "global_batch_size": int(batch["input_ids"].shape[0]),
            "actor_config": {"clip_ratio": 0.2, "entropy_coeff": 0.0, "use_kl_loss": False},
            "policy_loss_config": {"loss_mode": "vanilla"}}
