"""Cortex Training RL client.

``from client import create_client, ClientConfig`` costs pydantic and requests only: the
config and errors load eagerly, everything else on first attribute access (PEP 562), and
the DSSST1 codec (torch) only when a tensor frame is actually sent or received.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from client.config import ClientConfig
from client.errors import (
    AmbiguousOutcome,
    ChunkGroupConflict,
    ChunkGroupError,
    ChunkGroupMissingChunks,
    ChunkGroupRestartRequired,
    ConfigError,
    CortexConnectionError,
    CortexError,
    CortexHTTPError,
    DeadlineExceeded,
    JobFailed,
    PayloadTooLarge,
    PollTimeout,
    PromptTooLong,
    ProtocolError,
    RequestCancelled,
    RequestFailed,
)

if TYPE_CHECKING:
    from client.factory import create_arctic_rl_client, create_client
    from client.legacy import AsyncArcticRLClient
    from client.rest import CortexRestClient
    from client.rl import ArcticRLClient
    from client.transport import OPS, Request

_LAZY: dict[str, str] = {
    "create_client": "client.factory",
    "create_arctic_rl_client": "client.factory",
    "ArcticRLClient": "client.rl",
    "AsyncArcticRLClient": "client.legacy",
    "CortexRestClient": "client.rest",
    "Request": "client.transport",
    "OPS": "client.transport",
    "apply_env_override": "client.env",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AmbiguousOutcome",
    "OPS",
    "ArcticRLClient",
    "AsyncArcticRLClient",
    "ChunkGroupConflict",
    "ChunkGroupError",
    "ChunkGroupMissingChunks",
    "ChunkGroupRestartRequired",
    "ClientConfig",
    "ConfigError",
    "CortexConnectionError",
    "CortexError",
    "CortexHTTPError",
    "CortexRestClient",
    "DeadlineExceeded",
    "JobFailed",
    "PayloadTooLarge",
    "PollTimeout",
    "PromptTooLong",
    "ProtocolError",
    "Request",
    "RequestCancelled",
    "RequestFailed",
    "apply_env_override",
    "create_arctic_rl_client",
    "create_client",
]
