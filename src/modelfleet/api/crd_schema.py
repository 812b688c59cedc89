"""A pydantic model's JSON Schema turned into a Kubernetes *structural* OpenAPI v3 schema, as a
CRD's ``openAPIV3Schema`` needs it. Pure, no I/O.

What the translation does, and why (the Kubernetes rules are those of "Specifying a structural
schema" in the CustomResourceDefinition documentation):

* ``$ref`` is inlined (a CRD schema has no definitions); ``title`` is dropped;
* ``Optional[X]`` (``anyOf: [X, null]``) becomes X with ``nullable: true``; ``default: null``
  is dropped (an unset field is already null to the models);
* ``const`` (a one-value ``Literal``) becomes a one-value ``enum``: OpenAPI v3.0 has no const;
* a numeric ``exclusiveMinimum``/``exclusiveMaximum`` (JSON Schema 2020-12) becomes OpenAPI
  v3.0's ``minimum`` plus ``exclusiveMinimum: true``;
* ``additionalProperties: false`` (the models forbid unknown fields) is dropped: Kubernetes
  forbids it, and prunes unknown fields instead (or, with ``kubectl``'s default strict field
  validation, rejects them as ``unknown field``);
* ``int | str`` becomes ``x-kubernetes-int-or-string``; any other union of several types has
  every branch's properties merged into one object (structural schemas specify every field
  outside a junctor), or, where that cannot be expressed, keeps unknown fields
  (``x-kubernetes-preserve-unknown-fields``), the model judging it;
* ``Any`` (an empty schema) keeps unknown fields;
* CEL rules (``x-kubernetes-validations``) are attached to the node of the model they belong
  to, by the model's name (``api.crd_rules``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]
Rules = Mapping[str, list[dict[str, str]]]

# What a CRD schema may carry besides the keys handled one by one below.
_KEPT = (
    "type",
    "description",
    "default",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "required",
    "format",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-validations",
)
# The formats the apiserver validates (others are rejected in a CRD or ignored).
_FORMATS = {"int32", "int64", "float", "double", "byte", "date", "date-time", "uri", "uuid"}


def openapi_schema(model: type[BaseModel], rules: Rules | None = None) -> Schema:
    """The structural schema of ``model`` as it appears in manifests (camelCase names), with
    ``rules`` (model name -> CEL rules) attached where the models are used."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = raw.pop("$defs", {})
    converted = _Converter(defs, rules or {}, set()).convert(raw, name=model.__name__)
    # No node shared between two places (a YAML dump would write anchors and aliases).
    schema: Schema = json.loads(json.dumps(converted))
    return schema


def rules_placed(model: type[BaseModel], rules: Rules) -> set[str]:
    """The names in ``rules`` whose model ``model``'s schema uses (a rule keyed by a name that
    no CRD uses is a rule that was never enforced: a test checks that none is)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Schema] = raw.pop("$defs", {})
    placed: set[str] = set()
    _Converter(defs, rules, placed).convert(raw, name=model.__name__)
    return placed


def merge_objects(schemas: list[Schema]) -> Schema:
    """One object schema accepting what any of ``schemas`` (object schemas) accepts, as far as
    a structural schema can say it: every property of each (the first one's where two share
    a name), required only what all require. Rules of the branches are kept on their
    properties; cross-branch rules are the caller's."""
    merged: Schema = {"type": "object", "properties": {}}
    required: set[str] | None = None
    for schema in schemas:
        for name, prop in schema.get("properties", {}).items():
            merged["properties"].setdefault(name, prop)
        own = set(schema.get("required", []))
        required = own if required is None else required & own
    for name, prop in merged["properties"].items():
        if "default" in prop and not all(name in s.get("properties", {}) for s in schemas):
            # Defaulted into a document of another shape, it would be a field that shape
            # does not have.
            merged["properties"][name] = {k: v for k, v in prop.items() if k != "default"}
    if required:
        merged["required"] = sorted(required)
    return merged


