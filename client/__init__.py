"""Cortex Training RL client.

Its rooms: ``rl`` (``ArcticRLClient``), ``legacy`` (the async surface SkyRL and verl call)
and ``factory`` over ``transports/`` (``base``: the seam every transport implements); ``rest`` (one method per route);
``calls/`` (one call on the wire: the session and its retry decision, back-off, bounded
reads, uploads, polling); ``config``, ``nested``, ``env``, ``jobspec``, ``lifting``,
``shaping``, ``scoring``, ``logs``, ``errors``, ``exit_guard``.

``from client import create_client, ClientConfig`` costs pydantic and requests only: the
config (both names, ``ClientConfig`` and the integrations' ``ArcticRLClientConfig``, and the
nested parts ``OnPremConfig``/``CortexConfig``/``TrainingConfig``/``SamplingConfig``) and
errors load eagerly, everything else on first attribute access (PEP 562), and
the DSSST1 codec (torch) only when a tensor frame is actually sent or received.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from client import errors
from client.config import ArcticRLClientConfig, ClientConfig
from client.errors import *  # noqa: F403  (the public errors: their one list is errors.__all__)
from client.nested import CortexConfig, OnPremConfig, SamplingConfig, TrainingConfig

if TYPE_CHECKING:  # the lazy names, for type checkers (``X as X``: re-exported)
    from client.env import apply_env_override as apply_env_override
    from client.factory import create_arctic_rl_client as create_arctic_rl_client
    from client.factory import create_client as create_client
    from client.factory import make_transport as make_transport
    from client.jobspec import CortexConfigWarning as CortexConfigWarning
    from client.legacy import AsyncArcticRLClient as AsyncArcticRLClient
    from client.rest import CortexRestClient as CortexRestClient
    from client.rl import ArcticRLClient as ArcticRLClient
    from client.rl import SyncArcticRLClient as SyncArcticRLClient
    from client.transports.base import OPS as OPS
    from client.transports.base import Request as Request
    from client.transports.base import Transport as Transport

_LAZY: dict[str, str] = {
    "create_client": "client.factory",
    "create_arctic_rl_client": "client.factory",
    "make_transport": "client.factory",
    "ArcticRLClient": "client.rl",
    "SyncArcticRLClient": "client.rl",
    "CortexConfigWarning": "client.jobspec",
    "AsyncArcticRLClient": "client.legacy",
    "CortexRestClient": "client.rest",
    "Request": "client.transports.base",
    "OPS": "client.transports.base",
    "Transport": "client.transports.base",
    "apply_env_override": "client.env",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


# The config names (the integrations import them from ``arctic_platform.rl`` /
# ``arctic_platform.client``) are eager: they cost pydantic only.
__all__ = ["ArcticRLClientConfig", "ClientConfig", "CortexConfig", "OnPremConfig",
           "SamplingConfig", "TrainingConfig", *_LAZY]
__all__ += errors.__all__
