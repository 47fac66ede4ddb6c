"""The training routes' backend: forward-backward, forward (no grad), step, save, load.

One method per route, next to the job state it changes: each checks the route's rules
(spec §6.1-§6.4, §8.2), and submits the request's work onto the job's serial executor
(``RequestQueue.submit``), where it runs the engine and changes the job in submit order
through the job table (:meth:`JobTable.stepped` is what a step does to a job). The
handlers (``fake_gs.http.handlers.training``) parse the call, call a method, and answer
the request id. What the answer side decides (the ids a save may take, the shape of a
step's result) the backend asks of the store's outward form (``fake_gs.state.outward``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contract import models as m
from contract.errors import ErrorCode, detail_entry
from contract.ids import id_problem, printable
from contract.models import PROPOSED_METRIC_KEYS, LoadRequest, SaveRequest
from contract.shapes import ShapeError, forward_expectation
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.render import render
from fake_gs.chunking.groups import ChunkGroup
from fake_gs.controls.seams import Rewrite
from fake_gs.engines.protocol import BatchRefused, Engine
from fake_gs.settings import FakeSettings
from fake_gs.state.create_rules import dp_compatible, restores_optimizer
from fake_gs.state.quotas import check_checkpoint_room
from fake_gs.state.records import CheckpointRec, JobRec, RequestRec, SubJobRec
from fake_gs.state.store import Store

#: A batch past this many tensor bytes is "large" to the large-batch-loss bend.
LARGE_BATCH_BYTES = 1024 * 1024


def training_sub_job(job: JobRec) -> SubJobRec:
    subs = job.of_type("training")
    if not subs:
        raise ApiError(ErrorCode.SUB_JOB_NOT_FOUND, f"job {job.public_id} has no training sub-job")
    return subs[0]


def full_metrics(raw: Any) -> dict[str, Any]:
    """The proposed metrics block: every PROPOSED_METRIC_KEYS entry present, floats."""
    metrics = {k: v for k, v in (raw or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for key in PROPOSED_METRIC_KEYS:
        metrics.setdefault(key, 0.0)
    return metrics


def forward_object(obj: Any, max_seq_len: int | None = None) -> dict[str, Any]:
    """A forward(-backward) frame object: a dict whose input_ids are [batch, seq], with seq
    at most the training sub-job's ``max_seq_len`` when one is given (spec §8.2)."""
    if not isinstance(obj, dict):
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "the frame must hold an object {args, kwargs, ...}",
                       [detail_entry((), "not an object", "dict_type")])
    try:
        exp = forward_expectation(obj)
    except ShapeError as exc:
        raise ApiError(ErrorCode.INVALID_ARGUMENT, str(exc),
                       [detail_entry(("kwargs", "input_ids"), str(exc), "value_error")]) from None
    if max_seq_len is not None and exp.seq > max_seq_len:
        message = f"sequences of {exp.seq} tokens exceed the training sub-job's max_seq_len {max_seq_len}"
        raise ApiError(ErrorCode.SEQUENCE_TOO_LONG, message,
                       [detail_entry(("kwargs", "input_ids"), message, "too_long")])
    return obj


def tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors anywhere in a decoded frame object."""
    if isinstance(obj, Mapping):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    nbytes = getattr(obj, "nbytes", None)
    return nbytes if isinstance(nbytes, int) else 0


def save_result(job_id: str, checkpoint_id: str, checkpoint_type: str, global_steps: int,
                bare: bool = False) -> dict[str, Any]:
    """A save's result as a poll shows it (the path: the checkpoint's fake-gs:// storage URI;
    ``bare``: without path and tag, spec §6.3's "fields actually present")."""
    result = m.SaveResult(checkpoint_id=checkpoint_id, checkpoint_type=checkpoint_type, global_steps=global_steps)
    if not bare:
        result.checkpoint_path = f"fake-gs://{job_id}/checkpoints/{checkpoint_id}"
        result.checkpoint_tag = checkpoint_id
    return render(result)


def _peak_memory_wanted(sub: SubJobRec) -> bool:
    cfg = sub.config.training_config
    return bool(cfg is not None and (cfg.model_extra or {}).get("step_peak_memory_log"))


