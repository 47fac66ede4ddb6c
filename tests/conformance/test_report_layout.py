"""The HTML reports hold their layout in a real browser: headless Chromium at 1,400 px
renders a conformance report with one red clause (its failing example opened), a parity
report with divergences, and a gs-load report of a mutant run; nothing makes the page wider
than the window and the failures box starts within the first screen (900 px).

Chromium is a system package (``apt-get install -y chromium``): without it the test skips
with that reason, except in CI (``CI=true``), where a skip would hide a broken layout.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from headless_page import measure_page

from conformance.judge.tally import Tally
from conformance.load import report as load_report
from conformance.parity import report as parity_report
from conformance.parity.compare import Divergence
from conformance.parity.replay import ExchangeResult, Replay
from conformance.reporting import render
from conformance.reporting.verdicts import ClauseBook, TestOutcome

WIDTH, HEIGHT = 1400, 900
#: A line no layout can wrap (a long token-free body, as a server may answer).
UNBROKEN = "x" * 3000
#: Reads back the page's width and where the failures box starts, after every <details>
#: is opened (a failing example opened must not widen the page either).
PROBE = """<script>window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const box = document.querySelector('#failures, #gs-load-verdict');
  const out = document.createElement('pre'); out.id = 'layout-probe';
  let right = 0, widest = '';
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect().right;
    if (r > right) { right = r; widest = e.tagName + '.' + e.className + '#' + e.id; }
  }
  out.textContent = JSON.stringify({width: Math.max(document.documentElement.scrollWidth, right),
    box_top: box ? box.getBoundingClientRect().top + window.scrollY : -1, widest});
  document.body.appendChild(out);
});</script>"""


def measure(page: Path, shot: Path | None = None) -> dict[str, Any]:
    """The page's rendered width and the failures box's top, in Chromium at 1,400 px."""
    got = measure_page(page, PROBE, WIDTH, HEIGHT, shot)
    return {k: (float(v) if k != "widest" else v) for k, v in got.items()}


def conformance_page(tmp: Path) -> Path:
    example = ("CAP-FIELDS-1: in_use_gpus '2' is not a non-negative int\n\nlast HTTP exchanges:\n"
               "> GET http://127.0.0.1:1/api/v2/databases/DB/schemas/PUBLIC/cortex-training/capacity\n"
               f"< 200\n< {{\"in_use_gpus\": \"2\", \"note\": \"{UNBROKEN}\"}}")
    book = ClauseBook()
    book.book(TestOutcome("t::cap", ("CAP-FIELDS-1",), "failed", ("CAP-FIELDS-1",), example=example))
    book.book(TestOutcome("t::auth", ("AUTH-REQUIRED-1",), "passed"))
    return render.write(book.results("current", "http://127.0.0.1:1", url=True), tmp / "conformance.html")


def parity_page(tmp: Path) -> Path:
    def result(seq: int, accepted: str | None) -> ExchangeResult:
        return ExchangeResult(seq, "g", "target", "get_job", "GET", f"/api/v2/jobs/{UNBROKEN}",
                              {"status": 200, "body": {"json": {"status": "RUNNING", "note": UNBROKEN}}},
                              new={"status": 200, "body": {"json": {"status": "FAILED", "note": UNBROKEN}}},
                              divergences=[Divergence("body.status", "value", "RUNNING", "FAILED", accepted)])
    results = [result(n, "allowed form") for n in range(1, 40)] + [result(n, None) for n in range(40, 45)]
    path = tmp / "parity.html"
    parity_report.write([Replay("run.gsrec", "http://127.0.0.1:9", results, 1.0, 1.0)], str(path))
    return path


def load_page(tmp: Path) -> Path:
    tally = Tally(node="run")
    for ms in (3, 5, 40, 900):
        tally.exchange("POST step", 200, 100, ms, when=1000.0 + ms / 100)
    tally.violation("STEP-COUNT-1", f"job J: 4 steps attempted moved global_steps by 8 {UNBROKEN}", count=2)
    tally.violation("REQ-ONCE-1", "step: 4 submissions executed 8 times", count=4)
    out = load_report.Outcome(tally, 8.0, "the embedded fake (http://127.0.0.1:5)", counts_decided=True,
                              max_violations=0)
    # Locust's own report: a script bundle in its head that holds "<body" too, then its
    # tables, ~3,000 px of them.
    locust = ("<html><head><script>const t = '<body class=x>';</script></head><body><h1>Locust</h1>"
              + "<p>stats row</p>" * 150 + "</body></html>")
    path = tmp / "load.html"
    path.write_text(load_report.inject(locust, out))
    return path


@pytest.mark.parametrize("build", [conformance_page, parity_page, load_page], ids=["conformance", "parity", "load"])
def test_reports_fit_the_window_and_show_the_failure_first(build: Callable[[Path], Path], tmp_path: Path) -> None:
    page = build(tmp_path)
    shots = os.environ.get("GS_LAYOUT_SHOTS")  # a directory to keep the screenshots in
    got = measure(page, Path(shots) / f"{page.stem}.png" if shots else None)
    assert got["width"] <= WIDTH, got
    assert 0 <= got["box_top"] < HEIGHT, got
