"""The provisioning saga of a GKE, EKS or AKS InferenceCluster, run inside the InferenceCluster
workflow: read the pools' classes from the Fleet, plan the pools, create the cluster with its
system pool, then one pool per ``nodePools[]`` entry, then write the kubeconfig on the worker.
On a failure anywhere it deletes, in reverse, what this workflow created (references kept in
workflow state) and reports the reason. Deterministic orchestration only: the decisions are in
:mod:`modelfleet.cluster.plan`, the side effects in the cloud activities.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.classes import InferenceClass
    from modelfleet.api.clusters import ClusterSource, InferenceCluster, NodePool
    from modelfleet.cluster import steps as cluster_steps
    from modelfleet.cluster.alternatives import (
        alternatives,
        as_created,
        attempt_name,
        choice,
        next_alternative,
    )
    from modelfleet.cluster.plan import (
        PoolChanges,
        cloud_cluster,
        needed_classes,
        plan_alternatives,
        plan_pools,
    )
    from modelfleet.contracts.cloud_payloads import (
        AKS_CREATE_AGENT_POOL,
        AKS_CREATE_CLUSTER,
        AKS_DELETE_AGENT_POOL,
        AKS_DELETE_CLUSTER,
        AKS_KUBECONFIG,
        AKS_LIST_AGENT_POOLS,
        AKS_UPDATE_AGENT_POOL,
        EKS_CREATE_CLUSTER,
        EKS_CREATE_NODEGROUP,
        EKS_DELETE_CLUSTER,
        EKS_DELETE_NODEGROUP,
        EKS_KUBECONFIG,
        EKS_LIST_NODEGROUPS,
        EKS_UPDATE_NODEGROUP,
        FLEET_CLASSES,
        GKE_CREATE_CLUSTER,
        GKE_CREATE_NODE_POOL,
        GKE_DELETE_CLUSTER,
        GKE_DELETE_NODE_POOL,
        GKE_KUBECONFIG,
        GKE_LIST_NODE_POOLS,
        GKE_UPDATE_NODE_POOL,
        CloudCluster,
        CreatedRef,
        CreateResult,
        DeleteOutcome,
        PoolPlan,
        PoolRef,
        PoolRequest,
        PoolShape,
        ProvisioningState,
        error_type,
        reason_of,
    )
    from modelfleet.contracts.cloud_payloads import CloudErrorReason as Reason


@dataclass(frozen=True)
class _Steps:
    create_cluster: str
    create_pool: str
    delete_pool: str
    delete_cluster: str
    kubeconfig: str
    pool_word: str
    list_pools: str
    update_pool: str


STEPS = {
    ClusterSource.GKE: _Steps(
        GKE_CREATE_CLUSTER,
        GKE_CREATE_NODE_POOL,
        GKE_DELETE_NODE_POOL,
        GKE_DELETE_CLUSTER,
        GKE_KUBECONFIG,
        "node pool",
        GKE_LIST_NODE_POOLS,
        GKE_UPDATE_NODE_POOL,
    ),
    ClusterSource.EKS: _Steps(
        EKS_CREATE_CLUSTER,
        EKS_CREATE_NODEGROUP,
        EKS_DELETE_NODEGROUP,
        EKS_DELETE_CLUSTER,
        EKS_KUBECONFIG,
        "node group",
        EKS_LIST_NODEGROUPS,
        EKS_UPDATE_NODEGROUP,
    ),
    ClusterSource.AKS: _Steps(
        AKS_CREATE_CLUSTER,
        AKS_CREATE_AGENT_POOL,
        AKS_DELETE_AGENT_POOL,
        AKS_DELETE_CLUSTER,
        AKS_KUBECONFIG,
        "agent pool",
        AKS_LIST_AGENT_POOLS,
        AKS_UPDATE_AGENT_POOL,
    ),
}

# Retryable cloud errors (throttling, 503, an operation still running, a resource in use) are
# retried with backoff; the activities mark permanent ones non-retryable.
CLOUD_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
)
# Deletions must get through eventually; they are retried for as long as it takes, except on
# a permanent error, which is reported rather than hidden.
# A worker that dies mid-operation is noticed after this long; the retry resumes the operation.
HEARTBEAT = timedelta(minutes=2)
STEP_TIMEOUT = timedelta(minutes=60)


class ProvisioningFailedError(Exception):
    """The saga failed at ``step`` (and compensated): the activity's error type and message,
    what could not be cleaned up, and the alternatives stocked out before the last attempt."""

    def __init__(
        self,
        step: str,
        error_type: str | None,
        message: str,
        cleanup: list[str],
        stocked_out: list[str] | None = None,
    ) -> None:
        super().__init__(f"{step}: {error_type}: {message}")
        self.step = step
        self.error_type = error_type
        self.message = message
        self.cleanup = cleanup
        self.stocked_out = stocked_out or []


def describe(exc: ActivityError) -> str:
    """``<error type>: <message>`` of an activity failure (the cloud's words, no secrets)."""
    cause = exc.__cause__
    if isinstance(cause, ApplicationError):
        return f"{cause.type}: {cause.message}"
    return str(cause or exc)


class Provisioner:
    """Carries out the saga; ``on_step`` reports progress to the workflow's status."""

    def __init__(
        self,
        spec: InferenceCluster,
        state: ProvisioningState,
        deadline: timedelta,
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        self.spec = spec
        self.state = state
        self.steps = STEPS[spec.spec.cluster.source]
        self.deadline = deadline
        self.heartbeat = heartbeat
        self._step = "planning"
        # Per pool, the plans of its alternatives (the pool, then its fallbacks), from plan().
        self._options: dict[str, list[PoolPlan]] = {}
        # The attempts of the last pool created that the cloud answered with a stockout.
        self._stocked_out: list[str] = []

    @property
    def step(self) -> str:
        return self._step

    @step.setter
    def step(self, name: str) -> None:
        # Every step is logged with its times too (describe and rollout status show them).
        self._step = name
        cluster_steps.begin(self.state.steps, name)

    def _cloud(self) -> CloudCluster:
        if self.state.cloud is None:
            info = workflow.info()
            # The first run's ID is stable across continue-as-new and unique per incarnation
            # of the cluster: a re-created InferenceCluster never adopts an older cloud cluster.
            owner = info.first_execution_run_id
            self.state.cloud = cloud_cluster(self.spec, owner)
        return self.state.cloud

    async def classes(self) -> dict[str, InferenceClass]:
        found: list[InferenceClass] = await workflow.execute_activity(
            FLEET_CLASSES,
            needed_classes(self.spec),
            result_type=list[InferenceClass],
            start_to_close_timeout=timedelta(seconds=30),
            summary="read the pools' classes from the fleet",
        )
        return {c.name: c for c in found}

    def plan(self, classes: dict[str, InferenceClass]) -> tuple[list[PoolPlan], list[str]]:
        """The pools as created so far (a pool created as a fallback keeps it), and each pool's
        alternatives for when one is created."""
        plans, problems = plan_pools(as_created(self.spec, self.state.chosen), classes)
        self._options, more = plan_alternatives(self.spec, classes)
        return plans, list(dict.fromkeys([*problems, *more]))

    async def provision(self, plans: list[PoolPlan]) -> None:
        """Create everything; raises :class:`ProvisioningFailedError` after compensating."""
        cloud = self._cloud()
        try:
            self.step = f"create cluster {cloud.name}"
            self._record("cluster", cloud.name)
            await self._create(self.steps.create_cluster, cloud, self.step)
            for plan in plans:
                await self._create_pool(cloud, plan, log=True)
            self.step = "write kubeconfig on the worker"
            await workflow.execute_activity(
                self.steps.kubeconfig,
                cloud,
                start_to_close_timeout=timedelta(minutes=2),
                # A worker that dies while writing it is noticed this soon, not in 2 minutes.
                heartbeat_timeout=self.heartbeat,
                retry_policy=CLOUD_RETRY,
                summary=self.step,
            )
        except ActivityError as exc:
            cluster_steps.end(self.state.steps, describe(exc))
            if self._not_ours(exc):
                # Someone else's cluster of that name: never delete it.
                self.state.created = [r for r in self.state.created if r.kind != "cluster"]
            problems = await self.deprovision()
            cause = exc.__cause__
            if isinstance(cause, ApplicationError):
                error_type, message = cause.type, cause.message
            else:
                error_type, message = None, str(cause or exc)
            raise ProvisioningFailedError(
                self.step, error_type, message, problems, self._stocked_out
            ) from None
        self.state.provisioned = True
        self._step = "provisioned"
        cluster_steps.end(self.state.steps)

    async def refresh_kubeconfig(self) -> str | None:
        """Write the kubeconfig again with a fresh token; the problem, if any."""
        cloud = self._cloud()
        try:
            await workflow.execute_activity(
                self.steps.kubeconfig,
                cloud,
                start_to_close_timeout=timedelta(minutes=2),
                schedule_to_close_timeout=timedelta(minutes=5),
                retry_policy=CLOUD_RETRY,
                summary="refresh the kubeconfig token on the worker",
            )
        except ActivityError as exc:
            return describe(exc)
        return None

    def _not_ours(self, exc: ActivityError) -> bool:
        cause = exc.__cause__
        return (
            self.step.startswith("create cluster")
            and isinstance(cause, ApplicationError)
            and cause.type == error_type(Reason.ALREADY_EXISTS)
        )

    def _record(self, kind: str, name: str) -> None:
        if not any(r.kind == kind and r.name == name for r in self.state.created):
            self.state.created.append(CreatedRef(kind=kind, name=name))

    async def _create(self, activity: str, arg: object, summary: str) -> CreateResult:
        result: CreateResult = await workflow.execute_activity(
            activity,
            arg,
            result_type=CreateResult,
            start_to_close_timeout=STEP_TIMEOUT,
            schedule_to_close_timeout=self.deadline,
            heartbeat_timeout=self.heartbeat,
            retry_policy=CLOUD_RETRY,
            summary=summary,
        )
        return result

    def _declared(self, name: str) -> NodePool | None:
        return next((p for p in self.spec.spec.node_pools if p.name == name), None)

    async def _create_pool(self, cloud: CloudCluster, plan: PoolPlan, *, log: bool) -> None:
        """Create one pool, trying its alternatives in order while the cloud reports a stockout
        (:func:`~modelfleet.cluster.alternatives.next_alternative` decides); what a stocked-out
        attempt created is deleted before the next. The last failure is raised. ``log``: each
        attempt is a step of the step log."""
        pool = self._declared(plan.name)
        options = self._options.get(plan.name, [])
        tries = alternatives(pool) if pool is not None else []
        if pool is None or len(options) != len(tries):
            # Not declared (cannot happen) or unplanned: the plan as given, no alternatives.
            options, tries = [plan], []
        self._stocked_out = []
        outcomes: list[Reason | None] = []
        while (index := next_alternative(len(options), outcomes)) is not None:
            option = options[index]
            if pool is not None and tries:
                name = attempt_name(self.steps.pool_word, pool, tries[index])
            else:
                name = f"create {self.steps.pool_word} {plan.name}"
            if log:
                self.step = name
            self._record("pool", plan.name)
            try:
                await self._create(
                    self.steps.create_pool, PoolRequest(cluster=cloud, pool=option), name
                )
            except ActivityError as exc:
                cause = exc.__cause__
                outcomes.append(
                    reason_of(cause.type) if isinstance(cause, ApplicationError) else None
                )
                if next_alternative(len(options), outcomes) is None:
                    if outcomes[-1] is Reason.STOCKOUT and len(options) > 1:
                        self._stocked_out.append(name)
                    raise
                self._stocked_out.append(name)
                if log:
                    cluster_steps.end(self.state.steps, describe(exc))
                # The failed attempt's pool exists (in error) until deleted: the next attempt
                # creates one of the same name.
                await self._delete_pool(cloud, plan.name, log=log)
                continue
            if pool is not None and tries:
                chosen = choice(pool, tries[index])
                if chosen is None:
                    self.state.chosen.pop(plan.name, None)
                else:
                    self.state.chosen[plan.name] = chosen
            return

    async def _delete_pool(
        self, cloud: CloudCluster, name: str, *, log: bool, why: str = " (stocked out)"
    ) -> None:
        what = f"delete {self.steps.pool_word} {name}{why}"
        if log:
            cluster_steps.begin(self.state.steps, what)
        await workflow.execute_activity(
            self.steps.delete_pool,
            PoolRef(cluster=cloud, pool=name),
            result_type=DeleteOutcome,
            start_to_close_timeout=STEP_TIMEOUT,
            schedule_to_close_timeout=self.deadline,
            heartbeat_timeout=self.heartbeat,
            retry_policy=CLOUD_RETRY,
            summary=what,
        )
        if log:
            cluster_steps.end(self.state.steps)
        self.state.created = [
            r for r in self.state.created if not (r.kind == "pool" and r.name == name)
        ]

    def ours(self) -> set[str]:
        """The pools this cluster created (only those may be deleted when undeclared)."""
        return {r.name for r in self.state.created if r.kind == "pool"}

    async def list_pools(self) -> list[PoolShape]:
        shapes: list[PoolShape] = await workflow.execute_activity(
            self.steps.list_pools,
            self._cloud(),
            result_type=list[PoolShape],
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=CLOUD_RETRY,
            schedule_to_close_timeout=timedelta(minutes=10),
            summary=f"list the cluster's {self.steps.pool_word}s",
        )
        return shapes

    async def change_pools(self, changes: PoolChanges) -> None:
        """Create, resize, then delete pools (a delete last: new capacity comes first)."""
        cloud = self._cloud()
        for plan in changes.create:
            declared = self._declared(plan.name)
            await self._create_pool(cloud, plan, log=bool(declared and declared.fallbacks))
        for plan in changes.resize:
            await self._create(
                self.steps.update_pool,
                PoolRequest(cluster=cloud, pool=plan),
                f"resize {self.steps.pool_word} {plan.name}",
            )
        for name in changes.delete:
            await self._delete_pool(cloud, name, log=False, why="")
            self.state.chosen.pop(name, None)

    async def deprovision(self) -> list[str]:
        """Delete what this workflow created, newest first; the problems that remain."""
        cloud = self.state.cloud
        problems: list[str] = []
        if cloud is None:
            return problems
        for ref in reversed(list(self.state.created)):
            arg: PoolRef | CloudCluster
            if ref.kind == "pool":
                activity, arg, what = (
                    self.steps.delete_pool,
                    PoolRef(cluster=cloud, pool=ref.name),
                    f"delete {self.steps.pool_word} {ref.name}",
                )
            else:
                activity, arg, what = (
                    self.steps.delete_cluster,
                    cloud,
                    f"delete cluster {ref.name}",
                )
            cluster_steps.begin(self.state.steps, what)
            try:
                await workflow.execute_activity(
                    activity,
                    arg,
                    result_type=DeleteOutcome,
                    start_to_close_timeout=STEP_TIMEOUT,
                    heartbeat_timeout=self.heartbeat,
                    retry_policy=CLOUD_RETRY,
                    summary=what,
                )
            except ActivityError as exc:
                problems.append(f"{what}: {describe(exc)}")
                cluster_steps.end(self.state.steps, describe(exc))
                continue
            cluster_steps.end(self.state.steps)
            self.state.created.remove(ref)
            if ref.kind == "pool":
                self.state.chosen.pop(ref.name, None)
        return problems
