"""Loading manifests: files, directories (recursively, ``*.yaml``/``*.yml``, skipping hidden
folders and tool caches such as ``.venv``, ``.git``, ``__pycache__``, ``node_modules``),
multi-document YAML and ``-`` for standard input. Every problem comes back located by file,
document index, line and field path; nothing is half-loaded. Input with no document at all (an
empty or comment-only file, an empty standard input) is an error, as in kubectl.

Odd input is invalid input, never a crash: a file that is not UTF-8 text, a YAML alias used
inside its own anchor (a structure containing itself) and nesting deeper than any manifest
needs are errors located by file and line like any other.

This module reads files (the only I/O in ``api``); it never touches the network or Temporal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import (
    FieldError,
    InvalidManifestsError,
    InvalidResourceError,
    ManifestError,
)
from modelfleet.api.meta import Resource

STDIN = "-"
_SUFFIXES = (".yaml", ".yml")
# Folders a directory walk never enters (besides any whose name starts with "."): caches and
# dependency trees, which hold other projects' YAML.
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules"})
# Deeper than any manifest needs (the deepest schema path is about 12 levels); bounded so a
# pathological document is an error, not a RecursionError in the parser.
MAX_DEPTH = 100

LineMap = dict[tuple[str | int, ...], int]


@dataclass(frozen=True)
class LoadedDocument:
    source: str
    index: int
    line: int
    resource: Resource


@dataclass
class LoadResult:
    documents: list[LoadedDocument] = field(default_factory=list)
    errors: list[ManifestError] = field(default_factory=list)
    # Each directory given, with how many manifest files were read from it.
    directories: dict[str, int] = field(default_factory=dict)

    @property
    def resources(self) -> list[Resource]:
        return [d.resource for d in self.documents]

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InvalidManifestsError(self.errors)


def _skipped(folder: str) -> bool:
    return folder.startswith(".") or folder in _SKIPPED_FOLDERS


def walk_manifests(directory: Path) -> list[Path]:
    """The ``*.yaml``/``*.yml`` files under ``directory``, in sorted order, never entering a
    hidden folder (``.git``, ``.venv``...), ``__pycache__`` or ``node_modules`` below it."""
    found: list[Path] = []
    for root, folders, files in os.walk(directory):
        folders[:] = [f for f in folders if not _skipped(f)]
        found.extend(Path(root) / f for f in files if Path(f).suffix in _SUFFIXES)
    return sorted(f for f in found if f.is_file())


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files in the order given; directories expanded recursively in sorted order."""
    return [name for name, _ in _expand(paths)]


def _expand(paths: Iterable[str]) -> list[tuple[str, str | None]]:
    """Each file with the directory it was found in (None when named itself)."""
    out: list[tuple[str, str | None]] = []
    for raw in paths:
        if raw == STDIN:
            out.append((STDIN, None))
            continue
        p = Path(raw)
        if p.is_dir():
            out.extend((str(f), raw) for f in walk_manifests(p))
        else:
            out.append((raw, None))
    # A file named twice (``-f dir -f dir/file.yaml``) is read once.
    seen: set[Path | str] = set()
    unique = []
    for name, folder in out:
        key: Path | str = name if name == STDIN else Path(name).resolve()
        if key not in seen:
            seen.add(key)
            unique.append((name, folder))
    return unique


def _line_map(node: yaml.Node, path: tuple[str | int, ...], out: LineMap) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            out[(*path, key)] = key_node.start_mark.line + 1
            _line_map(value_node, (*path, key), out)
            # The key's own line is more useful than the value's for "unknown field" errors.
            out[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, (*path, i), out)


def _locate(lines: LineMap, path: tuple[str | int, ...]) -> int | None:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None


def _shape_error(text: str) -> tuple[int, int, str] | None:
    """(document, line, reason) of the first alias used inside its own anchor or collection
    nested deeper than ``MAX_DEPTH``, found from the parser's events (which need no recursion,
    unlike composing), or None."""
    document = -1
    open_anchors: list[str | None] = []
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        line = event.start_mark.line + 1 if event.start_mark is not None else 0
        if isinstance(event, yaml.DocumentStartEvent):
            document += 1
        elif isinstance(event, yaml.CollectionStartEvent):
            open_anchors.append(event.anchor)
            if len(open_anchors) > MAX_DEPTH:
                return document, line, f"nested more than {MAX_DEPTH} levels deep"
        elif isinstance(event, yaml.CollectionEndEvent):
            open_anchors.pop()
        elif isinstance(event, yaml.AliasEvent) and event.anchor in open_anchors:
            return (
                document,
                line,
                f"the alias *{event.anchor} is used inside its own anchor &{event.anchor} "
                "(a structure that contains itself)",
            )
    return None


