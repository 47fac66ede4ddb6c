"""The Cortex Training API contract: routes, models, states, errors, limits, shape rules,
clauses and the DSSST1 codec (``contract.wire``, which loads torch on first use).

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
