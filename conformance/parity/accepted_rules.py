"""Accepted differences: a rule file lets a team say "this divergence is known and fine"
and why, so a parity run is green without hiding anything (accepted divergences are still
listed in every report, with the reason).

The file is YAML or JSON::

    accept:
      - field: "body.http_requests"      # glob over the divergence's field
        route: "admin:state"             # optional glob over the route name
        kind: value                      # optional: status, value, type, missing, ...
        server: "*"                      # optional glob over the recorded server name
        group: "*"                       # optional glob over the exchange group
        reason: "the fake counts calls the recorder cannot see"   # required

Every rule needs a non-empty reason; an unknown key or a rule without one is refused, so
a typo cannot silently accept everything.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.parity.compare import Divergence
from conformance.parity.replay import ExchangeResult

_KEYS = {"field", "route", "kind", "server", "group", "reason"}


class RuleError(ValueError):
    """The rule file cannot be used (the message names the rule and the problem)."""


@dataclass(frozen=True)
class Rule:
    field: str
    reason: str
    route: str = "*"
    kind: str = "*"
    server: str = "*"
    group: str = "*"

    def matches(self, ex: ExchangeResult, field: str, kind: str) -> bool:
        return (fnmatch.fnmatchcase(field, self.field) and fnmatch.fnmatchcase(ex.route, self.route)
                and fnmatch.fnmatchcase(kind, self.kind) and fnmatch.fnmatchcase(ex.server, self.server)
                and fnmatch.fnmatchcase(ex.group, self.group))


def load_rules(path: str | None) -> list[Rule]:
    if not path:
        return []
    text = Path(path).read_text(encoding="utf-8")
    try:
        if path.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # yaml and json raise different types; both are a bad file
        raise RuleError(f"{path}: not valid {'YAML' if path.endswith(('yaml', 'yml')) else 'JSON'}: {exc}") from None
    return parse_rules(data, path)


def parse_rules(data: Any, where: str = "rules") -> list[Rule]:
    if data is None:
        return []
    if not isinstance(data, dict) or set(data) - {"accept"} or not isinstance(data.get("accept", []), list):
        raise RuleError(f"{where}: expected a mapping with one key, accept: [rules]")
    rules = []
    for n, item in enumerate(data.get("accept") or [], 1):
        if not isinstance(item, dict):
            raise RuleError(f"{where}: rule {n} is not a mapping")
        unknown = set(item) - _KEYS
        if unknown:
            raise RuleError(f"{where}: rule {n} has unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
        if not isinstance(item.get("field"), str) or not item["field"]:
            raise RuleError(f"{where}: rule {n} needs a field (a glob such as body.created_at)")
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise RuleError(f"{where}: rule {n} ({item['field']}) needs a written reason")
        rules.append(Rule(**{k: str(v) for k, v in item.items()}))
    return rules


def accepter(rules: list[Rule]) -> Any:
    """``accept(exchange, divergences)``: marks each divergence a rule accepts with its reason."""

    def accept(ex: ExchangeResult, found: list[Divergence]) -> None:
        for d in found:
            for rule in rules:
                if rule.matches(ex, d.field, d.kind):
                    d.accepted = rule.reason
                    break

    return accept
