"""The ``fake_gs`` pytest plugin, run in-process by pytester: the gate's verdicts and
modes, declarations, faults, per-test settings and isolation, the coverage floor."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# The in-process runs put sys.modules back after each run; torch (which the fake's warm-up
# imports) cannot be imported a second time once its extension is loaded, so it is loaded
# here, before any run, and the runs find it already there.
try:
    import torch  # noqa: F401
except ImportError:  # a kit without torch: the fake's warm-up skips it too
    pass

PLUGIN = ("-p", "fake_gs.testing.plugin", "-p", "no:cacheprovider")

#: Raw calls a client team might make, shared by the generated test files.
HELPERS = '''
import pytest, requests

def create(fake_gs, **extra):
    body = {"sub_job_configs": [{"job_type": "training", "model_name": "Qwen/Qwen3-0.6B",
            "training_config": {"optimizer": {"name": "AdamW", "lr": 1e-4}, "max_seq_len": 64,
                                "train_batch_size": 2, "n_gpus": 1}, **extra}]}
    answer = requests.post(fake_gs.service_url + "/", json=body, headers=fake_gs.headers, timeout=30)
    return answer

def missing_job(fake_gs):
    return requests.get(fake_gs.service_url + "/no-such-job", headers=fake_gs.headers, timeout=30)
'''


def run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_gate=HELPERS + textwrap.dedent(body))
    return pytester.runpytest(*PLUGIN, "-rA", *args)


def test_undeclared_refusal_fails_and_names_the_exchange(pytester):
    result = run(pytester, """
        def test_ignores_404(fake_gs):
            assert missing_job(fake_gs).status_code == 404

        def test_declares_404(fake_gs):
            fake_gs.expect_error("job_not_found")
            assert missing_job(fake_gs).status_code == 404

        def test_declares_status(fake_gs):
            fake_gs.expect_error(404)
            missing_job(fake_gs)
    """)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*fake_gs gate: 1 problem(s)*test_ignores_404*",
        "*GET /{job_id} [[]get_job[]] -> 404 job_not_found: job 'no-such-job' not found*",
    ])


def test_unknown_fields_fail_unless_declared(pytester):
    result = run(pytester, """
        def test_sends_extra(fake_gs):
            assert create(fake_gs, colour="red").status_code == 200

        def test_declared(fake_gs):
            fake_gs.expect_error("unknown_field")
            create(fake_gs, colour="red")

        @pytest.mark.fake_gs(strict=True)
        def test_strict_fake_refuses(fake_gs):
            assert create(fake_gs, colour="red").status_code == 400
    """)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*unknown field(s) sub_job_configs.0.colour sent in*POST / [[]create_job[]]*"])
    result.stdout.fnmatch_lines(["*test_strict_fake_refuses*", "*-> 400 unknown_field*"])


def test_modes_and_relax_marker(pytester):
    body = """
        def test_ignores_404(fake_gs):
            missing_job(fake_gs)

        @pytest.mark.fake_gs_gate("off")
        def test_relaxed(fake_gs):
            missing_job(fake_gs)

        @pytest.mark.fake_gs_gate(allow=("errors",))
        def test_allowed(fake_gs):
            missing_job(fake_gs)
    """
    run(pytester, body).assert_outcomes(passed=2, failed=1)
    warned = run(pytester, body, "--fake-gs-gate=warn")
    warned.assert_outcomes(passed=3)
    warned.stdout.fnmatch_lines(["*FakeGsGateWarning: fake_gs gate: 1 problem(s)*test_ignores_404*"])
    run(pytester, body, "--fake-gs-gate=off").assert_outcomes(passed=3)
    pytester.makeini("[pytest]\nfake_gs_gate = warn\n")
    run(pytester, body).assert_outcomes(passed=3)
    run(pytester, body, "--fake-gs-gate=fail").assert_outcomes(passed=2, failed=1)  # the option wins


def test_teardown_calls_are_judged_and_failed_tests_not_twice(pytester):
    result = run(pytester, """
        @pytest.fixture
        def sloppy(fake_gs):
            yield
            missing_job(fake_gs)  # a cleanup call the service refuses

        def test_body_is_clean(fake_gs, sloppy):
            pass

        def test_fails_by_itself(fake_gs):
            missing_job(fake_gs)
            assert False, "the test's own failure"
    """)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*fake_gs gate: 1 problem(s)*test_body_is_clean (teardown)*"])
    assert "test_fails_by_itself (" not in result.stdout.str()


def test_faults_block_installs_and_restores_rules(pytester):
    result = run(pytester, """
        def capacity(fake_gs):
            try:
                return requests.get(fake_gs.service_url + "/capacity", headers=fake_gs.headers).status_code
            except requests.RequestException:  # the cut comes mid-answer
                return "cut"

        def test_retried_503_and_cut(fake_gs):
            rules = ({"route": "get_capacity", "nth": 1, "status": 503},
                     {"route": "get_capacity", "nth": 1, "drop": True})  # counts the calls rule 1 let pass
            with fake_gs.faults(*rules) as installed:
                seen = [capacity(fake_gs) for _ in range(3)]
            assert seen == [503, "cut", 200]
            assert installed.fired == 2
            assert [(ex.status, ex.injected) for ex in fake_gs.traffic()] == [(503, True), (-1, True), (200, False)]
            assert fake_gs.admin.call("GET", "faults")["rules"] == []

        def test_real_refusal_under_a_delay_rule_still_counts(fake_gs):
            with fake_gs.faults({"route": "get_job", "delay_s": 0.01}):
                missing_job(fake_gs)
    """)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_real_refusal_under_a_delay_rule_still_counts*", "*-> 404 job_not_found*"])


def test_settings_marker_isolation_and_state(pytester):
    result = run(pytester, """
        URLS = []

        @pytest.mark.fake_gs(status_style="enum", dialect="spec", latency="polls:2")
        def test_enum(fake_gs):
            URLS.append(fake_gs.base_url)
            job = create(fake_gs).json()["job_id"]
            got = requests.get(fake_gs.service_url + "/" + job, headers=fake_gs.headers).json()
            assert got["status"].startswith("JOB_STATE_")
            assert fake_gs.settings.status_style == "enum" and fake_gs.settings.dialect == "spec"
            assert str(fake_gs.settings.latency) == "polls:2"

        def test_own_account_a(fake_gs):
            URLS.append(fake_gs.base_url)
            job = create(fake_gs).json()["job_id"]
            assert list(fake_gs.state()["jobs"]) == [job]
            assert [ex.route for ex in fake_gs.traffic()] == ["create_job"]

        def test_own_account_b(fake_gs):
            test_own_account_a(fake_gs)
            enum, default_a, default_b = URLS
            assert default_a == default_b != enum  # one fake per distinct settings, started once
    """)
    result.assert_outcomes(passed=3)


def test_a_team_opts_into_the_any_dialect_with_the_marker(pytester):
    """``@pytest.mark.fake_gs(dialect="any", seed=N)``: every form the spec allows, chosen
    per answer; a refusal the test declares by the kit's code is declared whatever form its
    body takes, and a test reading the answers by the spec's letter passes."""
    result = run(pytester, """
        from contract.states import normalize_job_state

        @pytest.mark.fake_gs(dialect="any", seed=7)
        def test_plumbing_in_any_form(fake_gs):
            assert fake_gs.settings.dialect == "any"
            seen = set()
            for _ in range(12):
                job = create(fake_gs).json()["job_id"]
                got = requests.get(fake_gs.service_url + "/" + job, headers=fake_gs.headers).json()
                seen.add(got["status"])
                assert normalize_job_state(got["status"]) == "running"
                cancel = requests.post(fake_gs.service_url + "/" + job + ":cancel", headers=fake_gs.headers)
                assert 200 <= cancel.status_code < 300
            fake_gs.expect_error("job_not_found")
            assert missing_job(fake_gs).status_code == 404
            assert len(seen) > 1, seen  # another spelling than the kit's showed up
    """)
    result.assert_outcomes(passed=1)


