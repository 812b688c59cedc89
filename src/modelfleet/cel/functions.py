"""The Kubernetes CEL function library for device selectors (quantity, semver, comparisons)
and the equality and ordering operators with cel-go's rules, as registered with ``celpy``; plus
the signature tables (:data:`ARITY`, :data:`ARGUMENT_KINDS`) the compiler checks calls against.

Layer rules: ``modelfleet.cel`` is the pure base package under ``api`` and ``scheduling``. It
does no I/O (no logging, files, network or clock), and it imports only the standard library,
``celpy`` and its sibling modules: no Temporal, no Kubernetes client, no cloud SDK, no other
modelfleet package.

``==``/``!=`` compare quantities and semvers by value, ints and doubles numerically, and values
of unrelated types as unequal; comparing a quantity or semver with another type is an error, as
in cel-go. Quantities and semvers have no ``<``/``>``. Every function here works both as
``f(x, ...)`` and ``x.f(...)`` at evaluation; the compiler admits only the call style Kubernetes
declares (:data:`GLOBAL_ONLY`: ``sign(q)``, ``quantity(s)``...; the rest are methods).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final, cast

from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions

from modelfleet.cel.quantity import INT64_MAX, Quantity, is_quantity
from modelfleet.cel.semver import Semver, is_semver

# celpy turns TypeError into "no such overload" and ValueError into an evaluation error, and
# calls x.f(a) as f(x, a), so one function serves both call styles.


def _type_name(value: object) -> str:
    return type(value).__name__


def _no_overload(function: str, *args: object) -> TypeError:
    return TypeError(f"no such overload: {function}({', '.join(_type_name(a) for a in args)})")


def is_bool(value: object) -> bool:
    return isinstance(value, bool | celtypes.BoolType)


def _is_cel_int(value: object) -> bool:
    return (
        isinstance(value, int) and not is_bool(value) and not isinstance(value, celtypes.UintType)
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not is_bool(value)


def _as_number(value: Any) -> int | float:
    # Plain Python numbers compare exactly across int/float, as cel-go does at runtime.
    return float(value) if isinstance(value, float) else int(value)


def _string_arg(function: str, value: object) -> str:
    if not isinstance(value, str):
        raise _no_overload(function, value)
    return str(value)


def _bool_arg(function: str, value: object) -> bool:
    if not is_bool(value):
        raise _no_overload(function, value)
    return bool(value)


def _quantity_arg(function: str, value: object) -> Quantity:
    if not isinstance(value, Quantity):
        raise _no_overload(function, value)
    return value


def _semver_arg(function: str, value: object) -> Semver:
    if not isinstance(value, Semver):
        raise _no_overload(function, value)
    return value


def _fn_quantity(text: object) -> Quantity:
    return Quantity.parse(_string_arg("quantity", text))


def _fn_is_quantity(text: object) -> celtypes.BoolType:
    return celtypes.BoolType(is_quantity(_string_arg("isQuantity", text)))


def _fn_sign(value: object) -> celtypes.IntType:
    return celtypes.IntType(_quantity_arg("sign", value).sign())


def _fn_is_integer(value: object) -> celtypes.BoolType:
    return celtypes.BoolType(_quantity_arg("isInteger", value).is_integer())


def _fn_as_integer(value: object) -> celtypes.IntType:
    return celtypes.IntType(_quantity_arg("asInteger", value).as_integer())


def _fn_as_approximate_float(value: object) -> celtypes.DoubleType:
    return celtypes.DoubleType(_quantity_arg("asApproximateFloat", value).as_approximate_float())


def _arithmetic(function: str) -> Callable[[object, object], Quantity]:
    def apply(left: object, right: object) -> Quantity:
        quantity = _quantity_arg(function, left)
        if isinstance(right, Quantity):
            operand: Quantity | int = right
        elif _is_cel_int(right):
            operand = int(cast(int, right))
        else:
            raise _no_overload(function, left, right)
        return quantity.add(operand) if function == "add" else quantity.sub(operand)

    return apply


def _fn_semver(text: object, normalize: object = False) -> Semver:
    return Semver.parse(_string_arg("semver", text), normalize=_bool_arg("semver", normalize))


def _fn_is_semver(text: object, normalize: object = False) -> celtypes.BoolType:
    return celtypes.BoolType(
        is_semver(_string_arg("isSemver", text), normalize=_bool_arg("isSemver", normalize))
    )


def _as_cel_int(value: int) -> celtypes.IntType:
    # Go converts uint64 components to int64 by wrapping; mirror that rather than overflow.
    return celtypes.IntType(value - 2**64 if value > INT64_MAX else value)


def _fn_major(value: object) -> celtypes.IntType:
    return _as_cel_int(_semver_arg("major", value).major)


def _fn_minor(value: object) -> celtypes.IntType:
    return _as_cel_int(_semver_arg("minor", value).minor)


def _fn_patch(value: object) -> celtypes.IntType:
    return _as_cel_int(_semver_arg("patch", value).patch)


def _compare(function: str, left: object, right: object) -> int:
    if isinstance(left, Quantity) and isinstance(right, Quantity):
        return left.compare(right)
    if isinstance(left, Semver) and isinstance(right, Semver):
        return left.compare(right)
    raise _no_overload(function, left, right)


def _fn_compare_to(left: object, right: object) -> celtypes.IntType:
    return celtypes.IntType(_compare("compareTo", left, right))


def _fn_is_greater_than(left: object, right: object) -> celtypes.BoolType:
    return celtypes.BoolType(_compare("isGreaterThan", left, right) == 1)


def _fn_is_less_than(left: object, right: object) -> celtypes.BoolType:
    return celtypes.BoolType(_compare("isLessThan", left, right) == -1)


_OPAQUE = (Quantity, Semver)


def _cel_equal(left: object, right: object) -> bool:
    if left is None or right is None:
        return left is None and right is None
    if isinstance(left, _OPAQUE) or isinstance(right, _OPAQUE):
        if type(left) is type(right):
            return left == right
        raise _no_overload("_==_", left, right)
    if _is_number(left) and _is_number(right):
        return _as_number(left) == _as_number(right)
    if is_bool(left) != is_bool(right):
        return False
    try:
        return bool(left == right)
    except TypeError:
        return False


def _fn_equal(left: object, right: object) -> object:
    if isinstance(left, CELEvalError):
        return left
    if isinstance(right, CELEvalError):
        return right
    return celtypes.BoolType(_cel_equal(left, right))


def _fn_not_equal(left: object, right: object) -> object:
    if isinstance(left, CELEvalError):
        return left
    if isinstance(right, CELEvalError):
        return right
    return celtypes.BoolType(not _cel_equal(left, right))


def _ordering(
    symbol: str, compare: Callable[[Any, Any], bool], fallback: Callable[[Any, Any], object]
) -> Callable[[object, object], object]:
    def apply(left: object, right: object) -> object:
        if isinstance(left, CELEvalError):
            return left
        if isinstance(right, CELEvalError):
            return right
        if isinstance(left, _OPAQUE) or isinstance(right, _OPAQUE):
            raise TypeError(
                f"no such overload: {_type_name(left)} {symbol} {_type_name(right)}; "
                "use compareTo(), isGreaterThan() or isLessThan()"
            )
        if _is_number(left) and _is_number(right):
            return celtypes.BoolType(compare(_as_number(left), _as_number(right)))
        return fallback(left, right)

    return apply


def _fn_string(value: object) -> object:
    # cel-go has no string() conversion for these types; celpy would fall back to str().
    if isinstance(value, _OPAQUE):
        raise _no_overload("string", value)
    return base_functions["string"](value)


def _fn_type(value: object) -> object:
    """CEL ``type(x)``: the same objects :data:`TYPE_IDENTIFIERS` binds to ``string``, ``int``
    and so on, so that ``type(device.driver) == string`` holds. celpy's own ``type()`` returns
    the Python class, which is a subclass for the device maps, and the ``string`` identifier
    would resolve to the ``string()`` override below rather than to the type."""
    if isinstance(value, CELEvalError):
        return value
    if is_bool(value):
        return celtypes.BoolType
    if isinstance(value, celtypes.UintType):
        return celtypes.UintType
    if isinstance(value, int):
        return celtypes.IntType
    if isinstance(value, float):
        return celtypes.DoubleType
    if isinstance(value, str):
        return celtypes.StringType
    if isinstance(value, bytes):
        return celtypes.BytesType
    if isinstance(value, list):
        return celtypes.ListType
    if isinstance(value, dict):
        return celtypes.MapType
    if value is None:
        return _NULL_TYPE
    if isinstance(value, type):
        return celtypes.TypeType
    if isinstance(value, _OPAQUE):
        return type(value)
    return base_functions["type"](value)


_NULL_TYPE: Final = type(None)

#: The type identifiers a selector may name, bound as variables so that they resolve to the
#: values ``type()`` returns (a function of the same name is still called as a function).
TYPE_IDENTIFIERS: Final[dict[str, object]] = {
    "bool": celtypes.BoolType,
    "bytes": celtypes.BytesType,
    "double": celtypes.DoubleType,
    "int": celtypes.IntType,
    "list": celtypes.ListType,
    "map": celtypes.MapType,
    "null_type": _NULL_TYPE,
    "string": celtypes.StringType,
    "type": celtypes.TypeType,
    "uint": celtypes.UintType,
}


FUNCTIONS: Final[dict[str, Callable[..., object]]] = {
    "quantity": _fn_quantity,
    "isQuantity": _fn_is_quantity,
    "sign": _fn_sign,
    "isInteger": _fn_is_integer,
    "asInteger": _fn_as_integer,
    "asApproximateFloat": _fn_as_approximate_float,
    "add": _arithmetic("add"),
    "sub": _arithmetic("sub"),
    "semver": _fn_semver,
    "isSemver": _fn_is_semver,
    "major": _fn_major,
    "minor": _fn_minor,
    "patch": _fn_patch,
    "compareTo": _fn_compare_to,
    "isGreaterThan": _fn_is_greater_than,
    "isLessThan": _fn_is_less_than,
    "string": _fn_string,
    "type": _fn_type,
    "_==_": _fn_equal,
    "_!=_": _fn_not_equal,
    "_<_": _ordering("<", operator.lt, base_functions["_<_"]),
    "_<=_": _ordering("<=", operator.le, base_functions["_<=_"]),
    "_>_": _ordering(">", operator.gt, base_functions["_>_"]),
    "_>=_": _ordering(">=", operator.ge, base_functions["_>=_"]),
}

# Total argument counts, counting the receiver of a member call.
ARITY: Final[dict[str, frozenset[int]]] = {
    "quantity": frozenset({1}),
    "isQuantity": frozenset({1}),
    "sign": frozenset({1}),
    "isInteger": frozenset({1}),
    "asInteger": frozenset({1}),
    "asApproximateFloat": frozenset({1}),
    "add": frozenset({2}),
    "sub": frozenset({2}),
    "semver": frozenset({1, 2}),
    "isSemver": frozenset({1, 2}),
    "major": frozenset({1}),
    "minor": frozenset({1}),
    "patch": frozenset({1}),
    "compareTo": frozenset({2}),
    "isGreaterThan": frozenset({2}),
    "isLessThan": frozenset({2}),
}
# Kubernetes declares these as global functions only (cel.Overload): ``q.sign()`` does not
# compile on a cluster. Every other function in ARITY is a method only (cel.MemberOverload).
GLOBAL_ONLY: Final = frozenset({"quantity", "isQuantity", "sign", "semver", "isSemver"})
STANDARD_FUNCTIONS: Final = frozenset(
    name for name in base_functions if name.isidentifier() and not name.startswith("_")
)

# The only literal kind each Kubernetes function accepts per argument position. Quantity and
# semver operands cannot be literals, so any literal there is a type error.
STRING, BOOL, INT = "string", "bool", "int"
NOT_LITERAL = "a non-literal value"
ARGUMENT_KINDS: Final[dict[str, tuple[str, ...]]] = {
    "quantity": (STRING,),
    "isQuantity": (STRING,),
    "semver": (STRING, BOOL),
    "isSemver": (STRING, BOOL),
    "add": (NOT_LITERAL, INT),
    "sub": (NOT_LITERAL, INT),
    "sign": (NOT_LITERAL,),
    "isInteger": (NOT_LITERAL,),
    "asInteger": (NOT_LITERAL,),
    "asApproximateFloat": (NOT_LITERAL,),
    "major": (NOT_LITERAL,),
    "minor": (NOT_LITERAL,),
    "patch": (NOT_LITERAL,),
    "compareTo": (NOT_LITERAL, NOT_LITERAL),
    "isGreaterThan": (NOT_LITERAL, NOT_LITERAL),
    "isLessThan": (NOT_LITERAL, NOT_LITERAL),
}
