"""kubectl's JSONPath templates (``-o jsonpath=...``, ``-o custom-columns=...``, ``--sort-by``),
with the semantics of client-go's ``util/jsonpath`` as kubectl runs it (missing keys allowed).

A template is text with actions in braces: ``{.items[*].metadata.name}``, ``{"\\n"}``,
``{range .items[*]}...{end}``. An action's results are printed space-separated: strings as
they are, maps and lists as compact JSON, ``null`` for null. Paths: ``.field`` (``\\.`` escapes
a dot in a key), ``['key']``, ``..field`` (recursive), ``[*]`` / ``.*``, ``[n]``, ``[a:b:s]``,
``[a,b]``, ``['a','b']``, ``[?(@.x == "y")]`` (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, or
existence), ``@`` (the current item) and ``$`` (the document). Pure.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


class JsonPathError(ValueError):
    """A template that does not parse, or that cannot be executed on the document."""


# --- the parsed template ----------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Field:
    name: str  # "*": every value


@dataclass(frozen=True)
class Recursive:
    pass


@dataclass(frozen=True)
class Index:
    start: int | None
    stop: int | None
    step: int | None
    single: bool  # ``[n]``, not a slice


@dataclass(frozen=True)
class Union:
    parts: tuple[Index | Path, ...]


@dataclass(frozen=True)
class Filter:
    left: Path
    op: str  # "" : existence of ``left``
    right: Path | Literal | None


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Path:
    root: bool  # starts at ``$`` (the document), else at ``@`` (the current item)
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Range:
    over: Path
    body: tuple[Node, ...]


Node = Text | Path | Range
Step = Field | Recursive | Index | Union | Filter | Path  # a Path step: ``['a.b']``


def parse(template: str) -> tuple[Node, ...]:
    """The nodes of a template; ``JsonPathError`` saying what is wrong."""
    nodes, rest = _parse_nodes(_actions(template), in_range=False)
    assert not rest
    return tuple(nodes)


def _actions(template: str) -> list[tuple[bool, str]]:
    """(is_action, text) pieces: the text outside braces and each action's inside."""
    pieces: list[tuple[bool, str]] = []
    i, n = 0, len(template)
    text = ""
    while i < n:
        c = template[i]
        if c != "{":
            text += c
            i += 1
            continue
        if text:
            pieces.append((False, text))
            text = ""
        j, quote = i + 1, ""
        while j < n:
            d = template[j]
            if quote:
                if d == "\\":
                    j += 1
                elif d == quote:
                    quote = ""
            elif d in "\"'":
                quote = d
            elif d == "}":
                break
            j += 1
        if j >= n:
            raise JsonPathError(f"unclosed action in {template!r}")
        pieces.append((True, template[i + 1 : j].strip()))
        i = j + 1
    if text:
        pieces.append((False, text))
    return pieces


def _parse_nodes(
    pieces: list[tuple[bool, str]], *, in_range: bool
) -> tuple[list[Node], list[tuple[bool, str]]]:
    nodes: list[Node] = []
    while pieces:
        is_action, text = pieces[0]
        pieces = pieces[1:]
        if not is_action:
            nodes.append(Text(text))
        elif text == "end":
            if not in_range:
                raise JsonPathError("{end} without a {range}")
            return nodes, pieces
        elif text.startswith("range ") or text == "range":
            over = _parse_path(text[len("range") :].strip())
            body, pieces = _parse_nodes(pieces, in_range=True)
            nodes.append(Range(over, tuple(body)))
        elif text.startswith('"'):
            nodes.append(Text(_unquote(text)))
        elif text:
            nodes.append(_parse_path(text))
    if in_range:
        raise JsonPathError("{range} without an {end}")
    return nodes, pieces


