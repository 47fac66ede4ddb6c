"""CKPT and SAVE: saving, listing, exporting, deleting and loading checkpoints."""

from __future__ import annotations

import json
import struct
import uuid

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from client.calls.bounded_read import mount_bounds
from conformance.drivers.ops import Failed, RawOps, Refused
from conformance.drivers.raw import RawDriver
from conformance.fixtures import NewJob, Via
from conformance.inputs import valid_bodies
from conformance.jobs import SharedJob
from conformance.judging.checks import RFC3339_RE, kit_form, refused, refused_or_failed
from conformance.judging.variants import JobRef
from conformance.options import GsOptions
from conformance.reporting.violations import Soft, expect
from conformance.runtime import prop
from contract.clauses import checks
from contract.models.catalog import TRAINING_MODELS
from contract.routes import ROUTES_BY_NAME
from contract.states import RequestState

VIA = ["raw", "client"]


def listed(driver: RawDriver, job_id: str) -> dict[str, dict]:
    ans = driver.call("list_checkpoints", job_id=job_id)
    expect(
        "CKPT-LIST-1",
        ans.ok and isinstance(ans.field("checkpoints"), list),
        f"checkpoint list: {ans}",
    )
    return {str(c.get("checkpoint_id")): c for c in ans.field("checkpoints") if isinstance(c, dict)}


def fresh_id(tag: str = "gs") -> str:
    return f"{tag}-{uuid.uuid4().hex[:10]}"


@checks("SAVE-RESULT-1", "SAVE-RESULT-2", "SAVE-ID-1", "SAVE-ID-2", "CKPT-LIST-2")
@pytest.mark.parametrize("via", VIA)
def test_save_result_and_listing(
    gs_raw: RawDriver, gs_job: SharedJob, gs_via: Via, via: str
) -> None:
    """save resolves to a result naming checkpoint_id (the kit's also checkpoint_path and
    checkpoint_tag); the result's id (the caller's, or the server's own: spec §6.3 lets it
    ignore the caller's; the kit keeps the caller's) is listed and loads."""
    ops = gs_via(via)
    wanted = fresh_id()
    result = ops.save(checkpoint_id=wanted)
    soft = Soft()
    soft.expect("SAVE-RESULT-1", "checkpoint_id" in result, f"save result lacks checkpoint_id: {result!r}")
    if kit_form("SAVE-RESULT-2"):
        for name in ("checkpoint_path", "checkpoint_tag"):
            soft.expect("SAVE-RESULT-2", name in result, f"save result lacks {name}: {result!r}")
    got = result.get("checkpoint_id")
    if kit_form("SAVE-ID-2"):
        soft.expect("SAVE-ID-2", got == wanted, f"asked for checkpoint {wanted!r}, the save named {got!r}")
    if soft.expect("SAVE-ID-1", isinstance(got, str) and got, f"save result id {got!r}"):
        try:
            ops.load(str(got))
        except Exception as exc:  # a refusal or a failed request: either way the id is wrong
            soft.expect("SAVE-ID-1", False, f"load of the result's id {got!r} failed: {exc}")
    soft.expect(
        "CKPT-LIST-2",
        str(result.get("checkpoint_id")) in listed(gs_raw, gs_job.job_id),
        "the saved checkpoint is not listed",
    )
    unnamed = ops.save()
    soft.expect(
        "CKPT-LIST-2",
        str(unnamed.get("checkpoint_id")) in listed(gs_raw, gs_job.job_id),
        f"a save without id (result id {unnamed.get('checkpoint_id')!r}) is not listed",
    )
    soft.check()


@checks("CKPT-LIST-1")
def test_list_entries(gs_raw: RawDriver, gs_ops: RawOps, gs_job: SharedJob) -> None:
    """Entries carry checkpoint_id, global_steps, avg_loss, created_at, checkpoint_type."""
    gs_ops.save(checkpoint_id=fresh_id())
    soft = Soft()
    for cid, entry in listed(gs_raw, gs_job.job_id).items():
        for name in ("checkpoint_id", "global_steps", "avg_loss", "created_at", "checkpoint_type"):
            soft.expect("CKPT-LIST-1", name in entry, f"entry {cid} lacks {name}")
        soft.expect(
            "CKPT-LIST-1",
            isinstance(entry.get("global_steps"), int),
            f"{cid}.global_steps {entry.get('global_steps')!r}",
        )
        soft.expect(
            "CKPT-LIST-1",
            entry.get("checkpoint_type") in ("resumable", "weights-only"),
            f"{cid}.checkpoint_type {entry.get('checkpoint_type')!r}",
        )
        created = entry.get("created_at")
        soft.expect(
            "CKPT-LIST-1",
            isinstance(created, str) and RFC3339_RE.match(created),
            f"{cid}.created_at {created!r} is not RFC 3339",
        )
    soft.check()


