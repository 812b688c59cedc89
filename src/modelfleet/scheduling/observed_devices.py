"""The devices a pool is published with: its class's devices, with what the cluster's hardware
reports (its DRA drivers' ResourceSlices, observed by the cluster's workflow) in place of what
the class declares, so CEL selectors match the real hardware. A pool whose class says 80Gi but
whose slices say 81559Mi is published as 81559Mi; an attribute the class declares but no slice
reports is not published, so a selector on it does not match there.

Layer rule: pure (no I/O, no Temporal, no SDKs), like the rest of ``modelfleet.scheduling``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from modelfleet.api.classes import ClassDevice, DeviceAttribute, DeviceCapacity, DeviceClaim

# The most devices of one kind a class may declare per node (ClassDevice.count's bound).
_MAX_COUNT = 64


class DeviceReport(Protocol):
    """One driver's devices per node as observed (``contracts.kube_payloads.DeviceGroup``)."""

    @property
    def driver(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def attributes(self) -> Mapping[str, DeviceAttribute]: ...
    @property
    def capacity(self) -> Mapping[str, DeviceCapacity]: ...


def published_devices(
    declared: Sequence[ClassDevice], observed: Sequence[DeviceReport] | None
) -> list[ClassDevice]:
    """``declared`` as the hardware reports it; ``observed`` None (never observed) keeps them.

    Each DRA device takes the first unused report of its driver: its count, attributes and
    capacity. A DRA device no report matches is absent on the hardware and left out. Synthetic
    devices have no driver on the cluster and stay as declared.
    """
    if observed is None:
        return list(declared)
    remaining = [r for r in observed if r.count > 0]
    out: list[ClassDevice] = []
    for device in declared:
        if device.claim is not DeviceClaim.DRA:
            out.append(device)
            continue
        match = next((r for r in remaining if r.driver == device.driver), None)
        if match is None:
            continue
        remaining.remove(match)
        out.append(
            device.model_copy(
                update={
                    "count": min(match.count, _MAX_COUNT),
                    "attributes": dict(match.attributes),
                    "capacity": dict(match.capacity),
                }
            )
        )
    return out