def load_text(text: str, source: str) -> LoadResult:
    """Parse and validate every document in ``text`` (named ``source`` in errors)."""
    result = LoadResult()
    try:
        shape = _shape_error(text)
        if shape is not None:
            document, at, reason = shape
            result.errors.append(
                ManifestError(source, max(document, 0), at, "<document>", f"invalid YAML: {reason}")
            )
            return result
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        documents: list[Any] = list(yaml.safe_load_all(text))
    except RecursionError:  # a shape _shape_error does not catch: still invalid input
        result.errors.append(
            ManifestError(source, 0, None, "<document>", "invalid YAML: nested too deeply")
        )
        return result
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        result.errors.append(
            ManifestError(source, 0, line, "<document>", f"invalid YAML: {problem}")
        )
        return result
    for index, (node, document) in enumerate(zip(nodes, documents, strict=True)):
        if document is None:
            continue  # an empty document between '---' separators
        all_lines: LineMap = {}
        _line_map(node, (), all_lines)
        for item, lines in _items(document, all_lines):
            try:
                resource = parse_resource(_without_server_fields(item))
            except InvalidResourceError as exc:
                result.errors.extend(
                    _located(source, index, lines, exc.subject, e) for e in exc.errors
                )
                continue
            result.documents.append(LoadedDocument(source, index, lines.get((), 1), resource))
    return result


# What a server adds to an object it returns (``modelfleet get -o yaml``, kubectl's output).
# Applying such output back is normal, so these are dropped before validation, as kubectl does;
# every other unknown field is still an error.
_SERVER_METADATA = (
    "creationTimestamp",
    "resourceVersion",
    "uid",
    "generation",
    "managedFields",
    "selfLink",
)


def _items(document: Any, lines: LineMap) -> list[tuple[Any, LineMap]]:
    """A kubectl ``List`` (``apiVersion: v1``) stands for its items; anything else for itself."""
    if (
        isinstance(document, dict)
        and document.get("kind") == "List"
        and document.get("apiVersion") == "v1"
        and isinstance(document.get("items"), list)
    ):
        return [
            (item, {k[2:]: v for k, v in lines.items() if k[:2] == ("items", i)})
            for i, item in enumerate(document["items"])
        ]
    return [(document, lines)]


def _without_server_fields(document: Any) -> Any:
    if not isinstance(document, dict):
        return document
    clean = {k: v for k, v in document.items() if k != "status"}
    metadata = clean.get("metadata")
    if isinstance(metadata, dict):
        clean["metadata"] = {k: v for k, v in metadata.items() if k not in _SERVER_METADATA}
    return clean


def _located(
    source: str, index: int, lines: LineMap, subject: str, error: FieldError
) -> ManifestError:
    return ManifestError(
        source=source,
        document=index,
        line=_locate(lines, error.path),
        field=error.field,
        reason=error.reason,
        subject=subject,
    )


def _decode(data: bytes, source: str) -> str | ManifestError:
    """``data`` as UTF-8 text, or the error naming the line of the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start : exc.start + 1].hex()
        return ManifestError(
            source,
            0,
            line,
            "<file>",
            f"not a UTF-8 text file (byte 0x{byte} at offset {exc.start}); manifests are YAML text",
        )


def _read_stdin(stdin: TextIO | None) -> str | ManifestError:
    stream = stdin or sys.stdin
    raw = getattr(stream, "buffer", None)
    if raw is None:  # a text stream with no bytes under it (tests pass io.StringIO)
        return stream.read()
    return _decode(raw.read(), "<stdin>")


def load_paths(paths: Sequence[str], stdin: TextIO | None = None) -> LoadResult:
    """Load every document under ``paths``; errors are collected, never raised."""
    result = LoadResult()
    files = _expand(paths)
    for raw in paths:
        if raw != STDIN and Path(raw).is_dir():
            result.directories[raw] = sum(1 for _, folder in files if folder == raw)
    if not files:
        result.errors.append(
            ManifestError(", ".join(paths) or "<none>", 0, None, "<files>", "no manifests found")
        )
    empty: list[str] = []
    for name, _ in files:
        source = "<stdin>" if name == STDIN else name
        if name == STDIN:
            text = _read_stdin(stdin)
        else:
            try:
                text = _decode(Path(name).read_bytes(), name)
            except OSError as exc:
                reason = exc.strerror or str(exc)
                result.errors.append(ManifestError(name, 0, None, "<file>", reason))
                continue
        if isinstance(text, ManifestError):
            result.errors.append(text)
            continue
        loaded = load_text(text, source)
        result.documents.extend(loaded.documents)
        result.errors.extend(loaded.errors)
        if not loaded.documents and not loaded.errors:
            empty.append(source)
    if not result.documents and not result.errors:
        # Nothing at all to act on: an empty file or stdin is a mistake, not a no-op (kubectl:
        # "no objects passed to apply").
        result.errors.extend(
            ManifestError(
                source,
                0,
                None,
                "<document>",
                "no documents (the input is empty or holds only comments)",
            )
            for source in empty
        )
    _check_duplicates(result)
    return result


def _check_duplicates(result: LoadResult) -> None:
    seen: dict[tuple[str, str, str], LoadedDocument] = {}
    for doc in result.documents:
        key = (doc.resource.KIND, doc.resource.namespace, doc.resource.name)
        if key in seen:
            first = seen[key]
            result.errors.append(
                ManifestError(
                    doc.source,
                    doc.index,
                    doc.line,
                    "metadata.name",
                    f"{doc.resource.ref} is defined twice (first in {first.source} "
                    f"document {first.index})",
                    subject=doc.resource.ref,
                )
            )
        else:
            seen[key] = doc


def dump_resource(resource: Resource) -> str:
    """The YAML manifest of ``resource`` (camelCase, unset optionals omitted)."""
    return yaml.safe_dump(resource.to_wire(), sort_keys=False)
