"""Contract tests: the official ``kubernetes`` client against the simulated API server.

Everything goes over real HTTP on 127.0.0.1 through a kubeconfig the emulator writes, with
unmodified client code (typed APIs, CustomObjectsApi, DynamicClient, watch.Watch).
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from modelfleet.sim.apiserver.server import FleetApiServer, ServerSettings, serve_in_thread
from modelfleet.sim.loop_thread import LoopThread

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def srv() -> Iterator[LoopThread[FleetApiServer]]:
    settings = ServerSettings(bookmark_interval_seconds=0.05, history_limit=500)
    with serve_in_thread(clusters=["alpha", "beta"], settings=settings) as server:
        yield server


def _api_client(srv: LoopThread[FleetApiServer], cluster: str, tmp: Path) -> client.ApiClient:
    path = srv.call(srv.target.write_kubeconfig, cluster, tmp / f"kubeconfig-{cluster}")
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg)
    cfg.retries = False
    return client.ApiClient(cfg)


@pytest.fixture(scope="module")
def api(
    srv: LoopThread[FleetApiServer], tmp_path_factory: pytest.TempPathFactory
) -> client.ApiClient:
    return _api_client(srv, "alpha", tmp_path_factory.mktemp("kube"))


@pytest.fixture(scope="module")
def dyn(api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> DynamicClient:
    cache = tmp_path_factory.mktemp("discovery") / "cache.json"
    return DynamicClient(api, cache_file=str(cache))


@pytest.fixture
def ns(api: client.ApiClient) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def _raw(
    srv: LoopThread[FleetApiServer],
    method: str,
    path: str,
    body: bytes | None = None,
    content_type: str | None = None,
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(srv.target.base_url + path, data=body, method=method)
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def _frames(
    srv: LoopThread[FleetApiServer], path: str, until: str, limit: int = 50
) -> list[dict[str, Any]]:
    """Read watch frames from ``path`` until one of type ``until`` arrives (bounded by TIMEOUT)."""
    frames: list[dict[str, Any]] = []
    with urllib.request.urlopen(srv.target.base_url + path, timeout=TIMEOUT) as resp:
        assert resp.headers["Content-Type"] == "application/json"
        while len(frames) < limit:
            line = resp.readline()
            if not line:
                break
            frames.append(json.loads(line))
            if frames[-1]["type"] == until:
                break
    return frames


def _status(exc: ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status"
    return body


def _deployment(name: str, ns: str, image: str = "nginx:1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
            **spec,
        },
    }


def _lws(name: str, ns: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"spec": {"containers": [{"name": "vllm", "image": "vllm"}]}},
            },
        },
    }


# --------------------------------------------------------------------------- basics, discovery


def test_json_content_type_is_exact_and_version_served(srv: LoopThread[FleetApiServer]) -> None:
    code, headers, body = _raw(srv, "GET", "/clusters/alpha/version")
    assert code == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body)["major"] == "1"
    code, headers, _ = _raw(srv, "GET", "/clusters/alpha/api/v1/namespaces/default/pods/none")
    assert code == 404
    assert headers["Content-Type"] == "application/json"


def test_discovery_shapes(srv: LoopThread[FleetApiServer]) -> None:
    _, _, body = _raw(srv, "GET", "/clusters/alpha/api")
    assert json.loads(body)["versions"] == ["v1"]
    _, _, body = _raw(srv, "GET", "/clusters/alpha/apis")
    groups = {g["name"]: g for g in json.loads(body)["groups"]}
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    assert "" not in groups
    _, _, body = _raw(srv, "GET", "/clusters/alpha/apis/leaderworkerset.x-k8s.io/v1")
    doc = json.loads(body)
    assert doc["kind"] == "APIResourceList"
    names = {r["name"]: r for r in doc["resources"]}
    assert names["leaderworkersets"]["kind"] == "LeaderWorkerSet"
    assert names["leaderworkersets"]["namespaced"] is True
    assert {"leaderworkersets/status", "leaderworkersets/scale"} <= set(names)
    code, _, _ = _raw(srv, "GET", "/clusters/alpha/apis/nope.example.com/v1")
    assert code == 404


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("v1", "Pod"),
        ("v1", "Event"),
        ("apps/v1", "Deployment"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
        ("resource.k8s.io/v1", "ResourceSlice"),
        ("resource.k8s.io/v1", "DeviceClass"),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ("inference.networking.k8s.io/v1", "InferencePool"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
        ("gateway.networking.k8s.io/v1", "Gateway"),
        ("llm-d.ai/v1alpha2", "InferenceObjective"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ],
)
def test_dynamic_client_discovers_kind(dyn: DynamicClient, api_version: str, kind: str) -> None:
    res = dyn.resources.get(api_version=api_version, kind=kind)
    assert res.kind == kind
    assert res.group_version == api_version
    listed = res.get()
    assert listed.kind == f"{kind}List"
    assert int(listed.metadata.resourceVersion) > 0


def test_typed_clients_crud(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map(
        ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}}
    )
    assert created.metadata.uid
    assert created.metadata.generation == 1
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.managed_fields[0].manager == "OpenAPI-Generator"
    created.data["b"] = "2"
    updated = core.replace_namespaced_config_map("cfg", ns, created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    assert core.read_namespaced_config_map("cfg", ns).data == {"a": "1", "b": "2"}
    gen = core.create_namespaced_config_map(ns, {"metadata": {"generateName": "cfg-"}})
    assert gen.metadata.name.startswith("cfg-")
    assert len(gen.metadata.name) == len("cfg-") + 5


def test_namespaced_create_defaults_and_missing_namespace(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", "no-such-ns", "leaderworkersets", _lws("x", "")
        )
    assert exc.value.status == 404
    status = _status(exc.value)
    assert status["reason"] == "NotFound"
    assert status["message"] == 'namespaces "no-such-ns" not found'


# --------------------------------------------------------------------------- error Status objects


def test_error_statuses(
    api: client.ApiClient, dyn: DynamicClient, srv: LoopThread[FleetApiServer], ns: str
) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("absent", ns)
    assert (exc.value.status, _status(exc.value)["reason"]) == (404, "NotFound")

    core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "dup"}})
    assert (exc.value.status, _status(exc.value)["reason"]) == (409, "AlreadyExists")

    stale = core.read_namespaced_config_map("dup", ns)
    core.patch_namespaced_config_map("dup", ns, {"data": {"x": "1"}})
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("dup", ns, stale)
    assert (exc.value.status, _status(exc.value)["reason"]) == (409, "Conflict")

    bad = _deployment("bad", ns)
    del bad["spec"]["selector"]
    with pytest.raises(ApiException) as exc:  # the typed client would refuse this client-side
        dyn.resources.get(api_version="apps/v1", kind="Deployment").create(body=bad, namespace=ns)
    status = _status(exc.value)
    assert (exc.value.status, status["reason"]) == (422, "Invalid")
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.selector"]

    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {}})
    status = _status(exc.value)
    assert exc.value.status == 422
    assert status["details"]["causes"][0]["field"] == "metadata.name"

    lws = _lws("nolwt", ns)
    del lws["spec"]["leaderWorkerTemplate"]
    with pytest.raises(ApiException) as exc:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", ns, "leaderworkersets", lws
        )
    assert exc.value.status == 422
    fields = {c["field"] for c in _status(exc.value)["details"]["causes"]}
    assert "spec.leaderWorkerTemplate" in fields

    base = f"/clusters/alpha/api/v1/namespaces/{ns}/configmaps"
    code, _, body = _raw(srv, "POST", base, b"{}", "application/x-www-form-urlencoded")
    assert (code, json.loads(body)["reason"]) == (415, "UnsupportedMediaType")
    code, _, body = _raw(srv, "POST", f"{base}/dup", b"{}", "application/json")
    assert (code, json.loads(body)["reason"]) == (405, "MethodNotAllowed")
    code, _, body = _raw(srv, "GET", f"{base}?labelSelector=a%20in%20(", None)
    assert (code, json.loads(body)["reason"]) == (400, "BadRequest")
    code, _, body = _raw(srv, "POST", base, b"{not json", "application/json")
    assert (code, json.loads(body)["reason"]) == (400, "BadRequest")


def test_strategic_merge_patch_is_415_for_crds(
    api: client.ApiClient, dyn: DynamicClient, ns: str
) -> None:
    res = dyn.resources.get(api_version="leaderworkerset.x-k8s.io/v1", kind="LeaderWorkerSet")
    res.create(body=_lws("smp", ns), namespace=ns)
    with pytest.raises(ApiException) as exc:
        res.patch(body={"spec": {"replicas": 3}}, name="smp", namespace=ns)
    assert exc.value.status == 415
    patched = res.patch(
        body={"spec": {"replicas": 3}},
        name="smp",
        namespace=ns,
        content_type="application/merge-patch+json",
    )
    assert patched.spec.replicas == 3


# --------------------------------------------------------------------------- server-side apply


def test_apply_create_reapply_and_generation(
    dyn: DynamicClient, srv: LoopThread[FleetApiServer], ns: str
) -> None:
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    body = _deployment("web", ns)
    first = res.server_side_apply(body=body, field_manager="deployer", force_conflicts=True)
    assert first.metadata.generation == 1
    [entry] = first.to_dict()["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("deployer", "Apply")
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers == {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}}}

    again = res.server_side_apply(body=body, field_manager="deployer", force_conflicts=True)
    assert again.metadata.resourceVersion == first.metadata.resourceVersion
    assert again.metadata.generation == 1

    labelled = json.loads(json.dumps(body))
    labelled["metadata"]["labels"] = {"team": "a"}
    third = res.server_side_apply(body=labelled, field_manager="deployer")
    assert int(third.metadata.resourceVersion) > int(first.metadata.resourceVersion)
    assert third.metadata.generation == 1  # metadata-only change

    changed = _deployment("web", ns, image="nginx:2")
    changed["metadata"]["labels"] = {"team": "a"}
    fourth = res.server_side_apply(body=changed, field_manager="deployer")
    assert fourth.metadata.generation == 2
    assert fourth.spec.template.spec.containers[0].image == "nginx:2"


def test_apply_status_codes_and_yaml_body(srv: LoopThread[FleetApiServer], ns: str) -> None:
    path = f"/clusters/alpha/api/v1/namespaces/{ns}/configmaps/y"
    yaml_body = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\ndata:\n  k: v\n"
    code, _, body = _raw(srv, "PATCH", path, yaml_body, "application/apply-patch+yaml")
    assert (code, json.loads(body)["reason"]) == (400, "BadRequest")  # no fieldManager
    code, _, body = _raw(
        srv, "PATCH", path + "?fieldManager=yaml", yaml_body, "application/apply-patch+yaml"
    )
    assert code == 201
    assert json.loads(body)["data"] == {"k": "v"}
    code, _, body = _raw(
        srv, "PATCH", path + "?fieldManager=yaml", yaml_body, "application/apply-patch+yaml"
    )
    assert code == 200


def test_apply_conflicts_and_force(dyn: DynamicClient, ns: str) -> None:
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    res.server_side_apply(body=_deployment("c", ns, replicas=2), field_manager="alice")
    with pytest.raises(ApiException) as exc:
        res.server_side_apply(body=_deployment("c", ns, replicas=5), field_manager="bob")
    status = _status(exc.value)
    assert (exc.value.status, status["reason"]) == (409, "Conflict")
    assert status["details"]["causes"] == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "alice"',
            "field": ".spec.replicas",
        }
    ]
    # Same value: shared ownership, no conflict.
    res.server_side_apply(body=_deployment("c", ns, replicas=2), field_manager="carol")

    forced = res.server_side_apply(
        body=_deployment("c", ns, replicas=5), field_manager="bob", force_conflicts=True
    )
    assert forced.spec.replicas == 5
    owners = {
        e["manager"]: e["fieldsV1"].get("f:spec", {})
        for e in forced.to_dict()["metadata"]["managedFields"]
    }
    assert "f:replicas" in owners["bob"]
    assert "f:replicas" not in owners["alice"]
    assert "f:replicas" not in owners["carol"]


def test_apply_removes_dropped_fields_unless_owned_elsewhere(dyn: DynamicClient, ns: str) -> None:
    res = dyn.resources.get(api_version="v1", kind="ConfigMap")

    def cm(data: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "d", "namespace": ns},
            "data": data,
        }

    res.server_side_apply(body=cm({"a": "1", "b": "2", "c": "3"}), field_manager="one")
    res.server_side_apply(body=cm({"c": "3"}), field_manager="two")
    after = res.server_side_apply(body=cm({"a": "1"}), field_manager="one")
    assert after.to_dict()["data"] == {"a": "1", "c": "3"}  # b dropped; c is owned by "two"
    after = res.server_side_apply(body=cm({}), field_manager="one")
    assert after.to_dict()["data"] == {"c": "3"}


def test_apply_merges_list_maps_by_key(dyn: DynamicClient, ns: str) -> None:
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    main = _deployment("lm", ns)
    main["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    main["spec"]["template"]["spec"]["containers"][0]["args"] = ["--x"]
    res.server_side_apply(body=main, field_manager="main")
    side = _deployment("lm", ns)
    side["spec"]["template"]["spec"]["containers"] = [
        {"name": "app", "env": [{"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "proxy", "ports": [{"containerPort": 8000}]},
    ]
    merged = res.server_side_apply(body=side, field_manager="side")
    containers = {c.name: c for c in merged.spec.template.spec.containers}
    assert set(containers) == {"app", "sidecar"}
    assert [e.name for e in containers["app"].env] == ["A", "B"]
    assert containers["app"].image == "nginx:1"
    assert containers["app"].args == ["--x"]
    # An atomic list is replaced wholesale by its owner.
    main["spec"]["template"]["spec"]["containers"][0]["args"] = ["--y", "--z"]
    replaced = res.server_side_apply(body=main, field_manager="main")
    app = next(c for c in replaced.spec.template.spec.containers if c.name == "app")
    assert app.args == ["--y", "--z"]
    # Dropping the sidecar from "side" removes the container "side" alone owned.
    side["spec"]["template"]["spec"]["containers"] = [
        {"name": "app", "env": [{"name": "B", "value": "2"}]}
    ]
    pruned = res.server_side_apply(body=side, field_manager="side")
    assert [c.name for c in pruned.spec.template.spec.containers] == ["app"]


# --------------------------------------------------------------------------- patches, scale


def test_patch_flavours_on_builtins(
    api: client.ApiClient, srv: LoopThread[FleetApiServer], ns: str
) -> None:
    apps = client.AppsV1Api(api)
    dep = _deployment("p", ns)
    dep["spec"]["template"]["spec"]["containers"].append({"name": "two", "image": "busybox"})
    apps.create_namespaced_deployment(ns, dep)
    # dict body on a typed built-in patch -> strategic merge: containers merge by name.
    patched = apps.patch_namespaced_deployment(
        "p",
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "two", "image": "busybox:2"}]}}}},
    )
    images = {c.name: c.image for c in patched.spec.template.spec.containers}
    assert images == {"app": "nginx:1", "two": "busybox:2"}
    assert patched.metadata.generation == 2
    # list body -> JSON patch.
    patched = apps.patch_namespaced_deployment(
        "p", ns, [{"op": "replace", "path": "/spec/replicas", "value": 4}]
    )
    assert patched.spec.replicas == 4
    scale = apps.read_namespaced_deployment_scale("p", ns)
    assert scale.spec.replicas == 4
    assert scale.status.selector == "app=p"
    apps.patch_namespaced_deployment_scale("p", ns, {"spec": {"replicas": 6}})
    assert apps.read_namespaced_deployment("p", ns).spec.replicas == 6
    path = f"/clusters/alpha/apis/apps/v1/namespaces/{ns}/deployments/p"
    code, _, body = _raw(
        srv, "PATCH", path, b'{"spec":{"replicas":1}}', "application/merge-patch+json"
    )
    assert code == 200
    assert json.loads(body)["spec"]["replicas"] == 1


# --------------------------------------------------------------------------- reads


def test_list_label_selectors_each_operator(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    labels = {
        "a": {"tier": "web", "env": "prod"},
        "b": {"tier": "db", "env": "prod"},
        "c": {"tier": "web"},
        "d": {},
    }
    for name, lab in labels.items():
        core.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": lab}})

    def names(selector: str) -> list[str]:
        return [
            i.metadata.name
            for i in core.list_namespaced_config_map(ns, label_selector=selector).items
        ]

    assert names("tier=web") == ["a", "c"]
    assert names("tier==db") == ["b"]
    assert names("tier!=web") == ["b", "d"]
    assert names("tier in (db,cache)") == ["b"]
    assert names("tier notin (web)") == ["b", "d"]
    assert names("env") == ["a", "b"]
    assert names("!env") == ["c", "d"]
    assert names("tier=web,env=prod") == ["a"]
    listed = core.list_namespaced_config_map(ns, field_selector="metadata.name=c")
    assert [i.metadata.name for i in listed.items] == ["c"]
    listed = core.list_namespaced_config_map(ns, field_selector="metadata.name!=c")
    assert [i.metadata.name for i in listed.items] == ["a", "b", "d"]


def test_list_pagination_kind_and_all_namespaces(
    api: client.ApiClient, srv: LoopThread[FleetApiServer], ns: str
) -> None:
    core = client.CoreV1Api(api)
    for i in range(5):
        core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": f"p{i}"},
                "spec": {
                    "nodeName": "n1" if i % 2 else "n2",
                    "containers": [{"name": "c", "image": "x"}],
                },
            },
        )
    page = core.list_namespaced_pod(ns, limit=2)
    seen = [p.metadata.name for p in page.items]
    assert page.metadata.remaining_item_count == 3
    while page.metadata._continue:
        page = core.list_namespaced_pod(ns, limit=2, _continue=page.metadata._continue)
        seen += [p.metadata.name for p in page.items]
    assert seen == ["p0", "p1", "p2", "p3", "p4"]
    on_n1 = core.list_namespaced_pod(ns, field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in on_n1.items] == ["p1", "p3"]
    pending = core.list_pod_for_all_namespaces(
        field_selector=f"metadata.namespace={ns},status.phase=Pending"
    )
    assert len(pending.items) == 5
    _, _, body = _raw(srv, "GET", "/clusters/alpha/api/v1/pods")
    doc = json.loads(body)
    assert doc["kind"] == "PodList"
    assert doc["metadata"]["resourceVersion"]
    assert {p["metadata"]["namespace"] for p in doc["items"]} >= {ns}


# --------------------------------------------------------------------------- watch


def _watch_thread(
    fn: Any, out: queue.Queue[dict[str, Any]], stop: threading.Event, **kwargs: Any
) -> threading.Thread:
    def run() -> None:
        w = watch.Watch()
        for ev in w.stream(fn, **kwargs):
            out.put(ev)
            if stop.is_set():
                w.stop()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_watch_sees_added_modified_deleted_in_order(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    events: queue.Queue[dict[str, Any]] = queue.Queue()
    stop = threading.Event()
    t = _watch_thread(
        core.list_namespaced_config_map,
        events,
        stop,
        namespace=ns,
        resource_version=rv,
        timeout_seconds=5,
    )
    core.create_namespaced_config_map(ns, {"metadata": {"name": "w"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("w", ns, {"data": {"a": "2"}})
    core.delete_namespaced_config_map("w", ns)
    got = [events.get(timeout=TIMEOUT) for _ in range(3)]
    stop.set()
    core.create_namespaced_config_map(ns, {"metadata": {"name": "wake"}})  # lets the thread exit
    t.join(TIMEOUT)
    assert [e["type"] for e in got] == ["ADDED", "MODIFIED", "DELETED"]
    assert got[1]["object"].data == {"a": "2"}
    rvs = [int(e["object"].metadata.resource_version) for e in got]
    assert rvs == sorted(rvs)
    assert len(set(rvs)) == 3  # DELETED carries a new resourceVersion


def test_identical_reapply_emits_no_watch_event(
    api: client.ApiClient, dyn: DynamicClient, ns: str
) -> None:
    res = dyn.resources.get(api_version="v1", kind="ConfigMap")
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "same", "namespace": ns},
        "data": {"k": "v"},
    }
    first = res.server_side_apply(body=body, field_manager="m")
    res.server_side_apply(body=body, field_manager="m")
    marker = client.CoreV1Api(api).create_namespaced_config_map(
        ns, {"metadata": {"name": "marker"}}
    )
    w = watch.Watch()
    seen = []
    for ev in w.stream(
        client.CoreV1Api(api).list_namespaced_config_map,
        namespace=ns,
        resource_version=first.metadata.resourceVersion,
        timeout_seconds=5,
    ):
        seen.append((ev["type"], ev["object"].metadata.name))
        if ev["object"].metadata.name == marker.metadata.name:
            w.stop()
    assert seen == [("ADDED", "marker")]


def test_watch_label_selector_transitions(
    api: client.ApiClient, srv: LoopThread[FleetApiServer], ns: str
) -> None:
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, {"metadata": {"name": "s", "labels": {"pick": "yes"}}})
    core.patch_namespaced_config_map("s", ns, {"metadata": {"labels": {"pick": "no"}}})
    core.patch_namespaced_config_map("s", ns, {"metadata": {"labels": {"pick": "yes"}}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": "end", "labels": {"pick": "yes"}}})
    core.delete_namespaced_config_map("end", ns)
    path = (
        f"/clusters/alpha/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}"
        "&labelSelector=pick%3Dyes"
    )
    frames = _frames(srv, path, until="DELETED")
    frames += _frames(
        srv,
        path.replace(f"={rv}", f"={frames[-1]['object']['metadata']['resourceVersion']}"),
        until="DELETED",
    )
    seen = [(f["type"], f["object"]["metadata"]["name"]) for f in frames]
    assert seen == [
        ("ADDED", "s"),
        ("DELETED", "s"),  # relabelled out of the selector
        ("ADDED", "s"),  # and back in
        ("ADDED", "end"),
        ("DELETED", "end"),
    ]


def test_watch_from_expired_resource_version(
    srv: LoopThread[FleetApiServer], tmp_path: Path
) -> None:
    srv.call(srv.target.add_cluster, "tiny", history_limit=3)
    core = client.CoreV1Api(_api_client(srv, "tiny", tmp_path))
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "h0"}})
    for i in range(1, 5):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"h{i}"}})
    rv = first.metadata.resource_version
    path = f"/clusters/tiny/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
    code, _, body = _raw(srv, "GET", path)
    frames = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert code == 200
    assert [f["type"] for f in frames] == ["ERROR"]
    assert (frames[0]["object"]["code"], frames[0]["object"]["reason"]) == (410, "Expired")
    w = watch.Watch()
    with pytest.raises(ApiException) as exc:
        for _ in w.stream(
            core.list_namespaced_config_map,
            namespace="default",
            resource_version=rv,
            timeout_seconds=1,
        ):
            pass
    assert exc.value.status == 410


def test_watch_bookmarks(srv: LoopThread[FleetApiServer], ns: str) -> None:
    path = f"/clusters/alpha/api/v1/namespaces/{ns}/pods?watch=true&allowWatchBookmarks=true"
    frames = _frames(srv, path, until="BOOKMARK")
    assert [f["type"] for f in frames] == ["BOOKMARK"]
    assert frames[0]["object"]["kind"] == "Pod"
    assert int(frames[0]["object"]["metadata"]["resourceVersion"]) > 0
    initial = _frames(
        srv,
        f"/clusters/alpha/api/v1/namespaces/{ns}/pods?watch=true&allowWatchBookmarks=true"
        "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        until="BOOKMARK",
    )
    annotations = initial[-1]["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


# --------------------------------------------------------------------------- status subresource


def test_status_subresource_separation(api: client.ApiClient, ns: str) -> None:
    custom = client.CustomObjectsApi(api)
    args = ("leaderworkerset.x-k8s.io", "v1", ns, "leaderworkersets")
    body = _lws("st", ns)
    body["status"] = {"readyReplicas": 9}
    created = custom.create_namespaced_custom_object(*args, body)
    assert "status" not in created
    after = custom.patch_namespaced_custom_object_status(
        *args, "st", {"status": {"readyReplicas": 1}, "spec": {"replicas": 7}}
    )
    assert after["status"] == {"readyReplicas": 1}
    assert after["spec"]["replicas"] == 1
    assert after["metadata"]["generation"] == 1
    main = custom.patch_namespaced_custom_object(
        *args, "st", {"status": {"readyReplicas": 5}, "spec": {"replicas": 3}}
    )
    assert main["status"] == {"readyReplicas": 1}
    assert main["spec"]["replicas"] == 3
    assert main["metadata"]["generation"] == 2
    scale = custom.get_namespaced_custom_object_scale(*args, "st")
    assert scale["spec"]["replicas"] == 3


# --------------------------------------------------------------------------- deletion


def test_finalizers_hold_deletion(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}
    )
    core.delete_namespaced_config_map("f", ns)
    held = core.read_namespaced_config_map("f", ns)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == ["example.com/hold"]
    core.patch_namespaced_config_map("f", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("f", ns)
    assert exc.value.status == 404


def _owned_cm(name: str, owner: Any, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
            }
        ],
    }
    if finalizers:
        meta["finalizers"] = finalizers
    return {"metadata": meta}


def test_owner_reference_garbage_collection(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)

    def cms() -> set[str]:
        return {c.metadata.name for c in core.list_namespaced_config_map(ns).items}

    owner = apps.create_namespaced_deployment(ns, _deployment("bg", ns))
    core.create_namespaced_config_map(ns, _owned_cm("bg-dep", owner))
    apps.delete_namespaced_deployment("bg", ns, propagation_policy="Background")
    assert "bg-dep" not in cms()

    owner = apps.create_namespaced_deployment(ns, _deployment("orph", ns))
    core.create_namespaced_config_map(ns, _owned_cm("orph-dep", owner))
    apps.delete_namespaced_deployment("orph", ns, propagation_policy="Orphan")
    assert core.read_namespaced_config_map("orph-dep", ns).metadata.owner_references is None

    owner = apps.create_namespaced_deployment(ns, _deployment("fg", ns))
    core.create_namespaced_config_map(ns, _owned_cm("fg-dep", owner, ["example.com/hold"]))
    apps.delete_namespaced_deployment("fg", ns, propagation_policy="Foreground")
    waiting = apps.read_namespaced_deployment("fg", ns)
    assert "foregroundDeletion" in waiting.metadata.finalizers
    assert waiting.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("fg-dep", ns, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as exc:
        apps.read_namespaced_deployment("fg", ns)
    assert exc.value.status == 404
    assert "fg-dep" not in cms()


def test_delete_collection_and_namespace_termination(api: client.ApiClient, ns: str) -> None:
    core = client.CoreV1Api(api)
    for name in ("x1", "x2", "y1"):
        core.create_namespaced_config_map(
            ns, {"metadata": {"name": name, "labels": {"g": name[0]}}}
        )
    core.delete_collection_namespaced_config_map(ns, label_selector="g=x")
    assert [c.metadata.name for c in core.list_namespaced_config_map(ns).items] == ["y1"]
    core.delete_namespace(ns)
    with pytest.raises(ApiException) as exc:
        core.read_namespace(ns)
    assert exc.value.status == 404
    assert core.list_namespaced_config_map(ns).items == []


# --------------------------------------------------------------------------- many clusters


def test_multi_cluster_isolation(
    api: client.ApiClient, srv: LoopThread[FleetApiServer], tmp_path: Path
) -> None:
    beta = _api_client(srv, "beta", tmp_path)
    a_core, b_core = client.CoreV1Api(api), client.CoreV1Api(beta)
    a_core.create_namespaced_config_map(
        "default", {"metadata": {"name": "iso"}, "data": {"who": "alpha"}}
    )
    with pytest.raises(ApiException) as exc:
        b_core.read_namespaced_config_map("iso", "default")
    assert exc.value.status == 404
    b_created = b_core.create_namespaced_config_map(
        "default", {"metadata": {"name": "iso"}, "data": {"who": "beta"}}
    )
    assert a_core.read_namespaced_config_map("iso", "default").data == {"who": "alpha"}
    a_rv = int(a_core.list_namespaced_config_map("default").metadata.resource_version)
    b_rv = int(b_core.list_namespaced_config_map("default").metadata.resource_version)
    assert b_rv == int(b_created.metadata.resource_version)
    assert a_rv != b_rv
    _, _, body = _raw(srv, "GET", "/_admin/clusters")
    assert {c["name"] for c in json.loads(body)["clusters"]} >= {"alpha", "beta"}
    code, _, _ = _raw(srv, "GET", "/clusters/gamma/api/v1/namespaces")
    assert code == 404


def test_store_api_shares_state_with_http(
    api: client.ApiClient, srv: LoopThread[FleetApiServer], ns: str
) -> None:
    store = srv.call(srv.target.store, "alpha")
    created = srv.run(
        store.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "sim", "namespace": ns},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
        )
    )
    srv.run(store.patch_status("v1", "Pod", "sim", {"phase": "Running"}, namespace=ns))
    pod = client.CoreV1Api(api).read_namespaced_pod("sim", ns)
    assert pod.status.phase == "Running"
    assert int(pod.metadata.resource_version) > int(created["metadata"]["resourceVersion"])
    assert pod.metadata.generation == 1
