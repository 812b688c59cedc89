"""Kubernetes label selectors for ``-l``: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``,
``k notin (a,b)``, ``k`` (exists) and ``!k`` (does not exist), comma-separated (all must hold).
Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from modelfleet.cli.errors import UsageError

_KEY = r"[A-Za-z0-9][-A-Za-z0-9_./]*"
_SET = re.compile(rf"^({_KEY})\s+(in|notin)\s*\(([^)]*)\)$")
_EQ = re.compile(rf"^({_KEY})\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)$")
_EXISTS = re.compile(rf"^(!?)\s*({_KEY})$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "in":
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # notin: absent keys match, as kubectl


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def parse_selector(selector: str) -> list[Requirement]:
    """Every requirement of ``selector``; a UsageError naming the part that does not parse."""
    requirements = []
    for part in _split(selector):
        if not part:
            raise UsageError(f"label selector {selector!r}: empty requirement")
        if m := _SET.match(part):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            requirements.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ.match(part):
            op = "notin" if m.group(2) == "!=" else "in"
            requirements.append(Requirement(m.group(1), op, frozenset([m.group(3)])))
        elif m := _EXISTS.match(part):
            requirements.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise UsageError(
                f"label selector {selector!r}: cannot parse {part!r} (use k=v, k!=v, "
                "k in (a,b), k notin (a,b), k or !k)"
            )
    return requirements


def matches(requirements: list[Requirement], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)
