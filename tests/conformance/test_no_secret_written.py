"""Nothing the kit writes holds a credential of the run.

The recorders and the reports run with real tokens and real stage credentials, then every
file they wrote is searched for each secret (kept, compressed request bodies included):

- ``fake-gs --record`` and the fake's access log, while the kit's client runs a job, saves
  and exports a checkpoint, downloads the export and fetches the execution logs (the AWS
  key id, secret key and session token of the stage; the export URL's token);
- ``gs-conformance --record`` with every report form (HTML, Markdown, JSON, JUnit, the
  terminal) against a server that echoes the ``Authorization`` header into its error
  bodies, so that its refusals carry the run's tokens into the failing examples.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
import secrets
import subprocess
import sys
import zlib
from collections.abc import Iterable
from pathlib import Path

import pytest
import requests
from loopback_proxy import loopback_proxy

from client.calls.session import HttpSettings
from client.config import ClientConfig
from client.rest import CortexRestClient
from contract.auth import unrelated_token
from contract.logs import STATEMENTS_PATH, parse_stage_credentials, stage_credentials_statement
from contract.redact import REDACTED, mask, scrub_text
from contract.tape import open_text, read_tape
from fake_gs import FakeSettings, serve_in_background

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(poll_first_s=0.001, poll_factor=1.5, poll_cap_s=0.02, backoff_first_s=0.001,
            backoff_cap_s=0.005, job_start_timeout_s=60.0, cancel_on_shutdown=False)


def _secret(kind: str) -> str:
    return f"{kind}-{secrets.token_hex(12)}"


def assert_absent(paths: Iterable[Path], found_secrets: Iterable[str], also: str = "") -> None:
    """No secret in any file (gzip read as text; kept tape bodies decompressed) or ``also``."""
    wanted = [s for s in found_secrets if s]
    for path in paths:
        text = open_text(str(path)).read() if path.suffix == ".gz" else path.read_text(errors="replace")
        if ".gsrec" in path.name:
            for line in read_tape(str(path)):
                body = (line.get("request") or {}).get("body") or {}
                if "z64" in body:
                    text += zlib.decompress(base64.b64decode(body["z64"])).decode("utf-8", "replace")
        _assert_no_fragment(text, wanted, path.name)
    _assert_no_fragment(also, wanted, "the terminal")


#: A run of this many characters of a credential is a leak (a truncated token still is one).
FRAGMENT = 8


def _assert_no_fragment(text: str, wanted: Iterable[str], where: str) -> None:
    """No secret, and no ``FRAGMENT``-character run of one, in ``text``."""
    for secret in wanted:
        runs = {secret[i:i + FRAGMENT] for i in range(max(len(secret) - FRAGMENT + 1, 1))}
        hit = next((run for run in runs if run in text), None)
        assert hit is None, f"{secret[:4]}... reached {where} (its run {hit[:4]}...)"


def test_fake_recorder_and_access_log_hold_no_credential(tmp_path: Path) -> None:
    pytest.importorskip("moto")
    pytest.importorskip("boto3")
    pat, pat2, admin = _secret("pat"), _secret("pat2"), _secret("admin")
    tape, log_file = tmp_path / "fake.gsrec.gz", tmp_path / "access.log"
    handler = logging.FileHandler(log_file)
    loggers = [logging.getLogger("fake_gs.access"), logging.getLogger("fake_gs")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    settings = FakeSettings(port=0, tokens=(pat, pat2), admin_token=admin, record=str(tape))
    try:
        with serve_in_background(settings) as base:
            config = ClientConfig(base_url=base, pat=pat, **FAST)
            rest = CortexRestClient(config)
            from client.jobspec import create_job_body

            job_id = rest.create_job(create_job_body(config))["job_id"]
            rest.wait_running(job_id)
            saved = rest.wait(job_id, rest.save(job_id, "ckpt-1")["request_id"])
            export = rest.export_checkpoint(job_id, saved.get("checkpoint_id", "ckpt-1"))
            url = export["files"][0]["url"]
            assert requests.get(url, timeout=30).status_code == 200
            run = rest.get_experiment_run(job_id)
            sql = stage_credentials_statement(run["experiment_name"], run["experiment_run_name"])
            row = requests.post(base + STATEMENTS_PATH, json={"statement": sql}, timeout=30,
                                headers={"Authorization": f"Bearer {pat}",
                                         "X-Snowflake-Authorization-Token-Type": "PROGRAMMATIC_ACCESS_TOKEN"})
            creds = parse_stage_credentials(row.json()["data"][0][0])
            assert rest.fetch_execution_logs(job_id)
            requests.get(base + "/_fake/state", headers={"Authorization": f"Bearer {admin}"}, timeout=30)
            reprs = repr(settings) + repr(HttpSettings.from_config(config, base, "/p")) + repr(creds)
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
        handler.close()
    token = url.rstrip("/").rsplit("/", 1)[-1]
    found = (pat, pat2, admin, token, creds.access_key_id, creds.secret_access_key, creds.session_token)
    assert "exports/" in log_file.read_text()  # the download was logged, without its token
    assert_absent([tape, log_file], found, also=reprs)


def test_credentials_are_scrubbed_wherever_they_sit() -> None:
    """Known tokens, and by their look: in nested JSON, reprs, presigned URLs, export paths."""
    key_id, secret_key, session = "ASIA" + "Q" * 16, "s3cr3t/KEY+" + "x" * 29, "FQoG" + "z" * 60
    creds = json.dumps({"creds": {"AWS_KEY_ID": key_id, "AWS_SECRET_KEY": secret_key, "AWS_TOKEN": session}})
    presigned = f"https://b.s3.amazonaws.com/m?X-Amz-Credential={key_id}%2F&X-Amz-Signature=ab12&X-Amz-Security-Token={session}"
    texts = [json.dumps({"data": [[creds]]}), repr({"SecretAccessKey": secret_key, "SessionToken": session}),
             presigned, "GET /_fake/exports/Zm9vYmFyYmF6cXV1eDEy 200", "Bearer pat-abc in a message", "tok-1 echoed"]
    out = scrub_text("\n".join(texts), ["tok-1"])
    for secret in (key_id, secret_key, session, "ab12", "Zm9vYmFyYmF6cXV1eDEy", "pat-abc", "tok-1"):
        assert secret not in out, secret
    assert "<url-token-" in out and out.count(REDACTED) >= 9
    masked = mask({"data": [[creds]]})
    assert secret_key not in json.dumps(masked) and key_id not in json.dumps(masked)


def test_the_wrong_token_probe_shares_nothing_with_the_real_one() -> None:
    for real in ("gs-conformance-token-a", secrets.token_hex(32), "0123456789abcdef" * 8):
        probe = unrelated_token(real)
        assert not any(probe[i:i + 4] in real for i in range(len(probe) - 3)), (real, probe)


#: The log stage's credentials the proxy saw go to the suite (AWS key id, secret, session token).
_STAGE_SECRET = re.compile(rb'AWS_(?:KEY_ID|SECRET_KEY|TOKEN)\\*"\s*:\s*\\*"([^"\\]+)')


_SPOIL_SECRET = re.compile(rb'(AWS_SECRET_KEY\\*"\s*:\s*\\*")([^"\\]+)')


def echo_authorization(status: int, headers: dict[str, str], data: bytes,
                       seen: list[str] | None = None) -> bytes:
    """A careless server: every error body repeats the Authorization header it was sent
    (and drops its code, so the clauses that judge it go red and their examples show it).
    ``seen`` collects the stage credentials the answers carry."""
    if seen is not None:
        # The secret key is spoilt on the way (the listing then fails, so the statement's
        # answer shows in JOB-LOGS-1's failing example); what the suite got is collected.
        data = _SPOIL_SECRET.sub(lambda m: m[1] + b"spoilt" + m[2][6:], data)
        seen.extend(m.decode() for m in _STAGE_SECRET.findall(data))
    if status < 400 or not data.startswith(b"{"):
        return data
    body = json.loads(data)
    sent = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
    body["message"] = f"{body.get('message', '')} (you sent Authorization: {sent})"
    body.pop("code", None)
    return json.dumps(body).encode()


@pytest.mark.heavy
def test_conformance_tape_and_reports_hold_no_token(tmp_path: Path) -> None:
    pat, pat2 = _secret("pat"), _secret("pat2")
    out = {name: tmp_path / name for name in ("run.gsrec", "r.html", "r.md", "r.xml", "r.json")}
    settings = FakeSettings(port=0, tokens=(pat, pat2))
    stage: list[str] = []
    echo = functools.partial(echo_authorization, seen=stage)
    with serve_in_background(settings) as base, loopback_proxy(base, echo) as url:
        cmd = [sys.executable, "-m", "conformance.cli", "--url", url, "--database", "DB", "--schema", "PUBLIC",
               "--clauses", "AUTH-REQUIRED-2,AUTH-ISOLATION-1,ERR-ENVELOPE-1,JOB-LOGS-1",
               "--examples", "1", "--token", pat, "--token2", pat2, "--record", str(out["run.gsrec"]),
               "--report", str(out["r.html"]), "--markdown", str(out["r.md"]),
               "--junit", str(out["r.xml"]), "--json", str(out["r.json"])]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the echoing server is red
    assert "FAIL MUST   JOB-LOGS-1" in proc.stdout, proc.stdout
    assert "FAIL" in proc.stdout and "you sent Authorization: Bearer <redacted>" in proc.stdout
    assert all(p.exists() for p in out.values()), proc.stdout + proc.stderr
    assert len(stage) >= 3, "the run never fetched the log stage's credentials"
    assert_absent(out.values(), (pat, pat2, *stage), also=proc.stdout + proc.stderr)
