"""``ArcticRLClient``: the synchronous RL client over a transport.

It obtains the job lazily (on :meth:`start`, ``with``, or the first op) so that building a
client never costs a GPU job by itself, turns each call into a canonical ``Request`` and
flattens training metrics the same way for every transport.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, ClassVar, overload

from client import exit_guard
from client.config import ClientConfig
from client.errors import ConfigError
from client.shaping import flatten_metrics, with_step_metrics, with_train_metrics
from client.transports.base import JobIds, Request, Transport, given


class _JobIdOf:
    """A job id attribute named like its config field: the open job's id (``JobIds`` field
    ``ids_field``), else the config's reconnect id (or None)."""

    #: Every attribute name given out, in declaration order (they are config fields too).
    names: ClassVar[list[str]] = []

    def __init__(self, ids_field: str) -> None:
        self.ids_field = ids_field

    def __set_name__(self, owner: type, name: str) -> None:
        self.config_field = name
        _JobIdOf.names.append(name)

    @overload
    def __get__(self, client: None, owner: type) -> _JobIdOf: ...
    @overload
    def __get__(self, client: ArcticRLClient, owner: type) -> str | None: ...

    def __get__(self, client: ArcticRLClient | None, owner: type) -> _JobIdOf | str | None:
        if client is None:
            return self
        ids = client.job_ids
        value: str | None = getattr(ids or client.config, self.ids_field if ids else self.config_field)
        return value


def _colocation_method(op: str) -> Callable[..., dict[str, Any]]:
    """The method for one colocation lifecycle op: its keyword arguments are the body."""
    def run(self: ArcticRLClient, **kwargs: Any) -> dict[str, Any]:
        return self.call(op, kwargs)

    run.__name__, run.__qualname__ = op, f"ArcticRLClient.{op}"
    run.__doc__ = f"The ``{op}`` colocation lifecycle op: answered ``{{}}`` on Cortex."
    return run


