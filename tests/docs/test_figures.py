"""Figures the docs state are checked against their source: the run or file they were taken
from (the GRPO curve's CSV, a pasted report line, whose parts must add up) or the code that
fixes them (the limits, the suite's time-outs). A figure that drifts from its source fails
here until the page is brought back to it. (The example URL run of the verdicts page is
held to the clause registry by test_site_structure.py; the reference pages are generated.)
A figure only a run can give is either kept in a file beside its page (the curve's CSV, the
load run's JSON) that a test reads, or stated on its page as the dated measurement it is,
with the command that took it; what the code fixes is read from the code.
"""

from __future__ import annotations

import csv
import datetime
import json
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


def test_the_recipe_pages_rewards_are_the_curves_csv() -> None:
    """recipes.md's walk-through (the ArcticTraining layout over HTTPS) gives the default
    layout's rewards on the deterministic tiny engine: its per-step figures are the CSV's."""
    rows = list(csv.DictReader((DOCS / "img" / "grpo_toy.csv").open(encoding="utf-8")))
    rewards = [round(float(r["mean_reward"]), 3) for r in rows]
    text = " ".join(page("recipes/recipes.md").split())
    said = re.search(r"\*\*([0-9.]+)\*\* over the first three steps \(([0-9., ]+)\) and \*\*([0-9.]+)\*\* over the "
                     r"last three \(([0-9., ]+)\)", text)
    assert said, "recipes.md lost its rewards"
    first, last = [float(n) for n in said[2].split(",")], [float(n) for n in said[4].split(",")]
    assert (first, last) == (rewards[:3], rewards[-3:])
    assert (float(said[1]), float(said[3])) == (round(sum(first) / 3, 3), round(sum(last) / 3, 3))


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
    """load.md's pasted run: calls per second are calls over seconds, its p95s and fake CPU
    are the table's first row; every row is dated and its CPU share is its CPU-seconds
    over its seconds; the dated 2026-12-07 row is the run kept in docs/img/load_10_users.json."""
    text = page("load.md")
    run = re.search(r"(\d+) calls in ([0-9.]+) s \(([0-9.]+)/s\)", text)
    cpu = re.search(r"embedded fake ([0-9.]+) CPU-s \((\d+)% of one core\)", text)
    assert run and cpu
    calls, seconds, rate = int(run[1]), float(run[2]), float(run[3])
    assert calls / seconds == pytest.approx(rate, abs=0.15)
    assert round(float(cpu[1]) / 60 * 100) == int(cpu[2])
    pasted = {m[1]: int(m[2]) for m in re.finditer(r"^(?:GET|POST) (\w+) +\d+ +\d+ +\d+ +(\d+) ", text, re.M)}
    rows = re.findall(r"^\| ([^|]+) \| ([^|]+), (\d{1,2} \w{3} \d{4}) \| ([0-9.]+) \| ([0-9, ]+) \| ([0-9.]+) CPU-s "
                      r"in ([0-9.]+) s \((\d+) ?%", text, re.M)
    assert len(rows) == 6, rows
    first = rows[0]
    assert (first[0].strip(), first[3], first[5]) == ("10", run[3], cpu[1])
    p95 = [int(n) for n in first[4].split(",")]
    assert p95[:3] == [pasted["get_request"], pasted["forward_backward"], pasted["step"]], (p95, pasted)
    for _users, _machine, _date, _rate, _p95, cpu_s, over_s, share in rows:
        assert round(float(cpu_s) / float(over_s) * 100) == int(share), (cpu_s, over_s, share)
    kept = json.loads((DOCS / "img" / "load_10_users.json").read_text(encoding="utf-8"))
    kept_on = datetime.date.fromisoformat(kept["measured"]["date"])
    (row,) = [r for r in rows if datetime.datetime.strptime(r[2], "%d %b %Y").date() == kept_on]
    by_route = {r["key"].split()[1]: r["p95"] for r in kept["routes"]}
    assert row[0].strip() == "10" and float(row[3]) == round(kept["calls_per_s"], 1)
    assert [int(n) for n in row[4].split(",")] == [by_route[k] for k in (
        "get_request", "forward_backward", "step", "generate", "generate_stream")]
    assert (float(row[5]), float(row[6])) == (kept["fake_cpu_s"], round(kept["duration_s"], 1))
    assert f"load {kept['measured']['load_average_1min_after']:.1f}" in row[1]
    assert f"over the run's {round(kept['duration_s'], 1)} s" in text


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


