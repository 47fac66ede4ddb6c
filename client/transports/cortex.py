"""The Cortex transport: canonical ops -> Cortex REST routes, bodies normalised, answers shaped.

The verl ``{batch, meta, processing}`` envelope becomes the RPC body ``{"args": [],
"kwargs": batch, "meta", "processing", ...legacy kwargs}``; loss-only answers are shaped
like the on-prem server's; colocation ops answer ``{}`` because Cortex manages placement.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from client import scoring
from client.config import ClientConfig
from client.errors import (
    ConfigError,
    CortexError,
    CortexHTTPError,
    PollTimeout,
    PromptTooLong,
    ProtocolError,
)
from client.jobspec import plan_job
from client.rest import CortexRestClient
from client.shaping import (
    logprobs_of,
    shape_generate_result,
    shape_step_result,
    shape_train_result,
)
from client.transports.base import COLOCATION_OPS, JobIds, Request
from client.transports.jagged import dense_batch, is_nested
from contract.errors import ErrorCode
from contract.ids import job_of_sub_job
from contract.models import GenerateRequest, ResetPrefixCachePayload, SaveRequest

log = logging.getLogger(__name__)

#: Top-level keys of a train body that are not model kwargs.
RPC_SIDE_KEYS: frozenset[str] = frozenset(
    {"meta", "processing", "context", "post_processors", "reference_model", "router_replay"}
)
#: Save body fields the contract documents; the legacy extras (path, stage_info, ...) are
#: ignored by real servers and refused by a strict one, so they are not sent.
SAVE_FIELDS: tuple[str, ...] = tuple(SaveRequest.model_fields)
#: Fields of the generate frame object; other keys are the caller's and stay local.
GENERATE_FIELDS: tuple[str, ...] = tuple(GenerateRequest.model_fields)
WEIGHTS_ONLY = "weights-only"


def rpc_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise a train body to ``{"args", "kwargs", "meta"?, "processing"?, ...}``, a
    nested (jagged) prompts/responses made dense as verl pads input_ids (``client.transports.jagged``)."""
    rest = dict(body)
    if "batch" in rest:
        out: dict[str, Any] = {"args": [], "kwargs": rest.pop("batch")}
        out.update(rest)
    elif "kwargs" in rest or "args" in rest:
        rest.setdefault("args", [])
        rest.setdefault("kwargs", {})
        out = rest
    else:
        out = {"args": [], "kwargs": {k: v for k, v in rest.items() if k not in RPC_SIDE_KEYS}}
        out.update({k: v for k, v in rest.items() if k in RPC_SIDE_KEYS})
    if isinstance(out["kwargs"], Mapping) and any(is_nested(v) for v in out["kwargs"].values()):
        out["kwargs"] = dense_batch(out["kwargs"], out.get("meta"))
    return out


def check_prompt_lengths(prompts: Any, max_seq_len: int | None, *, job_id: str | None) -> None:
    """Refuse token prompts the sampler would refuse (``len >= max_seq_len``) before sending."""
    if not max_seq_len or not isinstance(prompts, list):
        return
    for index, prompt in enumerate(prompts):
        if isinstance(prompt, (list, tuple)) and len(prompt) >= max_seq_len:
            raise PromptTooLong(
                f"prompt {index} has {len(prompt)} tokens; the sampling sub-job takes fewer "
                f"than max_seq_len={max_seq_len}",
                index=index, length=len(prompt), max_seq_len=max_seq_len,
                route="generate", job_id=job_id,
            )


def route_is_absent(exc: CortexHTTPError) -> bool:
    """The answer says the path or method is not served (not that a job or request is
    missing): 405, or a 404 naming no job, request or checkpoint."""
    if exc.status == 405:
        return True
    missing_thing = {ErrorCode.JOB_NOT_FOUND, ErrorCode.REQUEST_NOT_FOUND,
                     ErrorCode.CHECKPOINT_NOT_FOUND, ErrorCode.SUB_JOB_NOT_FOUND}
    return exc.status == 404 and exc.code not in missing_thing


