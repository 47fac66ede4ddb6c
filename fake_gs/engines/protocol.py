"""The engine interface: what the fake asks of whatever computes results.

The shape engine (default) synthesises seeded results that follow ``contract.shapes``;
the tiny engine runs a small real causal LM. The store calls an engine from the job's
serial executor only, so an engine needs no locking per job.
"""

from __future__ import annotations

from typing import Any, Protocol

from contract.models import GenerateRequest, LogProbsRequest, SubJobConfig


class BatchRefused(ValueError):
    """A batch an engine will not run, refused when it is submitted (a 4xx, not a failed
    request): over the bound ``limit`` names, or (``limit`` None) an input that is not
    finite and would poison the weights."""

    def __init__(self, message: str, limit: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.field = field


class Engine(Protocol):
    name: str

    def create_job(self, job_id: str, sub_jobs: list[SubJobConfig], seed: int,
                   names: list[str] | None = None) -> None:
        """Allocate per-sub-job state (weights, optimizer, sampler copy, reference).
        ``job_id`` is the job's key in the fake; ``names`` are the ids the sub-jobs are
        called by in later calls (default: built from ``job_id``, contract.ids)."""

    def drop_job(self, job_id: str) -> None:
        """Release everything held for the job (cancelled/terminated)."""

    def forward_backward(self, job_id: str, request: dict[str, Any]) -> dict[str, Any]:
        """``{"avg_loss", "metrics", "post_process_outputs"}`` for a decoded frame object.

        ``metrics`` carries at least grad_norm, ppo_kl, pg_clipfrac_lower, pg_loss, kl_loss,
        kl_coef (the server drops it in the current profile).
        """

    def forward(self, job_id: str, request: dict[str, Any], *, reference: bool) -> dict[str, Any]:
        """``{"model_outputs": {"logprobs": [B,S] float32, "entropy"?}, "metrics": {}}``."""

    def check_batch(self, request: dict[str, Any], max_tokens: int) -> None:
        """Raise :class:`BatchRefused` for a forward(-backward) batch this engine will not
        run: more than ``max_tokens`` (the fake's ``tiny_max_batch_tokens``) or inputs it
        cannot compute with (called at submission, on the event loop: cheap checks only)."""

    def step(self, job_id: str, learning_rate: float | None) -> dict[str, Any]:
        """Apply accumulated gradients: ``{"last_lr", "metrics": {"grad_norm", ...}}``."""

    def generate(self, job_id: str, request: GenerateRequest) -> list[dict[str, Any]]:
        """One result per prompt: ``{"text", "token_ids", "finish_reason", "logprobs"?}``."""

    def log_probs(self, job_id: str, request: LogProbsRequest) -> dict[str, Any]:
        """Per-prompt log-probabilities (DSSST1-encodable)."""

    def weight_sync(self, job_id: str, source: str, targets: list[str]) -> int:
        """Copy training weights to the sampler(s); returns the new weight version."""

    def save(self, job_id: str, checkpoint_type: str) -> Any:
        """Snapshot state for a checkpoint (opaque to the store)."""

    def load(
        self, job_id: str, snapshot: Any, *, sub_job_id: str | None = None, optimizer: bool = True
    ) -> None:
        """Restore a snapshot made by :meth:`save` (possibly of another job) into the training
        sub-job (default) or ``sub_job_id``; a sampler then serves the snapshot's weights.
        ``optimizer`` False restores weights only (``load_optimizer_states: false``)."""

    def export_tensors(self, snapshot: Any) -> dict[str, Any]:
        """name -> CPU tensor, written by the fake as a real safetensors file on export."""

    def warm_up(self) -> None:
        """Import now what the engine's calls need (the server calls it at start-up, so no
        request pays seconds of imports)."""


def warm_torch() -> None:
    """torch, and the codec's tensor tables: what both engines and every tensor frame's
    decode need. One tensor frame through the codec loads them all."""
    import torch

    from contract import wire

    wire.loads(wire.dumps({"warm": torch.zeros(1)}))
