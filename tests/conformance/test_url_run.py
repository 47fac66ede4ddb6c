"""A URL run judges everything one job can show.

The fake is served on loopback and judged as any URL would be (``gs-conformance --url`` in
a fresh interpreter, default options: one job). The clauses one job can judge (the cancel
clauses on the run's own job, the delivery clauses on its one large result) must come back
judged; the mutants whose repeated cancel answers 409 and whose chunked delivery breaks a
cursor must be caught; the report carries the judged fraction and the cost line. The full
default run takes a minute or two and is marked ``slow``, as is the cursor mutant's run (its
default run shrinks over the large result); the other focused runs are in ``tox -e tests``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from conformance.judging.large import LARGE_RESULT_BYTES, dims, result_bytes
from conformance.planner import unmet
from conformance.reporting.cost import cost_line, gpus_of
from conformance.target import GsOptions
from contract.limits import MAX_BODY_BYTES, MiB

TIMEOUT_S = 900

#: Why a default URL run against the fake may leave a MUST clause unjudged: it needs the
#: fake's admin API or one of its settings, a second account, or more jobs than one.
FAKE, ACCOUNT, JOBS = "fake admin API or setting", "second account", "more jobs"
WHY = {
    FAKE: r"embedded fake|admin API|no token given|running when first seen|never seen placing"
    r"|refused every candidate",
    ACCOUNT: r"second token",
    JOBS: r"more job",
}
ALLOWED_SKIPS: dict[str, str] = {
    # auth is off on a fake started without --token (a setting of the fake)
    "AUTH-REQUIRED-1": FAKE, "AUTH-REQUIRED-2": FAKE, "AUTH-HEADERS-1": FAKE,
    # the fake starts jobs instantly unless told otherwise (--startup): nothing before running
    "JOB-RUNNING-1": FAKE, "OP-LOGS-1": FAKE, "OP-LOGS-2": FAKE, "OP-RUNNING-1": FAKE,
    # any database, schema and endpoint name: the embedded fake's (a real service has its own)
    "ADDR-PREFIX-2": FAKE,
    # the client's poll timing is judged on a fake whose requests take polls to finish
    "CLIENT-POLL-2": FAKE,
    # a request fails on the fake only when its faults or admin API say so
    "POLL-FAILED-1": FAKE,
    "JOB-STATE-3": FAKE, "CAP-QUEUE-1": FAKE, "CANCEL-CONFLICT-1": FAKE, "CANCEL-FREE-1": FAKE,
    "POLL-REASSEMBLE-1": FAKE, "CLIENT-RETRY-1": FAKE, "CLIENT-CHUNK-2": FAKE,
    "CLIENT-CHUNK-3": FAKE, "CLIENT-POLL-1": FAKE, "CLIENT-STATE-1": FAKE,
    "CLIENT-SHAPE-1": FAKE, "LIMIT-RELEASE-1": FAKE, "AUTH-ADMIN-1": FAKE,
    "LIMIT-RETRYAFTER-2": FAKE, "LIMIT-EXPIRE-2": FAKE, "LIMIT-GROUPS-1": FAKE,
    "CLIENT-ONCE-1": FAKE, "CLIENT-ONCE-2": FAKE, "CLIENT-ONCE-3": FAKE, "OP-CANCEL-2": FAKE,
    # the hardening bounds are judged with the fake's own small caps and its admin token
    "AUTH-ADMIN-2": FAKE, "LIMIT-ACCOUNT-1": FAKE, "LIMIT-LATE-1": FAKE, "POLL-EXPIRE-1": FAKE,
    "AUTH-ISOLATION-1": ACCOUNT, "AUTH-ISOLATION-2": ACCOUNT, "AUTH-ISOLATION-3": ACCOUNT, "CAP-ACCOUNT-1": ACCOUNT,
    "IDEM-KEY-4": ACCOUNT,
    "SAVE-LOAD-4": JOBS, "SAVE-DP-1": JOBS, "CKPT-INIT-1": JOBS, "CKPT-INIT-2": JOBS,
    "OP-LORA-1": JOBS, "GEN-SAMPLER-1": JOBS, "JOB-ID-1": JOBS, "JOB-LIST-2": JOBS,
    # The spec's letter: a create with a debug block may start a job; more jobs to cancel and start from
    "JOB-DEBUG-1": JOBS, "JOB-DEBUG-2": JOBS, "CANCEL-ACTIVE-2": JOBS, "CKPT-INIT-4": JOBS,
    "CKPT-INIT-5": JOBS,
    # a multiplex onto a sub-job the caller holds, and a second account's to refuse
    "JOBV-MULTIPLEX-2": ACCOUNT,
}
#: Clauses that were a URL run once skipped and one job judges now.
ONE_JOB = (
    "CANCEL-ACTIVE-1,CANCEL-IDEM-1,JOB-RUNNING-2,POLL-CHUNKS-1,POLL-CHUNKS-2,POLL-CURSOR-1,"
    "POLL-MAXEV-1,CHUNK-FORMAT-1,CHUNK-DESC-1,CHUNK-SIZE-1"
)


@contextmanager
def fake_url(mutant: str | None = None, **settings: Any) -> Iterator[str]:
    """The fake as ``python -m fake_gs.cli --port 0`` serves it (auth off), on loopback."""
    from fake_gs import FakeSettings, serve_in_background

    config = FakeSettings(port=0, variation=mutant, log_level="warning", **settings)
    with serve_in_background(config) as url:
        yield str(url)


def start(url: str, out: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    json_path = out / "results.json"
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("GS_TOKEN", None)
    cmd = [sys.executable, "-m", "conformance.cli", "--url", url, "--json", str(json_path), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env), json_path


def finish(proc: subprocess.Popen[str], json_path: Path) -> tuple[int, dict[str, Any], str]:
    output, _ = proc.communicate(timeout=TIMEOUT_S)
    results = json.loads(json_path.read_text()) if json_path.exists() else {}
    return proc.returncode, results, output


def verdicts(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["id"]: v for v in results.get("verdicts", [])}


@pytest.mark.long  # CI's slow tier runs the whole default URL run through a proxy (test_false_reds)
@pytest.mark.heavy
def test_one_job_judges_its_end_and_a_chunked_result(tmp_path: Path) -> None:
    """Default options, one job: the cancel clauses on the run's own job and the delivery
    clauses on its large result are judged green; the report has the judged fraction and
    the cost line."""
    with fake_url() as url:
        code, results, output = finish(*start(url, tmp_path, "--clauses", ONE_JOB, "--quiet"))
    got = verdicts(results)
    assert results, output[-3000:]
    not_green = {c: (got[c]["status"], got[c]["reason"]) for c in ONE_JOB.split(",")
                 if got[c]["status"] != "green"}
    assert not_green == {}, output[-4000:]
    assert code == 0
    cost = results["cost"]
    assert cost["jobs_created"] == 1, cost
    assert cost["bytes_received"] > MAX_BODY_BYTES, cost  # the large result came back
    assert cost["gpu_minutes"] > 0, cost
    assert re.search(r"judged 10 of 10 MUST clauses on this target", output), output[-2000:]
    assert "cost: 1 job created" in output


@pytest.mark.long  # a URL run for one skip reason; NOTHING JUDGED is held by test_conformance_results
@pytest.mark.heavy
def test_an_inline_answer_skips_naming_the_size_tried(tmp_path: Path) -> None:
    """A server that answers even the large result inline: the delivery clauses are skipped,
    and the reason names the size the run tried (here capped at 2 MiB). With nothing else
    selected the run judged no MUST clause: NOTHING JUDGED, exit 1, never green on nothing."""
    with fake_url(result_delivery="inline") as url:
        code, results, output = finish(*start(
            url, tmp_path, "--clauses", "POLL-CURSOR-1", "--max-result-mib", "2", "--quiet"
        ))
    verdict = verdicts(results)["POLL-CURSOR-1"]
    assert verdict["status"] == "skipped", output[-3000:]
    assert "2.0 MiB result" in verdict["reason"] and "inline" in verdict["reason"]
    assert code == 1 and "NOTHING JUDGED" in output, output[-3000:]


@pytest.mark.heavy
def test_a_slow_start_is_probed_before_running(tmp_path: Path) -> None:
    """Where the server shows pending/placing/initializing long enough to be polled (the
    fake with ``--startup polls:6``), the run's own job is probed there: OP-LOGS-1 and
    JOB-STATE-1 are judged without a second job. JOB-RUNNING-1 pins the kit's 409 where the
    spec also allows a precondition status, so a URL run leaves it not-applicable."""
    clauses = "JOB-RUNNING-1,OP-LOGS-1,JOB-STATE-1"
    with fake_url(startup="polls:6") as url:
        code, results, output = finish(*start(url, tmp_path, "--clauses", clauses, "--quiet"))
    got = verdicts(results)
    assert {c: got[c]["status"] for c in clauses.split(",")} == {
        "JOB-RUNNING-1": "not-applicable", "OP-LOGS-1": "green", "JOB-STATE-1": "green"}, output[-3000:]
    assert code == 0


@pytest.mark.parametrize(
    "mutant,clause", [("cancel-cancelling-409", "CANCEL-IDEM-1"),
                      # the large result, polled again as the default run shrinks (minutes):
                      # ``long``; the kill shards catch this mutant in every CI run
                      pytest.param("cursor-page-consumed", "POLL-CURSOR-1", marks=pytest.mark.long)]
)
@pytest.mark.heavy
def test_a_default_url_run_catches_the_mutant(mutant: str, clause: str, tmp_path: Path) -> None:
    """The fake with the mutant, judged as a URL with default options: the clause is red."""
    with fake_url(mutant) as url:
        code, results, output = finish(*start(url, tmp_path, "--clauses", clause, "--quiet"))
    got = verdicts(results)
    assert got.get(clause, {}).get("status") == "red", output[-3000:]
    assert code == 1, output[-2000:]


@pytest.mark.heavy
def test_the_plan_leaves_out_only_what_one_job_cannot_judge(tmp_path: Path) -> None:
    """``--plan`` against the fake as a URL: every MUST clause it forecasts unjudgeable is
    one that needs the fake's admin API or settings, a second account or more jobs."""
    with fake_url() as url:
        proc = subprocess.run(
            [sys.executable, "-m", "conformance.cli", "--url", url, "--plan"],
            capture_output=True, text=True, timeout=TIMEOUT_S,
            env={k: v for k, v in os.environ.items() if k != "GS_TOKEN"},
        )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = re.findall(r"^  no\s+MUST\s+(\S+)\s+(.*)$", proc.stdout, re.M)
    assert rows, proc.stdout[-2000:]
    unexpected = {cid: why for cid, why in rows if cid not in ALLOWED_SKIPS}
    assert unexpected == {}
    assert re.search(r"planned: \d+ of \d+ MUST clauses", proc.stdout)


