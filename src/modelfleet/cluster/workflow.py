"""The InferenceCluster workflow (ID ``cluster/<name>``): connects a cluster to the fleet and keeps
its published state true.

For ``source: Existing`` it verifies on the worker (where the kubeconfig lives) that the cluster
answers, publishes the spec and what it observed (nodes per pool, gateway address, readiness) to
the Fleet, then probes health on a durable timer and marks the cluster NotReady after a grace
period of failed probes; each probe also scans the Ready replicas there (``cluster_watch``). GKE,
EKS and AKS sources first run the provisioning saga of :mod:`modelfleet.cluster.provisioning`
(cluster, then one pool per entry, compensated in reverse on failure), then the same loop.
``delete`` withdraws the cluster from the Fleet and deletes the cloud resources this workflow
created. Deterministic orchestration only.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.clusters import ClusterSource, InferenceCluster
    from modelfleet.api.manifest_errors import InvalidResourceError
    from modelfleet.api.meta import Condition
    from modelfleet.api.rules import validate
    from modelfleet.cluster import plan, stack
    from modelfleet.cluster import steps as cluster_steps
    from modelfleet.cluster.alternatives import as_created
    from modelfleet.cluster.failure import PROVISIONING_FAILED, failure_reason
    from modelfleet.cluster.phase import cluster_phase
    from modelfleet.cluster.pools import reconcile_pools, replicas_by_pool
    from modelfleet.cluster.probing import probe, unreachable_reason
    from modelfleet.cluster.provisioning import Provisioner, ProvisioningFailedError
    from modelfleet.cluster.state import ClusterInput
    from modelfleet.cluster.sweep import DarkWatch
    from modelfleet.cluster.watch import ReplicaWatcher
    from modelfleet.contracts import search
    from modelfleet.contracts.activity_names import FLEET_PUBLISH_CLUSTER, FLEET_REPLICAS_ON
    from modelfleet.contracts.error_types import POOL_IN_USE
    from modelfleet.contracts.fleet_payloads import ClusterReport, PublishRequest
    from modelfleet.contracts.kube_payloads import PoolObservation, ProbeRequest
    from modelfleet.contracts.stack_payloads import StackReport
    from modelfleet.contracts.status import ClusterStatus
    from modelfleet.contracts.versioning import declared
    from modelfleet.scheduling.snapshot import QueueCapacity

# How often a cluster waiting for its classes looks again.
CLASS_RECHECK = timedelta(seconds=30)
# Cloud tokens in a provisioned cluster's kubeconfig expire (EKS after 15 minutes, GKE after an
# hour): the worker writes a fresh one this often.
KUBECONFIG_REFRESH = timedelta(minutes=10)
# Condition types of a cluster's status, in the order they are shown.
REACHABLE, PROVISIONED, ACCESS, STACK = "Reachable", "Provisioned", "AccessGranted", "ServingStack"
POOLS = "NodePools"
CONDITION_TYPES = (REACHABLE, PROVISIONED, POOLS, ACCESS, STACK)


@workflow.defn(
    name="InferenceCluster", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE)
)
class ClusterWorkflow:
    @workflow.init
    def __init__(self, arg: ClusterInput) -> None:
        self._state = arg.state
        if self._state.created is None:
            self._state.created = workflow.info().start_time
        # What follows is this run's own: observed again by its first probe, never carried.
        self._reason = "not yet probed"
        self._gateway: str | None = None
        self._pools: dict[str, PoolObservation] = {}
        self._queue: QueueCapacity | None = None
        self._last_probe: datetime | None = None
        self._deleting = False
        self._changed = True
        self._probe_now = False
        self._published: tuple[object, ...] | None = None
        self._provisioner: Provisioner | None = None
        self._failed_provisioning = False
        self._kubeconfig_at: datetime | None = None
        self._stack_ok = False
        self._stack_report: StackReport | None = None
        self._access_ok = False
        # Kept per type; derived from what the run did, so they add no history events.
        self._conditions: dict[str, Condition] = {}
        self._sweeps = DarkWatch.of(arg)  # its ``pending`` is copied to the state as it changes
        # Held by ``apply`` across the Fleet's answer, so that a later apply waits for it
        # instead of committing in between and being overwritten by the older spec.
        self._lock = asyncio.Lock()
        if self._state.provisioning.provisioned:
            # Carried across continue-as-new: provisioned by an earlier run.
            self._condition(PROVISIONED, "True", "Provisioned", "provisioned by an earlier run")

    @workflow.update
    async def apply(self, spec: InferenceCluster) -> ClusterStatus:
        async with self._lock:
            changed = spec.to_wire() != self._state.spec.to_wire()
            if changed:
                removed = plan.removed_pools(self._state.spec, spec)
                if removed:
                    # The Fleet knows which replicas run on which pool; one still in use stays.
                    refused = plan.removal_refused(
                        removed, await replicas_by_pool(self._state.spec.name)
                    )
                    if refused is not None:
                        raise ApplicationError(refused, type=POOL_IN_USE, non_retryable=True)
                self._state.spec = spec
                self._changed = True
                self._probe_now = True
            if self._failed_provisioning:
                # Applying a Failed cluster, changed or not, is the retry (after a stockout the
                # same manifest is all there is to apply).
                self._retry_provisioning("applied again")
            return self._status()

    @workflow.update
    async def retry(self) -> ClusterStatus:
        """``rollout restart cluster/NAME``: provision a Failed cluster again, same spec."""
        self._retry_provisioning("restarted")
        return self._status()

    @retry.validator
    def _check_retry(self) -> None:
        if not self._failed_provisioning or self._deleting:
            raise ValueError(
                f"cluster {self._state.spec.name} is {self._phase()}, not Failed: only a failed "
                "provisioning is restarted"
            )

    @apply.validator
    def _check_apply(self, spec: InferenceCluster) -> None:
        refused = plan.apply_refused(self._state.spec, spec)
        if refused is not None:
            raise ValueError(refused)
        errors = validate(spec)
        if errors:
            raise InvalidResourceError(spec.ref, errors)

    def _retry_provisioning(self, why: str) -> None:
        """The provisioning loop waits on a Failed cluster for this: it runs the saga again."""
        self._failed_provisioning = False
        self._changed = True
        self._reason = f"{why}: provisioning again after a failure"

    @workflow.update
    async def delete(self) -> ClusterStatus:
        self._deleting = True
        return self._status()

    @workflow.query
    def status(self) -> ClusterStatus:
        return self._status()

    @workflow.run
    async def run(self, arg: ClusterInput) -> ClusterStatus:
        # Its signals (cluster_watch) change ``state.watched``, the map it watches.
        self._watcher = ReplicaWatcher.installed(self._state.watched)
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set("InferenceCluster"),
                search.NAME.value_set(self._state.spec.name),
                search.CLUSTERS.value_set([self._state.spec.name]),
                # Kept across continue-as-new: `get clusters` shows AGE from visibility when
                # the Fleet does not answer.
                *([search.CREATED.value_set(self._state.created)] if self._state.created else []),
            ]
        )
        if self._state.spec.spec.cluster.source is not ClusterSource.EXISTING:
            await self._provision(
                timedelta(seconds=arg.provision_deadline_seconds),
                timedelta(seconds=arg.cloud_heartbeat_seconds),
            )
        interval = timedelta(seconds=arg.probe_interval_seconds)
        while not self._deleting:
            await self._refresh_kubeconfig()
            await self._probe(arg.failure_threshold)
            if self._changed or self._observation() != self._published:
                # Every report is an Update on the one Fleet workflow: send only news.
                await self._publish(spec=self._changed)
                self._published = self._observation()
            self._changed = False
            self._probe_now = False
            if (
                self._state.provisioning.provisioned
                and self._state.provisioning.pools_applied != self._declared_pools()
            ):
                await self._reconcile_pools()
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(arg.model_copy(update={"state": self._state}))
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._deleting or self._probe_now,
                    timeout=interval,
                    timeout_summary="next health probe",
                )
        await self._drain(timedelta(seconds=arg.drain_timeout_seconds))
        await workflow.execute_activity(
            FLEET_PUBLISH_CLUSTER,
            PublishRequest(remove=self._state.spec.name),
            start_to_close_timeout=timedelta(seconds=30),
            summary="withdraw from the fleet",
        )
        self._state.ready = False
        self._reason = "deleted"
        if self._state.provisioning.created:
            await self._deprovision()
        workflow.upsert_search_attributes([search.PHASE.value_set("Deleted")])
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._status()

    async def _provision(self, deadline: timedelta, heartbeat: timedelta) -> None:
        """Run the provisioning saga until it succeeds or the cluster is deleted. A failure
        (after compensation) waits for a changed spec or a delete before trying again."""
        while not self._state.provisioning.provisioned and not self._deleting:
            prov = Provisioner(self._state.spec, self._state.provisioning, deadline, heartbeat)
            self._provisioner = prov
            self._set_phase("Provisioning", "reading the pools' classes from the fleet")
            plans, problems = prov.plan(await prov.classes())
            if problems:
                self._set_phase("Provisioning", "WaitingForClasses: " + "; ".join(problems))
                await self._publish(spec=True)
                self._changed = False
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        lambda: self._deleting or self._changed,
                        timeout=CLASS_RECHECK,
                        timeout_summary="look for the pools' classes again",
                    )
                continue
            self._failed_provisioning = False
            self._set_phase("Provisioning", f"creating {len(plans)} pool(s)")
            await self._publish(spec=True)
            try:
                await prov.provision(plans)
            except ProvisioningFailedError as failed:
                self._failed_provisioning = True
                reason = failure_reason(
                    self._state.spec.name,
                    failed.step,
                    failed.error_type,
                    failed.message,
                    failed.cleanup,
                    failed.stocked_out,
                )
                message = reason.removeprefix(f"{PROVISIONING_FAILED} at ")
                self._condition(PROVISIONED, "False", PROVISIONING_FAILED, message)
                self._set_phase("Failed", reason)
                await self._publish(spec=False)
                self._changed = False
                # Re-applied (the same spec or a new one) or restarted: provision again.
                await workflow.wait_condition(lambda: self._deleting or self._changed)
                continue
            self._reason = "provisioned; waiting for the first probe"
            self._state.provisioning.pools_applied = self._declared_pools()
            self._condition(PROVISIONED, "True", "Provisioned", f"{len(plans)} pool(s) created")
        self._changed = True

    async def _check_stack(self) -> bool:
        """Verify the serving stack; install what is missing; keep the cluster out of placement
        (NotReady, the missing pieces named) until every piece is served. True when it is."""
        steps = self._state.provisioning.steps
        cluster_steps.begin(steps, "verify the serving stack")
        try:
            report = await stack.verify_and_install(
                self._state.spec.name,
                self._probe_request().kubeconfig,
                self._state.spec.spec.scheduler,
            )
        except ActivityError as exc:
            # Unverified is not ready: the next probe tries again.
            self._state.ready = False
            self._reason = f"ServingStackUnverified: {exc.__cause__ or exc}"
            cluster_steps.end(steps, self._reason)
            self._condition(STACK, "Unknown", "ServingStackUnverified", str(exc.__cause__ or exc))
            return False
        self._stack_report = report
        if not report.missing:
            self._stack_ok = True
            cluster_steps.end(steps)
            self._condition(STACK, "True", "ServingStackReady", "every component is served")
            return True
        self._state.ready, self._reason = False, stack.stack_reason(report)
        cluster_steps.end(steps, self._reason)
        message = self._reason.removeprefix("ServingStackMissing: ")
        self._condition(STACK, "False", "ServingStackMissing", message)
        return False

    def _declared_pools(self) -> list[dict[str, Any]]:
        return [p.model_dump(mode="json", by_alias=True) for p in self._state.spec.spec.node_pools]

    async def _reconcile_pools(self) -> None:
        """Make the cloud's pools match nodePools[]; a failure is shown as the NodePools
        condition and retried on the next probe."""
        declared = self._declared_pools()
        nodes = {pool: seen.nodes for pool, seen in self._pools.items()}
        status, reason, message = await reconcile_pools(
            self._state.spec, self._state.provisioning, nodes
        )
        self._condition(POOLS, status, reason, message)
        if status == "True":
            self._state.provisioning.pools_applied = declared
            self._probe_now = True

    async def _check_access(self) -> bool:
        """Review the RBAC the worker needs; keep the cluster out of placement, the missing
        verbs and resources named, until the credentials may do all of it. True when they may."""
        try:
            denied = await stack.review_access(
                self._state.spec.name, self._probe_request().kubeconfig
            )
        except ActivityError as exc:
            self._state.ready = False
            self._reason = f"AccessUnverified: {exc.__cause__ or exc}"
            self._condition(ACCESS, "Unknown", "AccessUnverified", str(exc.__cause__ or exc))
            return False
        if not denied:
            self._access_ok = True
            self._condition(ACCESS, "True", "AccessGranted", "every verb modelfleet uses")
            return True
        message = "the cluster's credentials may not: " + ", ".join(denied)
        self._state.ready, self._reason = False, f"AccessDenied: {message}"
        self._condition(ACCESS, "False", "AccessDenied", message)
        return False

    def _condition(self, type_: str, status: str, reason: str, message: str) -> None:
        self._conditions[type_] = Condition.model_validate(
            {"type": type_, "status": status, "reason": reason, "message": message}
        )

    async def _refresh_kubeconfig(self) -> None:
        """Provisioned clusters only: their kubeconfig holds a short-lived cloud token."""
        if not self._state.provisioning.provisioned:
            return
        now = workflow.now()
        if self._kubeconfig_at is None and self._provisioner is not None:
            self._kubeconfig_at = now  # this run provisioned the cluster and just wrote it
            return
        if self._kubeconfig_at is not None and now - self._kubeconfig_at < KUBECONFIG_REFRESH:
            return
        self._kubeconfig_at = now
        prov = Provisioner(self._state.spec, self._state.provisioning, timedelta(hours=1))
        problem = await prov.refresh_kubeconfig()
        if problem is not None:
            # The probe that follows reports the consequence; the cause is shown here.
            workflow.set_current_details(f"**kubeconfig refresh failed** · {problem}")

    async def _deprovision(self) -> None:
        prov = Provisioner(self._state.spec, self._state.provisioning, timedelta(hours=1))
        self._reason = "deprovisioning: deleting the cloud resources this cluster created"
        workflow.set_current_details(f"**Deleting** · {self._reason}")
        problems = await prov.deprovision()
        self._reason = (
            f"deleted; cleanup incomplete: {'; '.join(problems)}" if problems else "deleted"
        )

    def _set_phase(self, phase: str, reason: str) -> None:
        self._state.ready, self._reason = False, reason
        workflow.upsert_search_attributes([search.PHASE.value_set(phase)])
        workflow.set_current_details(f"**{phase}** · {reason}")

    def _phase(self) -> str:
        return cluster_phase(
            deleting=self._deleting,
            ready=self._state.ready,
            provisioned_by_modelfleet=(
                self._state.spec.spec.cluster.source is not ClusterSource.EXISTING
            ),
            provisioned=self._state.provisioning.provisioned,
            provisioning_failed=self._failed_provisioning,
            provisioning=self._provisioner is not None,
        )

    def _observation(self) -> tuple[object, ...]:
        return (
            self._state.ready,
            self._reason,
            self._gateway,
            sorted(self._pools.items()),
            self._queue,
        )

    async def _drain(self, limit: timedelta) -> None:
        """Move every replica off the cluster (deployments re-place them) before leaving."""
        self._state.ready, self._reason = False, "draining: replicas are being moved elsewhere"
        workflow.upsert_search_attributes([search.PHASE.value_set("Draining")])
        await self._publish(spec=False, draining=True)
        deadline = workflow.now() + limit
        while workflow.now() < deadline:
            remaining: list[str] = await workflow.execute_activity(
                FLEET_REPLICAS_ON,
                self._state.spec.name,
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
        result = await probe(self._probe_request())
        self._last_probe = workflow.now()
        if result.reachable:
            self._condition(REACHABLE, "True", "ProbeSucceeded", result.reason)
        else:
            self._condition(REACHABLE, "False", "ProbeFailed", result.reason)
        if result.reachable:
            self._state.failed_probes = 0
            self._state.unreachable_since = None
            missing = [
                p.name for p in self._state.spec.spec.node_pools if p.name not in result.pools
            ]
            self._gateway = result.gateway_address
            self._pools = dict(result.pools)
            self._queue = result.queue
            if result.gateway_address is None:
                self._state.ready, self._reason = False, "no gateway address yet (serving stack?)"
            elif not self._access_ok and not await self._check_access():
                pass  # not placeable: the review said what is missing
            elif not self._stack_ok and not await self._check_stack():
                pass  # not placeable: the check said why
            else:
                self._state.ready = True
                self._reason = (
                    f"no nodes found for pool(s) {', '.join(missing)}" if missing else "probe ok"
                )
        else:
            self._state.failed_probes += 1
            self._reason = unreachable_reason(self._state.failed_probes, result.reason)
            if self._state.unreachable_since is None:
                self._state.unreachable_since = self._last_probe
                # At once, not at NotReady: no replica here shows Ready while nobody can see it.
                await self._watcher.unreachable(f"cluster {self._state.spec.name} {self._reason}")
            if self._state.failed_probes >= threshold:
                self._state.ready = False
        await self._sweeps.observe(
            self._state.spec.name, self._state.ready
        )  # orphan sweeps, when due
        self._state.sweep_pending = self._sweeps.pending
        # A run started afresh asks the replicas placed here to register again, once.
        await self._watcher.ask_to_register_again(self._state.spec.name, ready=self._state.ready)
        # Only after a probe that answered: a scan of a silent API would hang the loop.
        await self._watcher.scan(
            self._probe_request(), ready=self._state.ready and result.reachable
        )
        phase = "Ready" if self._state.ready else "NotReady"
        workflow.upsert_search_attributes([search.PHASE.value_set(phase)])
        workflow.set_current_details(f"**{phase}** · {self._reason}")

    def _probe_request(self) -> ProbeRequest:
        return plan.probe_request(self._state.spec)

    async def _publish(self, *, spec: bool, draining: bool = False) -> None:
        report = ClusterReport(
            draining=draining,
            name=self._state.spec.name,
            ready=self._state.ready,
            reason=self._reason,
            gateway_address=self._gateway,
            observed_pools=self._pools,
            queue=self._queue,
            since=workflow.now(),
            unreachable_since=self._state.unreachable_since,
        )
        await workflow.execute_activity(
            FLEET_PUBLISH_CLUSTER,
            PublishRequest(spec=self._published_spec() if spec else None, report=report),
            start_to_close_timeout=timedelta(seconds=30),
            summary="publish to the fleet",
        )

    def _published_spec(self) -> InferenceCluster:
        """The spec with each pool created as a fallback shown as created: the fleet places
        replicas by a pool's class."""
        return as_created(self._state.spec, self._state.provisioning.chosen)

    def _status(self) -> ClusterStatus:
        return ClusterStatus(
            name=self._state.spec.name,
            phase=self._phase(),
            ready=self._state.ready,
            reason=self._reason,
            gateway_address=self._gateway,
            observed_pools=self._pools,
            queue=self._queue,
            failed_probes=self._state.failed_probes,
            last_probe=self._last_probe,
            step=cluster_steps.current(self._state.provisioning.steps),
            steps=list(self._state.provisioning.steps),
            stack=stack.stack_pieces(self._stack_report, self._state.spec.spec.scheduler),
            conditions=[self._conditions[t] for t in CONDITION_TYPES if t in self._conditions],
            created=self._state.created,
            sweep_pending=self._sweeps.pending,
        )
