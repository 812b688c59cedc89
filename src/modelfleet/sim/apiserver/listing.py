"""Lists in the simulated API server: label and field selectors, and pagination with ``limit``
and ``continue`` tokens (a token carries the list's resourceVersion and the last key served).

Development/test emulator only: product code never imports ``modelfleet.sim``. Reads a
:class:`~.store.ClusterStore` in memory; no I/O.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.store import ClusterStore

__all__ = ["ObjectList", "list_objects"]


@dataclass
class ObjectList:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str = ""
    remaining: int | None = None


def list_objects(
    store: ClusterStore,
    rt: ResourceType,
    *,
    namespace: str | None = None,
    label_selector: str | LabelSelector | None = None,
    field_selector: str | FieldSelector | None = None,
    limit: int | None = None,
    continue_token: str | None = None,
) -> ObjectList:
    """Matching stored objects (read-only), sorted by namespace and name."""
    lsel = (
        label_selector
        if isinstance(label_selector, LabelSelector)
        else parse_label_selector(label_selector)
    )
    fsel = (
        field_selector
        if isinstance(field_selector, FieldSelector)
        else parse_field_selector(field_selector, rt.plural)
    )
    list_rv = int(store.resource_version)
    start: tuple[str, str] | None = None
    if continue_token:
        list_rv, start = _decode_continue(continue_token)
    matched: list[tuple[tuple[str, str], dict[str, Any]]] = []
    for k, stored in store.iter_keyed(rt, namespace):
        if start is not None and k <= start:
            continue
        obj = stored.obj
        meta = obj.get("metadata", {})
        if not lsel.matches(meta.get("labels")):
            continue
        if not fsel.empty and not fsel.matches(obj):
            continue
        matched.append((k, obj))
    token = ""
    remaining: int | None = None
    if limit and limit > 0 and len(matched) > limit:
        token = _encode_continue(list_rv, matched[limit - 1][0])
        remaining = len(matched) - limit
        matched = matched[:limit]
    items = [obj for _, obj in matched]
    return ObjectList(items, str(list_rv), token, remaining)


def _encode_continue(rv: int, last: tuple[str, str]) -> str:
    raw = json.dumps({"rv": rv, "ns": last[0], "name": last[1]}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()).decode())
        return int(data["rv"]), (str(data["ns"]), str(data["name"]))
    except (ValueError, KeyError, TypeError):
        raise status_errors.bad_request(f"invalid continue token {token!r}") from None
