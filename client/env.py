"""The environment override the factory applies before dispatch (facts, section 12).

Both integrations hard-code ``backend="local"``, so a launcher flips them to Cortex with
``ARCTIC_RL_BACKEND=cortex`` plus ``CORTEX_*`` variables. Fields the caller set explicitly
win; applying the override twice changes nothing.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any

from client.config import ClientConfig

log = logging.getLogger(__name__)

TOGGLE_VAR = "ARCTIC_RL_BACKEND"
TOGGLE_VALUE = "cortex"
MAX_SEQ_LEN_VAR = "CORTEX_MAX_SEQ_LEN"
#: Environment variable -> config field (string-valued; CORTEX_MAX_SEQ_LEN is parsed apart).
ENV_FIELDS: dict[str, str] = {
    "CORTEX_BASE_URL": "base_url",
    "CORTEX_HOST": "host",
    "CORTEX_DATABASE": "database",
    "CORTEX_SCHEMA": "schema_name",
    "CORTEX_ENDPOINT": "endpoint",
    "CORTEX_PAT_ENV_VAR": "pat_env_var",
}
#: Reader bounds (issue 23): numbers; one that does not parse is warned about and ignored.
BOUND_FIELDS: dict[str, str] = {
    "CORTEX_MAX_ANSWER_INFLATION": "max_answer_inflation",
    "CORTEX_MAX_RESULT_BYTES": "max_result_bytes",
    "CORTEX_MAX_RESULT_PAGES": "max_result_pages",
}
#: Fields that, on a non-Cortex config, addressed the on-prem server; they must not leak
#: into Cortex addressing when the toggle flips the backend.
_ONPREM_ADDRESSING = ("host", "port")


def apply_env_override(config: ClientConfig, environ: Mapping[str, str] | None = None) -> ClientConfig:
    """Return ``config`` rewritten for Cortex when ``ARCTIC_RL_BACKEND=cortex``, else as is."""
    env = os.environ if environ is None else environ
    if env.get(TOGGLE_VAR, "").strip().lower() != TOGGLE_VALUE:
        return config
    data: dict[str, Any] = {name: getattr(config, name) for name in config.model_fields_set}
    explicit = set(config.model_fields_set)
    if config.backend != "cortex":
        # host/port named the on-prem server: not an explicit Cortex target.
        for name in _ONPREM_ADDRESSING:
            explicit.discard(name)
        data.pop("host", None)
    data["backend"] = "cortex"
    for var, field in ENV_FIELDS.items():
        value = env.get(var)
        if value and field not in explicit:
            data[field] = value
    for var, field in BOUND_FIELDS.items():
        if var in env and field not in explicit:
            number = _parse_number(var, env[var], int if field != "max_answer_inflation" else float)
            if number is not None:
                data[field] = number
    if MAX_SEQ_LEN_VAR in env and "max_seq_len" not in explicit:
        parsed = _parse_max_seq_len(env[MAX_SEQ_LEN_VAR])
        if parsed is not None:
            data["max_seq_len"] = parsed
    return ClientConfig.model_validate(data)


def _parse_max_seq_len(raw: str) -> int | None:
    """A positive int, or None with a warning: a typo in a launcher must not crash a run."""
    found = _parse_number(MAX_SEQ_LEN_VAR, raw, int)
    return None if found is None else int(found)


def _parse_number(var: str, raw: str, kind: type[int] | type[float]) -> int | float | None:
    """A positive ``kind``, or None with a warning: a typo in a launcher must not crash a run."""
    try:
        value = kind(raw.strip())
    except ValueError:
        value = 0
    if value > 0:
        return value
    message = f"ignoring {var}={raw!r}: not a positive {'integer' if kind is int else 'number'}"
    log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
    return None
