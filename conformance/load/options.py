"""gs-load's own options, declared once: the table below adds them to Locust's command line
(every process of a run parses them; the master's values win on the workers) and renders
them for the documentation (:func:`markdown_table`). Locust's own options (``--users``,
``--spawn-rate``, ``--run-time``, ``--headless``, ``--master``, ``--worker``, ``--html``,
...) pass through untouched.

The target options reuse gs-conformance's rows (:mod:`conformance.options`), so a flag
means the same in both tools.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from conformance.options import OPTION as SUITE
from conformance.options import Option

_T, _L, _F, _O = "gs-load target", "gs-load checks and costs", "gs-load embedded fake", "gs-load output"


def _own(name: str, help: str, group: str, **more: Any) -> Option:
    """A gs-load option spelled ``--NAME`` (underscores as dashes)."""
    if more.get("kind") == "flag":
        more.setdefault("default", False)
    return Option(name, help, group, cli=("--" + name.replace("_", "-"),), **more)


def _suite(name: str, group: str) -> Option:
    """gs-conformance's row for ``name``, in a gs-load group."""
    row = SUITE[name]
    return Option(row.name, row.help, group, kind=row.kind, default=row.default,
                  cli=row.cli, env=row.env, metavar=row.metavar)


OPTIONS: tuple[Option, ...] = (
    _own("url", "Service base URL, e.g. https://ACCOUNT.snowflakecomputing.com (absent: "
         "start the fake in a subprocess and load it).", _T),
    _suite("token", _T),
    _suite("database", _T),
    _suite("schema", _T),
    _suite("endpoint", _T),
    _suite("model", _T),
    _suite("job_id", _T),
    _suite("startup_timeout_s", _T),
    _own("load_secret", "Shared secret of a run's processes: needed to bind the master or the web UI "
         "beyond loopback; workers prove it before they get any set-up (the token travels sealed "
         "under it), and the web UI asks for it as its password.", _T, env="GS_LOAD_SECRET",
         metavar="SECRET"),
    _own("load_profile", "Load profile (TOML): user weights, think times, batch sizes "
         "(default: the shipped conformance/load/default-profile.toml).", _L, metavar="FILE"),
    _own("max_jobs", "Jobs the run may create; users share them round-robin (default: 1 "
         "against a URL, one per user on the embedded fake).", _L, kind="int"),
    _own("max_violations", "Contract violations the run tolerates before its exit status is "
         "1 (default 0).", _L, kind="int", default=0),
    _own("all_clauses", "Against a URL, count violations of the kit's decided clauses too "
         "(default: reported only, as gs-conformance does; on the fake they always count).",
         _L, kind="flag"),
    _suite("mutant", _F),
    _own("fake_host", "Interface the embedded fake listens on and the address workers are "
         "given for it (default 127.0.0.1). An interface beyond loopback (a LAN address, for "
         "workers elsewhere) also needs --expose-fake.", _F, default="127.0.0.1", metavar="HOST"),
    _own("expose_fake", "Let --fake-host name an interface beyond loopback: anyone on that "
         "network reaches the fake, so it then takes only fresh random service and admin tokens "
         "(the workers get the service token with the set-up, sealed under --load-secret when "
         "the run has one).", _F, kind="flag"),
    _own("fake_args", "More fake-gs flags for the embedded fake, one string (added to the "
         "profile's [fake] args).", _F, default="", metavar="ARGS"),
    _own("markdown", "Markdown report path (the per-route and violation tables, the cost).",
         _O, metavar="FILE"),
    _own("junit", "JUnit XML path (one testcase per clause judged under load).", _O,
         metavar="FILE"),
    _own("results_json", "The run's figures as JSON (per route, per clause, per worker).",
         _O, metavar="FILE"),
)
OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}


def add_locust_arguments(parser: Any) -> None:
    """gs-load's flags on Locust's parser (its ``init_command_line_parser`` event), in their
    help groups (so none is offered in Locust's web form: the token stays off it)."""
    groups: dict[str, Any] = {}
    for opt in OPTIONS:
        if opt.group not in groups:
            groups[opt.group] = parser.add_argument_group(opt.group)
        kwargs = opt.parser_kwargs()
        if opt.kind != "flag" and opt.choices is None:
            kwargs["metavar"] = metavar(opt)
        groups[opt.group].add_argument(*opt.cli, dest=opt.name, **kwargs)


def metavar(opt: Option) -> str:
    """What a flag's value is called in help: its own, else its flag's name (as
    gs-conformance spells it)."""
    return opt.metavar or opt.cli[-1].lstrip("-").replace("-", "_").upper()


def value(options: argparse.Namespace | Any, name: str) -> Any:
    """An option's value on a parsed namespace, else its environment variable, else None."""
    got = getattr(options, name, None)
    if got is not None and got != "" and got is not False:
        return got
    env = OPTION[name].env
    return (os.environ.get(env) if env else None) or OPTION[name].default


def markdown_table() -> str:
    """The options as a Markdown table, for docs/load.md (a test keeps the copy there true)."""
    rows = ["| option | meaning |", "|---|---|"]
    for opt in OPTIONS:
        flag = " / ".join(f"`{f}`" for f in opt.cli)
        if opt.kind != "flag":
            flag += f" {metavar(opt)}"
        rows.append(f"| {flag} | {opt.full_help.replace('|', '/')} |")
    return "\n".join(rows) + "\n"
