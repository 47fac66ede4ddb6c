"""Every route of both profiles as data: one row per route holds every fact about it.

A row says where the route is (method, path template under :func:`prefix`), what it takes
and answers (body kind, models), how it may be repeated (its idempotency, whether it is a
keyed data-plane call, create-job's resend-only-if-unsent rule), what the suite judges of it
beyond schemas (its clauses, the refusals a schema-valid request may still get) and the
examples the OpenAPI document gives it. The fake builds its router from this table, the
client its calls and retry decisions, the OpenAPI document its paths, extensions and
examples; nothing else spells a path or keeps a per-route side table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, get_args
from urllib.parse import quote, urlsplit

from pydantic import BaseModel

from contract import models as m
from contract.example_resources import (
    EXAMPLE_CANCEL_JOB_ID,
    EXAMPLE_CHECKPOINT_ID,
    EXAMPLE_DELETE_CHECKPOINT_ID,
    FIRST_SAVE_IDS,
    ONE_PROMPT,
    SAMPLE_JOB,
)
from contract.idempotency import OPERATION_IDEMPOTENCY, Idempotency
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
class RequestExample:
    """One named example of a JSON request body in the OpenAPI document (tools send it in
    their examples phase and mix it into generated bodies)."""

    name: str
    summary: str
    value: Any = field(hash=False)


@dataclass(frozen=True)
class Route:
    """One route and every fact the kit keeps about it (see the module docstring)."""

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
    #: May a call be resent after an ambiguous failure (spec §3.5)? A *read* or
    #: *idempotent* call may; a *group* call is identified by its chunk group (a chunked
    #: upload is one whatever its route says); an *unsafe* one only under a key.
    idempotency: Idempotency = "unsafe"
    #: A data-plane call: on the proposed profile each POST of it may carry an
    #: ``Idempotency-Key`` (the client sends one, the fake honours it, the document says so).
    data_plane: bool = False
    #: Resent only after a failure that provably never reached the server, keys or not, and
    #: never after an error answer, so a lost answer never makes a second one (CLIENT-RETRY-2).
    resend_only_if_unsent: bool = False
    #: Clause ids judging what the route's schemas cannot express (``x-gs-clauses``).
    clauses: tuple[str, ...] = ()
    #: (status, why): what a schema-valid request may still get (``x-gs-refusals``, and the
    #: statuses schemathesis' positive-data check is told to accept).
    refusals: tuple[tuple[int, str], ...] = ()
    #: A JSON body the service executes on a job with both sub-jobs: the document's
    #: ``executed`` example, and what create-job's links hand the route (sent whole).
    executed_body: Mapping[str, Any] | None = field(default=None, hash=False)
    #: The document's other request body examples.
    examples: tuple[RequestExample, ...] = ()
    #: (path parameter, example id) where the route names an example resource of its own
    #: (cancel ends its own job, delete removes its own checkpoint), so the examples phase's
    #: order does not matter.
    example_ids: tuple[tuple[str, str], ...] = ()

    @property
    def content_type(self) -> str | None:
        """The request content type, or None for a bodyless call."""
        if self.body == "none":
            return None
        return JSON if self.body == "json" else OCTET

    def call_idempotency(self, *, operation_type: str | None = None, chunked: bool = False) -> Idempotency:
        """The idempotency of one call: the route's, refined by operation type or chunking."""
        if chunked:
            return "group"
        if self.name == "operation" and operation_type is not None:
            return OPERATION_IDEMPOTENCY.get(operation_type, "unsafe")
        return self.idempotency

    @property
    def keyed(self) -> bool:
        """Does a call of this route carry an ``Idempotency-Key`` (proposed profile)?"""
        return self.data_plane and self.method == "POST"

    def render(self, **params: str) -> str:
        """Fill the path template, percent-encoding each parameter as one whole segment
        (ValueError for one that is not valid UTF-8)."""
        return self.path.format(**{k: segment(str(v), k) for k, v in params.items()})

    def match(self, url: str) -> dict[str, str] | None:
        """The path parameters (``job_id``, ...) of a call of this route at ``url`` (any host,
        any base path before the service prefix, any query), or None when ``url`` is not
        this route's path. The method is the caller's to compare."""
        found = _PREFIX.search(urlsplit(url).path)
        return self.match_rest(found.string[found.end():]) if found else None

    def match_rest(self, rest: str) -> dict[str, str] | None:
        """:meth:`match` for the part of a path after the service prefix."""
        found = _template_regex(self.path).fullmatch(rest)
        return found.groupdict() if found else None


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


