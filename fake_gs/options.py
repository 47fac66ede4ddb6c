"""The fake's option table: each ``FakeSettings`` field declares its flag where it declares
its default, so the settings and ``fake-gs``'s parser cannot drift apart.

``option(...)`` is what a field is set to; :func:`flag_of` and :func:`bound_of` read it back
(the CLI builds its parser from them, the settings validate against them).
"""

from __future__ import annotations

import os
from dataclasses import Field, dataclass, field
from typing import Any, Literal

#: What a numeric setting must satisfy; checked by the settings and by the CLI's parsing.
Bound = Literal["positive", "non_negative"]


@dataclass(frozen=True)
class Flag:
    """How one setting is spelt on the command line.

    The argparse type follows the field's type (bool: a switch, tuple: repeatable, float:
    seconds >= 0, Literal: its values as choices); ``unit`` scales a flag counted in larger
    units (``--max-body-mib`` sets bytes).
    """

    name: str
    help: str
    group: str | None = None
    metavar: str | None = None
    unit: int = 1
    choices: tuple[str, ...] | None = None
    #: Older spellings the parser still accepts: hidden from the help, each use warned as
    #: deprecated.
    aliases: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        """The argparse attribute the flag parses into (argparse's own rule)."""
        return self.name.lstrip("-").replace("-", "_")


def option(
    default: Any,
    flag: str | None = None,
    help: str = "",
    *,
    bound: Bound | None = None,
    secret: bool = False,
    env: str | None = None,
    **how: Any,
) -> Any:
    """A settings field with its default, its bound and (with ``flag``) its CLI spelling;
    a ``secret`` one (a token) stays out of the settings' repr; ``env`` names a variable
    that, when set, replaces the default."""
    metadata: dict[str, Any] = {"bound": bound, "env": env}
    if flag is not None:
        metadata["flag"] = Flag(flag, help, **how)
    if env is not None:
        return field(default_factory=lambda: os.environ.get(env) or default, metadata=metadata,
                     repr=not secret)
    return field(default=default, metadata=metadata, repr=not secret)


def flag_of(f: Field[Any]) -> Flag | None:
    return f.metadata.get("flag")


def flag_name(settings_cls: type, setting: str) -> str:
    """How ``setting`` of a settings dataclass is spelt on the command line, for a message
    that tells the user which flag to reach for."""
    flag = flag_of(settings_cls.__dataclass_fields__[setting])  # type: ignore[attr-defined]
    if flag is None:
        raise ValueError(f"setting {setting!r} has no command-line flag")
    return flag.name


def bound_of(f: Field[Any]) -> Bound | None:
    return f.metadata.get("bound")
