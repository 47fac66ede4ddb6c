"""schemathesis' CLI on ``contract/openapi.json``, run as a server team would, against the fake.

The command is the docs' (the schemathesis check page): every check, phases examples, coverage, fuzzing and stateful,
the shipped ``contract/schemathesis.toml``, against a fake holding the resources the
document's examples name (``--example-data``). It must report no failure (exit status 0),
the fake must log no internal error, every operation must have answered 2xx (the HAR report
tells) and schemathesis must warn of no missing test data. Reach does not rest on the random
phases: the examples phase alone sends every operation a request the fake executes. Two
sizes: CI's small count (``ST_MAX_EXAMPLES`` per operation, 3 by default; ``ST_SEED``, 19)
and, marked long, the page's ``--max-examples 100``.

Two documents: ``contract/openapi.json`` (profile proposed) against the fake in the kit
dialect, and ``contract/openapi-current.json`` (profile current: every form the spec allows,
answers open) against a current-profile fake in the any dialect (``dialect="any"``: integer
codes and 422 detail lists, ``""`` poll fields, request-state synonyms, non-UUID ids,
unknown fields, 200/204 deletes, 2xx cancels, ``last_lr`` lists, ... chosen per answer).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contract.routes import PREFIX_TEMPLATE, ROUTES, Profile, routes_for
from fake_gs import FakeServer, start_in_background

ROOT = Path(__file__).resolve().parents[2]
#: profile -> its committed document (contract.openapi.SNAPSHOTS), and the dialect it is
#: judged in: the proposed one against the kit's own forms, the current one against all.
DOCUMENTS: dict[Profile, Path] = {"proposed": ROOT / "contract" / "openapi.json", "current": ROOT / "contract" / "openapi-current.json"}
RUNS: list[tuple[Profile, str]] = [("proposed", "kit"), ("current", "any")]
RUN_PARAMS = [pytest.param(run, id="-".join(run)) for run in RUNS]
ST_CONFIG = ROOT / "contract" / "schemathesis.toml"
EXAMPLES = int(os.environ.get("ST_MAX_EXAMPLES", "3"))
SEED = os.environ.get("ST_SEED", "19")
#: Generated jobs ask for any number of GPUs; an account with room keeps them running.
ROOMY_ACCOUNT = 10**60
OPERATIONS = {profile: frozenset(r.name for r in routes_for(profile)) for profile in DOCUMENTS}


def st_executable() -> str:
    found = shutil.which("st", path=str(Path(sys.executable).parent)) or shutil.which("st")
    if found is None:
        pytest.skip("schemathesis' `st` command is not installed")
    return found


def st_command(url: str, report_dir: Path, examples: int, profile: Profile = "proposed") -> list[str]:
    """The docs' command, plus a seed and a HAR report for the reach check."""
    return [st_executable(), "--config-file", str(ST_CONFIG), "run", str(DOCUMENTS[profile]), "--url", url,
            "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
            "--max-examples", str(examples), "--seed", SEED, "--no-color",
            "--report", "har", "--report-dir", str(report_dir)]


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    profile, dialect = request.node.callspec.params["run"]
    server = start_in_background(max_total_gpus=ROOMY_ACCOUNT, log_level="critical", dialect=dialect,
                                 profile=profile, seed=int(SEED), example_data=True)
    yield server
    server.stop()


def _pattern(template: str) -> re.Pattern[str]:
    return re.compile("[^/]+".join(re.escape(part) for part in re.split(r"{[a-z_]+}", template)))


#: (method, URL pattern, literal size, operation); the collection also without its slash.
_TEMPLATES = [(r.method, _pattern(t), len(re.sub(r"{[a-z_]+}", "", t)), r.name)
              for r in ROUTES
              for t in ([PREFIX_TEMPLATE + r.path] + ([PREFIX_TEMPLATE] if r.path == "/" else []))]


def _operation_of(method: str, url: str) -> str | None:
    """The operation a HAR entry called: the most specific template its path matches."""
    path = re.sub(r"^https?://[^/]+", "", url).split("?", 1)[0]
    found = [(size, name) for m, pattern, size, name in _TEMPLATES if m == method and pattern.fullmatch(path)]
    return max(found)[1] if found else None


def answered_2xx(har: dict[str, Any]) -> set[str]:
    out = set()
    for entry in har["log"]["entries"]:
        if 200 <= entry["response"]["status"] < 300:
            name = _operation_of(entry["request"]["method"], entry["request"]["url"])
            if name is not None:
                out.add(name)
    return out


def run_and_judge(fake: FakeServer, tmp_path: Path, run: tuple[Profile, str], examples: int) -> None:
    """Run the README's command on the profile's document at ``examples`` per operation and
    assert: no failure, no internal error, every operation answered 2xx, no missing test data."""
    profile, dialect = run
    ALL_OPERATIONS = OPERATIONS[profile]
    done = subprocess.run(st_command(fake.base_url, tmp_path / "reports", examples, profile), cwd=tmp_path,
                          capture_output=True, text=True, timeout=1800)
    out = done.stdout + done.stderr
    har = json.loads(next((tmp_path / "reports").glob("*.json")).read_text(encoding="utf-8"))
    reached = answered_2xx(har)
    missing_data = "Missing test data" in out
    print(f"\n[{profile} document, {dialect} dialect, {examples} examples] st exit {done.returncode}; 2xx from "
          f"{len(reached)}/{len(ALL_OPERATIONS)} operations; not reached: {sorted(ALL_OPERATIONS - reached)}; "
          f"missing-test-data warning: {missing_data}\n{out[-1500:]}")
    assert done.returncode == 0, out[-8000:]
    assert fake.state.store.internal_errors == 0
    assert reached == ALL_OPERATIONS, f"never answered 2xx: {sorted(ALL_OPERATIONS - reached)}"
    assert not missing_data, out[-8000:]


@pytest.mark.long  # CI's 8 minutes: every suite run has its own schemathesis clause (ERR-SCHEMA-1)
@pytest.mark.heavy
@pytest.mark.parametrize("run", RUN_PARAMS)
def test_schemathesis_cli_finds_nothing_and_reaches_every_operation(fake: FakeServer, tmp_path: Path,
                                                                    run: tuple[Profile, str]) -> None:
    run_and_judge(fake, tmp_path, run, EXAMPLES)


@pytest.mark.long
@pytest.mark.parametrize("run", RUN_PARAMS)
def test_schemathesis_cli_at_the_readme_count(fake: FakeServer, tmp_path: Path, run: tuple[Profile, str]) -> None:
    """The docs' ``--max-examples 100`` (``tox -e openapi-reach``): the same verdicts."""
    run_and_judge(fake, tmp_path, run, 100)
