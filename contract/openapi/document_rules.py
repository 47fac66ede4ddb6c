"""What the OpenAPI document says beyond schemas: links, and the rules schemas cannot state.

* Links let a generic tool walk a job's life from the document alone: create-job yields
  the ``job_id`` of every job-scoped operation that needs nothing else, each submit the
  ``request_id`` of a poll (and of a cancel-request operation), save the job's checkpoint
  list, and that list the ``checkpoint_id`` of load, export and delete. A poll links to the list
  too (a done save has left a checkpoint there); not to the checkpoint itself, since only
  a save's result holds one and a link that cannot resolve fails schemathesis' run.
* ``x-gs-clauses`` lists, per operation, the clause ids judging rules JSON Schema cannot
  express (state, cross-field arithmetic, DSSST1 frame contents, ...): each route's
  ``clauses`` field.
* ``x-gs-refusals``: the statuses those rules give a schema-valid request (each route's
  ``refusals`` field). The generated schemathesis config (``contract/schemathesis.toml``)
  tells schemathesis' positive-data check to expect exactly these, operation by operation,
  and nothing more.
* The resources the document's examples name live in ``contract.example_resources``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from contract.example_resources import SAMPLE_JOB
from contract.idempotency import IDEMPOTENCY_KEY_HEADER
from contract.logs import STATEMENTS_ROUTE, stage_credentials_statement
from contract.routes import DEFAULT_PROFILE, ROUTES, ROUTES_BY_NAME, Route

#: Calls per stateful scenario: a job's life is create, save, poll, then load/export/delete.
STATEFUL_MAX_STEPS = 60
#: The statuses schemathesis' positive-data check accepts by default (4.x).
ST_DEFAULT_EXPECTED = ("2xx", "3xx", "401", "403", "404", "409", "429", "5xx")
#: The statuses schemathesis' negative-data check accepts by default (4.x).
ST_DEFAULT_REJECTED = ("400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx")
#: A call on a job in the wrong state may be refused 412 instead of 409 (spec §3.6): whatever
#: the data, a job-scoped operation may answer it, as it may answer 409.
PRECONDITION = "412"
_PREFIX_PARAMS = ("database", "schema", "endpoint")
_SUBMITS = tuple(r.name for r in ROUTES if r.kind in ("async", "stream", "either"))
_CHECKPOINT_USERS = ("export_checkpoint", "delete_checkpoint", "load")
#: Submits whose answer links to a cancel-request operation: two JSON ones a walk reaches
#: often. A link from every submit would be seven more rules for a stateful tool to draw
#: from at each step, thinning the chances of the long create -> save -> poll -> checkpoint
#: chain without reaching anything new.
_CANCELLED = ("step", "log_probs")
#: Job-scoped operations create-job does not link to: each needs a second id (checkpoint,
#: request) that only the call which made it can hand over (save, a submit, a poll). From
#: create-job a tool could only invent that id: wasted calls, and for load and operation
#: (whose id travels in the body) a 404 naming it that schemathesis takes for the job just
#: created having vanished (its ST302). Cancel follows delete-checkpoint instead (see ``links``).
_NOT_FROM_CREATE = frozenset({"load", "operation", "get_request", "export_checkpoint",
                              "delete_checkpoint", "cancel_job"})


def body_required(model: type[BaseModel]) -> bool:
    """Whether a JSON body must be sent: the service reads an absent one as ``{}``, so only a
    model with a required field (create-job, load, ...) needs one (step and save do not)."""
    return bool(model.model_json_schema().get("required"))


#: JSON data-plane routes create-job hands a body the service executes (each route's
#: ``executed_body``; merge_body false: sent whole), so a walk reaches their success answer
#: instead of spending the step on a generated body; the fuzzing phases still send generated ones.
LINK_BODIES: dict[str, Any] = {r.name: r.executed_body for r in ROUTES if r.executed_body is not None}


def _same_prefix() -> dict[str, str]:
    return {p: f"$request.path.{p}" for p in _PREFIX_PARAMS}


def _keyed(target: str, parameters: dict[str, str], *source_ids: str) -> dict[str, str]:
    """``parameters`` plus, for a data-plane POST, its own ``Idempotency-Key``: one per
    source answer and target (``source_ids``, expressions, name the answer), as a client
    gives one key per logical call. A generated key would often repeat one another route already used
    (hypothesis favours short strings), and the service answers that 409 (IDEM-KEY-3)."""
    if not ROUTES_BY_NAME[target].keyed:
        return parameters
    key = "-".join(f"{{{expression}}}" for expression in source_ids)
    return {**parameters, f"header.{IDEMPOTENCY_KEY_HEADER}": f"{key}-{target}"}


def _to_checkpoint(target: str, expression: str) -> dict[str, Any]:
    """A link handing a checkpoint id to load (in its body) or export/delete (in the path)."""
    same_job = {**_same_prefix(), "job_id": "$request.path.job_id"}
    link: dict[str, Any] = {"operationId": target, "parameters": same_job}
    if target == "load":
        # The checkpoint of this very job, into its training sub-job (spec §6.4), whole.
        link["parameters"] = _keyed(target, same_job, "$request.path.job_id", expression)
        link["requestBody"] = {"checkpoint_id": expression, "source_job_id": "$request.path.job_id",
                               "target_sub_job_id": None}
        link["x-schemathesis"] = {"merge_body": False}
    else:
        link["parameters"]["checkpoint_id"] = expression
    return link


def _from_create(target: str) -> dict[str, Any]:
    """create-job -> ``target``: the new job's id, a key of its own, and a body it executes."""
    job = "$response.body#/job_id"
    link: dict[str, Any] = {"operationId": target,
                            "parameters": _keyed(target, {**_same_prefix(), "job_id": job}, job)}
    if target in LINK_BODIES:
        link["requestBody"] = LINK_BODIES[target]
        link["x-schemathesis"] = {"merge_body": False}
    return link


