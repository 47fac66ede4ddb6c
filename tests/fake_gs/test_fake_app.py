"""Routing, request ids, envelopes for unknown paths, profiles, admin, CLI start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid

import pytest
import requests
from fake_gs_api import Api, eventually, training_config

from contract.errors import REQUEST_ID_HEADER, is_error_envelope
from contract.routes import ROUTES, routes_for
from fake_gs import FakeSettings, create_app, serve_in_background
from fake_gs.http.app import service_routes
from fake_gs.http.app_state import AppState


@pytest.mark.parametrize("names", [("DB", "PUBLIC", "cortex-training"), ("a b", "s%1", "cortex-post-training")])
def test_any_database_schema_endpoint_routes(api: Api, names: tuple[str, str, str]) -> None:
    other = Api(api.base_url, database=names[0], schema=names[1], endpoint=names[2])
    job_id = other.create_job()
    assert other.job(job_id)["job_id"] == job_id
    # Jobs are not partitioned by prefix names: the same job answers under another prefix.
    assert api.job(job_id)["job_id"] == job_id


def test_collection_with_and_without_trailing_slash(api: Api) -> None:
    assert api.get("/").status_code == 200
    bare = api.session.get(api.prefix, timeout=10)
    assert bare.status_code == 200 and "jobs" in bare.json()


def test_router_is_built_from_the_route_table() -> None:
    state = AppState.build(FakeSettings())
    paths = {(r.path, tuple(sorted(r.methods or ()))) for r in service_routes(state)}  # type: ignore[attr-defined]
    for spec in ROUTES:
        assert any(p.endswith(spec.path) and spec.method in m for p, m in paths), spec.name


def test_current_profile_hides_proposed_routes(make_api) -> None:
    api = make_api(profile="current")
    job_id = api.running_job()
    for spec in ROUTES:
        if spec.profile == "proposed":
            r = api.call(spec.method, spec.render(job_id=job_id), data=b"x", headers={"Content-Type": "application/octet-stream"})
            assert r.status_code == 404 and r.json()["code"] == "route_not_found"
    assert {r.name for r in routes_for("current")} < {r.name for r in ROUTES}


def test_unknown_paths_and_methods_answer_the_envelope(api: Api) -> None:
    for method, path in [("GET", "/x/y/z/w"), ("POST", "/nope/nope/nope")]:
        r = api.call(method, path)
        assert r.status_code == 404 and is_error_envelope(r.json())
    r = api.call("PUT", "/capacity")
    assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"
    # A 405 lists every method of the path (both collection routes), not one route's.
    for path in ("/", ""):
        r = api.call("OPTIONS", path)
        assert r.status_code == 405 and r.headers["allow"] == "GET, POST, HEAD"
    r = api.session.get(api.base_url + "/totally/elsewhere", timeout=10)
    assert r.status_code == 404 and REQUEST_ID_HEADER in r.headers and is_error_envelope(r.json())


def test_request_id_header_on_success_error_and_admin(api: Api) -> None:
    seen = set()
    for r in (api.get("/capacity"), api.get(f"/{uuid.uuid4()}"), api.get("/_fake/health"), api.get("/_fake/state")):
        rid = r.headers[REQUEST_ID_HEADER]
        uuid.UUID(rid)
        seen.add(rid)
    assert len(seen) == 4


def test_colon_paths_do_not_collide(api: Api) -> None:
    job_id = api.create_job()
    assert api.post(f"/{job_id}:cancel").json() == {}
    # GET on the cancel path is the cancel path's 405 (never a cancel, never get-job).
    r = api.get(f"/{job_id}:cancel")
    assert r.status_code == 405 and r.json()["code"] == "method_not_allowed"
    assert r.headers["allow"] == "POST"
    assert api.get(f"/{job_id}").json()["status"] in ("cancelling", "cancelled")
    r = api.post("/capacity")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert api.get("/capacity").json()["max_total_gpus"] == 64


def test_admin_health_state_reset(make_api) -> None:
    api = make_api()
    assert api.get("/_fake/health").json()["status"] == "ok"
    api.create_job()
    assert len(api.state()["jobs"]) == 1
    assert api.post("/_fake/reset").json() == {}
    assert api.state()["jobs"] == {} and api.get("/").json() == {"jobs": []}


def test_admin_variations_listing(api: Api) -> None:
    body = api.get("/_fake/variations").json()
    assert body["active"] is None and len(body["known"]) >= 25
    assert api.get("/_fake/mutants").json() == body  # the older path, still answered
    assert api.get("/_fake/health").json()["variation"] is None
    assert api.state()["settings"]["variation"] is None


def test_serve_in_background_starts_and_stops() -> None:
    """Answers once the context is entered, and the port is closed once it is left."""
    with serve_in_background(seed=3) as url:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        assert requests.get(url + "/_fake/health", timeout=5).status_code == 200
    with pytest.raises(requests.ConnectionError):
        requests.get(url + "/_fake/health", timeout=2)


def test_create_app_is_a_starlette_app_with_state() -> None:
    app = create_app(FakeSettings(seed=5))
    assert isinstance(app.state.fake, AppState) and app.state.fake.settings.seed == 5
    app2 = create_app(seed=7)
    assert app2.state.fake.settings.seed == 7


def _cli(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "fake_gs", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def test_cli_port_0_prints_its_url_and_answers() -> None:
    """``--port 0``: the first line names the OS-chosen port and the fake answers there
    (how fast it starts is the benchmarks' business, not a timed assertion's)."""
    proc = _cli("--port", "0", "--seed", "1", "--log-level", "warning")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        assert match, line
        base = match.group(1)
        assert requests.get(base + "/_fake/health", timeout=30).json()["status"] == "ok"
        rest = "".join(proc.stdout.readline() for _ in range(2))
        assert "/api/v2/databases/" in rest
        assert eventually(lambda: _loaded_torch(proc.pid), timeout_s=120.0), \
            "the engine's torch loads at start-up, before any call needs it"
        job = requests.post(base + "/api/v2/databases/D/schemas/S/cortex-training/",
                            json={"sub_job_configs": [training_config()]}, timeout=30)
        assert job.status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)


def _loaded_torch(pid: int) -> bool:
    import psutil

    return any("libtorch" in m.path for m in psutil.Process(pid).memory_maps())


def test_cli_help_documents_every_option() -> None:
    out = subprocess.run([sys.executable, "-m", "fake_gs", "--help"], capture_output=True, text=True, check=True).stdout
    for option in ("--host", "--port", "--profile", "--seed", "--token", "--strict", "--status-style", "--startup",
                   "--latency", "--result-delivery", "--result-chunk-bytes", "--max-total-gpus",
                   "--allow-any-model", "--engine", "--variation", "--faults", "--log-level",
                   "--body-idle-s", "--max-inflight-mib", "--max-results-mib", "--admin-token"):
        assert option in out, option


def test_cli_rejects_unknown_variation_and_bad_timing() -> None:
    for args in (["--variation", "no-such-variation"], ["--mutant", "no-such-variation"], ["--latency", "polls:x"],
                 ["--startup", "hours:3"]):
        proc = subprocess.run([sys.executable, "-m", "fake_gs", "--port", "0", *args],
                              capture_output=True, text=True, timeout=20)
        assert proc.returncode != 0


def test_settings_reject_unknown_variation() -> None:
    with pytest.raises(ValueError, match="unknown variation"):
        FakeSettings(variation="nope")


def test_the_older_variation_flag_still_parses_hidden_and_warned() -> None:
    """``--mutant`` (the flag's spelling before the rename) sets the variation, is not in
    the help, and warns that it is deprecated."""
    import contextlib
    import io

    from fake_gs.cli import build_parser, settings_from_args

    parser, err = build_parser(), io.StringIO()
    with contextlib.redirect_stderr(err):
        args = parser.parse_args(["--mutant", "bare-400"])
    assert settings_from_args(args).variation == "bare-400"
    assert "--mutant is deprecated; use --variation" in err.getvalue()
    assert settings_from_args(parser.parse_args([])).variation is None
    assert "--mutant" not in parser.format_help()
