"""The JSON form: the tool's own document, the verdict (and its failures) first."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from conformance.reporting.model import Verdict


def verdict(v: Verdict) -> dict[str, Any]:
    return asdict(v) | {"first": [asdict(f) for f in v.first]}


def document(v: Verdict, body: dict[str, Any]) -> str:
    return json.dumps({"verdict": verdict(v), **body}, indent=2, default=str)
