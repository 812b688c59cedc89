"""The fleet snapshot, indexed for the scheduler: pools interned by the content of their
devices ("shapes"), each device's CEL facts built once, and clusters by name.

A fleet of thousands of pools drawn from a handful of classes has a handful of shapes, so
matching work scales with the classes, not with the pools.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from modelfleet.api.classes import ClassDevice, DeviceClaim
from modelfleet.cel.device import AttributeKind, DeviceFacts
from modelfleet.scheduling.ledger import Demand
from modelfleet.scheduling.snapshot import ClusterSnapshot, FleetSnapshot


@dataclass(frozen=True, slots=True)
class ShapeDevice:
    name: str
    claimable: bool  # a DRA device; Synthetic ones gate placement but are never claimed
    device_class_name: str
    count: int
    facts: DeviceFacts


@dataclass(frozen=True, slots=True, eq=False)
class PoolShape:
    """The per-node devices of a pool. Interned: equal contents give the same object."""

    key: int
    devices: tuple[ShapeDevice, ...]
    # Claimable devices per node, one slot per device (0 for Synthetic ones).
    capacity: Demand


@dataclass(frozen=True, slots=True)
class IndexedPool:
    name: str
    position: int
    nodes: int
    shape: PoolShape


@dataclass(frozen=True, slots=True)
class IndexedCluster:
    name: str
    snapshot: ClusterSnapshot
    pools: tuple[IndexedPool, ...]
    pools_by_name: dict[str, IndexedPool]
    # Clusters with equal shape keys have interchangeable pools for matching purposes.
    shape_key: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FleetIndex:
    clusters: tuple[IndexedCluster, ...]  # in snapshot order
    by_name: dict[str, IndexedCluster]
    in_name_order: tuple[IndexedCluster, ...]


def device_facts(device: ClassDevice) -> DeviceFacts:
    attributes: dict[str, tuple[AttributeKind, str | int | bool]] = {}
    for name, attr in device.attributes.items():
        if attr.string is not None:
            attributes[name] = ("string", attr.string)
        elif attr.version is not None:
            attributes[name] = ("version", attr.version)
        elif attr.bool is not None:
            attributes[name] = ("bool", attr.bool)
        elif attr.int is not None:
            attributes[name] = ("int", attr.int)
    capacity = {name: c.value for name, c in device.capacity.items()}
    return DeviceFacts.build(device.driver, attributes, capacity)


def _facts_key(device: ClassDevice) -> tuple[object, ...]:
    attrs = tuple(
        sorted((k, a.string, a.version, a.bool, a.int) for k, a in device.attributes.items())
    )
    caps = tuple(sorted((k, c.value) for k, c in device.capacity.items()))
    return (device.driver, attrs, caps)


def _device_key(device: ClassDevice, facts_key: tuple[object, ...]) -> tuple[object, ...]:
    return (device.name, device.claim, device.device_class_name, device.count, facts_key)


class _ShapeInterner:
    def __init__(self) -> None:
        self._shapes: dict[tuple[object, ...], PoolShape] = {}
        self._facts: dict[tuple[object, ...], DeviceFacts] = {}
        # Pools of one class usually share the class's device objects; recognising them by
        # identity skips building content keys. Sound only while every device is alive, which
        # holds for the duration of one index build (the snapshot references them all).
        self._by_identity: dict[tuple[int, ...], PoolShape] = {}

    def shape(self, devices: Sequence[ClassDevice]) -> PoolShape:
        identity = tuple(map(id, devices))
        shape = self._by_identity.get(identity)
        if shape is not None:
            return shape
        facts_keys = [_facts_key(d) for d in devices]
        key = tuple(_device_key(d, f) for d, f in zip(devices, facts_keys, strict=True))
        shape = self._shapes.get(key)
        if shape is None:
            shape_devices = tuple(
                self._device(d, f) for d, f in zip(devices, facts_keys, strict=True)
            )
            capacity = tuple(max(d.count, 0) if d.claimable else 0 for d in shape_devices)
            shape = PoolShape(len(self._shapes), shape_devices, capacity)
            self._shapes[key] = shape
        self._by_identity[identity] = shape
        return shape

    def _device(self, device: ClassDevice, facts_key: tuple[object, ...]) -> ShapeDevice:
        facts = self._facts.get(facts_key)
        if facts is None:
            facts = self._facts[facts_key] = device_facts(device)
        return ShapeDevice(
            name=device.name,
            claimable=device.claim is DeviceClaim.DRA,
            device_class_name=device.device_class_name or device.driver,
            count=device.count,
            facts=facts,
        )


def fleet_index(fleet: FleetSnapshot) -> FleetIndex:
    """Lookup tables for ``fleet``, built once per snapshot instance and then reused."""
    # The cache remembers which object it was built for: model_copy() carries private
    # attributes along, and a copy (perhaps with updated clusters) must not reuse it.
    cached = fleet._derived
    if isinstance(cached, tuple) and cached[0]() is fleet:
        index: FleetIndex = cached[1]
        return index
    interner = _ShapeInterner()
    clusters = []
    for snapshot in fleet.clusters:
        pools = tuple(
            IndexedPool(p.name, i, max(p.nodes, 0), interner.shape(p.devices))
            for i, p in enumerate(snapshot.pools)
        )
        clusters.append(
            IndexedCluster(
                name=snapshot.name,
                snapshot=snapshot,
                pools=pools,
                pools_by_name={p.name: p for p in pools},
                shape_key=tuple(p.shape.key for p in pools),
            )
        )
    index = FleetIndex(
        clusters=tuple(clusters),
        by_name={c.name: c for c in clusters},
        in_name_order=tuple(sorted(clusters, key=lambda c: c.name)),
    )
    fleet._derived = (weakref.ref(fleet), index)
    return index