@checks("SAVE-TYPE-1", "SAVE-TYPE-2")
@prop(scale=0.3)
@given(
    kind=st.sampled_from(
        [
            None,
            "resumable",
            "RESUMABLE",
            "Resumable",
            "weights-only",
            "WEIGHTS-ONLY",
            "Weights-Only",
        ]
    )
)
def test_checkpoint_types(
    gs_raw: RawDriver, gs_ops: RawOps, gs_job: SharedJob, kind: str | None
) -> None:
    """resumable by default, weights-only on request (spec §6.3); the kit also takes the
    types in any case (spec §6.3 has the client lowercase them)."""
    cid = "SAVE-TYPE-1" if kind in (None, "resumable", "weights-only") else "SAVE-TYPE-2"
    try:
        result = gs_ops.save(checkpoint_id=fresh_id(), checkpoint_type=kind)
    except (Refused, Failed) as exc:
        expect(cid, False, f"save with checkpoint_type {kind!r}: {exc}")
    entry = listed(gs_raw, gs_job.job_id).get(str(result.get("checkpoint_id")), {})
    want = (kind or "resumable").lower()
    expect(
        cid,
        entry.get("checkpoint_type") == want,
        f"saved with {kind!r}, listed as {entry.get('checkpoint_type')!r}",
    )


@checks("SAVE-TYPE-2")
@prop(scale=0.3)
@given(
    kind=st.one_of(st.text(min_size=1, max_size=12), st.integers()).filter(
        lambda k: not (isinstance(k, str) and k.lower() in ("resumable", "weights-only"))
    )
)
def test_bad_checkpoint_type(gs_raw: RawDriver, gs_job: SharedJob, kind: str | int) -> None:
    """Any other checkpoint_type is refused."""
    ans = gs_raw.call("save", json_body={"checkpoint_type": kind}, job_id=gs_job.job_id)
    soft = Soft()
    refused(ans, soft, "SAVE-TYPE-2", statuses=[400])
    soft.check()


@checks("CKPT-DELETE-1")
def test_delete_removes(gs_raw: RawDriver, gs_ops: RawOps, gs_job: SharedJob) -> None:
    """DELETE answers 200/204 and the checkpoint leaves the list."""
    cid = str(gs_ops.save(checkpoint_id=fresh_id("del")).get("checkpoint_id"))
    ans = gs_raw.call("delete_checkpoint", job_id=gs_job.job_id, checkpoint_id=cid)
    expect("CKPT-DELETE-1", ans.ok, f"delete answered {ans}")
    expect(
        "CKPT-DELETE-1", cid not in listed(gs_raw, gs_job.job_id), "deleted checkpoint still listed"
    )


@checks("CKPT-DELETE-2", "CKPT-EXPORT-3")
@pytest.mark.parametrize("route", ["delete_checkpoint", "export_checkpoint"])
def test_missing_checkpoint_404(gs_raw: RawDriver, gs_job: SharedJob, route: str) -> None:
    """Deleting a missing checkpoint is an error (the kit's 404, spec §5.9's example);
    exporting one is refused with 404 (the kit's)."""
    ans = gs_raw.call(route, job_id=gs_job.job_id, checkpoint_id=fresh_id("missing"))
    soft = Soft()
    cid = "CKPT-DELETE-2" if route == "delete_checkpoint" else "CKPT-EXPORT-3"
    refused(ans, soft, cid, statuses=[404])
    soft.check()


@checks("CKPT-EXPORT-1", "CKPT-EXPORT-2", "CKPT-EXPORT-4")
def test_export(gs_raw: RawDriver, gs_ops: RawOps, gs_job: SharedJob) -> None:
    """Export answers files with URLs; each downloads size_bytes bytes (a .safetensors one
    a valid safetensors file)."""
    cid = str(gs_ops.save(checkpoint_id=fresh_id("exp")).get("checkpoint_id"))
    ans = gs_raw.call("export_checkpoint", job_id=gs_job.job_id, checkpoint_id=cid)
    expect("CKPT-EXPORT-1", ans.ok, f"export answered {ans}")
    soft = Soft()
    soft.expect(
        "CKPT-EXPORT-1",
        ans.field("checkpoint_id") == cid,
        f"export names {ans.field('checkpoint_id')!r}",
    )
    soft.expect(
        "CKPT-EXPORT-1", isinstance(ans.field("expires_at"), str), "export lacks expires_at"
    )
    files = ans.field("files")
    soft.expect("CKPT-EXPORT-1", isinstance(files, list) and files, f"export files {files!r}")
    for f in files or []:
        soft.expect(
            "CKPT-EXPORT-1",
            isinstance(f, dict) and {"filename", "url", "size_bytes"} <= set(f),
            f"export file entry {f!r}",
        )
    soft.check()
    for f in files:
        url = (
            f["url"]
            if "://" in f["url"]
            else gs_raw.target.base_url.rstrip("/") + "/" + f["url"].lstrip("/")
        )
        size_problem, layout_problem = _check_download(url, int(f["size_bytes"]))
        soft.expect("CKPT-EXPORT-2", size_problem is None, f"{f['filename']}: {size_problem}")
        if str(f["filename"]).endswith(".safetensors"):
            soft.expect("CKPT-EXPORT-4", layout_problem is None, f"{f['filename']}: {layout_problem}")
    soft.check()


