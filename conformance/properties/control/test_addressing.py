"""ADDR: the prefix, the request-id header, JSON answers, content types and unknown routes."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.drivers.raw import Answer, RawDriver, encode, request_chunks
from conformance.jobs import SharedJob
from conformance.judging.checks import has_request_id_header, json_answer, kit_form, refused
from conformance.reporting.violations import Soft
from conformance.runtime import RUNTIME, prop
from conformance.target import Target
from contract.clauses import checks
from contract.errors import ErrorCode
from contract.forms import why_not_judged
from contract.routes import routes_for

names = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"),
    min_size=1,
    max_size=16,
)


@checks("ADDR-PREFIX-1")
def test_routes_are_served_under_the_prefix(gs_target: Target, gs_raw: RawDriver) -> None:
    """The routes answer under /api/v2/databases/{database}/schemas/{schema}/{endpoint}."""
    soft = Soft()
    for ans in (gs_raw.call("get_capacity"), gs_raw.call("list_jobs")):
        soft.expect("ADDR-PREFIX-1", ans.ok, f"prefix {gs_target.prefix}: {ans}")
    soft.check()


@checks("ADDR-PREFIX-2")
@prop(scale=0.4)
@given(
    database=names,
    schema=names,
    endpoint=st.one_of(st.sampled_from(["cortex-training", "cortex-post-training"]), names),
)
def test_any_prefix_is_served(gs_target: Target, database: str, schema: str, endpoint: str) -> None:
    """The fake serves any database/schema/endpoint names (a real service: its own)."""
    if not gs_target.embedded:
        pytest.skip("needs the embedded fake: a real service serves its configured names only")
    target = dataclasses.replace(gs_target, database=database, schema=schema, endpoint=endpoint)
    driver = RawDriver(target)
    soft = Soft()
    for ans in (driver.call("get_capacity"), driver.call("list_jobs")):
        soft.expect("ADDR-PREFIX-2", ans.ok, f"prefix {target.prefix}: {ans}")
    driver.close()
    soft.check()


def _control_plane_reads(gs_raw: RawDriver, jid: str) -> list:
    """The control-plane reads of the account and of job ``jid`` (five answers)."""
    return [
        gs_raw.call("get_capacity"),
        gs_raw.call("list_jobs"),
        gs_raw.get_job(jid),
        gs_raw.call("list_checkpoints", job_id=jid),
        gs_raw.call("get_experiment_run", job_id=jid),
    ]


@checks("ADDR-REQID-1")
def test_every_answer_carries_a_request_id(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """Successes and refusals alike carry x-snowflake-request-id (the kit's choice: spec
    §2.4 says an answer may carry it)."""
    if not kit_form("ADDR-REQID-1"):
        pytest.skip(why_not_judged("ADDR-REQID-1", RUNTIME.forms))
    jid = gs_job.job_id
    answers = [
        *_control_plane_reads(gs_raw, jid),
        gs_raw.get_job("00000000-0000-4000-8000-000000000000"),
        gs_raw.under_prefix("GET", "/zz-no-such/route/here"),
        gs_raw.create_job({"sub_job_configs": []}),
        gs_raw.poll(jid, "no-such-request"),
        gs_raw.call("step", json_body={"learning_rate": -1.0}, job_id=jid),
        gs_raw.call("forward_backward", data=b"not a frame", job_id=jid),
    ]
    soft = Soft()
    for ans in answers:
        has_request_id_header(ans, soft)
    soft.check()


@checks("ADDR-CT-1")
def test_json_routes_answer_json(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """Control-plane, step, save, load and operation answers are application/json."""
    jid = gs_job.job_id
    answers = [
        *_control_plane_reads(gs_raw, jid),
        gs_raw.call("step", json_body={}, job_id=jid),
        gs_raw.call("save", json_body={}, job_id=jid),
        gs_raw.call("load", json_body={"checkpoint_id": "gs-no-such-checkpoint"}, job_id=jid),
        gs_raw.operation(jid, {"operation_type": "tail-logs", "payload": {"max_lines": 1}}),
        gs_raw.get_job("00000000-0000-4000-8000-000000000000"),
    ]
    soft = Soft()
    for ans in answers:
        json_answer(ans, soft)
    rid = answers[5].field("request_id")
    if isinstance(rid, str):
        json_answer(gs_raw.poll(jid, rid), soft)
    soft.check()


@checks("ADDR-CT-4")
def test_documented_content_types_are_taken(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """JSON calls sent as application/json, frames as application/octet-stream and
    generate-stream's JSON bytes as application/octet-stream are taken (2xx)."""
    jid = gs_job.job_id
    # Inputs inside what the sections show: spec §6.1's standard object (input_ids and
    # labels), spec §7.8's tail-logs naming its sub-job.
    batch = {"args": [], "kwargs": {"input_ids": [[1, 2, 3]], "labels": [[2, 3, -100]]}}
    chunk = request_chunks(batch, "forward_backward")
    tail = {"operation_type": "tail-logs", "sub_job_id": gs_job.training, "payload": {"max_lines": 1}}
    calls = {
        "step": gs_raw.call("step", json_body={}, job_id=jid),
        "operation": gs_raw.operation(jid, tail),
        "forward_backward": gs_raw.call("forward_backward", data=chunk[0], job_id=jid),
        "generate": gs_raw.call("generate", data=encode({"prompts": ["x"]}), job_id=jid),
        "generate_stream": gs_raw.call("generate_stream", data=b'{"prompts": ["x"]}', job_id=jid),
    }
    soft = Soft()
    for name, ans in calls.items():
        soft.expect("ADDR-CT-4", ans.ok, f"{name} with its documented content type: {ans}")
        rid = ans.field("request_id")
        if isinstance(rid, str):
            gs_raw.settle(jid, rid)
    soft.check()


