"""Figures the docs state are checked against their source: the run or file they were taken
from (the GRPO curve's CSV, a pasted report line, whose parts must add up) or the code that
fixes them (the limits, the suite's time-outs). A figure that drifts from its source fails
here until the page is brought back to it. (The example URL run of the verdicts page is
held to the clause registry by test_site_structure.py; the reference pages are generated.)
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_the_grpo_figures_are_the_curves_csv() -> None:
    """grpo.md's mean rewards (first and last three steps) and step count come from the CSV
    the same run wrote beside the picture."""
    rows = list(csv.DictReader((DOCS / "img" / "grpo_toy.csv").open(encoding="utf-8")))
    rewards = [float(r["mean_reward"]) for r in rows]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    text = page("recipes/grpo.md")
    said = re.search(r"went from ([0-9.]+) over the first three\s+steps to ([0-9.]+) over the last three", text)
    alt = re.search(r"mean reward rises from ([0-9.]+) to ([0-9.]+) in (\d+) steps", text)
    assert said and alt, "grpo.md lost its figures"
    assert (float(said[1]), float(said[2])) == (round(first, 3), round(last, 3))
    assert (float(alt[1]), float(alt[2]), int(alt[3])) == (round(first, 3), round(last, 3), len(rows))


def test_the_proxy_pages_report_line_adds_up() -> None:
    text = page("server-team/proxy.md")
    head = re.search(r"profile \w+, (\d+) clauses: (\d+) green, (\d+) red, (\d+) skipped, (\d+) "
                     r"not-applicable; MUST (\d+)/(\d+) judged green", text)
    judged = re.search(r"judged (\d+) of (\d+) MUST clauses on this target", text)
    assert head and judged
    total, green, red, skipped, na, must_green, must_judged = map(int, head.groups())
    assert total == green + red + skipped + na
    assert int(judged[1]) == must_judged and must_green == must_judged - red
    assert int(judged[1]) <= int(judged[2])


def test_the_load_pages_figures_agree() -> None:
    """load.md's pasted run: calls per second are calls over seconds, the table's first row
    is that run, and each CPU share is its CPU-seconds over the 60 s run."""
    text = page("load.md")
    run = re.search(r"(\d+) calls in ([0-9.]+) s \(([0-9.]+)/s\)", text)
    cpu = re.search(r"embedded fake ([0-9.]+) CPU-s \((\d+)% of one core\)", text)
    assert run and cpu
    calls, seconds, rate = int(run[1]), float(run[2]), float(run[3])
    assert calls / seconds == pytest.approx(rate, abs=0.15)
    assert round(float(cpu[1]) / 60 * 100) == int(cpu[2])
    rows = re.findall(r"^\| ([^|]+) \| (quiet|busy) \| ([0-9.]+) \| [^|]+ \| ([0-9.]+) CPU-s \((\d+) ?%", text, re.M)
    assert len(rows) == 5, rows
    assert (rows[0][0].strip(), rows[0][2]) == ("10", run[3])
    for _users, _machine, _rate, cpu_s, share in rows:
        assert round(float(cpu_s) / 60 * 100) == int(share), (cpu_s, share)


def test_limits_the_pages_state_are_the_contracts() -> None:
    """The body bound, the suite's read time-out and the answer bound, as the code fixes them."""
    from conformance.options import OPTION
    from contract.limits import MAX_BODY_BYTES, MiB

    body_mib = MAX_BODY_BYTES // MiB
    for name in ("server-team/costs.md", "server-team/schemathesis.md", "client-teams/client.md",
                 "contract.md", "load.md"):
        stated = {int(n) for n in re.findall(r"(\d+) MiB (?:a single body|bod|upload)", page(name))}
        stated |= {int(n) for n in re.findall(r"at most (\d+) MiB", page(name))}
        assert stated <= {body_mib}, (name, stated)
    assert f"{body_mib} MiB" in page("server-team/costs.md")
    timeout = re.search(r"read timeout \((\d+) s for the suite\)", page("server-team/conformance.md"))
    assert timeout, "conformance.md lost the suite's read time-out"
    assert int(timeout[1]) == OPTION["request_timeout_s"].default


def test_the_large_results_size_and_cap_are_the_suites() -> None:
    from conformance.judging.large import LARGE_RESULT_BYTES
    from conformance.options import OPTION
    from contract.limits import MiB

    text = page("server-team/costs.md")
    size = re.search(r"result \(float32 log-probs\) is (\d+) MiB", text)
    cap = re.search(r"`--max-result-mib N` \(default (\d+)\)", text)
    assert size and cap
    assert int(size[1]) == LARGE_RESULT_BYTES // MiB
    assert int(cap[1]) == OPTION["max_result_mib"].default


def test_the_exit_statuses_the_verdicts_page_states_are_the_clis() -> None:
    from conformance import cli

    text = " ".join(page("server-team/verdicts.md").split())
    said = re.search(r"Exit status: (\d+) when nothing fails the run \(below\), (\d+) otherwise, (\d+) for a run "
                     r"that produced no results, (\d+) when the URL does not answer, (\d+) when it was interrupted",
                     text)
    assert said, "the verdicts page lost its exit statuses"
    assert tuple(map(int, said.groups())) == (cli.EXIT_OK, cli.EXIT_RED, cli.EXIT_ERROR, cli.EXIT_NO_SERVER,
                                              cli.EXIT_INTERRUPTED)


def test_the_limits_pages_defaults_are_the_fakes() -> None:
    """Every ``(`--option`) | default`` row of the client teams' limits table states the
    default fake-gs's parser has (a MiB figure of a ``-bytes`` option in bytes)."""
    from contract.limits import MiB
    from fake_gs.cli import build_parser

    defaults = {a.option_strings[0]: a.default for a in build_parser()._actions if a.option_strings}
    rows = re.findall(r"^\|[^|]*\(`(--[a-z0-9-]+)`\)[^|]*\| ([^|]+) \|", page("client-teams/limits.md"), re.M)
    assert len(rows) >= 25, rows
    for option, stated in rows:
        number = re.match(r"([0-9][0-9,.]*)\s*(MiB|s|bytes)?", stated.strip())
        assert number, (option, stated)
        value = float(number[1].replace(",", ""))
        if number[2] == "MiB" and option.endswith("-bytes"):
            value *= MiB
        assert value == float(defaults[option]), (option, stated, defaults[option])


def test_the_answer_bound_the_conformance_page_states_is_the_contracts() -> None:
    from contract.limits import MAX_ANSWER_BYTES, MiB

    said = re.search(r"at most (\d+) GiB of body, counted\s+after decompression", page("server-team/conformance.md"))
    assert said, "conformance.md lost the answer bound"
    assert int(said[1]) * 1024 * MiB == MAX_ANSWER_BYTES
