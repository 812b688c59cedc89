"""The names both sides of the workflow/activity contract agree on: the task queue and the activity
names. Activity names are dotted, so the Temporal UI timeline reads as the rollout's steps.

Layer rule: constants only; workflows, activities, the worker and the CLI import them.
"""

from __future__ import annotations

TASK_QUEUE = "modelfleet"

KUBE_APPLY = "kube.apply"
KUBE_DELETE = "kube.delete"
KUBE_WAIT_READY = "kube.wait_ready"
KUBE_CHECK_READY = "kube.check_ready"
KUBE_PROBE = "kube.probe"
FLEET_PLACE = "fleet.place"
FLEET_RELEASE = "fleet.release"
FLEET_DRY_PLACE = "fleet.dry_place"
FLEET_PUBLISH_CLUSTER = "fleet.publish_cluster"
FLEET_REPLICAS_ON = "fleet.replicas_on"
FLEET_REPLICAS_BY_POOL = "fleet.replicas_by_pool"
AUTOSCALER_TARGET = "autoscaler.target"
AUTOSCALER_READ_METRICS = "autoscaler.read_metrics"
AUTOSCALER_SCALE = "autoscaler.scale"
AUTOSCALER_GATEWAY_WAITING = "autoscaler.gateway_waiting"
FLEET_PLACEMENT_CURRENT = "fleet.placement_current"
