"""Parity: tapes record real traffic without credentials, replay to zero divergences
against the fake they were recorded from, and diverge (naming exchange and field) when
the fake's behaviour changes."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest
import requests
from parity_helpers import replay, replay_ns

from conformance.parity import report
from conformance.parity.accepted_rules import RuleError, parse_rules
from conformance.parity.cli import main as parity_main
from conformance.parity.cli import replay_tape
from conformance.parity.compare import compare
from conformance.parity.replay import poll_runs, rewrite_path
from conformance.parity.selftest import corpus_tapes, hunt
from contract.auth import auth_headers
from contract.routes import prefix
from contract.tape import blob_bytes, read_tape

ROOT = Path(__file__).resolve().parents[2]
RULES = str(ROOT / "parity" / "accepted.yaml")
SECRET = "tok-7f3a9c-never-in-a-tape"
SECRET2 = "tok-second-b81e-never-in-a-tape"
OTHER = "tok-unknown-55d0-never-in-a-tape"
SERVICE = prefix("PARITY_DB", "PUBLIC")


def _assert_no_secret(path: Path, *secrets: str) -> None:
    """Not in the text, nor inside any kept (compressed) request body, inline or a blob."""
    text = path.read_text()
    for secret in secrets:
        assert secret not in text, f"{secret!r} reached {path}"
    for line in read_tape(str(path)):
        body = (line.get("request") or {}).get("body") or {}
        kept = [zlib.decompress(base64.b64decode(body["z64"]))] if "z64" in body else []
        kept += [blob_bytes(line)] if line["kind"] == "blob" else []
        for raw in kept:
            for secret in secrets:
                assert secret.encode() not in raw, f"{secret!r} is inside a kept body: {line.get('seq')}"


def _record_fake_session(path: Path) -> None:
    from fake_gs import FakeSettings, serve_in_background

    settings = FakeSettings(port=0, tokens=(SECRET, SECRET2), record=str(path), log_level="warning")
    with serve_in_background(settings) as base, requests.Session() as s:
        url = base + SERVICE
        s.get(url + "/capacity", headers=auth_headers(SECRET), timeout=30)
        s.get(url + "/capacity", headers=auth_headers(OTHER), timeout=30)
        s.get(url + "/", headers=auth_headers(SECRET2), params={"access_token": SECRET}, timeout=30)
        body = {"sub_job_configs": [], "token": SECRET, "note": f"Bearer {OTHER}"}
        s.post(url + "/", headers=auth_headers(SECRET), json=body, timeout=30)
        raw = ('{"api_key": "' + SECRET + '", "x": 1,}').encode()  # not JSON: would be kept raw
        s.post(url + "/", headers=auth_headers(SECRET) | {"Content-Type": "application/json"}, data=raw, timeout=30)


def test_fake_tape_never_holds_a_token(tmp_path: Path) -> None:
    tape = tmp_path / "fake.gsrec"
    _record_fake_session(tape)
    _assert_no_secret(tape, SECRET, SECRET2, OTHER)
    lines = [x for x in read_tape(str(tape)) if x["kind"] == "exchange"]
    labels = [x["request"]["headers"].get("authorization") for x in lines]
    assert labels[:3] == ["Bearer <token-1>", "Bearer <token-other>", "Bearer <token-2>"]
    assert lines[2]["request"]["query"] == [["access_token", "<redacted>"]]
    assert lines[3]["request"]["body"]["json"]["token"] == "<redacted>"
    assert "withheld" in lines[4]["request"]["body"]


@pytest.mark.heavy
def test_conformance_tape_never_holds_a_token(tmp_path: Path) -> None:
    tape = tmp_path / "run.gsrec"
    cmd = [sys.executable, "-m", "conformance.cli", "--clauses", "AUTH-REQUIRED-1,AUTH-ISOLATION-1",
           "--examples", "1", "--quiet", "--token", SECRET, "--token2", SECRET2, "--record", str(tape)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert tape.exists(), proc.stdout + proc.stderr
    _assert_no_secret(tape, SECRET, SECRET2)
    labels = {x["request"]["headers"].get("authorization") for x in read_tape(str(tape)) if x["kind"] == "exchange"}
    assert {"Bearer <token-1>", "Bearer <token-2>"} <= labels


def _corpus_tier(tape: Path) -> list[pytest.MarkDecorator]:
    """The two full conformance tapes (kit and spec dialect, 20 s each) replay in ``slow``
    (CI's tests tier keeps to 3 minutes); the small ones in ``tests``."""
    if tape.name.startswith("conformance-current-kit"):
        return [pytest.mark.long]  # CI's 8 minutes: the spec tape replays the same run in slow
    return [pytest.mark.slow] if tape.name.startswith("conformance-current-") else []


@pytest.mark.parametrize("tape", [pytest.param(t, marks=_corpus_tier(t), id=t.name) for t in corpus_tapes()])
@pytest.mark.heavy
def test_corpus_replays_to_zero_divergences(tape: Path) -> None:
    """CI holds the fake to its committed recordings: a change of behaviour is a
    divergence here until the corpus is re-recorded (python -m conformance.parity.corpus)."""
    from conformance.parity.accepted_rules import load_rules

    rep = replay_tape(str(tape), replay_ns(), load_rules(RULES))
    assert rep.ok, report.text([rep])
    replayed = [r for r in rep.results if r.skipped is None]
    assert len(replayed) >= 0.95 * len(rep.results) and len(replayed) > 20
    # Every request body is in the tape, as bytes or as a skeleton.
    assert not [r.seq for r in rep.results if r.skip_kind == "bytes"]


def test_fake_recorded_client_loop_replays_clean(tmp_path: Path) -> None:
    """An RL loop through the client, recorded by the fake (``fake-gs --record``), replays
    to zero divergences (one GRPO step of examples/grpo_toy.py on the shape engine)."""
    from example_loader import load_example

    from client import ClientConfig, create_client
    from fake_gs import FakeSettings, serve_in_background

    toy = load_example("grpo_toy")
    cfg = toy.ToyConfig(steps=1, group_size=2, prompts=toy.DEFAULT_PROMPTS[:2], max_tokens=4,
                        mini_batches=2, seed=5)
    tape = tmp_path / "loop.gsrec"
    settings = FakeSettings(port=0, tokens=(SECRET,), record=str(tape), log_level="warning")
    with serve_in_background(settings) as base:
        client = create_client(ClientConfig(
            base_url=base, pat=SECRET, model="Qwen/Qwen3-0.6B", max_seq_len=256,
            train_batch_size=4, seed=5, poll_first_s=0.005, poll_cap_s=0.05))
        try:
            toy.run_grpo(client, cfg)
        finally:
            client.shutdown()
    _assert_no_secret(tape, SECRET)
    rep = replay_tape(str(tape), replay_ns())
    assert rep.ok, report.text([rep])
    routes = {r.route for r in rep.results}
    assert {"create_job", "generate", "forward_backward", "step", "get_request"} <= routes
    assert not any(r.skipped for r in rep.results)


@pytest.mark.parametrize("mutant", ["auth-ignored", "bare-400", "enum-in-short", "no-request-id-header"])
def test_mutants_diverge_naming_exchange_and_field(mutant: str) -> None:
    """A fast subset of the mutant self-test (the full score: tox -e parity-selftest)."""
    tapes = [t for t in corpus_tapes() if t.name.startswith("conformance-current-kit")]
    kill = hunt(mutant, tapes, RULES)
    assert kill.killed, kill.evidence
    assert "#" in kill.evidence and "differs" in kill.evidence


#: Mutants whose only effect is on numbers (the tiny engine's values) or inside an export
#: URL's text: the default normalisation abstracts both by design (a real service differs
#: from the fake in exactly these); ``--floats close`` sees some of the numeric ones.
BEYOND_NORMALISATION = {
    "tiny-advantages-flipped", "tiny-fwd-ignores-temperature", "tiny-load-partial",
    "tiny-logprobs-shifted", "tiny-sampler-drifts", "tiny-stale-sampler", "tiny-step-ascends",
    # Like tiny-stale-sampler: only the tokens a sampler generates (tensor contents) change.
    "tiny-sampler-fresh",
    "traversal-accepted",
}
#: Mutants of the fake that no replay can reach, each with the reason. (Mutants of the
#: kit's client are never the replay's business: a replay sends the recorded requests
#: itself, the client is not in the loop.)
BEYOND_REPLAY = {
    "late-body-accepted": "acts only on a request whose body is still arriving when a cancel "
                          "ends its job (a raw socket held open across the cancel); a replay sends "
                          "each request whole and in order, so the body never straddles the cancel",
    "logs-stage-empty": "changes only what the stage (an S3 endpoint, listed through boto3) holds; "
                        "the tape records the service's HTTP calls, and the stage-credentials "
                        "answer is the same with or without the mutant",
    # The load mutants act only while another request is in flight on the
    # server; a replay reaches that only by the timing of back-to-back submits, so their
    # judges are gs-load and test_concurrency's held executor, not the corpus.
    "concurrent-step-twice": "acts only while another request is in flight, which a replay "
                             "reaches by timing alone",
    "concurrent-500": "acts only while another request is in flight, which a replay reaches "
                      "by timing alone",
}


@pytest.mark.long
def test_every_answer_changing_mutant_diverges(capsys: pytest.CaptureFixture[str]) -> None:
    """The full parity self-test (tox -e parity-selftest): every mutant, every tape."""
    from fake_gs.controls.mutants import MUTANTS

    fakes = sorted(name for name, m in MUTANTS.items() if not m.client and name not in BEYOND_REPLAY)
    kills = [hunt(name, corpus_tapes(), RULES) for name in fakes]
    with capsys.disabled():
        for k in kills:
            print(f"{'KILLED ' if k.killed else 'SURVIVED'} {k.mutant:<30} {k.evidence}")
        for name, why in sorted(BEYOND_REPLAY.items()):
            print(f"{'UNREACH':<8} {name:<30} {why}")
        answer_changing = [k for k in kills if k.mutant not in BEYOND_NORMALISATION]
        print(f"parity kill score: {sum(k.killed for k in kills)}/{len(kills)} mutants; answer-changing: "
              f"{sum(k.killed for k in answer_changing)}/{len(answer_changing)}")
    survivors = [k.mutant for k in kills if not k.killed and k.mutant not in BEYOND_NORMALISATION]
    assert not survivors, f"answer-changing mutants no tape catches: {survivors}"
    # Replaying against the same fake, numbers must agree too: the semantic mutants show.
    tiny = [hunt(name, corpus_tapes(), RULES, floats="close") for name in sorted(MUTANTS)
            if MUTANTS[name].engine == "tiny"]
    with capsys.disabled():
        for k in tiny:
            print(f"{'KILLED ' if k.killed else 'SURVIVED'} {k.mutant:<30} (--floats close) {k.evidence}")
        print(f"semantic mutants with --floats close: {sum(k.killed for k in tiny)}/{len(tiny)}")


def test_reports_show_each_divergence(tmp_path: Path) -> None:
    tape = next(t for t in corpus_tapes() if t.name.startswith("conformance-current-kit"))
    code = parity_main([str(tape), "--mutant", "auth-ignored", "--rules", RULES, "--quiet", "--fail-fast",
                        "--html", str(tmp_path / "r.html"), "--markdown", str(tmp_path / "r.md"),
                        "--junit", str(tmp_path / "r.xml"), "--json", str(tmp_path / "r.json")])
    assert code == 1
    html = (tmp_path / "r.html").read_text()
    assert "recorded answer" in html and "new answer" in html and ">divergence<" in html
    assert "<code>status</code>" in html and "401" in html
    assert "| exchange |" in (tmp_path / "r.md").read_text()
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1
    replayed = json.loads((tmp_path / "r.json").read_text())["tapes"][0]
    assert replayed["divergent"]
    # What the tape holds, as recorded (the figures docs/parity/tapes.md states of a run).
    lines = read_tape(str(tape))
    assert replayed["recorded"] == {"created": lines[0]["created"], "source": lines[0]["source"],
                                    "tape_bytes": tape.stat().st_size, "exchanges": lines[-1]["exchanges"],
                                    "bodies": lines[-1]["bodies"]}


def test_rule_file_needs_reasons() -> None:
    with pytest.raises(RuleError, match="reason"):
        parse_rules({"accept": [{"field": "body.x"}]})
    with pytest.raises(RuleError, match="unknown keys"):
        parse_rules({"accept": [{"field": "body.x", "reason": "r", "feild": 1}]})
    (rule,) = parse_rules({"accept": [{"field": "body.*_at", "route": "get_*", "reason": "clocks"}]})
    assert rule.reason == "clocks"


def test_compare_normalises_ids_clocks_and_floats() -> None:
    rec = {"status": 200, "headers": {"content-type": "application/json", "x-snowflake-request-id": "a"},
           "body": {"json": {"job_id": "j1", "created_at": 5, "loss": 0.3, "steps": 1,
                             "t": {"$tensor": "F32", "shape": [2, 3]}, "state": "running"}}}
    same = json.loads(json.dumps(rec))
    same["body"]["json"].update(job_id="j2", created_at=9, loss=0.7)
    assert compare(rec, same, {"j1": "j2"}) == []
    close = compare(rec, same, {"j1": "j2"}, floats="close")
    assert [(d.field, d.kind) for d in close] == [("body.loss", "value")]
    bad = json.loads(json.dumps(same))
    bad["body"]["json"].update(loss=-0.1, steps=2, t={"$tensor": "F32", "shape": [2, 2]}, state="done")
    del bad["headers"]["x-snowflake-request-id"]
    found = {(d.field, d.kind) for d in compare(rec, bad, {"j1": "j2"})}
    assert found == {("body.loss", "sign"), ("body.steps", "value"), ("body.t.shape", "shape"),
                     ("body.state", "value"), ("header x-snowflake-request-id", "presence")}


def test_a_gpus_peak_memory_is_a_measurement_not_a_counter() -> None:
    """peak_memory's byte counts (spec §6.2: high-water marks a real GPU measures) differ on
    every step of a real run: compared by class (zero, positive), in either float mode."""
    def step(gpu: int, cpu: int) -> dict[str, object]:
        return {"status": 200, "headers": {"content-type": "application/json"},
                "body": {"json": {"global_steps": 3, "peak_memory": {"gpu_peak": gpu, "cpu_peak": cpu}}}}

    for floats in ("sign", "close"):
        assert compare(step(1_073_741_824, 5 << 28), step(1_081_348_096, 6 << 28), {}, floats=floats) == []
    found = {(d.field, d.kind) for d in compare(step(1 << 30, 1 << 29), step(0, 1 << 29), {})}
    assert found == {("body.peak_memory.gpu_peak", "sign")}
    assert [d.field for d in compare(step(1, 1), step(1, 1) | {"status": 201}, {}, forms=frozenset())] == ["status"]


def test_paths_take_learned_ids_and_poll_loops_settle() -> None:
    req = {"path": "/api/v2/databases/D/schemas/S/cortex-training/j1:cancel",
           "prefix": "/api/v2/databases/D/schemas/S/cortex-training"}
    assert rewrite_path(req, None, {"j1": "j2"}).endswith("/j2:cancel")
    assert rewrite_path(req, "/p", {}) == "/p/j1:cancel"
    poll = {"server": "target", "request": {"method": "GET", "path": "/x", "query": [], "body": None}}
    runs = poll_runs([{**poll, "seq": 1}, {**poll, "seq": 2}, {**poll, "seq": 3}])
    assert {k: v["seq"] for k, v in runs.items()} == {1: 3, 2: 3}


def test_worker_parts_merge_into_one_tape(tmp_path: Path) -> None:
    """Under xdist each worker tapes its own part; the controller merges them."""
    from contract.tape import Exchange, TapeWriter, merge_parts, sink_of

    parts = []
    for worker in ("gw0", "gw1"):
        part = str(tmp_path / f"run.gsrec.{worker}.part")
        writer = TapeWriter(part, "gs-conformance", meta={"worker": worker})
        writer.server(f"{worker}/target", {"embedded": True, "settings": {}})
        for _ in range(2):
            writer.record(Exchange("GET", SERVICE + "/capacity", [], {}, sink_of(b""), 200, {},
                                   sink_of(b'{"a": 1}'), 0.0, 0.001, server=f"{worker}/target"))
        writer.close()
        parts.append(part)
    merge_parts(str(tmp_path / "run.gsrec.gz"), parts)
    lines = read_tape(str(tmp_path / "run.gsrec.gz"))
    assert [x["kind"] for x in lines].count("meta") == 1 and lines[-1]["kind"] == "end"
    exchanges = [x for x in lines if x["kind"] == "exchange"]
    assert [x["seq"] for x in exchanges] == [1, 2, 3, 4]
    assert [x["server"] for x in exchanges] == ["gw0/target"] * 2 + ["gw1/target"] * 2
    assert exchanges[0]["request"]["route"] == "get_capacity"


@pytest.mark.heavy
def test_only_replays_up_to_the_exchange_and_reports_just_it() -> None:
    """``gs-parity TAPE --only N``, the rerun line of a report's failures box: the earlier
    exchanges are replayed (they create what #N uses), only #N is reported."""
    tape = ROOT / "parity" / "rl-loop-grpo.gsrec.gz"
    rep = replay(tape, only=frozenset({6}))
    assert [r.seq for r in rep.results] == [6] and rep.only == (6,)
    assert rep.ok and rep.compared == 1, report.text([rep])
    assert "(only #6)" in report.headline(rep)
