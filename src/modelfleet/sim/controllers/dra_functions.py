"""The CEL function library of the simulator's DRA selector oracle (:mod:`.dra_cel`): the
apiserver's quantity and semver functions, declared with the overloads Kubernetes declares
(``sign`` global, the rest methods), over the simulator's own :mod:`.dra_quantity` and
:mod:`.dra_semver`, and the environment they are compiled in.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: no I/O.
Imports ``cel_expr_python`` (the ``sim`` extra) and never ``modelfleet.cel``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from modelfleet.sim.controllers.dra_quantity import Kind, Quantity
from modelfleet.sim.controllers.dra_semver import Semver

__all__ = ["environment", "quantity_value", "semver_value"]

# Map keys that mark a quantity or a version in CEL; attribute ids cannot contain a dot.
_QUANTITY: Final = "kubernetes.Quantity"
_SEMVER: Final = "kubernetes.Semver"

# CEL compares maps by content, and numbers by value across int and double. A quantity's map
# holds its exact value as text plus two flags written as 0 (int) or 0.0 (double): equal
# quantities compare equal whatever their representation (quantity("1") == quantity("1000m"),
# as upstream), while the functions read from the flags' types what Go would answer for
# isInteger() and add().


def quantity_value(q: Quantity) -> dict[str, Any]:
    return {
        _QUANTITY: f"{q.coefficient}e{q.exponent}",
        "fixed": 0 if q.kind is not Kind.DECIMAL else 0.0,
        "whole": 0 if q.kind is Kind.INT64 else 0.0,
    }


def semver_value(v: Semver) -> dict[str, Any]:
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
    return quantity_value(Quantity.parse(text))


def _is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> dict[str, Any]:
    return semver_value(Semver.parse(text, normalize=normalize))


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
    return quantity_value(q.add(other))


def _minus(left: object, right: object) -> dict[str, Any]:
    q = _quantity_arg("sub", left)
    other = Quantity.from_int(right) if isinstance(right, int) else _quantity_arg("sub", right)
    return quantity_value(q.sub(other))


def _int64(value: int) -> int:
    # Go's types.Int(uint64) wraps a version part past int64.
    return (value + 2**63) % 2**64 - 2**63


def environment() -> Any:
    """A CEL environment with the ``device`` variable and the Kubernetes quantity and semver
    libraries, as the DRA scheduler plugin compiles selectors in."""
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