def test_open_chunk_group_fails_the_test(pytester):
    result = run(pytester, """
        from contract import wire

        def test_abandons_upload(fake_gs):
            job = create(fake_gs).json()["job_id"]
            frame = wire.dumps({"note": "x" * 20000})
            first = wire.encode_byte_chunks(frame, "request", "forward_backward", max_bytes=16384)[0]
            headers = {**fake_gs.headers, "Content-Type": "application/octet-stream"}
            url = f"{fake_gs.service_url}/{job}/forward-backward"
            assert requests.post(url, data=first, headers=headers).status_code == 202
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*chunk group * of job * (forward_backward) left open: 1 of 3 chunks received*"])


def test_an_abandoned_big_upload_does_not_fail_a_later_test(pytester):
    """Tests of one worker share a fake (each its own account): a test that abandons an
    upload holding most of the server's chunk budget does not make a later correct test's
    upload answer 429; the abandoned group gives way to the later account's fair share."""
    result = run(pytester, """
        import mmap, uuid
        import torch
        from contract import wire
        from client.rest import CortexRestClient

        ROOMY = pytest.mark.fake_gs(max_buffered_bytes_total=4 * 1024 * 1024)

        @ROOMY
        @pytest.mark.fake_gs_gate(allow=("open_chunk_groups",))
        def test_abandons_a_big_upload(fake_gs):
            job = create(fake_gs).json()["job_id"]
            ids = torch.frombuffer(mmap.mmap(-1, 3584 * 1024), dtype=torch.int64).reshape(-1, 64)
            plan = wire.plan_chunks(wire.dumps_parts({"args": [], "kwargs": {"input_ids": ids}}), "request",
                                    "forward-backward", 64 * 1024, str(uuid.uuid4()), True)
            headers = {**fake_gs.headers, "Content-Type": "application/octet-stream"}
            url = f"{fake_gs.service_url}/{job}/forward-backward"
            assert requests.post(url, data=plan.chunk(0), headers=headers).status_code == 202

        @ROOMY
        def test_uploads_after_it(fake_gs):
            client = CortexRestClient(fake_gs.client_config(max_chunk_bytes=512 * 1024, retries=0))
            job = create(fake_gs).json()["job_id"]
            client.wait_running(job)
            batch = {"args": [], "kwargs": {"input_ids": torch.ones(2048, 64, dtype=torch.int64)}}
            assert "avg_loss" in client.wait(job, client.forward_backward(job, batch)["request_id"])
    """)
    result.assert_outcomes(passed=2)


def test_coverage_report_and_floor(pytester):
    body = """
        def test_create(fake_gs):
            create(fake_gs)
    """
    result = run(pytester, body, "--fake-gs-coverage")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*fake_gs coverage*", "*routes*1/19*5.3%*", "*exercised: create_job*"])
    assert result.ret == 0
    floor = run(pytester, body, "--fake-gs-coverage-min=50")
    floor.assert_outcomes(passed=1)
    floor.stdout.fnmatch_lines(["FAIL: routes exercised 5.3% (--fake-gs-coverage-min=50)"])
    assert floor.ret == pytest.ExitCode.TESTS_FAILED


def test_importing_the_plugin_stays_light():
    code = ("import sys, fake_gs.testing.plugin; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'hypothesis', 'schemathesis', 'client', 'conformance'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_docs_ci_test_passes(pytester):
    """The ten-line test of the docs' "Use the fake in your CI" page runs green as printed."""
    section = (Path(__file__).resolve().parents[2] / "docs" / "client-teams" / "ci-gate.md").read_text()
    start = section.index("```python") + len("```python")
    pytester.makepyfile(test_readme=section[start:section.index("```", start)])
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)
