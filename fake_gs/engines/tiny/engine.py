"""The tiny engine's routes: jobs, training, inference and weights over a tiny real LM.

What it computes and the conventions clients rely on: ``fake_gs.engines.tiny``. The
pieces live beside it: per-job state (``tiny_jobs``), batch alignment (``tiny_batch``),
losses (``tiny_losses``) and the sampler (``tiny_sampling``).
"""

from __future__ import annotations

import contextlib
import random
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from contract.models import GenerateRequest, LogProbsRequest, SubJobConfig
from fake_gs.controls.seams import EngineQuirk
from fake_gs.engines.protocol import warm_torch
from fake_gs.engines.tiny.batch import Batch
from fake_gs.engines.tiny.budget import check_batch
from fake_gs.engines.tiny.byte_tokenizer import BOS_ID, VOCAB_SIZE, ByteTokenizer
from fake_gs.engines.tiny.losses import METRIC_KEYS, post_outputs, rl_loss, sft_loss
from fake_gs.engines.tiny.model import TinyConfig, TinyLM, shifted_entropy, shifted_logprobs
from fake_gs.engines.tiny.per_job import (
    DEFAULT_LR,
    Job,
    SubJob,
    TinySnapshot,
    clone_tree,
    make_optimizer,
    sub_job_ids,
    total_grad_norm,
    weights_of,
)
from fake_gs.engines.tiny.sampler import Row, sample


