"""Kubernetes DRA device-selector CEL, evaluated with cel-python (``celpy``).

Layer rules: this module belongs to ``modelfleet.scheduling``, which is pure. It does no I/O
(no logging, files, network or clock), and it imports only the standard library, ``celpy`` and
its sibling modules: no Temporal, no Kubernetes client, no cloud SDK. Callers hand it plain
:class:`DeviceFacts` and get booleans back.

Semantics follow ``k8s.io/dynamic-resource-allocation/cel``:

* The only variable is ``device`` with ``driver`` (string), ``attributes[domain][id]`` and
  ``capacity[domain][id]`` (a Quantity). A qualified name splits at its first ``/``; a bare name
  lives under the driver's domain.
* An unknown domain reads as an empty map, so ``"x.io" in device.attributes`` is false and
  ``device.attributes["x.io"].size() == 0`` holds. An unknown id inside a map is an error.
* Version attributes are strict semvers. A malformed version, quantity, out-of-range int or a
  name that appears twice makes the device match nothing: Kubernetes would fail the evaluation.
* A result that is not a bool, and any evaluation error, is a non-match.
* ``==``/``!=`` compare quantities and semvers by value, ints and doubles numerically, and
  values of unrelated types as unequal; comparing a quantity or semver with another type is an
  error, as in cel-go. Quantities and semvers have no ``<``/``>``.

Deliberate divergences from upstream (cel-python cannot do these, or we chose to be lenient):

* No type checker. Instead :func:`check_selector` rejects syntax errors, unknown functions or
  identifiers, unknown ``device`` fields, wrong arities of the Kubernetes functions, literals of
  the wrong type passed to them and unparsable ``quantity("...")``/``semver("...")`` literals.
  A non-bool result type is not rejected up front; it is a non-match at evaluation.
* Missing: ``cel.bind``, optional syntax (``.?``, ``orValue``), the Kubernetes extension
  libraries (strings v2, lists, sets, regex helpers beyond ``matches``, IP/CIDR, URL, format),
  quantity ``mul``/``div``/``divInt``, ``device.allowMultipleAllocations``, list-valued
  attributes and cost limits.
* More permissive: every Kubernetes function works both as ``f(x, ...)`` and ``x.f(...)``, and
  ``has()`` accepts an index expression such as ``has(m["k"])``.
"""

from __future__ import annotations

import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar, cast, get_args

import celpy
from celpy import celtypes
from celpy.evaluation import Activation, CELEvalError, Evaluator, base_functions, celstr

from modelfleet.scheduling.quantity import INT64_MAX, INT64_MIN, Quantity, is_quantity
from modelfleet.scheduling.semver import Semver, is_semver

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "AttributeKind",
    "AttributeValue",
    "CelCompileError",
    "DeviceFacts",
    "SelectorEvaluator",
    "check_selector",
]

AttributeKind = Literal["string", "version", "bool", "int"]
AttributeValue = str | int | bool

#: Kubernetes caps a selector expression at 10 KiB (``CELSelectorExpressionMaxLength``).
MAX_EXPRESSION_LENGTH: Final = 10 * 1024

# Bounds keep a long-running controller from growing without limit; each entry is small.
_MAX_PROGRAMS: Final = 1024
_MAX_DEVICES: Final = 4096
_MAX_RESULTS: Final = 65536

_ATTRIBUTE_KINDS: Final = frozenset(get_args(AttributeKind))
_DEVICE_FIELDS: Final = frozenset({"driver", "attributes", "capacity"})
_TYPE_IDENTIFIERS: Final = frozenset(
    {"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"}
)
_MEMBER_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})


