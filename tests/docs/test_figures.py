"""Figures the docs state are checked against their source: the run or file they were taken
from (the GRPO curve's CSV, a pasted report line, whose parts must add up) or the code that
fixes them (the limits, the suite's time-outs). A figure that drifts from its source fails
here until the page is brought back to it. (The example URL run of the verdicts page is
held to its kept report here and to the clause registry by test_site_structure.py; the recipe walk-through's log lines
by test_readme_recipe.py, which runs it; the reference pages are generated.)
A figure only a run can give is kept in a file beside its page (the curve's CSV; the load
runs', the hardening, at-most-once, memory, upload, proxy, self-parity and URL runs' JSON; the
published wheel's facts), each written by the command its page quotes, and a test here
reads it; what the code fixes is read from the code. A figure of a run that was not kept
(the code that gave it gone) is not stated: the hardening tables' "before" column is held
to that.
"""

from __future__ import annotations

import csv
import datetime
import json
import re
from pathlib import Path

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


def test_the_proxy_pages_run_is_the_report_kept_beside_it() -> None:
    """proxy.md's pasted gs-proxy run: its ending (judged fraction, what would judge more,
    the failures box, the verdict) is what the kit's own writers render from the report that
    run wrote (docs/img/proxy_last_lr_text.json), line for line, and its live RED line names
    the clause and reason of the report's failure."""
    from conformance.reporting.formats.text import ending
    from conformance.reporting.render import verdict_of
    from conformance.reporting.summary import summary_lines
    from conformance.reporting.verdicts import RunResults

    text = page("server-team/proxy.md")
    kept = json.loads((DOCS / "img" / "proxy_last_lr_text.json").read_text(encoding="utf-8"))
    blocks = re.findall(r"^```text\n(.*?)^```$", text, re.M | re.S)
    live = [b for b in blocks if b.startswith("gs-proxy: RED ")]
    end = [b for b in blocks if b.startswith("judged ")]
    assert len(live) == len(end) == 1, "proxy.md lost its pasted run"
    res = RunResults.from_json(kept)
    assert end[0].splitlines() == [*summary_lines(res), *ending(verdict_of(res))]
    (failure,) = kept["verdict"]["failures"]
    clause = re.match(r"gs-proxy: RED (\w+) ([A-Z0-9-]+) \(MUST, ([^)]+)\): (.*)$", live[0].strip())
    assert clause, live[0]
    (row,) = [v for v in kept["verdicts"] if v["id"] == failure["what"]]
    assert (clause[1], clause[2], clause[3]) == (failure["side"], failure["what"], row["source"])
    assert f"[{failure['side']}] {clause[4]}" in failure["reason"]
    assert f"a real run on {kept['measured']['date']}" in " ".join(text.split())


def test_the_load_pages_figures_are_the_runs_kept_beside_it() -> None:
    """load.md's table: one row per gs-load run kept in docs/img/load_*.json (the
    ``--results-json`` file it wrote, its date and load average added), each row's calls per
    second, p95s, fake CPU and seconds the file's; the pasted report is one of those runs,
    line for line as gs-load renders it (its cost line by the kit's own writer); and the
    refused saves the page counts are that file's."""
    from conformance.reporting.cost import cost_line

    text = page("load.md")
    kept = {path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted((DOCS / "img").glob("load_*.json"))}
    rows = re.findall(r"^\| (\d+) \| load ([0-9.]+), (\d{1,2} \w{3} \d{4}) \| ([0-9.]+) \| ([0-9, ]+) \| ([0-9.]+) CPU-s "
                      r"in ([0-9.]+) s \((\d+) ?%", text, re.M)
    assert len(rows) == len(kept), (rows, sorted(kept))
    used: set[str] = set()
    for users, load, date, rate, p95, cpu_s, over_s, share in rows:
        day = datetime.datetime.strptime(date, "%d %b %Y").date().isoformat()
        (name,) = [n for n, k in kept.items() if k["measured"]["date"] == day and f"--users {users} " in
                   k["measured"]["command"] and f"{k['measured']['load_average_1min_after']:.1f}" == load]
        run, used = kept[name], used | {name}
        by_route = {r["key"].split()[1]: r["p95"] for r in run["routes"]}
        assert float(rate) == round(run["calls_per_s"], 1), name
        assert [int(n) for n in p95.split(",")] == [by_route[k] for k in (
            "get_request", "forward_backward", "step", "generate", "generate_stream")], name
        assert printed_as(run["fake_cpu_s"], cpu_s) and printed_as(run["duration_s"], over_s), name
        assert int(share) == round(100 * run["fake_cpu_s"] / run["duration_s"]), name
    assert used == set(kept)
    block = re.search(r"^```text\ngs-load: per route\n(.*?)^```$", text, re.M | re.S)
    assert block, "load.md lost its pasted run"
    lines = block[1].splitlines()
    (name,) = [n for n, k in kept.items() if k["verdict"] in lines]
    run = kept[name]
    assert f"(`docs/img/{name}`)" in text
    routes = {r["key"]: r for r in run["routes"]}
    for line in lines[2:]:
        if line == "...":
            break
        key, figures = " ".join(line.split()[:2]), line.split()[2:]
        r = routes[key]
        assert [int(f) for f in figures[:5]] == [r["calls"], r["failures"], r["p50"], r["p95"], r["p99"]], line
        assert figures[5:] == [f"{r['mib_s_sent']:.3f}", f"{r['mib_s_received']:.3f}"], line
    share = 100.0 * run["fake_cpu_s"] / run["duration_s"]
    assert (f"cpu: embedded fake {run['fake_cpu_s']:.1f} CPU-s ({share:.0f}% of one core), load generator "
            f"{run['load_cpu_s']:.1f} CPU-s") in lines
    assert cost_line(run["cost"]) in lines
    assert f"no violation of {len(run['violations'])} judged clause(s)" in block[1]
    from contract.limits import RETENTION_BOUNDS

    said = re.search(r"holds its (\d+) checkpoints \(`--max-checkpoints-per-account`\).*?: (\d+) of the (\d+)-user run's "
                     r"(\d+) saves", " ".join(text.split()))
    assert said, "load.md lost the refused saves"
    (save,) = [r for k in kept.values() if f"--users {said[3]} " in k["measured"]["command"]
               for r in k["routes"] if r["key"] == "POST save"]
    assert int(said[1]) == RETENTION_BOUNDS["checkpoints"]
    assert (int(said[2]), int(said[4])) == (save["failures"], save["calls"])
    assert save["calls"] - save["failures"] == RETENTION_BOUNDS["checkpoints"]


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
    assert f"`OverlongAnswer` (judged red) at the {MAX_ANSWER_BYTES // MiB // 1024} GiB cap" in limits
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
    from fake_gs.state.log_stage import IDLE_S, MAX_CONNECTIONS
    from fake_gs.state.moto_account import TESTED_MOTO

    connections, idle = said("client-teams/limits.md", r"connections are capped \((\d+)\) and idle ones dropped "
                                                      r"\(([0-9.]+) s\)")
    assert (int(connections), float(idle)) == (MAX_CONNECTIONS, IDLE_S)
    assert said("client-teams/limits.md", r"naming the moto it was tested on \(`([^`]+)`:")[0] == TESTED_MOTO


