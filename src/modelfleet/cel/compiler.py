"""Compiling a DRA device selector: parsing with ``celpy`` and the static checks that stand in
for cel-go's type checker (:func:`check_selector`, :func:`compile_selector`).

Layer rules: ``modelfleet.cel`` is the pure base package under ``api`` and ``scheduling``. It
does no I/O (no logging, files, network or clock), and it imports only the standard library,
``celpy`` and its sibling modules: no Temporal, no Kubernetes client, no cloud SDK, no other
modelfleet package.

Deliberate divergences from upstream (cel-python cannot do these, or we chose to be lenient):

* No full type checker. Instead :func:`check_selector` rejects syntax errors, unknown functions or
  identifiers, unknown ``device`` fields, wrong arities of the Kubernetes functions, literals of
  the wrong type passed to them and unparsable ``quantity("...")``/``semver("...")`` literals.
  ``==``/``!=`` between two different statically known types (``"a" == 1``,
  ``quantity("1") == 1``, a double against an int) is rejected as cel-go's checker does
  (:mod:`.static_types`). A non-bool result type is not rejected up front; it is a non-match
  at evaluation.
* ``cel.bind(name, value, expr)`` is supported (evaluated by :mod:`.evaluator`).
* Missing: optional syntax (``.?``, ``orValue``: cel-python's grammar has no ``.?``; rejected
  with "not supported by modelfleet"), the Kubernetes extension
  libraries (strings v2, lists, sets, regex helpers beyond ``matches``, IP/CIDR, URL, format),
  quantity ``mul``/``div``/``divInt``, ``device.allowMultipleAllocations``, list-valued
  attributes and cost limits.
* More permissive: ``has()`` accepts an index expression such as ``has(m["k"])``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

import celpy
from celpy.evaluation import celstr

from modelfleet.cel.functions import (
    ARGUMENT_KINDS,
    ARITY,
    BOOL,
    GLOBAL_ONLY,
    INT,
    NOT_LITERAL,
    STANDARD_FUNCTIONS,
    STRING,
    TYPE_IDENTIFIERS,
)
from modelfleet.cel.quantity import Quantity
from modelfleet.cel.semver import Semver
from modelfleet.cel.static_types import AttributeTypes, comparison_error

#: Kubernetes caps a selector expression at 10 KiB (``CELSelectorExpressionMaxLength``).
MAX_EXPRESSION_LENGTH: Final = 10 * 1024

_DEVICE_FIELDS: Final = frozenset({"driver", "attributes", "capacity"})
_TYPE_IDENTIFIERS: Final = frozenset(TYPE_IDENTIFIERS)
_MEMBER_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
_OPTIONAL_FUNCTIONS: Final = frozenset({"orValue", "hasValue", "optMap", "optFlatMap"})
_OPTIONAL_UNSUPPORTED: Final = (
    "optional values ('.?field', '[?key]', orValue(), optional.of()) are not supported by "
    "modelfleet; guard the lookup with has(...) or 'in' instead"
)


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


_TOKEN_KINDS: Final = {
    "STRING_LIT": STRING,
    "MLSTRING_LIT": STRING,
    "BOOL_LIT": BOOL,
    "INT_LIT": INT,
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "BYTES_LIT": "bytes",
    "NULL_LIT": "null",
}


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
    if str(token) == "?" and (".?" in expression or "[?" in expression):
        reason = _OPTIONAL_UNSUPPORTED
    return CelCompileError(
        expression, reason, getattr(error, "line", None), getattr(error, "column", None)
    )


def compile_selector(expression: str) -> Any:
    """The parsed and checked program of ``expression``; raises :class:`CelCompileError`."""
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

    def _source(self, node: Any) -> str:
        meta = getattr(node, "meta", None)
        start, end = getattr(meta, "start_pos", None), getattr(meta, "end_pos", None)
        if start is None or end is None:
            return self._expression
        return self._expression[start:end]

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
        if data == "relation":
            reason = comparison_error(node)
            if reason is not None:
                raise self._fail(node, f"{self._source(node)!r} does not type-check: {reason}")
        for child in _children(node):
            self.check(child, scope)

    def _check_identifier(self, node: Any, name: str, scope: frozenset[str]) -> None:
        if name in scope:
            return
        if name == "cel":
            raise self._fail(node, "'cel' is only the namespace of cel.bind(name, value, expr)")
        if name == "optional":
            raise self._fail(node, _OPTIONAL_UNSUPPORTED)
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
        elif name in ARITY and name not in GLOBAL_ONLY:
            raise self._fail(
                node,
                f"{name}() is a method in Kubernetes, not a global function: write "
                f"x.{name}(...) instead of {name}(x, ...)",
            )
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
            self._check_bind(node, name, args, scope)
            return
        self.check(receiver, scope)
        if name in GLOBAL_ONLY:
            argument = "q" if name == "sign" else "s"
            raise self._fail(
                node,
                f"{name}() is a global function in Kubernetes, not a method: use "
                f"{name}({argument}) instead of {argument}.{name}()",
            )
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

    def _check_bind(self, node: Any, name: str, args: Sequence[Any], scope: frozenset[str]) -> None:
        if name != "bind":
            raise self._fail(node, f"undeclared function 'cel.{name}'; only cel.bind() exists")
        if len(args) != 3:
            raise self._fail(node, "cel.bind() takes a variable name, a value and an expression")
        variable = _identifier(args[0])
        if variable is None:
            raise self._fail(node, "the first argument of cel.bind() must be a variable name")
        self.check(args[1], scope)
        self.check(args[2], scope | {variable})

    def _check_call(self, node: Any, name: str, args: Sequence[Any]) -> None:
        if name in _OPTIONAL_FUNCTIONS:
            raise self._fail(node, _OPTIONAL_UNSUPPORTED)
        if name not in ARITY:
            if name not in STANDARD_FUNCTIONS:
                raise self._fail(node, f"undeclared function {name!r}")
            return
        if len(args) not in ARITY[name]:
            expected = " or ".join(str(n) for n in sorted(ARITY[name]))
            raise self._fail(
                node,
                f"found no matching overload for {name!r}: it takes {expected} argument(s) "
                f"counting the receiver, got {len(args)}",
            )
        literals = [_literal(arg) for arg in args]
        for position, (expected_kind, literal) in enumerate(
            zip(ARGUMENT_KINDS[name], literals, strict=False)
        ):
            if literal is None or literal[0] == expected_kind:
                continue
            wanted = "a quantity or semver" if expected_kind == NOT_LITERAL else expected_kind
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


# Expressions that passed ``check_selector``, oldest first, bounded. The check is a pure function
# of the text and costs ~1.5 ms (lark parse and literal checks); the Fleet validates every
# placement request's selectors, nearly always the same few.
_CHECKED: dict[str, None] = {}
_CHECKED_MAX = 4096


def check_selector(expression: str) -> None:
    """Raise :class:`CelCompileError` when ``expression`` is not a usable device selector."""
    if isinstance(expression, str) and expression in _CHECKED:
        return
    compile_selector(expression)
    if len(_CHECKED) >= _CHECKED_MAX:
        del _CHECKED[next(iter(_CHECKED))]
    _CHECKED[expression] = None


def attribute_type_error(expression: str, attributes: AttributeTypes) -> str | None:
    """Why ``expression`` cannot type-check on a device whose attributes have the types
    ``attributes`` gives (``productName > 5`` where productName is a string), in cel-go's
    words, or None; raises :class:`CelCompileError` when it does not compile at all."""
    ast = compile_selector(expression)
    checker = _Checker(expression)
    for node in ast.iter_subtrees_topdown():
        if getattr(node, "data", None) == "relation":
            reason = comparison_error(node, attributes)
            if reason is not None:
                return f"type error in {checker._source(node)!r}: {reason}"
    return None
