"""Evaluating DRA device selectors: :class:`SelectorEvaluator` compiles each expression once,
presents each device once and memoises results, all in size-capped LRUs.

Layer rules: ``modelfleet.cel`` is the pure base package under ``api`` and ``scheduling``. It
does no I/O (no logging, files, network or clock), and it imports only the standard library,
``celpy`` and its sibling modules: no Temporal, no Kubernetes client, no cloud SDK, no other
modelfleet package. Callers hand it plain :class:`~modelfleet.cel.device.DeviceFacts` and get
booleans back.

Semantics follow ``k8s.io/dynamic-resource-allocation/cel`` (see ``device`` and ``functions``
for the variable and the function library): an unknown id inside a map is an error, and a
result that is not a bool, and any evaluation error, is a non-match. Where this evaluator
diverges from upstream is listed in ``compiler``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Final, Generic, TypeVar, cast

from celpy.evaluation import Activation, CELEvalError, Evaluator

from modelfleet.cel.compiler import CelCompileError, compile_selector
from modelfleet.cel.device import DeviceFacts, MalformedDeviceError, device_value
from modelfleet.cel.functions import FUNCTIONS, TYPE_IDENTIFIERS, is_bool

# Bounds keep a long-running controller from growing without limit; each entry is small.
_MAX_PROGRAMS: Final = 1024
_MAX_DEVICES: Final = 4096
_MAX_RESULTS: Final = 65536

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

    def evaluation_error(self, expression: str, device: DeviceFacts) -> str | None:
        """Why ``expression`` fails to evaluate on ``device`` (a type error, a division by
        zero, a result that is not a bool), or ``None`` when it evaluates to a bool. Matching
        treats such a failure as a non-match; this lets a caller say so instead of reporting
        a selector that merely does not match. Not memoised: callers use it to explain."""
        program = self._program(expression)
        activation = self._activation(device)
        if activation is None:
            return None
        try:
            result = _BindingEvaluator(program, activation).evaluate()
        except Exception as exc:  # celpy raises its CELEvalError and, rarely, Python errors
            return _describe(exc)
        if not is_bool(result):
            return f"evaluates to {cel_names(type(result).__name__)}, not a bool"
        return None

    def _program(self, expression: str) -> Any:
        # Compiling under the lock keeps "once per expression" true across threads.
        with self._lock:
            cached = self._programs.get(expression)
            if cached is _ABSENT:
                try:
                    cached = compile_selector(expression)
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
                    vars=cast(Any, {**TYPE_IDENTIFIERS, "device": device_value(device)}),
                    functions=cast(Any, FUNCTIONS),
                )
            except MalformedDeviceError:
                cached = None
            with self._lock:
                self._devices.put(device, cached)
        return cached


class _BindingEvaluator(Evaluator):
    """celpy's evaluator plus ``cel.bind(name, value, expr)`` (ext.Bindings in cel-go): the
    value is evaluated once and ``expr`` sees it under ``name``, shadowing any outer variable
    of that name. cel-go initialises the binding lazily, so a value that fails is an error
    only where ``expr`` uses it: the error is bound as the value, and celpy propagates it."""

    # The trees are lark's; they are handled by shape so that this module imports only celpy.

    def sub_evaluator(self, ast: Any) -> Evaluator:
        return _BindingEvaluator(ast, activation=self.activation)

    def member_dot_arg(self, tree: Any) -> Any:
        receiver, name = tree.children[:2]
        if str(name) != "bind" or _identifier(receiver) != "cel" or len(tree.children) < 3:
            return super().member_dot_arg(tree)
        variable, init, body = tree.children[2].children  # the compiler checked the shape
        value = self.visit(init)
        try:
            return _BindingEvaluator(body, self.activation).evaluate(
                {str(_identifier(variable)): value}
            )
        except CELEvalError as err:
            return err  # a value, so that || and && can still absorb it


def _identifier(node: Any) -> str | None:
    """The name when ``node`` is a bare identifier (under its single-child wrappers)."""
    while len(getattr(node, "children", ())) == 1:
        if getattr(node, "data", None) == "ident":
            return str(node.children[0])
        node = node.children[0]
    return None


_CEL_TYPE_NAMES = {
    "IntType": "int",
    "UintType": "uint",
    "DoubleType": "double",
    "StringType": "string",
    "BoolType": "bool",
    "BytesType": "bytes",
    "ListType": "list",
    "MapType": "map",
    "NullType": "null_type",
    "TimestampType": "google.protobuf.Timestamp",
    "DurationType": "google.protobuf.Duration",
    "Quantity": "kubernetes.Quantity",
    "Semver": "kubernetes.Semver",
    "_DomainMap": "map",
}
_PYTHON_CLASS = re.compile(r"\s*<class '[\w.]+'>")
_CLASS_NAME = re.compile(r"\b(" + "|".join(_CEL_TYPE_NAMES) + r")\b")


def cel_names(text: str) -> str:
    """``text`` in CEL's type names: no ``<class 'celpy.celtypes.IntType'>``, ``int`` for
    ``IntType`` (messages are read by people who write CEL, not Python)."""
    text = _PYTHON_CLASS.sub("", text)
    return _CLASS_NAME.sub(lambda m: _CEL_TYPE_NAMES[m.group(1)], text)


def _describe(exc: Exception) -> str:
    args = exc.args
    if len(args) >= 2 and args[1] is ZeroDivisionError:
        return "division by zero"
    if len(args) >= 3 and args[1] is TypeError and args[2]:
        detail = str(args[2][0])
        if "overload" not in detail:  # a Python error from inside celpy: not CEL's words
            detail = "an operator or function applied to values of types it does not take"
        return f"type error: {cel_names(detail)}"[:200]
    return cel_names(str(args[0] if args else exc))[:200]


def _run(ast: Any, activation: Any) -> bool:
    try:
        # Reusing one Activation per device is safe: evaluation never writes to it, and
        # macros evaluate in nested activations of their own.
        result = _BindingEvaluator(ast, activation).evaluate()
    except Exception:  # Any failure is a non-match; one odd device must not break a reconcile.
        return False
    return is_bool(result) and bool(result)