def test_the_answer_bounds_the_pages_state_are_the_contracts() -> None:
    """The per-route answer bounds conformance.md and client.md state (a small answer, a poll
    page), and the readers' caps the limits page's hardening rows name, as the code fixes them."""
    from contract.limits import (
        INFLATION_FREE_BYTES,
        MAX_ANSWER_BYTES,
        MAX_RESULT_BYTES,
        RESULT_ROUTE,
        MiB,
        answer_bound,
    )

    small, poll = answer_bound("capacity", MAX_ANSWER_BYTES) // MiB, answer_bound(RESULT_ROUTE, MAX_ANSWER_BYTES) // MiB
    conformance = " ".join(page("server-team/conformance.md").split())
    said = re.search(r"(\d+) MiB for most routes \(capacity, .*? and (\d+) GiB only for a poll page", conformance)
    assert said, "conformance.md lost the answer bounds"
    assert (int(said[1]), int(said[2]) * 1024) == (small, poll)
    client = " ".join(page("client-teams/client.md").split())
    said = re.search(r"`contract.limits.MAX_ANSWER_BYTES`, (\d+) GiB\), .*?`contract.limits.answer_bound`: (\d+) MiB "
                     r"for a small answer", client)
    assert said, "client.md lost the answer bounds"
    assert (int(said[1]) * 1024, int(said[2])) == (MAX_ANSWER_BYTES // MiB, small)
    limits = page("client-teams/limits.md")
    assert f"`AnswerTooLarge` at {INFLATION_FREE_BYTES // MiB} MiB decoded" in limits
    assert f"`AnswerTooBig` at the {MAX_ANSWER_BYTES // MiB // 1024} GiB cap" in limits
    assert f"({MAX_RESULT_BYTES // MiB // 1024} GiB of chunks, `max_result_bytes`)" in limits


def test_the_hardening_rows_name_the_fakes_defaults() -> None:
    """The options the limits page's hardening tables quote (the chunk groups' idle window,
    the body idle time, the head time-out, the connection cap) at the fake's defaults."""
    from fake_gs.cli import build_parser

    defaults = {a.option_strings[0]: a.default for a in build_parser()._actions if a.option_strings}
    text = page("client-teams/limits.md")
    quoted = {
        "--chunk-group-idle-s": re.findall(r"for the (\d+) s idle window", text),
        "--body-idle-s": re.findall(r"waits (\d+) s \(`--body-idle-s`\)", text),
        "--head-timeout-s": re.findall(r"heads at `--head-timeout-s` (\d+)", text),
        "--max-connections": re.findall(r"the fake keeps its (\d+) \(`--max-connections`\)", text),
    }
    for option, figures in quoted.items():
        assert figures, f"the limits page no longer quotes {option}"
        assert {float(f) for f in figures} == {float(defaults[option])}, (option, figures, defaults[option])


def test_the_figures_the_pages_take_from_the_code_are_the_codes() -> None:
    """Numbers pages quote from a constant: the idempotency window, the tape's inline bound,
    record budget, answer margin and replay body bound, the chunk floor, the poll page sizes."""
    from client.config import MIN_CHUNK_PAYLOAD_BYTES
    from conformance.options import OPTION
    from contract.idempotency import KEY_WINDOW_S
    from contract.limits import DEFAULT_MAX_EVENTS, MAX_BODY_BYTES, MAX_EVENTS_CAP, MiB
    from contract.tape.body_store import KEEP_BYTES
    from contract.tape.bounds import (
        ANSWER_MARGIN_BYTES,
        INFLATION_FREE_CHARS,
        MAX_REPLAY_BODY_BYTES,
        MAX_TAPE_INFLATION,
    )
    from contract.wire.limits import CHUNK_HEADER_ALLOWANCE

    def said(name: str, pattern: str) -> tuple[str, ...]:
        found = re.search(pattern, " ".join(page(name).split()))
        assert found, f"{name} lost {pattern!r}"
        return found.groups()

    hours = KEY_WINDOW_S / 3600
    assert float(said("client-teams/retries.md", r"kept for (\d+) hours \(`contract.idempotency.KEY_WINDOW_S`")[0]) == hours
    assert float(said("contract.md", r"its (\d+) h window")[0]) == hours
    for name in ("parity/index.md", "parity/tapes.md"):
        assert int(said(name, r"compress to (\d+) KiB or less")[0]) * 1024 == KEEP_BYTES
    budget = OPTION["record_budget_mib"].default
    assert int(said("parity/index.md", r"`--record-budget-mib`, default (\d+)")[0]) == budget
    assert int(said("parity/tapes.md", r"`--record-budget-mib`, default (\d+) MiB")[0]) == budget
    times, past, margin = said("parity/index.md", r"decode to at most (\d+) times its size past (\d+) MiB.*?plus (\d+) MiB "
                               r"\(`ANSWER_MARGIN_BYTES`\)")
    assert (float(times), int(past) * MiB, int(margin) * MiB) == (MAX_TAPE_INFLATION, INFLATION_FREE_CHARS,
                                                                ANSWER_MARGIN_BYTES)
    assert said("parity/index.md", r"\(twice the contract's (\d+) MiB")[0] == str(MAX_REPLAY_BODY_BYTES // 2 // MiB)
    assert MAX_REPLAY_BODY_BYTES == 2 * MAX_BODY_BYTES
    header, payload, floor, most = said("client-teams/client.md", r"`max_chunk_bytes` is at least (\d+) KiB of chunk "
                                        r"header plus (\d+) bytes of frame \((\d+)\), at most (\d+) MiB")
    assert (int(header) * 1024, int(payload)) == (CHUNK_HEADER_ALLOWANCE, MIN_CHUNK_PAYLOAD_BYTES)
    assert (int(floor), int(most) * MiB) == (CHUNK_HEADER_ALLOWANCE + MIN_CHUNK_PAYLOAD_BYTES, MAX_BODY_BYTES)
    from conformance.proxy.relay import WINDOW
    from contract.limits import SMALL_ANSWER_BYTES

    assert int(said("server-team/proxy.md", r"a window of about (\d+) MiB per direction")[0]) * MiB == WINDOW
    assert int(said("server-team/conformance.md", r"cut a little past its (\d+) MiB bound")[0]) * MiB == SMALL_ANSWER_BYTES
    from fake_gs.state.execution_logs import MAX_ARCHIVED_JOBS
    from fake_gs.testing.fleet import DEFAULT_TRAFFIC

    assert int(said("client-teams/ci-gate.md", r"`--fake-gs-traffic N` .*?\(default (\d+);")[0]) == DEFAULT_TRAFFIC
    assert int(said("recipes/recipes.md", r"the newest (\d+) ended jobs are kept")[0]) == MAX_ARCHIVED_JOBS
    body, default, cap = said("contract.md", r"\| (\d+) MiB bodies, `max_events` (\d+)/(\d+)")
    assert (int(body) * MiB, int(default), int(cap)) == (MAX_BODY_BYTES, DEFAULT_MAX_EVENTS, MAX_EVENTS_CAP)


def test_the_at_most_once_table_adds_up() -> None:
    """retries.md's measured table (a pasted bench_at_most_once run): each route's calls are
    its successes plus its AmbiguousOutcomes, and its duplicates are its executions past
    one per call."""
    text = page("client-teams/retries.md")
    calls = int(re.search(r"bench_at_most_once.py --calls (\d+)`", text)[1])  # type: ignore[index]
    rows = re.findall(r"^\|[^|]*\| ([a-z-]+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", text, re.M)
    assert len(rows) == 16, rows
    for route, succeeded, ambiguous, executions, duplicates in rows:
        assert int(succeeded) + int(ambiguous) == calls, route
        assert int(duplicates) == max(0, int(executions) - calls), route


def test_the_locks_version_the_integrations_page_quotes_is_the_locks() -> None:
    pinned = re.search(r"^transformers==(\S+)$", (ROOT / "constraints.txt").read_text(encoding="utf-8"), re.M)
    said = re.search(r"`transformers<5` against the lock's (\S+)\)", " ".join(page("integrations.md").split()))
    assert pinned and said
    assert said[1] == pinned[1]


def test_the_getting_started_pages_budget_and_pins_are_the_projects() -> None:
    """CI's time budget and the heavy marker's threshold as pyproject's markers state them,
    and the torch pin as the lock has it (the commands' durations live in the README only)."""
    text = " ".join(page("getting-started.md").split())
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    budget = re.search(r"too long for CI's (\d+)-minute budget", text)
    assert budget and f"too long for CI's {budget[1]} minutes" in project
    assert "`heavy` (ten seconds or more)" in text and "heavy: ten seconds or more" in project
    torch = re.search(r"pins torch to the CPU build ([0-9.]+)\.", text)
    assert torch and re.search(rf"^torch=={re.escape(torch[1])}(\+cpu)?$", (ROOT / "constraints.txt").read_text(), re.M)
    assert not re.search(r"\d+ minutes on", text), "a duration belongs to the README's figures"
