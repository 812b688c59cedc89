"""The invalid-manifest corpus: one broken rule per case, each asserting the exact field path and
the reason a user would read.

One piece on purpose (past 500 lines): it is a table of cases, read top to bottom against the
valid base documents at its head; split by kind, the cases would lose the bases they mutate.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError

Doc = dict[str, Any]


def deployment() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen", "namespace": "ml"},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"model": "qwen"}},
                "spec": {
                    "engines": [
                        {
                            "name": "vllm",
                            "members": [
                                {
                                    "role": "Standalone",
                                    "nodeSelector": {
                                        "devices": [
                                            {
                                                "name": "gpu",
                                                "count": 1,
                                                "selectors": [
                                                    {"cel": 'device.driver == "gpu.nvidia.com"'}
                                                ],
                                            }
                                        ]
                                    },
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {"name": "engine", "image": "vllm/vllm-openai"}
                                            ]
                                        }
                                    },
                                }
                            ],
                        }
                    ]
                },
            },
        },
    }


def gang(doc: Doc) -> Doc:
    engine = doc["spec"]["template"]["spec"]["engines"][0]
    leader = engine["members"][0]
    leader["role"] = "Leader"
    worker = copy.deepcopy(leader)
    worker["role"] = "Worker"
    worker["worker"] = {"nodes": 1}
    engine["members"] = [leader, worker]
    return doc


def pd(doc: Doc) -> Doc:
    spec = doc["spec"]["template"]["spec"]
    prefill = spec["engines"][0]
    prefill["phase"] = "Prefill"
    decode = copy.deepcopy(prefill)
    decode["name"] = "decode"
    decode["phase"] = "Decode"
    decode["members"][0]["template"]["spec"]["containers"][0]["args"] = ["--port=8001"]
    spec["engines"] = [prefill, decode]
    spec["serving"] = {"mode": "PrefillDecode"}
    return doc


def inference_class() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceClass",
        "metadata": {"name": "h100"},
        "spec": {
            "devices": [
                {
                    "name": "gpu",
                    "driver": "gpu.nvidia.com",
                    "deviceClassName": "gpu.nvidia.com",
                    "count": 8,
                    "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                    "capacity": {"memory": {"value": "81559Mi"}},
                }
            ]
        },
    }


def cluster() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "east"},
        "spec": {
            "cluster": {"source": "Existing"},
            "nodePools": [{"name": "gpu-h100", "className": "h100", "nodeCount": 2}],
        },
    }


def service() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": "qwen", "namespace": "ml"},
        "spec": {"endpoints": [{"selector": {"matchLabels": {"model": "qwen"}}}]},
    }


def endpoint() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": "together", "namespace": "ml"},
        "spec": {"url": "https://api.together.xyz/", "rewritePath": "/"},
    }


def replica() -> Doc:
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": "qwen-abcde", "namespace": "ml"},
        "spec": {
            "clusterName": "east",
            "deployment": "qwen",
            "engines": [
                {
                    "name": "vllm",
                    "members": [
                        {
                            "nodePoolName": "gpu-h100",
                            "deviceRequests": [
                                {
                                    "name": "gpu",
                                    "deviceClassName": "gpu.nvidia.com",
                                    "count": 1,
                                    "selectors": [{"cel": "true"}],
                                }
                            ],
                            "template": {
                                "spec": {"containers": [{"name": "engine", "image": "x"}]}
                            },
                        }
                    ],
                }
            ],
        },
    }


ENGINE = "spec.template.spec.engines[0]"
MEMBER = f"{ENGINE}.members[0]"
DEVICE = f"{MEMBER}.nodeSelector.devices[0]"


def _engine(d: Doc) -> Doc:
    engine: Doc = d["spec"]["template"]["spec"]["engines"][0]
    return engine


def _member(d: Doc, i: int = 0) -> Doc:
    member: Doc = _engine(d)["members"][i]
    return member


def _set(path: list[str | int], value: Any) -> Callable[[Doc], Doc]:
    def apply(d: Doc) -> Doc:
        target: Any = d
        for p in path[:-1]:
            target = target[p]
        target[path[-1]] = value
        return d

    return apply


def _del(path: list[str | int]) -> Callable[[Doc], Doc]:
    def apply(d: Doc) -> Doc:
        target: Any = d
        for p in path[:-1]:
            target = target[p]
        del target[path[-1]]
        return d

    return apply


TPL = ["spec", "template", "spec"]
M0 = [*TPL, "engines", 0, "members", 0]
DEV0 = [*M0, "nodeSelector", "devices", 0]
DECODE_ARGS: list[str | int] = [*TPL, "engines", 1, "members", 0, "template", "spec"]
DECODE_ARGS += ["containers", 0, "args"]


def _twice(key: str) -> Callable[[Doc], Doc]:
    def apply(d: Doc) -> Doc:
        items = d["spec"][key] if key == "nodePools" else d["spec"]["devices"]
        items.append(copy.deepcopy(items[0]))
        return d

    return apply


def _standalone_plus_worker(d: Doc) -> Doc:
    w = copy.deepcopy(_member(d))
    w["role"] = "Worker"
    _engine(d)["members"].append(w)
    return d


def _two_leaders(d: Doc) -> Doc:
    gang(d)
    _member(d, 1)["role"] = "Leader"
    del _member(d, 1)["worker"]
    return d


def _no_selector_anywhere(d: Doc) -> Doc:
    del _member(d)["nodeSelector"]
    return d


def _dup_engine(d: Doc) -> Doc:
    engines = d["spec"]["template"]["spec"]["engines"]
    engines.append(copy.deepcopy(engines[0]))
    return d


def _pd_two_prefill(d: Doc) -> Doc:
    pd(d)
    d["spec"]["template"]["spec"]["engines"][1]["phase"] = "Prefill"
    return d


def _pd_one_engine(d: Doc) -> Doc:
    pd(d)
    d["spec"]["template"]["spec"]["engines"].pop()
    return d


def _dup_device(d: Doc) -> Doc:
    devices = _member(d)["nodeSelector"]["devices"]
    devices.append(copy.deepcopy(devices[0]))
    return d


def _two_containers(d: Doc) -> Doc:
    containers = _member(d)["template"]["spec"]["containers"]
    containers.append({"name": "sidecar", "image": "x"})
    return d


def _dup_taint(d: Doc) -> Doc:
    d["spec"]["taints"] = [
        {"key": "a", "value": "1", "effect": "NoSchedule"},
        {"key": "a", "value": "2", "effect": "NoSchedule"},
    ]
    return d


def _dup_pool(d: Doc) -> Doc:
    d["spec"]["nodePools"].append(copy.deepcopy(d["spec"]["nodePools"][0]))
    return d


def _dup_class_device(d: Doc) -> Doc:
    d["spec"]["devices"].append(copy.deepcopy(d["spec"]["devices"][0]))
    return d


def _env_both(d: Doc) -> Doc:
    c = _member(d)["template"]["spec"]["containers"][0]
    c["env"] = [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]
    return d


def _env_two_sources(d: Doc) -> Doc:
    c = _member(d)["template"]["spec"]["containers"][0]
    c["env"] = [
        {
            "name": "A",
            "valueFrom": {
                "secretKeyRef": {"name": "s", "key": "k"},
                "configMapKeyRef": {"name": "c", "key": "k"},
            },
        }
    ]
    return d


Case = tuple[str, Callable[[], Doc], Callable[[Doc], Doc], str, str]

CASES: list[Case] = [
    # --- document shape
    ("missing apiVersion", deployment, _del(["apiVersion"]), "apiVersion", "required field"),
    (
        "foreign apiVersion",
        deployment,
        _set(["apiVersion"], "apps/v1"),
        "apiVersion",
        "unsupported apiVersion",
    ),
    ("unknown kind", deployment, _set(["kind"], "ModelDeploy"), "kind", "unknown kind"),
    ("missing name", deployment, _del(["metadata", "name"]), "metadata.name", "required field"),
    (
        "uppercase name",
        deployment,
        _set(["metadata", "name"], "Qwen"),
        "metadata.name",
        "lower case alphanumeric",
    ),
    (
        "name too long",
        deployment,
        _set(["metadata", "name"], "a" * 64),
        "metadata.name",
        "at most 63 characters",
    ),
    (
        "bad namespace",
        deployment,
        _set(["metadata", "namespace"], "ml_team"),
        "metadata.namespace",
        "lower case alphanumeric",
    ),
    (
        "unknown top-level field",
        deployment,
        _set(["spec", "replica"], 1),
        "spec.replica",
        "unknown field",
    ),
    (
        "unknown container field (typo)",
        deployment,
        _set([*M0, "template", "spec", "containers", 0, "imag"], "x"),
        f"{MEMBER}.template.spec.containers[0].imag",
        "unknown field",
    ),
    (
        "ports are not accepted",
        deployment,
        _set([*M0, "template", "spec", "containers", 0, "ports"], [{"containerPort": 1}]),
        f"{MEMBER}.template.spec.containers[0].ports",
        "unknown field",
    ),
    # --- replicas and strategy
    (
        "replicas above 10",
        deployment,
        _set(["spec", "replicas"], 11),
        "spec.replicas",
        "less than or equal to 10",
    ),
    (
        "negative replicas",
        deployment,
        _set(["spec", "replicas"], -1),
        "spec.replicas",
        "greater than or equal to 0",
    ),
    (
        "replicas not an int",
        deployment,
        _set(["spec", "replicas"], "two"),
        "spec.replicas",
        "valid integer",
    ),
    (
        "strategy both zero",
        deployment,
        _set(["spec", "strategy"], {"maxSurge": 0, "maxUnavailable": 0}),
        "spec.strategy",
        "must not both be 0",
    ),
    (
        "progress deadline too short",
        deployment,
        _set(["spec", "strategy"], {"progressDeadlineSeconds": 1}),
        "spec.strategy.progressDeadlineSeconds",
        "greater than or equal to 10",
    ),
    # --- labels
    (
        "reserved template label",
        deployment,
        _set(["spec", "template", "metadata", "labels"], {"modelfleet.dev/x": "y"}),
        "spec.template.metadata.labels.modelfleet.dev/x",
        "reserved prefix",
    ),
    (
        "reserved modelplane label",
        deployment,
        _set(["spec", "template", "metadata", "labels"], {"modelplane.ai/deployment": "y"}),
        "spec.template.metadata.labels.modelplane.ai/deployment",
        "reserved prefix",
    ),
    (
        "bad label key",
        deployment,
        _set(["spec", "template", "metadata", "labels"], {"-bad": "y"}),
        "spec.template.metadata.labels.-bad",
        "invalid label key",
    ),
    (
        "bad label value",
        deployment,
        _set(["spec", "template", "metadata", "labels"], {"ok": "no spaces"}),
        "spec.template.metadata.labels.ok",
        "invalid label value",
    ),
    (
        "label value too long",
        deployment,
        _set(["spec", "template", "metadata", "labels"], {"ok": "a" * 64}),
        "spec.template.metadata.labels.ok",
        "at most 63 characters",
    ),
    (
        "reserved member label",
        deployment,
        _set([*M0, "template", "metadata"], {"labels": {"modelplane.ai/pool": "x"}}),
        f"{MEMBER}.template.metadata.labels.modelplane.ai/pool",
        "reserved prefix",
    ),
    (
        "annotation value too long",
        deployment,
        _set([*M0, "template", "metadata"], {"annotations": {"a": "x" * 8193}}),
        f"{MEMBER}.template.metadata.annotations.a",
        "at most 8192",
    ),
    # --- tolerations
    (
        "Equal toleration without key",
        deployment,
        _set([*TPL, "tolerations"], [{"operator": "Equal", "value": "x"}]),
        "spec.template.spec.tolerations[0].key",
        "requires a non-empty key",
    ),
    (
        "Exists toleration with value",
        deployment,
        _set([*TPL, "tolerations"], [{"key": "k", "operator": "Exists", "value": "x"}]),
        "spec.template.spec.tolerations[0].value",
        "must not set a value",
    ),
    (
        "toleration bad effect",
        deployment,
        _set([*TPL, "tolerations"], [{"key": "k", "effect": "PreferNoSchedule"}]),
        "spec.template.spec.tolerations[0].effect",
        "NoSchedule",
    ),
    # --- engines
    (
        "no engines",
        deployment,
        _set([*TPL, "engines"], []),
        "spec.template.spec.engines",
        "at least 1 item",
    ),
    (
        "duplicate engine names",
        deployment,
        _dup_engine,
        "spec.template.spec.engines[1]",
        "duplicate engine name",
    ),
    (
        "copies above 64",
        deployment,
        _set([*TPL, "engines", 0, "copies"], 65),
        f"{ENGINE}.copies",
        "less than or equal to 64",
    ),
    (
        "engine name not DNS",
        deployment,
        _set([*TPL, "engines", 0, "name"], "V_LLM"),
        f"{ENGINE}.name",
        "lower case alphanumeric",
    ),
    (
        "Standalone plus Worker",
        deployment,
        _standalone_plus_worker,
        f"{ENGINE}.members",
        "exactly one Standalone member",
    ),
    ("two Leaders", deployment, _two_leaders, f"{ENGINE}.members", "one Leader and one Worker"),
    (
        "three members",
        deployment,
        lambda d: (gang(d), _engine(d)["members"].append(copy.deepcopy(_member(d))), d)[-1],
        f"{ENGINE}.members",
        "at most 2 items",
    ),
    (
        "worker on a Standalone",
        deployment,
        _set([*M0, "worker"], {"nodes": 1}),
        f"{MEMBER}.worker",
        "only a Worker member may set worker",
    ),
    (
        "worker nodes zero",
        deployment,
        lambda d: (gang(d), _member(d, 1).__setitem__("worker", {"nodes": 0}), d)[-1],
        f"{ENGINE}.members[1].worker.nodes",
        "greater than or equal to 1",
    ),
    (
        "worker nodes above 63",
        deployment,
        lambda d: (gang(d), _member(d, 1).__setitem__("worker", {"nodes": 64}), d)[-1],
        f"{ENGINE}.members[1].worker.nodes",
        "less than or equal to 63",
    ),
    (
        "no member has a nodeSelector",
        deployment,
        _no_selector_anywhere,
        f"{ENGINE}.members",
        "at least one member must have a nodeSelector",
    ),
    ("unknown role", deployment, _set([*M0, "role"], "Follower"), f"{MEMBER}.role", "Standalone"),
    # --- devices and CEL
    (
        "device count zero",
        deployment,
        _set([*DEV0, "count"], 0),
        f"{DEVICE}.count",
        "greater than or equal to 1",
    ),
    (
        "no selectors",
        deployment,
        _set([*DEV0, "selectors"], []),
        f"{DEVICE}.selectors",
        "at least 1 item",
    ),
    (
        "empty cel",
        deployment,
        _set([*DEV0, "selectors", 0, "cel"], ""),
        f"{DEVICE}.selectors[0].cel",
        "at least 1 character",
    ),
    (
        "invalid CEL syntax",
        deployment,
        _set([*DEV0, "selectors", 0, "cel"], 'device.driver == "x" &&'),
        f"{DEVICE}.selectors[0].cel",
        "invalid CEL selector",
    ),
    (
        "duplicate device names",
        deployment,
        _dup_device,
        f"{MEMBER}.nodeSelector.devices[1]",
        "duplicate device name",
    ),
    (
        "selector item without cel",
        deployment,
        _set([*DEV0, "selectors", 0], {}),
        f"{DEVICE}.selectors[0].cel",
        "required field",
    ),
    # --- container
    (
        "container not named engine",
        deployment,
        _set([*M0, "template", "spec", "containers", 0, "name"], "vllm"),
        f"{MEMBER}.template.spec.containers[0].name",
        "must be named 'engine'",
    ),
    (
        "two containers",
        deployment,
        _two_containers,
        f"{MEMBER}.template.spec.containers",
        "at most 1 item",
    ),
    (
        "missing image",
        deployment,
        _del([*M0, "template", "spec", "containers", 0, "image"]),
        f"{MEMBER}.template.spec.containers[0].image",
        "required field",
    ),
    (
        "env value and valueFrom",
        deployment,
        _env_both,
        f"{MEMBER}.template.spec.containers[0].env[0]",
        "either value or valueFrom",
    ),
    (
        "env two sources",
        deployment,
        _env_two_sources,
        f"{MEMBER}.template.spec.containers[0].env[0].valueFrom",
        "exactly one of",
    ),
    # --- serving modes
    (
        "phase under Unified",
        deployment,
        _set([*TPL, "engines", 0, "phase"], "Prefill"),
        f"{ENGINE}.phase",
        "only allowed when serving.mode is PrefillDecode",
    ),
    (
        "PD with two Prefill",
        deployment,
        _pd_two_prefill,
        "spec.template.spec.engines",
        "one with phase Prefill and one with phase Decode",
    ),
    (
        "PD with one engine",
        deployment,
        _pd_one_engine,
        "spec.template.spec.engines",
        "exactly 2 engines",
    ),
    (
        "PD decode without --port",
        deployment,
        lambda d: _set(DECODE_ARGS, [])(pd(d)),
        "spec.template.spec.engines[1].members[0].template.spec.containers[0]",
        "decode engine must listen on a --port other than 8000",
    ),
    (
        "PD decode on the sidecar's port",
        deployment,
        lambda d: _set(DECODE_ARGS, ["--port", "8000"])(pd(d)),
        "spec.template.spec.engines[1].members[0].template.spec.containers[0]",
        "the P/D sidecar owns",
    ),
    (
        "unknown serving mode",
        deployment,
        _set([*TPL, "serving"], {"mode": "Split"}),
        "spec.template.spec.serving.mode",
        "Unified",
    ),
    # --- InferenceClass
    (
        "class in a namespace",
        inference_class,
        _set(["metadata", "namespace"], "x"),
        "metadata.namespace",
        "fleet-scoped",
    ),
    (
        "DRA device without class",
        inference_class,
        _del(["spec", "devices", 0, "deviceClassName"]),
        "spec.devices[0].deviceClassName",
        "required when claim is DRA",
    ),
    (
        "attribute with two types",
        inference_class,
        _set(["spec", "devices", 0, "attributes"], {"x": {"string": "a", "int": 1}}),
        "spec.devices[0].attributes.x",
        "exactly one of string, version, bool or int",
    ),
    (
        "attribute with no type",
        inference_class,
        _set(["spec", "devices", 0, "attributes"], {"x": {}}),
        "spec.devices[0].attributes.x",
        "exactly one of",
    ),
    (
        "version attribute not semver",
        inference_class,
        _set(["spec", "devices", 0, "attributes"], {"v": {"version": "1.2"}}),
        "spec.devices[0].attributes.v.version",
        "not a strict semantic version",
    ),
    (
        "bad attribute name",
        inference_class,
        _set(["spec", "devices", 0, "attributes"], {"product-name": {"string": "x"}}),
        "spec.devices[0].attributes.product-name",
        "C identifier",
    ),
    (
        "invalid capacity quantity",
        inference_class,
        _set(["spec", "devices", 0, "capacity"], {"memory": {"value": "80 Gi"}}),
        "spec.devices[0].capacity.memory.value",
        "invalid quantity",
    ),
    (
        "duplicate class devices",
        inference_class,
        _dup_class_device,
        "spec.devices[1]",
        "duplicate device name",
    ),
    (
        "device count above 64",
        inference_class,
        _set(["spec", "devices", 0, "count"], 65),
        "spec.devices[0].count",
        "less than or equal to 64",
    ),
    (
        "provisioning without its block",
        inference_class,
        _set(["spec", "provisioning"], {"provider": "GKE"}),
        "spec.provisioning.gke",
        "required when provider is GKE",
    ),
    (
        "provisioning with the wrong block",
        inference_class,
        _set(
            ["spec", "provisioning"],
            {
                "provider": "EKS",
                "eks": {"instanceType": "p5.48xlarge"},
                "gke": {"machineType": "a3", "accelerator": {"type": "h100", "count": 8}},
            },
        ),
        "spec.provisioning.gke",
        "must not be set when provider is EKS",
    ),
    (
        "unsupported provider",
        inference_class,
        _set(["spec", "provisioning"], {"provider": "Lambda"}),
        "spec.provisioning.provider",
        "GKE",
    ),
    (
        "gke disk too small",
        inference_class,
        _set(
            ["spec", "provisioning"],
            {
                "provider": "GKE",
                "gke": {
                    "machineType": "a3",
                    "diskSizeGb": 5,
                    "accelerator": {"type": "h100", "count": 8},
                },
            },
        ),
        "spec.provisioning.gke.diskSizeGb",
        "greater than or equal to 10",
    ),
    # --- InferenceCluster
    (
        "GKE cluster without gke block",
        cluster,
        _set(["spec", "cluster"], {"source": "GKE"}),
        "spec.cluster.gke",
        "required when source is GKE",
    ),
    (
        "existing block on EKS",
        cluster,
        _set(
            ["spec", "cluster"], {"source": "EKS", "eks": {"region": "us-east-2"}, "existing": {}}
        ),
        "spec.cluster.existing",
        "must not be set when source is EKS",
    ),
    (
        "unknown source",
        cluster,
        _set(["spec", "cluster", "source"], "Lambda"),
        "spec.cluster.source",
        "Existing",
    ),
    (
        "no node pools",
        cluster,
        _set(["spec", "nodePools"], []),
        "spec.nodePools",
        "at least 1 item",
    ),
    ("duplicate pools", cluster, _dup_pool, "spec.nodePools[1]", "duplicate node pool name"),
    (
        "pool name too long",
        cluster,
        _set(["spec", "nodePools", 0, "name"], "p" * 41),
        "spec.nodePools[0].name",
        "at most 40 characters",
    ),
    (
        "min above max",
        cluster,
        _set(
            ["spec", "nodePools", 0],
            {"name": "p", "className": "c", "minNodeCount": 3, "maxNodeCount": 2},
        ),
        "spec.nodePools[0].minNodeCount",
        "must not exceed maxNodeCount",
    ),
    (
        "negative node count",
        cluster,
        _set(["spec", "nodePools", 0, "nodeCount"], -1),
        "spec.nodePools[0].nodeCount",
        "greater than or equal to 0",
    ),
    (
        "provisioned pool without zones",
        cluster,
        _set(["spec", "cluster"], {"source": "EKS", "eks": {"region": "us-east-2"}}),
        "spec.nodePools[0].zones",
        "required for pools that EKS provisions",
    ),
    (
        "capacity block off EKS",
        cluster,
        _set(["spec", "nodePools", 0, "capacityBlock"], {"capacityReservationId": "cr-0abc"}),
        "spec.nodePools[0].capacityBlock",
        "only on EKS",
    ),
    (
        "capacity block bad id",
        cluster,
        _set(["spec", "nodePools", 0, "capacityBlock"], {"capacityReservationId": "res-1"}),
        "spec.nodePools[0].capacityBlock.capacityReservationId",
        "pattern",
    ),
    (
        "infiniband block on EFA",
        cluster,
        _set(["spec", "nodePools", 0, "fabric"], {"type": "EFA", "infiniband": {"fabric": "x"}}),
        "spec.nodePools[0].fabric.infiniband",
        "only allowed when fabric type is InfiniBand",
    ),
    ("duplicate taints", cluster, _dup_taint, "spec.taints[1]", "duplicate taint"),
    (
        "taint without effect",
        cluster,
        _set(["spec", "taints"], [{"key": "a"}]),
        "spec.taints[0].effect",
        "required field",
    ),
    # --- ModelService / ModelEndpoint / ModelReplica
    (
        "service without endpoints",
        service,
        _set(["spec", "endpoints"], []),
        "spec.endpoints",
        "at least 1 item",
    ),
    (
        "service weight zero",
        service,
        _set(["spec", "endpoints", 0, "weight"], 0),
        "spec.endpoints[0].weight",
        "greater than or equal to 1",
    ),
    (
        "service weight above 1e6",
        service,
        _set(["spec", "endpoints", 0, "weight"], 1_000_001),
        "spec.endpoints[0].weight",
        "less than or equal to 1000000",
    ),
    (
        "service empty selector",
        service,
        _set(["spec", "endpoints", 0, "selector"], {"matchLabels": {}}),
        "spec.endpoints[0].selector.matchLabels",
        "at least 1 item",
    ),
    (
        "endpoint URL without scheme",
        endpoint,
        _set(["spec", "url"], "api.together.xyz"),
        "spec.url",
        "http(s) URL",
    ),
    (
        "endpoint rewritePath relative",
        endpoint,
        _set(["spec", "rewritePath"], "v1"),
        "spec.rewritePath",
        "must start with '/'",
    ),
    (
        "replica without requests",
        replica,
        _del(["spec", "engines", 0, "members", 0, "deviceRequests"]),
        "spec.engines[0].members",
        "must carry deviceRequests",
    ),
    (
        "replica empty requests",
        replica,
        _set(["spec", "engines", 0, "members", 0, "deviceRequests"], []),
        "spec.engines[0].members[0].deviceRequests",
        "at least 1 item",
    ),
    (
        "replica without cluster",
        replica,
        _del(["spec", "clusterName"]),
        "spec.clusterName",
        "required field",
    ),
]


@pytest.mark.parametrize(
    ("base", "mutate", "field", "reason"),
    [pytest.param(b, m, f, r, id=i) for i, b, m, f, r in CASES],
)
def test_invalid_manifest_reports_field_and_reason(
    base: Callable[[], Doc], mutate: Callable[[Doc], Doc], field: str, reason: str
) -> None:
    valid = base()
    parse_resource(copy.deepcopy(valid))  # the base itself must be valid
    with pytest.raises(InvalidResourceError) as info:
        parse_resource(mutate(valid))
    found = {(e.field, e.reason) for e in info.value.errors}
    assert any(f == field and reason in r for f, r in found), found


def test_corpus_covers_at_least_forty_rules() -> None:
    assert len(CASES) >= 40
    assert len({c[0] for c in CASES}) == len(CASES)


def test_every_error_is_reported_at_once() -> None:
    doc = deployment()
    doc["spec"]["replicas"] = 11
    _member(doc)["template"]["spec"]["containers"][0]["imag"] = "typo"
    with pytest.raises(InvalidResourceError) as info:
        parse_resource(doc)
    fields = {e.field for e in info.value.errors}
    assert fields == {"spec.replicas", f"{MEMBER}.template.spec.containers[0].imag"}


def test_gang_and_pd_bases_are_valid() -> None:
    parse_resource(gang(deployment()))
    parse_resource(pd(deployment()))
    parse_resource(replica())
    parse_resource(service())
    parse_resource(endpoint())
    parse_resource(cluster())


def test_modelplane_api_version_is_accepted_unchanged() -> None:
    doc = deployment()
    doc["apiVersion"] = "modelplane.ai/v1alpha1"
    resource = parse_resource(doc)
    assert resource.api_version == "modelplane.ai/v1alpha1"
    assert resource.to_wire()["apiVersion"] == "modelplane.ai/v1alpha1"


def test_replicas_zero_is_allowed_and_strategy_defaults_do_not_deadlock() -> None:
    doc = deployment()
    doc["spec"]["replicas"] = 0
    resource = parse_resource(doc)
    strategy = resource.to_wire()["spec"]["strategy"]
    assert strategy["maxSurge"] == 1
    # Unset: 1 once there are two replicas or more; a single one surges or waits (issue 29).
    assert "maxUnavailable" not in strategy
    assert resource.spec.strategy.unavailable(2) == 1
    assert resource.spec.strategy.unavailable(1) == 0


def test_decode_port_in_a_shell_command_is_found() -> None:
    doc = pd(deployment())
    decode = doc["spec"]["template"]["spec"]["engines"][1]["members"][0]
    container = decode["template"]["spec"]["containers"][0]
    container["args"] = []
    container["command"] = ["sh", "-c", "vllm serve /models --port 8002 --block-size=64"]
    parse_resource(doc)
