"""What a DRA device selector can see of one device: :class:`DeviceFacts` (plain, hashable
values handed in by the caller) and their presentation as the CEL ``device`` variable.

Layer rules: ``modelfleet.cel`` is the pure base package under ``api`` and ``scheduling``. It
does no I/O (no logging, files, network or clock), and it imports only the standard library,
``celpy`` and its sibling modules: no Temporal, no Kubernetes client, no cloud SDK, no other
modelfleet package.

Kubernetes semantics (``k8s.io/dynamic-resource-allocation/cel``): ``device`` has ``driver``
(string), ``attributes[domain][id]`` and ``capacity[domain][id]`` (a Quantity). A qualified name
splits at its first ``/``; a bare name lives under the driver's domain. An unknown domain reads
as an empty map. Version attributes are strict semvers; a malformed version, quantity,
out-of-range int or a name that appears twice makes the device unpresentable
(:class:`MalformedDeviceError`), and so a non-match, as a failed evaluation would be upstream.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from celpy import celtypes

from modelfleet.cel.quantity import INT64_MAX, INT64_MIN, Quantity
from modelfleet.cel.semver import Semver

AttributeKind = Literal["string", "version", "bool", "int"]
AttributeValue = str | int | bool

_ATTRIBUTE_KINDS: Final = frozenset(get_args(AttributeKind))


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """What a selector can see of one device. Hashable, so it can key memo caches.

    Names may be qualified (``"resource.kubernetes.io/pcieRoot"``) or bare (``"productName"``,
    filed under ``driver``). Values are checked for type at construction because a mismatch is
    a bug in the caller; bad *contents* (an invalid version or quantity) are data problems and
    only make the device a non-match.
    """

    driver: str
    attributes: tuple[tuple[str, AttributeKind, AttributeValue], ...] = ()
    capacity: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.driver, str):
            raise TypeError(f"driver must be a str, not {type(self.driver).__name__}")
        if not isinstance(self.attributes, tuple) or not isinstance(self.capacity, tuple):
            raise TypeError("attributes and capacity must be tuples; DeviceFacts.build sorts them")
        for name, kind, value in self.attributes:
            if not isinstance(name, str):
                raise TypeError(f"attribute name must be a str, not {type(name).__name__}")
            if kind not in _ATTRIBUTE_KINDS:
                raise ValueError(f"attribute {name!r}: unknown kind {kind!r}")
            if not _value_has_kind(kind, value):
                raise TypeError(
                    f"attribute {name!r}: a {kind} value cannot be a {type(value).__name__}"
                )
        for name, quantity in self.capacity:
            if not isinstance(name, str) or not isinstance(quantity, str):
                raise TypeError(f"capacity {name!r}: name and quantity must both be str")

    @classmethod
    def build(
        cls,
        driver: str,
        attributes: Mapping[str, tuple[AttributeKind, AttributeValue]] | None = None,
        capacity: Mapping[str, str] | None = None,
    ) -> DeviceFacts:
        """Build facts from mappings, sorted so that equal devices give equal keys."""
        attrs = tuple(
            sorted(
                ((name, kind, value) for name, (kind, value) in (attributes or {}).items()),
                key=operator.itemgetter(0),
            )
        )
        caps = tuple(sorted((capacity or {}).items()))
        return cls(driver, attrs, caps)


def _value_has_kind(kind: str, value: object) -> bool:
    if kind in ("string", "version"):
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, int) and not isinstance(value, bool)


class _DomainMap(celtypes.MapType):
    """The outer attributes/capacity map: a missing domain reads as an empty map."""

    def __missing__(self, key: object) -> celtypes.MapType:
        # A fresh map per miss: nothing may be written into the shared device value.
        return celtypes.MapType()


class MalformedDeviceError(Exception):
    """The device data cannot be presented to CEL; the device matches nothing."""


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(kind: str, value: AttributeValue) -> object:
    if kind == "string":
        return celtypes.StringType(str(value))
    if kind == "bool":
        return celtypes.BoolType(value)
    if kind == "int":
        if not INT64_MIN <= int(value) <= INT64_MAX:
            raise MalformedDeviceError
        return celtypes.IntType(value)
    try:
        return Semver.parse(str(value))
    except ValueError as err:
        raise MalformedDeviceError from err


def device_value(facts: DeviceFacts) -> celtypes.MapType:
    """The CEL ``device`` variable for ``facts``; raises :class:`MalformedDeviceError`."""
    attributes: dict[str, dict[str, object]] = {}
    for name, kind, value in facts.attributes:
        domain, ident = _split_name(name, facts.driver)
        entries = attributes.setdefault(domain, {})
        if ident in entries:
            raise MalformedDeviceError
        entries[ident] = _attribute_value(kind, value)
    capacity: dict[str, dict[str, object]] = {}
    for name, text in facts.capacity:
        domain, ident = _split_name(name, facts.driver)
        entries = capacity.setdefault(domain, {})
        if ident in entries:
            raise MalformedDeviceError
        try:
            entries[ident] = Quantity.parse(text)
        except ValueError as err:
            raise MalformedDeviceError from err

    def outer(domains: dict[str, dict[str, object]]) -> _DomainMap:
        return _DomainMap(
            {
                celtypes.StringType(domain): celtypes.MapType(
                    {celtypes.StringType(k): v for k, v in entries.items()}
                )
                for domain, entries in domains.items()
            }
        )

    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(facts.driver),
            celtypes.StringType("attributes"): outer(attributes),
            celtypes.StringType("capacity"): outer(capacity),
        }
    )