@pytest.mark.long
@pytest.mark.heavy
def test_default_url_run_skips_only_what_one_job_cannot_judge(tmp_path: Path) -> None:
    """The whole suite, default options, against the fake as a URL: every skipped MUST
    clause is listed above with its category, and its reason says so; nothing is red."""
    with fake_url() as url:
        code, results, output = finish(*start(url, tmp_path, "--quiet"))
    assert results, output[-3000:]
    got = verdicts(results)
    red = [cid for cid, v in got.items() if v["status"] == "red"]
    assert red == [], output[-6000:]
    skipped = {cid: v["reason"] for cid, v in got.items()
               if v["status"] == "skipped" and v["level"] == "MUST"}
    one_job_could = {cid: why for cid, why in skipped.items() if cid not in ALLOWED_SKIPS}
    assert one_job_could == {}, "skipped although one job on a URL can judge them"
    wrong_reason = {cid: why for cid, why in skipped.items()
                    if not re.search(WHY[ALLOWED_SKIPS[cid]], why)}
    assert wrong_reason == {}
    assert results["cost"]["jobs_created"] == 1
    assert "judged " in output and "MUST clauses on this target" in output
    assert "cost: 1 job created" in output
    assert code == 0


# --- units -----------------------------------------------------------------------------------


def test_large_result_is_sized_past_one_body_and_capped() -> None:
    assert result_bytes(64) == LARGE_RESULT_BYTES > MAX_BODY_BYTES
    assert result_bytes(4) == 4 * MiB
    batch, seq = dims(result_bytes(64), 512)
    assert seq == 512 and batch * seq * 4 >= LARGE_RESULT_BYTES