def _refused_415(ans: Answer, cid: str) -> None:
    """``ans`` refuses a body of the wrong content type: 415 unsupported_media_type."""
    soft = Soft()
    refused(ans, soft, cid, codes=[ErrorCode.UNSUPPORTED_MEDIA_TYPE], statuses=[415])
    soft.check()


JSON_ROUTES = ("create_job", "step", "save", "load", "operation")
WRONG_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/xml",
    "application/octet-stream",
)


@checks("ADDR-CT-2")
@prop(scale=0.4)
@given(name=st.sampled_from(JSON_ROUTES), ctype=st.sampled_from(WRONG_TYPES))
def test_json_route_refuses_other_content_types(
    gs_raw: RawDriver, gs_job: SharedJob, name: str, ctype: str
) -> None:
    """Valid JSON sent with a non-JSON content type answers 415 unsupported_media_type."""
    bodies = {
        "create_job": {"sub_job_configs": []},
        "step": {},
        "save": {"checkpoint_id": "gs-ct-probe"},
        "load": {"checkpoint_id": "gs-ct-probe"},
        "operation": {"operation_type": "tail-logs", "payload": {}},
    }
    # create_job's path names no job: its template leaves the job id out.
    ans = gs_raw.call(name, data=json.dumps(bodies[name]).encode(), content_type=ctype,
                      job_id=gs_job.job_id)
    _refused_415(ans, "ADDR-CT-2")


@checks("ADDR-CT-3")
@prop(scale=0.4)
@given(
    name=st.sampled_from(("forward_backward", "generate")),
    ctype=st.sampled_from(("application/json", "text/plain", "multipart/form-data")),
)
def test_frame_routes_refuse_other_content_types(
    gs_raw: RawDriver, gs_job: SharedJob, name: str, ctype: str
) -> None:
    """forward-backward and generate answer 415 to anything but octet-stream."""
    ans = gs_raw.call(name, data=b'{"prompts": ["x"]}', content_type=ctype, job_id=gs_job.job_id)
    _refused_415(ans, "ADDR-CT-3")


@checks("ADDR-ROUTE-1")
@prop(scale=0.4)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    tail=st.lists(
        st.text(st.sampled_from("abcxyz019"), min_size=1, max_size=6), min_size=1, max_size=3
    ),
)
def test_unknown_paths_answer_404(
    gs_raw: RawDriver, gs_job_id: str, method: str, tail: list[str]
) -> None:
    """Paths no route matches answer 404 with the error envelope."""
    path = f"/{gs_job_id}/zz-{'/'.join(tail)}"
    ans = gs_raw.under_prefix(
        method,
        path,
        data=b"{}" if method in ("POST", "PUT") else None,
        content_type="application/json" if method in ("POST", "PUT") else None,
    )
    soft = Soft()
    refused(ans, soft, "ADDR-ROUTE-1", statuses=[404])
    soft.check()


@checks("ADDR-ALLOW-1")
def test_405_lists_the_methods_of_the_path(
    gs_raw: RawDriver, gs_job: SharedJob, gs_target: Target
) -> None:
    """Each path, asked with a method it does not serve, answers 405 and an Allow header
    naming exactly the path's documented methods (a HEAD beside a GET is fine)."""
    methods: dict[str, set[str]] = {}
    for r in routes_for(gs_target.server_profile):
        path = r.render(job_id=gs_job.job_id, request_id="gs-allow-probe", checkpoint_id="gs-allow-probe")
        methods.setdefault(path, set()).add(r.method)
    soft = Soft()
    for path, documented in methods.items():
        for method in sorted({"PUT", "PATCH", "DELETE", "POST", "GET"} - documented)[:2]:
            ans = gs_raw.under_prefix(method, path)
            allow = {m.strip().upper() for m in ans.headers.get("allow", "").split(",") if m.strip()}
            soft.expect("ADDR-ALLOW-1", ans.status == 405 and allow - {"HEAD"} == documented,
                        f"{method} {path}: {ans.status}, Allow {sorted(allow)}; the document says {sorted(documented)}")
    soft.check()