def _check_download(url: str, size: int) -> tuple[str | None, str | None]:
    """(size problem, safetensors layout problem) of a download; a big file is judged from
    its header.

    A session without the PAT: export URLs are presigned, and the PAT must not travel to
    them; bounded by the announced size and ten minutes, so an endless download ends.
    """
    with mount_bounds(requests.Session(), max_bytes=size + 1) as session, \
            session.get(url, stream=True, timeout=(60, 600)) as resp:
        if resp.status_code != 200:
            return f"download answered {resp.status_code}", None
        length = resp.headers.get("content-length")
        if length is not None and int(length) != size:
            return f"content-length {length} != size_bytes {size}", None
        head = resp.raw.read(min(size, 64 * 1024 * 1024))
        rest = 0
        for block in resp.iter_content(1 << 20):
            rest += len(block)
    total = len(head) + rest
    if total != size:
        return f"downloaded {total} bytes, size_bytes says {size}", None
    return None, _safetensors_problem(head, size)


def _safetensors_problem(head: bytes, size: int) -> str | None:
    """Why a file of ``size`` bytes starting with ``head`` is not a safetensors file."""
    if len(head) < 8:
        return "file too short for a safetensors header"
    (n,) = struct.unpack_from("<Q", head, 0)
    try:
        header = json.loads(head[8 : 8 + n])
    except ValueError:
        return "header is not JSON"
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    if 8 + n + max(ends, default=0) != size:
        return f"tensor data ends at {8 + n + max(ends, default=0)}, file has {size} bytes"
    return None


TRAVERSAL = ["../../etc/passwd", "..", "a/../../b", "..\\..\\windows", "/abs/path", "x/y", "%2e%2e"]


@checks("CKPT-PATH-1")
@pytest.mark.parametrize("cid", TRAVERSAL)
def test_traversal_ids_are_opaque(gs_raw: RawDriver, gs_job: SharedJob, cid: str) -> None:
    """A path-like checkpoint id is refused, or kept as an opaque name everywhere."""
    jid = gs_job.job_id
    ans, settled = gs_raw.run_json("save", jid, {"checkpoint_id": cid})
    soft = Soft()
    if not ans.ok or settled is None or settled.status != RequestState.DONE:
        soft.expect("CKPT-PATH-1", ans.status < 500, f"save of {cid!r} answered {ans.status}")
        soft.check()
        return
    got = str(settled.decoded().get("checkpoint_id"))
    entries = listed(gs_raw, jid)
    soft.expect("CKPT-PATH-1", got in entries, f"saved {cid!r} as {got!r}, which is not listed")
    ids = {"job_id": jid, "checkpoint_id": _quote_all(got)}
    exp = gs_raw.under_prefix("POST", ROUTES_BY_NAME["export_checkpoint"].path.format(**ids))
    soft.expect(
        "CKPT-PATH-1",
        exp.ok,
        f"the accepted id {got!r} cannot be exported (every byte percent-encoded): {exp.status}",
    )
    for f in exp.field("files", []) or []:
        name = str(f.get("filename", ""))
        soft.expect(
            "CKPT-PATH-1",
            "/" not in name and "\\" not in name and not name.startswith(".."),
            f"export file name {name!r} is path-like",
        )
    dele = gs_raw.under_prefix("DELETE", ROUTES_BY_NAME["delete_checkpoint"].path.format(**ids))
    soft.expect(
        "CKPT-PATH-1",
        dele.ok,
        f"the accepted id {got!r} cannot be deleted (every byte percent-encoded): {dele.status}",
    )
    soft.check()


def _quote_all(text: str) -> str:
    """Percent-encode every byte but unreserved letters/digits, dots included, so no
    client library normalises ``..`` away before the server sees it."""
    return "".join(
        chr(b) if chr(b).isalnum() or chr(b) in "-_~" else f"%{b:02X}" for b in text.encode()
    )