def test_cost_counts_gpus_and_renders_a_line() -> None:
    body = {"sub_job_configs": [{"training_config": {"n_gpus": 2}},
                                {"inference_config": {"n_gpus": 1}}]}
    assert gpus_of(body) == 3
    line = cost_line({"jobs_created": 1, "gpu_minutes": 0.5, "requests": 3,
                      "bytes_sent": MiB, "bytes_received": 2 * MiB})
    assert line.startswith("cost: 1 job created, 0.50 GPU-minutes")
    assert "1.0 MiB sent, 2.0 MiB received" in line


def test_planner_names_what_a_url_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GS_TOKEN2", raising=False)
    url = GsOptions(url="http://x")
    whys = [n.why for n in unmet(["gs_admin", "gs_raw2", "gs_new_job"], url)]
    assert len(whys) == 3
    assert unmet(["gs_new_job"], GsOptions(url="http://x", max_jobs=2)) == []
    assert unmet(["gs_variant"], url, {"gs_fake_optional"}) == []
    assert [n.why for n in unmet([], url, {"gs_needs_token"})] == ["a token (auth clauses)"]
    assert unmet(["gs_admin", "gs_raw2"], GsOptions()) == []


def test_planner_reads_the_second_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """$GS_TOKEN2 offers a second account as --token2 does (the target reads it too)."""
    monkeypatch.setenv("GS_TOKEN2", "second-pat")
    url = GsOptions(url="http://x")
    assert unmet(["gs_raw2"], url) == []
    assert url.describe()["second_token"] is True
