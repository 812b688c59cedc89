"""Serving-stack activities: verify by discovery that a cluster serves every kind the renderer
emits, and install the missing pieces by server-side applying their pinned manifests from the
worker's stack source (``MODELFLEET_STACK_SOURCE``); and check with SelfSubjectAccessReviews
that the cluster's credentials may do what modelfleet does there. Thin: adapters do the I/O.

Synchronous activities; the worker runs them on a thread pool.
"""

from __future__ import annotations

import os
import threading

from temporalio import activity

from modelfleet.activities.errors import stack_source_unavailable, to_temporal
from modelfleet.activities.kube_ops import KubeconfigStore
from modelfleet.adapters.kube_client import KubeCluster, KubeError
from modelfleet.adapters.stack_source import StackSourceError, fetch_manifests
from modelfleet.contracts.stack_payloads import (
    KUBE_CHECK_ACCESS,
    KUBE_INSTALL_STACK,
    KUBE_VERIFY_STACK,
    AccessReport,
    AccessRequest,
    StackComponent,
    StackReport,
    StackRequest,
)

ENV_STACK_SOURCE = "MODELFLEET_STACK_SOURCE"


class StackActivities:
    def __init__(self, kubeconfigs: KubeconfigStore, source: str | None = None) -> None:
        self._kubeconfigs = kubeconfigs
        self._source = source if source is not None else os.environ.get(ENV_STACK_SOURCE)
        self._lock = threading.Lock()

    def _missing(
        self, cluster: KubeCluster, components: list[StackComponent]
    ) -> list[StackComponent]:
        return [c for c in components if not cluster.serves(c.api_version, c.kind)]

    @activity.defn(name=KUBE_VERIFY_STACK)
    def verify(self, request: StackRequest) -> StackReport:
        with KubeCluster(self._kubeconfigs.path(request.cluster, request.kubeconfig)) as cluster:
            try:
                return StackReport(missing=self._missing(cluster, request.components))
            except KubeError as exc:
                raise to_temporal(exc) from None

    @activity.defn(name=KUBE_INSTALL_STACK)
    def install(self, request: StackRequest) -> StackReport:
        """Install what is missing; reports what still is, with the reasons."""
        problems: dict[str, str] = {}
        # A scheduler's release installs several of its kinds at once: apply it once.
        applied: set[str] = set()
        with KubeCluster(self._kubeconfigs.path(request.cluster, request.kubeconfig)) as cluster:
            try:
                for component in self._missing(cluster, request.components):
                    if component.manifest in applied:
                        continue
                    if component.manifest is None:
                        problems[component.name] = "built into Kubernetes; upgrade the cluster"
                        continue
                    if not self._source:
                        problems[component.name] = f"no stack source ({ENV_STACK_SOURCE})"
                        continue
                    try:
                        documents = fetch_manifests(self._source, component.manifest)
                    except StackSourceError as exc:
                        if exc.retryable:
                            raise stack_source_unavailable(str(exc)) from None
                        problems[component.name] = str(exc)
                        continue
                    for document in documents:
                        cluster.apply(document)
                        activity.heartbeat(component.name)
                    applied.add(component.manifest)
                missing = self._missing(cluster, request.components)
            except KubeError as exc:
                raise to_temporal(exc) from None
        return StackReport(missing=missing, problems=problems)

    @activity.defn(name=KUBE_CHECK_ACCESS)
    def check_access(self, request: AccessRequest) -> AccessReport:
        """One SelfSubjectAccessReview per verb and resource; what is denied. Progress is
        heartbeated, so a retry after a failed request resumes where it stopped instead of
        asking every question again (a flaky API server would otherwise rarely let ~50 in a row
        through)."""
        checks = [
            (need, verb, name)
            for need in request.needs
            for verb, name in zip(need.verbs, need.names(), strict=True)
        ]
        start, denied = _resumed_review()
        with KubeCluster(self._kubeconfigs.path(request.cluster, request.kubeconfig)) as cluster:
            try:
                for index in range(min(start, len(checks)), len(checks)):
                    need, verb, name = checks[index]
                    allowed, _ = cluster.can_i(verb, need.group, need.resource)
                    if not allowed:
                        denied.append(name)
                    activity.heartbeat(index + 1, denied)
            except KubeError as exc:
                raise to_temporal(exc) from None
        return AccessReport(denied=denied)


def _resumed_review() -> tuple[int, list[str]]:
    """(next check, denied so far) from the previous attempt's heartbeat, or a fresh start."""
    details = activity.info().heartbeat_details
    if (
        len(details) == 2
        and type(details[0]) is int
        and isinstance(details[1], list)
        and all(isinstance(d, str) for d in details[1])
    ):
        return details[0], list(details[1])
    return 0, []
