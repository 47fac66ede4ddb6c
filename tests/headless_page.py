"""A page measured in headless Chromium: ``from headless_page import measure_page`` from any
test directory (``tests/`` is on ``sys.path``, as for ``example_loader``).

A probe script, injected before the page's own ``</body>``, writes what it measured as JSON
into ``<pre id="layout-probe">`` once the page has loaded; Chromium's ``--dump-dom`` reads it
back. Chromium is a system package (``apt-get install -y chromium``): without it the test
skips with that reason, except in CI (``CI=true``), where a skip would hide a broken layout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest


def chromium() -> str:
    found = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed in CI (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def measure_page(page: Path, probe: str, width: int, height: int, shot: Path | None = None) -> dict[str, Any]:
    """What ``probe`` (a ``<script>`` writing ``#layout-probe``) measured on ``page`` at this
    window size; ``shot`` also saves a screenshot of the page as it stands."""
    probed = page.with_name(page.stem + ".probe.html")
    text = page.read_text(encoding="utf-8")
    at = text.rfind("</body>")  # the page's own: a script bundle may hold the string too
    probed.write_text(text[:at] + probe + text[at:], encoding="utf-8")
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--no-first-run", "--hide-scrollbars", f"--window-size={width},{height}", "--virtual-time-budget=8000"]
    dom = subprocess.run([*args, "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    if shot is not None:
        subprocess.run([*args, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    measured: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return measured
