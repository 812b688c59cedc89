"""The API defaults the real server fills in for the fields modelfleet renders: Deployment
strategy, history and progress deadline; pod-spec defaults (restart policy, grace period, DNS
policy, scheduler) wherever a pod spec sits (Pods, workload templates, LeaderWorkerSet leader and
worker templates); container defaults (image pull policy, termination message, port protocol);
probe thresholds; Service type, cluster IP and ports. Applied on every write, like the real
defaulting, so an object reads back as it would from a real cluster.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: mutates the
given dict in place; no I/O.
"""

from __future__ import annotations

import hashlib
from typing import Any

from modelfleet.sim.apiserver.registry import ResourceType

__all__ = ["default_object"]

_WORKLOADS = frozenset(
    {"deployments.apps", "replicasets.apps", "statefulsets.apps", "daemonsets.apps"}
)
_LWS = "leaderworkersets.leaderworkerset.x-k8s.io"


def _dict(parent: Any, key: str) -> dict[str, Any] | None:
    value = parent.get(key) if isinstance(parent, dict) else None
    return value if isinstance(value, dict) else None


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for key, value in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        probe.setdefault(key, value)
    http = _dict(probe, "httpGet")
    if http is not None:
        http.setdefault("scheme", "HTTP")
        http.setdefault("path", "/")


def _pull_policy(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _container(container: Any) -> None:
    if not isinstance(container, dict):
        return
    container.setdefault("imagePullPolicy", _pull_policy(str(container.get("image", ""))))
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(container.get(key))


def _pod_spec(spec: dict[str, Any] | None) -> None:
    if spec is None:
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            _container(container)


def _template_spec(template: dict[str, Any] | None) -> None:
    if template is not None:
        _pod_spec(_dict(template, "spec"))


def _cluster_ip(obj: dict[str, Any]) -> str:
    """A stable service IP from the object's namespace and name (the real allocator picks a
    free one; this one is the same on every write, since defaults are applied on each)."""
    meta = obj.get("metadata") or {}
    digest = hashlib.sha256(f"{meta.get('namespace')}/{meta.get('name')}".encode()).digest()
    return f"10.96.{digest[0]}.{digest[1] % 254 + 1}"


def default_object(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Fill the built-in defaults of ``obj`` (of type ``rt``) in place."""
    spec = _dict(obj, "spec")
    if spec is None:
        return
    key = rt.key
    if key == "pods":
        _pod_spec(spec)
    elif key in _WORKLOADS:
        _template_spec(_dict(spec, "template"))
        spec.setdefault("revisionHistoryLimit", 10)
        if key == "deployments.apps":
            spec.setdefault("progressDeadlineSeconds", 600)
            strategy = spec.setdefault("strategy", {})
            if isinstance(strategy, dict):
                strategy.setdefault("type", "RollingUpdate")
                if strategy["type"] == "RollingUpdate":
                    rolling = strategy.setdefault("rollingUpdate", {})
                    if isinstance(rolling, dict):
                        rolling.setdefault("maxUnavailable", "25%")
                        rolling.setdefault("maxSurge", "25%")
    elif key == _LWS:
        lwt = _dict(spec, "leaderWorkerTemplate")
        if lwt is not None:
            _template_spec(_dict(lwt, "leaderTemplate"))
            _template_spec(_dict(lwt, "workerTemplate"))
    elif key == "services":
        spec.setdefault("type", "ClusterIP")
        if spec["type"] != "ExternalName" and "clusterIP" not in spec:
            spec["clusterIP"] = _cluster_ip(obj)
            spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if "port" in port:
                    port.setdefault("targetPort", port["port"])
