"""The tiny engine: a real (small) causal LM on CPU behind the Engine protocol.

Why it exists: with the shape engine a client can be wrong in ways only numbers show
(advantages negated, old log-probs off by one, a weight sync forgotten). Here losses fall,
sampling follows the weights, and the sampler moves only on weight-sync, so such bugs
show up as an RL loop that does not learn.

Per job it holds:

- the *training* model (first training sub-job) with its optimizer (AdamW by default, lr
  from ``training_config.optimizer["lr"]``; a step's ``learning_rate`` replaces it and
  stays in force, like a scheduler setting the lr);
- one *sampler* copy per sampling sub-job, changed only by :meth:`TinyEngine.weight_sync`;
- one copy per log-probability sub-job (also moved only when a weight-sync names it);
- the frozen *reference* (the initial weights), used by ``forward(reference=True)`` and
  by the KL loss when the batch carries no ``ref_log_prob``.

Initial weights depend on ``(engine seed, model_name)`` only, like a pretrained model, so
two jobs of one model start equal and a checkpoint of one loads into the other. The job
seed drives sampling when a request gives no seed.

Conventions (decided here, documented for clients):

- log-probs are *shifted*: ``logprobs[:, i] = log p(input_ids[:, i+1])``; the last column
  is 0.0 so the shape is ``[B, S]``; entropy is aligned the same way. ``meta.temperature``
  divides the logits (as verl's actor does) in forward and forward-backward.
- generate reports, per sampled token, its log-prob under the *unscaled* model
  distribution (temperature 1, no top-p), i.e. the quantity forward computes, so the
  forward-vs-generate KL check holds at any sampling temperature.
- RL tensors (``response_mask``, ``advantages``, ``old_log_probs``, ``ref_log_prob``,
  ``loss_mask``) are ``[B, R]`` (aligned with ``responses`` = the last R columns of
  ``input_ids``) or ``[B, P+R]`` token-aligned with ``input_ids`` (entry k is about
  token ``input_ids[:, k]``); ``[B]`` advantages broadcast over the sequence. They may
  sit beside the model kwargs or in ArcticTraining's ``context`` block, whose loss
  settings (``eps_clip`` ...) count too (``fake_gs.engines.batch_layout``).
- in forward(-backward) batches, token ids outside the byte vocabulary are folded modulo
  the vocabulary size, so batches tokenised for a real model still run; a generate prompt
  with such ids is refused (ValueError -> a failed request), as a real sampler would.
- snapshots are in-memory tensor copies; nothing is pickled or ``torch.save``-d.

``mutant`` names one of the ``tiny-*`` mutants of ``fake_gs.mutants``: a deliberate numeric
bug (one conditional each) that the conformance suite's semantic clauses must catch.
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
import threading
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from contract.models import GenerateRequest, LogProbsRequest, SamplingParams, SubJobConfig
from fake_gs.engines.batch_layout import normalize
from fake_gs.engines.tiny_model import TinyConfig, TinyLM, shifted_entropy, shifted_logprobs
from fake_gs.engines.tiny_tokenizer import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, ByteTokenizer

RL_LOSSES = frozenset({"grpo", "verl_grpo", "ppo", "verl_ppo", "policy_loss", "rl"})
SFT_LOSSES = frozenset({"sft", "cross_entropy", "ce", "nll"})
METRIC_KEYS = ("pg_loss", "ppo_kl", "pg_clipfrac", "pg_clipfrac_lower", "kl_loss", "kl_coef")
DEFAULT_LR = 1e-3


def sub_job_ids(job_id: str, sub_jobs: list[SubJobConfig]) -> list[str]:
    """``{job_id}:{training|sampling|log_prob}:{index}`` in create order (facts, section 4)."""
    word = {"training": "training", "sampling": "sampling", "log_probability": "log_prob"}
    counts: dict[str, int] = {}
    out = []
    for cfg in sub_jobs:
        w = word[cfg.job_type]
        out.append(f"{job_id}:{w}:{counts.get(w, 0)}")
        counts[w] = counts.get(w, 0) + 1
    return out


@dataclass
class TinySnapshot:
    """What :meth:`TinyEngine.save` returns: plain tensor copies, never pickled."""

    checkpoint_type: str
    model_config: TinyConfig
    weights: dict[str, torch.Tensor]
    optimizer_state: dict[str, Any] | None
    lr: float


@dataclass
class _SubJob:
    sub_job_id: str
    job_type: str
    model: TinyLM
    max_seq_len: int


@dataclass
class _Job:
    job_id: str
    trainer: _SubJob | None
    optimizer: torch.optim.Optimizer | None
    optimizer_spec: dict[str, Any]
    lr: float
    grad_clip: float | None
    reference: TinyLM
    sub_jobs: dict[str, _SubJob]
    rng: random.Random
    weight_version: int = 0
    pending: list[dict[str, float]] = field(default_factory=list)  # fwd_bwd metrics since step
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first(self, job_type: str) -> _SubJob | None:
        return next((s for s in self.sub_jobs.values() if s.job_type == job_type), None)


def _clone_tree(value: Any) -> Any:
    """Deep copy of an optimizer state dict with every tensor cloned (no aliasing)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clone_tree(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_clone_tree(v) for v in value)
    return copy.copy(value)


