"""The InferenceCluster workflow (ID ``cluster/<name>``): connects a cluster to the fleet and keeps
its published state true.

For ``source: Existing`` it verifies on the worker (where the kubeconfig lives) that the cluster
answers, publishes the spec and what it observed (nodes per pool, gateway address, readiness) to
the Fleet, then probes health on a durable timer and marks the cluster NotReady after a grace
period of failed probes. GKE and EKS sources slot in as a provisioning phase before the same
loop; until that lands they report ``ProvisioningNotSupported``. ``delete`` withdraws the cluster
from the Fleet. Deterministic orchestration only.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.clusters import ClusterSource, InferenceCluster
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.rules import validate
    from modelfleet.contracts.activity_names import (
        FLEET_PUBLISH_CLUSTER,
        FLEET_REPLICAS_ON,
        KUBE_PROBE,
    )
    from modelfleet.contracts.fleet_payloads import ClusterReport, PublishRequest
    from modelfleet.contracts.kube_payloads import (
        KubeconfigRef,
        PoolObservation,
        ProbeRequest,
        ProbeResult,
    )
    from modelfleet.contracts.status import ClusterStatus
    from modelfleet.contracts.workflow_inputs import ClusterInput
    from modelfleet.rendering.cluster_settings import cluster_facts, has_own_settings
    from modelfleet.workflows import search


# A probe fails only after a few quick retries: one 500 or 429 says little about health.
PROBE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=4,
)


PATCH_REPORT_ON_CHANGE = "report-cluster-on-change"


@workflow.defn(name="InferenceCluster")
class ClusterWorkflow:
    @workflow.init
    def __init__(self, arg: ClusterInput) -> None:
        self._spec = arg.spec
        self._failed = arg.failed_probes
        self._ready = arg.ready
        self._reason = "not yet probed"
        self._gateway: str | None = None
        self._pools: dict[str, PoolObservation] = {}
        self._last_probe: datetime | None = None
        self._deleting = False
        self._changed = True
        self._probe_now = False
        self._published: tuple[object, ...] | None = None

    @workflow.update
    async def apply(self, spec: InferenceCluster) -> ClusterStatus:
        if spec.to_wire() != self._spec.to_wire():
            self._spec = spec
            self._changed = True
            self._probe_now = True
        return self._status()

    @apply.validator
    def _check_apply(self, spec: InferenceCluster) -> None:
        if spec.name != self._spec.name:
            raise ValueError(f"this workflow holds {self._spec.ref}, not {spec.ref}")
        if spec.spec.cluster.source is not self._spec.spec.cluster.source:
            raise ValueError("spec.cluster.source cannot change; delete and re-create the cluster")
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    @workflow.update
    async def delete(self) -> ClusterStatus:
        self._deleting = True
        return self._status()

    @workflow.query
    def status(self) -> ClusterStatus:
        return self._status()

    @workflow.run
    async def run(self, arg: ClusterInput) -> ClusterStatus:
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("InferenceCluster"),
                search.NAME.value_set(self._spec.name),
                search.CLUSTERS.value_set([self._spec.name]),
            ]
        )
        if self._spec.spec.cluster.source is not ClusterSource.EXISTING:
            self._ready = False
            self._reason = (
                f"ProvisioningNotSupported: provisioning {self._spec.spec.cluster.source.value} "
                "clusters is not built yet; use source Existing"
            )
            await self._publish(spec=True)
            await workflow.wait_condition(lambda: self._deleting)
        interval = timedelta(seconds=arg.probe_interval_seconds)
        while not self._deleting:
            await self._probe(arg.failure_threshold)
            if not workflow.patched(PATCH_REPORT_ON_CHANGE):
                await self._publish(spec=self._changed)
            elif self._changed or self._observation() != self._published:
                # Every report is an Update on the one Fleet workflow: send only news.
                await self._publish(spec=self._changed)
                self._published = self._observation()
            self._changed = False
            self._probe_now = False
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    arg.model_copy(
                        update={
                            "spec": self._spec,
                            "failed_probes": self._failed,
                            "ready": self._ready,
                        }
                    )
                )
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._deleting or self._probe_now,
                    timeout=interval,
                    timeout_summary="next health probe",
                )
        await self._drain(timedelta(seconds=arg.drain_timeout_seconds))
        await workflow.execute_activity(
            FLEET_PUBLISH_CLUSTER,
            PublishRequest(remove=self._spec.name),
            start_to_close_timeout=timedelta(seconds=30),
            summary="withdraw from the fleet",
        )
        self._ready = False
        self._reason = "deleted"
        workflow.upsert_search_attributes([search.PHASE.value_set("Deleted")])
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._status()

    def _observation(self) -> tuple[object, ...]:
        return (self._ready, self._reason, self._gateway, sorted(self._pools.items()))

    async def _drain(self, limit: timedelta) -> None:
        """Move every replica off the cluster (deployments re-place them) before leaving."""
        self._ready, self._reason = False, "draining: replicas are being moved elsewhere"
        workflow.upsert_search_attributes([search.PHASE.value_set("Draining")])
        await self._publish(spec=False, draining=True)
        deadline = workflow.now() + limit
        while workflow.now() < deadline:
            remaining: list[str] = await workflow.execute_activity(
                FLEET_REPLICAS_ON,
                self._spec.name,
                result_type=list[str],
                start_to_close_timeout=timedelta(seconds=30),
                summary="replicas still on the cluster",
            )
            if not remaining:
                return
            self._reason = f"draining: {len(remaining)} replica(s) left: {', '.join(remaining)}"
            workflow.set_current_details(f"**Draining** · {self._reason}")
            await workflow.sleep(timedelta(seconds=5), summary="wait for the drain")
        self._reason = f"drain timed out after {limit}; withdrawn with replicas left"

    async def _probe(self, threshold: int) -> None:
        try:
            result: ProbeResult = await workflow.execute_activity(
                KUBE_PROBE,
                self._probe_request(),
                result_type=ProbeResult,
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(seconds=60),
                retry_policy=PROBE_RETRY,
                summary="probe cluster health",
            )
        except ActivityError as exc:
            cause = exc.__cause__ or exc
            result = ProbeResult(reachable=False, reason=str(cause))
        self._last_probe = workflow.now()
        if result.reachable:
            self._failed = 0
            missing = [p.name for p in self._spec.spec.node_pools if p.name not in result.pools]
            self._gateway = result.gateway_address
            self._pools = dict(result.pools)
            if result.gateway_address is None:
                self._ready, self._reason = False, "no gateway address yet (serving stack?)"
            else:
                self._ready = True
                self._reason = (
                    f"no nodes found for pool(s) {', '.join(missing)}" if missing else "probe ok"
                )
        else:
            self._failed += 1
            self._reason = f"probe failed ({self._failed}x): {result.reason}"
            if self._failed >= threshold:
                self._ready = False
        phase = "Ready" if self._ready else "NotReady"
        workflow.upsert_search_attributes([search.PHASE.value_set(phase)])
        workflow.set_current_details(f"**{phase}** · {self._reason}")

    def _probe_request(self) -> ProbeRequest:
        """The probe names the cluster's kubeconfig secretRef and its own settings (pool labels,
        gateway), so the worker resolves and probes the cluster as the spec describes it."""
        existing = self._spec.spec.cluster.existing
        ref = existing.secret_ref if existing is not None else None
        return ProbeRequest(
            cluster=self._spec.name,
            kubeconfig=KubeconfigRef(name=ref.name, key=ref.key) if ref is not None else None,
            facts=cluster_facts(self._spec) if has_own_settings(self._spec) else None,
        )

    async def _publish(self, *, spec: bool, draining: bool = False) -> None:
        report = ClusterReport(
            draining=draining,
            name=self._spec.name,
            ready=self._ready,
            reason=self._reason,
            gateway_address=self._gateway,
            observed_pools=self._pools,
            since=workflow.now(),
        )
        await workflow.execute_activity(
            FLEET_PUBLISH_CLUSTER,
            PublishRequest(spec=self._spec if spec else None, report=report),
            start_to_close_timeout=timedelta(seconds=30),
            summary="publish to the fleet",
        )

    def _status(self) -> ClusterStatus:
        return ClusterStatus(
            name=self._spec.name,
            phase="Deleting" if self._deleting else ("Ready" if self._ready else "NotReady"),
            ready=self._ready,
            reason=self._reason,
            gateway_address=self._gateway,
            observed_pools=self._pools,
            failed_probes=self._failed,
            last_probe=self._last_probe,
        )
