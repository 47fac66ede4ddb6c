"""The default engine: seeded, shape-correct results without any model.

Why: clients must be checked for shape handling (spec §6.1, §10) cheaply and
reproducibly. Every value comes from a per-job generator seeded by (job seed, call
number), so a run replays exactly with the same ``--seed``. torch loads on first use.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contract.models import GenerateRequest, LogProbsRequest, SubJobConfig
from contract.shapes import forward_expectation
from fake_gs.controls.seams import EngineQuirk
from fake_gs.engines.protocol import warm_torch

DEFAULT_LR = 1e-4
VOCAB = 32_000
_WORDS = (
    "the",
    "a",
    "model",
    "reward",
    "token",
    "policy",
    "step",
    "value",
    "sample",
    "answer",
    "is",
    "of",
    "and",
    "to",
    "in",
    "we",
    "so",
    "then",
    "yes",
    "no",
)


@dataclass
class _Job:
    seed: int
    lr: float
    steps: int = 0
    calls: int = 0
    weight_version: int = 0
    pending_grad_norm: float | None = None
    #: Forward-backward runs since the last step.
    micro_batches: int = 0
    #: The sampler's max_seq_len: prompt + generated tokens stay within it (spec §6.6).
    max_seq_len: int = 0
    #: Mixed into seeded sampling once a sampler starts from a checkpoint's weights.
    sampler_salt: int = 0


def _post_names(request: Mapping[str, Any]) -> list[str]:
    processing = request.get("processing")
    post = processing.get("post") if isinstance(processing, Mapping) else None
    names: list[str] = []
    for item in post if isinstance(post, list) else []:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            names.append(item["name"])
    return names


def _token_count(item: Any) -> int:
    if isinstance(item, list):
        return max(1, len(item))
    return max(1, len(str(item).split()))


class ShapeEngine:
    """Engine protocol with synthetic values (see module docstring)."""

    name = "shape"

    def __init__(self, seed: int = 0, *, quirks: frozenset[EngineQuirk] = frozenset()) -> None:
        self.seed = int(seed)
        self.quirks = quirks
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()

    def _job(self, job_id: str) -> _Job:
        with self._lock:
            try:
                return self._jobs[job_id]
            except KeyError:
                raise KeyError("the shape engine holds no state for this job (it ended)") from None

    def _gen(self, job: _Job, salt: int = 0) -> Any:
        import torch

        job.calls += 1
        g = torch.Generator()
        g.manual_seed((job.seed * 1_000_003 + job.calls * 7919 + salt) % (2**63))
        return g

    # --- lifecycle ----------------------------------------------------------------------

    def create_job(self, job_id: str, sub_jobs: list[SubJobConfig], seed: int,
                   names: list[str] | None = None) -> None:
        lr = DEFAULT_LR
        for cfg in sub_jobs:
            if cfg.training_config is not None:
                opt = cfg.training_config.optimizer
                value = opt.get("lr", opt.get("learning_rate", DEFAULT_LR))
                lr = float(value) if isinstance(value, (int, float)) else DEFAULT_LR
                break
        sampler = next((c for c in sub_jobs if c.job_type == "sampling"), sub_jobs[0] if sub_jobs else None)
        with self._lock:
            self._jobs[job_id] = _Job(seed=int(seed) ^ self.seed, lr=lr,
                                      max_seq_len=sampler.max_seq_len if sampler is not None else 0)

    def drop_job(self, job_id: str) -> None:
        with self._lock:
            self._jobs.pop(job_id, None)

    def warm_up(self) -> None:
        warm_torch()

    # --- training -----------------------------------------------------------------------

    def _noise(self, job: _Job, salt: int = 0) -> random.Random:
        """A plain seeded generator for scalars, so loss-only calls never load torch."""
        job.calls += 1
        return random.Random((job.seed * 1_000_003 + job.calls * 7919 + salt) % (2**63))

    def _metrics(self, job: _Job, rng: random.Random, loss: float) -> dict[str, float]:
        noise = [rng.random() for _ in range(5)]
        return {
            "grad_norm": 0.5 + noise[0],
            "ppo_kl": 0.0 if job.steps == 0 else 1e-3 * noise[1],
            "pg_clipfrac_lower": 0.05 * noise[2],
            "pg_loss": loss * (0.9 + 0.2 * noise[3]) - 1.0,
            "kl_loss": 1e-3 * noise[4] if job.steps else 0.0,
            "kl_coef": 1e-3,
        }

    def forward_backward(self, job_id: str, request: dict[str, Any]) -> dict[str, Any]:
        import torch

        exp = forward_expectation(request)
        job = self._job(job_id)
        rng = self._noise(job, exp.batch * 131 + exp.seq)
        loss = 2.5 * math.exp(-0.05 * job.steps) + 0.1 * rng.random()
        metrics = self._metrics(job, rng, loss)
        job.pending_grad_norm = metrics["grad_norm"]
        job.micro_batches += 1
        post: dict[str, Any] = {}
        names = _post_names(request)
        g = self._gen(job) if names else None
        for name in names:
            if name in ("logprobs", "log_probs"):
                post[name] = -(torch.rand(exp.shape, generator=g) * 4.0)
            elif name == "entropy":
                post[name] = torch.rand(exp.shape, generator=g) * 3.0
        return {"avg_loss": loss, "metrics": metrics, "post_process_outputs": post}

    def check_batch(self, request: dict[str, Any], max_tokens: int) -> None:
        """Nothing to refuse: synthesised answers cost what the batch's own bytes do."""

    def step(self, job_id: str, learning_rate: float | None) -> dict[str, Any]:
        job = self._job(job_id)
        if learning_rate is not None:
            job.lr = float(learning_rate)
        loss = 2.5 * math.exp(-0.05 * job.steps)
        metrics = self._metrics(job, self._noise(job), loss)
        if job.pending_grad_norm is not None:
            metrics["grad_norm"] = job.pending_grad_norm
        job.pending_grad_norm = None
        job.steps += 1
        metrics["lr"] = job.lr
        # The forward-backward runs this step applied (results are open, spec §11): what
        # shows through the API that a repeated final chunk ran nothing again (CG-IDEM-1).
        metrics["micro_batches"], job.micro_batches = job.micro_batches, 0
        return {"last_lr": job.lr, "metrics": metrics}

    # --- inference ----------------------------------------------------------------------

    def forward(self, job_id: str, request: dict[str, Any], *, reference: bool) -> dict[str, Any]:
        import torch

        exp = forward_expectation(request)
        job = self._job(job_id)
        g = self._gen(job, 1 if reference else 0)
        outputs: dict[str, Any] = {"logprobs": -(torch.rand(exp.shape, generator=g) * 4.0)}
        if exp.entropy:
            outputs["entropy"] = torch.rand(exp.shape, generator=g) * 3.0
        return {"model_outputs": outputs, "metrics": {}}

    def _room(self, job: _Job, prompt: Any, max_tokens: int) -> int:
        """How many tokens a prompt may still get: max_tokens, capped by max_seq_len."""
        if job.max_seq_len <= 0 or EngineQuirk.GENERATION_OVERRUNS in self.quirks:
            return max_tokens
        room = job.max_seq_len - _token_count(prompt)
        if room < 1:
            raise ValueError(f"a prompt of {_token_count(prompt)} tokens leaves no room under "
                             f"max_seq_len {job.max_seq_len}")
        return min(max_tokens, room)

    def generate(self, job_id: str, request: GenerateRequest) -> list[dict[str, Any]]:
        import torch

        job = self._job(job_id)
        results = []
        for i, prompt in enumerate(request.prompts):
            params = request.params_for(i)
            if params.seed is not None:
                g = torch.Generator()
                salt = job.weight_version * 1_000_003 + job.sampler_salt
                g.manual_seed((params.seed * 31 + salt + i) % (2**63))
            else:
                g = self._gen(job, i)
            max_tokens = self._room(job, prompt, max(1, int(params.max_tokens)))
            n = int(torch.randint(1, max_tokens + 1, (1,), generator=g))
            tokens = torch.randint(0, VOCAB, (n,), generator=g, dtype=torch.int64)
            item: dict[str, Any] = {
                "text": " ".join(_WORDS[int(t) % len(_WORDS)] for t in tokens),
                "token_ids": tokens,
                "finish_reason": "length" if n == max_tokens else "stop",
            }
            if params.logprobs is not None and params.logprobs is not False:
                item["logprobs"] = -(torch.rand(n, generator=g) * 4.0)
            results.append(item)
        return results

    def log_probs(self, job_id: str, request: LogProbsRequest) -> dict[str, Any]:
        import torch

        job = self._job(job_id)
        g = self._gen(job)
        results = []
        for i, prompt in enumerate(request.prompts):
            target = request.completions[i] if request.completions is not None else prompt
            n = _token_count(target)
            item: dict[str, Any] = {
                "token_ids": torch.randint(0, VOCAB, (n,), generator=g, dtype=torch.int64),
                "logprobs": -(torch.rand(n, generator=g) * 4.0),
            }
            if request.top_k:
                top = -(torch.rand(n, request.top_k, generator=g) * 4.0)
                item["top_logprobs"] = top.sort(dim=-1, descending=True).values
                item["top_token_ids"] = torch.randint(0, VOCAB, (n, request.top_k), generator=g)
            results.append(item)
        return {"results": results}

    # --- weights ------------------------------------------------------------------------

    def weight_sync(self, job_id: str, source: str, targets: list[str]) -> int:
        job = self._job(job_id)
        job.weight_version += 1
        return job.weight_version

    def save(self, job_id: str, checkpoint_type: str) -> Any:
        job = self._job(job_id)
        return {
            "steps": job.steps,
            "lr": job.lr,
            "seed": job.seed,
            "checkpoint_type": checkpoint_type,
        }

    def load(
        self, job_id: str, snapshot: Any, *, sub_job_id: str | None = None, optimizer: bool = True
    ) -> None:
        job = self._job(job_id)
        if not isinstance(snapshot, dict) or "steps" not in snapshot:
            raise ValueError("shape engine can only load snapshots it made")
        if sub_job_id is not None and ":training:" not in sub_job_id:
            # A sampler from saved weights samples differently from a fresh one (spec §13.4).
            job.sampler_salt = (int(snapshot.get("seed", 0)) * 7919 + int(snapshot["steps"]) + 1) % (2**31)
            return
        job.steps = int(snapshot["steps"])
        if optimizer and snapshot.get("checkpoint_type") != "weights-only":
            job.lr = float(snapshot["lr"])

    def export_tensors(self, snapshot: Any) -> dict[str, Any]:
        import torch

        g = torch.Generator()
        seed = int(snapshot.get("seed", 0)) if isinstance(snapshot, dict) else 0
        steps = int(snapshot.get("steps", 0)) if isinstance(snapshot, dict) else 0
        g.manual_seed((seed * 7 + steps) % (2**63))
        return {
            "model.embed_tokens.weight": torch.randn(64, 16, generator=g),
            "model.norm.weight": torch.ones(16),
            "lm_head.weight": torch.randn(64, 16, generator=g),
        }