def test_the_at_most_once_table_adds_up() -> None:
    """retries.md's measured table (a pasted bench_at_most_once run): each route's calls are
    its successes plus its AmbiguousOutcomes, and its duplicates are its executions past
    one per call."""
    text = page("client-teams/retries.md")
    calls = int(re.search(r"bench_at_most_once.py --calls (\d+)[ `]", text)[1])  # type: ignore[index]
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


def test_the_figures_the_guides_take_from_the_tools_are_the_tools() -> None:
    """Defaults and bounds the guides quote from a tool's own constants: gs-proxy's hash
    bound, gs-parity's float tolerances and exit statuses, the suite's examples per property
    against a URL, the corpus' examples, the Idempotency-Key length, the layout measure's
    width, the operations each OpenAPI document holds, the house rules' thresholds, gs-load's
    stop time-out and the long-job benchmark's calls."""
    from conformance.judge.requests import HASH_UP_TO
    from conformance.options import EXAMPLES_REAL
    from conformance.parity import cli as parity_cli
    from conformance.parity.compare import FLOAT_REL, FLOAT_ZERO
    from conformance.parity.corpus import EXAMPLES as CORPUS_EXAMPLES
    from contract.idempotency import MAX_KEY_CHARS
    from contract.limits import MiB
    from contract.routes import routes_for

    def said(name: str, pattern: str) -> tuple[str, ...]:
        found = re.search(pattern, " ".join(page(name).split()))
        assert found, f"{name} lost {pattern!r}"
        return found.groups()

    assert int(said("client-teams/proxy.md", r"`--hash-frames-up-to`, (\d+) MiB by default")[0]) * MiB == HASH_UP_TO
    assert int(said("server-team/proxy.md", r"`--hash-frames-up-to` MiB \((\d+) by default")[0]) * MiB == HASH_UP_TO
    zero, rel = said("parity/index.md", r"within ([0-9e.-]+) of zero counts as zero\)\. `--floats close` also compares "
                                        r"float values \(relative ([0-9e.-]+)\)")
    assert (float(zero), float(rel)) == (FLOAT_ZERO, FLOAT_REL)
    statuses = said("parity/index.md", r"The exit status is (\d+) only when something was compared and nothing "
                                       r"diverges \((\d+): a divergence, or no exchange compared; (\d+): a bad tape or "
                                       r"rule file, (\d+): no server at the URL\)")
    assert tuple(map(int, statuses)) == (parity_cli.EXIT_OK, parity_cli.EXIT_DIVERGED, parity_cli.EXIT_ERROR,
                                         parity_cli.EXIT_NO_SERVER)
    assert int(said("parity/index.md", r"in every dialect \((\d+) examples per property")[0]) == CORPUS_EXAMPLES
    from contract.limits import MAX_ANSWER_BYTES

    assert int(said("parity/index.md", r"not the client's (\d+) GiB cap")[0]) * 1024 * MiB == MAX_ANSWER_BYTES
    assert int(said("server-team/costs.md", r"Hypothesis runs (\d+) examples per property by default")[0]) == EXAMPLES_REAL
    for name in ("client-teams/retries.md", "server-team/schemathesis.md"):
        assert int(said(name, r"1-(\d+) printable ASCII")[0]) == MAX_KEY_CHARS
    current, proposed = said("server-team/schemathesis.md", r"2xx from every operation \((\d+) in the current "
                                                            r"document, (\d+) in the proposed\)")
    assert (int(current), int(proposed)) == (len(routes_for("current")), len(routes_for("proposed")))
    layout = (ROOT / "tests" / "conformance" / "test_report_layout.py").read_text(encoding="utf-8")
    width = re.search(r"^WIDTH, HEIGHT = (\d+), \d+$", layout, re.M)
    assert width and said("parity/index.md", r"measured in headless Chromium at ([0-9,]+) px")[0].replace(",", "") == width[1]
    house = (ROOT / "tests" / "test_house.py").read_text(encoding="utf-8")
    rules = {name: int(n) for name, n in re.findall(r"^(\w+) = (\d+)$", house, re.M)}
    rules |= {name: int(n) for pair in re.findall(r"^(\w+), (\w+) = (\d+), (\d+)$", house, re.M)
              for name, n in ((pair[0], pair[2]), (pair[1], pair[3]))}
    stated = said("layout.md", r"a folder of more than (\d+) modules, and warns on a module over (\d+) lines or a "
                               r"function over (\d+) \(it fails past (\d+) and (\d+)\)")
    assert tuple(map(int, stated)) == (rules["MAX_MODULES_PER_FOLDER"], rules["LOOK_MODULE_LINES"],
                                       rules["LOOK_FUNCTION_LINES"], rules["MAX_MODULE_LINES"],
                                       rules["MAX_FUNCTION_LINES"])
    from conformance.load.cli import STOP_TIMEOUT_S

    stop = said("load.md", r"\(up to `--stop-timeout`, (\d+) s unless given\)")[0]
    assert float(stop) == float(STOP_TIMEOUT_S)
    from contract.limits import RetryPolicy

    retried, retries = said("client-teams/client.md", r"Retries: connection errors, time-outs and HTTP ([0-9/]+), (\w+) "
                                                      r"retries,")
    assert {int(n) for n in retried.split("/")} == set(RetryPolicy().statuses)
    words = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
    assert words.index(retries) == RetryPolicy().retries
    from conformance import cli as conformance_cli

    assert int(said("server-team/costs.md", r"no server answering at URL: <reason>` \(exit status (\d+)\)")[0]) == \
        conformance_cli.EXIT_NO_SERVER
    schemathesis_test = (ROOT / "tests" / "e2e" / "test_schemathesis_cli.py").read_text(encoding="utf-8")
    count, seed = said("server-team/schemathesis.md", r"at a small count \(`ST_MAX_EXAMPLES=(\d+)`, seed (\d+)\)")
    assert f'os.environ.get("ST_MAX_EXAMPLES", "{count}")' in schemathesis_test
    assert re.search(rf'^SEED = os.environ.get\("ST_SEED", "{seed}"\)$', schemathesis_test, re.M)
    long_job = (ROOT / "benchmarks" / "bench_long_job.py").read_text(encoding="utf-8")
    calls = re.search(r'"--calls", type=int, default=(\d+),', long_job)
    assert calls and int(said("benchmarks.md", r"a ([0-9,]+)-call job")[0].replace(",", "")) == int(calls[1])


