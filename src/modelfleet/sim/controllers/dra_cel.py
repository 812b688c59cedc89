"""The simulated scheduler's DRA device selectors: an independent CEL oracle.

:class:`SelectorOracle` evaluates ``DeviceClass`` and ResourceClaim CEL selectors against a
:class:`DraDevice` the way ``k8s.io/dynamic-resource-allocation/cel`` does, with Google's C++
CEL runtime (``cel-expr-python``, the ``sim`` extra), the function library of
:mod:`.dra_functions` and the simulator's own quantities and versions (:mod:`.dra_quantity`,
:mod:`.dra_semver`).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: no I/O.
It must not import ``modelfleet.cel`` or ``modelfleet.scheduling`` (an import contract says so):
the product evaluates selectors with cel-python and its own libraries, and a simulator that
borrowed them would pass every product CEL bug in the end-to-end tests.

Kubernetes semantics kept: ``device.driver``, ``device.attributes[domain][id]`` and
``device.capacity[domain][id]`` (a quantity); a bare name lives under the driver's domain; an
unknown domain reads as an empty map, an unknown id is an evaluation error. Type-checked
overloads as upstream declares them: ``sign`` is a global function (``sign(q)``; ``q.sign()``
does not compile upstream either), the rest of the quantity and semver functions are methods.
Strings (v2), optional types (``.?x.orValue()``) and ``cel.bind`` are there as in Kubernetes.
A compile error, an evaluation error and a non-bool result all mean "no match", as in the
simulator before; a device whose data Kubernetes would refuse (bad version or quantity, an
out-of-range int, a name given twice) matches nothing.

Differences from upstream, deliberate: no cost limits; none of the Kubernetes list, regex,
URL, IP/CIDR, format or set libraries, nor quantity ``mul``/``div``; ``device`` is not
statically typed, so some mistakes upstream rejects at compile time (``device.foo``, a
quantity compared with ``==`` to an int) fail, or are false, only when evaluated. Quantities
and versions travel through CEL as maps (the runtime has no opaque values): ``type()`` of one
is a map. An unknown domain is emulated by evaluating again with an empty map added for the
domain an evaluation found missing, so only an expression that both indexes a missing domain
and tests ``in``/``size``/iteration on the same map may answer differently.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from cel_expr_python import cel

from modelfleet.sim.controllers.dra_functions import environment, quantity_value, semver_value
from modelfleet.sim.controllers.dra_quantity import INT64_MAX, INT64_MIN, Quantity
from modelfleet.sim.controllers.dra_semver import Semver

__all__ = ["AttributeKind", "DraDevice", "Outcome", "SelectorOracle"]

AttributeKind = Literal["string", "version", "bool", "int"]
AttributeValue = str | int | bool

#: ``resourceapi.CELSelectorExpressionMaxLength``, counted in bytes as Go does.
MAX_EXPRESSION_BYTES: Final = 10 * 1024

_MAX_PROGRAMS: Final = 1024
_MAX_DEVICES: Final = 4096
_MAX_RESULTS: Final = 65536
# How many missing domains one evaluation may add before it stays an error.
_MAX_DOMAIN_RETRIES: Final = 8
_MISSING_KEY: Final = re.compile(r'Key not found in map : "([^"]*)"')


@dataclass(frozen=True, slots=True)
class DraDevice:
    """What a selector sees of one device, hashable so results can be memoised. Names may be
    qualified (``resource.kubernetes.io/pcieRoot``) or bare (filed under ``driver``)."""

    driver: str
    attributes: tuple[tuple[str, AttributeKind, AttributeValue], ...] = ()
    capacity: tuple[tuple[str, str], ...] = ()

    @classmethod
    def build(
        cls,
        driver: str,
        attributes: Mapping[str, tuple[str, object]] | None = None,
        capacity: Mapping[str, str] | None = None,
    ) -> DraDevice:
        """A device from ``{name: (kind, value)}`` and ``{name: quantity}``, sorted so that
        equal devices are equal. Raises :class:`TypeError` (:class:`ValueError` for an unknown
        kind) when a value has the wrong type, as the API schema would refuse it; bad contents
        (an invalid version or quantity) only make the device match nothing."""
        if not isinstance(driver, str):
            raise TypeError(f"driver must be a str, not {type(driver).__name__}")
        attrs: list[tuple[str, AttributeKind, AttributeValue]] = []
        for name, (kind, value) in (attributes or {}).items():
            attrs.append((_str(name, "attribute name"), *_typed(name, kind, value)))
        caps = [
            (_str(n, "capacity name"), _str(q, "capacity")) for n, q in (capacity or {}).items()
        ]
        return cls(driver, tuple(sorted(attrs, key=lambda a: a[0])), tuple(sorted(caps)))


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    return value


def _typed(name: str, kind: str, value: object) -> tuple[AttributeKind, AttributeValue]:
    if kind == "string":
        if isinstance(value, str):
            return "string", value
    elif kind == "version":
        if isinstance(value, str):
            return "version", value
    elif kind == "bool":
        if isinstance(value, bool):
            return "bool", value
    elif kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return "int", value
    else:
        raise ValueError(f"attribute {name!r}: unknown kind {kind!r}")
    raise TypeError(f"attribute {name!r}: a {kind} cannot be a {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One evaluation: whether the device matches and, if the selector failed, why."""

    matched: bool
    error: str | None = None


