"""Drift: whether an object a replica applied still stands in the cluster the way it was applied.

The comparison is the decision behind drift repair (the ModelReplica workflow's resync): an
object is *missing* (deleted outside modelfleet), *terminating* (being deleted right now), or
*changed* (a field modelfleet sets holds another value), else in place. Only the fields the
applied manifest sets are compared: what the API server defaults, what controllers write in
``status`` and what other field managers own are not modelfleet's to judge, and server-side
apply with modelfleet's field manager leaves them alone when it repairs.

Pure: works on the JSON dicts the adapter fetched. It may not do I/O or import SDKs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Drift", "DriftKind", "compare", "differences", "repair_reason"]

# Enough changed fields to see what happened; the rest are counted.
_MAX_FIELDS = 3
# Identity and server bookkeeping: never a drift (name and namespace are how the object was
# found; the rest the server owns).
_IGNORED_METADATA = frozenset({"name", "namespace", "generateName"})


class DriftKind(StrEnum):
    MISSING = "missing"
    TERMINATING = "terminating"
    CHANGED = "changed"


@dataclass(frozen=True)
class Drift:
    kind: DriftKind
    # For CHANGED: the paths of the fields that differ (at most a few), e.g. ``spec.replicas``.
    fields: tuple[str, ...] = ()
    more: int = 0


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _same_scalar(applied: Any, live: Any) -> bool:
    if applied == live and type(applied) is type(live):
        return True
    if isinstance(applied, bool) or isinstance(live, bool):
        return applied is live
    # The API server may hand back a number where a string was sent, or the reverse
    # (quantities, int-or-string ports): the same text is the same value.
    if isinstance(applied, int | float | str) and isinstance(live, int | float | str):
        return str(applied) == str(live)
    return False


def _named(items: Sequence[Any]) -> bool:
    return bool(items) and all(isinstance(i, Mapping) and "name" in i for i in items)


def differences(applied: Any, live: Any, path: str = "") -> list[str]:
    """The paths at which ``live`` does not hold what ``applied`` sets.

    Maps: every key ``applied`` sets must match (keys only ``live`` has are someone else's).
    Lists of named items (containers, ports, volumes): matched by name. Other lists of maps:
    each applied item must be found in ``live`` in any order. Lists of scalars (args, command):
    equal as a whole, order included. An empty value applied matches an absent one."""
    if isinstance(applied, Mapping):
        if not isinstance(live, Mapping):
            return [path or "."]
        out: list[str] = []
        for key, value in applied.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in live:
                if not _empty(value):
                    out.append(sub)
                continue
            out += differences(value, live[key], sub)
        return out
    if isinstance(applied, list):
        if not isinstance(live, list):
            return [] if _empty(applied) and live is None else [path]
        if _named(applied):
            by_name = {i.get("name"): i for i in live if isinstance(i, Mapping)}
            out = []
            for item in applied:
                sub = f"{path}[{item['name']}]"
                found = by_name.get(item["name"])
                out += [sub] if found is None else differences(item, found, sub)
            return out
        if all(isinstance(i, Mapping) for i in applied):
            missing = [i for i in applied if not any(not differences(i, x) for x in live)]
            return [path] if missing else []
        if len(applied) != len(live):
            return [path]
        return (
            [path]
            if any(not _same_scalar(a, b) for a, b in zip(applied, live, strict=True))
            else []
        )
    if _empty(applied) and live is None:
        return []
    return [] if _same_scalar(applied, live) else [path]


def compare(applied: Mapping[str, Any], live: Mapping[str, Any] | None) -> Drift | None:
    """Drift of one object: ``applied`` is the manifest modelfleet applied, ``live`` the object
    the cluster holds (None when it does not exist). None: in place."""
    if live is None:
        return Drift(DriftKind.MISSING)
    meta = live.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Drift(DriftKind.TERMINATING)
    wanted = {k: v for k, v in applied.items() if k not in ("apiVersion", "kind", "status")}
    wanted_meta = {
        k: v for k, v in (applied.get("metadata") or {}).items() if k not in _IGNORED_METADATA
    }
    wanted["metadata"] = wanted_meta
    paths = differences(wanted, live)
    if not paths:
        return None
    return Drift(DriftKind.CHANGED, tuple(paths[:_MAX_FIELDS]), max(len(paths) - _MAX_FIELDS, 0))


def repair_reason(what: str, drift: Drift) -> str:
    """How a repair reads in the replica's reason and the workflow's history, e.g.
    ``Deployment ml/x was deleted outside modelfleet: re-created``."""
    if drift.kind is DriftKind.MISSING:
        return f"{what} was deleted outside modelfleet: re-created"
    if drift.kind is DriftKind.TERMINATING:
        return f"{what} is being deleted outside modelfleet: re-created once it is gone"
    fields = ", ".join(drift.fields)
    if drift.more:
        fields += f" and {drift.more} more"
    return f"{what} was changed outside modelfleet ({fields}): re-applied"
