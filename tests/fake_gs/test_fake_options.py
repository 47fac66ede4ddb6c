"""The fake's option table: ``FakeSettings`` and ``fake-gs``'s parser come from one declaration.

Each check reads the table (``fake_gs.options``) and holds the parser and the settings to it,
so an option added to one and not the other, or declared with two defaults, fails here.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from dataclasses import Field, fields
from typing import Any

import pytest

from contract.limits import MiB
from fake_gs.cli import build_parser, settings_from_args
from fake_gs.options import bound_of, flag_of
from fake_gs.settings import FakeSettings, literal_choices

FLAGGED = [f for f in fields(FakeSettings) if flag_of(f) is not None]


def _refused_by_parser(argv: list[str]) -> bool:
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            return exc.code == 2
    return False


def _actions() -> dict[str, argparse.Action]:
    return {s: a for a in build_parser()._actions for s in a.option_strings}


def test_no_flags_give_the_default_settings() -> None:
    assert settings_from_args(build_parser().parse_args([])) == FakeSettings()


def test_every_flag_is_one_option_with_its_help() -> None:
    actions = _actions()
    names = [flag_of(f).name for f in FLAGGED]  # type: ignore[union-attr]
    assert len(names) == len(set(names)) and len(FLAGGED) >= 35
    for f in FLAGGED:
        flag = flag_of(f)
        assert flag is not None and flag.name in actions, f.name
        assert actions[flag.name].help == flag.help and flag.help
        assert actions[flag.name].dest == flag.dest
        for alias in flag.aliases:  # an older spelling: the same setting, hidden from the help
            assert actions[alias].dest == flag.dest and actions[alias].help == argparse.SUPPRESS
    aliases = [alias for f in FLAGGED for alias in flag_of(f).aliases]  # type: ignore[union-attr]
    assert set(actions) == {*names, *aliases, "-h", "--help", "--env-file"}


def test_units_scale_both_ways() -> None:
    scaled = [f for f in FLAGGED if flag_of(f).unit != 1]  # type: ignore[union-attr]
    assert {f.name for f in scaled} >= {"max_body_bytes", "max_inflight_bytes"}
    argv = [arg for f in scaled for arg in (flag_of(f).name, "3")]  # type: ignore[union-attr]
    settings = settings_from_args(build_parser().parse_args(argv))
    for f in scaled:
        assert getattr(settings, f.name) == 3 * MiB, f.name
        assert _actions()[flag_of(f).name].default * MiB == getattr(FakeSettings(), f.name)  # type: ignore[union-attr]


@pytest.mark.parametrize("f", [f for f in FLAGGED if bound_of(f) == "positive"], ids=lambda f: f.name)
def test_positive_bound_holds_in_parser_and_settings(f: Field[Any]) -> None:
    flag = flag_of(f)
    assert flag is not None
    assert _refused_by_parser([flag.name, "0"])
    zero: dict[str, Any] = {f.name: 0}
    with pytest.raises(ValueError, match="positive integer"):
        FakeSettings(**zero)


def test_literal_choices_hold_in_parser_and_settings() -> None:
    choices = literal_choices()
    assert set(choices) == {"profile", "status_style", "result_delivery", "dialect"}
    by_name = {f.name: flag_of(f) for f in FLAGGED}
    for name, values in choices.items():
        flag = by_name[name]
        assert flag is not None and _actions()[flag.name].choices == values
        assert _refused_by_parser([flag.name, "nonsense"])
        assert not _refused_by_parser([flag.name, values[-1]])
        with pytest.raises(ValueError, match=f"{name} must be .* or {values[-1]}, got 'nonsense'"):
            FakeSettings(**{name: "nonsense"})  # type: ignore[arg-type]


def test_non_negative_seconds_refused_below_zero() -> None:
    for f in FLAGGED:
        if bound_of(f) == "non_negative":
            assert _refused_by_parser([flag_of(f).name, "-1"]), f.name  # type: ignore[union-attr]
            with pytest.raises(ValueError, match=">= 0"):
                FakeSettings(**{f.name: -1.0})  # type: ignore[arg-type]