class _Converter:
    def __init__(self, defs: dict[str, Schema], rules: Rules, placed: set[str]) -> None:
        self._defs = defs
        self._rules = rules
        self._placed = placed
        self._stack: list[str] = []

    def convert(self, node: Schema, name: str | None = None) -> Schema:
        node = dict(node)
        if "$ref" in node:
            ref = node.pop("$ref").rsplit("/", 1)[-1]
            if ref in self._stack:
                # A recursive model cannot be inlined: keep what comes below it unchecked.
                return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
            self._stack.append(ref)
            target = self.convert(self._defs[ref], name=ref)
            self._stack.pop()
            node.pop("title", None)
            return self._finish({**target, **self._plain(node)})
        for junctor in ("anyOf", "oneOf"):
            if junctor in node:
                return self._union(node, node.pop(junctor))
        if "allOf" in node and len(node["allOf"]) == 1:
            inner = node.pop("allOf")[0]
            return self._finish({**self.convert(inner), **self._plain(node)})
        out = self._plain(node)
        kind = node.get("type")
        if not node or (set(node) <= {"title", "description", "default"} and not kind):
            out["x-kubernetes-preserve-unknown-fields"] = True
        if kind == "object":
            if "properties" in node:
                out["properties"] = {k: self.convert(v) for k, v in node["properties"].items()}
            extra = node.get("additionalProperties")
            if isinstance(extra, dict) and "properties" not in node:
                out["additionalProperties"] = self.convert(extra)
            if extra is True or ("properties" not in node and extra is None):
                out["x-kubernetes-preserve-unknown-fields"] = True
        if kind == "array" and "items" in node:
            out["items"] = self.convert(node["items"])
        if name is not None and name in self._rules:
            self._placed.add(name)
            out["x-kubernetes-validations"] = copy.deepcopy(self._rules[name])
        return self._finish(out)

    def _union(self, node: Schema, branches: list[Schema]) -> Schema:
        outer = self._plain(node)
        real = [b for b in branches if b.get("type") != "null"]
        nullable = len(real) < len(branches)
        if len(real) == 1:
            out = {**self.convert(real[0]), **outer}
        elif {b.get("type") for b in real} == {"integer", "string"}:
            out = {"x-kubernetes-int-or-string": True, **outer}
            out.pop("type", None)
        else:
            converted = [self.convert(b) for b in real]
            if all(c.get("type") == "object" for c in converted):
                out = {**merge_objects(converted), **outer}
            else:
                # Different scalar types or objects and scalars: no structural schema says
                # "one of these"; keep the value as written, the models judge it.
                out = {"x-kubernetes-preserve-unknown-fields": True, **outer}
        if nullable:
            out["nullable"] = True
        return self._finish(out)

    @staticmethod
    def _plain(node: Schema) -> Schema:
        out = {k: v for k, v in node.items() if k in _KEPT}
        if "const" in node:
            out["enum"] = [node["const"]]
            value = node["const"]
            out.setdefault(
                "type",
                "string"
                if isinstance(value, str)
                else "boolean"
                if isinstance(value, bool)
                else "integer"
                if isinstance(value, int)
                else "number",
            )
        for bound, plain in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            if isinstance(node.get(bound), int | float) and not isinstance(node.get(bound), bool):
                out[plain] = node[bound]
                out[bound] = True
        if isinstance(out.get("description"), str):
            # Docstrings wrap at the source's width; ``kubectl explain`` wraps on its own.
            paragraphs = out["description"].strip().split("\n\n")
            out["description"] = "\n\n".join(" ".join(p.split()) for p in paragraphs)
        if out.get("default", 0) is None:
            del out["default"]
        if "format" in out and out["format"] not in _FORMATS:
            del out["format"]
        return out

    @staticmethod
    def _finish(out: Schema) -> Schema:
        if out.get("type") == "object" and "properties" in out and "additionalProperties" in out:
            del out["additionalProperties"]
        if out.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
        # The order a person reads a schema in: what it is, then its parts, then its rules.
        first = ("type", "description", "nullable", "enum", "default")
        last = ("properties", "additionalProperties", "items", "required")
        ordered = {k: out[k] for k in first if k in out}
        ordered.update({k: v for k, v in out.items() if k not in first and k not in last})
        ordered.update({k: out[k] for k in last if k in out})
        if "x-kubernetes-validations" in ordered:
            ordered["x-kubernetes-validations"] = ordered.pop("x-kubernetes-validations")
        return ordered
