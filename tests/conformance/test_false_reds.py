"""The suite passes good servers: the fake, judged as any URL would be (through a plain
loopback proxy that forwards only the service prefix), in its kit dialect and in the any
dialect (every form the spec allows, chosen per answer: ``fake-gs --dialect any``, a seed
of its own), exits 0 with no red clause in profile ``current`` with default options;
``--require-all`` turns the clauses it could not judge there into a failure that names them.

The mutant self-test (test_mutants.py) proves the suite catches bad servers; this proves it
does not fail good ones. The two full runs take a minute or two each, so they are marked
``slow``: ``tox -e tests`` (CI, ``.ci/run``) runs them, ``-m "not slow"`` leaves them out
of a quick local run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback_proxy import loopback_proxy

TOKEN = "false-reds-token"
TIMEOUT_S = 900


#: (dialect, seed): the spec dialect's fixed forms are among the any dialect's choices
#: (the embedded plain runs of test_mutants.py judge another seed of it).
#: CI's slow tier keeps the any dialect (its answers take every form, the kit's among them);
#: the kit dialect's proxy run is ``long`` (``tox -e long``), for the 8-minute CI budget.
DIALECTS = [pytest.param(("kit", 0), id="kit", marks=pytest.mark.long), pytest.param(("any", 11), id="any")]


@pytest.fixture(params=DIALECTS)
def proxied_fake(request: pytest.FixtureRequest) -> Iterator[str]:
    """The fake (profile current, auth on, the dialect) behind a loopback proxy."""
    from fake_gs import FakeSettings, serve_in_background

    dialect, seed = request.param
    settings = FakeSettings(port=0, profile="current", tokens=(TOKEN,), dialect=dialect, seed=seed,
                            log_level="warning")
    with serve_in_background(settings) as upstream, loopback_proxy(str(upstream)) as url:
        yield url


def gs_conformance(url: str, out: Path, *args: str) -> tuple[int, dict[str, Any], str, float]:
    """Run ``gs-conformance --url URL`` in a fresh interpreter; (exit, results, output, s)."""
    json_path = out / "results.json"
    env = {**os.environ, "GS_TOKEN": TOKEN, "NO_COLOR": "1"}
    cmd = [sys.executable, "-m", "conformance.cli", "--url", url, "--profile", "current",
           "--json", str(json_path), "--quiet", *args]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    took = time.monotonic() - started
    results = json.loads(json_path.read_text()) if json_path.exists() else {}
    return proc.returncode, results, proc.stdout + proc.stderr, took


@pytest.mark.slow
@pytest.mark.heavy
def test_a_conformant_server_exits_0_with_no_red(proxied_fake: str, tmp_path: Path) -> None:
    code, results, output, took = gs_conformance(proxied_fake, tmp_path)
    red = [v["id"] for v in results.get("verdicts", []) if v["status"] == "red"]
    assert results, output[-3000:]
    assert red == [], output[-6000:]
    assert code == 0, output[-3000:]
    counts = results["counts"]
    assert counts["green"] > 100 and counts["not-applicable"] > 0, counts
    print(f"\nproxy run ({proxied_fake}): {took:.1f}s, {counts}")


@pytest.mark.heavy
def test_require_all_fails_on_the_skipped_musts_and_names_them(
    proxied_fake: str, tmp_path: Path
) -> None:
    """Restricted to the auth clauses (fast): the isolation clauses need a second token and
    the admin clauses the fake's admin API, so against a URL they are skipped; --require-all
    fails the run and names each."""
    lenient, results, _, _ = gs_conformance(proxied_fake, tmp_path, "--clauses", "AUTH-*")
    skipped = sorted(v["id"] for v in results["verdicts"] if v["status"] == "skipped")
    assert skipped == ["AUTH-ADMIN-1", "AUTH-ADMIN-2", "AUTH-ISOLATION-1", "AUTH-ISOLATION-2",
                       "AUTH-ISOLATION-3"], \
        results["counts"]
    assert lenient == 0
    strict, _, output, _ = gs_conformance(
        proxied_fake, tmp_path, "--clauses", "AUTH-*", "--require-all"
    )
    assert strict == 1, output[-3000:]
    assert "--require-all: 5 skipped MUST clauses fail the run" in output
    assert all(cid in output for cid in skipped)
    assert "--token2" in output  # what would enable the isolation clauses


def _takes_what_the_fake_refuses(method: str, path: str, body: bytes | None) -> bytes | None:
    """A server that reads requests the other way the spec allows: it ignores a body on an
    export or a cancel (spec §5.5, §5.8: neither has one) and routes an operation naming no
    receiver to a default one (spec §7: the routing hints are optional)."""
    if method == "POST" and path.endswith((":export", ":cancel")):
        return None
    if method == "POST" and path.endswith("/operation") and body:
        call = json.loads(body)
        if isinstance(call, dict) and not {"sub_job_id", "sub_job_type"} & set(call):
            receiver = "sampling" if call.get("operation_type") == "router-replay-discard" else "training"
            return json.dumps({**call, "sub_job_type": receiver}).encode()
    return body


@pytest.mark.slow
def test_a_server_taking_a_body_or_a_hintless_operation_is_green(tmp_path: Path) -> None:
    """CANCEL-BODY-2 and OP-HINT-1 pin the fake's refusal; a server that takes the call
    instead, as the spec's words allow, is green on them, not red (decided clauses never
    fail a real server, and should not read as failures either)."""
    from fake_gs import FakeSettings, serve_in_background

    settings = FakeSettings(port=0, profile="current", tokens=(TOKEN,), log_level="warning")
    with serve_in_background(settings) as upstream, \
            loopback_proxy(str(upstream), rewrite_request=_takes_what_the_fake_refuses) as url:
        code, results, output, _ = gs_conformance(url, tmp_path, "--clauses", "CANCEL-BODY-2,OP-HINT-1")
    status = {v["id"]: v["status"] for v in results.get("verdicts", [])}
    assert status == {"CANCEL-BODY-2": "green", "OP-HINT-1": "green"}, output[-3000:]
    assert code == 0
