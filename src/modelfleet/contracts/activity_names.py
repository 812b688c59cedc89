"""The names both sides of the workflow/activity contract agree on: the task queue and the activity
names. Activity names are dotted, so the Temporal UI timeline reads as the rollout's steps.

Layer rule: constants only; workflows, activities, the worker and the CLI import them.
"""

from __future__ import annotations

TASK_QUEUE = "modelfleet"

KUBE_APPLY = "kube.apply"
KUBE_DELETE = "kube.delete"
# The heartbeat timeout workflows give kube.apply and kube.delete: the activities beat every
# quarter of it from a helper thread (``activities.keepalive``), so a killed worker's attempt is
# retried after this long instead of after its whole start-to-close timeout.
KUBE_HEARTBEAT_SECONDS = 20
KUBE_CHECK_READY = "kube.check_ready"
# One readiness check per attempt; "not yet" is a benign retryable error, so a long readiness
# wait is Temporal retrying a short activity instead of one activity holding a slot for up to
# the progress deadline (issue 11).
KUBE_POLL_READY = "kube.poll_ready"
KUBE_PROBE = "kube.probe"
KUBE_DRIFT = "kube.drift"
# After a dark spell: which replicas have objects on a cluster, then delete the orphans'.
KUBE_REPLICAS_FOUND = "kube.replicas_found"
KUBE_SWEEP_REPLICAS = "kube.sweep_replicas"
# The per-cluster replica watch: one listing per kind answers for every watched replica.
KUBE_SCAN_REPLICAS = "kube.scan_replicas"
FLEET_PLACE = "fleet.place"
FLEET_RELEASE = "fleet.release"
FLEET_DRY_PLACE = "fleet.dry_place"
FLEET_PUBLISH_CLUSTER = "fleet.publish_cluster"
FLEET_REPLICAS_ON = "fleet.replicas_on"
FLEET_REPLICAS_BY_POOL = "fleet.replicas_by_pool"
# Whether a cluster's workflow will sweep it on its return from dark (asked by a teardown that
# cannot reach the cluster, which may then leave what is there to that sweep).
FLEET_SWEEP_PENDING = "fleet.sweep_pending"
AUTOSCALER_TARGET = "autoscaler.target"
AUTOSCALER_READ_METRICS = "autoscaler.read_metrics"
AUTOSCALER_SCALE = "autoscaler.scale"
AUTOSCALER_GATEWAY_WAITING = "autoscaler.gateway_waiting"
# A replica's engines' HTTP answers so far (served and 5xx), from their metrics: a replacement's
# error rate over its minReadySeconds, judged by its deployment.
ENGINE_ERRORS = "engine.errors"
# A canary step's reading: the engines' TTFT histograms and HTTP answers of the new and the
# stable replicas, and with a baseline their figures over the window since it.
ENGINE_FIGURES = "engine.figures"
FLEET_PLACEMENT_CURRENT = "fleet.placement_current"