def _unquote(text: str) -> str:
    """A Go string literal (``"\\n"``, ``"\\t"``, ``"\\""``)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise JsonPathError(f"unterminated string {text!r}") from None
    if not isinstance(value, str):
        raise JsonPathError(f"not a string: {text!r}")
    return value


_NAME_END = ".[]{}(), =!<>\"'"


def _parse_path(text: str) -> Path:
    if not text:
        raise JsonPathError("an empty path")
    root = False
    i = 0
    if text[0] == "$":
        root, i = True, 1
    elif text[0] == "@":
        i = 1
    elif text[0] not in ".[":
        raise JsonPathError(f"unrecognized identifier {text!r}")
    steps: list[Step] = []
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("..", i):
            steps.append(Recursive())
            i += 2
            name, i = _name(text, i)
            if name:
                steps.append(Field(name))
        elif c == ".":
            name, i = _name(text, i + 1)
            if name:
                steps.append(Field(name))
        elif c == "[":
            end = _closing_bracket(text, i)
            steps.append(_parse_bracket(text[i + 1 : end].strip()))
            i = end + 1
        else:
            raise JsonPathError(f"unrecognized character {c!r} in {text!r}")
    return Path(root, tuple(steps))


def _name(text: str, i: int) -> tuple[str, int]:
    name = ""
    while i < len(text) and text[i] not in _NAME_END:
        if text[i] == "\\" and i + 1 < len(text):
            i += 1
        name += text[i]
        i += 1
    return name, i


def _closing_bracket(text: str, i: int) -> int:
    depth, quote = 0, ""
    for j in range(i, len(text)):
        c = text[j]
        if quote:
            if c == "\\":
                continue
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return j
    raise JsonPathError(f"unterminated array in {text!r}")


def _parse_bracket(inside: str) -> Step:
    if inside == "*":
        return Field("*")
    if inside.startswith("?"):
        m = re.fullmatch(r"\?\s*\((.*)\)", inside, re.S)
        if not m:
            raise JsonPathError(f"bad filter [{inside}]")
        return _parse_filter(m.group(1).strip())
    parts = [p.strip() for p in _split_commas(inside)]
    parsed = [_parse_subscript(p) for p in parts]
    if len(parsed) == 1:
        return parsed[0]
    return Union(tuple(parsed))


def _split_commas(text: str) -> list[str]:
    parts, quote, current = [], "", ""
    for c in text:
        if quote:
            if c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == ",":
            parts.append(current)
            current = ""
            continue
        current += c
    parts.append(current)
    return parts


def _parse_subscript(part: str) -> Index | Path:
    if len(part) >= 2 and part[0] == part[-1] == "'":
        return _parse_path("." + part[1:-1])  # kubectl reads ['a.b'] as .a.b
    bits = part.split(":")
    if len(bits) > 3:
        raise JsonPathError(f"bad array index [{part}]")
    try:
        values = [int(b) if b.strip() else None for b in bits]
    except ValueError:
        raise JsonPathError(f"bad array index [{part}]") from None
    if len(bits) == 1:
        if values[0] is None:
            raise JsonPathError("an empty array index")
        return Index(values[0], None, None, single=True)
    return Index(values[0], values[1], values[2] if len(values) == 3 else None, single=False)


_FILTER = re.compile(r"(.+?)\s*(==|!=|<=|>=|<|>)\s*(.+)", re.S)


def _parse_filter(text: str) -> Filter:
    m = _FILTER.fullmatch(text)
    if not m:
        return Filter(_parse_path(text), "", None)
    left, op, right = m.group(1).strip(), m.group(2), m.group(3).strip()
    return Filter(_parse_path(left), op, _parse_operand(right))


def _parse_operand(text: str) -> Path | Literal:
    if text[:1] in "@$":
        return _parse_path(text)
    if text[:1] in "\"'" and text[-1:] == text[:1] and len(text) >= 2:
        return Literal(text[1:-1])
    if text in ("true", "false"):
        return Literal(text == "true")
    try:
        return Literal(int(text))
    except ValueError:
        pass
    try:
        return Literal(float(text))
    except ValueError:
        raise JsonPathError(f"unrecognized filter operand {text!r}") from None


# --- evaluation -------------------------------------------------------------------------------


def find(path: Path, current: Any, root: Any) -> list[Any]:
    """Every value ``path`` reaches (missing keys reach nothing)."""
    values = [root if path.root else current]
    for step in path.steps:
        values = [out for v in values for out in _step(step, v, root)]
    return values


def _step(step: Step, value: Any, root: Any) -> list[Any]:
    if isinstance(step, Path):
        return find(step, value, root)
    if isinstance(step, Field):
        return _field(step.name, value)
    if isinstance(step, Recursive):
        return list(_descendants(value))
    if isinstance(step, Index):
        return _index(step, value)
    if isinstance(step, Union):
        return [out for part in step.parts for out in _step(part, value, root)]
    return [item for item in _children(value) if _passes(step, item, root)]


def _field(name: str, value: Any) -> list[Any]:
    if isinstance(value, dict):
        if name == "*":
            return [value[k] for k in sorted(value)]
        return [value[name]] if name in value else []
    if name == "*" and isinstance(value, list):
        return list(value)
    return []


def _children(value: Any) -> list[Any]:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    return []


def _descendants(value: Any) -> Iterator[Any]:
    yield value
    for child in _children(value):
        yield from _descendants(child)


def _index(step: Index, value: Any) -> list[Any]:
    if not isinstance(value, list):
        return []
    length = len(value)
    start = step.start or 0
    if start < 0:
        start += length
    if step.single:
        stop = start + 1
    else:
        stop = length if step.stop is None else step.stop
        if stop < 0:
            stop += length
    if stop != start:
        if start >= length or start < 0:
            raise JsonPathError(f"array index out of bounds: index {start}, length {length}")
        if stop > length or stop < 0:
            raise JsonPathError(f"array index out of bounds: index {stop - 1}, length {length}")
    if stop <= start:
        return []
    return list(value[start : stop : step.step or 1])


def _passes(f: Filter, item: Any, root: Any) -> bool:
    left = find(f.left, item, root)
    if not f.op:
        return bool(left)
    if isinstance(f.right, Path):
        right = find(f.right, item, root)
    else:
        assert f.right is not None
        right = [f.right.value]
    if not left or not right:
        return False
    return _compare(left[0], f.op, right[0])


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _compare(a: Any, op: str, b: Any) -> bool:
    numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    if op in ("==", "!="):
        same = a == b if numbers or type(a) is type(b) else False
        return same if op == "==" else not same
    if numbers or (isinstance(a, str) and isinstance(b, str)):
        return _ORDER[op](a, b)
    return False


def execute(nodes: tuple[Node, ...], document: Any) -> str:
    """The template's text for ``document`` (kubectl ``-o jsonpath``)."""
    out: list[str] = []
    _run(nodes, document, document, out)
    return "".join(out)


def _run(nodes: tuple[Node, ...], current: Any, root: Any, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.text)
        elif isinstance(node, Range):
            for item in find(node.over, current, root):
                _run(node.body, item, root, out)
        else:
            out.append(" ".join(text(v) for v in find(node, current, root)))


def text(value: Any) -> str:
    """How ``-o jsonpath`` prints one result: maps and lists as compact JSON (Go's, keys
    sorted), ``null``, ``true``/``false``, numbers as Go prints them, strings as they are."""
    if isinstance(value, dict | list):
        return _go_json(value)
    return _scalar(value, none="null")


def go_sprint(value: Any) -> str:
    """Go's ``fmt.Sprint`` of a decoded JSON value, as ``-o custom-columns`` prints a cell:
    ``map[k:v]``, ``[a b]``, ``<nil>``."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    return _scalar(value, none="<nil>")


def _scalar(value: Any, *, none: str) -> str:
    if value is None:
        return none
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return str(value)


def _go_json(value: Any) -> str:
    """``encoding/json.Marshal``: compact, map keys sorted, <, > and & escaped."""
    dumped = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return dumped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
