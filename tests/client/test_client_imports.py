"""Import invariants, each checked in a fresh interpreter, plus route coverage of the REST client."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

from client.rest import CortexRestClient
from contract.routes import ROUTES

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "safetensors", "numpy", "starlette", "uvicorn", "hypothesis", "schemathesis",
         "fake_gs", "conformance"}


def _modules_after(code: str) -> set[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=ROOT, env=env)
    return {name.split(".")[0] for name in json.loads(out.stdout.strip().splitlines()[-1])}


def test_config_and_factory_import_nothing_heavy() -> None:
    loaded = _modules_after(
        "from client import create_client, ClientConfig, create_arctic_rl_client, ArcticRLClient\n"
        "ClientConfig(base_url='http://127.0.0.1:1', max_chunk_bytes=65536)"
    )
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_building_a_client_imports_nothing_heavy() -> None:
    loaded = _modules_after(
        "import os\nos.environ['ARCTIC_RL_BACKEND'] = 'cortex'\n"
        "os.environ['CORTEX_BASE_URL'] = 'http://127.0.0.1:1'\n"
        "from client import create_arctic_rl_client, create_client\n"
        "c = create_client({'backend': 'local'}, None)\n"
        "c.transport"
    )
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_step_and_save_round_trip_imports_no_fake_and_no_torch() -> None:
    """A JSON-only Cortex call path against a loopback server: no fake_gs, no torch."""
    code = (
        "import json, threading\n"
        "from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer\n"
        "ANS = {'step': {'global_steps': 1, 'last_lr': 0.1}, 'save': {'checkpoint_id': 'c1'}}\n"
        "class H(BaseHTTPRequestHandler):\n"
        "    def log_message(self, *a): pass\n"
        "    def _send(self, body):\n"
        "        data = json.dumps(body).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(data)))\n"
        "        self.end_headers(); self.wfile.write(data)\n"
        "    def do_POST(self):\n"
        "        self.rfile.read(int(self.headers.get('Content-Length') or 0))\n"
        "        self._send({'request_id': self.path.rsplit('/', 1)[-1], 'job_id': 'j'})\n"
        "    def do_GET(self):\n"
        "        rid = self.path.split('?')[0].rsplit('/', 1)[-1]\n"
        "        self._send({'request_id': rid, 'status': 'done', 'result': ANS[rid],\n"
        "                    'created_at': 't', 'updated_at': 't'})\n"
        "srv = ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
        "threading.Thread(target=srv.serve_forever, daemon=True).start()\n"
        "from client import ClientConfig\n"
        "from client.rest import CortexRestClient\n"
        "rest = CortexRestClient(ClientConfig(base_url=f'http://127.0.0.1:{srv.server_port}'))\n"
        "assert rest.result('j', rest.step('j'), route_name='step') == ANS['step']\n"
        "assert rest.result('j', rest.save('j'), route_name='save') == ANS['save']\n"
    )
    loaded = _modules_after(code)
    assert "requests" in loaded
    assert not loaded & HEAVY, sorted(loaded & HEAVY)


def test_client_never_imports_fake_gs_in_source() -> None:
    for path in (ROOT / "client").rglob("*.py"):
        text = path.read_text()
        assert "import fake_gs" not in text and "from fake_gs" not in text, path


def test_one_rest_method_per_route_of_both_profiles() -> None:
    for r in ROUTES:
        method = getattr(CortexRestClient, r.name, None)
        assert callable(method), f"no CortexRestClient.{r.name} for {r.method} {r.path}"
        params = inspect.signature(method).parameters
        for name in ("job_id", "checkpoint_id", "request_id"):
            if "{" + name + "}" in r.path:
                assert name in params, f"{r.name} lacks {name}"


def test_the_reference_documents_every_config_field_and_env_var() -> None:
    from client.config import ClientConfig
    from client.env import ENV_FIELDS, KNOB_FIELDS

    text = (ROOT / "docs" / "reference" / "client-config.md").read_text()
    for name in ClientConfig.model_fields:
        assert f"`{name}`" in text, name
    for var in ENV_FIELDS:
        assert f"`{var}`" in text, var
    for knob in KNOB_FIELDS:  # documented as CORTEX_ + the field in capitals
        assert f"`{knob}`" in text, knob
