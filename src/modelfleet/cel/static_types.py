"""The static types the compiler can be sure of in a parsed selector, and the comparisons cel-go's
type checker rejects between them (:func:`comparison_error`).

Layer rules: ``modelfleet.cel`` is the pure base package under ``api`` and ``scheduling``. It
does no I/O (no logging, files, network or clock), and it imports only the standard library,
``celpy`` and its sibling modules: no Temporal, no Kubernetes client, no cloud SDK, no other
modelfleet package.

This is not a type checker. :func:`static_type` knows the type of literals, of
``device.driver`` and ``device.capacity[domain][id]`` (a quantity, as Kubernetes declares it),
of the Kubernetes quantity/semver functions' results and of a few standard functions and
operators whose result type never depends on their operands; everything else (attribute
values, macro variables, ``dyn``, ``null``) is unknown and never rejected. With that,
:func:`comparison_error` reports what cel-go would: ``==``/``!=`` between two different known
types (``"a" == 1``, ``quantity("1") == 1``, a double against an int literal), and ``<``,
``<=``, ``>``, ``>=`` between two different known non-numeric types (Kubernetes enables
cross-type numeric ordering, so ``1 < 1.5`` stays valid). Ordering a quantity or semver, which
cel-go also rejects, is left an evaluation error (a non-match), as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

QUANTITY: Final = "quantity"
SEMVER: Final = "semver"

# (domain, name) -> the CEL type of ``device.attributes[domain].name`` on some device; given,
# the attribute values of that device are statically known too (``validate`` checks a
# selector against the devices the manifests' classes declare).
AttributeTypes = Mapping[tuple[str, str], str]
# An attribute's kind (api: string, int, bool, version) -> its CEL type.
ATTRIBUTE_KIND_TYPES: Final = {"string": "string", "int": "int", "bool": "bool", "version": SEMVER}

_CEL_NAMES: Final = {QUANTITY: "kubernetes.Quantity", SEMVER: "kubernetes.Semver"}
_NUMERIC: Final = frozenset({"int", "uint", "double"})
_OPAQUE: Final = frozenset({QUANTITY, SEMVER})

_TOKEN_TYPES: Final = {
    "STRING_LIT": "string",
    "MLSTRING_LIT": "string",
    "BOOL_LIT": "bool",
    "INT_LIT": "int",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "BYTES_LIT": "bytes",
}

# Result types that do not depend on the arguments (the Kubernetes library and standard CEL).
_GLOBAL_RESULTS: Final = {
    "quantity": QUANTITY,
    "semver": SEMVER,
    "isQuantity": "bool",
    "isSemver": "bool",
    "sign": "int",
    "has": "bool",
    "size": "int",
    "string": "string",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "bool": "bool",
    "bytes": "bytes",
    "type": "type",
    "matches": "bool",
    "startsWith": "bool",
    "endsWith": "bool",
    "contains": "bool",
}
_MEMBER_RESULTS: Final = {
    "size": "int",
    "matches": "bool",
    "contains": "bool",
    "startsWith": "bool",
    "endsWith": "bool",
    "asApproximateFloat": "double",
    "asInteger": "int",
    "isInteger": "bool",
    "compareTo": "int",
    "isGreaterThan": "bool",
    "isLessThan": "bool",
    "add": QUANTITY,
    "sub": QUANTITY,
    "major": "int",
    "minor": "int",
    "patch": "int",
    "all": "bool",
    "exists": "bool",
    "exists_one": "bool",
    "map": "list",
    "filter": "list",
}
_TYPE_NAMES: Final = frozenset(
    {"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint"}
)
_RELATIONS: Final = {
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
}
_ARITHMETIC: Final = frozenset(
    {"addition_add", "addition_sub", "multiplication_mul", "multiplication_div"}
)


def _children(node: Any) -> list[Any]:
    return list(getattr(node, "children", []))


def _data(node: Any) -> str | None:
    return getattr(node, "data", None)


_TERMINALS: Final = frozenset(
    {
        "literal",
        "list_lit",
        "map_lit",
        "ident",
        "ident_arg",
        "member_dot",
        "member_dot_arg",
        "member_index",
        "member_object",
        "dot_ident",
        "dot_ident_arg",
    }
)


def _unwrap(node: Any) -> Any:
    """Descend through single-child wrappers (expr -> ... -> primary, parentheses)."""
    while _data(node) not in _TERMINALS:
        children = _children(node)
        if len(children) != 1 or _data(children[0]) is None:
            return node
        node = children[0]
    return node


def _device_field(node: Any) -> str | None:
    """``driver``/``attributes``/``capacity`` when ``node`` is ``device.<that>``."""
    inner = _unwrap(node)
    if _data(inner) != "member_dot":
        return None
    receiver, field = _children(inner)[:2]
    target = _unwrap(receiver)
    if _data(target) == "ident" and str(_children(target)[0]) == "device":
        return str(field)
    return None


def _is_capacity_domain(node: Any) -> bool:
    """Whether ``node`` is ``device.capacity[<domain>]``: a map of quantities."""
    inner = _unwrap(node)
    return _data(inner) == "member_index" and _device_field(_children(inner)[0]) == "capacity"


def _attribute_domain(node: Any) -> str | None:
    """The domain when ``node`` is ``device.attributes["<domain>"]``."""
    inner = _unwrap(node)
    if _data(inner) != "member_index" or _device_field(_children(inner)[0]) != "attributes":
        return None
    key = _unwrap(_children(inner)[1])
    if _data(key) != "literal" or _TOKEN_TYPES.get(_children(key)[0].type) != "string":
        return None
    text = str(_children(key)[0])
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else None


def static_type(node: Any, attributes: AttributeTypes | None = None) -> str | None:
    """The CEL type ``node`` certainly has, or None when it is not known statically. With
    ``attributes``, ``device.attributes["<domain>"].<name>`` has the type given there."""
    inner = _unwrap(node)
    data = _data(inner)
    children = _children(inner)
    if data == "literal":
        return _TOKEN_TYPES.get(children[0].type)
    if data == "list_lit":
        return "list"
    if data == "map_lit":
        return "map"
    if data == "ident":
        return "type" if str(children[0]) in _TYPE_NAMES else None
    if data == "ident_arg":
        return _GLOBAL_RESULTS.get(str(children[0]))
    if data == "member_dot_arg":
        receiver = _unwrap(children[0])
        if _data(receiver) == "ident" and str(_children(receiver)[0]) == "cel":
            return None  # cel.bind: the type of its body, not worth following
        return _MEMBER_RESULTS.get(str(children[1]))
    if data == "member_dot":
        field = _device_field(inner)
        if field == "driver":
            return "string"
        if field in ("attributes", "capacity"):
            return "map"
        domain = _attribute_domain(children[0]) if attributes is not None else None
        if domain is not None and attributes is not None:
            return attributes.get((domain, str(children[1])))
        return QUANTITY if _is_capacity_domain(children[0]) else None
    if data == "member_index":
        if _device_field(children[0]) in ("attributes", "capacity"):
            return "map"
        return QUANTITY if _is_capacity_domain(children[0]) else None
    if data in ("conditionalor", "conditionaland", "relation"):
        return "bool"  # only reached with two operands: a || b, a && b, a == b, a in b
    if data == "unary" and children and _data(children[0]) == "unary_not":
        return "bool"
    if data in ("addition", "multiplication") and children:
        operator = _data(children[0])
        if operator in _ARITHMETIC:
            left = static_type(_children(children[0])[0], attributes)
            right = static_type(children[1], attributes)
            if left == right and left in _NUMERIC:
                return left
        return None
    if data == "expr" and len(children) == 3:
        then = static_type(children[1], attributes)
        otherwise = static_type(children[2], attributes)
        return then if then == otherwise else None
    return None


def comparison_error(node: Any, attributes: AttributeTypes | None = None) -> str | None:
    """Why cel-go's checker rejects the comparison ``node`` (a ``relation`` with a comparison
    operator), or None when it may be valid; ``attributes`` as for :func:`static_type`."""
    children = _children(node)
    if len(children) != 2:
        return None
    symbol = _RELATIONS.get(_data(children[0]) or "")
    if symbol is None:
        return None
    left = static_type(_children(children[0])[0], attributes)
    right = static_type(children[1], attributes)
    names = ", ".join(_CEL_NAMES.get(str(t), str(t)) for t in (left, right))
    overload = f"found no matching overload for '_{symbol}_' applied to '({names})'"
    if symbol in ("==", "!="):
        if left is None or right is None or left == right:
            return None
        hint = ""
        if {left, right} == {"int", "double"}:
            hint = "; write the number with a decimal point (2.0) or convert it with double()"
        elif left in _OPAQUE or right in _OPAQUE:
            hint = f"; compare a {left if left in _OPAQUE else right} with another one"
        return f"{overload}: CEL does not compare values of different types with {symbol}{hint}"
    # cel-go rejects <, >... on a quantity or semver at compile time too; the product keeps
    # that an evaluation error for now (the scheduling tests use "memory > 5" as a selector
    # that compiles and fails on every device).
    if left in _OPAQUE or right in _OPAQUE:
        return None
    if left is None or right is None or left == right:
        return None
    if left in _NUMERIC and right in _NUMERIC:
        return None
    return f"{overload}: CEL does not order values of different types"
