"""The suite's options, declared once: the table below makes the pytest plugin's ``--gs-*``
options, the ``gs-conformance`` CLI's argparse, the pytest argv the CLI hands over, and
:class:`GsOptions`, the parsed options a run reads.

An option's CLI flag is ``--NAME`` and its plugin flag ``--gs-NAME`` (the docs promise
that prefix); an option only one side offers says so (``cli=False`` / ``plugin=False``), and
one that is neither (``request_timeout_s``) is a setting of :class:`GsOptions` alone. To add
an option: add one row here; read it as ``gs_opts.<name>`` in a fixture or property.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Literal, Protocol, overload

import pytest

from conformance.reporting.verdicts import clause_ids
from contract.clauses import CLAUSE_PROFILES
from contract.clauses import ClauseProfile as SuiteProfile
from contract.forms import (
    DEFAULT_DELIVERY,
    DEFAULT_DIALECT,
    DEFAULT_STATUS_STYLE,
    DELIVERIES,
    DIALECTS,
    STATUS_STYLES,
)
from contract.models.catalog import SMALLEST_TRAINING_MODEL
from contract.routes import DEFAULT_ENDPOINT, DEFAULT_PROFILE
from contract.tape.body_store import BODY_MODES, BUDGET_MIB, DEFAULT_BODY_MODE

__all__ = ["OPTION", "OPTIONS", "SECRET_OPTIONS", "GsOptions", "Option", "SuiteProfile",
           "add_cli_arguments", "add_fake_arguments", "add_pytest_options", "cli_spelling", "gs_options", "pytest_argv", "with_env"]


class FakeEngines(Sequence[str]):
    """The fake's engine names (``fake_gs.engines.ENGINES``, their one registry), read when
    first asked for (a ``--help``, a value to check): importing the fake costs seconds that
    processes which never start it (gs-load's Locust workers, which read these rows, and
    ``gs-conformance`` before it hands over to pytest) should not pay."""

    def _names(self) -> tuple[str, ...]:
        from fake_gs.engines import ENGINES

        return tuple(sorted(ENGINES))

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

#: Default hypothesis examples per property: cheap against a real service, wider on the fake.
EXAMPLES_REAL = 5
EXAMPLES_EMBEDDED = 25

Kind = Literal["str", "int", "float", "flag"]
_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "flag": bool}


@dataclass(frozen=True)
class Option:
    """One option: its :class:`GsOptions` field (and the CLI's argparse dest), its flags, and
    how a flag's raw value becomes the field's value."""

    name: str
    help: str
    group: str
    kind: Kind = "str"
    default: Any = None
    choices: Sequence[str] | None = None
    #: gs-conformance's spellings (empty: the CLI lacks it).
    cli: tuple[str, ...] = ()
    #: The plugin's flag (None: the plugin lacks it).
    pytest: str | None = None
    #: Environment variable standing in when the option is not given (read at use time).
    env: str | None = None
    metavar: str | None = None
    #: The raw flag value -> the field's value (default: absent or empty means the default).
    parse: Callable[[Any], Any] | None = None
    #: The field's type where the kind's is too loose (a Literal, a tuple of clause ids).
    annotation: Any = None
    #: A field of GsOptions (False: a CLI- or plugin-only knob read off its own parser).
    is_field: bool = True

    @property
    def full_help(self) -> str:
        return self.help if not self.env else f"{self.help.rstrip('.')} (default: ${self.env})."

    @property
    def field_type(self) -> Any:
        base = self.annotation or _TYPES[self.kind]
        return base if self.default is not None or self.kind == "flag" else base | None

    def value(self, raw: Any) -> Any:
        """The field's value for the flag's raw value."""
        if self.parse is not None:
            return self.parse(raw)
        if self.kind == "flag":
            return bool(raw)
        return self.default if raw is None or raw == "" else raw

    def parser_kwargs(self) -> dict[str, Any]:
        """``add_argument`` / ``addoption`` keywords shared by the CLI and the plugin."""
        if self.kind == "flag":
            return {"action": "store_true", "help": self.full_help}
        out: dict[str, Any] = {"help": self.full_help, "default": None}
        if self.parse is None:
            out["default"] = self.default
        if self.kind != "str":
            out["type"] = _TYPES[self.kind]
        if self.choices is not None:
            out["choices"] = self.choices
        if self.metavar:
            out["metavar"] = self.metavar
        return out


def _opt(
    name: str,
    help: str,
    group: str,
    *,
    flags: tuple[str, ...] = (),
    cli: bool = True,
    plugin: bool = True,
    **more: Any,
) -> Option:
    """An option spelled ``--NAME`` on the CLI (or ``flags``) and ``--gs-NAME`` in the plugin
    (NAME: the first long flag)."""
    spelled = flags or ("--" + name.replace("_", "-"),)
    if more.get("kind") == "flag":
        more.setdefault("default", False)
    return Option(
        name,
        help,
        group,
        cli=spelled if cli else (),
        pytest="--gs-" + next(f for f in spelled if f.startswith("--"))[2:] if plugin else None,
        **more,
    )


_T, _R, _F, _O = "target", "run", "embedded fake", "output"
OPTIONS: tuple[Option, ...] = (
    _opt("url", "Service base URL, e.g. https://ACCOUNT.snowflakecomputing.com "
         "(absent: start the fake in-process).", _T),
    _opt("token", "Programmatic access token.", _T, env="GS_TOKEN"),
    _opt("token2", "A second account's token, for the isolation clauses.", _T, env="GS_TOKEN2"),
    _opt("database", "Database of the service prefix.", _T, default="GS_CONFORMANCE_DB"),
    _opt("schema", "Schema of the service prefix.", _T, default="PUBLIC"),
    _opt("endpoint", "Endpoint of the service prefix.", _T, default=DEFAULT_ENDPOINT),
    _opt("job_id", "Reuse this running job instead of creating one.", _T),
    _opt("model", "Model for created jobs (default: the smallest training model).", _T,
         default=SMALLEST_TRAINING_MODEL),
    _opt("max_jobs", "Jobs the run may create (default 1 against a URL, unlimited on the "
         "fake).", _T, kind="int"),
    _opt("max_result_mib", "Cap (MiB) on the one large result a URL run asks for, so result "
         "chunks are judged (default 64: a result just past the 60 MiB body bound).", _T,
         kind="int", default=64),
    _opt("startup_timeout_s", "Seconds to wait for the job to be running (default 1800).", _T,
         flags=("--startup-timeout",), kind="float", default=1800.0),
    _opt("profile", "current: today's surface; proposed: current + the seed's additions; "
         "semantic: numeric behaviour (tiny engine or a real model).", _R,
         default=DEFAULT_PROFILE, choices=CLAUSE_PROFILES, annotation=SuiteProfile),
    _opt("examples", "Hypothesis examples per property (default 25 on the fake, 5 against "
         "a URL).", _R, kind="int"),
    _opt("clauses", "Only properties checking these clauses: ID,ID or prefixes like CG-*.", _R,
         default=(), parse=clause_ids, annotation=tuple[str, ...]),
    _opt("workers", "pytest-xdist workers for the embedded fake: auto or N (default: auto, "
         "one process for a --clauses selection of 24 or fewer; a URL always runs in one "
         "process).", _R, flags=("-n", "--workers"), plugin=False,
         is_field=False),
    _opt("require_all", "Fail on every skipped MUST clause too (the embedded fake's gate); "
         "default: only red clauses fail, a skipped clause being one this target cannot be "
         "judged on.", _R, kind="flag"),
    _opt("randomize", "Randomise hypothesis (default: reproducible).", _R, kind="flag"),
    _opt("no_shrink", "Skip hypothesis shrinking: faster, but failing examples are not "
         "minimal.", _R, kind="flag"),
    _opt("mutant", "Run the embedded fake with this deliberate contract violation (a mutant: "
         "fake-gs --variation).", _F, metavar="NAME"),
    _opt("engine", "Engine of the embedded fake.", _F, choices=FakeEngines()),
    _opt("status_style", "Status spelling of the embedded fake.", _F,
         default=DEFAULT_STATUS_STYLE, choices=STATUS_STYLES),
    _opt("delivery", "Result delivery form of the embedded fake.", _F, default=DEFAULT_DELIVERY,
         choices=DELIVERIES),
    _opt("dialect", "Answer forms: kit (the fake's own), spec (integer error codes, detail "
         "lists, '' poll fields, last_lr lists, ... : the other forms the spec allows) or any "
         "(a seeded choice among every form of contract.forms, per answer).", _F,
         flags=("--dialect", "--gs-dialect"), default=DEFAULT_DIALECT, choices=DIALECTS),
    _opt("fake_seed", "Seed of the embedded fake (its synthesised values and, with --dialect "
         "any, its choice of forms).", _F, kind="int"),
    _opt("report", "HTML (or .md/.json/.txt by suffix) report path.", _O),
    _opt("markdown", "Markdown report path.", _O, plugin=False, is_field=False),
    _opt("junit", "JUnit XML path (one testcase per clause).", _O),
    _opt("json", "Per-clause results as JSON.", _O),
    _opt("record", "Record every HTTP exchange to this parity tape (replay it with "
         "gs-parity); a run under xdist appends each worker's stream in turn, and the CLI "
         "records in one process unless -n is given.", _O, metavar="FILE"),
    # -- parity tapes --
    _opt("record_bodies", "What --record keeps of a request body too big to keep inline: bytes "
         "(out of line, each distinct body once, within --record-budget-mib) or outline (a frame's "
         "skeleton: tree, dtypes, shapes, value ranges; gs-parity rebuilds it with seeded "
         "values).", _O, default=DEFAULT_BODY_MODE, choices=BODY_MODES),
    _opt("record_budget_mib", "Size budget (MiB) of the bodies --record keeps out of line; past "
         "it bodies are kept as their skeleton, with a warning.", _O, kind="int", default=BUDGET_MIB),
    _opt("plan", "Run nothing: list for each clause whether this target, with these options, "
         "can judge it, and why not (which option would let it).", _O, kind="flag",
         plugin=False, is_field=False),
    _opt("plan_path", "Only plan: write, as JSON, whether each clause can be judged on this "
         "target with these options (and why not), then run nothing.", _O,
         flags=("--plan",), cli=False, is_field=False),
    _opt("verbose", "Show pytest's own output too.", _O, flags=("-v", "--verbose"),
         kind="flag", plugin=False, is_field=False),
    _opt("quiet", "No progress lines, only the report.", _O, flags=("-q", "--quiet"),
         kind="flag", plugin=False, is_field=False),
    _opt("request_timeout_s", "Seconds one HTTP request of the raw driver may take.", _T,
         kind="float", default=600.0, cli=False, plugin=False),
)
OPTION: dict[str, Option] = {o.name: o for o in OPTIONS}


#: Options that hold a credential: kept out of the options' repr.
SECRET_OPTIONS = frozenset({"token", "token2"})


class _Derived:
    """What a run reads off its options beyond their values: the base of GsOptions, whose
    fields the table makes (so they are not spelled here)."""

    @property
    def embedded(self) -> bool:
        o: Any = self
        return not o.url

    @property
    def forms(self) -> frozenset[str]:
        """The answer forms (contract.forms) the target may use: the embedded fake's
        dialect's, every form the spec allows for a URL."""
        from contract.forms import forms_of

        o: Any = self
        return forms_of(o.dialect if self.embedded else None)

    @property
    def n_examples(self) -> int:
        o: Any = self
        if o.examples is not None:
            return max(1, int(o.examples))
        return EXAMPLES_EMBEDDED if self.embedded else EXAMPLES_REAL

    @property
    def job_budget(self) -> int | None:
        """Jobs the run may create (None: unlimited, the embedded fake's default)."""
        o: Any = self
        if o.max_jobs is not None:
            return int(o.max_jobs)
        return None if self.embedded else (0 if o.job_id else 1)

    def with_env(self, name: str) -> Any:
        """The option's value, else its environment variable's (``$GS_TOKEN``...)."""
        return with_env(name, getattr(self, name))

    def describe(self) -> dict[str, Any]:
        """The settings worth printing in a report header."""
        o: Any = self
        out: dict[str, Any] = {
            "profile": o.profile,
            "examples": self.n_examples,
            "model": o.model,
        }
        if o.engine:
            out["engine"] = o.engine
        if self.embedded:
            out |= {"status_style": o.status_style, "delivery": o.delivery, "dialect": o.dialect}
            if o.fake_seed:
                out["fake_seed"] = o.fake_seed
        if o.mutant:
            out["mutant"] = o.mutant
        if o.job_id:
            out["job_id"] = o.job_id
        if not self.embedded:
            out["max_result_mib"] = o.max_result_mib
        out["second_token"] = bool(self.with_env("token2")) or self.embedded
        if o.require_all:
            out["require_all"] = True
        return out


GsOptions: Any = make_dataclass(
    "GsOptions",
    [(o.name, o.field_type, field(default=o.default, repr=o.name not in SECRET_OPTIONS))
     for o in OPTIONS if o.is_field],
    bases=(_Derived,),
    frozen=True,
    namespace={"__doc__": "The suite's options (``--gs-*``), parsed once per session.",
               "__module__": __name__},
)


def with_env(name: str, value: Any) -> Any:
    """``value``, else the option's environment variable (None when neither is set)."""
    env = OPTION[name].env
    return value or (os.environ.get(env) if env else None) or None


_PARSED = pytest.StashKey[Any]()


class OptionSource(Protocol):
    """What :func:`gs_options` reads off a pytest config."""

    @property
    def stash(self) -> pytest.Stash: ...
    def getoption(self, name: str) -> Any: ...


def gs_options(config: OptionSource) -> Any:
    """The session's GsOptions, parsed once from its ``--gs-*`` options."""
    cached = config.stash.get(_PARSED, None)
    if cached is None:
        raw = {o.name: config.getoption(o.pytest) for o in OPTIONS if o.is_field and o.pytest}
        cached = GsOptions(**{name: OPTION[name].value(value) for name, value in raw.items()})
        config.stash[_PARSED] = cached
    return cached


def add_pytest_options(parser: Any) -> None:
    """The plugin's ``--gs-*`` options (pytest's ``pytest_addoption``)."""
    group = parser.getgroup("gs-conformance", "Cortex Training conformance suite")
    for opt in OPTIONS:
        if opt.pytest:
            group.addoption(opt.pytest, **opt.parser_kwargs())


def cli_spelling(text: str) -> str:
    """``text`` (a skip note, a hint, a plan line: written once, for the plugin) with each
    plugin option (``--gs-max-jobs``) spelled as gs-conformance spells it (``--max-jobs``)."""
    return _PLUGIN_FLAG.sub(lambda m: _CLI_SPELLING[m[1]], text)


#: The plugin's flags -> gs-conformance's (options both offer).
_CLI_SPELLING = {o.pytest: cli for o in OPTIONS if o.pytest
                 for cli in [next((f for f in o.cli if f.startswith("--") and not f.startswith("--gs-")), "")]
                 if cli}
_PLUGIN_FLAG = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(_CLI_SPELLING, key=len, reverse=True)))
                          + r")(?![\w-])")


