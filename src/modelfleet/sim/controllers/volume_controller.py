"""The volume controller of a simulated cluster: a PersistentVolumeClaim whose StorageClass exists
(its own, or the cluster's default class when it names none) gets a dynamically provisioned
PersistentVolume and turns Bound, as a CSI provisioner with ``volumeBindingMode: Immediate``
does; a claim of an unknown class stays Pending with the provisioner's event. Deleting a claim
deletes its volume (reclaim policy Delete).

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes through the
cluster's store (:class:`~.context.ClusterContext`); :func:`binding_problem` is pure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.controllers.context import ClusterContext, meta_of

__all__ = ["VOLUME_CONTROLLER", "VolumeController", "binding_problem", "claim_class"]

VOLUME_CONTROLLER = "persistentvolume-controller"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def claim_class(
    claim: Mapping[str, Any], classes: Sequence[Mapping[str, Any]]
) -> tuple[str | None, Mapping[str, Any] | None]:
    """(the class name the claim uses, that StorageClass or None when it does not exist)."""
    wanted = (claim.get("spec") or {}).get("storageClassName")
    if wanted is None:
        for sc in classes:
            if (meta_of(sc).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
                return str(meta_of(sc)["name"]), sc
        return None, None
    for sc in classes:
        if meta_of(sc).get("name") == wanted:
            return str(wanted), sc
    return str(wanted), None


def binding_problem(claim: Mapping[str, Any], classes: Sequence[Mapping[str, Any]]) -> str | None:
    """Why ``claim`` cannot be provisioned now (the message a real provisioner records)."""
    name, sc = claim_class(claim, classes)
    if name is None:
        return "no persistent volumes available for this claim and no storage class is set"
    if sc is None:
        return f'storageclass.storage.k8s.io "{name}" not found'
    return None


def volume_name(claim: Mapping[str, Any]) -> str:
    return f"pvc-{meta_of(claim)['uid']}"


class VolumeController:
    def __init__(self, ctx: ClusterContext) -> None:
        self._ctx = ctx

    def _classes(self) -> list[dict[str, Any]]:
        return self._ctx.store.list_objects(self._ctx.rt("storageclass")).items

    def pending_claims(self) -> list[tuple[str, str]]:
        """(namespace, name) of every claim not yet Bound: a new StorageClass may bind them."""
        return [
            (str(meta_of(c).get("namespace", "")), str(meta_of(c)["name"]))
            for c in self._ctx.store.list_objects(self._ctx.rt("pvc")).items
            if (c.get("status") or {}).get("phase") != "Bound"
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        ctx = self._ctx
        claim = ctx.peek("pvc", namespace, name)
        if claim is None or meta_of(claim).get("deletionTimestamp"):
            return
        if (claim.get("status") or {}).get("phase") == "Bound":
            return
        classes = self._classes()
        problem = binding_problem(claim, classes)
        if problem is not None:
            await ctx.write_status("pvc", claim, {"phase": "Pending"})
            await ctx.events.record(
                claim, "Warning", "ProvisioningFailed", problem, component=VOLUME_CONTROLLER
            )
            return
        class_name, _ = claim_class(claim, classes)
        spec = claim.get("spec") or {}
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        modes = list(spec.get("accessModes") or ["ReadWriteOnce"])
        volume = volume_name(claim)
        if ctx.peek("pv", None, volume) is None:
            await ctx.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": volume},
                    "spec": {
                        "capacity": {"storage": storage},
                        "accessModes": modes,
                        "persistentVolumeReclaimPolicy": "Delete",
                        "storageClassName": class_name,
                        "claimRef": {
                            "kind": "PersistentVolumeClaim",
                            "namespace": namespace,
                            "name": name,
                            "uid": meta_of(claim)["uid"],
                        },
                        "csi": {"driver": "sim.modelfleet.dev/rwx", "volumeHandle": volume},
                    },
                },
                field_manager=VOLUME_CONTROLLER,
            )
            pv = ctx.peek("pv", None, volume)
            if pv is not None:
                await ctx.write_status("pv", pv, {"phase": "Bound"})
        await ctx.store.patch(
            "v1",
            "PersistentVolumeClaim",
            name,
            {"spec": {"volumeName": volume, "storageClassName": class_name}},
            namespace=namespace,
            field_manager=VOLUME_CONTROLLER,
        )
        claim = ctx.peek("pvc", namespace, name)
        if claim is None:
            return
        await ctx.write_status(
            "pvc",
            claim,
            {"phase": "Bound", "accessModes": modes, "capacity": {"storage": storage}},
        )
        await ctx.events.record(
            claim,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {volume}",
            component=VOLUME_CONTROLLER,
        )

    async def reclaim(self, claim_uid: str) -> None:
        """Reclaim policy Delete: a deleted claim's volume goes with it."""
        with contextlib.suppress(ApiError):
            await self._ctx.store.delete("v1", "PersistentVolume", f"pvc-{claim_uid}")
