"""The kit's one set of report writers (conformance.reporting.formats) hold against what a
hostile server or tape puts in a string: no control byte on the terminal, no raw tag or
link in Markdown or HTML, JUnit that parses, and a credential scrubbed before any cut."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.parity import report as parity_report
from conformance.parity.compare import Divergence
from conformance.parity.replay import ExchangeResult, Replay
from conformance.reporting import render
from conformance.reporting.clean import clip, md_code, md_text, printable, xml_text
from conformance.reporting.model import curl_line
from conformance.reporting.verdicts import ClauseBook, TestOutcome

HOSTILE = "evil\x1b[2J\x1b]0;pwn\x07<script>alert(1)</script>[x](http://attacker.example)|`\x00\x0c"
#: A Markdown link or image: an opening bracket no backslash escapes.
LINK = re.compile(r"(?<!\\)\[")
SESSION = "FQoGZXIvYXdzE" + "k" * 300


def outside_code(markdown: str) -> str:
    """A Markdown page less its code blocks and spans (where a tag is text, not a tag)."""
    return re.sub(r"(`+).*?\1", "", re.sub(r"(?s)^(`{3,}).*?^\1$", "", markdown, flags=re.M))


def test_clip_scrubs_before_it_cuts() -> None:
    body = '{"data": [["{\\"AWS_KEY_ID\\": \\"x\\", \\"AWS_TOKEN\\": \\"' + SESSION + '\\"}"]]}'
    cut = clip(body, 120)
    assert SESSION[:8] not in cut and len(cut) < 200
    assert SESSION[:8] in body[:120] + SESSION  # the cut would have landed inside the token


def test_strings_from_outside_are_made_safe() -> None:
    assert "\x1b" not in printable(HOSTILE) and "\x00" not in printable(HOSTILE)
    text = md_text(HOSTILE)
    assert "<script>" not in text and not LINK.search(text) and "|" not in text.replace("\\|", "")
    code = md_code("a`b|c")
    assert code.startswith("``") and "\\|" in code
    ET.fromstring(f"<a>{xml_text(HOSTILE).replace('<', '&lt;')}</a>")


def _red_run(example: str) -> ClauseBook:
    book = ClauseBook()
    book.book(TestOutcome("t::a", ("CAP-FIELDS-1",), "failed", ("CAP-FIELDS-1",), example=example))
    book.book(TestOutcome("t::b", ("AUTH-REQUIRED-1",), "passed"))
    return book


def test_conformance_outputs_put_the_failure_first(tmp_path: Path) -> None:
    example = (f"{HOSTILE}\n\nlast HTTP exchanges:\n> GET http://127.0.0.1:1/api/v2/x/capacity\n"
               "> authorization: Bearer <redacted>\n< 200\n< {\"in_use_gpus\": \"2\"}")
    res = _red_run(example).results("current", "http://127.0.0.1:1", url=True)
    out = {s: tmp_path / f"r{s}" for s in (".html", ".md", ".xml", ".txt", ".json")}
    for path in out.values():
        render.write(res, path)
    html, md, txt = out[".html"].read_text(), out[".md"].read_text(), out[".txt"].read_text()
    rerun = "gs-conformance --url http://127.0.0.1:1 --clauses CAP-FIELDS-1"
    # The failures box comes before the matrix and the tables, with a rerun and a curl line.
    assert html.index("id='failures'") < html.index("class='matrix'") and rerun in html
    assert md.index("Failures (1)") < md.index("## Failing examples") < md.index("## AUTH") and rerun in md
    assert txt.rindex("== failures (1) ==") < txt.rindex("DOES NOT CONFORM") and rerun in txt
    assert 'curl -sS -X GET http://127.0.0.1:1/api/v2/x/capacity -H "Authorization: Bearer $GS_TOKEN"' in txt
    for page in (html, md, txt):
        assert "\x1b" not in page and "\x00" not in page
    assert "<script>" not in html and "<redacted>" not in html
    assert "<script>" not in outside_code(md) and not LINK.search(outside_code(md))
    ET.parse(out[".xml"])


def _replay(tape: str) -> Replay:
    bad = ExchangeResult(7, "g" + HOSTILE, "target", "get_job", "GET", "/api/v2/jobs/" + HOSTILE,
                         {"status": 200, "body": {"json": {"status": HOSTILE}}},
                         new={"status": 500, "body": None},
                         divergences=[Divergence("status", "value", 200, 500)])
    fine = ExchangeResult(3, "g", "target", "get_job", "GET", "/x", {"status": 200}, new={"status": 200},
                          divergences=[Divergence("body.extra", "unknown", None, 1, accepted="allowed form")])
    return Replay(tape, "http://127.0.0.1:9", [fine, bad], 1.0, 1.0)


def test_parity_outputs_put_the_divergence_first(tmp_path: Path) -> None:
    reps = [_replay("run" + HOSTILE + ".gsrec")]
    out = {s: tmp_path / f"p{s}" for s in (".html", ".md", ".xml", ".txt")}
    for path in out.values():
        parity_report.write(reps, str(path))
    html, md, txt = out[".html"].read_text(), out[".md"].read_text(), out[".txt"].read_text()
    assert "--only 7" in html and "--only 7" in md and "--only 7" in txt
    # Divergent panels before accepted ones; the failures box before both.
    assert html.index("id='failures'") < html.index("details class=\"x divergent\"") < html.index(
        "details class=\"x accepted\"")
    for page in (html, md, txt):
        assert "\x1b" not in page
    assert "<script>" not in html and "<script>" not in outside_code(md) and not LINK.search(outside_code(md))
    ET.parse(out[".xml"])


def test_parity_html_marks_accepted_and_divergent_keys_apart_and_the_matrix_bar_is_neutral(tmp_path: Path) -> None:
    """A divergent key's line is marked red, an accepted key's amber (two colours, two
    words), and the matrix disclosure's bar is grey whatever its rows hold: red is kept for
    what fails the replay."""
    import re

    bad = ExchangeResult(7, "g", "target", "get_job", "GET", "/x", {"status": 200},
                         new={"status": 500}, divergences=[Divergence("status", "value", 200, 500)])
    fine = ExchangeResult(3, "g", "target", "get_job", "GET", "/x", {"status": 200, "body": {"json": {"a": 1}}},
                          new={"status": 200, "body": {"json": {"a": 1, "extra": 1}}},
                          divergences=[Divergence("body.extra", "unknown", None, 1, accepted="allowed form")])
    path = tmp_path / "p.html"
    parity_report.write([Replay("run.gsrec", "http://127.0.0.1:9", [fine, bad], 1.0, 1.0)], str(path))
    html = path.read_text()
    colour = {name: re.search(rf"mark\.{name}\{{background:(#[0-9a-f]+)\}}", html) for name in ("bad", "acc")}
    assert colour["bad"] and colour["acc"] and colour["bad"][1] != colour["acc"][1]
    assert "<mark class='acc'>" in html and "<mark class='bad'>" in html
    bar = re.search(r"details\.matrix\{[^}]*border-left:4px solid (#[0-9a-f]+)", html)
    red = re.search(r"details\.x\{[^}]*border-left:4px solid (#[0-9a-f]+)", html)
    assert bar and red and bar[1] != red[1]


def test_curl_line_replaces_the_token() -> None:
    line = curl_line("> POST http://h:1/p\n> authorization: Bearer abc\n> content-type: application/json\n"
                     '> {"a": 1}\n< 200')
    assert line.startswith("curl -sS -X POST http://h:1/p") and "$GS_TOKEN" in line and "abc" not in line
    assert "--data-binary" in line