def _weights(model: TinyLM) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}


def _make_optimizer(model: TinyLM, spec: Mapping[str, Any], lr: float) -> torch.optim.Optimizer:
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


def _as_tensor(value: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.as_tensor(value).detach().to(dtype)


def _fold_ids(value: Any) -> torch.Tensor:
    ids = _as_tensor(value, torch.long)
    if ids.dim() == 1:
        ids = ids[None, :]
    if ids.dim() != 2:
        raise ValueError(f"input_ids must be [batch, seq], got shape {list(ids.shape)}")
    return ids.remainder(VOCAB_SIZE)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp_min(1.0)


def _total_grad_norm(model: TinyLM) -> float:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return 0.0
    return float(
        torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    )


class TinyEngine:
    """Engine protocol over a tiny real transformer (see module docstring)."""

    name = "tiny"

    def __init__(
        self,
        seed: int = 0,
        *,
        model_config: TinyConfig | None = None,
        threads: int | None = 1,
        mutant: str | None = None,
    ) -> None:
        self.seed = int(seed)
        self.mutant = mutant
        self.model_config = model_config or TinyConfig()
        self.tokenizer = ByteTokenizer()
        self._jobs: dict[str, _Job] = {}
        self._lock = threading.Lock()
        if threads:
            # Shared CPUs: one intra-op thread keeps several servers/tests from thrashing.
            torch.set_num_threads(threads)

    # --- lifecycle ----------------------------------------------------------------------

    def initial_seed(self, model_name: str) -> int:
        return (self.seed * 1_000_003 + zlib.crc32(model_name.encode())) % (2**63)

    def create_job(self, job_id: str, sub_jobs: list[SubJobConfig], seed: int) -> None:
        """Build the models: every sub-job starts from the same seeded initial weights."""
        if not sub_jobs:
            raise ValueError("a job needs at least one sub-job")
        model_name = next(
            (s.model_name for s in sub_jobs if s.job_type == "training"), sub_jobs[0].model_name
        )
        init_seed = self.initial_seed(model_name)
        base = TinyLM(self.model_config, seed=init_seed)
        base.requires_grad_(False).eval()
        subs: dict[str, _SubJob] = {}
        for sid, cfg in zip(sub_job_ids(job_id, sub_jobs), sub_jobs, strict=True):
            model = TinyLM(self.model_config, seed=init_seed).requires_grad_(False).eval()
            if cfg.job_type == "training":
                model.requires_grad_(True).train()
            subs[sid] = _SubJob(sid, cfg.job_type, model, cfg.max_seq_len)
        trainer = next((s for s in subs.values() if s.job_type == "training"), None)
        train_cfg = next(
            (s.training_config for s in sub_jobs if s.training_config is not None), None
        )
        spec: dict[str, Any] = dict(train_cfg.optimizer) if train_cfg is not None else {}
        lr = float(spec.get("lr", spec.get("learning_rate", DEFAULT_LR)))
        job = _Job(
            job_id=job_id,
            trainer=trainer,
            optimizer=_make_optimizer(trainer.model, spec, lr) if trainer else None,
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

    def _job(self, job_id: str) -> _Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise KeyError(f"tiny engine has no job {job_id!r}") from None

    def _trainer(self, job: _Job) -> tuple[_SubJob, torch.optim.Optimizer]:
        if job.trainer is None or job.optimizer is None:
            raise ValueError(f"job {job.job_id} has no training sub-job")
        return job.trainer, job.optimizer

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[_Job]:
        job = self._job(job_id)
        with job.lock:
            yield job

    # --- training -----------------------------------------------------------------------

    def forward_backward(self, job_id: str, request: dict[str, Any]) -> dict[str, Any]:
        """Compute the loss named by ``processing.loss_fn``, accumulate its gradients."""
        with self._locked(job_id) as job:
            trainer, _ = self._trainer(job)
            batch = _Batch.parse(request)
            logits = trainer.model(batch.input_ids, batch.attention_mask, batch.position_ids)
            if batch.is_rl:
                loss, metrics = self._rl_loss(job, batch, logits)
            else:
                loss, metrics = _sft_loss(batch, logits)
            loss.backward()
            metrics["grad_norm"] = _total_grad_norm(trainer.model)
            metrics["loss"] = float(loss.detach())
            job.pending.append(metrics)
            return {
                "avg_loss": float(loss.detach()),
                "metrics": metrics,
                "post_process_outputs": _post_outputs(batch, logits),
            }

    def _rl_loss(
        self, job: _Job, batch: _Batch, logits: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """verl's vanilla PPO-clip policy loss (dual-clip for negative advantages) + KL loss."""
        cfg = batch.loss_config
        clip = float(cfg.get("clip_ratio", 0.2))
        low = float(cfg.get("clip_ratio_low") or clip)
        high = float(cfg.get("clip_ratio_high") or clip)
        clip_c = float(cfg.get("clip_ratio_c", 3.0))
        mask = batch.response_mask
        logp = batch.token_logprobs(logits)
        adv = batch.aligned("advantages")
        if adv is None:
            raise ValueError(f"loss_fn {batch.loss_fn!r} needs 'advantages'")
        if self.mutant == "tiny-advantages-flipped":
            adv = -adv
        old = batch.aligned("old_log_probs")
        if old is None:
            old = logp.detach()
        neg_kl = (logp - old).clamp(-20.0, 20.0)
        ratio = neg_kl.exp()
        pg1 = -adv * ratio
        pg2 = -adv * ratio.clamp(1.0 - low, 1.0 + high)
        clipped1 = torch.maximum(pg1, pg2)
        pg3 = -adv * clip_c
        pg_losses = torch.where(adv < 0, torch.minimum(pg3, clipped1), clipped1)
        pg_loss = _aggregate(pg_losses, mask, str(cfg.get("loss_agg_mode", "token-mean")))
        loss = pg_loss
        metrics = {
            "pg_loss": float(pg_loss.detach()),
            "ppo_kl": float(_masked_mean(-neg_kl.detach(), mask)),
            "pg_clipfrac": float(_masked_mean((pg2 > pg1).float(), mask)),
            "pg_clipfrac_lower": float(_masked_mean(((clipped1 > pg3) & (adv < 0)).float(), mask)),
            "kl_loss": 0.0,
            "kl_coef": 0.0,
        }
        if cfg.get("use_kl_loss"):
            ref = batch.aligned("ref_log_prob")
            if ref is None:
                with torch.no_grad():
                    ref_logits = job.reference(
                        batch.input_ids, batch.attention_mask, batch.position_ids
                    )
                ref = batch.token_logprobs(ref_logits)
            diff = (ref - logp).clamp(-20.0, 20.0)  # k3 "low_var_kl": e^d - d - 1
            kl = (diff.exp() - diff - 1.0).clamp(-10.0, 10.0)
            kl_loss = _aggregate(kl, mask, str(cfg.get("loss_agg_mode", "token-mean")))
            coef = float(cfg.get("kl_loss_coef", 0.001))
            loss = loss + coef * kl_loss
            metrics["kl_loss"] = float(kl_loss.detach())
            metrics["kl_coef"] = coef
        ent_coef = float(cfg.get("entropy_coeff", 0.0) or 0.0)
        if ent_coef or batch.calculate_entropy:
            ent = batch.token_aligned(shifted_entropy(logits, batch.temperature))
            ent_mean = _masked_mean(ent, mask)
            metrics["entropy"] = float(ent_mean.detach())
            if ent_coef:
                loss = loss - ent_coef * ent_mean
        return loss, metrics

    def step(self, job_id: str, learning_rate: float | None) -> dict[str, Any]:
        """Apply the accumulated gradients, then zero them; reports the pre-clip grad norm."""
        with self._locked(job_id) as job:
            trainer, opt = self._trainer(job)
            if learning_rate is not None:
                job.lr = float(learning_rate)
            for group in opt.param_groups:
                group["lr"] = job.lr
            grad_norm = _total_grad_norm(trainer.model)
            if job.grad_clip:
                torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), job.grad_clip)
            if self.mutant == "tiny-step-ascends":
                for group in opt.param_groups:
                    group["maximize"] = True
            opt.step()
            opt.zero_grad(set_to_none=True)
            if self.mutant == "tiny-sampler-drifts":
                state = _weights(trainer.model)
                for sub in job.sub_jobs.values():
                    if sub.job_type == "sampling":
                        sub.model.load_state_dict(state)
            # The step reports the mean of the micro-batches it applied, plus the real norm.
            metrics = dict.fromkeys(METRIC_KEYS, 0.0)
            for key in dict.fromkeys(k for m in job.pending for k in m):
                values = [m[key] for m in job.pending if key in m]
                metrics[key] = sum(values) / len(values)
            job.pending.clear()
            metrics.update(grad_norm=grad_norm, lr=job.lr)
            return {"last_lr": job.lr, "metrics": metrics}

    # --- inference ----------------------------------------------------------------------

    def forward(self, job_id: str, request: dict[str, Any], *, reference: bool) -> dict[str, Any]:
        """Shifted log-probs (and entropy when asked) from the training or reference weights."""
        with self._locked(job_id) as job:
            if reference:
                model = job.reference
            else:
                model = job.trainer.model if job.trainer else self._inference_model(job, "sampling")
            batch = _Batch.parse(request, need_loss=False)
            if self.mutant == "tiny-fwd-ignores-temperature":
                batch.temperature = 1.0
            with torch.no_grad():
                logits = model(batch.input_ids, batch.attention_mask, batch.position_ids)
                logprobs = shifted_logprobs(logits, batch.input_ids, batch.temperature)
                if self.mutant == "tiny-logprobs-shifted":  # column i scores token i, not i+1
                    logprobs = F.pad(logprobs[:, :-1], (1, 0), value=0.0)
                outputs = {"logprobs": logprobs}
                if batch.calculate_entropy:
                    outputs["entropy"] = shifted_entropy(logits, batch.temperature)
            return {"model_outputs": outputs, "metrics": {}}

    def _inference_model(self, job: _Job, job_type: str) -> TinyLM:
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
                    _Row(self.tokenizer.encode_prompt(prompt), params, seed, sampler.max_seq_len)
                )
            with torch.no_grad():
                _sample(sampler.model, rows)
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
                raise ValueError(f"unknown weight-sync source {source!r} for job {job_id}")
            names = list(targets) or [
                s.sub_job_id for s in job.sub_jobs.values() if s.job_type == "sampling"
            ]
            unknown = [t for t in names if t not in job.sub_jobs]
            if unknown:
                raise ValueError(f"unknown weight-sync targets {unknown} for job {job_id}")
            state = _weights(src.model)
            for name in names:
                if name != src.sub_job_id and self.mutant != "tiny-stale-sampler":
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
                weights=_weights(trainer.model),
                optimizer_state=_clone_tree(opt.state_dict()) if resumable else None,
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
                raise ValueError(f"job {job_id} has no sub-job {sub_job_id!r} to load into")
            if target.job_type != "training":
                if self.mutant != "tiny-sampler-fresh":
                    target.model.load_state_dict({k: v.clone() for k, v in snapshot.weights.items()})
                return
            trainer, _ = self._trainer(job)
            trainer.model.load_state_dict({k: v.clone() for k, v in snapshot.weights.items()})
            trainer.model.zero_grad(set_to_none=True)
            job.pending.clear()
            opt = _make_optimizer(trainer.model, job.optimizer_spec, job.lr)
            restore = optimizer and snapshot.optimizer_state is not None
            if restore and self.mutant != "tiny-load-partial":
                opt.load_state_dict(_clone_tree(snapshot.optimizer_state))
                job.lr = snapshot.lr
                for group in opt.param_groups:
                    group["lr"] = job.lr
            job.optimizer = opt

    def export_tensors(self, snapshot: Any) -> dict[str, Any]:
        """The real weights, so an exported safetensors file is the trained model."""
        if not isinstance(snapshot, TinySnapshot):
            raise ValueError("tiny engine can only export snapshots it made")
        return {f"model.{k}": v.clone().contiguous() for k, v in snapshot.weights.items()}


