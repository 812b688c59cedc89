"""What a cluster's hardware really reports, per node pool: the devices its DRA drivers publish
in ``resource.k8s.io/v1`` ResourceSlices on the pool's counted nodes (ready and schedulable;
cordoned or NotReady nodes are not counted).

Pure: works on the objects :class:`~modelfleet.adapters.kube_client.KubeCluster` listed, no I/O.
Conservative where nodes disagree, since placement treats a pool's nodes as identical: a
driver's count is the smallest any counted node has, and an attribute or capacity is published
only when every device of the driver on every counted node reports the same value (so a per-
device value such as a UUID is never published, and a pool of mixed GPUs matches neither
product's selector rather than both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from modelfleet.api.classes import DeviceAttribute, DeviceCapacity
from modelfleet.contracts.kube_payloads import DeviceGroup

_ATTRIBUTE_KINDS = ("string", "version", "bool", "int")


def _attribute(value: Any) -> DeviceAttribute | None:
    if not isinstance(value, Mapping):
        return None
    present = [k for k in _ATTRIBUTE_KINDS if k in value]
    if len(present) != 1:
        return None
    try:
        return DeviceAttribute.model_validate({present[0]: value[present[0]]})
    except ValueError:
        return None


def _capacity(value: Any) -> DeviceCapacity | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("value"), str | int):
        return None
    return DeviceCapacity(value=str(value["value"]))


def _common(maps: list[dict[str, Any]]) -> dict[str, Any]:
    """The entries every map holds with the same value."""
    if not maps:
        return {}
    first = maps[0]
    return {k: v for k, v in sorted(first.items()) if all(m.get(k) == v for m in maps[1:])}


def node_devices(slices: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """node -> driver -> the devices (``{"attributes", "capacity"}``) its slices publish."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for piece in slices:
        spec = piece.get("spec") or {}
        node, driver = spec.get("nodeName"), spec.get("driver")
        if not isinstance(node, str) or not isinstance(driver, str):
            continue  # network-attached or all-nodes devices belong to no one pool
        devices = out.setdefault(node, {}).setdefault(driver, [])
        for device in spec.get("devices") or []:
            attributes = {
                name: parsed
                for name, raw in (device.get("attributes") or {}).items()
                if (parsed := _attribute(raw)) is not None
            }
            capacity = {
                name: quantity
                for name, raw in (device.get("capacity") or {}).items()
                if (quantity := _capacity(raw)) is not None
            }
            devices.append({"attributes": attributes, "capacity": capacity})
    return out


def pool_devices(
    counted: Mapping[str, list[str]], slices: Iterable[Mapping[str, Any]]
) -> dict[str, list[DeviceGroup]]:
    """Per pool (``counted``: pool -> its ready, schedulable nodes), a group per driver."""
    by_node = node_devices(slices)
    out: dict[str, list[DeviceGroup]] = {}
    for pool, nodes in counted.items():
        if not nodes:
            out[pool] = []
            continue
        drivers = sorted({d for n in nodes for d in by_node.get(n, {})})
        groups = []
        for driver in drivers:
            per_node = [by_node.get(n, {}).get(driver, []) for n in nodes]
            devices = [d for node in per_node for d in node]
            count = min(len(node) for node in per_node)
            if count == 0:
                continue
            groups.append(
                DeviceGroup(
                    driver=driver,
                    count=count,
                    attributes=_common([d["attributes"] for d in devices]),
                    capacity=_common([d["capacity"] for d in devices]),
                )
            )
        out[pool] = groups
    return out
