"""Pure engines of the API emulator: selectors, patches, field ownership."""

from __future__ import annotations

from typing import Any

import pytest

from modelfleet.sim.apiserver.field_management import (
    ManagerEntry,
    ManagerKey,
    fields_v1_to_paths,
    format_path,
    paths_to_fields_v1,
    record_update,
    tracked_paths,
)
from modelfleet.sim.apiserver.patch_formats import json_patch, merge_patch, strategic_merge_patch
from modelfleet.sim.apiserver.selectors import (
    label_selector_from_object,
    parse_field_selector,
    parse_label_selector,
    selector_to_string,
)
from modelfleet.sim.apiserver.server_side_apply import apply_config
from modelfleet.sim.apiserver.status_errors import ApiError


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a!=1", {"a": "1"}, False),
        ("a in (1, 2)", {"a": "2"}, True),
        ("a in (1,2)", {}, False),
        ("a notin (1,2)", {}, True),
        ("a notin (1,2)", {"a": "1"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("a>3", {"a": "4"}, True),
        ("a<3", {"a": "4"}, False),
        ("example.com/role=x, b in (y)", {"example.com/role": "x", "b": "y"}, True),
        ("", {"anything": "goes"}, True),
    ],
)
def test_label_selector_matching(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("bad", ["a in (", "a=1,", "=x", "a in ()", "a==b c", "a>x"])
def test_label_selector_parse_errors_are_400(bad: str) -> None:
    with pytest.raises(ApiError) as exc:
        parse_label_selector(bad)
    assert exc.value.code == 400


def test_label_selector_objects_round_trip() -> None:
    sel = label_selector_from_object(
        {
            "matchLabels": {"app": "x"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}],
        }
    )
    assert selector_to_string(sel) == "app=x,tier notin (db)"
    assert sel.matches({"app": "x"})
    assert not sel.matches({"app": "x", "tier": "db"})


def test_field_selectors() -> None:
    pod = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"nodeName": "node-1"}}
    assert parse_field_selector("spec.nodeName=node-1", "pods").matches(pod)
    assert parse_field_selector("metadata.name!=q,metadata.namespace==n", "pods").matches(pod)
    with pytest.raises(ApiError) as exc:
        parse_field_selector("spec.nodeName=x", "configmaps")
    assert exc.value.code == 400


def test_merge_patch_rfc7386() -> None:
    doc = {"a": {"b": 1, "c": 2}, "l": [1, 2]}
    assert merge_patch(doc, {"a": {"b": None, "d": 3}, "l": [3]}) == {
        "a": {"c": 2, "d": 3},
        "l": [3],
    }
    assert doc == {"a": {"b": 1, "c": 2}, "l": [1, 2]}  # input untouched


def test_json_patch_rfc6902() -> None:
    doc: dict[str, Any] = {"a": [1, 2], "b": {"c": "x"}, "k~/": 1}
    out = json_patch(
        doc,
        [
            {"op": "add", "path": "/a/-", "value": 3},
            {"op": "add", "path": "/a/0", "value": 0},
            {"op": "remove", "path": "/a/1"},
            {"op": "replace", "path": "/b/c", "value": "y"},
            {"op": "copy", "from": "/b", "path": "/d"},
            {"op": "move", "from": "/d/c", "path": "/e"},
            {"op": "test", "path": "/e", "value": "y"},
            {"op": "remove", "path": "/k~0~1"},
        ],
    )
    assert out == {"a": [0, 2, 3], "b": {"c": "y"}, "d": {}, "e": "y"}
    with pytest.raises(ApiError) as exc:
        json_patch(doc, [{"op": "test", "path": "/b/c", "value": "nope"}])
    assert exc.value.code == 422
    with pytest.raises(ApiError) as exc:
        json_patch(doc, [{"op": "remove", "path": "/missing"}])
    assert exc.value.code == 422
    with pytest.raises(ApiError) as exc:
        json_patch(doc, [{"op": "frobnicate", "path": "/a"}])
    assert exc.value.code == 400  # a malformed patch is the client's error, not unprocessable
    with pytest.raises(ApiError) as exc:
        json_patch(doc, [{"op": "add", "path": "/a/9", "value": 1}])
    assert exc.value.code == 422