def add_fake_arguments(group: Any, names: Sequence[str], about: str) -> None:
    """Another tool's flags for these embedded-fake options, spelled, checked and explained
    as gs-conformance's (``about``: what a flag not given means there)."""
    for name in names:
        opt = OPTION[name]
        group.add_argument(opt.cli[0], dest=name, default=None, choices=opt.choices,
                           metavar=None if opt.choices is not None else opt.metavar or opt.cli[0][2:].upper(),
                           help=f"{opt.help.rstrip('.')} ({about}).")


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """gs-conformance's flags, in their help groups."""
    groups: dict[str, Any] = {}
    for opt in OPTIONS:
        if not opt.cli:
            continue
        if opt.group not in groups:
            groups[opt.group] = parser.add_argument_group(opt.group)
        kwargs = opt.parser_kwargs()
        if opt.kind != "flag" and opt.choices is None and not opt.metavar:
            kwargs["metavar"] = opt.cli[-1].lstrip("-").replace("-", "_").upper()
        groups[opt.group].add_argument(*opt.cli, dest=opt.name, **kwargs)


def pytest_argv(ns: argparse.Namespace) -> list[str]:
    """The plugin flags for the CLI's parsed options: every option both offer that is set."""
    args: list[str] = []
    for opt in OPTIONS:
        if not (opt.cli and opt.pytest):
            continue
        value = getattr(ns, opt.name)
        if opt.kind == "flag":
            args += [opt.pytest] if value else []
        elif value is not None and value != "":
            args += [opt.pytest, str(value)]
    return args