class CortexTransport:
    """Runs ops against one Cortex job through :class:`CortexRestClient`."""

    def __init__(self, config: ClientConfig, rest: CortexRestClient | None = None) -> None:
        self.config = config
        self.rest = rest or CortexRestClient(config)
        self.ids: JobIds | None = None
        #: Proposed routes this server turned out not to serve (``auto`` route choices).
        self.absent_routes: set[str] = set()
        self._handlers: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
            "fwd-bwd": self._fwd_bwd,
            "fwd-no-grad": self._fwd_no_grad,
            "step": self._step,
            "save-checkpoint": self._save,
            "save-weights": self._save_weights,
            "load-checkpoint": self._load,
            "generate": self._generate,
            "log-probs": self._log_probs,
            "sync-weights": self._sync_weights,
            "reset-prefix-cache": self._reset_prefix_cache,
            "tail-logs": self._tail_logs,
            "cancel-request": self._cancel_request,
        }

    # --- lifecycle -----------------------------------------------------------------------
    def open(self) -> JobIds:
        cfg = self.config
        job_id = cfg.job_id or next(
            filter(None, map(job_of_sub_job, (cfg.training_job_id, cfg.sampling_job_id,
                                               cfg.log_prob_job_id))), None)
        created = False
        if job_id is None:
            plan = plan_job(cfg)
            plan.warn()
            answer = self.rest.create_job(plan.body)
            job_id = answer.get("job_id")
            if not job_id:
                raise ProtocolError(f"create-job answer has no job_id: {answer!r}", route="create_job")
            created = True
        try:
            job = self.rest.wait_running(str(job_id))
        except PollTimeout:
            if created and self.config.cancel_on_shutdown:
                # Nobody will ever hold this job's ids: do not leave it holding GPUs.
                with contextlib.suppress(CortexError):
                    self.rest.cancel_job(str(job_id))
            raise
        self.ids = self._resolve(str(job_id), job, created)
        return self.ids

    def _resolve(self, job_id: str, job: Mapping[str, Any], created: bool) -> JobIds:
        found: dict[str, Mapping[str, Any]] = {}
        for sub in job.get("sub_jobs") or []:
            if isinstance(sub, Mapping):
                found.setdefault(str(sub.get("job_type")), sub)

        def sub_id(job_type: str, fallback: str | None) -> str | None:
            sub = found.get(job_type)
            return str(sub["sub_job_id"]) if sub and sub.get("sub_job_id") else fallback

        sampling = found.get("sampling") or {}
        inference = sampling.get("inference_config") or {}
        return JobIds(
            job_id=job_id,
            training=sub_id("training", self.config.training_job_id),
            sampling=sub_id("sampling", self.config.sampling_job_id),
            log_prob=sub_id("log_probability", self.config.log_prob_job_id),
            created=created,
            sampling_max_seq_len=inference.get("max_seq_len") if isinstance(inference, Mapping) else None,
        )

    def close(self, *, cancel: bool) -> None:
        try:
            if cancel and self.ids is not None:
                self.rest.cancel_job(self.ids.job_id)
        finally:
            self.rest.close()

    def call(self, request: Request) -> dict[str, Any]:
        if request.op in COLOCATION_OPS:
            return {}
        job_id = request.job_id or (self.ids.job_id if self.ids else None)
        if job_id is None:
            raise ProtocolError(f"op {request.op!r} needs a job; open() the transport first")
        return self._handlers[request.op](job_id, dict(request.body))

    # --- ops -------------------------------------------------------------------------------
    def _wait(self, job_id: str, answer: Any, route_name: str) -> Any:
        return self.rest.result(job_id, answer, route_name=route_name)

    def _fwd_bwd(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.rest.forward_backward(job_id, rpc_body(body))
        return shape_train_result(self._wait(job_id, answer, "forward_backward"))

    # --- proposed routes, or today's forward operation (spec §7.1) -----------------------
    def _proposed(self, route_name: str, choice: str, send: Callable[[], Any]) -> Any | None:
        """``send()`` on the proposed route and its result, or None when the forward
        operation is to be used instead: configured so, or (``auto``) the server has no
        such route, learnt once from a 404/405 and kept for this transport."""
        if choice == "operation" or route_name in self.absent_routes:
            return None
        try:
            if choice != "auto":
                return send()
            with self.rest.http.probing(route_name, route_is_absent):
                return send()
        except CortexHTTPError as exc:
            if choice != "auto" or not route_is_absent(exc):
                raise
            log.info("%s: no such route on this server (%s); using the forward operation",
                     route_name, exc.status)
            self.absent_routes.add(route_name)
            return None

    def _forward(self, job_id: str, frame: Any, sub_job_id: str | None) -> Any:
        answer = self.rest.forward_operation(job_id, frame, sub_job_id=sub_job_id)
        return self.rest.operation_result(job_id, "forward", answer)

    def _fwd_no_grad(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        rpc = rpc_body(body)
        result = self._proposed("forward_no_grad", self.config.forward_no_grad_route, lambda: self._wait(
            job_id, self.rest.forward_no_grad(job_id, rpc), "forward_no_grad"))
        if result is None:
            result = self._forward(job_id, rpc, self.ids.training if self.ids else None)
        return shape_train_result(result)

    def _step(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.rest.step(job_id, body.get("learning_rate"))
        return shape_step_result(self._wait(job_id, answer, "step"))

    def _save(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        fields = {k: body.get(k) for k in SAVE_FIELDS}
        answer = self.rest.save(job_id, **fields)
        return dict(self._wait(job_id, answer, "save"))

    def _save_weights(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._save(job_id, {**body, "checkpoint_type": WEIGHTS_ONLY})

    def _load(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.rest.load(job_id, str(body["checkpoint_id"]), body.get("source_job_id"),
                                body.get("target_sub_job_id"))
        return dict(self._wait(job_id, answer, "load"))

    def _generate(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.ids is not None and self.ids.job_id == job_id and not self.ids.sampling:
            # The service refuses generation on a job without a sampling sub-job (spec §1.1).
            raise ConfigError(f"job {job_id} has no sampling sub-job to generate with "
                              "(configure sampling_gpus > 0)")
        limit = (self.ids.sampling_max_seq_len if self.ids else None) or self.config.max_seq_len
        check_prompt_lengths(body.get("prompts"), limit, job_id=job_id)
        frame = {k: body[k] for k in GENERATE_FIELDS if body.get(k) is not None}
        answer = self.rest.generate(job_id, frame)
        return shape_generate_result(self._wait(job_id, answer, "generate"))

    def _log_probs(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        result = self._proposed("log_probs", self.config.log_probs_route, lambda: self._wait(
            job_id, self.rest.log_probs(job_id, list(body.get("prompts") or []),
                                        body.get("completions"), body.get("top_k")), "log_probs"))
        if result is None:
            rows = scoring.score_rows(body)
            target = (self.ids.log_prob or self.ids.training) if self.ids else None
            scored = self._forward(job_id, scoring.forward_frame(rows), target)
            logprobs = logprobs_of(scored) if isinstance(scored, Mapping) else None
            if logprobs is None:
                raise ProtocolError(f"the forward operation answered no logprobs: {scored!r}"[:300],
                                    route="operation", job_id=job_id)
            return {"job_id": job_id, "results": scoring.results_of(rows, logprobs)}
        return dict(result) if isinstance(result, Mapping) else {"result": result}

    def _sync_weights(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "cuda_ipc": bool(body.get("cuda_ipc", False)),
            "low_memory": bool(body.get("low_memory", False)),
        }
        if body.get("weight_format"):
            payload["weight_format"] = body["weight_format"]
        if self.ids and self.ids.training:
            payload["source_sub_job_id"] = self.ids.training
        if self.ids and self.ids.sampling:
            payload["target_sub_job_ids"] = [self.ids.sampling]
        # Like the reference client, name the receiver (the source training sub-job): on a
        # job with several sub-jobs the service refuses an unrouted weight-sync (spec §7.2).
        if self.ids and self.ids.training:
            return self._operation(job_id, "weight-sync", payload, sub_job_id=self.ids.training)
        return self._operation(job_id, "weight-sync", payload, sub_job_type="training")

    def _reset_prefix_cache(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        # Only the payload's own fields: SkyRL's Harbor bridge passes reset_running_requests=,
        # which the operation does not know and a strict server would refuse.
        known = {k: v for k, v in body.items() if k in ResetPrefixCachePayload.model_fields}
        payload = ResetPrefixCachePayload.model_validate(known).model_dump()
        return self._operation(job_id, "reset-prefix-cache", payload, sub_job_type="sampling")

    def _tail_logs(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        payload = {k: body[k] for k in ("cursor", "max_lines") if body.get(k) is not None}
        return self._operation(job_id, "tail-logs", payload)

    def _cancel_request(self, job_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._operation(job_id, "cancel-request", {"request_id": body["request_id"]})

    def _operation(self, job_id: str, operation_type: str, payload: dict[str, Any],
                   **routing: str) -> dict[str, Any]:
        answer = self.rest.operation(job_id, operation_type, payload, **routing)
        return _as_dict(self.rest.operation_result(job_id, operation_type, answer))


def _as_dict(result: Any) -> dict[str, Any]:
    return dict(result) if isinstance(result, Mapping) else {"result": result}
