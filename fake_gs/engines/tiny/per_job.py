"""What the tiny engine keeps per job: models, optimizer, snapshots (``fake_gs.engines.tiny``).

Kept apart from the engine's routes so the state a checkpoint copies is readable in one place.
"""

from __future__ import annotations

import copy
import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from contract.ids import sub_job_ids as contract_sub_job_ids
from contract.models import SubJobConfig
from fake_gs.engines.tiny.model import TinyConfig, TinyLM

DEFAULT_LR = 1e-3


def sub_job_ids(job_id: str, sub_jobs: list[SubJobConfig]) -> list[str]:
    """The ids the job's sub-jobs get, in create order (their one home: contract.ids)."""
    return contract_sub_job_ids(job_id, (cfg.job_type for cfg in sub_jobs))


@dataclass
class TinySnapshot:
    """What :meth:`TinyEngine.save` returns: plain tensor copies, never pickled."""

    checkpoint_type: str
    model_config: TinyConfig
    weights: dict[str, torch.Tensor]
    optimizer_state: dict[str, Any] | None
    lr: float


@dataclass
class SubJob:
    """One sub-job's model; only the training one has gradients on."""

    sub_job_id: str
    job_type: str
    model: TinyLM
    max_seq_len: int


@dataclass
class Job:
    """A job's models, optimizer and the metrics of the micro-batches since the last step."""

    job_id: str
    trainer: SubJob | None
    optimizer: torch.optim.Optimizer | None
    optimizer_spec: dict[str, Any]
    lr: float
    grad_clip: float | None
    reference: TinyLM
    sub_jobs: dict[str, SubJob]
    rng: random.Random
    weight_version: int = 0
    pending: list[dict[str, float]] = field(default_factory=list)  # fwd_bwd metrics since step
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first(self, job_type: str) -> SubJob | None:
        return next((s for s in self.sub_jobs.values() if s.job_type == job_type), None)


def clone_tree(value: Any) -> Any:
    """Deep copy of an optimizer state dict with every tensor cloned (no aliasing)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: clone_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [clone_tree(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return copy.copy(value)


def weights_of(model: TinyLM) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def make_optimizer(model: TinyLM, spec: Mapping[str, Any], lr: float) -> torch.optim.Optimizer:
    name = str(spec.get("name", spec.get("type", "AdamW"))).lower()
    params = list(model.parameters())
    wd = float(spec.get("weight_decay", 0.0))
    if name == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=float(spec.get("momentum", 0.0)), weight_decay=wd
        )
    betas = spec.get("betas", (0.9, 0.999))
    eps = float(spec.get("eps", 1e-8))
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    return cls(params, lr=lr, betas=(float(betas[0]), float(betas[1])), eps=eps, weight_decay=wd)


def total_grad_norm(model: TinyLM) -> float:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return 0.0
    return float(
        torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    )
