"""The legacy async surface SkyRL's and verl's integration code calls, over the sync client.

Each coroutine runs the synchronous call in a worker thread (``asyncio.to_thread``) so a
long poll never blocks the integration's event loop. ``reconnect_config``,
``get_server_state`` and ``shutdown`` run synchronously, as the seed's callers call them;
``shutdown``'s answer may also be awaited, as verl does.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Concatenate, ParamSpec, TypeVar

from client.config import ClientConfig
from client.rl import ArcticRLClient
from client.transports.base import Transport

T = TypeVar("T")
P = ParamSpec("P")


class _Done:
    """An already finished awaitable: what the synchronous ``shutdown`` hands back."""

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # makes this a generator, finished at once

    def __repr__(self) -> str:
        return "<shutdown done>"


def _in_worker_thread(
    method: Callable[Concatenate[ArcticRLClient, P], T],
) -> Callable[Concatenate[AsyncArcticRLClient, P], Coroutine[Any, Any, T]]:
    """The coroutine for sync ``method``: the call (looked up by name on the wrapped
    client) runs in a worker thread."""
    name = method.__name__

    @functools.wraps(method)
    async def run(self: AsyncArcticRLClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await self._run(getattr(self._client, name), *args, **kwargs)
        return result

    run.__qualname__ = f"AsyncArcticRLClient.{name}"
    return run


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

    def shutdown(self) -> _Done:
        """Shut down now; the answer may be awaited too (verl does ``await
        client.shutdown()``, the seed's callers call it plainly: both work)."""
        self._client.shutdown()
        return _Done()

    async def aclose(self) -> None:
        await self._run(self._client.shutdown)

    async def __aenter__(self) -> AsyncArcticRLClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def transport(self) -> Transport:
        """The transport (verl looks for ``get_server_state`` on it; Cortex's has none)."""
        return self._client.transport

    # --- async ops ---------------------------------------------------------------------------
    async def start(self) -> AsyncArcticRLClient:
        await self._run(self._client.start)
        return self

    # --- async ops: the ArcticRLClient method of each name, same signature, as a coroutine
    fwd_bwd = _in_worker_thread(ArcticRLClient.fwd_bwd)
    fwd_no_grad = _in_worker_thread(ArcticRLClient.fwd_no_grad)
    step = _in_worker_thread(ArcticRLClient.step)
    save_checkpoint = _in_worker_thread(ArcticRLClient.save_checkpoint)
    save_weights = _in_worker_thread(ArcticRLClient.save_weights)
    load_checkpoint = _in_worker_thread(ArcticRLClient.load_checkpoint)
    generate = _in_worker_thread(ArcticRLClient.generate)
    log_probs = _in_worker_thread(ArcticRLClient.log_probs)
    sync_weights = _in_worker_thread(ArcticRLClient.sync_weights)
    reset_prefix_cache = _in_worker_thread(ArcticRLClient.reset_prefix_cache)
    tail_logs = _in_worker_thread(ArcticRLClient.tail_logs)
    cancel_request = _in_worker_thread(ArcticRLClient.cancel_request)
    # the colocation lifecycle (COLOCATION_OPS)
    wake_training = _in_worker_thread(ArcticRLClient.wake_training)
    wake_inference = _in_worker_thread(ArcticRLClient.wake_inference)
    wake_log_prob = _in_worker_thread(ArcticRLClient.wake_log_prob)
    sleep_training = _in_worker_thread(ArcticRLClient.sleep_training)
    sleep_inference = _in_worker_thread(ArcticRLClient.sleep_inference)
    sleep_log_prob = _in_worker_thread(ArcticRLClient.sleep_log_prob)
    empty_training_cache = _in_worker_thread(ArcticRLClient.empty_training_cache)
    weight_norm = _in_worker_thread(ArcticRLClient.weight_norm)