@checks("SAVE-LOAD-1")
@pytest.mark.parametrize("via", VIA)
def test_load_restores_steps(gs_via: Via, via: str) -> None:
    """load of a saved checkpoint restores its global_steps (the next step is N + 1)."""
    ops = gs_via(via)
    at_save = int(ops.step()["global_steps"])
    cid = str(ops.save(checkpoint_id=fresh_id("load")).get("checkpoint_id"))
    ops.step()
    ops.step()
    loaded = ops.load(cid)
    after = int(ops.step()["global_steps"])
    soft = Soft()
    if isinstance(loaded.get("global_steps"), int):
        soft.expect(
            "SAVE-LOAD-1",
            loaded["global_steps"] == at_save,
            f"load result says global_steps {loaded['global_steps']}, saved at {at_save}",
        )
    soft.expect(
        "SAVE-LOAD-1",
        after == at_save + 1,
        f"saved at {at_save} steps, stepped twice, loaded, stepped: got {after}, want {at_save + 1}",
    )
    soft.check()


@checks("SAVE-LOAD-2", "SAVE-LOAD-5")
def test_load_needs_a_known_checkpoint(gs_raw: RawDriver, gs_job: SharedJob) -> None:
    """No checkpoint_id: refused (a 4xx, or a request that ends failed: spec §6.4 names
    no form). An unknown checkpoint or source job (the kit's): 404 or
    a failed request naming it."""
    jid = gs_job.job_id
    soft = Soft()
    refused_or_failed(gs_raw.call("load", json_body={}, job_id=jid), soft, "SAVE-LOAD-2",
                      lambda rid: gs_raw.settle(jid, rid), statuses=[400])
    missing, gone = fresh_id("nope"), str(uuid.uuid4())
    for body, named in (({"checkpoint_id": missing}, missing),
                        ({"checkpoint_id": missing, "source_job_id": gone}, gone)):
        ans, settled = gs_raw.run_json("load", jid, body)
        if settled is None:
            refused(ans, soft, "SAVE-LOAD-5", statuses=[404])
            continue
        soft.expect(
            "SAVE-LOAD-5",
            settled.status == RequestState.FAILED,
            f"loading {body!r} ended {settled.raw_status}",
        )
        soft.expect(
            "SAVE-LOAD-5",
            named in json.dumps(settled.error),
            f"the failure does not name {named!r}: {settled.error!r}",
        )
    soft.check()


@checks("SAVE-LOAD-3")
def test_load_target_sub_job(gs_raw: RawDriver, gs_ops: RawOps, gs_job: SharedJob) -> None:
    """A target_sub_job_id of another job: 400; this job's sampling sub-job: 501."""
    jid = gs_job.job_id
    cid = str(gs_ops.save(checkpoint_id=fresh_id("tgt")).get("checkpoint_id"))
    soft = Soft()
    foreign = f"{uuid.uuid4()}:training:0"
    ans = gs_raw.call(
        "load", json_body={"checkpoint_id": cid, "target_sub_job_id": foreign}, job_id=jid
    )
    refused(ans, soft, "SAVE-LOAD-3", statuses=[400])
    soft.expect("SAVE-LOAD-3", ans.status == 400, f"a foreign target_sub_job_id answered {ans.status}")
    if gs_job.sampling:
        ans = gs_raw.call(
            "load",
            json_body={"checkpoint_id": cid, "target_sub_job_id": gs_job.sampling},
            job_id=jid,
        )
        soft.expect(
            "SAVE-LOAD-3",
            ans.status == 501,
            f"load into the sampling sub-job answered {ans.status}",
        )
    soft.check()


@checks("SAVE-LOAD-4")
def test_load_from_another_job(
    gs_raw: RawDriver, gs_ops: RawOps, gs_new_job: NewJob, gs_opts: GsOptions
) -> None:
    """load with source_job_id restores another of the caller's jobs' checkpoint."""
    other_id, _ = gs_new_job(
        valid_bodies.small_job(gs_opts.model or TRAINING_MODELS[0]), why="SAVE-LOAD-4"
    )
    other = RawOps(gs_raw, JobRef(other_id))
    for _ in range(3):
        steps = int(other.step()["global_steps"])
    cid = str(other.save(checkpoint_id=fresh_id("src")).get("checkpoint_id"))
    try:
        gs_ops.load(cid, source_job_id=other_id)
    except (Refused, Failed) as exc:
        expect("SAVE-LOAD-4", False, f"load from job {other_id}: {exc}")
    after = int(gs_ops.step()["global_steps"])
    gs_raw.cancel(other_id)
    expect(
        "SAVE-LOAD-4",
        after == steps + 1,
        f"loaded a checkpoint saved at {steps} steps, next step gave {after}",
    )
