"""Self-parity: each recorder, in each dialect, records a run against a fake, and the replay
against a fresh fake finds nothing: 0 divergent, 0 skipped (never for lack of bytes).

Recorders: ``gs-conformance --record`` (against a fake by URL, the docs' parity workflow),
the pytest plugin (``--gs-record``, against the embedded fake) and ``fake-gs --record``
(in-process, for client traffic and for a conformance run's traffic as the fake sees it).
Dialects: every one the suite offers (``contract.forms.DIALECTS``), so a new dialect
is a new parameter here without a line changed. CI runs a small conformance selection
(big bodies, chunk groups, result-chunk pages, a call to a closed port); ``slow`` runs the
whole conformance run, the parity page's three commands, in each dialect.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from parity_helpers import TOKEN, assert_self_parity, chunked_training, replay

from contract.forms import DIALECTS
from contract.tape import read_tape
from fake_gs import FakeSettings, serve_in_background

ROOT = Path(__file__).resolve().parents[2]
#: Clauses whose properties send what a tape must keep to replay: chunk groups, a 0.5 MiB
#: forward with result-chunk pages read by cursor (--max-result-mib 2), retries to a port
#: where nothing listens; by URL also a forward-backward of exactly 60 MiB that executes
#: (the large batch whose answer the mutant below changes).
SMALL = "CLIENT-RETRY-2,POLL-CHUNKS-1,CG-NONFINAL-1,CLIENT-CHUNK-1"
SMALL_URL = SMALL + ",LIMIT-BODY-2"
#: The mutant that changes a large batch's answer (fake_gs/controls/mutants.py).
LARGE_BATCH_MUTANT = "avg-loss-flipped-large"
SMALL_ARGS = ["--profile", "current", "--clauses", SMALL_URL, "--max-result-mib", "2", "--examples", "1"]


#: The any dialect in CI (its answers take the spec's and the kit's forms, chosen per key);
#: the fixed kit and spec dialects are ``long`` (``tox -e long``), for CI's time budget.
CI_ANY = [d if d == "any" else pytest.param(d, marks=pytest.mark.long) for d in DIALECTS]
#: The whole URL run, recorded and replayed, is ``long`` in every dialect (minutes each; CI's
#: 8-minute budget): CI replays the two committed full conformance tapes (test_parity.py) and
#: self-parities the small selection above in the any dialect.
CI_LONG = [pytest.param(d, marks=pytest.mark.long) for d in DIALECTS]


def _fake(dialect: str, **settings: object) -> FakeSettings:
    return FakeSettings(port=0, tokens=(TOKEN,), dialect=dialect, log_level="warning", **settings)  # type: ignore[arg-type]


def _run(cmd: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("bodies", ["bytes", "outline"])
def test_fake_gs_recorder_self_parity(dialect: str, bodies: str, tmp_path: Path) -> None:
    """``fake-gs --record`` of training through the client, batches cut into 1 MiB chunks:
    kept as blobs (default) or as skeletons, the replay sends every chunk again."""
    tape = tmp_path / "fake.gsrec"
    with serve_in_background(_fake(dialect, record=str(tape), record_bodies=bodies)) as base:
        chunked_training(base)
    end = read_tape(str(tape))[-1]["bodies"]
    assert end["stored" if bodies == "bytes" else "rebuilt"] >= 3, end
    rep = replay(tape)
    assert_self_parity(rep)
    assert (rep.rebuilt > 0) == (bodies == "outline")


def _conformance_url_run(dialect: str, tmp_path: Path, args: list[str], timeout_s: float) -> tuple[Path, Path]:
    """A ``gs-conformance --url --record`` run against a fake that records too; both tapes."""
    run, seen = tmp_path / "run.gsrec", tmp_path / "fake.gsrec"
    with serve_in_background(_fake(dialect, record=str(seen))) as url:
        _run([sys.executable, "-m", "conformance.cli", "--url", url, "--token", TOKEN, "--record", str(run),
              "--quiet", *args], tmp_path, timeout_s)
    return run, seen


def _replay_both(dialect: str, run: Path, seen: Path) -> None:
    with serve_in_background(_fake(dialect)) as fresh:
        assert_self_parity(replay(run, url=fresh, token=TOKEN))
    assert_self_parity(replay(seen))


@pytest.mark.heavy
@pytest.mark.parametrize("dialect", CI_LONG)
def test_conformance_url_run_self_parity(dialect: str, tmp_path: Path) -> None:
    """``gs-conformance --url --record`` (small) against a recording fake: its tape replays
    by URL against a fresh fake, the fake's own tape against an embedded one, both clean."""
    run, seen = _conformance_url_run(dialect, tmp_path, SMALL_ARGS, 300)
    lines = read_tape(str(run))
    assert any(x["kind"] == "blob" for x in lines), "the 0.5 MiB forward was not kept out of line"
    assert any(x["kind"] == "exchange" and x["response"]["status"] == 0 for x in lines)
    _replay_both(dialect, run, seen)
    # A fake answering a large batch wrongly: the replay points at that batch's answer.
    with serve_in_background(_fake(dialect, variation=LARGE_BATCH_MUTANT)) as wrong:
        rep = replay(run, url=wrong, token=TOKEN)
    found = [(r.group, d.field, d.kind) for r in rep.divergent for d in r.divergences if d.accepted is None]
    assert found == [("data/test_limits.py::test_exactly_at_limit_accepted", "body.result.avg_loss", "sign")], found


