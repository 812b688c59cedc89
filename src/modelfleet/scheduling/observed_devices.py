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
# How a key the class declares but the hardware does not report is shown in a difference.
_UNREPORTED = "(not reported)"


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


def _shown(value: DeviceAttribute) -> str:
    found = [v for v in (value.string, value.version, value.bool, value.int) if v is not None]
    return str(found[0]) if found else ""


def device_differences(
    declared: Sequence[ClassDevice], published: Sequence[ClassDevice]
) -> list[str]:
    """Where ``published`` (see :func:`published_devices`) differs from the class, one line each
    (``gpu memory: class 80Gi, hardware 81559Mi``), for ``describe cluster``. Only what the class
    declares is compared: drivers publish more than any class names (the NVIDIA driver's ``type``,
    ``uuid``, ``pcieBusID``...), and an extra attribute contradicts nothing."""
    seen = {d.name: d for d in published}
    out: list[str] = []
    for device in declared:
        if device.claim is not DeviceClaim.DRA:
            continue
        real = seen.get(device.name)
        if real is None:
            out.append(f"{device.name}: class {device.count}, hardware none published")
            continue
        if real.count != device.count:
            out.append(f"{device.name} count: class {device.count}, hardware {real.count}")
        for key, want in sorted(device.capacity.items()):
            have = real.capacity.get(key)
            if want.value != (have and have.value):
                out.append(
                    f"{device.name} {key}: class {want.value}, "
                    f"hardware {have.value if have else _UNREPORTED}"
                )
        for key, a in sorted(device.attributes.items()):
            b = real.attributes.get(key)
            if a != b:
                out.append(
                    f"{device.name} {key}: class {_shown(a)}, "
                    f"hardware {_shown(b) if b else _UNREPORTED}"
                )
    return out
