"""The Cortex Training API contract: routes, models, states, errors, limits, shape rules,
clauses and the DSSST1 codec (``contract.wire``, which loads torch on first use).

Its rooms: ``routes`` (one row per route: every per-route fact), ``models/`` (request and
answer bodies), ``states``, ``errors``, ``limits``, ``forms`` (the answer forms the spec
allows), ``idempotency``, ``jobrules``, ``shapes``, ``ids``, ``auth``, ``logs``,
``redact``; ``clauses/`` (every checkable promise, by area) and ``specification/`` (the
published spec's sections and rules, and which clauses judge them); ``openapi/`` (the
generated document) with ``example_resources``; ``tape/`` (the parity recording format);
``wire/`` (the DSSST1 codec and request chunks). It imports none of the kit's other packages.

Importing this package pulls pydantic only: no torch, no server, no HTTP client.
"""

from contract.errors import ErrorCode, error_body, find_error_code
from contract.routes import ROUTES, Route, prefix, route
from contract.states import JobState, RequestState, normalize_job_state, normalize_request_state

__all__ = [
    "ROUTES",
    "ErrorCode",
    "JobState",
    "RequestState",
    "Route",
    "error_body",
    "find_error_code",
    "normalize_job_state",
    "normalize_request_state",
    "prefix",
    "route",
]
