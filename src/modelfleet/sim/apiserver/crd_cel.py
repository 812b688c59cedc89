"""The validation rules of CustomResourceDefinitions (``x-kubernetes-validations``) as the real
apiextensions-apiserver runs them: each rule of a schema node is evaluated with ``self`` bound
to the value there; a *transition rule* (one that reads ``oldSelf``) only on an update, and
only where the old object has a value at the same place (reached through object properties and
map values; list items are not correlated, as in an atomic list upstream). A rule that is
false is a 422 cause at the node (or its ``fieldPath``) with ``message``, else the string
``messageExpression`` yields, else ``failed rule: RULE``; an evaluation error is a cause too.
:func:`compile_causes` is the CRD-time check: every rule must compile.

Google's C++ CEL runtime (``cel-expr-python``, the ``sim`` extra), with Kubernetes' strings
(v2), optional-types and bindings extensions, as the simulator's DRA oracle uses it
(:mod:`..controllers.dra_cel`); never the product's CEL. ``self`` and ``oldSelf`` are dynamic,
so a rule upstream would reject at CRD time as ill-typed (``self.nope`` on a closed object)
only fails when evaluated. No cost budget is estimated or enforced.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: no I/O.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from modelfleet.sim.apiserver.crd_schema import Cause, field_path

__all__ = ["compile_causes", "rule_causes"]

_OLD_SELF = re.compile(r"\boldSelf\b")
_MAX_PROGRAMS = 4096


class _Programs:
    """Compiled rules, by text (bounded: a CRD's rules are few, and reapplied often)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._env: Any = None
        self._programs: dict[str, Any] = {}

    def get(self, expression: str) -> Any:
        """The program, or the compile error's text (a str)."""
        with self._lock:
            if self._env is None:
                t = cel.Type
                self._env = cel.NewEnv(
                    variables={"self": t.DYN, "oldSelf": t.DYN},
                    extensions=[
                        ext_strings.ExtStrings(2),
                        ext_optional.ExtOptional(),
                        ext_bindings.ExtBindings(),
                    ],
                )
            program = self._programs.get(expression)
            if program is None:
                try:
                    program = self._env.compile(expression)
                except Exception as err:  # the runtime reports parse and type errors so
                    program = str(err).splitlines()[0][:500]
                if len(self._programs) >= _MAX_PROGRAMS:
                    self._programs.clear()
                self._programs[expression] = program
            return program


_PROGRAMS = _Programs()


def compile_causes(schema: Any, path: str) -> list[Cause]:
    """A cause for every rule of ``schema`` (at ``path``) that does not compile."""
    causes: list[Cause] = []
    for where, node in _nodes(schema, path):
        for i, rule in enumerate(node.get("x-kubernetes-validations") or []):
            for key in ("rule", "messageExpression"):
                text = rule.get(key) if isinstance(rule, Mapping) else None
                if text is None:
                    continue
                program = _PROGRAMS.get(str(text))
                if isinstance(program, str):
                    causes.append(
                        {
                            "reason": "FieldValueInvalid",
                            "message": f"Invalid value: {text!r}: compilation failed: {program}",
                            "field": f"{where}.x-kubernetes-validations[{i}].{key}",
                        }
                    )
    return causes


def _nodes(schema: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(schema, Mapping):
        return
    yield path, schema
    for name, child in (schema.get("properties") or {}).items():
        yield from _nodes(child, f"{path}.properties[{name}]")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            yield from _nodes(schema[key], f"{path}.{key}")


def rule_causes(schema: Mapping[str, Any], value: Any, old: Any = None) -> list[Cause]:
    """Every ``x-kubernetes-validations`` rule ``value`` breaks; ``old`` is the stored object
    on an update (None on a create)."""
    return list(_walk(schema, value, old, "", old is not None))


def _walk(
    schema: Mapping[str, Any], value: Any, old: Any, path: str, has_old: bool
) -> Iterator[Cause]:
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        yield from _check(rule, schema, value, old, path, has_old)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if has_old and isinstance(old, dict) else {}
        for key, item in value.items():
            child = props.get(key) if key in props else extra
            if isinstance(child, Mapping):
                yield from _walk(
                    child,
                    item,
                    old_map.get(key),
                    field_path(path, key) if key in props else f"{path}[{key}]",
                    key in old_map,
                )
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _walk(schema["items"], item, None, field_path(path, i), False)


def _check(
    rule: Mapping[str, Any],
    schema: Mapping[str, Any],
    value: Any,
    old: Any,
    path: str,
    has_old: bool,
) -> Iterator[Cause]:
    text = str(rule.get("rule", ""))
    transition = bool(_OLD_SELF.search(text))
    if transition and not has_old:
        return
    where = path
    if rule.get("fieldPath"):
        where = f"{path}{rule['fieldPath']}" if path else str(rule["fieldPath"]).lstrip(".")
    kind = str(schema.get("type") or "object")
    reason = str(rule.get("reason") or "FieldValueInvalid")
    program = _PROGRAMS.get(text)
    data = {"self": value, "oldSelf": old if transition else None}
    if isinstance(program, str):
        yield _cause(where, kind, f"compilation failed: {program}", reason)
        return
    try:
        result = program.eval(data=data)
    except Exception as err:  # one odd value must not break a write
        yield _cause(where, kind, f"{err} evaluating rule: {text}", reason)
        return
    if result.type() == cel.Type.BOOL and result.value() is True:
        return
    if result.type() == cel.Type.ERROR:
        yield _cause(where, kind, f"{result.value()} evaluating rule: {text}", reason)
        return
    if result.type() != cel.Type.BOOL:
        yield _cause(where, kind, f"rule did not evaluate to a bool: {text}", reason)
        return
    yield _cause(where, kind, _message(rule, data), reason)


def _message(rule: Mapping[str, Any], data: dict[str, Any]) -> str:
    expression = rule.get("messageExpression")
    if expression:
        program = _PROGRAMS.get(str(expression))
        if not isinstance(program, str):
            try:
                result = program.eval(data=data)
            except Exception:  # upstream falls back to the message on an error
                result = None
            if result is not None and result.type() == cel.Type.STRING and result.value():
                return str(result.value())
    if rule.get("message"):
        return str(rule["message"])
    return f"failed rule: {rule.get('rule', '')}"


def _cause(where: str, kind: str, message: str, reason: str) -> Cause:
    return {"reason": reason, "message": f'Invalid value: "{kind}": {message}', "field": where}
