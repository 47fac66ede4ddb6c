"""The generated reference tables hold their layout in a real browser: the site built by
mkdocs, each page opened in headless Chromium at 1,400 px: no table is wider than the page's
content (a wider one scrolls sideways and clips the sentence column), and no code in a table
is broken across lines (an id or an option stays whole).

Chromium is a system package (``apt-get install -y chromium``): without it the test skips
with that reason, except in CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1400, 900
PAGES = ("reference/clauses", "reference/cli-gs-conformance", "reference/cli-fake-gs", "reference/limits",
         "reference/errors", "reference/mutants")
#: Reads back, after load: the widest table's overflow past the content box, and the code
#: elements inside tables that the layout broke over more than one line.
PROBE = """<script>window.addEventListener('load', () => {
  const content = document.querySelector('.md-content__inner').getBoundingClientRect();
  let over = 0, broken = [];
  for (const t of document.querySelectorAll('.md-typeset table')) {
    over = Math.max(over, t.getBoundingClientRect().right - content.right, t.scrollWidth - t.clientWidth);
    for (const c of t.querySelectorAll('code')) if (c.getClientRects().length > 1) broken.push(c.textContent);
  }
  const out = document.createElement('pre'); out.id = 'layout-probe';
  out.textContent = JSON.stringify({over, broken: broken.slice(0, 10), content: content.width});
  document.body.appendChild(out);
});</script>"""


def chromium() -> str:
    found = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed in CI (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", PAGES)
def test_reference_tables_fit_and_keep_code_whole(site: Path, name: str) -> None:
    page = site / name / "index.html"
    text = page.read_text(encoding="utf-8")
    at = text.rfind("</body>")
    probed = page.with_name("probe.html")
    probed.write_text(text[:at] + PROBE + text[at:], encoding="utf-8")
    dom = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
                          "--virtual-time-budget=8000", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    got = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert got["over"] <= 1, f"{name}: a table overflows the content by {got['over']:.0f} px ({got['content']:.0f} px wide)"
    assert not got["broken"], f"{name}: code broken across lines: {got['broken']}"