def links(route: Route, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
    """The links of ``route``'s success answer (empty when it yields no id); the current
    profile has no Idempotency-Key, so its links name none."""
    out = _links(route)
    if profile != "proposed":
        served = {r.name for r in ROUTES if r.profile == "current"}
        out = {name: link for name, link in out.items() if link["operationId"] in served}
        for link in out.values():
            link["parameters"].pop(f"header.{IDEMPOTENCY_KEY_HEADER}", None)
    return out


def _links(route: Route) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if route.name == "create_job":
        for scoped in ROUTES:
            if "{job_id}" in scoped.path and scoped.name not in _NOT_FROM_CREATE:
                out[f"job_{scoped.name}"] = _from_create(scoped.name)
    if route.name in ("get_capacity", "list_jobs"):
        # A look at the account: create a job with every sub-job kind. The literal body
        # replaces the generated one (schemathesis' x-schemathesis merge_body: false).
        out["create_sample_job"] = {"operationId": "create_job", "parameters": _same_prefix(),
                                    "requestBody": SAMPLE_JOB, "x-schemathesis": {"merge_body": False}}
    if route.name == "delete_checkpoint":
        # Cancel ends a job's life once its checkpoint is deleted, so a walk
        # does not end the job before the data plane had a turn.
        out["cancel_job"] = {"operationId": "cancel_job",
                             "parameters": {**_same_prefix(), "job_id": "$request.path.job_id"}}
    if route.name in _SUBMITS:
        same_job = {**_same_prefix(), "job_id": "$request.path.job_id"}
        out["poll"] = {"operationId": "get_request",
                       "parameters": {**same_job, "request_id": "$response.body#/request_id"}}
    if route.name in _CANCELLED:
        same_job = {**_same_prefix(), "job_id": "$request.path.job_id"}
        cancel = _keyed("operation", same_job, "$response.body#/request_id")
        out["cancel"] = {"operationId": "operation", "parameters": cancel, "requestBody": {
            "operation_type": "cancel-request", "payload": {"request_id": "$response.body#/request_id"}}}
    if route.name == "get_request":
        # A polled save (done) has left a checkpoint: the list names it, and so does the
        # save's result (in either dialect; a poll of anything else resolves to nothing, and
        # the tool then generates the id: a 404, never a failure, the source being a GET).
        out["then_list"] = {"operationId": "list_checkpoints",
                            "parameters": {**_same_prefix(), "job_id": "$request.path.job_id"}}
        for target in _CHECKPOINT_USERS:
            out[f"saved_{target}"] = _to_checkpoint(target, "$response.body#/result/checkpoint_id")
    if route.name == "save":
        # The saved checkpoint's id is the listed one: the request's may be absent or empty
        # (the server then names it), so a link cannot take it from the save request.
        out["saved_list"] = {"operationId": "list_checkpoints",
                             "parameters": {**_same_prefix(), "job_id": "$request.path.job_id"}}
    if route.name == "list_checkpoints":
        for target in _CHECKPOINT_USERS:
            out[f"listed_{target}"] = _to_checkpoint(target, "$response.body#/checkpoints/0/checkpoint_id")
    return out


def omitted_operations() -> dict[str, dict[str, Any]]:
    """``x-gs-omitted-operations``: routes the service serves that the document leaves out, and
    why. The SQL statement route's one accepted body names a run of the caller's job inside a
    ``SYSTEM$...`` call; a link would have to write that text, and in a link a ``$`` starts a
    runtime expression, so no link can (schemathesis: "Unknown token"). Listed without a
    link, no link-aware tool could reach its success answer: every generated statement is
    refused (400) or names no run (404), and the run warns of missing test data."""
    return {f"{STATEMENTS_ROUTE.method} {STATEMENTS_ROUTE.path}": {
        "operationId": STATEMENTS_ROUTE.name,
        "summary": STATEMENTS_ROUTE.summary,
        "accepted-statement": stage_credentials_statement("<experiment_name>", "<run_name>"),
        "why-omitted": "Its one accepted body is a SYSTEM$GET_VSTAGE_WRITE_CREDS statement "
                       "naming a run of GET /{job_id}/experiment-run; a link cannot write it ('$' "
                       "starts a runtime expression), so no tool following this document could "
                       "reach its success answer.",
        "x-gs-clauses": list(STATEMENTS_ROUTE.clauses),
    }}


def extensions(route: Route) -> dict[str, Any]:
    """The vendor extensions of one operation."""
    out: dict[str, Any] = {"x-gs-clauses": list(route.clauses)}
    if route.refusals:
        out["x-gs-refusals"] = {str(status): why for status, why in sorted(route.refusals)}
    return out


def schemathesis_config() -> str:
    """``contract/schemathesis.toml``: an examples phase that sends the document's examples
    as they are, in its order (each route's examples); a stateful phase on the links
    only; per operation, the positive-data statuses to expect (schemathesis' defaults plus
    the operation's ``x-gs-refusals``)."""
    lines = [
        "# Generated from contract/openapi/document_rules.py by `python -m contract schemathesis-config`;",
        "# a test fails when it drifts. For each operation: the statuses a schema-valid request",
        "# may still get, for a rule the document lists in x-gs-refusals / x-gs-clauses.",
        "",
    ]
    lines += [
        "# The examples phase sends the document's examples as they are (no id captured from an",
        "# answer), in the document's order: a server holding the resources they name (fake-gs",
        "# --example-data) answers every operation 2xx there; cancel and delete name their own.",
        "[phases.examples]",
        'operation-ordering = "none"',
        "",
        "[phases.examples.extra-data-sources]",
        "responses = false",
        "",
    ]
    lines += [
        "# The stateful phase follows the document's links only (its own inferred links would",
        "# spend the steps on guesses), with room for create -> save -> poll -> export chains.",
        "[phases.stateful]",
        f"max-steps = {STATEFUL_MAX_STEPS}",
        "",
        "[phases.stateful.inference]",
        "algorithms = []",
        "",
    ]
    for route in (r for r in ROUTES if r.refusals or "{job_id}" in r.path):
        refusals = sorted(status for status, _ in route.refusals)
        # A refusal the kit answers 400 may come as spec §3.6's detail list with 422.
        extra = [422] if 400 in refusals else []
        statuses = list(ST_DEFAULT_EXPECTED) + [str(s) for s in refusals + extra]
        rejected = list(ST_DEFAULT_REJECTED)
        if "{job_id}" in route.path:
            statuses += [PRECONDITION] if PRECONDITION not in statuses else []
            rejected += [PRECONDITION]
        lines += [
            "[[operations]]",
            f'include-operation-id = "{route.name}"',
            "checks.positive_data_acceptance.expected-statuses = [{}]".format(
                ", ".join(f'"{s}"' for s in dict.fromkeys(statuses))),
        ]
        if "{job_id}" in route.path:
            lines.append("checks.negative_data_rejection.expected-statuses = [{}]".format(
                ", ".join(f'"{s}"' for s in rejected)))
        lines.append("")
    return "\n".join(lines)


__all__ = ["LINK_BODIES", "body_required", "extensions", "links", "omitted_operations", "schemathesis_config"]