_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class _Lru(Generic[_K, _V]):
    """A size-capped mapping that forgets the least recently used entry first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._capacity:
            self._data.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Invalid:
    reason: str


@dataclass(frozen=True, slots=True)
class _Malformed:
    """A device Kubernetes would refuse; it matches nothing."""


class SelectorOracle:
    """Compiles each selector once and memoises (selector, device) results in capped LRUs.
    Safe to share between threads: one lock serialises compiling and evaluating."""

    def __init__(self) -> None:
        self._env = environment()
        self._lock = threading.Lock()
        self._programs: _Lru[str, Any] = _Lru(_MAX_PROGRAMS)
        self._devices: _Lru[DraDevice, dict[str, Any] | _Malformed] = _Lru(_MAX_DEVICES)
        self._results: _Lru[tuple[str, DraDevice], Outcome] = _Lru(_MAX_RESULTS)

    def matches(self, expression: str, device: DraDevice) -> bool:
        return self.evaluate(expression, device).matched

    def matches_all(self, expressions: Sequence[str], device: DraDevice) -> bool:
        """Whether every selector matches (true for none): a device is allocatable for a
        request only when the class's and the request's selectors all say true."""
        if isinstance(expressions, str):
            raise TypeError("expressions must be a sequence of str, not a single str")
        return all(self.matches(e, device) for e in expressions)

    def evaluate(self, expression: str, device: DraDevice) -> Outcome:
        with self._lock:
            key = (expression, device)
            outcome = self._results.get(key)
            if outcome is None:
                outcome = self._evaluate(expression, device)
                self._results.put(key, outcome)
            return outcome

    def _evaluate(self, expression: str, device: DraDevice) -> Outcome:
        program = self._program(expression)
        if isinstance(program, _Invalid):
            return Outcome(False, f"compile: {program.reason}")
        value = self._device(device)
        if isinstance(value, _Malformed):
            return Outcome(False, "device: Kubernetes would refuse its attributes or capacity")
        added: set[str] = set()
        while True:
            outcome = _run(program, value)
            missing = _missing_domain(outcome, value)
            if missing is None or missing in added or len(added) >= _MAX_DOMAIN_RETRIES:
                return outcome
            # Upstream, a domain the device does not publish reads as an empty map.
            added.add(missing)
            value = _with_domain(value, missing)

    def _program(self, expression: str) -> Any:
        program = self._programs.get(expression)
        if program is None:
            program = _compile(self._env, expression)
            self._programs.put(expression, program)
        return program

    def _device(self, device: DraDevice) -> dict[str, Any] | _Malformed:
        value = self._devices.get(device)
        if value is None:
            value = _device_value(device)
            self._devices.put(device, value)
        return value


def _compile(env: Any, expression: str) -> Any:
    if not isinstance(expression, str):
        raise TypeError(f"a selector must be a str, not {type(expression).__name__}")
    if len(expression.encode()) > MAX_EXPRESSION_BYTES:
        return _Invalid(f"longer than {MAX_EXPRESSION_BYTES} bytes")
    try:
        return env.compile(expression)
    except Exception as err:  # the runtime reports parse and type errors as RuntimeError
        return _Invalid(str(err).splitlines()[0][:300])


def _run(program: Any, device: dict[str, Any]) -> Outcome:
    try:
        result = program.eval(data={"device": device})
    except Exception as err:  # one odd device must not break a scheduling pass
        return Outcome(False, f"evaluate: {err}")
    kind = result.type()
    if kind == cel.Type.BOOL:
        return Outcome(result.value() is True)
    if kind == cel.Type.ERROR:
        return Outcome(False, f"evaluate: {result.value()}")
    return Outcome(False, f"evaluate: the result is a {kind.name()}, not a bool")


def _missing_domain(outcome: Outcome, device: Mapping[str, Any]) -> str | None:
    match = _MISSING_KEY.search(outcome.error or "")
    if match is None:
        return None
    domain = match.group(1)
    if domain in device["attributes"] and domain in device["capacity"]:
        return None  # a missing id inside a domain: an error upstream too
    return domain


def _with_domain(device: Mapping[str, Any], domain: str) -> dict[str, Any]:
    return {
        "driver": device["driver"],
        "attributes": {domain: {}, **device["attributes"]},
        "capacity": {domain: {}, **device["capacity"]},
    }


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _device_value(device: DraDevice) -> dict[str, Any] | _Malformed:
    attributes: dict[str, dict[str, Any]] = {}
    for name, kind, value in device.attributes:
        domain, ident = _split(name, device.driver)
        entries = attributes.setdefault(domain, {})
        if ident in entries:
            return _Malformed()
        if kind == "version":
            try:
                entries[ident] = semver_value(Semver.parse(str(value)))
            except ValueError:
                return _Malformed()
        elif kind == "int" and not INT64_MIN <= int(value) <= INT64_MAX:
            return _Malformed()
        else:
            entries[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, text in device.capacity:
        domain, ident = _split(name, device.driver)
        entries = capacity.setdefault(domain, {})
        if ident in entries:
            return _Malformed()
        try:
            entries[ident] = quantity_value(Quantity.parse(text))
        except ValueError:
            return _Malformed()
    return {"driver": device.driver, "attributes": attributes, "capacity": capacity}
