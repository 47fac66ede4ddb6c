"""Factories: apply the environment override, then build the Cortex client.

``create_arctic_rl_client(config, server_state)`` keeps the two-argument call both
integrations make verbatim, creates (or reattaches to) the jobs at once and returns the
legacy async surface; ``create_client`` returns the synchronous client, which obtains its
job on first use. Neither imports anything on-prem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

from pydantic import BaseModel

from client.config import ClientConfig
from client.env import apply_env_override
from client.errors import ConfigError
from client.legacy import AsyncArcticRLClient
from client.rl import ArcticRLClient
from client.transports.base import Transport


def coerce_config(config: Any) -> ClientConfig:
    """Accept a ``ClientConfig``, a mapping, or another pydantic config (its set fields)."""
    if config is None:
        return ClientConfig()
    if isinstance(config, ClientConfig):
        return config
    if isinstance(config, BaseModel):
        return ClientConfig.model_validate(config.model_dump(exclude_unset=True))
    if isinstance(config, Mapping):
        return ClientConfig.model_validate(dict(config))
    raise ConfigError(f"cannot build a ClientConfig from {type(config).__name__}")


def resolve_config(config: Any) -> ClientConfig:
    """The config after the environment override, checked to be drivable on Cortex."""
    resolved = apply_env_override(coerce_config(config))
    if resolved.backend != "cortex":
        raise ConfigError(
            f"backend={resolved.backend!r} is not provided by this kit: it ships the Cortex "
            "client only (no on-prem Ray/HTTP server). Set backend='cortex', or export "
            "ARCTIC_RL_BACKEND=cortex with CORTEX_BASE_URL or CORTEX_HOST."
        )
    if resolved.service_base() is None:
        raise ConfigError(
            "no Cortex target: set `base_url` (or CORTEX_BASE_URL) or `host` (or CORTEX_HOST)"
        )
    return resolved


def create_client(config: Any = None, server_state: Any = None, *,
                  transport: Transport | None = None) -> ArcticRLClient:
    """The synchronous client; the job is created/reattached on first use or ``start()``."""
    if transport is not None:
        return ArcticRLClient(apply_env_override(coerce_config(config)), transport,
                              server_state=server_state)
    return ArcticRLClient(resolve_config(config), server_state=server_state)


@overload
def create_arctic_rl_client(config: Any = None, server_state: Any = None, *,
                            blocking_calls: Literal[False] = False,
                            transport: Transport | None = None) -> AsyncArcticRLClient: ...
@overload
def create_arctic_rl_client(config: Any = None, server_state: Any = None, *,
                            blocking_calls: Literal[True],
                            transport: Transport | None = None) -> ArcticRLClient: ...
@overload
def create_arctic_rl_client(config: Any = None, server_state: Any = None, *,
                            blocking_calls: bool,
                            transport: Transport | None = None) -> AsyncArcticRLClient | ArcticRLClient: ...


def create_arctic_rl_client(config: Any = None, server_state: Any = None, *,
                            blocking_calls: bool = False,
                            transport: Transport | None = None) -> AsyncArcticRLClient | ArcticRLClient:
    """Legacy entry point: the async surface the integrations call (``blocking_calls=True``:
    the synchronous client, as upstream's unified client offers).

    The jobs are created here, or reattached when the config names them, and ``running``
    before it returns: the integrations read ``reconnect_config()`` at once to hand the ids
    to their workers (the driver pre-init pattern).
    """
    client = create_client(config, server_state, transport=transport)
    try:
        client.start()
    except BaseException:
        client.shutdown()
        raise
    return client if blocking_calls else AsyncArcticRLClient(client)


def make_transport(config: Any = None, server_state: Any = None) -> Transport:
    """The transport a config resolves to (as upstream's unified client offers): Cortex,
    after the environment override; ``server_state`` only exists on-prem and is ignored."""
    from client.transports.cortex import CortexTransport

    return CortexTransport(resolve_config(config))
