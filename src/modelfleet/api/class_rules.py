"""The cross-field rules of an InferenceClass: provisioning blocks that match the provider,
unique device names, qualified attribute and capacity names, exactly one typed value per attribute
(strict semantic versions), quantities that parse. Pure: it may touch the API's models and the CEL
layer's quantity and semver parsers (what validates is what the scheduler can read); no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from modelfleet.api.classes import ClassDevice, DeviceAttribute, DeviceClaim, InferenceClass
from modelfleet.api.field_rules import duplicate_errors
from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.cel.quantity import Quantity
from modelfleet.cel.semver import Semver

__all__ = ["inference_class_rules"]

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _qualified_name_problem(name: str) -> str | None:
    domain, sep, ident = name.rpartition("/")
    if sep and (not domain or len(domain) > 63 or not _DNS_SUBDOMAIN.match(domain)):
        return "domain prefix must be a DNS subdomain of at most 63 characters"
    if not _C_IDENTIFIER.match(ident) or len(ident) > 32:
        return "name must be a C identifier of at most 32 characters"
    return None


def _attribute(path: Path, attr: DeviceAttribute) -> Iterator[FieldError]:
    set_fields = [f for f in ("string", "version", "bool", "int") if getattr(attr, f) is not None]
    if len(set_fields) != 1:
        yield FieldError(
            path,
            "exactly one of string, version, bool or int must be set"
            + (f" (got {', '.join(set_fields)})" if set_fields else ""),
        )
    elif attr.version is not None:
        try:
            Semver.parse(attr.version)
        except ValueError as exc:
            yield FieldError((*path, "version"), f"not a strict semantic version: {exc}")


def _device(path: Path, device: ClassDevice) -> Iterator[FieldError]:
    if device.claim is DeviceClaim.DRA and not device.device_class_name:
        yield FieldError(
            (*path, "deviceClassName"), "required when claim is DRA (the DeviceClass to claim)"
        )
    for name, attr in device.attributes.items():
        problem = _qualified_name_problem(name)
        if problem:
            yield FieldError((*path, "attributes", name), f"invalid attribute name: {problem}")
        yield from _attribute((*path, "attributes", name), attr)
    for name, cap in device.capacity.items():
        problem = _qualified_name_problem(name)
        if problem:
            yield FieldError((*path, "capacity", name), f"invalid capacity name: {problem}")
        try:
            Quantity.parse(cap.value)
        except ValueError as exc:
            yield FieldError((*path, "capacity", name, "value"), f"invalid quantity: {exc}")


def inference_class_rules(ic: InferenceClass) -> Iterator[FieldError]:
    spec = ("spec",)
    prov = ic.spec.provisioning
    if prov is not None:
        for provider, block in prov.blocks().items():
            field = provider.name.lower()
            if provider is prov.provider and block is None:
                yield FieldError(
                    (*spec, "provisioning", field), f"required when provider is {provider.value}"
                )
            if provider is not prov.provider and block is not None:
                yield FieldError(
                    (*spec, "provisioning", field),
                    f"must not be set when provider is {prov.provider.value}",
                )
    devices = ic.spec.devices
    yield from duplicate_errors((*spec, "devices"), [d.name for d in devices], "device name")
    for i, device in enumerate(devices):
        yield from _device((*spec, "devices", i), device)