def test_the_load_pages_profile_is_the_shipped_default() -> None:
    """load.md's TOML block, an excerpt of conformance/load/default-profile.toml: every
    table and value it shows is the shipped one."""
    import tomllib

    block = re.search(r"^```toml\n(.*?)^```$", page("load.md"), re.M | re.S)
    assert block, "load.md lost its profile"
    shown = tomllib.loads(block[1])
    shipped = tomllib.loads((ROOT / "conformance" / "load" / "default-profile.toml").read_text(encoding="utf-8"))
    assert set(shown) == set(shipped)
    for table, values in shown.items():
        assert values.items() <= shipped[table].items(), (table, values, shipped[table])


#: A figure as the pages print it: a signed or unsigned number, thousands with commas; not a
#: digit inside a word or after a hyphen (``chunk-0``, ``ERR-1``, ``1024x``).
NUMBER = re.compile(r"(?<![\w.\-/])[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def numbers(cell: str) -> list[str]:
    """The figures of a table cell as printed, code spans (option names, codes) left out."""
    return NUMBER.findall(re.sub(r"`[^`]*`", "", cell))


def printed_as(value: float, printed: str) -> bool:
    """``value`` rounds to ``printed`` at the decimals printed."""
    decimals = len(printed.partition(".")[2])
    return abs(float(printed.replace(",", "")) - value) <= 0.5 * 10 ** -decimals + 1e-9


def hardening_rows(text: str) -> dict[str, tuple[str, str, str]]:
    """Every ``| attack | before | now |`` row of the limits page's hardening tables."""
    rows: dict[str, tuple[str, str, str]] = {}
    for table in re.findall(r"^\| attack \| before \| now \|\n\|---\|---\|---\|\n((?:\|.*\|\n)+)", text, re.M):
        for line in table.splitlines():
            attack, before, now = (c.strip() for c in line.strip("|").split(" | "))
            rows[attack] = (attack, before, now)
    return rows


def test_the_hardening_tables_are_the_run_kept_beside_them() -> None:
    """Every figure of the limits page's two hardening tables, in the attack and now columns
    (and the poll page's before, which the run measures too), is docs/img/hardening.json's
    (one ``bench_hardening.py --json`` run, every bound held), rounded as printed; the
    page's date and load average are the run's, its command is the one that wrote it, and
    that command's options exist."""
    import subprocess
    import sys

    from contract.limits import INFLATION_FREE_BYTES, MAX_ANSWER_BYTES, MAX_RESULT_BYTES, MiB
    from fake_gs.cli import build_parser

    kept = json.loads((DOCS / "img" / "hardening.json").read_text(encoding="utf-8"))
    a = kept["attacks"]
    assert kept["ok"] and not kept["quick"] and kept["round"] == "all", "the kept run missed a bound or was cut short"
    assert all(f["ok"] for f in a.values())
    defaults = {x.option_strings[0]: x.default for x in build_parser()._actions if x.option_strings}
    gib = 1024 * MiB
    s, c, ac, r, ad, ls, pp, sr, si = (a[k] for k in ("slow_bodies", "chunk0", "accounts", "results", "admin",
                                                      "log_stage", "poll_page", "shared_reservations",
                                                      "shared_inflight"))
    st, ids, dr, gz, eb, rp, js, ti, rt = (a[k] for k in ("stalled", "idle_sockets", "drip", "gzip_bomb",
                                                          "endless_body", "result_pages", "json_step", "tiny",
                                                          "retention"))
    # attack-cell prefix -> (figures of the attack cell, of the now cell, of the before cell
    # when the run measures it too); 408, 403 and the like are the statuses the run counted.
    expected: dict[str, tuple[list[float], list[float], list[float] | None]] = {
        "40 connections": ([s["connections"], s["declared_mib"], s["bytes_sent_each"], s["hold_s"]],
                           [s["rss_growth_mib"], s["health_worst_ms"], s["probes"], s["answered_408"], 408,
                            s["hold_s"]], None),
        "50 chunk-0": ([c["requests"], c["payload_bytes"], c["frame_mib"]], [c["rss_growth_mib"], c["poll_worst_ms"]],
                       None),
        "token A at": ([], [ac["b_chunks"], ac["a_statuses"][-1]], None),
        "2,000 forward": ([r["calls"], r["result_mib"]], [r["peak_growth_mib"], r["rss_start_mib"]], None),
        "`--token A": ([ad["routes"]], [ad["a_statuses"][0], ad["z_statuses"][0]], None),
        "unauthenticated PUTs": ([ls["declared_gib"], ls["pushed_gb"], ls["pushed_again_gb"], ls["connections"],
                                  ls["connections_again"]],
                                 [int(ls["answers"][0].split()[1]), *ls["fake_rss_mib"], *ls["stage_rss_mib"],
                                  ls["temp_disk_growth_bytes"]], None),
        "building one": ([pp["events"], pp["page_mib"]], [pp["spliced_over_page"]], [pp["reserialised_over_page"]]),
        "4 accounts": ([sr["accounts"], sr["chunk0_bytes"], sr["frame_gib"],
                        defaults["--max-total-buffered-mib"] * MiB / gib, sr["upload_mib"]],
                       [sr["reclaimed"], sr["frame_gib"], sr["accounts"] - sr["reclaimed"], sr["peak_growth_mib"]],
                       None),
        "one account trickles": ([si["bodies"], si["sent_mib"], si["late_body_kib"]],
                                 [si["late_status"], si["late_ms"], si["evicted"]], None),
        "the `fake_gs` pytest fixture": ([], [], None),  # a test's verdict, not a figure
        "200 partial": ([st["heads"], st["tricklers"], 1, st["trickle_every_s"]],
                        [st["answered_408"], 408, st["last_closed_after_s"], st["head_timeout_s"],
                         st["body_timeout_s"], st["rss_growth_mib"],
                         st["health_worst_ms"]], None),
        "20,000 idle": ([ids["sockets"]], [ids["cap"], ids["evicted"], ids["health_worst_s"], ids["probes"],
                                           ids["probe_failures"], ids["rss_growth_mib"]], None),
        "the client against a drip": ([1, dr["seconds_per_byte"]], [dr["ended_after_s"]], None),
        "the client against a 0.6": ([gz["gzip_mb"], gz["decoded_mib"]],
                                     [INFLATION_FREE_BYTES / MiB, gz["client_peak_growth_mib"]], None),
        "the suite's raw driver": ([], [MAX_ANSWER_BYTES / gib, eb["driver_s"], eb["replayer_sent_mib"]], None),
        "the client against endless": ([rp["chunk_mib"]], [rp["pages"], MAX_RESULT_BYTES / gib,
                                                           rp["client_peak_growth_mib"]], None),
        "a 59 MiB": ([js["over_mib"]], [js["over_status"], js["over_rss_growth_mib"], js["over_health_worst_ms"],
                                        js["under_mib"], js["under_rss_growth_mib"], js["under_growth_over_body"],
                                        js["under_health_worst_ms"]], None),
        "a tiny-engine": ([ti["rows"], ti["cols"]], [ti["big_status"], ti["big_rss_growth_mib"]], None),
        "NaN advantages": ([], [ti["nan_status"], ti["next_loss"]], None),
        "12 creates": ([rt["creates"], rt["experiment_name_mib"]],
                       [rt["create_statuses"][0], rt["creates_rss_growth_mib"]], None),
        "400 saves": ([rt["saves"], rt["exports"]], [rt["saves_taken"], rt["saves_refused"], 400,
                                                     rt["saves_rss_growth_mib"], rt["exports_kept"],
                                                     rt["exports_rss_growth_mib"]], None),
    }
    text = page("client-teams/limits.md")
    rows = hardening_rows(text)
    assert len(rows) == len(expected), sorted(rows)
    for key, (attack_figures, now_figures, before_figures) in expected.items():
        (row,) = [cells for attack, cells in rows.items() if attack.startswith(key)]
        for cell, figures in zip(row, (attack_figures, before_figures, now_figures), strict=True):
            if figures is None:
                continue  # the before column: the dated measurement when each fix landed
            printed = numbers(cell)
            assert len(printed) == len(figures), (key, cell, printed, figures)
            for value, shown in zip(figures, printed, strict=True):
                assert printed_as(float(value), shown), (key, cell, shown, value)
    flat = " ".join(text.split())
    command = "python benchmarks/bench_hardening.py --json docs/img/hardening.json"
    assert kept["command"] == command and f"`{command}`" in flat
    measured = kept["measured"]
    assert f"on {measured['date']}" in flat and f"load average {measured['load_average_1min_after']:.1f}" in flat
    usage = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_hardening.py"), "--help"],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert "--json PATH" in usage


def test_the_self_parity_figures_are_the_runs_kept_beside_them() -> None:
    """tapes.md's self-parity table: each dialect's row is the gs-parity ``--json`` its
    workflow wrote (docs/img/self_parity_DIALECT.json): the exchanges, nothing divergent or
    skipped, the tape's size and what its bodies kept; dated as the tapes were recorded; and
    the option that wrote it is gs-parity's."""
    from conformance.parity.cli import build_parser
    from contract.limits import MiB

    text = page("parity/tapes.md")
    rows = re.findall(r"^\| (kit|spec) \| (.*) \|$", text, re.M)
    assert [dialect for dialect, _ in rows] == ["kit", "spec"], rows
    dates = set()
    for dialect, cells in rows:
        kept = json.loads((DOCS / "img" / f"self_parity_{dialect}.json").read_text(encoding="utf-8"))
        (tape,) = kept["tapes"]
        recorded, bodies = tape["recorded"], tape["recorded"]["bodies"]
        assert tape["tape"] == "run.gsrec" and tape["target"].startswith("http://127.0.0.1:")
        assert tape["exchanges"] == recorded["exchanges"] == tape["compared"] + tape["skipped"]
        figures = [recorded["exchanges"], len(tape["divergent"]), tape["skipped"], recorded["tape_bytes"] / MiB,
                   bodies["blob_bytes"] / MiB, bodies["blobs"], bodies["stored"], bodies["inline"], bodies["outline"],
                   bodies["rebuilt"]]
        printed = numbers(cells.replace(" | ", " "))
        assert len(printed) == len(figures), (dialect, printed, figures)
        for value, shown in zip(figures, printed, strict=True):
            assert printed_as(float(value), shown), (dialect, shown, value)
        dates.add(recorded["created"][:10])
        assert f"--json docs/img/self_parity_{dialect}.json" in text or "self_parity_DIALECT.json" in text
    (date,) = dates
    assert f"recorded on {date}" in " ".join(text.split())
    assert "--json" in {s for a in build_parser()._actions for s in a.option_strings}
    assert "--dialect" in " ".join(text.split())


def test_the_skeleton_size_the_tapes_page_states_is_the_recorders() -> None:
    """tapes.md's skeleton of a list of one-byte tensors, as the recorder's scan makes it:
    the small count built here, the large one by the fold (only the ``$rep`` count grows)."""
    import torch

    from contract import wire
    from contract.tape.frame_stream import FrameScan

    said = re.search(r"a list of ([0-9,]+) one-byte tensors is a skeleton of (\d+) bytes of JSON, and of ([0-9,]+) "
                     r"such tensors (\d+): only the count grows",
                     " ".join(page("parity/tapes.md").split()))
    assert said, "tapes.md lost its skeleton size"
    small, large = int(said[1].replace(",", "")), int(said[3].replace(",", ""))
    frame = wire.dumps({"args": [], "kwargs": {"xs": [torch.ones(1, dtype=torch.uint8) for _ in range(small)]}})
    scan = FrameScan()
    scan.feed(frame)
    skeleton = json.dumps(scan.skeleton())
    assert f'{{"$rep": {small}, ' in skeleton
    assert int(said[2]) == len(skeleton)
    assert int(said[4]) == len(skeleton) - len(str(small)) + len(str(large))


def test_the_readmes_verdict_line_counts_todays_clauses() -> None:
    """The README's command 1 ends with a verdict line (a dated run's): its clause total is
    today's registry, so a clause added or removed fails here until the line is run again."""
    from contract.clauses import CLAUSES

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    said = re.search(r"`CONFORMS: profile \w+, (\d+) clauses: (\d+) green, 0 red", readme)
    assert said, "the README lost command 1's verdict line"
    assert int(said[1]) == len(CLAUSES) and int(said[2]) <= len(CLAUSES)


def test_the_at_most_once_table_is_the_run_kept_beside_it() -> None:
    """retries.md's measured table is the run kept in docs/img/at_most_once.json (the
    command the page quotes writes it): each row's figures are its scenario's and route's
    (a row naming several routes, "N each", holds for every one of them), every scenario and
    route of the run is on the page, and the page's date and load average are the run's."""
    kept = json.loads((DOCS / "img" / "at_most_once.json").read_text(encoding="utf-8"))
    text = page("client-teams/retries.md")
    flat = " ".join(text.split())
    command = "python benchmarks/bench_at_most_once.py --calls 40 --json docs/img/at_most_once.json"
    assert kept["command"] == command and f"`{command}` (seed {kept['seed']})" in flat
    measured = kept["measured"]
    assert (f"as it ran on {measured['date']} on the 2 shared cores (load average "
            f"{measured['load_average_1min_before']:.1f} before it, {measured['load_average_1min_after']:.1f} after)") in flat

    def spelled(name: str) -> str:
        return name.replace("`retry_ambiguous=True`", "retry_ambiguous").replace("all four faults", "all faults")

    rows = re.findall(r"^\|([^|]*)\| ([a-z/ -]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", text, re.M)
    covered: set[tuple[str, str]] = set()
    scenario = ""
    for name, routes, *cells in rows:
        if name.strip() == "scenario":
            continue  # the header
        scenario = spelled(name.strip()) or scenario
        figures = kept["scenarios"][scenario]["routes"]
        if "/" in routes or routes == "the same six":
            keys = list(figures)  # "N each": every route of the scenario
        else:
            keys = [k for k in figures if k.replace("_", "-") == routes]
            assert len(keys) == 1, (scenario, routes, list(figures))
        for key in keys:
            for column, cell in zip(("succeeded", "ambiguous", "executions", "duplicates"), cells, strict=True):
                (shown,) = numbers(cell)
                assert figures[key][column] == int(shown), (scenario, key, column, shown, figures[key][column])
            covered.add((scenario, key))
    assert covered == {(name, route) for name, run in kept["scenarios"].items() for route in run["routes"]}


def test_the_memory_figures_are_the_run_kept_beside_them() -> None:
    """The limits page's bench_memory.py paragraph: its bound is the benchmark's, and the
    kept run's (docs/img/memory_1gib.json, which the command it quotes writes) are its figures."""
    kept = json.loads((DOCS / "img" / "memory_1gib.json").read_text(encoding="utf-8"))
    text = " ".join(page("client-teams/limits.md").split())
    said = re.search(r"it exits 1 at ([0-9.]+)x; .*? Run on (\S+) with its defaults as `([^`]+)`, the 2 cores shared "
                     r"\(load average ([0-9.]+)\): ([0-9,]+) MiB above idle for the ([0-9,]+) MiB frame, ([0-9.]+)x, "
                     r"uploaded in ([0-9.]+) s", text)
    assert said, "the limits page lost bench_memory's figures"
    bound, date, command, load, above, frame, ratio, uploaded = said.groups()
    assert kept["ok"] and command == kept["command"] == "python benchmarks/bench_memory.py --json docs/img/memory_1gib.json"
    assert float(bound) == kept["target"] and date == kept["measured"]["date"]
    for shown, value in ((load, kept["measured"]["load_average_1min_after"]), (above, kept["peak_above_idle_mib"]),
                         (frame, kept["frame_mib"]), (ratio, kept["ratio"]), (uploaded, kept["uploaded_s"])):
        assert printed_as(value, shown), (shown, value)
    bench = (ROOT / "benchmarks" / "bench_memory.py").read_text(encoding="utf-8")
    assert re.search(rf"^TARGET = {re.escape(bound)}$", bench, re.M) and '"--json"' in bench


def test_the_limits_rows_without_an_option_are_the_contracts() -> None:
    """The limits table's rows that name no fake-gs option: the sampling bounds
    (``contract.limits.SAMPLING_BOUNDS``), the checkpoint id's length (``contract.ids``), how
    long a result read to the end is kept (the fake's settings), and the log lines a running
    job keeps (the fake's ``MAX_LOG_ENTRIES``, found by name wherever it lives)."""
    from contract.ids import MAX_ID_BYTES
    from contract.limits import SAMPLING_BOUNDS
    from fake_gs import FakeSettings

    rows = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| [^|]+ \|$", page("client-teams/limits.md"), re.M))

    def value(cell: str) -> int:
        power = re.fullmatch(r"2\^(\d+)", cell)
        return 2 ** int(power[1]) if power else int(cell.replace(",", ""))

    assert value(rows["prompts per generate / log-probs call"]) == SAMPLING_BOUNDS["prompts"]
    assert value(rows["`top_k` (log-probs), `logprobs` (sampling params)"]) == SAMPLING_BOUNDS["top_k"]
    assert value(rows["`max_tokens`"]) == SAMPLING_BOUNDS["max_tokens"]
    assert value(rows["`n` (sampling params)"]) == SAMPLING_BOUNDS["n"]
    generated = [cell for name, cell in rows.items() if name.startswith("tokens one generate may produce")]
    entries = [cell for name, cell in rows.items() if name.startswith("top entries one log-probs call")]
    assert [value(c) for c in generated + entries] == [SAMPLING_BOUNDS["generated_tokens"],
                                                       SAMPLING_BOUNDS["top_k_entries"]]
    assert rows["checkpoint id"].endswith(f"at most {MAX_ID_BYTES} bytes")
    kept_lines = re.search(r"running jobs keep their newest ([0-9,]+) log lines", " ".join(page("client-teams/limits.md").split()))
    defined = [m[1] for path in (ROOT / "fake_gs").rglob("*.py")
               for m in re.finditer(r"^MAX_LOG_ENTRIES = ([0-9_]+)$", path.read_text(encoding="utf-8"), re.M)]
    assert kept_lines and len(defined) == 1, ("the fake's log-line bound (MAX_LOG_ENTRIES) or the page's", defined)
    assert int(kept_lines[1].replace(",", "")) == int(defined[0].replace("_", ""))
    settings = FakeSettings()
    assert rows["a result read to the end"] == (f"kept {settings.result_grace_s:g} s, at most the "
                                                f"{settings.results_read_kept} newest read per job")


def test_the_upload_rerun_is_the_run_kept_beside_it() -> None:
    """The limits page's 64 MiB bench_upload.py re-run: the kit's ratio to the bare loop
    (median [range] over the rounds), the tensors' ratio and the peak memory are the kept
    run's (docs/img/upload_64mib.json, which the command it quotes writes)."""
    import statistics

    kept = json.loads((DOCS / "img" / "upload_64mib.json").read_text(encoding="utf-8"))
    text = " ".join(page("client-teams/limits.md").split())
    said = re.search(r"Run on (\S+) for (\d+) MiB only, as `([^`]+)` \(load average ([0-9.]+) before it, ([0-9.]+) "
                     r"after; .*?\): ([0-9.]+)x \[([0-9.]+)-([0-9.]+)\] of the bare loop \(the batch sent as tensors: "
                     r"([0-9.]+)x \[([0-9.]+)-([0-9.]+)\]\), peak memory over the frame client ([0-9.]+)x, fake "
                     r"([0-9.]+)x", text)
    assert said, "the limits page lost bench_upload's re-run"
    date, size, command, before, after, *shown = said.groups()
    assert command == kept["command"] and f"--sizes {size} " in command and date == kept["measured"]["date"]
    clients = kept["uploads"][size]["clients"]
    kit, tensors = clients["kit, frame bytes"], clients["kit, batch as tensors"]
    figures = [kept["measured"]["load_average_1min_before"], kept["measured"]["load_average_1min_after"]]
    for runs in (kit["vs_bare"], tensors["vs_bare"]):
        figures += [statistics.median(runs), min(runs), max(runs)]
    figures += [statistics.median(kit["client_peak_over_frame"]), statistics.median(kit["server_peak_over_frame"])]
    for value, printed in zip(figures, [before, after, *shown], strict=True):
        assert printed_as(value, printed), (printed, value)


def test_the_service_client_configurations_are_the_tests() -> None:
    """integrations.md's "seeds 0 to N" of the any dialect are the seeds the service client's
    tests run (``CONFIGURATIONS`` in tests/e2e/test_service_client.py, read as text: importing
    it would need the client checkout)."""
    source = (ROOT / "tests" / "e2e" / "test_service_client.py").read_text(encoding="utf-8")
    seeds = re.search(r'f"any-\{seed\}": \{"dialect": "any", "seed": seed\} for seed in range\((\d+)\)', source)
    said = re.search(r"`--dialect any` with seeds 0 to\s+(\d+)", page("integrations.md"))
    assert seeds and said, "the configurations or the page's sentence changed shape"
    assert int(said[1]) == int(seeds[1]) - 1


def test_the_proxy_cpu_figures_are_the_runs_kept_beside_them() -> None:
    """proxy.md's CPU seconds per GiB relayed, splice on (the default hash bound) and with
    every byte hashed (``--hash-frames-up-to 1024``): the median over the rounds of the two
    bench_proxy.py runs kept in docs/img/ (the commands the page quotes write them), with
    the date, the rounds and the load average."""
    import statistics

    text = " ".join(page("server-team/proxy.md").split())
    said = re.search(r"little CPU: ([0-9.]+) CPU seconds per GiB relayed \(the median of (\d+) rounds\), as `([^`]+)` "
                     r"measured it on (\S+) \(load average ([0-9.]+) before it;", text)
    hashed = re.search(r"hashing every byte \(([0-9.]+) CPU seconds per GiB in the same measurement with `([^`]+)`, "
                       r"run just after it\)", text)
    assert said and hashed, "proxy.md lost gs-proxy's CPU figures"
    relayed = json.loads((DOCS / "img" / "proxy_64mib.json").read_text(encoding="utf-8"))
    every = json.loads((DOCS / "img" / "proxy_64mib_hashed.json").read_text(encoding="utf-8"))
    assert relayed["command"] == said[3] and relayed["hash_frames_up_to_mib"] is None
    assert every["command"] == f"{said[3].rpartition(' --json ')[0]} {hashed[2]}"
    assert every["hash_frames_up_to_mib"] == 1024
    assert relayed["measured"]["date"] == every["measured"]["date"] == said[4]
    assert relayed["runs"] == every["runs"] == int(said[2])
    assert printed_as(relayed["measured"]["load_average_1min_before"], said[5])
    for kept, shown in ((relayed, said[1]), (every, hashed[1])):
        (rounds,) = kept["uploads"].values()
        assert len(rounds["proxy"]) == kept["runs"]
        assert printed_as(statistics.median(r["cpu_s_gib"] for r in rounds["proxy"]), shown), (shown, kept["command"])


def test_the_published_wheels_facts_are_the_ones_kept() -> None:
    """integrations.md's account of PyPI's arctic-platform wheel (its size, modules, packages
    and requirements) is docs/img/arctic_platform_wheel.json, which docs/wheel_facts.py wrote
    from the downloaded wheel (CI does not download it)."""
    kept = json.loads((DOCS / "img" / "arctic_platform_wheel.json").read_text(encoding="utf-8"))
    text = " ".join(page("integrations.md").split())
    said = re.search(r"\(([0-9.]+), measured on (\S+) by `docs/wheel_facts.py`, whose output is kept in `([^`]+)` and "
                     r"holds this paragraph: a (\d+) kB wheel of (\d+) modules\) ships `([\w.]+)` and `(\w+)` only", text)
    assert said, "integrations.md lost the wheel's figures"
    version, date, path, kb, modules, *packages = said.groups()
    assert path == "docs/img/arctic_platform_wheel.json" and kept["wheel"].startswith(f"arctic_platform-{version}-")
    assert date == kept["measured"]["date"] and kept["command"].endswith(f"--json {path}")
    assert (int(kb), int(modules)) == (round(kept["bytes"] / 1000), kept["modules"])
    assert [p.replace(".", "/") for p in packages] == [p.removeprefix("arctic_platform/") if "testing" in p else p
                                                       for p in kept["packages"]]
    requires = re.search(r"while it requires (.*?)\. Against", text)
    assert requires, "integrations.md lost the wheel's requirements"
    for named in re.findall(r"`([^`]+)`", requires[1]):
        assert any(r == named or r.startswith(f"{named},") or re.split(r"[<>=!]", r)[0] == named
                   for r in kept["requires_dist"] if ";" not in r), named
    assert "torch" in kept["requires_dist"] and "an unpinned `torch`" in requires[1]


def test_the_retries_pages_opening_figures_are_the_kept_run() -> None:
    """retries.md's opening: what resending costs (the kit's client with ``retry_ambiguous``
    through a proxy losing answers) is the kept bench_at_most_once.py run's, its rate and
    calls included."""
    kept = json.loads((DOCS / "img" / "at_most_once.json").read_text(encoding="utf-8"))
    said = re.search(r"losing the answers of (\d+)% of the POSTs, (\d+) steps ran (\d+) times, (\d+) saves (\d+) times "
                     r"and (\d+) generates (\d+) times \(the run kept", " ".join(page("client-teams/retries.md").split()))
    assert said, "retries.md lost its opening figures"
    rate, *pairs = map(int, said.groups())
    assert rate == round(kept["rate"] * 100)
    routes = kept["scenarios"]["current, retry_ambiguous, answers lost"]["routes"]
    for route, (calls, ran) in zip(("step", "save", "generate"), zip(pairs[::2], pairs[1::2], strict=True), strict=True):
        assert (calls, ran) == (kept["calls"], routes[route]["executions"]), route


def test_the_hardening_before_column_states_only_figures_held() -> None:
    """The "before" column of the limits page's hardening tables describes a kit that no
    longer exists and whose runs were not kept: no figure in it but the poll page's (the
    kept run measures the old way too, held above) and the fake's option defaults (held by
    test_the_hardening_rows_name_the_fakes_defaults)."""
    held_options = (r"for the \d+ s idle window", r"waits \d+ s \(`--body-idle-s`\)")
    for attack, before, _now in hardening_rows(page("client-teams/limits.md")).values():
        if attack.startswith("building one"):
            continue
        assert not numbers(re.sub("|".join(held_options), "", before)), (attack, before)


def test_the_verdicts_pages_url_run_is_the_report_kept_beside_it() -> None:
    """verdicts.md's pasted URL run (judged fraction, what would judge more, cost, headline)
    is what the kit's own summary writer renders from the report that run wrote, kept in
    docs/img/verdicts_url_run.json, line for line; its date is the page's."""
    from conformance.reporting.summary import summary_lines
    from conformance.reporting.verdicts import RunResults

    text = page("server-team/verdicts.md")
    kept = json.loads((DOCS / "img" / "verdicts_url_run.json").read_text(encoding="utf-8"))
    block = re.search(r"^    ```text\n(    judged .*?)^    ```$", text, re.M | re.S)
    said = re.search(r"default options, run on (\S+) as `gs-conformance --url URL --report "
                     r"docs/img/verdicts_url_run.json`", " ".join(text.split()))
    assert block and said, "the verdicts page lost its URL run"
    shown = [line.removeprefix("    ") for line in block[1].splitlines()]
    assert shown == [*summary_lines(RunResults.from_json(kept)), kept["verdict"]["headline"]]
    assert kept["target"].startswith("http://127.0.0.1:") and kept["cost"]["jobs_created"] == 1
    assert said[1] == kept["measured"]["date"]