class CelCompileError(ValueError):
    """A selector that cannot be compiled. ``str()`` gives the reason and, if known, where."""

    def __init__(
        self, expression: str, reason: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.expression = expression
        self.reason = reason
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None and column else ""
        super().__init__(f"{reason}{where}")


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


# --- CEL values ---------------------------------------------------------------------------


class _DomainMap(celtypes.MapType):
    """The outer attributes/capacity map: a missing domain reads as an empty map."""

    def __missing__(self, key: object) -> celtypes.MapType:
        # A fresh map per miss: nothing may be written into the shared device value.
        return celtypes.MapType()


class _MalformedDeviceError(Exception):
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
            raise _MalformedDeviceError
        return celtypes.IntType(value)
    try:
        return Semver.parse(str(value))
    except ValueError as err:
        raise _MalformedDeviceError from err


def _device_value(facts: DeviceFacts) -> celtypes.MapType:
    attributes: dict[str, dict[str, object]] = {}
    for name, kind, value in facts.attributes:
        domain, ident = _split_name(name, facts.driver)
        entries = attributes.setdefault(domain, {})
        if ident in entries:
            raise _MalformedDeviceError
        entries[ident] = _attribute_value(kind, value)
    capacity: dict[str, dict[str, object]] = {}
    for name, text in facts.capacity:
        domain, ident = _split_name(name, facts.driver)
        entries = capacity.setdefault(domain, {})
        if ident in entries:
            raise _MalformedDeviceError
        try:
            entries[ident] = Quantity.parse(text)
        except ValueError as err:
            raise _MalformedDeviceError from err

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


# --- Registered functions -----------------------------------------------------------------
# celpy turns TypeError into "no such overload" and ValueError into an evaluation error, and
# calls x.f(a) as f(x, a), so one function serves both call styles.


def _type_name(value: object) -> str:
    return type(value).__name__


def _no_overload(function: str, *args: object) -> TypeError:
    return TypeError(f"no such overload: {function}({', '.join(_type_name(a) for a in args)})")


def _is_bool(value: object) -> bool:
    return isinstance(value, bool | celtypes.BoolType)


def _is_cel_int(value: object) -> bool:
    return (
        isinstance(value, int) and not _is_bool(value) and not isinstance(value, celtypes.UintType)
    )


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not _is_bool(value)


def _as_number(value: Any) -> int | float:
    # Plain Python numbers compare exactly across int/float, as cel-go does at runtime.
    return float(value) if isinstance(value, float) else int(value)


def _string_arg(function: str, value: object) -> str:
    if not isinstance(value, str):
        raise _no_overload(function, value)
    return str(value)


def _bool_arg(function: str, value: object) -> bool:
    if not _is_bool(value):
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
    if _is_bool(left) != _is_bool(right):
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


_FUNCTIONS: Final[dict[str, Callable[..., object]]] = {
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
    "_==_": _fn_equal,
    "_!=_": _fn_not_equal,
    "_<_": _ordering("<", operator.lt, base_functions["_<_"]),
    "_<=_": _ordering("<=", operator.le, base_functions["_<=_"]),
    "_>_": _ordering(">", operator.gt, base_functions["_>_"]),
    "_>=_": _ordering(">=", operator.ge, base_functions["_>=_"]),
}

# Total argument counts, counting the receiver of a member call.
_ARITY: Final[dict[str, frozenset[int]]] = {
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
_STANDARD_FUNCTIONS: Final = frozenset(
    name for name in base_functions if name.isidentifier() and not name.startswith("_")
)

# The only literal kind each Kubernetes function accepts per argument position. Quantity and
# semver operands cannot be literals, so any literal there is a type error.
_STRING, _BOOL, _INT = "string", "bool", "int"
_NOT_LITERAL = "a non-literal value"
_ARGUMENT_KINDS: Final[dict[str, tuple[str, ...]]] = {
    "quantity": (_STRING,),
    "isQuantity": (_STRING,),
    "semver": (_STRING, _BOOL),
    "isSemver": (_STRING, _BOOL),
    "add": (_NOT_LITERAL, _INT),
    "sub": (_NOT_LITERAL, _INT),
    "sign": (_NOT_LITERAL,),
    "isInteger": (_NOT_LITERAL,),
    "asInteger": (_NOT_LITERAL,),
    "asApproximateFloat": (_NOT_LITERAL,),
    "major": (_NOT_LITERAL,),
    "minor": (_NOT_LITERAL,),
    "patch": (_NOT_LITERAL,),
    "compareTo": (_NOT_LITERAL, _NOT_LITERAL),
    "isGreaterThan": (_NOT_LITERAL, _NOT_LITERAL),
    "isLessThan": (_NOT_LITERAL, _NOT_LITERAL),
}
_TOKEN_KINDS: Final = {
    "STRING_LIT": _STRING,
    "MLSTRING_LIT": _STRING,
    "BOOL_LIT": _BOOL,
    "INT_LIT": _INT,
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "BYTES_LIT": "bytes",
    "NULL_LIT": "null",
}


# --- Compilation --------------------------------------------------------------------------

_ENVIRONMENT_LOCK: Final = threading.Lock()
_ENVIRONMENT: celpy.Environment | None = None


def _parse(expression: str) -> Any:
    global _ENVIRONMENT
    # celpy's parser object keeps the current text on itself, so parses must not interleave.
    with _ENVIRONMENT_LOCK:
        if _ENVIRONMENT is None:
            _ENVIRONMENT = celpy.Environment()
        return _ENVIRONMENT.compile(expression)


def _syntax_error(expression: str, error: Exception) -> CelCompileError:
    cause = error.__context__
    token = getattr(cause, "token", None)
    if token is not None:
        if token.type == "$END":
            reason = "syntax error: unexpected end of expression"
        else:
            reason = f"syntax error: unexpected {str(token)!r}"
    elif getattr(cause, "char", None) is not None:
        reason = f"syntax error: unexpected character {getattr(cause, 'char', '')!r}"
    else:
        reason = "syntax error"
    if "?" in expression and (".?" in expression or "[?" in expression):
        reason += " (optional field syntax '.?'/'[?]' is not supported)"
    return CelCompileError(
        expression, reason, getattr(error, "line", None), getattr(error, "column", None)
    )


def _compile(expression: str) -> Any:
    if not isinstance(expression, str):
        raise TypeError(f"a selector must be a str, not {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(
            expression,
            f"expression is {len(expression)} characters long; the limit is "
            f"{MAX_EXPRESSION_LENGTH}",
        )
    if not expression.strip():
        raise CelCompileError(expression, "expression is empty")
    try:
        ast = _parse(expression)
    except RecursionError as err:
        raise CelCompileError(expression, "expression is nested too deeply") from err
    except Exception as err:  # celpy raises CELParseError and, rarely, lark errors directly.
        raise _syntax_error(expression, err) from err
    try:
        _Checker(expression).check(ast, frozenset({"device"}))
    except RecursionError as err:
        raise CelCompileError(expression, "expression is nested too deeply") from err
    return ast


def _position(node: Any) -> tuple[int | None, int | None]:
    meta = getattr(node, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return meta.line, meta.column
    line = getattr(node, "line", None)
    return line, getattr(node, "column", None)


def _children(node: Any) -> list[Any]:
    return list(getattr(node, "children", []))


def _is_tree(node: Any, data: str) -> bool:
    return getattr(node, "data", None) == data


_TERMINAL_NODES: Final = frozenset(
    {
        "member_dot",
        "member_dot_arg",
        "member_index",
        "member_object",
        "literal",
        "list_lit",
        "map_lit",
        "ident",
        "ident_arg",
        "dot_ident",
        "dot_ident_arg",
    }
)


def _unwrap(node: Any) -> Any:
    """Descend through single-child wrappers (expr -> ... -> primary) to the real node."""
    while getattr(node, "data", None) not in _TERMINAL_NODES:
        children = _children(node)
        if len(children) != 1 or not hasattr(children[0], "data"):
            return node
        node = children[0]
    return node


def _literal(node: Any) -> tuple[str, Any] | None:
    """(kind, token) when ``node`` is a bare literal, list or map; else None."""
    inner = _unwrap(node)
    if _is_tree(inner, "literal"):
        token = _children(inner)[0]
        return _TOKEN_KINDS.get(token.type, "literal"), token
    if _is_tree(inner, "list_lit"):
        return "list", None
    if _is_tree(inner, "map_lit"):
        return "map", None
    return None


def _identifier(node: Any) -> str | None:
    inner = _unwrap(node)
    if _is_tree(inner, "ident"):
        return str(_children(inner)[0])
    return None


class _Checker:
    """Static checks standing in for cel-go's type checker (see the module docstring)."""

    def __init__(self, expression: str) -> None:
        self._expression = expression

    def _fail(self, node: Any, reason: str) -> CelCompileError:
        line, column = _position(node)
        return CelCompileError(self._expression, reason, line, column)

    def check(self, node: Any, scope: frozenset[str]) -> None:
        data = getattr(node, "data", None)
        if data is None:
            return
        if data == "ident":
            self._check_identifier(node, str(_children(node)[0]), scope)
            return
        if data in ("dot_ident", "dot_ident_arg"):
            raise self._fail(node, "leading-dot names are not supported")
        if data == "member_object":
            raise self._fail(node, "message construction is not supported")
        if data == "ident_arg":
            self._check_global_call(node, scope)
            return
        if data == "member_dot_arg":
            self._check_member_call(node, scope)
            return
        if data == "member_dot":
            self._check_field(node)
        for child in _children(node):
            self.check(child, scope)

    def _check_identifier(self, node: Any, name: str, scope: frozenset[str]) -> None:
        if name == "cel":
            raise self._fail(node, "cel.bind() is not supported; repeat the lookup instead")
        if name not in scope and name not in _TYPE_IDENTIFIERS:
            raise self._fail(node, f"undeclared reference to {name!r}; the only variable is device")

    def _check_field(self, node: Any) -> None:
        receiver, field = _children(node)[:2]
        if _identifier(receiver) == "device" and str(field) not in _DEVICE_FIELDS:
            hint = (
                " (not supported by this evaluator)" if field == "allowMultipleAllocations" else ""
            )
            raise self._fail(
                node,
                f"device has no field {str(field)!r}{hint}; use driver, attributes or capacity",
            )

    def _check_global_call(self, node: Any, scope: frozenset[str]) -> None:
        children = _children(node)
        name = str(children[0])
        args = _children(children[1]) if len(children) > 1 else []
        if name in ("has", "dyn"):
            if len(args) != 1:
                raise self._fail(node, f"{name}() takes exactly one argument")
        else:
            self._check_call(node, name, args)
        for arg in args:
            self.check(arg, scope)

    def _check_member_call(self, node: Any, scope: frozenset[str]) -> None:
        children = _children(node)
        receiver, name_token = children[0], children[1]
        name = str(name_token)
        args = _children(children[2]) if len(children) > 2 else []
        if _identifier(receiver) == "cel":
            raise self._fail(node, f"cel.{name}() is not supported; repeat the lookup instead")
        self.check(receiver, scope)
        if name in _MEMBER_MACROS:
            if len(args) != 2:
                raise self._fail(node, f"{name}() takes a variable and one expression")
            variable = _identifier(args[0])
            if variable is None:
                raise self._fail(node, f"the first argument of {name}() must be a variable name")
            self.check(args[1], scope | {variable})
            return
        self._check_call(node, name, [receiver, *args])
        for arg in args:
            self.check(arg, scope)

    def _check_call(self, node: Any, name: str, args: Sequence[Any]) -> None:
        if name not in _ARITY:
            if name not in _STANDARD_FUNCTIONS:
                raise self._fail(node, f"undeclared function {name!r}")
            return
        if len(args) not in _ARITY[name]:
            expected = " or ".join(str(n) for n in sorted(_ARITY[name]))
            raise self._fail(
                node,
                f"found no matching overload for {name!r}: it takes {expected} argument(s) "
                f"counting the receiver, got {len(args)}",
            )
        literals = [_literal(arg) for arg in args]
        for position, (expected_kind, literal) in enumerate(
            zip(_ARGUMENT_KINDS[name], literals, strict=False)
        ):
            if literal is None or literal[0] == expected_kind:
                continue
            wanted = "a quantity or semver" if expected_kind == _NOT_LITERAL else expected_kind
            raise self._fail(
                node,
                f"found no matching overload for {name!r}: argument {position + 1} must be "
                f"{wanted}, got a {literal[0]} literal",
            )
        if name in ("quantity", "semver") and literals[0] is not None:
            self._check_constant(node, name, literals)

    def _check_constant(self, node: Any, name: str, literals: Sequence[Any]) -> None:
        text = str(celstr(literals[0][1]))
        try:
            if name == "quantity":
                Quantity.parse(text)
                return
            normalize = False
            if len(literals) > 1:
                if literals[1] is None:
                    return  # The mode is only known at evaluation.
                normalize = str(literals[1][1]) == "true"
            Semver.parse(text, normalize=normalize)
        except ValueError as err:
            raise self._fail(node, f"invalid {name} literal: {err}") from err


def check_selector(expression: str) -> None:
    """Raise :class:`CelCompileError` when ``expression`` is not a usable device selector."""
    _compile(expression)


# --- Evaluation ---------------------------------------------------------------------------

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_ABSENT: Final = object()


class _LRU(Generic[_K, _V]):
    """A size-capped mapping that forgets the least recently used entry first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | object:
        value = self._data.get(key, _ABSENT)
        if value is not _ABSENT:
            self._data.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._capacity:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class SelectorEvaluator:
    """Evaluates selectors against devices, compiling each expression once.

    With ``cache=True`` the result for each (expression, device) pair is memoised; the memo,
    the compiled programs and the per-device CEL values are all size-capped LRUs. The object
    is safe to share between threads.
    """

    def __init__(self, *, cache: bool = True) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._programs: _LRU[str, Any] = _LRU(_MAX_PROGRAMS)
        self._devices: _LRU[DeviceFacts, Any] = _LRU(_MAX_DEVICES)
        self._results: _LRU[tuple[str, DeviceFacts], bool] = _LRU(_MAX_RESULTS)
        #: CEL evaluations actually run; memo hits and malformed devices do not count.
        self.evaluations = 0
        #: Expressions compiled (successfully or not); cached programs do not count.
        self.compilations = 0

    def matches(self, expression: str, device: DeviceFacts) -> bool:
        """Whether ``device`` satisfies ``expression``.

        Raises :class:`CelCompileError` for an invalid expression, so that callers can tell a
        broken selector from a device that simply does not match.
        """
        key = (expression, device)
        if self._cache:
            with self._lock:
                hit = self._results.get(key)
            if hit is not _ABSENT:
                return bool(hit)
        program = self._program(expression)
        activation = self._activation(device)
        if activation is None:
            result = False
        else:
            with self._lock:
                self.evaluations += 1
            result = _run(program, activation)
        if self._cache:
            with self._lock:
                self._results.put(key, result)
        return result

    def matches_all(self, expressions: Sequence[str], device: DeviceFacts) -> bool:
        """Whether ``device`` satisfies every expression (true for an empty list).

        Every expression is compiled before any is evaluated, so an invalid one raises
        :class:`CelCompileError` even when an earlier one already rules the device out.
        """
        if isinstance(expressions, str):
            raise TypeError("expressions must be a sequence of str, not a single str")
        for expression in expressions:
            self._program(expression)
        return all(self.matches(expression, device) for expression in expressions)

    def _program(self, expression: str) -> Any:
        # Compiling under the lock keeps "once per expression" true across threads.
        with self._lock:
            cached = self._programs.get(expression)
            if cached is _ABSENT:
                try:
                    cached = _compile(expression)
                except CelCompileError as err:
                    cached = err
                self.compilations += 1
                self._programs.put(expression, cached)
        if isinstance(cached, CelCompileError):
            raise CelCompileError(cached.expression, cached.reason, cached.line, cached.column)
        return cached

    def _activation(self, device: DeviceFacts) -> Any:
        with self._lock:
            cached = self._devices.get(device)
        if cached is _ABSENT:
            try:
                cached = Activation(
                    vars={"device": _device_value(device)}, functions=cast(Any, _FUNCTIONS)
                )
            except _MalformedDeviceError:
                cached = None
            with self._lock:
                self._devices.put(device, cached)
        return cached


def _run(ast: Any, activation: Any) -> bool:
    try:
        # Reusing one Activation per device is safe: evaluation never writes to it, and
        # macros evaluate in nested activations of their own.
        result = Evaluator(ast, activation).evaluate()
    except Exception:  # Any failure is a non-match; one odd device must not break a reconcile.
        return False
    return _is_bool(result) and bool(result)