# --- batch parsing -------------------------------------------------------------------------


class _Batch:
    """A forward(-backward) request's tensors, with every RL tensor aligned to input_ids."""

    def __init__(
        self,
        inputs: Mapping[str, Any],
        meta: Mapping[str, Any],
        processing: Mapping[str, Any],
        loss_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.inputs = inputs
        self.input_ids = _fold_ids(inputs["input_ids"])
        b, s = self.input_ids.shape
        if b == 0 or s == 0:
            raise ValueError(f"input_ids must be non-empty, got shape {[b, s]}")
        am = inputs.get("attention_mask")
        self.attention_mask = _as_tensor(am, torch.bool).reshape(b, s) if am is not None else None
        pos = inputs.get("position_ids")
        self.position_ids = _as_tensor(pos, torch.long).reshape(b, s) if pos is not None else None
        temperature = meta.get("temperature")
        self.temperature = (
            float(temperature) if isinstance(temperature, (int, float)) and temperature > 0 else 1.0
        )
        self.calculate_entropy = bool(meta.get("calculate_entropy"))
        loss_fn = processing.get("loss_fn")
        post = processing.get("post")
        self.post: list[Any] = list(post) if isinstance(post, list) else []
        self.loss_fn = str(loss_fn).lower() if loss_fn else None
        self.loss_config: dict[str, Any] = dict(loss_config or {})
        responses = inputs.get("responses")
        self.response_len = (
            int(_as_tensor(responses, torch.long).reshape(b, -1).shape[1])
            if responses is not None
            else None
        )
        if self.loss_fn in RL_LOSSES:
            self.is_rl = True
        elif self.loss_fn in SFT_LOSSES:
            self.is_rl = False
        elif self.loss_fn is None:
            self.is_rl = "labels" not in inputs and "advantages" in inputs
        else:
            raise ValueError(
                f"unknown loss_fn {loss_fn!r}; tiny engine knows sft and grpo/verl_grpo"
            )
        self._mask: torch.Tensor | None = None

    @classmethod
    def parse(cls, request: Mapping[str, Any], *, need_loss: bool = True) -> _Batch:
        # kwargs, the verl envelope and ArcticTraining's context block (spec §10.3) alike.
        layout = normalize(request, need_loss=need_loss)
        return cls(layout.inputs, layout.meta, layout.processing, layout.loss_config)

    @property
    def shape(self) -> tuple[int, int]:
        b, s = self.input_ids.shape
        return int(b), int(s)

    def token_aligned(self, shifted: torch.Tensor) -> torch.Tensor:
        """Shifted [B, S] (about token i+1) -> token-aligned [B, S] (about token k; k=0 is 0)."""
        return F.pad(shifted[:, :-1], (1, 0), value=0.0)

    def token_logprobs(self, logits: torch.Tensor) -> torch.Tensor:
        return self.token_aligned(shifted_logprobs(logits, self.input_ids, self.temperature))

    def aligned(self, name: str) -> torch.Tensor | None:
        """An RL tensor as [B, S] token-aligned with input_ids (see module docstring)."""
        value = self.inputs.get(name)
        if value is None:
            return None
        b, s = self.shape
        x = _as_tensor(value, torch.float32)
        if x.dim() == 1 or (x.dim() == 2 and x.shape[1] == 1):
            return x.reshape(b, 1).expand(b, s) * self._col0_mask()
        if x.dim() != 2 or x.shape[0] != b:
            raise ValueError(f"{name} must be [B, R] or [B, P+R] with B={b}, got {list(x.shape)}")
        width = int(x.shape[1])
        if width == s:
            return x * self._col0_mask()
        if width > s or (self.response_len is not None and width != self.response_len):
            raise ValueError(
                f"{name} width {width} matches neither responses ({self.response_len}) nor input_ids ({s})"
            )
        return F.pad(x, (s - width, 0), value=0.0)

    def _col0_mask(self) -> torch.Tensor:
        b, s = self.shape
        m = torch.ones(b, s)
        m[:, 0] = 0.0  # the first token has no log-prob
        return m

    @property
    def response_mask(self) -> torch.Tensor:
        if self._mask is None:
            mask = self.aligned("response_mask")
            if mask is None:
                mask = self.aligned("loss_mask")
            if mask is None:
                b, s = self.shape
                base = (
                    self.attention_mask.float()
                    if self.attention_mask is not None
                    else torch.ones(b, s)
                )
                if self.response_len is not None:
                    base = base * F.pad(
                        torch.ones(b, self.response_len), (s - self.response_len, 0)
                    )
                mask = base * self._col0_mask()
            self._mask = (mask > 0).float()
        return self._mask


def _aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str) -> torch.Tensor:
    """verl's agg_loss: token-mean (default), seq-mean-token-mean, seq-mean-token-sum."""
    if mode == "seq-mean-token-mean":
        per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)
        return (
            per_seq[mask.sum(-1) > 0].mean()
            if bool((mask.sum(-1) > 0).any())
            else per_seq.sum() * 0
        )
    if mode == "seq-mean-token-sum":
        return (values * mask).sum(-1).mean()
    return _masked_mean(values, mask)