@dataclass(frozen=True)
class Training:
    """The training routes over one store (see the module docstring)."""

    store: Store

    @property
    def settings(self) -> FakeSettings:
        return self.store.settings

    def admit_batch(self, request: dict[str, Any]) -> Engine:
        """The engine that will run the batch, once it has not refused it: its refusal is a
        400 at submission, over its budget (``limit_exceeded`` naming the bound) or with a
        non-finite input (``invalid_argument``)."""
        engine = self.store.engine
        try:
            engine.check_batch(request, self.settings.tiny_max_batch_tokens)
        except BatchRefused as exc:
            code = ErrorCode.LIMIT_EXCEEDED if exc.limit else ErrorCode.INVALID_ARGUMENT
            loc = ("kwargs", exc.field) if exc.field else ()
            raise ApiError(code, str(exc), [detail_entry(loc, str(exc), exc.limit or "finite_number")]) from None
        return engine

    def forward_backward(self, job: JobRec, obj: Any, group: ChunkGroup | None) -> RequestRec:
        """A decoded forward-backward frame: checked, then run once on the job's executor."""
        store, rules, settings = self.store, self.store.rules, self.settings
        trainer = training_sub_job(job)
        request = forward_object(obj, trainer.max_seq_len if rules.seq_len_checked else None)
        engine = self.admit_batch(request)
        proposed = settings.profile == "proposed" and rules.proposed_metrics_sent
        flip = rules.large_batch_loss_flipped and tensor_bytes(request) > LARGE_BATCH_BYTES

        def work() -> dict[str, Any]:
            out = engine.forward_backward(job.job_id, request)
            loss = -float(out["avg_loss"]) if flip else float(out["avg_loss"])
            answer = render(m.ForwardBackwardResult(
                job_id=job.public_id, avg_loss=loss, metrics=full_metrics(out.get("metrics")) if proposed else {},
                post_process_outputs=out.get("post_process_outputs") or {}))
            store.table.ran_frame(job, group, forward_backward=True)
            store.table.trained(job, loss)
            return answer

        return store.queue.submit(job, "forward_backward", work, group_id=group.group_id if group else None)

    def forward_work(self, job: JobRec, request: dict[str, Any], *, reference: bool) -> Any:
        """A forward pass's work (forward-no-grad and the forward operation)."""
        engine, seams = self.admit_batch(request), self.settings.seams

        def work() -> dict[str, Any]:
            out = engine.forward(job.job_id, request, reference=reference)
            outputs = out.get("model_outputs")
            if isinstance(outputs, Mapping):
                outputs = seams.rewrite(Rewrite.FORWARD_OUTPUTS, dict(outputs))
                out = {**out, "model_outputs": outputs}
            out.setdefault("metrics", {})
            return out

        return work

    def unread(self, job: JobRec, op: str, group: ChunkGroup | None = None) -> RequestRec:
        """What a fake that waives the payload rules runs instead of a frame it cannot decode."""
        store = self.store

        def work() -> dict[str, Any]:
            store.table.ran_frame(job, group, forward_backward=op == "forward_backward")
            return render(m.ForwardBackwardResult(job_id=job.public_id, avg_loss=0.0, metrics={},
                                                          post_process_outputs={}))

        return store.queue.submit(job, op, work)

    def forward_no_grad(self, job: JobRec, obj: Any, group: ChunkGroup | None) -> RequestRec:
        request = forward_object(obj)
        work = self.forward_work(job, request, reference=bool(request.get("reference_model")))
        return self.store.queue.submit(job, "forward_no_grad", work, force_frame=True,
                                       group_id=group.group_id if group else None)

    def step(self, job: JobRec, learning_rate: float | None) -> RequestRec:
        store, outward, seams = self.store, self.store.outward, self.settings.seams
        sub = training_sub_job(job)
        proposed = self.settings.profile == "proposed"

        def work() -> dict[str, Any]:
            out = store.engine.step(job.job_id, learning_rate)
            steps = store.table.stepped(job)
            answer = m.StepResult(global_steps=steps, last_lr=float(out["last_lr"]))
            if _peak_memory_wanted(sub):  # byte counts (spec §6.2)
                answer.peak_memory = m.PeakMemory(gpu_peak=(1 << 30) + (1 << 20) * steps, cpu_peak=1 << 29)
            # The forward-backward runs this step applied, in every profile (results are
            # open, spec §11): what shows that a repeated final chunk ran nothing again.
            applied = (out.get("metrics") or {}).get("micro_batches")
            if proposed:
                answer.metrics = full_metrics(out.get("metrics"))
            elif isinstance(applied, int):
                answer.metrics = {"micro_batches": applied}
            return outward.step_result(seams.rewrite(Rewrite.STEP_ANSWER, render(answer)))

        return store.queue.submit(job, "step", work)

    def save(self, job: JobRec, body: SaveRequest) -> RequestRec:
        store, seams, outward = self.store, self.settings.seams, self.store.outward
        n_gpus = training_sub_job(job).config.n_gpus
        ckpt_type = body.checkpoint_type or "resumable"
        wanted_id = body.checkpoint_id or None
        problem = id_problem(wanted_id) if wanted_id is not None else None
        if problem is not None:
            raise ApiError(ErrorCode.INVALID_ID, f"checkpoint_id {printable(wanted_id or '')[:80]!r} {problem}",
                           [detail_entry(("checkpoint_id",), problem, ErrorCode.INVALID_ID)])
        check_checkpoint_room(store, job, wanted_id)
        # The control plane may drop the caller's id (spec §6.3); the outward form says
        # whether the server names this save, and whether its result is bare.
        server_names = outward.save_naming(wanted_id)
        bare = outward.bare_save_result()

        def work() -> dict[str, Any]:
            snapshot = store.engine.save(job.job_id, ckpt_type)
            with store.lock:
                if server_names is not None:
                    ckpt_id = server_names(job.global_steps, job.checkpoints)
                else:
                    ckpt_id = wanted_id or f"global_step{job.global_steps}"
                store.table.add_checkpoint(job, CheckpointRec(ckpt_id, job.global_steps, job.last_loss, time.time(),
                                                              ckpt_type, snapshot, n_gpus))
                steps = job.global_steps
            ckpt_id = seams.rewrite(Rewrite.SAVED_CHECKPOINT_ID, ckpt_id)
            return save_result(job.public_id, ckpt_id, ckpt_type, steps, bare)

        return store.queue.submit(job, "save", work)

    def load(self, job: JobRec, owner: str, body: LoadRequest) -> RequestRec:
        """A load into the sub-job the body names (the training sub-job when none)."""
        store = self.store
        for field, value in (("checkpoint_id", body.checkpoint_id), ("source_job_id", body.source_job_id)):
            problem = id_problem(value) if value else None
            if problem is not None:  # no id the service makes: malformed, not unknown
                raise ApiError(ErrorCode.INVALID_ID, f"{field} {printable(value or '')[:80]!r} {problem}",
                               [detail_entry((field,), problem, ErrorCode.INVALID_ID)])
        target: SubJobRec | None = None
        if body.target_sub_job_id:
            named = job.named_sub_job("target_sub_job_id", body.target_sub_job_id)
            if named.job_type != "training":
                raise ApiError(ErrorCode.NOT_IMPLEMENTED,
                               f"loading into a {named.job_type} sub-job is not implemented; target a training sub-job")
            target = named
        into = target or training_sub_job(job)
        checkpoint_id, source_job_id = body.checkpoint_id, body.source_job_id
        dp_rule = self.store.rules.dp_size_change_refused

        def work() -> dict[str, Any]:
            # The route is asynchronous and names only its 400/501 refusals as immediate (spec
            # §6.4): an unknown source job or checkpoint fails the request, readable on the
            # poll, so no client retries a 404. Looked up here, a save queued before the load
            # has run (REQ-ORDER-1).
            source = store.table.job_for(owner, source_job_id) if source_job_id else job
            ckpt = store.table.checkpoint(source, checkpoint_id)
            if dp_rule and not dp_compatible(ckpt, into.config):
                # The worker refuses it (spec §6.4): a failed request, the job keeps running.
                raise ApiError(ErrorCode.DP_SIZE_MISMATCH,
                               f"checkpoint {ckpt.checkpoint_id!r} was saved with n_gpus={ckpt.n_gpus}, "
                               f"{into.sub_job_id} has n_gpus={into.config.n_gpus}: a different "
                               "data-parallel size needs load_optimizer_states false at create")
            store.engine.load(job.job_id, ckpt.snapshot, sub_job_id=into.sub_job_id,
                              optimizer=restores_optimizer(ckpt, into.config))
            steps = store.table.restored(job, ckpt)
            answer = m.LoadResult(checkpoint_id=ckpt.checkpoint_id, global_steps=steps,
                                  checkpoint_type=ckpt.checkpoint_type)
            if source is not job:
                answer.source_job_id = source.public_id
            return render(answer)

        return store.queue.submit(job, "load", work)