class TinyEngine:
    """Engine protocol over a tiny real transformer (see module docstring)."""

    name = "tiny"

    def __init__(
        self,
        seed: int = 0,
        *,
        model_config: TinyConfig | None = None,
        threads: int | None = 1,
        quirks: frozenset[EngineQuirk] = frozenset(),
    ) -> None:
        self.seed = int(seed)
        self.quirks = quirks
        self.model_config = model_config or TinyConfig()
        self.tokenizer = ByteTokenizer()
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        if threads:
            # Shared CPUs: one intra-op thread keeps several servers/tests from thrashing.
            torch.set_num_threads(threads)

    # --- lifecycle ----------------------------------------------------------------------

    def initial_seed(self, model_name: str) -> int:
        return (self.seed * 1_000_003 + zlib.crc32(model_name.encode())) % (2**63)

    def create_job(self, job_id: str, sub_jobs: list[SubJobConfig], seed: int,
                   names: list[str] | None = None) -> None:
        """Build the models: every sub-job starts from the same seeded initial weights."""
        if not sub_jobs:
            raise ValueError("a job needs at least one sub-job")
        model_name = next(
            (s.model_name for s in sub_jobs if s.job_type == "training"), sub_jobs[0].model_name
        )
        init_seed = self.initial_seed(model_name)
        base = TinyLM(self.model_config, seed=init_seed)
        base.requires_grad_(False).eval()
        subs: dict[str, SubJob] = {}
        for sid, cfg in zip(names or sub_job_ids(job_id, sub_jobs), sub_jobs, strict=True):
            model = TinyLM(self.model_config, seed=init_seed).requires_grad_(False).eval()
            if cfg.job_type == "training":
                model.requires_grad_(True).train()
            subs[sid] = SubJob(sid, cfg.job_type, model, cfg.max_seq_len)
        trainer = next((s for s in subs.values() if s.job_type == "training"), None)
        train_cfg = next(
            (s.training_config for s in sub_jobs if s.training_config is not None), None
        )
        spec: dict[str, Any] = dict(train_cfg.optimizer) if train_cfg is not None else {}
        lr = float(spec.get("lr", spec.get("learning_rate", DEFAULT_LR)))
        job = Job(
            job_id=job_id,
            trainer=trainer,
            optimizer=make_optimizer(trainer.model, spec, lr) if trainer else None,
            optimizer_spec=spec,
            lr=lr,
            grad_clip=train_cfg.gradient_clipping if train_cfg is not None else None,
            reference=base,
            sub_jobs=subs,
            rng=random.Random(seed),
        )
        with self._lock:
            self._jobs[job_id] = job

    def drop_job(self, job_id: str) -> None:
        with self._lock:
            self._jobs.pop(job_id, None)

    def warm_up(self) -> None:
        warm_torch()

    def _job(self, job_id: str) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise KeyError("the tiny engine holds no state for this job (it ended)") from None

    def _trainer(self, job: Job) -> tuple[SubJob, torch.optim.Optimizer]:
        if job.trainer is None or job.optimizer is None:
            raise ValueError("the job has no training sub-job")
        return job.trainer, job.optimizer

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[Job]:
        job = self._job(job_id)
        with job.lock:
            yield job

    # --- training -----------------------------------------------------------------------

    def forward_backward(self, job_id: str, request: dict[str, Any]) -> dict[str, Any]:
        """Compute the loss named by ``processing.loss_fn``, accumulate its gradients."""
        with self._locked(job_id) as job:
            trainer, _ = self._trainer(job)
            batch = Batch.parse(request)
            logits = trainer.model(batch.input_ids, batch.attention_mask, batch.position_ids)
            if batch.is_rl:
                loss, metrics = rl_loss(batch, logits, job.reference, self.quirks)
            else:
                loss, metrics = sft_loss(batch, logits)
            loss.backward()
            metrics["grad_norm"] = total_grad_norm(trainer.model)
            metrics["loss"] = float(loss.detach())
            job.pending.append(metrics)
            return {
                "avg_loss": float(loss.detach()),
                "metrics": metrics,
                "post_process_outputs": post_outputs(batch, logits),
            }

    def check_batch(self, request: dict[str, Any], max_tokens: int) -> None:
        """Refuse a batch over the token budget or with a non-finite input (``tiny_budget``)."""
        check_batch(request, max_tokens)

    def step(self, job_id: str, learning_rate: float | None) -> dict[str, Any]:
        """Apply the accumulated gradients, then zero them; reports the pre-clip grad norm."""
        with self._locked(job_id) as job:
            trainer, opt = self._trainer(job)
            if learning_rate is not None:
                job.lr = float(learning_rate)
            for group in opt.param_groups:
                group["lr"] = job.lr
            grad_norm = total_grad_norm(trainer.model)
            if job.grad_clip:
                torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), job.grad_clip)
            if EngineQuirk.STEP_ASCENDS in self.quirks:
                for group in opt.param_groups:
                    group["maximize"] = True
            opt.step()
            opt.zero_grad(set_to_none=True)
            if EngineQuirk.SAMPLER_DRIFTS in self.quirks:
                state = weights_of(trainer.model)
                for sub in job.sub_jobs.values():
                    if sub.job_type == "sampling":
                        sub.model.load_state_dict(state)
            # The step reports the mean of the micro-batches it applied, plus the real norm.
            metrics = dict.fromkeys(METRIC_KEYS, 0.0)
            for key in dict.fromkeys(k for m in job.pending for k in m):
                values = [m[key] for m in job.pending if key in m]
                metrics[key] = sum(values) / len(values)
            metrics.update(grad_norm=grad_norm, lr=job.lr, micro_batches=len(job.pending))
            job.pending.clear()
            return {"last_lr": job.lr, "metrics": metrics}

    # --- inference ----------------------------------------------------------------------

    def forward(self, job_id: str, request: dict[str, Any], *, reference: bool) -> dict[str, Any]:
        """Shifted log-probs (and entropy when asked) from the training or reference weights."""
        with self._locked(job_id) as job:
            if reference:
                model = job.reference
            else:
                model = job.trainer.model if job.trainer else self._inference_model(job, "sampling")
            batch = Batch.parse(request, need_loss=False)
            if EngineQuirk.FORWARD_IGNORES_TEMPERATURE in self.quirks:
                batch.temperature = 1.0
            with torch.no_grad():
                logits = model(batch.input_ids, batch.attention_mask, batch.position_ids)
                logprobs = shifted_logprobs(logits, batch.input_ids, batch.temperature)
                if EngineQuirk.LOGPROBS_UNSHIFTED in self.quirks:  # column i scores token i, not i+1
                    logprobs = F.pad(logprobs[:, :-1], (1, 0), value=0.0)
                outputs = {"logprobs": logprobs}
                if batch.calculate_entropy:
                    outputs["entropy"] = shifted_entropy(logits, batch.temperature)
            return {"model_outputs": outputs, "metrics": {}}

    def _inference_model(self, job: Job, job_type: str) -> TinyLM:
        sub = job.first(job_type) or job.first("sampling") or job.trainer
        assert sub is not None  # create_job refuses empty jobs
        return sub.model

    def generate(self, job_id: str, request: GenerateRequest) -> list[dict[str, Any]]:
        """Sample from the sampler's weights, all prompts batched, one generator per prompt."""
        with self._locked(job_id) as job:
            sampler = job.first("sampling") or job.trainer
            assert sampler is not None
            rows = []
            for i, prompt in enumerate(request.prompts):
                params = request.params_for(i)
                seed = params.seed if params.seed is not None else job.rng.randrange(2**63)
                rows.append(
                    Row(self.tokenizer.encode_prompt(prompt), params, seed, sampler.max_seq_len)
                )
            with torch.no_grad():
                sample(sampler.model, rows)
            return [row.result(self.tokenizer) for row in rows]

    def log_probs(self, job_id: str, request: LogProbsRequest) -> dict[str, Any]:
        """Score completions given prompts (or a prompt's own tokens) with the log-prob model."""
        with self._locked(job_id) as job:
            model = self._inference_model(job, "log_probability")
            results = []
            for i, prompt in enumerate(request.prompts):
                ids = self.tokenizer.encode_prompt(prompt)
                if request.completions is not None:
                    target = self.tokenizer.encode_completion(request.completions[i])
                    seq, start = ids + target, len(ids)
                else:
                    seq, start = ids, 1
                with torch.no_grad():
                    x = torch.tensor([seq or [BOS_ID]]).remainder(VOCAB_SIZE)
                    logp = torch.log_softmax(model(x)[0].float(), dim=-1)
                # Token at position k is scored by the distribution at k-1.
                positions = list(range(max(start, 1), len(seq)))
                scored = torch.tensor([seq[k] for k in positions], dtype=torch.long).remainder(
                    VOCAB_SIZE
                )
                dist = logp[[k - 1 for k in positions]] if positions else logp[:0]
                item: dict[str, Any] = {
                    "token_ids": [seq[k] for k in positions],
                    "logprobs": dist.gather(-1, scored[:, None]).squeeze(-1).to(torch.float32),
                }
                if request.top_k:
                    top = dist.topk(min(request.top_k, VOCAB_SIZE), dim=-1)
                    item["top_logprobs"] = top.values.to(torch.float32)
                    item["top_token_ids"] = top.indices
                results.append(item)
            return {"results": results}

    # --- weights ------------------------------------------------------------------------

    def weight_sync(self, job_id: str, source: str, targets: list[str]) -> int:
        """Copy the training weights into the targets (default: every sampling sub-job)."""
        with self._locked(job_id) as job:
            src = job.sub_jobs.get(source) if source else job.trainer
            if src is None:
                raise ValueError(f"unknown weight-sync source {source!r} (not a sub-job of the job)")
            names = list(targets) or [
                s.sub_job_id for s in job.sub_jobs.values() if s.job_type == "sampling"
            ]
            unknown = [t for t in names if t not in job.sub_jobs]
            if unknown:
                raise ValueError(f"unknown weight-sync targets {unknown} (not sub-jobs of the job)")
            state = weights_of(src.model)
            for name in names:
                if name != src.sub_job_id and EngineQuirk.SAMPLER_NOT_SYNCED not in self.quirks:
                    job.sub_jobs[name].model.load_state_dict(state)
            job.weight_version += 1
            return job.weight_version

    def save(self, job_id: str, checkpoint_type: str) -> TinySnapshot:
        """Resumable: weights + optimizer state + lr; weights-only: weights."""
        with self._locked(job_id) as job:
            trainer, opt = self._trainer(job)
            resumable = checkpoint_type != "weights-only"
            return TinySnapshot(
                checkpoint_type="resumable" if resumable else "weights-only",
                model_config=self.model_config,
                weights=weights_of(trainer.model),
                optimizer_state=clone_tree(opt.state_dict()) if resumable else None,
                lr=job.lr,
            )

    def load(
        self, job_id: str, snapshot: Any, *, sub_job_id: str | None = None, optimizer: bool = True
    ) -> None:
        """Restore a training sub-job (its optimizer too when ``optimizer`` and the snapshot
        has one), or put the weights into a sampler, which then serves them (spec §13.4)."""
        if not isinstance(snapshot, TinySnapshot):
            raise ValueError("tiny engine can only load snapshots it made")
        if snapshot.model_config != self.model_config:
            raise ValueError("checkpoint was made for a different tiny model configuration")
        with self._locked(job_id) as job:
            target = job.sub_jobs.get(sub_job_id) if sub_job_id else job.trainer
            if target is None:
                raise ValueError(f"the job has no sub-job {sub_job_id!r} to load into")
            if target.job_type != "training":
                if EngineQuirk.SAMPLER_INIT_FRESH not in self.quirks:
                    target.model.load_state_dict({k: v.clone() for k, v in snapshot.weights.items()})
                return
            trainer, _ = self._trainer(job)
            trainer.model.load_state_dict({k: v.clone() for k, v in snapshot.weights.items()})
            trainer.model.zero_grad(set_to_none=True)
            job.pending.clear()
            opt = make_optimizer(trainer.model, job.optimizer_spec, job.lr)
            restore = optimizer and snapshot.optimizer_state is not None
            if restore and EngineQuirk.LOAD_PARTIAL not in self.quirks:
                opt.load_state_dict(clone_tree(snapshot.optimizer_state))
                job.lr = snapshot.lr
                for group in opt.param_groups:
                    group["lr"] = job.lr
            job.optimizer = opt

    def export_tensors(self, snapshot: Any) -> dict[str, Any]:
        """The real weights, so an exported safetensors file is the trained model."""
        if not isinstance(snapshot, TinySnapshot):
            raise ValueError("tiny engine can only export snapshots it made")
        return {f"model.{k}": v.clone().contiguous() for k, v in snapshot.weights.items()}