def _post_outputs(batch: _Batch, logits: torch.Tensor) -> dict[str, Any]:
    """``processing.post`` asks for per-token outputs of this (pre-update) forward pass."""
    names: list[str] = []
    for item in batch.post:
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            names.append(item["name"])
    out: dict[str, Any] = {}
    with torch.no_grad():
        for name in names:
            if name in ("logprobs", "log_probs"):
                out[name] = shifted_logprobs(logits.detach(), batch.input_ids, batch.temperature)
            elif name == "entropy":
                out[name] = shifted_entropy(logits.detach(), batch.temperature)
    return out


def _sft_loss(batch: _Batch, logits: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean cross-entropy on ``labels`` (HF convention: shifted inside, -100 ignored)."""
    labels_raw = batch.inputs.get("labels")
    if labels_raw is not None:
        labels = _as_tensor(labels_raw, torch.long).reshape(batch.shape)
        labels = torch.where(labels == -100, labels, labels.remainder(VOCAB_SIZE))
    else:
        labels = batch.input_ids.clone()
        if batch.attention_mask is not None:
            labels[~batch.attention_mask] = -100
    target = labels[:, 1:]
    if bool((target != -100).any()):
        loss = F.cross_entropy(
            (logits[:, :-1].float() / batch.temperature).reshape(-1, logits.shape[-1]),
            target.reshape(-1),
            ignore_index=-100,
        )
    else:
        loss = logits.sum() * 0.0  # nothing to learn from; keep the graph for backward
    metrics = dict.fromkeys(METRIC_KEYS, 0.0)
    return loss, metrics


# --- sampling ------------------------------------------------------------------------------


class _Row:
    """One prompt being sampled: its tokens, params, generator and outcome."""

    def __init__(
        self, prompt: list[int], params: SamplingParams, seed: int, max_seq_len: int
    ) -> None:
        self.prompt = prompt or [BOS_ID]
        self.params = params
        self.generator = torch.Generator().manual_seed(int(seed) % (2**63))
        room = max_seq_len - len(self.prompt) if max_seq_len > 0 else params.max_tokens
        if room < 1:  # prompt + output never exceed max_seq_len (GEN-SEQLEN-1)
            raise ValueError(f"a prompt of {len(self.prompt)} tokens leaves no room under max_seq_len {max_seq_len}")
        self.max_new = min(params.max_tokens, room)
        stop = params.stop
        self.stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if s]
        extra = params.model_extra or {}
        self.stop_ids = {int(t) for t in (extra.get("stop_token_ids") or [])}
        if not extra.get("ignore_eos"):
            self.stop_ids.add(EOS_ID)
        top_k = extra.get("top_k")
        self.top_k = int(top_k) if isinstance(top_k, int) and top_k > 0 else 0
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.finish: str | None = None
        self.text_end: int | None = None

    def push(self, token: int, logprob: float, tokenizer: ByteTokenizer) -> None:
        self.tokens.append(token)
        self.logprobs.append(logprob)
        if token in self.stop_ids:
            self.finish = "stop"
        elif self.stops:
            text = tokenizer.decode(self.tokens)
            hits = [i for i in (text.find(s) for s in self.stops) if i >= 0]
            if hits:
                self.finish, self.text_end = "stop", min(hits)
        if self.finish is None and len(self.tokens) >= self.max_new:
            self.finish = "length"

    def result(self, tokenizer: ByteTokenizer) -> dict[str, Any]:
        text = tokenizer.decode(self.tokens)
        if self.text_end is not None:
            text = text[: self.text_end]
        out: dict[str, Any] = {
            "text": text,
            "token_ids": torch.tensor(self.tokens, dtype=torch.int64),
            "finish_reason": self.finish or "length",
        }
        if self.params.logprobs is not None and self.params.logprobs is not False:
            out["logprobs"] = torch.tensor(self.logprobs, dtype=torch.float32)
        return out


_TOKENIZER = ByteTokenizer()
_NEVER_SAMPLED = torch.tensor([PAD_ID, BOS_ID])


def _sample(model: TinyLM, rows: list[_Row]) -> None:
    """Decode all rows in one left-padded batch with a key/value cache.

    Rows that finish keep riding along (their tokens are ignored) so the batch stays
    rectangular; each row draws one uniform per step from its own generator, so a seeded
    prompt samples the same tokens whatever else is in the batch.
    """
    b = len(rows)
    width = max(len(r.prompt) for r in rows)
    ids = torch.full((b, width), PAD_ID, dtype=torch.long)
    keep = torch.zeros((b, width), dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, width - len(row.prompt) :] = torch.tensor(row.prompt).remainder(VOCAB_SIZE)
        keep[i, width - len(row.prompt) :] = True
    logits, cache = model.forward_cached(ids, keep)
    positions = keep.sum(-1, keepdim=True)
    temps = torch.tensor([_temperature(r) for r in rows])
    top_p = torch.tensor([r.params.top_p or 1.0 for r in rows])
    top_k = torch.tensor([r.top_k for r in rows])
    for _ in range(max(r.max_new for r in rows)):
        last = logits[:, -1, :].float()
        logp = torch.log_softmax(last, dim=-1)
        tokens = _pick(last, rows, temps, top_p, top_k)
        for i, row in enumerate(rows):
            if row.finish is None:
                row.push(int(tokens[i]), float(logp[i, tokens[i]]), _TOKENIZER)
        if all(r.finish is not None for r in rows):
            return
        keep = torch.cat((keep, torch.ones((b, 1), dtype=torch.bool)), dim=1)
        logits, cache = model.forward_cached(tokens[:, None], keep, positions, cache)
        positions = positions + 1


def _temperature(row: _Row) -> float:
    """0 means greedy (marked as 0 here); None is vLLM's default of 1."""
    t = row.params.temperature
    return 1.0 if t is None else float(t)


def _pick(
    logits: torch.Tensor,
    rows: list[_Row],
    temps: torch.Tensor,
    top_p: torch.Tensor,
    top_k: torch.Tensor,
) -> torch.Tensor:
    """One token per row: greedy at temperature 0, else top-k/top-p inverse-CDF sampling."""
    logits = logits.clone()
    logits[:, _NEVER_SAMPLED] = -math.inf
    greedy = logits.argmax(-1)
    scaled = logits / torch.where(temps > 0, temps, torch.ones_like(temps))[:, None]
    if bool((top_k > 0).any()):
        ordered = scaled.sort(dim=-1, descending=True).values
        k = top_k.clamp(1, scaled.shape[-1]) - 1
        kth = ordered.gather(-1, k[:, None])
        scaled = torch.where((top_k[:, None] > 0) & (scaled < kth), -math.inf, scaled)
    probs = torch.softmax(scaled, dim=-1)
    if bool((top_p < 1.0).any()):
        sorted_p, order = probs.sort(dim=-1, descending=True)
        sorted_p = torch.where((sorted_p.cumsum(-1) - sorted_p) >= top_p[:, None], 0.0, sorted_p)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    cdf = probs.cumsum(-1)
    cdf = cdf / cdf[:, -1:]
    draws = torch.tensor(
        [float(torch.rand((), generator=r.generator)) if r.finish is None else 0.0 for r in rows]
    )
    # right=True: the first token whose cdf exceeds the draw; zero-probability tokens never win.
    sampled = (
        torch.searchsorted(cdf, draws[:, None], right=True).squeeze(-1).clamp_max(cdf.shape[-1] - 1)
    )
    return torch.where(temps > 0, sampled, greedy)