_FRAME = "bytes that are not a DSSST1 frame (or request chunk) of a batch the job can take"
_TRAINING = "a job without a training sub-job"

ROUTES: tuple[Route, ...] = (
    Route("create_job", "POST", "/", "json", "sync", "current", "Create a job",
          request_model=m.CreateJobRequest, response_model=m.CreateJobResponse,
          resend_only_if_unsent=True,
          clauses=("CAP-QUEUE-1", "JOB-SUBJOB-1", "JOB-MODEL-2", "ERR-NOSTATE-1"),
          refusals=((400, "a source_checkpoint_info naming a job or checkpoint the caller does not have"),),
          examples=(RequestExample("sample_job", "One training and one sampling sub-job of the smallest model",
                                   SAMPLE_JOB),)),
    Route("list_jobs", "GET", "/", "none", "sync", "current", "List jobs",
          response_model=m.JobList, query=("status",), idempotency="read",
          clauses=("JOB-LIST-2", "AUTH-ISOLATION-1")),
    Route("get_capacity", "GET", "/capacity", "none", "sync", "current", "Account GPU capacity",
          response_model=m.Capacity, idempotency="read", clauses=("CAP-COUNT-1",)),
    Route("get_job", "GET", "/{job_id}", "none", "sync", "current", "Get a job",
          response_model=m.Job, idempotency="read",
          clauses=("JOB-GET-1", "JOB-STATE-1", "JOB-STATE-2", "JOB-STATE-3", "AUTH-ISOLATION-1")),
    Route("cancel_job", "POST", "/{job_id}:cancel", "none", "sync", "current", "Cancel a job",
          response_model=m.CancelJobResponse, idempotency="idempotent",
          clauses=("CANCEL-ACTIVE-1", "CANCEL-IDEM-1", "CANCEL-CONFLICT-1", "CANCEL-FREE-1"),
          example_ids=(("job_id", EXAMPLE_CANCEL_JOB_ID),)),
    Route("get_experiment_run", "GET", "/{job_id}/experiment-run", "none", "sync", "current",
          "Experiment and run names of a job", response_model=m.ExperimentRun, idempotency="read",
          clauses=("AUTH-ISOLATION-1",)),
    Route("list_checkpoints", "GET", "/{job_id}/checkpoints", "none", "sync", "current",
          "List a job's checkpoints", response_model=m.CheckpointList, idempotency="read",
          clauses=("CKPT-LIST-2",)),
    Route("export_checkpoint", "POST", "/{job_id}/checkpoints/{checkpoint_id}:export", "none",
          "sync", "current", "Export a checkpoint as downloadable files",
          response_model=m.ExportResponse, idempotency="idempotent",
          clauses=("CKPT-DELETE-2", "CKPT-EXPORT-2", "CKPT-PATH-1")),
    Route("delete_checkpoint", "DELETE", "/{job_id}/checkpoints/{checkpoint_id}", "none", "sync",
          "current", "Delete a checkpoint", response_model=m.EmptyObject, idempotency="idempotent",
          clauses=("CKPT-DELETE-1", "CKPT-DELETE-2"),
          example_ids=(("checkpoint_id", EXAMPLE_DELETE_CHECKPOINT_ID),)),
    Route("forward_backward", "POST", "/{job_id}/forward-backward", "octet", "async", "current",
          "Forward and backward pass over a DSSST1 batch (always request chunks)",
          needs_states=RUNNING, response_model=m.SubmitResponse, result_model=m.ForwardBackwardResult,
          chunked=True, idempotency="group", data_plane=True,
          clauses=("JOB-RUNNING-1", "WIRE-FORMAT-1", "WIRE-MALFORMED-1", "WIRE-PICKLE-1",
                   "CHUNK-FORMAT-1", "CHUNK-VERIFY-1", "CHUNK-DESC-2", "CG-RESTART-1",
                   "CG-CONFLICT-1", "CG-MISSING-1", "CG-IDEM-1", "FB-NOINPUT-1",
                   "LIMIT-FRAME-1", "LIMIT-GROUPS-1"),
          refusals=((400, f"{_FRAME}; {_TRAINING}"),)),
    Route("step", "POST", "/{job_id}/step", "json", "async", "current", "Optimizer step",
          needs_states=RUNNING, request_model=m.StepRequest, response_model=m.SubmitResponse,
          result_model=m.StepResult, data_plane=True,
          clauses=("JOB-RUNNING-1", "STEP-COUNT-1", "REQ-ORDER-1"),
          refusals=((400, _TRAINING),), executed_body={}),
    Route("save", "POST", "/{job_id}/save", "json", "async", "current", "Save a checkpoint",
          needs_states=RUNNING, request_model=m.SaveRequest, response_model=m.SubmitResponse,
          result_model=m.SaveResult, data_plane=True, clauses=("JOB-RUNNING-1", "SAVE-ID-1"),
          refusals=((400, _TRAINING),), executed_body={}),
    Route("load", "POST", "/{job_id}/load", "json", "async", "current", "Load a checkpoint",
          needs_states=RUNNING, request_model=m.LoadRequest, response_model=m.SubmitResponse,
          result_model=m.LoadResult, data_plane=True,
          clauses=("JOB-RUNNING-1", "SAVE-LOAD-2", "SAVE-LOAD-3", "SAVE-LOAD-4"),
          refusals=((400, f"a target_sub_job_id that is not a sub-job of this job; {_TRAINING}"),
                    (501, "a sampling target_sub_job_id (not implemented)")),
          examples=(RequestExample("example_checkpoint",
                                   "The example job's own checkpoint, into its training sub-job",
                                   {"checkpoint_id": EXAMPLE_CHECKPOINT_ID}),
                    *(RequestExample(f"first_save_{dialect}",
                                     f"The checkpoint a first save names ({dialect} dialect)",
                                     {"checkpoint_id": ckpt})
                      for dialect, ckpt in zip(("kit", "spec"), FIRST_SAVE_IDS, strict=True)))),
    Route("generate", "POST", "/{job_id}/generate", "octet", "async", "current",
          "Generate from prompts (a DSSST1 frame or request chunks)",
          needs_states=RUNNING, response_model=m.SubmitResponse, result_model=m.GenerateResult,
          chunked=True, data_plane=True,
          clauses=("JOB-RUNNING-1", "WIRE-MALFORMED-1", "CHUNK-PLAIN-1", "GEN-ALIGN-1",
                   "GEN-TOOLONG-1", "LIMIT-FRAME-1"),
          refusals=((400, f"{_FRAME}; lists not aligned with prompts; a token prompt not shorter "
                          "than max_seq_len"),)),
    Route("generate_stream", "POST", "/{job_id}/generate-stream", "octet-json", "stream",
          "current", "Generate with per-prompt streamed events (JSON bytes, not chunked)",
          needs_states=RUNNING, request_model=m.GenerateRequest,
          response_model=m.GenerateStreamSubmitResponse, data_plane=True,
          clauses=("JOB-RUNNING-1", "GEN-ALIGN-1", "GEN-TOOLONG-1", "GENS-DRAIN-1"),
          refusals=((400, "sampling_params or routing_key lists not aligned with prompts; "
                          "a token prompt not shorter than the sampler's max_seq_len"),),
          executed_body=ONE_PROMPT),
    Route("operation", "POST", "/{job_id}/operation", "json", "either", "current",
          "Run an operation (inline result or a request id to poll)",
          needs_states=RUNNING, request_model=m.OperationEnvelope, data_plane=True,
          clauses=("OP-ROUTE-1", "OP-ROUTE-3", "OP-FORWARD-1", "OP-LOGS-1", "OP-CANCEL-1"),
          refusals=((400, "a sub_job_id not of this job or hints that disagree; a forward payload that "
                          "is not a DSSST1 frame; a tail-logs cursor the server did not issue"),),
          examples=(RequestExample("tail_logs", "The training sub-job's log lines (answered inline)",
                                   {"operation_type": "tail-logs", "payload": {}}),)),
    Route("get_request", "GET", "/{job_id}/requests/{request_id}", "none", "sync", "current",
          "Poll an asynchronous request", needs_states=RUNNING,
          response_model=m.RequestStatus, query=("max_events", "cursor"), idempotency="read",
          clauses=("REQ-UNKNOWN-1", "POLL-TERMINAL-1", "POLL-CURSOR-1", "POLL-MAXEV-2", "POLL-EXPIRE-1"),
          refusals=((400, "a cursor the server did not issue"),
                    (410, "a result the server freed once read to the end (POLL-EXPIRE-1)"))),
    Route("forward_no_grad", "POST", "/{job_id}/forward-no-grad", "octet", "async", "proposed",
          "Forward pass without gradients (DSSST1 request chunks)",
          needs_states=RUNNING, response_model=m.SubmitResponse, result_model=m.ForwardResult,
          chunked=True, idempotency="group", data_plane=True,
          clauses=("JOB-RUNNING-1", "WIRE-MALFORMED-1", "CHUNK-FORMAT-1", "CG-RESTART-1",
                   "PROP-FNG-1", "LIMIT-FRAME-1"),
          refusals=((400, _FRAME),)),
    Route("log_probs", "POST", "/{job_id}/log-probs", "json", "async", "proposed",
          "Score prompts/completions, DSSST1 result", needs_states=RUNNING,
          request_model=m.LogProbsRequest, response_model=m.SubmitResponse,
          result_model=m.LogProbsResult, data_plane=True, clauses=("JOB-RUNNING-1", "PROP-LOGPROBS-1"),
          refusals=((400, "completions not aligned with prompts"),),
          executed_body={"prompts": ["Hello"]}),
)

