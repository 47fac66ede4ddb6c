"""The environment override the factory applies before dispatch (as SkyRL's and verl's integration code expects).

Both integrations hard-code an on-prem backend, so a launcher flips them to Cortex with
``ARCTIC_RL_BACKEND=cortex`` plus ``CORTEX_*`` variables; they never set a client knob
either, so every knob has a variable too (``CORTEX_`` + the field name in capitals, see
:data:`ENV_VARS`). The variables fill the fields a Cortex config did not set: fields set
explicitly win, an on-prem config without the toggle is left alone, and applying the
override twice changes nothing. A value that does not parse is warned about and dropped,
never a crash of the launcher.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from client.config import ClientConfig

log = logging.getLogger(__name__)

TOGGLE_VAR = "ARCTIC_RL_BACKEND"
TOGGLE_VALUE = "cortex"
#: Addressing variables -> config field (their names predate the one rule below).
ENV_FIELDS: dict[str, str] = {
    "CORTEX_BASE_URL": "base_url",
    "CORTEX_HOST": "host",
    "CORTEX_DATABASE": "database",
    "CORTEX_SCHEMA": "schema_name",
    "CORTEX_ENDPOINT": "endpoint",
    "CORTEX_PAT_ENV_VAR": "pat_env_var",
}
#: The client knobs a launcher can set: ``CORTEX_<FIELD>`` each, parsed as the field is.
KNOB_FIELDS: tuple[str, ...] = (
    "max_seq_len", "ca_bundle", "forward_no_grad_route", "log_probs_route",
    "connect_timeout_s", "read_timeout_s", "call_timeout_s", "retries", "backoff_first_s",
    "backoff_factor", "backoff_cap_s", "backoff_jitter", "poll_first_s", "poll_factor",
    "poll_cap_s", "poll_timeout_s", "job_start_timeout_s", "max_chunk_bytes",
    "max_answer_bytes", "max_events", "retry_ambiguous", "supports_idempotency_keys",
    "cancel_on_shutdown", "cancel_on_exit", "max_answer_inflation", "max_result_bytes",
    "max_result_pages",
)
#: Every variable the override reads (besides the toggle) -> its config field.
ENV_VARS: dict[str, str] = {**ENV_FIELDS, **{f"CORTEX_{name.upper()}": name for name in KNOB_FIELDS}}
#: Fields that, on a non-Cortex config, addressed the on-prem server; they must not leak
#: into Cortex addressing when the toggle flips the backend.
_ONPREM_ADDRESSING = ("host", "port")


def apply_env_override(config: ClientConfig, environ: Mapping[str, str] | None = None) -> ClientConfig:
    """``config`` with the environment filled in: flipped to Cortex when
    ``ARCTIC_RL_BACKEND=cortex``, its unset fields taken from ``CORTEX_*`` when it is (or
    becomes) a Cortex config; ``config`` itself when nothing applies."""
    env = os.environ if environ is None else environ
    flip = env.get(TOGGLE_VAR, "").strip().lower() == TOGGLE_VALUE
    if not flip and config.backend != "cortex":
        return config
    data: dict[str, Any] = {name: getattr(config, name) for name in config.model_fields_set}
    explicit = set(config.model_fields_set)
    if config.backend != "cortex":
        # host/port named the on-prem server: not an explicit Cortex target.
        for name in _ONPREM_ADDRESSING:
            explicit.discard(name)
        data.pop("host", None)
    data["backend"] = "cortex"
    filled = {field: value for var, field in ENV_VARS.items()
              if field not in explicit and (value := _parsed(var, field, env.get(var))) is not None}
    if not filled and config.backend == "cortex":
        return config
    return ClientConfig.model_validate({**data, **filled})


def _parsed(var: str, field: str, raw: str | None) -> Any:
    """The value of ``var`` as ``field`` takes it, or None (with a warning) if it does not."""
    if raw is None or field in ENV_FIELDS.values():
        return raw or None  # addressing text: taken as given, checked with the whole config
    try:
        return getattr(ClientConfig.model_validate({field: raw.strip()}), field)
    except ValidationError as exc:
        reason = "; ".join(str(e["msg"]) for e in exc.errors())
    message = f"ignoring {var}={raw!r}: {reason}"
    log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=4)
    return None
