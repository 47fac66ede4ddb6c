"""At most once: which calls may be repeated, and the proposed ``Idempotency-Key`` header.

Spec §3.5 documents a reference client that resends every route (step and save included)
after time-outs and 5xx, so a lost answer can run an optimizer step twice. This module is
the one home of the facts both sides need to stop that:

* the kinds of idempotency (each route's is a field of its row in ``contract.routes``, an
  operation type's is here): a *read* or an *idempotent* call may be resent freely; a
  *group* call is identified by its chunk group (resending the same chunks resolves to one
  execution); an *unsafe* call must not be resent after an ambiguous failure unless the
  server honours idempotency keys;
* the proposed ``Idempotency-Key`` header: a server that supports it answers a repeat of
  a key (same account, same method, path and body) with the original answer without
  executing again, answers a repeat with another body ``409 idempotency_conflict``, and
  keeps keys for :data:`KEY_WINDOW_S`. It echoes the key on the answer, which is how a
  client learns the server supports keys.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

Idempotency = Literal["read", "idempotent", "group", "unsafe"]

#: The request header carrying a key (a UUID the client draws once per logical call).
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
#: Set (to ``true``) on an answer that repeats a stored one instead of executing again.
REPLAYED_HEADER = "Idempotent-Replayed"
#: How long a server keeps a key and its answer (proposed: one day, as payment APIs do).
KEY_WINDOW_S = 24 * 3600.0
#: The longest key a server accepts (a UUID is 36 characters).
MAX_KEY_CHARS = 255

#: Operation type -> idempotency (the ``operation`` route's calls differ by type).
OPERATION_IDEMPOTENCY: dict[str, Idempotency] = {
    "forward": "unsafe",
    "weight-sync": "unsafe",
    "bootstrap-router-replay": "unsafe",
    "router-replay-discard": "unsafe",
    "reset-prefix-cache": "idempotent",
    "cancel-request": "idempotent",
    "tail-logs": "read",
}

#: The kit's client mutant (see ``fake_gs.controls.mutants``): on a resend, the key is left off.
CLIENT_MUTANT_KEY_DROPPED = "client-key-dropped-on-retry"


def may_resend(kind: Idempotency) -> bool:
    """Can a call of this kind be sent again after an ambiguous failure, keys aside?"""
    return kind != "unsafe"


def ambiguous_failure(status: int | None, retry_after: str | None) -> bool:
    """A failure after which an unsafe call may or may not have run (CLIENT-ONCE-1's list):
    no answer (``status`` None), 500, 502, 504, or 503 without ``Retry-After``."""
    if status is None:
        return True
    return status in (500, 502, 504) or (status == 503 and not retry_after)


def fingerprint_hasher(method: str, path: str) -> Any:
    """The fingerprint's hash with the method and path in: feed it the body (in pieces as
    they arrive, if need be), then take its ``hexdigest()``."""
    return hashlib.sha256(f"{method.upper()} {path}\n".encode())


def fingerprint(method: str, path: str, body: bytes | bytearray | memoryview) -> str:
    """What a repeat of a key must match: the method, the path and the body bytes."""
    digest = fingerprint_hasher(method, path)
    digest.update(body)
    return str(digest.hexdigest())
