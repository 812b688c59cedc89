"""The simulated scheduler's DRA device selectors: an independent CEL oracle.

:class:`SelectorOracle` evaluates ``DeviceClass`` and ResourceClaim CEL selectors against a
:class:`DraDevice` the way ``k8s.io/dynamic-resource-allocation/cel`` does, with Google's C++
CEL runtime (``cel-expr-python``, the ``sim`` extra) and the simulator's own quantity and semver
libraries (:mod:`.dra_quantity`, :mod:`.dra_semver`).

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
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from modelfleet.sim.controllers.dra_quantity import INT64_MAX, INT64_MIN, Kind, Quantity
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

# Map keys that mark a quantity or a version in CEL; attribute ids cannot contain a dot.
_QUANTITY: Final = "kubernetes.Quantity"
_SEMVER: Final = "kubernetes.Semver"


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
        self._env = _environment()
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
                entries[ident] = _semver_value(Semver.parse(str(value)))
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
            entries[ident] = _quantity_value(Quantity.parse(text))
        except ValueError:
            return _Malformed()
    return {"driver": device.driver, "attributes": attributes, "capacity": capacity}


# --- quantities and versions as CEL maps ---------------------------------------------------
#
# CEL compares maps by content, and numbers by value across int and double. A quantity's map
# holds its exact value as text plus two flags written as 0 (int) or 0.0 (double): equal
# quantities compare equal whatever their representation (quantity("1") == quantity("1000m"),
# as upstream), while the functions read from the flags' types what Go would answer for
# isInteger() and add().


def _quantity_value(q: Quantity) -> dict[str, Any]:
    return {
        _QUANTITY: f"{q.coefficient}e{q.exponent}",
        "fixed": 0 if q.kind is not Kind.DECIMAL else 0.0,
        "whole": 0 if q.kind is Kind.INT64 else 0.0,
    }


def _semver_value(v: Semver) -> dict[str, Any]:
    # Build metadata is already gone, so equal precedence means equal maps.
    return {_SEMVER: str(v)}


def _as_quantity(value: object) -> Quantity | None:
    if not isinstance(value, dict) or not isinstance(value.get(_QUANTITY), str):
        return None
    coefficient, _, exponent = value[_QUANTITY].partition("e")
    if isinstance(value.get("fixed"), float):
        kind = Kind.DECIMAL
    elif isinstance(value.get("whole"), float):
        kind = Kind.INT64_FRACTION
    else:
        kind = Kind.INT64
    return Quantity(int(coefficient), int(exponent), kind)


def _as_semver(value: object) -> Semver | None:
    if not isinstance(value, dict) or not isinstance(value.get(_SEMVER), str):
        return None
    return Semver.parse(value[_SEMVER])


def _no_overload(name: str, *args: object) -> TypeError:
    kinds = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"no such overload: {name}({kinds})")


def _quantity_arg(name: str, value: object) -> Quantity:
    q = _as_quantity(value)
    if q is None:
        raise _no_overload(name, value)
    return q


def _semver_arg(name: str, value: object) -> Semver:
    v = _as_semver(value)
    if v is None:
        raise _no_overload(name, value)
    return v


def _compare(name: str, left: object, right: object) -> int:
    q1, q2 = _as_quantity(left), _as_quantity(right)
    if q1 is not None and q2 is not None:
        return q1.compare(q2)
    v1, v2 = _as_semver(left), _as_semver(right)
    if v1 is not None and v2 is not None:
        return v1.compare(v2)
    raise _no_overload(name, left, right)


def _quantity(text: str) -> dict[str, Any]:
    return _quantity_value(Quantity.parse(text))


def _is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> dict[str, Any]:
    return _semver_value(Semver.parse(text, normalize=normalize))


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        Semver.parse(text, normalize=normalize)
    except ValueError:
        return False
    return True


def _as_integer(value: object) -> int:
    result = _quantity_arg("asInteger", value).as_int64()
    if result is None:
        raise ValueError("cannot convert value to integer")
    return result


def _plus(left: object, right: object) -> dict[str, Any]:
    q = _quantity_arg("add", left)
    other = Quantity.from_int(right) if isinstance(right, int) else _quantity_arg("add", right)
    return _quantity_value(q.add(other))


def _minus(left: object, right: object) -> dict[str, Any]:
    q = _quantity_arg("sub", left)
    other = Quantity.from_int(right) if isinstance(right, int) else _quantity_arg("sub", right)
    return _quantity_value(q.sub(other))


def _int64(value: int) -> int:
    # Go's types.Int(uint64) wraps a version part past int64.
    return (value + 2**63) % 2**64 - 2**63


def _environment() -> Any:
    t = cel.Type
    q = t.MAP  # a quantity or a version (a map, see above)

    def overload(
        name: str, result: Any, params: list[Any], impl: Callable[..., Any], member: bool = False
    ) -> Any:
        return cel.Overload(name, result, params, is_member=member, impl=impl)

    functions = {
        "quantity": [overload("string_to_quantity", q, [t.STRING], _quantity)],
        "isQuantity": [overload("is_quantity_string", t.BOOL, [t.STRING], _is_quantity)],
        "sign": [overload("quantity_sign", t.INT, [q], lambda a: _quantity_arg("sign", a).sign())],
        "isGreaterThan": [
            overload(
                "is_greater_than",
                t.BOOL,
                [q, q],
                lambda a, b: _compare("isGreaterThan", a, b) == 1,
                True,
            )
        ],
        "isLessThan": [
            overload(
                "is_less_than",
                t.BOOL,
                [q, q],
                lambda a, b: _compare("isLessThan", a, b) == -1,
                True,
            )
        ],
        "compareTo": [
            overload("compare_to", t.INT, [q, q], lambda a, b: _compare("compareTo", a, b), True)
        ],
        "asApproximateFloat": [
            overload(
                "quantity_get_float",
                t.DOUBLE,
                [q],
                lambda a: _quantity_arg("asApproximateFloat", a).as_approximate_float(),
                True,
            )
        ],
        "asInteger": [overload("quantity_get_int", t.INT, [q], _as_integer, True)],
        "isInteger": [
            overload(
                "quantity_is_integer",
                t.BOOL,
                [q],
                lambda a: _quantity_arg("isInteger", a).as_int64() is not None,
                True,
            )
        ],
        "add": [
            overload("quantity_add", q, [q, q], _plus, True),
            overload("quantity_add_int", q, [q, t.INT], _plus, True),
        ],
        "sub": [
            overload("quantity_sub", q, [q, q], _minus, True),
            overload("quantity_sub_int", q, [q, t.INT], _minus, True),
        ],
        "semver": [
            overload("string_to_semver", q, [t.STRING], _semver),
            overload("string_bool_to_semver", q, [t.STRING, t.BOOL], _semver),
        ],
        "isSemver": [
            overload("is_semver_string", t.BOOL, [t.STRING], _is_semver),
            overload("is_semver_string_bool", t.BOOL, [t.STRING, t.BOOL], _is_semver),
        ],
        "major": [
            overload(
                "semver_major", t.INT, [q], lambda a: _int64(_semver_arg("major", a).major), True
            )
        ],
        "minor": [
            overload(
                "semver_minor", t.INT, [q], lambda a: _int64(_semver_arg("minor", a).minor), True
            )
        ],
        "patch": [
            overload(
                "semver_patch", t.INT, [q], lambda a: _int64(_semver_arg("patch", a).patch), True
            )
        ],
    }
    return cel.NewEnv(
        variables={"device": t.DYN},
        # Kubernetes' base environment: strings v2, optional types, and cel.bind for DRA.
        extensions=[
            ext_strings.ExtStrings(2),
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
        ],
        functions=[cel.FunctionDecl(name, overloads) for name, overloads in functions.items()],
    )
