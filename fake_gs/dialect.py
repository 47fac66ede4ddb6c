"""Answer dialects: ``kit`` (the kit's own forms, the default) and ``spec``.

The published spec allows several forms for the same answer. ``--dialect spec`` makes the
fake answer in the forms the kit does not use itself, so a client and the conformance suite
are exercised against every form a conformant server may send (facts §15): integer error
codes and bare ``detail`` lists (spec §3.6; the one string code is
``chunk_group_restart_required``, spec §9.3), ``""`` for an empty poll ``error`` /
``next_cursor`` and a plain-string request error (spec §6.8), capacity without its false
and zero fields (spec §5.4), ``last_lr`` as a list (spec §6.2), a save that ignores the
caller's id (spec §6.3), delete with 204 and no body (spec §5.9), empty non-EOF log pages
while placing (spec §12.1) and a visible ``cancelling`` state (spec §5.5).

Each helper takes the kit-form answer and returns the spec form; handlers call them only
when the setting asks for it, so the kit dialect is untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from contract.errors import ErrorCode
from contract.models import DetailListError, ErrorEnvelope, MessageCodeError

Dialect = Literal["kit", "spec"]
DIALECTS: tuple[str, ...] = ("kit", "spec")


def error(envelope: ErrorEnvelope, status: int) -> ErrorEnvelope | MessageCodeError | DetailListError:
    """A kit error envelope in the spec's forms (contract models): the documented string
    code stays; a validation failure (a 400 naming fields) becomes a ``detail`` list
    (``loc`` from ``body``); anything else ``{"message", "code": <status>}``."""
    message = envelope.message or "error"
    if envelope.code == ErrorCode.CHUNK_GROUP_RESTART_REQUIRED:
        return MessageCodeError(message=message, code=str(envelope.code))
    if envelope.detail and status in (400, 422):
        return DetailListError(detail=[d.model_copy(update={"loc": ["body", *d.loc]}) for d in envelope.detail])
    return MessageCodeError(message=message, code=status)


def poll(view: dict[str, Any]) -> dict[str, Any]:
    """Empty ``error`` / ``next_cursor`` as ``""``; a failure's error as its message."""
    out = dict(view)
    err = out.get("error")
    if err is None:
        out["error"] = ""
    elif isinstance(err, dict):
        out["error"] = str(err.get("message") or err.get("code") or "failed")
    if out.get("next_cursor") is None:
        out["next_cursor"] = ""
    return out


def capacity(cap: dict[str, Any]) -> dict[str, Any]:
    """proto3 JSON: false and zero fields are omitted."""
    return {k: v for k, v in cap.items() if v not in (False, 0)}


def step_result(result: dict[str, Any]) -> dict[str, Any]:
    """``last_lr`` as a list (one value per parameter group)."""
    lr = result.get("last_lr")
    return {**result, "last_lr": [lr]} if isinstance(lr, (int, float)) else result


def save_id(wanted: str | None, global_steps: int, taken: object) -> str:
    """The id a save gets: the server's own, whatever the caller asked for (the control
    plane does not forward it); ``taken`` is the job's checkpoint dict."""
    base = f"ckpt-step{global_steps}"
    ckpt_id, n = base, 1
    while ckpt_id in taken:  # type: ignore[operator]
        n += 1
        ckpt_id = f"{base}-{n}"
    return ckpt_id


def save_may_create(wanted: str | None, spec_dialect: bool) -> Callable[[str], bool]:
    """Which checkpoint ids a queued save may end up creating: the caller's own in the kit
    dialect, else the server-made names (``global_step<n>``; spec: ``ckpt-step<n>[-k]``)."""
    if wanted is not None and not spec_dialect:
        return wanted.__eq__
    pattern = re.compile(r"ckpt-step\d+(-\d+)?" if spec_dialect else r"global_step\d+")
    return lambda name: pattern.fullmatch(name) is not None


def log_cursor(text: str | int | None) -> str | int | None:
    """A spec-dialect log cursor (opaque ``L<n>``) back to the kit's line index; any other
    value (an integer too, which the payload's schema allows) goes on to be judged as is."""
    return text[1:] if isinstance(text, str) and text.startswith("L") else text


def log_page(entries: list[Any], end: int, eof: bool, placing: bool,
             cursor_in: str | int | None) -> dict[str, Any]:
    """An opaque cursor; while the job is placing the pod is still appearing, so the page is
    empty and not EOF, with the cursor unchanged (the caller asks again)."""
    if placing:
        return {"entries": [], "next_cursor": cursor_in or "L0", "eof": False}
    return {"entries": entries, "next_cursor": f"L{end}", "eof": eof}
