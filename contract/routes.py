"""Every route of both profiles as data: method, path, body kind, sync/async, states needed.

Paths are templates under :func:`prefix`. The fake builds its router from this table, the
client its calls, the OpenAPI document its paths; nothing else spells a path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Literal
from urllib.parse import quote, urlsplit

from pydantic import BaseModel

from contract import models as m
from contract.states import JobState

DEFAULT_ENDPOINT = "cortex-training"
PREFIX_TEMPLATE = "/api/v2/databases/{database}/schemas/{schema}/{endpoint}"

Profile = Literal["current", "proposed"]
BodyKind = Literal["json", "octet", "octet-json", "none"]
CallKind = Literal["sync", "async", "either", "stream"]

OCTET = "application/octet-stream"
JSON = "application/json"

RUNNING = frozenset({JobState.RUNNING})


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    body: BodyKind
    kind: CallKind
    profile: Profile
    summary: str
    needs_states: frozenset[str] = frozenset()
    request_model: type[BaseModel] | None = None
    #: The answer's model (an operation's comes from ``models.OPERATION_ANSWERS``).
    response_model: type[BaseModel] | None = None
    #: The model of the result a poll of this route's request delivers (inside the result
    #: frame for tensor results); None for a route without one (a stream's are events).
    result_model: type[BaseModel] | None = None
    success_status: int = 200
    chunked: bool = False
    query: tuple[str, ...] = field(default=())

    @property
    def content_type(self) -> str | None:
        """The request content type, or None for a bodyless call."""
        if self.body == "none":
            return None
        return JSON if self.body == "json" else OCTET

    def render(self, **params: str) -> str:
        """Fill the path template, percent-encoding each parameter as one whole segment
        (ValueError for one that is not valid UTF-8)."""
        return self.path.format(**{k: segment(str(v), k) for k, v in params.items()})


def segment(value: str, name: str = "path parameter") -> str:
    """``value`` percent-encoded as one path segment: ``/`` and every reserved character are
    encoded, and so are the dots of a ``.`` or ``..`` segment, which URL normalisation (the
    client's HTTP stack or a proxy) would otherwise remove."""
    try:
        quoted = quote(value, safe="")
    except UnicodeEncodeError:
        raise ValueError(f"{name} {value!r} is not valid UTF-8 and cannot be sent in a URL") from None
    if quoted in (".", ".."):
        return quoted.replace(".", "%2E")
    return quoted


def prefix(database: str, schema: str, endpoint: str = DEFAULT_ENDPOINT) -> str:
    """The service prefix every route path is relative to."""
    return PREFIX_TEMPLATE.format(
        database=quote(database, safe=""),
        schema=quote(schema, safe=""),
        endpoint=quote(endpoint, safe=""),
    )


ROUTES: tuple[Route, ...] = (
    Route("create_job", "POST", "/", "json", "sync", "current", "Create a job",
          request_model=m.CreateJobRequest, response_model=m.CreateJobResponse),
    Route("list_jobs", "GET", "/", "none", "sync", "current", "List jobs",
          response_model=m.JobList, query=("status",)),
    Route("get_capacity", "GET", "/capacity", "none", "sync", "current", "Account GPU capacity",
          response_model=m.Capacity),
    Route("get_job", "GET", "/{job_id}", "none", "sync", "current", "Get a job",
          response_model=m.Job),
    Route("cancel_job", "POST", "/{job_id}:cancel", "none", "sync", "current", "Cancel a job",
          response_model=m.CancelJobResponse),
    Route("get_experiment_run", "GET", "/{job_id}/experiment-run", "none", "sync", "current",
          "Experiment and run names of a job", response_model=m.ExperimentRun),
    Route("list_checkpoints", "GET", "/{job_id}/checkpoints", "none", "sync", "current",
          "List a job's checkpoints", response_model=m.CheckpointList),
    Route("export_checkpoint", "POST", "/{job_id}/checkpoints/{checkpoint_id}:export", "none",
          "sync", "current", "Export a checkpoint as downloadable files",
          response_model=m.ExportResponse),
    Route("delete_checkpoint", "DELETE", "/{job_id}/checkpoints/{checkpoint_id}", "none", "sync",
          "current", "Delete a checkpoint", response_model=m.EmptyObject),
    Route("forward_backward", "POST", "/{job_id}/forward-backward", "octet", "async", "current",
          "Forward and backward pass over a DSSST1 batch (always request chunks)",
          needs_states=RUNNING, response_model=m.SubmitResponse, result_model=m.ForwardBackwardResult, chunked=True),
    Route("step", "POST", "/{job_id}/step", "json", "async", "current", "Optimizer step",
          needs_states=RUNNING, request_model=m.StepRequest, response_model=m.SubmitResponse,
          result_model=m.StepResult),
    Route("save", "POST", "/{job_id}/save", "json", "async", "current", "Save a checkpoint",
          needs_states=RUNNING, request_model=m.SaveRequest, response_model=m.SubmitResponse,
          result_model=m.SaveResult),
    Route("load", "POST", "/{job_id}/load", "json", "async", "current", "Load a checkpoint",
          needs_states=RUNNING, request_model=m.LoadRequest, response_model=m.SubmitResponse,
          result_model=m.LoadResult),
    Route("generate", "POST", "/{job_id}/generate", "octet", "async", "current",
          "Generate from prompts (a DSSST1 frame or request chunks)",
          needs_states=RUNNING, response_model=m.SubmitResponse, result_model=m.GenerateResult, chunked=True),
    Route("generate_stream", "POST", "/{job_id}/generate-stream", "octet-json", "stream",
          "current", "Generate with per-prompt streamed events (JSON bytes, not chunked)",
          needs_states=RUNNING, request_model=m.GenerateRequest,
          response_model=m.GenerateStreamSubmitResponse),
    Route("operation", "POST", "/{job_id}/operation", "json", "either", "current",
          "Run an operation (inline result or a request id to poll)",
          needs_states=RUNNING, request_model=m.OperationEnvelope),
    Route("get_request", "GET", "/{job_id}/requests/{request_id}", "none", "sync", "current",
          "Poll an asynchronous request", needs_states=RUNNING,
          response_model=m.RequestStatus, query=("max_events", "cursor")),
    Route("forward_no_grad", "POST", "/{job_id}/forward-no-grad", "octet", "async", "proposed",
          "Forward pass without gradients (DSSST1 request chunks)",
          needs_states=RUNNING, response_model=m.SubmitResponse, result_model=m.ForwardResult, chunked=True),
    Route("log_probs", "POST", "/{job_id}/log-probs", "json", "async", "proposed",
          "Score prompts/completions, DSSST1 result", needs_states=RUNNING,
          request_model=m.LogProbsRequest, response_model=m.SubmitResponse,
          result_model=m.LogProbsResult),
)

ROUTES_BY_NAME: dict[str, Route] = {r.name: r for r in ROUTES}
PROFILES: tuple[Profile, ...] = ("current", "proposed")


def answer_model(route: Route, operation_type: str | None = None) -> type[BaseModel] | None:
    """The model of ``route``'s success answer; an operation's depends on its type."""
    if route.name == "operation":
        return m.OPERATION_ANSWERS.get(operation_type or "")
    return route.response_model


def result_model(route: Route, operation_type: str | None = None) -> type[BaseModel] | None:
    """The model of the result a poll of ``route``'s request delivers."""
    if route.name == "operation":
        return m.OPERATION_RESULTS.get(operation_type or "")
    return route.result_model


def route(name: str) -> Route:
    return ROUTES_BY_NAME[name]


def routes_for(profile: Profile) -> tuple[Route, ...]:
    """Routes a server of ``profile`` serves: proposed includes current."""
    if profile == "proposed":
        return ROUTES
    return tuple(r for r in ROUTES if r.profile == "current")


@cache
def _url_pattern(template: str) -> re.Pattern[str]:
    """``template`` under the service prefix as a regex: a parameter is one encoded segment
    (no ``/``, and no ``:``, which :func:`segment` encodes)."""
    parts = re.split(r"(\{[^}]*\})", PREFIX_TEMPLATE + template)
    return re.compile("".join("[^/:]+" if p.startswith("{") else re.escape(p) for p in parts) + "$")


def route_of(method: str, url: str) -> Route | None:
    """The route a concrete call reached: ``method`` and the path of ``url`` (any host, any
    base path before the service prefix), or None for a path no route has."""
    path = urlsplit(url).path
    return next(
        (r for r in ROUTES if r.method == method.upper() and _url_pattern(r.path).search(path)),
        None,
    )