class ArcticRLClient:
    """Synchronous client: create/reattach a job, run ops, shut down."""

    def __init__(self, config: ClientConfig, transport: Transport | None = None, *,
                 server_state: Any = None) -> None:
        if transport is None and config.backend != "cortex":
            raise ConfigError(
                f"backend={config.backend!r}: this kit provides the Cortex backend only; set "
                "backend='cortex' (or export ARCTIC_RL_BACKEND=cortex) or pass a transport"
            )
        self._config = config
        self._transport = transport
        self._server_state = server_state  # accepted for the legacy signature; unused on Cortex
        self._ids: JobIds | None = None
        self._closed = False
        # The async surface runs calls in worker threads: two first calls must not both
        # create a job.
        self._start_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def transport(self) -> Transport:
        """The transport (a Cortex transport is built on first use)."""
        if self._transport is None:
            from client.transports.cortex import CortexTransport

            self._transport = CortexTransport(self._config)
        return self._transport

    def start(self) -> ArcticRLClient:
        """Create (or reattach to) the job and wait for ``running``; idempotent. A job this
        client created is cancelled at exit if ``shutdown()`` never comes (``exit_guard``)."""
        with self._start_lock:
            if self._closed:
                raise ConfigError("client was shut down")
            if self._ids is None:
                self._ids = self.transport.open()
                if self._ids.created and self._config.cancel_on_exit:
                    transport = self.transport
                    exit_guard.guard(self, self._ids.job_id,
                                     lambda: transport.close(cancel=True))
        return self

    def __enter__(self) -> ArcticRLClient:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Release the transport; cancel the job only if this client created it."""
        if self._closed:
            return
        self._closed = True
        exit_guard.release(self)
        if self._transport is None:
            return
        cancel = bool(self._ids and self._ids.created and self._config.cancel_on_shutdown)
        self._transport.close(cancel=cancel)

    def reconnect_config(self) -> ClientConfig:
        """A config carrying this job's ids, so another process reattaches instead of creating."""
        data = {name: getattr(self._config, name) for name in self._config.model_fields_set}
        if self._ids is not None:  # the open job's ids win over the config's
            data.update({name: getattr(self, name) for name in _JobIdOf.names})
        return ClientConfig.model_validate(data)

    def get_server_state(self) -> Any:
        """The on-prem Ray state actor; Cortex has none, so ``None``."""
        return None

    # --- properties ------------------------------------------------------------------------
    @property
    def config(self) -> ClientConfig:
        return self._config

    @property
    def job_ids(self) -> JobIds | None:
        return self._ids

    job_id = _JobIdOf("job_id")
    training_job_id = _JobIdOf("training")
    sampling_job_id = _JobIdOf("sampling")
    log_prob_job_id = _JobIdOf("log_prob")

    # --- ops ---------------------------------------------------------------------------------
    def call(self, op: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run one canonical op (starting the job first if needed)."""
        self.start()
        return self.transport.call(Request(op, self.job_id, dict(body or {})))

    def fwd_bwd(self, payload: dict[str, Any], processing: dict[str, Any] | None = None,
                **legacy: Any) -> dict[str, Any]:
        """Forward+backward; ``processing`` and the legacy kwargs (post_processors=,
        reference_model=, context=, router_replay=) are folded into the body. The answer's
        ``metrics`` always hold ``loss`` and ``grad_norm`` (``with_train_metrics``)."""
        body = {**payload, **given(processing=processing, **legacy)}
        return flatten_metrics(with_train_metrics(self.call("fwd-bwd", body)))

    def fwd_no_grad(self, payload: dict[str, Any], reference_model: bool = False,
                    **legacy: Any) -> dict[str, Any]:
        body = {**payload, **given(**legacy), "reference_model": bool(reference_model)}
        return flatten_metrics(self.call("fwd-no-grad", body))

    def step(self, learning_rate: float | None = None) -> dict[str, Any]:
        """The optimizer step; its answer always has a ``metrics`` block (``with_step_metrics``)."""
        return flatten_metrics(with_step_metrics(self.call("step", given(learning_rate=learning_rate))))

    def save_checkpoint(self, stage_info: Any = None, path: str | None = None,
                        **kwargs: Any) -> dict[str, Any]:
        return self.call("save-checkpoint", given(stage_info=stage_info, path=path, **kwargs))

    def save_weights(self, **kwargs: Any) -> dict[str, Any]:
        return self.call("save-weights", given(**kwargs))

    def load_checkpoint(self, checkpoint_id: str, source_job_id: str | None = None,
                        target_sub_job_id: str | None = None) -> dict[str, Any]:
        return self.call("load-checkpoint", given(checkpoint_id=checkpoint_id,
                                                  source_job_id=source_job_id,
                                                  target_sub_job_id=target_sub_job_id))

    def generate(self, prompts: list[Any], sampling_params: Any = None,
                 **kwargs: Any) -> list[dict[str, Any]]:
        """One output per prompt, in order: the list the integrations iterate (the whole
        answer, with its ``job_id``, is ``call("generate", ...)``)."""
        answer = self.call("generate", given(prompts=prompts, sampling_params=sampling_params,
                                             **kwargs))
        return list(answer.get("results") or [])

    def log_probs(self, prompts: Any = None, completions: list[Any] | None = None,
                  top_k: int | None = None, **kwargs: Any) -> dict[str, Any]:
        """Score prompts (and completions); a single dict argument is taken as the body."""
        if isinstance(prompts, dict) and completions is None and top_k is None:
            return self.call("log-probs", {**prompts, **given(**kwargs)})
        return self.call("log-probs", given(prompts=prompts, completions=completions,
                                            top_k=top_k, **kwargs))

    def sync_weights(self, cuda_ipc: bool = False, low_memory: bool = False,
                     **kwargs: Any) -> dict[str, Any]:
        """The hints travel; Cortex ignores them."""
        return self.call("sync-weights", {"cuda_ipc": cuda_ipc, "low_memory": low_memory,
                                          **given(**kwargs)})

    def reset_prefix_cache(self, **kwargs: Any) -> dict[str, Any]:
        return self.call("reset-prefix-cache", given(**kwargs))

    def tail_logs(self, cursor: Any = None, max_lines: int | None = None) -> dict[str, Any]:
        return self.call("tail-logs", given(cursor=cursor, max_lines=max_lines))

    def cancel_request(self, request_id: str) -> dict[str, Any]:
        return self.call("cancel-request", {"request_id": request_id})

    def fetch_execution_logs(self, job_id: str | None = None) -> list[dict[str, str]]:
        """Every execution-log file of a job's run (spec §12.2), by default this client's
        job; works after shutdown too, since the logs outlive the job."""
        rest = getattr(self.transport, "rest", None)
        target = job_id or (self._ids.job_id if self._ids else self._config.job_id)
        if rest is None or not target:
            raise ConfigError("fetch_execution_logs needs the Cortex transport and a job id")
        logs: list[dict[str, str]] = rest.fetch_execution_logs(target)
        return logs

    # --- colocation lifecycle: wake/sleep of each role, empty_training_cache, weight_norm
    # (every name of COLOCATION_OPS, one method each; the tests hold the two to each other)
    wake_training = _colocation_method("wake_training")
    wake_inference = _colocation_method("wake_inference")
    wake_log_prob = _colocation_method("wake_log_prob")
    sleep_training = _colocation_method("sleep_training")
    sleep_inference = _colocation_method("sleep_inference")
    sleep_log_prob = _colocation_method("sleep_log_prob")
    empty_training_cache = _colocation_method("empty_training_cache")
    weight_norm = _colocation_method("weight_norm")


#: Upstream's unified client calls its blocking class this; here it is the same class.
SyncArcticRLClient = ArcticRLClient
