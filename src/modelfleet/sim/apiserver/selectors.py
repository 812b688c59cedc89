"""Label and field selectors for the simulated Kubernetes API server.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure functions, no
I/O. Parse errors raise :class:`.status_errors.ApiError` (400 BadRequest) so that the HTTP
layer can answer with a Status object.

Label selectors support ``=``, ``==``, ``!=``, ``in (...)``, ``notin (...)``, ``key``, ``!key``
and the numeric ``>``/``<``. Field selectors support ``=``, ``==`` and ``!=`` on
``metadata.name``, ``metadata.namespace`` and a few per-kind fields (pods: ``spec.nodeName``,
``status.phase`` ...), as the real server does; other fields are a 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelfleet.sim.apiserver.status_errors import bad_request

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelRequirement",
    "LabelSelector",
    "label_selector_from_object",
    "parse_field_selector",
    "parse_label_selector",
]

_KEY_RE = re.compile(
    r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        if self.op == "notin":
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in (">", "<"):
            if not present or value is None:
                return False
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.op == ">" else have < want
        raise AssertionError(self.op)  # pragma: no cover


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise bad_request(f"unable to parse requirement: unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise bad_request(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append("".join(cur))
    return parts


def _check_key(key: str, text: str) -> str:
    if not key or not _KEY_RE.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    return key


def _check_value(value: str, text: str) -> str:
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value {value!r} in {text!r}")
    return value


_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=<>()]+)\s+(?P<op>in|notin)\s*\((?P<vals>[^()]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*(?P<key>[^\s!=<>()]+)\s*(?P<op>==|=|!=|>|<)\s*(?P<val>[^\s!=<>()]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(?P<neg>!)?\s*(?P<key>[^\s!=<>(),]+)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse the ``labelSelector`` query parameter. Empty text selects everything."""
    if text is None or not text.strip():
        return LabelSelector()
    reqs: list[LabelRequirement] = []
    for raw in _split_top_level(text):
        if not raw.strip():
            raise bad_request(f"unable to parse requirement: empty requirement in {text!r}")
        if m := _SET_RE.match(raw):
            key = _check_key(m["key"], text)
            vals = tuple(_check_value(v.strip(), text) for v in m["vals"].split(",") if v.strip())
            if not vals and m["op"] == "in":
                raise bad_request(f"unable to parse requirement: empty value set in {raw!r}")
            reqs.append(LabelRequirement(key, m["op"], vals))
        elif m := _CMP_RE.match(raw):
            key = _check_key(m["key"], text)
            op = "=" if m["op"] in ("=", "==") else m["op"]
            val = m["val"]
            if op in (">", "<"):
                if not re.fullmatch(r"-?\d+", val):
                    raise bad_request(f"unable to parse requirement: {val!r} is not an integer")
            else:
                _check_value(val, text)
            reqs.append(LabelRequirement(key, op, (val,)))
        elif m := _EXISTS_RE.match(raw):
            key = _check_key(m["key"], text)
            reqs.append(LabelRequirement(key, "!" if m["neg"] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {raw.strip()!r}")
    return LabelSelector(tuple(reqs))


def label_selector_from_object(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` (matchLabels/matchExpressions) to a LabelSelector."""
    if not selector:
        return LabelSelector()
    reqs: list[LabelRequirement] = []
    for k, v in sorted((selector.get("matchLabels") or {}).items()):
        reqs.append(LabelRequirement(str(k), "=", (str(v),)))
    for expr in selector.get("matchExpressions") or []:
        op = str(expr.get("operator", ""))
        key = str(expr.get("key", ""))
        vals = tuple(str(v) for v in expr.get("values") or [])
        mapped = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(op)
        if mapped is None:
            raise bad_request(f"{op!r} is not a valid label selector operator")
        reqs.append(LabelRequirement(key, mapped, vals))
    return LabelSelector(tuple(reqs))


def selector_to_string(selector: LabelSelector) -> str:
    """Render a selector in the query-string syntax (used by the /scale subresource)."""
    out: list[str] = []
    for r in selector.requirements:
        if r.op in ("=", "!=", ">", "<"):
            out.append(f"{r.key}{r.op}{r.values[0]}")
        elif r.op in ("in", "notin"):
            out.append(f"{r.key} {r.op} ({','.join(r.values)})")
        elif r.op == "exists":
            out.append(r.key)
        else:
            out.append(f"!{r.key}")
    return ",".join(out)


# Field selectors ----------------------------------------------------------------------------

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
_EXTRA_FIELDS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    "events": frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
    "secrets": frozenset({"type"}),
    "nodes": frozenset({"spec.unschedulable"}),
    "namespaces": frozenset({"status.phase"}),
    "resourceslices": frozenset({"spec.nodeName", "spec.driver"}),
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        have = _field_value(obj, self.field)
        return (have != self.value) if self.negate else (have == self.value)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def exact(self, field_name: str) -> str | None:
        """The value required by a positive ``field=value`` term, if any."""
        for r in self.requirements:
            if r.field == field_name and not r.negate:
                return r.value
        return None


def parse_field_selector(text: str | None, plural: str) -> FieldSelector:
    """Parse the ``fieldSelector`` query parameter for resource ``plural``."""
    if text is None or not text.strip():
        return FieldSelector()
    allowed = _COMMON_FIELDS | _EXTRA_FIELDS.get(plural, frozenset())
    reqs: list[FieldRequirement] = []
    for raw in text.split(","):
        m = re.fullmatch(r"\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*", raw)
        if m is None:
            raise bad_request(f"invalid field selector: {raw!r}")
        field_name, op, value = m.group(1), m.group(2), m.group(3)
        if field_name not in allowed:
            raise bad_request(f'field label not supported: "{field_name}"')
        reqs.append(FieldRequirement(field_name, op == "!=", value))
    return FieldSelector(tuple(reqs))