def test_strategic_merge_patch_merges_named_lists() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                {"name": "b", "image": "1"},
            ],
            "tolerations": [{"key": "t"}],
        }
    }
    out = strategic_merge_patch(
        pod,
        {
            "spec": {
                "containers": [
                    {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                    {"name": "b", "$patch": "delete"},
                    {"name": "c", "image": "3"},
                ],
                "tolerations": [{"key": "u"}],
            }
        },
    )
    assert out["spec"]["containers"] == [
        {
            "name": "a",
            "image": "1",
            "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
        },
        {"name": "c", "image": "3"},
    ]
    assert out["spec"]["tolerations"] == [{"key": "u"}]


def test_fields_v1_round_trip_and_path_format() -> None:
    obj = {
        "metadata": {"labels": {"a": "1"}, "finalizers": ["x/y"]},
        "spec": {
            "containers": [{"name": "c", "ports": [{"containerPort": 80}], "args": ["-v"]}],
            "resources": {},
        },
    }
    paths = tracked_paths(obj, "all")
    fields = paths_to_fields_v1(paths)
    assert fields["f:metadata"]["f:finalizers"] == {'v:"x/y"': {}}
    container = fields["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert container["."] == {}
    assert 'k:{"containerPort":80,"protocol":"TCP"}' in container["f:ports"]
    assert container["f:args"] == {}
    assert fields["f:spec"]["f:resources"] == {}
    assert fields_v1_to_paths(fields) == paths
    image = (("f", "spec"), ("f", "containers"), ("k", '{"name":"c"}'), ("f", "image"))
    assert format_path(image) == '.spec.containers[name="c"].image'


def _apply(
    managers: dict[ManagerKey, ManagerEntry],
    live: dict[str, Any] | None,
    config: dict[str, Any],
    manager: str,
    force: bool = False,
) -> Any:
    return apply_config(
        managers,
        live,
        config,
        manager=manager,
        subresource="",
        scope="main",
        force=force,
        now="2026-01-01T00:00:00Z",
        api_version="v1",
    )


def test_apply_ownership_conflicts_and_removal() -> None:
    managers: dict[ManagerKey, ManagerEntry] = {}
    live = _apply(managers, None, {"spec": {"a": 1, "b": 2}, "status": {"s": 1}}, "one").obj
    assert live == {"spec": {"a": 1, "b": 2}}  # status ignored on the main resource
    result = _apply(managers, live, {"spec": {"a": 5}}, "two")
    assert [(m, format_path(p)) for m, p in result.conflicts] == [("one", ".spec.a")]
    assert result.obj == live
    result = _apply(managers, live, {"spec": {"a": 5}}, "two", force=True)
    live = result.obj
    assert live == {"spec": {"a": 5, "b": 2}}
    one = managers[ManagerKey("one", "Apply")]
    assert (("f", "spec"), ("f", "a")) not in one.paths
    # "one" drops b (only it owns b: removed) and a (now owned by "two": kept).
    live = _apply(managers, live, {"spec": {"c": 3}}, "one").obj
    assert live == {"spec": {"a": 5, "c": 3}}


def test_update_takes_ownership_from_appliers() -> None:
    managers: dict[ManagerKey, ManagerEntry] = {}
    old = _apply(managers, None, {"spec": {"replicas": 1, "x": 1}}, "applier").obj
    new = {"spec": {"replicas": 3, "x": 1}}
    changed = record_update(
        managers,
        old,
        new,
        manager="hpa",
        subresource="",
        scope="main",
        now="t",
        api_version="v1",
    )
    assert changed
    assert managers[ManagerKey("hpa", "Update")].paths == {(("f", "spec"), ("f", "replicas"))}
    assert managers[ManagerKey("applier", "Apply")].paths == {(("f", "spec"), ("f", "x"))}
    # The applier dropping replicas no longer removes it: "hpa" owns it now.
    live = _apply(managers, new, {"spec": {"x": 1}}, "applier").obj
    assert live == {"spec": {"replicas": 3, "x": 1}}
