"""OpenAPI documents of a simulated cluster: ``/openapi/v2`` (Swagger 2.0) and ``/openapi/v3``
(the root listing one document per group-version) with ``/openapi/v3/api/v1``,
``/openapi/v3/apis/<group>/<version>``. Enough for plain ``kubectl apply`` and ``kubectl
explain``: every served kind has a definition carrying ``x-kubernetes-group-version-kind`` (from
:mod:`.openapi_schemas`), and a PATCH operation per kind that advertises the ``fieldValidation``
query parameter (kubectl then leaves validation to the server instead of validating client-side)
and, for built-in kinds only, strategic merge patch (so kubectl sends CRDs merge patches, as
against a real server).

The v3 root's ``serverRelativeURL`` values carry the path of the cluster root the client used
(empty on a cluster's own port, ``/clusters/<name>`` on the main port): clients resolve them
against the server's host, not its path.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: a registry
in, documents out; no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from modelfleet.sim.apiserver.openapi_schemas import CORE_SCHEMAS, OBJECT_META, crd_schemas
from modelfleet.sim.apiserver.registry import ResourceRegistry, ResourceType

__all__ = ["definition_name", "kind_schema", "v2_document", "v3_document", "v3_root"]

_K8S_SUFFIX = ".k8s.io"
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)


def definition_name(rt: ResourceType) -> str:
    """The definition name the real server uses (``io.k8s.api.apps.v1.Deployment``)."""
    group = rt.group
    if group == "apiextensions.k8s.io":
        return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{rt.version}.{rt.kind}"
    if not group:
        return f"io.k8s.api.core.{rt.version}.{rt.kind}"
    if group == "apps" or (group.endswith(_K8S_SUFFIX) and rt.builtin):
        short = group.removesuffix(_K8S_SUFFIX).split(".")[0]
        return f"io.k8s.api.{short}.{rt.version}.{rt.kind}"
    return ".".join([*reversed(group.split(".")), rt.version, rt.kind])


def _gvk(rt: ResourceType) -> dict[str, str]:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def kind_schema(rt: ResourceType) -> dict[str, Any]:
    name = definition_name(rt)
    base = CORE_SCHEMAS.get(name) or crd_schemas().get((rt.api_version, rt.kind))
    if base is None and isinstance(rt.schema, dict):
        # A CRD's own schema, published as the real server does (metadata: ObjectMeta).
        props = dict(rt.schema.get("properties") or {})
        props["metadata"] = {"$ref": f"#/definitions/{OBJECT_META}"}
        base = {**rt.schema, "properties": props}
    if base is None:
        base = {
            "type": "object",
            "description": f"{rt.kind} ({rt.api_version}), served by the simulated cluster.",
            "properties": {
                "apiVersion": {"type": "string", "description": "APIVersion of this object."},
                "kind": {"type": "string", "description": "Kind of this object."},
                "metadata": {"$ref": f"#/definitions/{OBJECT_META}"},
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
            # Kinds without a kept schema (Role: rules, RoleBinding: roleRef ...) keep their
            # other top-level fields unchecked.
            "x-kubernetes-preserve-unknown-fields": True,
        }
    return {**base, "x-kubernetes-group-version-kind": [_gvk(rt)]}


def _definitions(types: list[ResourceType]) -> dict[str, Any]:
    """The shared schemas (ObjectMeta, PodSpec ...) and one definition per served kind."""
    defs: dict[str, Any] = dict(CORE_SCHEMAS)
    for rt in types:
        defs[definition_name(rt)] = kind_schema(rt)
    return defs


def _paths(types: list[ResourceType], *, v3: bool) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for rt in types:
        root = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
        prefix = f"{root}/namespaces/{{namespace}}" if rt.namespaced else root
        ref = f"#/{'components/schemas' if v3 else 'definitions'}/{definition_name(rt)}"
        params: list[dict[str, Any]] = [
            {"name": n, "in": "query", "type": "string", "description": d}
            for n, d in (
                ("dryRun", "When present, modifications are not persisted."),
                ("fieldManager", "The name of the actor making these changes."),
                ("fieldValidation", "Ignore, Warn or Strict handling of unknown fields."),
            )
        ]
        if v3:
            params = [
                {
                    "name": p["name"],
                    "in": "query",
                    "description": p["description"],
                    "schema": {"type": "string"},
                }
                for p in params
            ]
        types_ = list(_PATCH_TYPES)
        if rt.strategic_merge_allowed:
            types_.append("application/strategic-merge-patch+json")
        ext = {"x-kubernetes-group-version-kind": _gvk(rt), "x-kubernetes-action": "patch"}
        ok = (
            {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}
            if v3
            else {"description": "OK", "schema": {"$ref": ref}}
        )
        patch: dict[str, Any] = {
            "operationId": f"patch{rt.kind}",
            "parameters": params,
            "responses": {"200": ok},
            **ext,
        }
        if v3:
            patch["requestBody"] = {
                "content": {t: {"schema": {"type": "object"}} for t in types_},
                "required": True,
            }
        else:
            patch["consumes"] = types_
        get = {
            "operationId": f"read{rt.kind}",
            "responses": {"200": ok},
            "x-kubernetes-group-version-kind": _gvk(rt),
            "x-kubernetes-action": "get",
        }
        paths[f"{prefix}/{rt.plural}/{{name}}"] = {"get": get, "patch": patch}
    return paths


def v2_document(registry: ResourceRegistry, version: str) -> dict[str, Any]:
    types = [rt for rt in registry if "patch" in rt.verbs or "create" in rt.verbs]
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes (modelfleet simulated cluster)", "version": version},
        "paths": _paths(types, v3=False),
        "definitions": _definitions(types),
    }


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def v3_document(
    registry: ResourceRegistry, group: str, version: str, kube_version: str
) -> dict[str, Any] | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    schemas = json.loads(
        json.dumps(_definitions(types)).replace("#/definitions/", "#/components/schemas/")
    )
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (modelfleet simulated cluster)", "version": kube_version},
        "paths": _paths(types, v3=True),
        "components": {"schemas": schemas},
    }


def v3_root(registry: ResourceRegistry, cluster_prefix: str, kube_version: str) -> dict[str, Any]:
    """``/openapi/v3``: one entry per group-version, its URL carrying a content hash."""
    paths: dict[str, Any] = {}
    for group, versions in registry.groups().items():
        for version in versions:
            doc = v3_document(registry, group, version, kube_version)
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64]
            gv = _gv_path(group, version)
            paths[gv] = {
                "serverRelativeURL": f"{cluster_prefix}/openapi/v3/{gv}?hash={digest.upper()}"
            }
    return {"paths": paths}