@pytest.mark.heavy
@pytest.mark.parametrize("dialect", CI_ANY)
def test_plugin_recorder_self_parity(dialect: str, tmp_path: Path) -> None:
    """``pytest --pyargs conformance.properties --gs-record`` against the embedded fake."""
    tape = tmp_path / "plugin.gsrec"
    _run([sys.executable, "-m", "pytest", "--pyargs", "conformance.properties", "-p", "no:cacheprovider",
          "-o", "addopts=", "-q", "--gs-record", str(tape), "--gs-dialect", dialect, "--gs-profile", "current",
          "--gs-clauses", SMALL, "--gs-examples", "1"], tmp_path, 300)
    assert_self_parity(replay(tape))


@pytest.mark.long
@pytest.mark.parametrize("dialect", DIALECTS)
def test_full_conformance_run_self_parity(dialect: str, tmp_path: Path) -> None:
    """The parity page's three commands at full size (every current property, the URL run's
    examples, its 64 MiB result): record by URL (and by the fake), replay, nothing found."""
    run, seen = _conformance_url_run(dialect, tmp_path, ["--profile", "current"], 1200)
    end = read_tape(str(run))[-1]
    assert end["exchanges"] > 500 and end["bodies"]["stored"] >= 1, json.dumps(end)
    _replay_both(dialect, run, seen)


@pytest.mark.heavy
def test_a_tape_recorded_against_a_url_replays_against_the_embedded_fake(tmp_path: Path) -> None:
    """A server team's tape (recorded against a URL: here the fake, by URL) replays without
    ``--url`` against an embedded fake in the recorded profile: almost everything compared,
    nothing divergent (docs/parity: CI holds the fake to it). Before, every exchange was skipped ("a real service; replay it with --url")."""
    args = ["--profile", "current", "--clauses", SMALL, "--max-result-mib", "2", "--examples", "1"]
    run, _ = _conformance_url_run("kit", tmp_path, args, 300)
    rep = replay(run)
    assert rep.ok, "\n".join(rep.notes)
    assert rep.compared >= 0.95 * len(rep.results) and len(rep.results) > 10, (rep.compared, len(rep.results))
    assert any("replayed against an embedded fake" in n and "profile current" in n for n in rep.notes), rep.notes


def test_a_replay_that_compared_nothing_is_red(tmp_path: Path) -> None:
    """Every exchange skipped (here: recorded against a server no replay can stand in for):
    the headline says so in red and the exit status is 1, never PARITY."""
    from conformance.parity.cli import main as parity_main

    tape = tmp_path / "nothing.gsrec"
    lines = [{"kind": "meta", "format": "gs-parity-tape", "version": 2, "source": "gs-conformance",
              "profile": "current"},
             {"kind": "server", "name": "elsewhere", "embedded": False, "url": "http://127.0.0.1:9"}]
    lines += [{"kind": "exchange", "seq": n, "server": "elsewhere", "group": "g", "t": n, "ms": 1.0,
               "request": {"method": "GET", "path": "/api/v2/databases/D/schemas/S/cortex-training/", "query": [], "headers": {}, "body": None},
               "response": {"status": 200, "headers": {}, "body": None}} for n in (1, 2)]
    tape.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rep = replay(tape)
    assert rep.compared == 0 and not rep.ok
    code = parity_main([str(tape), "--junit", str(tmp_path / "r.xml")])
    assert code == 1
    from conformance.parity import report

    assert report.headline(rep).startswith("NOTHING COMPARED")