ROUTES_BY_NAME: dict[str, Route] = {r.name: r for r in ROUTES}
#: The route profiles (``--profile`` of the fake and of ``python -m contract openapi``): today's
#: surface, or today's plus the seed's additions (the default: everything).
PROFILES: tuple[Profile, ...] = get_args(Profile)
DEFAULT_PROFILE: Profile = "proposed"


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


# --- matching a concrete URL ------------------------------------------------------------------


@cache
def _template_regex(template: str, one_segment: str = "[^/:]+") -> re.Pattern[str]:
    """A path template as a regex, each ``{name}`` captured under its name as one encoded
    segment (no ``/``, and for a route's own parameters no ``:``, which :func:`segment`
    encodes: ``/{job_id}:cancel``)."""
    parts = re.split(r"(\{[^}]*\})", template)
    return re.compile("".join(f"(?P<{p[1:-1]}>{one_segment})" if p.startswith("{") else re.escape(p)
                              for p in parts))


#: The service prefix: its names are the caller's (a database may hold a ``:``).
_PREFIX = _template_regex(PREFIX_TEMPLATE, "[^/]+")


def split_path(path: str) -> tuple[str, str] | None:
    """``(prefix, rest)`` for a path that starts with the service prefix (``rest`` ``/`` when
    empty), else None."""
    found = _PREFIX.match(path)
    if found is None:
        return None
    return path[: found.end()], path[found.end():] or "/"


def route_of(method: str, url: str) -> Route | None:
    """The route a concrete call reached: ``method`` and the path of ``url`` (any host, any
    base path before the service prefix), or None for a path no route has. Routes are
    tried in table order (``/capacity`` before ``/{job_id}``)."""
    return next((r for r in ROUTES if r.method == method.upper() and r.match(url) is not None), None)


def route_of_rest(method: str, rest: str) -> Route | None:
    """:func:`route_of` for the part of a path after the service prefix."""
    return next((r for r in ROUTES if r.method == method.upper() and r.match_rest(rest) is not None), None)
