"""Mutants: the registry is sound, and each mutant really breaks what it claims to.

The conformance suite's self-test proves its checks catch each mutant; here we
only prove each mutant is live, with the smallest observation of its violation.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable

import pytest
from fake_gs_api import OCTET, Api, batch, sampling_config, training_config
from hardening_mutant_checks import HARDENING_CHECKS
from idempotency_mutant_checks import IDEMPOTENCY_CHECKS
from limit_mutant_checks import LIMIT_CHECKS
from load_mutant_checks import LOAD_CHECKS
from openapi_mutant_checks import OPENAPI_CHECKS
from parity_mutant_checks import PARITY_CHECKS
from recipe_mutant_checks import RECIPE_CHECKS
from semantic_mutant_checks import SEMANTIC_CHECKS
from spec_letter_mutant_checks import SPEC_LETTER_CHECKS
from strict_mutant_checks import STRICT_CHECKS
from url_run_mutant_checks import URL_RUN_CHECKS
from verdict_mutant_checks import VERDICT_CHECKS

from contract import wire
from contract.clauses import CLAUSES
from contract.errors import REQUEST_ID_HEADER
from fake_gs.controls.mutants import MUTANTS

REQUIRED = {
    "nonfinal-chunk-request-id", "chunk-sha-unchecked", "replay-double-exec", "unstable-cursor", "logprobs-short",
    "generate-drops-one", "pickle-accepted", "frame-500", "bare-400", "cancel-twice-409", "terminated-accepts",
    "enum-in-short", "auth-ignored", "cross-token-visible", "oversize-accepted", "load-keeps-steps",
    "deleted-checkpoint-listed", "max-events-uncapped", "no-request-id-header", "submit-missing-job-id",
    "restart-not-required", "steps-not-incremented", "missing-chunks-accepted", "wrong-content-type-accepted",
    "capacity-ignored",
}


def test_registry_covers_the_required_mutants_with_real_clauses() -> None:
    assert set(MUTANTS) >= REQUIRED
    for mutant in MUTANTS.values():
        assert mutant.description
        for cid in mutant.clauses:
            assert cid in CLAUSES, (mutant.name, cid)
        assert mutant.clauses or mutant.parity, mutant.name


def chunks(obj: object, group: str, max_bytes: int = 16_384) -> list[bytes]:
    return wire.encode_byte_chunks(wire.dumps(obj), "request", max_bytes=max_bytes, chunk_group_id=group, force_chunk=True)


def post_chunk(api: Api, job_id: str, chunk: bytes):
    return api.post(f"/{job_id}/forward-backward", data=chunk, headers=OCTET)


def group(api: Api, gid: str) -> dict:
    return next(g for g in api.state()["chunk_groups"] if g["chunk_group_id"] == gid)


# Each check gets an Api on a fake running that mutant and asserts the violation shows.
def nonfinal_chunk_request_id(api: Api) -> None:
    job = api.running_job()
    r = post_chunk(api, job, chunks(batch(2, 600), str(uuid.uuid4()))[0])
    assert "request_id" in r.json()


def chunk_sha_unchecked(api: Api) -> None:
    import torch

    job = api.running_job()
    frame = wire.dumps(batch(2, 600))
    gid = str(uuid.uuid4())
    real = wire.encode_byte_chunks(frame, "request", max_bytes=16_384, chunk_group_id=gid, force_chunk=True)
    bad = bytearray(wire.chunk_payload(real[-1]))
    bad[-3] ^= 1
    desc = wire.chunk_descriptor(real[-1])[1]  # type: ignore[index]
    last = wire.dumps({"payload": torch.frombuffer(bad, dtype=torch.uint8)}, metadata={"request_chunk": desc})
    for c in [*real[:-1], last]:
        r = post_chunk(api, job, c)
    assert r.status_code == 200


def replay_double_exec(api: Api) -> None:
    job = api.running_job()
    gid = str(uuid.uuid4())
    cs = chunks(batch(2, 600), gid)
    for c in cs:
        post_chunk(api, job, c)
    post_chunk(api, job, cs[-1])
    api.result(job, post_chunk(api, job, cs[-1]).json()["request_id"])
    assert group(api, gid)["executions"] >= 2


def unstable_cursor(api: Api) -> None:
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(4, 2000))
    api.wait(job, rid)
    assert api.poll(job, rid)["events"] != api.poll(job, rid)["events"]


def logprobs_short(api: Api) -> None:
    job = api.running_job()
    out = api.result(job, api.submit_frame(job, "forward-no-grad", batch(2, 5)))
    assert tuple(out["model_outputs"]["logprobs"].shape) == (2, 4)


def generate_drops_one(api: Api) -> None:
    job = api.running_job()
    out = api.result(job, api.submit_frame(job, "generate", {"prompts": ["a", "b"]}, force_chunk=False))
    assert len(out["results"]) == 1


def generate_results_empty(api: Api) -> None:
    job = api.running_job()
    out = api.result(job, api.submit_frame(job, "generate", {"prompts": ["a", "b"]}, force_chunk=False))
    assert out["results"] == [{}, {}]


def pickle_accepted(api: Api) -> None:
    job = api.running_job()
    r = api.post(f"/{job}/forward-backward", data=pickle.dumps({"a": 1}), headers=OCTET)
    assert r.status_code == 200


def frame_500(api: Api) -> None:
    job = api.running_job()
    assert api.post(f"/{job}/forward-backward", data=b"garbage", headers=OCTET).status_code == 500


def bare_400(api: Api) -> None:
    r = api.post("/", json={"sub_job_configs": []})
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/plain")


def cancel_twice_409(api: Api) -> None:
    job = api.create_job()
    api.post(f"/{job}:cancel")
    assert api.post(f"/{job}:cancel").status_code == 409


def terminated_accepts(api: Api) -> None:
    job = api.running_job()
    api.post(f"/{job}:cancel")
    assert api.post(f"/{job}/step", json={}).status_code == 200


def enum_in_short(api: Api) -> None:
    assert api.job(api.create_job())["status"] == "JOB_STATE_RUNNING"


def oversize_accepted(api: Api) -> None:
    job = api.running_job()
    r = api.post(f"/{job}/generate", data=b"\0" * (61 * 1024 * 1024), headers=OCTET)
    assert r.status_code != 413


def load_keeps_steps(api: Api) -> None:
    job = api.running_job()
    api.result(job, api.submit_json(job, "save", {"checkpoint_id": "c"}))
    api.result(job, api.submit_json(job, "step"))
    assert api.result(job, api.submit_json(job, "load", {"checkpoint_id": "c"}))["global_steps"] == 1


def deleted_checkpoint_listed(api: Api) -> None:
    job = api.running_job()
    api.result(job, api.submit_json(job, "save", {"checkpoint_id": "c"}))
    api.call("DELETE", f"/{job}/checkpoints/c")
    assert api.get(f"/{job}/checkpoints").json()["checkpoints"]


def max_events_uncapped(api: Api) -> None:
    job = api.running_job()
    rid = api.submit_frame(job, "forward-no-grad", batch(2, 40_000))
    api.wait(job, rid)
    assert len(api.poll(job, rid, max_events=2000)["events"]) > 512


def no_request_id_header(api: Api) -> None:
    assert REQUEST_ID_HEADER not in api.get("/capacity", check_id=False).headers


def submit_missing_job_id(api: Api) -> None:
    job = api.running_job()
    assert "job_id" not in api.post(f"/{job}/step", json={}).json()


def restart_not_required(api: Api) -> None:
    job = api.running_job()
    assert post_chunk(api, job, chunks(batch(2, 600), str(uuid.uuid4()))[1]).status_code == 202


def steps_not_incremented(api: Api) -> None:
    job = api.running_job()
    assert api.result(job, api.submit_json(job, "step"))["global_steps"] == 0


def missing_chunks_accepted(api: Api) -> None:
    job = api.running_job()
    cs = chunks(batch(2, 600), str(uuid.uuid4()))
    post_chunk(api, job, cs[0])
    assert post_chunk(api, job, cs[-1]).status_code == 200


def wrong_content_type_accepted(api: Api) -> None:
    job = api.running_job()
    r = api.post(f"/{job}/step", data=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 200


def capacity_ignored(api: Api) -> None:
    job = api.create_job(training_config(n_gpus=100))
    assert api.job(job)["status"] == "running"


def status_filter_ignored(api: Api) -> None:
    api.create_job()
    assert api.get("/", params={"status": "failed"}).json()["jobs"]


def failed_without_reason(api: Api) -> None:
    job = api.create_job()
    api.post(f"/_fake/jobs/{job}/state", json={"status": "failed", "reason": "x"})
    assert api.job(job)["reason"] == ""


def unknown_op_accepted(api: Api) -> None:
    job = api.running_job()
    assert api.post(f"/{job}/operation", json={"operation_type": "zzz"}).status_code == 200


def routing_conflict_ignored(api: Api) -> None:
    job = api.running_job()
    r = api.post(f"/{job}/operation", json={"operation_type": "reset-prefix-cache", "sub_job_id": f"{job}:sampling:0",
                                             "sub_job_type": "training"})
    assert r.status_code == 200


def stream_events_repeated(api: Api) -> None:
    job = api.running_job()
    rid = api.post(f"/{job}/generate-stream", data=b'{"prompts": ["a"]}', headers=OCTET).json()["request_id"]
    first = api.poll(job, rid)
    assert first["events"] and api.poll(job, rid)["events"] == first["events"]


def entropy_missing(api: Api) -> None:
    job = api.running_job()
    out = api.result(job, api.submit_frame(job, "forward-no-grad", batch(meta={"calculate_entropy": True})))
    assert "entropy" not in out["model_outputs"]


def fb_metrics_missing(api: Api) -> None:
    job = api.running_job()
    assert api.result(job, api.submit_frame(job, "forward-backward", batch()))["metrics"] == {}


CHECKS: dict[str, tuple[Callable[[Api], None], dict]] = {
    "nonfinal-chunk-request-id": (nonfinal_chunk_request_id, {}),
    "chunk-sha-unchecked": (chunk_sha_unchecked, {}),
    "replay-double-exec": (replay_double_exec, {}),
    "unstable-cursor": (unstable_cursor, {"result_delivery": "chunks", "result_chunk_bytes": 8192 + 256}),
    "logprobs-short": (logprobs_short, {}),
    "generate-drops-one": (generate_drops_one, {}),
    "generate-results-empty": (generate_results_empty, {}),
    "pickle-accepted": (pickle_accepted, {}),
    "frame-500": (frame_500, {}),
    "bare-400": (bare_400, {}),
    "cancel-twice-409": (cancel_twice_409, {}),
    "terminated-accepts": (terminated_accepts, {}),
    "enum-in-short": (enum_in_short, {}),
    "oversize-accepted": (oversize_accepted, {}),
    "load-keeps-steps": (load_keeps_steps, {}),
    "deleted-checkpoint-listed": (deleted_checkpoint_listed, {}),
    "max-events-uncapped": (max_events_uncapped, {"result_delivery": "chunks", "result_chunk_bytes": 8192 + 512}),
    "no-request-id-header": (no_request_id_header, {}),
    "submit-missing-job-id": (submit_missing_job_id, {}),
    "restart-not-required": (restart_not_required, {}),
    "steps-not-incremented": (steps_not_incremented, {}),
    "missing-chunks-accepted": (missing_chunks_accepted, {}),
    "wrong-content-type-accepted": (wrong_content_type_accepted, {}),
    "capacity-ignored": (capacity_ignored, {}),
    "status-filter-ignored": (status_filter_ignored, {}),
    "failed-without-reason": (failed_without_reason, {}),
    "unknown-op-accepted": (unknown_op_accepted, {}),
    "routing-conflict-ignored": (routing_conflict_ignored, {}),
    "stream-events-repeated": (stream_events_repeated, {}),
    "entropy-missing": (entropy_missing, {}),
    "fb-metrics-missing": (fb_metrics_missing, {}),
}


CHECKS.update(LIMIT_CHECKS)  # the limits/faults mutants keep their checks apart
CHECKS.update(SEMANTIC_CHECKS)  # the tiny engine's semantic mutants
CHECKS.update(RECIPE_CHECKS)  # the recipes/logs/TLS mutants
CHECKS.update(OPENAPI_CHECKS)  # the OpenAPI mutants
CHECKS.update(STRICT_CHECKS)  # the strict fake's mutants
CHECKS.update(IDEMPOTENCY_CHECKS)  # the at-most-once mutants
CHECKS.update(VERDICT_CHECKS)  # the corrected clauses' mutants
CHECKS.update(HARDENING_CHECKS)  # hardening
CHECKS.update(URL_RUN_CHECKS)  # the url-run mutants
CHECKS.update(LOAD_CHECKS)  # the load mutants
CHECKS.update(PARITY_CHECKS)  # the parity mutant
CHECKS.update(SPEC_LETTER_CHECKS)  # the rules of the spec's letter


def test_every_mutant_has_a_check() -> None:
    assert set(CHECKS) | {"auth-ignored", "cross-token-visible"} == set(MUTANTS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_mutant_is_live(make_api, name: str) -> None:
    check, extra = CHECKS[name]
    check(make_api(variation=name, **extra))


def test_auth_mutants(make_server) -> None:
    srv = make_server(variation="auth-ignored", tokens=("a",))
    assert Api(srv.base_url).get("/").status_code == 200
    srv = make_server(variation="cross-token-visible", tokens=("a", "b"))
    job = Api(srv.base_url, "a").create_job(training_config(), sampling_config())
    assert Api(srv.base_url, "b").get(f"/{job}").status_code == 200
