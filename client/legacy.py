"""The legacy async surface SkyRL and verl call (facts, section 12), over the sync client.

Each coroutine runs the synchronous call in a worker thread (``asyncio.to_thread``) so a
long poll never blocks the integration's event loop. ``reconnect_config``,
``get_server_state`` and ``shutdown`` stay synchronous, as the integrations call them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from client.config import ClientConfig
from client.rl import ArcticRLClient

T = TypeVar("T")


class AsyncArcticRLClient:
    """What ``create_arctic_rl_client`` returns: every legacy method and kwarg."""

    def __init__(self, client: ArcticRLClient) -> None:
        self._client = client

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    @property
    def sync(self) -> ArcticRLClient:
        """The synchronous client underneath."""
        return self._client

    # --- properties the integrations read -------------------------------------------------
    @property
    def config(self) -> ClientConfig:
        return self._client.config

    @property
    def training_job_id(self) -> str | None:
        return self._client.training_job_id

    @property
    def sampling_job_id(self) -> str | None:
        return self._client.sampling_job_id

    @property
    def log_prob_job_id(self) -> str | None:
        return self._client.log_prob_job_id

    # --- sync helpers ----------------------------------------------------------------------
    def reconnect_config(self) -> ClientConfig:
        return self._client.reconnect_config()

    def get_server_state(self) -> Any:
        return self._client.get_server_state()

    def shutdown(self) -> None:
        self._client.shutdown()

    # --- async ops ---------------------------------------------------------------------------
    async def start(self) -> AsyncArcticRLClient:
        await self._run(self._client.start)
        return self

    async def fwd_bwd(self, payload: dict[str, Any], **legacy: Any) -> dict[str, Any]:
        return await self._run(self._client.fwd_bwd, payload, **legacy)

    async def fwd_no_grad(self, payload: dict[str, Any], reference_model: bool = False,
                          **legacy: Any) -> dict[str, Any]:
        return await self._run(self._client.fwd_no_grad, payload, reference_model, **legacy)

    async def step(self, learning_rate: float | None = None) -> dict[str, Any]:
        return await self._run(self._client.step, learning_rate)

    async def save_checkpoint(self, stage_info: Any = None, path: str | None = None,
                              **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.save_checkpoint, stage_info, path, **kwargs)

    async def save_weights(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.save_weights, **kwargs)

    async def load_checkpoint(self, checkpoint_id: str, source_job_id: str | None = None,
                              target_sub_job_id: str | None = None) -> dict[str, Any]:
        return await self._run(self._client.load_checkpoint, checkpoint_id, source_job_id,
                               target_sub_job_id)

    async def generate(self, prompts: list[Any], sampling_params: Any = None,
                       **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.generate, prompts, sampling_params, **kwargs)

    async def log_probs(self, prompts: Any = None, completions: list[Any] | None = None,
                        top_k: int | None = None, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.log_probs, prompts, completions, top_k, **kwargs)

    async def sync_weights(self, cuda_ipc: bool = False, low_memory: bool = False,
                           **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.sync_weights, cuda_ipc, low_memory, **kwargs)

    async def reset_prefix_cache(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.reset_prefix_cache, **kwargs)

    async def tail_logs(self, cursor: Any = None, max_lines: int | None = None) -> dict[str, Any]:
        return await self._run(self._client.tail_logs, cursor, max_lines)

    async def cancel_request(self, request_id: str) -> dict[str, Any]:
        return await self._run(self._client.cancel_request, request_id)

    async def wake_training(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.wake_training, **kwargs)

    async def sleep_training(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.sleep_training, **kwargs)

    async def wake_inference(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.wake_inference, **kwargs)

    async def sleep_inference(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.sleep_inference, **kwargs)

    async def wake_log_prob(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.wake_log_prob, **kwargs)

    async def sleep_log_prob(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.sleep_log_prob, **kwargs)

    async def empty_training_cache(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.empty_training_cache, **kwargs)

    async def weight_norm(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self._client.weight_norm, **kwargs)
