"""The server-side table of a custom resource with ``additionalPrinterColumns``, as the real
apiextensions-apiserver's table convertor builds it: a Name column, then one column per printer
column with the CRD's name, type, priority and description. A cell is the first value the
column's JSONPath finds (none: null, which kubectl prints as ``<none>``); a ``string`` column
prints it as Go's ``fmt.Print`` does (``[a b]`` for a list), ``integer``/``number``/``boolean``
keep the JSON value when it has that type, and ``date`` is the age as ``kubectl get`` shows it
(``duration.HumanDuration`` of the time since, ``<invalid>`` when it is not a timestamp).

JSONPath as client-go's, the subset CRDs use: ``.a.b``, ``['a']``, ``[n]``, ``[*]`` and
filters ``[?(@.a.b=="x")]`` (``==``, ``!=`` against a string or a number).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

__all__ = ["find", "printer"]

Obj = Mapping[str, Any]
Column = tuple[str, str, int, str]
Row = Callable[[Obj, datetime], list[Any]]

_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)
      | \[\s*(?P<index>-?\d+)\s*\]
      | \[\s*\*\s*\]
      | \[\s*'(?P<quoted>[^']*)'\s*\]
      | \[\s*\?\(\s*@(?P<lhs>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<op>==|!=)\s*
           (?P<rhs>"[^"]*"|'[^']*'|-?[\d.]+)\s*\)\s*\]
    """,
    re.VERBOSE,
)


def _steps(path: str) -> list[re.Match[str]]:
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {at}")
        steps.append(match)
        at = match.end()
    return steps


def _child(value: Any, key: str) -> list[Any]:
    return [value[key]] if isinstance(value, Mapping) and key in value else []


def _literal(text: str) -> Any:
    if text[0] in "\"'":
        return text[1:-1]
    return float(text) if "." in text else int(text)


def find(obj: Any, path: str) -> list[Any]:
    """Every value ``path`` selects in ``obj``, in order."""
    current = [obj]
    for step in _steps(path):
        found: list[Any] = []
        for value in current:
            if step.group("field") is not None:
                found += _child(value, step.group("field"))
            elif step.group("quoted") is not None:
                found += _child(value, step.group("quoted"))
            elif step.group("index") is not None:
                i = int(step.group("index"))
                if isinstance(value, list) and -len(value) <= i < len(value):
                    found.append(value[i])
            elif step.group("op") is not None:
                items = value if isinstance(value, list) else []
                want = _literal(step.group("rhs"))
                for item in items:
                    got: list[Any] = [item]
                    for part in step.group("lhs").strip(".").split("."):
                        got = [g for v in got for g in _child(v, part)]
                    hit = bool(got) and got[0] == want
                    if hit == (step.group("op") == "=="):
                        found.append(item)
            elif isinstance(value, list):
                found += value
            elif isinstance(value, Mapping):
                found += list(value.values())
        current = found
    return current


def _go_print(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "[" + " ".join(_go_print(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{_go_print(v)}" for k, v in sorted(value.items())) + "]"
    if value is None:
        return "<nil>"
    return json.dumps(value)


def _cell(kind: str, value: Any, now: datetime, age: Callable[[Any, datetime], str]) -> Any:
    if value is None:
        return None
    if kind == "string":
        return _go_print(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return "<invalid>"
        return age(value, now)
    return None


def printer(
    columns: Sequence[Mapping[str, Any]], age: Callable[[Any, datetime], str]
) -> tuple[list[Column], Row]:
    """The column definitions and the row function of a CRD version's printer columns;
    ``age`` renders a timestamp as the time since ``now``."""
    defs: list[Column] = [("Name", "string", 0, "Name must be unique within a namespace.")]
    for col in columns:
        defs.append(
            (
                str(col.get("name", "")),
                str(col.get("type", "string")),
                int(col.get("priority", 0) or 0),
                str(col.get("description") or ""),
            )
        )

    def row(obj: Obj, now: datetime) -> list[Any]:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        cells: list[Any] = [str((meta or {}).get("name", ""))]
        for col in columns:
            try:
                found = find(obj, str(col.get("jsonPath", "")))
            except ValueError:
                found = []
            value = found[0] if found else None
            cells.append(_cell(str(col.get("type", "string")), value, now, age))
        return cells

    return defs, row
