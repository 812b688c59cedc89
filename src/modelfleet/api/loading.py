"""Loading manifests: files, directories (recursively, ``*.yaml``/``*.yml``), multi-document
YAML and ``-`` for standard input. Every problem comes back located by file, document index,
line and field path; nothing is half-loaded.

This module reads files (the only I/O in ``api``); it never touches the network or Temporal.
"""

from __future__ import annotations

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

    @property
    def resources(self) -> list[Resource]:
        return [d.resource for d in self.documents]

    def raise_for_errors(self) -> None:
        if self.errors:
            raise InvalidManifestsError(self.errors)


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files in the order given; directories expanded recursively in sorted order."""
    out: list[str] = []
    for raw in paths:
        if raw == STDIN:
            out.append(STDIN)
            continue
        p = Path(raw)
        if p.is_dir():
            out.extend(
                str(f) for f in sorted(p.rglob("*")) if f.is_file() and f.suffix in _SUFFIXES
            )
        else:
            out.append(raw)
    # A file named twice (``-f dir -f dir/file.yaml``) is read once.
    seen: set[Path | str] = set()
    unique = []
    for name in out:
        key: Path | str = name if name == STDIN else Path(name).resolve()
        if key not in seen:
            seen.add(key)
            unique.append(name)
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


def load_text(text: str, source: str) -> LoadResult:
    """Parse and validate every document in ``text`` (named ``source`` in errors)."""
    result = LoadResult()
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        documents: list[Any] = list(yaml.safe_load_all(text))
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


def load_paths(paths: Sequence[str], stdin: TextIO | None = None) -> LoadResult:
    """Load every document under ``paths``; errors are collected, never raised."""
    result = LoadResult()
    files = expand_paths(paths)
    if not files:
        result.errors.append(
            ManifestError(", ".join(paths) or "<none>", 0, None, "<files>", "no manifests found")
        )
    for name in files:
        if name == STDIN:
            text = (stdin or sys.stdin).read()
            source = "<stdin>"
        else:
            try:
                text = Path(name).read_text(encoding="utf-8")
            except OSError as exc:
                reason = exc.strerror or str(exc)
                result.errors.append(ManifestError(name, 0, None, "<file>", reason))
                continue
            source = name
        loaded = load_text(text, source)
        result.documents.extend(loaded.documents)
        result.errors.extend(loaded.errors)
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
