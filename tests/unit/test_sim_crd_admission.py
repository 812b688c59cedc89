"""The simulated API server's admission of CRDs and custom objects (sim/apiserver/crd_*):
non-structural schemas refused, objects pruned, defaulted, validated with kube-openapi's
messages, CEL rules with ``oldSelf``, status subresource semantics, printer-column tables."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from modelfleet.sim.apiserver.crd_columns import find
from modelfleet.sim.apiserver.crd_schema import structural_causes
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.apiserver.tables import object_table

WIDGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "minimum": 0, "maximum": 10, "default": 1},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "label": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "immutable": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "immutable is immutable"}
                    ],
                },
            },
            "required": ["color"],
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.label) || self.size > 0",
                    "messageExpression": "'a labelled widget needs a size (' + self.label + ')'",
                    "fieldPath": ".size",
                }
            ],
        },
        "status": {
            "type": "object",
            "properties": {"ready": {"type": "integer", "minimum": 0}},
        },
    },
}


def _crd(schema: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Tag", "type": "string", "jsonPath": ".spec.tags[*]"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }


def _widget(name: str = "w", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"color": "red", **spec},
    }


@pytest.fixture
async def store() -> ClusterStore:
    s = ClusterStore("unit")
    await s.create(_crd(WIDGET_SCHEMA))
    return s


async def _refused(coro: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await coro
    assert caught.value.code == 422
    return str(caught.value)


# --- CRDs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}},
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: "
            "must not be empty for specified object fields",
        ),
        (
            {"type": "object", "properties": {"spec": {"type": "array"}}},
            "properties[spec].items: Required value: must be specified",
        ),
        (
            {
                "type": "object",
                "properties": {"spec": {"type": "object", "additionalProperties": False}},
            },
            "properties[spec].additionalProperties: Forbidden: additionalProperties cannot be "
            "set to false",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "anyOf": [{"properties": {"b": {"type": "string"}}}],
                    }
                },
            },
            "properties[spec].anyOf[0].properties[b]: Required value: must be specified outside "
            "of the junctor",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "oneOf": [{"type": "object"}, {"type": "string"}]}
                },
            },
            "properties[spec].oneOf[0].type: Forbidden: must be empty to be structural",
        ),
        (
            {"type": "object", "properties": {"spec": {"$ref": "#/definitions/Spec"}}},
            "properties[spec].$ref: Forbidden: $ref is not supported",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}
                },
            },
            "properties[metadata].properties[labels]: Forbidden",
        ),
        (
            {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.a ==", "message": "m"}],
            },
            "openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: 'self.a ==': "
            "compilation failed",
        ),
        (None, "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"),
    ],
)
async def test_a_crd_whose_schema_is_not_structural_is_refused(schema: Any, expected: str) -> None:
    message = await _refused(ClusterStore("unit").create(_crd(schema)))
    assert 'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid' in (
        message
    )
    assert expected in message


def test_the_int_or_string_pattern_is_structural() -> None:
    schema = {
        "type": "object",
        "properties": {
            "port": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            }
        },
    }
    assert structural_causes(schema, "s") == []


async def test_a_stored_crd_is_established_and_stays_unchanged_when_stored_again(
    store: ClusterStore,
) -> None:
    crd = await store.get(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com"
    )
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    again = await store.update({**_crd(WIDGET_SCHEMA), "metadata": crd["metadata"]})
    assert again["metadata"]["resourceVersion"] == crd["metadata"]["resourceVersion"]


# --- custom objects -----------------------------------------------------------------------


async def test_objects_are_pruned_and_defaulted(store: ClusterStore) -> None:
    created = await store.create(
        _widget(unknown=1, free={"anything": {"goes": True}}, tags=["a"]) | {"extra": 1}
    )
    assert created["spec"] == {
        "color": "red",
        "size": 1,
        "tags": ["a"],
        "free": {"anything": {"goes": True}},
    }
    assert "extra" not in created


async def test_schema_violations_have_kube_openapis_messages(store: ClusterStore) -> None:
    message = await _refused(
        store.create(_widget(size=-1, color="green", label="ABCDEFG", tags=["a", "b", "c"]))
    )
    assert 'Widget.example.com "w" is invalid: ' in message
    for expected in (
        "spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0",
        'spec.color: Unsupported value: "green": supported values: "red", "blue"',
        "spec.label: Too long: may not be more than 5 bytes",
        "spec.label: Invalid value: \"ABCDEFG\": spec.label in body should match '^[a-z]+$'",
        "spec.tags: Too many: 3: must have at most 2 items",
    ):
        assert expected in message
    missing = _widget()
    del missing["spec"]["color"]
    assert "spec.color: Required value" in await _refused(store.create(missing))
    typed = await _refused(store.create(_widget(size="big")))
    assert 'spec.size: Invalid value: "string": spec.size in body must be of type integer' in typed
    # A type error blocks the rules, as upstream.
    assert "some validation rules were not checked" in typed


async def test_cel_rules_and_transition_rules(store: ClusterStore) -> None:
    message = await _refused(store.create(_widget(label="bob", size=0)))
    assert 'spec.size: Invalid value: "object": a labelled widget needs a size (bob)' in message
    await store.create(_widget(immutable="one"))
    # oldSelf: the rule holds on create, and is checked on every update.
    changed = await _refused(
        store.patch("example.com/v1", "Widget", "w", {"spec": {"immutable": "two"}})
    )
    assert 'spec.immutable: Invalid value: "string": immutable is immutable' in changed
    same = await store.patch("example.com/v1", "Widget", "w", {"spec": {"size": 3}})
    assert same["spec"]["size"] == 3


async def test_status_subresource_and_generation(store: ClusterStore) -> None:
    created = await store.create(_widget() | {"status": {"ready": 5}})
    assert "status" not in created
    status = await store.patch(
        "example.com/v1",
        "Widget",
        "w",
        {"status": {"ready": 2, "junk": 1}, "spec": {"size": 9}},
        subresource="status",
    )
    assert status["status"] == {"ready": 2}  # pruned; the spec in it ignored
    assert status["spec"]["size"] == 1
    assert status["metadata"]["generation"] == 1
    main = await store.patch(
        "example.com/v1", "Widget", "w", {"status": {"ready": 7}, "spec": {"size": 4}}
    )
    assert main["status"] == {"ready": 2}
    assert main["metadata"]["generation"] == 2
    labelled = await store.patch(
        "example.com/v1", "Widget", "w", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 2
    bad = store.patch(
        "example.com/v1", "Widget", "w", {"status": {"ready": -1}}, subresource="status"
    )
    assert "status.ready in body should be greater than or equal to 0" in await _refused(bad)


async def test_tables_render_the_printer_columns(store: ClusterStore) -> None:
    await store.create(_widget(size=4, tags=["x", "y"]))
    rt = store.resource_type("example.com/v1", "Widget")
    obj = copy.deepcopy(store.get_object(rt, "default", "w"))
    created = datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    table = object_table(rt, [obj], list_meta={}, now=created + timedelta(minutes=3, seconds=5))
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Tag", "Age"]
    assert table["columnDefinitions"][3]["type"] == "date"
    assert table["rows"][0]["cells"] == ["w", 4, "x", "3m5s"]
    obj["spec"].pop("tags")
    assert (
        object_table(rt, [obj], list_meta={}, now=datetime.now(UTC))["rows"][0]["cells"][2] is None
    )


def test_jsonpath_filters_as_kubectls() -> None:
    obj = {
        "status": {
            "conditions": [
                {"type": "Progressing", "status": "True"},
                {"type": "Ready", "status": "False", "message": "waiting"},
            ]
        },
        "spec": {"a": {"b-c": [1, 2]}},
    }
    assert find(obj, '.status.conditions[?(@.type=="Ready")].status') == ["False"]
    assert find(obj, '.status.conditions[?(@.type!="Ready")].type') == ["Progressing"]
    assert find(obj, ".spec.a.b-c[1]") == [2]
    assert find(obj, ".spec.a['b-c'][*]") == [1, 2]
    assert find(obj, ".spec.missing.x") == []
