"""The one home of keeping credentials out of what the kit writes.

Tapes, reports, logs and reprs all go through :func:`scrub_text` (text) or :func:`mask`
(JSON values). Both know the run's own secrets when given them (its tokens) and recognise
credentials by their look wherever they sit, inside JSON strings too:

- an ``Authorization: Bearer`` value (but the placeholder ``$GS_TOKEN`` of a report's curl
  line) and JWT-looking text;
- AWS access key ids (``AKIA...``/``ASIA...``);
- the value of any key named like a credential (``token``, ``AWS_SECRET_KEY``,
  ``SessionToken``, ``X-Amz-Signature``, ``password``, ...) in JSON (escaped or not), in a
  Python repr or in a query string;
- the download token of an export URL (the path segment after ``/exports/``: that URL
  alone downloads the checkpoint), replaced by a label derived from its digest, so one URL
  keeps one label across a tape (a replay maps it to the new URL).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "<redacted>"
_SECRET_KEY = re.compile(
    r"(^|[_-])(access[_-]?token|token|secret|password|passwd|credentials?|authori[sz]ation|"
    r"api[_-]?key|private[_-]?key|cookie|pat|session[_-]?token|security[_-]?token|signature|sig|"
    r"secret[_-]?(access[_-]?)?key|access[_-]?key([_-]?id)?|key[_-]?id)$", re.I)
#: Header names that look like credentials but are not (they name a credential's type).
_NOT_SECRET = frozenset({"x-snowflake-authorization-token-type", "token_type", "token-type"})
_BEARER_OR_JWT = re.compile(
    r"(Bearer\s+)(?!<|\$GS_TOKEN\b)[^\s\"',\\]+|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_AWS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AROA|AIDA|AGPA)[A-Z0-9]{16}(?![A-Z0-9])")
#: ``"name": "value"`` with any quoting a nested JSON string or a repr gives it.
_QUOTED_PAIR = re.compile(
    r"(?P<q>\\*[\"'])(?P<k>[A-Za-z][\w.-]{0,63})(?P=q)(?P<sep>\s*:\s*)"
    r"(?P<q2>\\*[\"'])(?P<v>[^\"'\\]+)(?P=q2)")
_QUERY_PAIR = re.compile(r"(?P<k>(?<![\w.-])[A-Za-z][\w.-]{0,63})=(?P<v>[^&\s\"'<>#\\]+)")
_EXPORT_TOKEN = re.compile(r"(/exports/)(?!<)([^/?#\s\"'<>\\]{8,})")
#: A JSON string this long or shorter that holds an object is masked inside.
_NESTED_JSON = 64 * 1024


def secret_key(name: str) -> bool:
    """A JSON key, query parameter or header whose value is a credential."""
    return bool(_SECRET_KEY.search(name)) and name.lower() not in _NOT_SECRET


def url_token_label(token: str) -> str:
    """The label an export URL's token becomes: the same token, the same label."""
    return f"<url-token-{hashlib.sha256(token.encode()).hexdigest()[:12]}>"


def scrub_text(text: str, secrets: Iterable[str | None] = (), *, patterns: bool = True) -> str:
    """``text`` with every known secret and (``patterns``) every credential-looking value
    masked."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    if not patterns:
        return text
    text = _BEARER_OR_JWT.sub(lambda m: (m.group(1) or "") + REDACTED, text)
    text = _AWS_KEY_ID.sub(REDACTED, text)
    text = _EXPORT_TOKEN.sub(lambda m: m.group(1) + url_token_label(m.group(2)), text)
    text = _QUOTED_PAIR.sub(_masked_pair, text)
    return _QUERY_PAIR.sub(lambda m: f"{m['k']}={REDACTED}" if _masks(m["k"], m["v"]) else m[0], text)


_LABEL = re.compile(r"(\w+ )?<[\w-]+>")


def _masks(key: str, value: str) -> bool:
    """A credential's value, not one already turned into a label (``Bearer <token-1>``)."""
    return secret_key(key) and not _LABEL.fullmatch(value)


def _masked_pair(m: re.Match[str]) -> str:
    if not _masks(m["k"], m["v"]):
        return m[0]
    return f"{m['q']}{m['k']}{m['q']}{m['sep']}{m['q2']}{REDACTED}{m['q2']}"


def scrub_value(value: Any, secrets: Iterable[str | None] = (), *, patterns: bool = True) -> Any:
    """A JSON value as :func:`scrub_text` leaves its text (for reports built from answers)."""
    return json.loads(scrub_text(json.dumps(value), secrets, patterns=patterns))


def mask(value: Any) -> Any:
    """A JSON value with credential-looking keys masked, inside JSON strings too."""
    if isinstance(value, dict):
        return {k: (REDACTED if secret_key(str(k)) and isinstance(v, str) and v else mask(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str) and value[:1] == "{" and len(value) <= _NESTED_JSON:
        try:
            inner = json.loads(value)
        except ValueError:
            return value
        masked = mask(inner)
        return value if masked == inner else json.dumps(masked)
    return value
