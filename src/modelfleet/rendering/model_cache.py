"""What a ModelCache puts on one workload cluster: the PersistentVolumeClaim that holds the
weights, the hydration Job that downloads them into it, and the metadata of the auth Secret the
Job reads its token from (the worker fills in the value; it never passes through here).

Names follow Modelplane's contract, so a replica finds the volume from the cache's name alone:
the claim is ``child_name("modelcache", <namespace>, <cache>)`` in the workload namespace, and
consumers mount it read-only at ``/mnt/models``.

The downloader (documented in docs/model-cache.md): a pinned ``python`` image installs a pinned
``huggingface_hub`` and runs ``hf download <repo> [--revision r] --local-dir /mnt/models``. It
prints ``modelfleet-progress bytes=<done> total=<total>`` every few seconds (``du`` of the
volume against the declared size), which is how progress is observed, and writes a per-revision
marker file when done, so a rerun after a crash skips what is complete and ``hf download``
resumes partial files.

Pure: no I/O, no clock; equal inputs render equal manifests.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.caches import ModelCache
from modelfleet.api.naming import (
    LABEL_CLUSTER,
    LABEL_MANAGED_BY,
    LABEL_NAMESPACE,
    MANAGED_BY,
    child_name,
    short_hash,
)

CACHE_MOUNT_PATH = "/mnt/models"
CACHE_VOLUME = "model-cache"
LABEL_MODEL_CACHE = "modelfleet.dev/model-cache"
# Pinned, never floating: a render must mean the same thing tomorrow.
DOWNLOADER_IMAGE = "python:3.12.8-slim"
HF_HUB_VERSION = "0.35.3"
PROGRESS_PREFIX = "modelfleet-progress"
MARKER_PREFIX = ".modelfleet-hydrated-"
TOKEN_ENV = "HF_TOKEN"
# Seconds between two progress lines of the downloader.
PROGRESS_EVERY_SECONDS = 5

DOWNLOAD_SCRIPT = f"""set -eu
marker="{CACHE_MOUNT_PATH}/{MARKER_PREFIX}$SOURCE_DIGEST"
if [ -f "$marker" ]; then
  echo "{PROGRESS_PREFIX} bytes=$MODEL_BYTES total=$MODEL_BYTES"
  echo "already hydrated ($MODEL_REPO at ${{MODEL_REVISION:-main}})"
  exit 0
fi
pip install --quiet --no-cache-dir "huggingface_hub=={HF_HUB_VERSION}"
( while sleep {PROGRESS_EVERY_SECONDS}; do
    echo "{PROGRESS_PREFIX} bytes=$(du -sb {CACHE_MOUNT_PATH} | cut -f1) total=$MODEL_BYTES"
  done ) &
reporter=$!
if [ -n "${{MODEL_REVISION:-}}" ]; then
  hf download "$MODEL_REPO" --revision "$MODEL_REVISION" --local-dir {CACHE_MOUNT_PATH}
else
  hf download "$MODEL_REPO" --local-dir {CACHE_MOUNT_PATH}
fi
kill "$reporter" 2>/dev/null || true
touch "$marker"
echo "{PROGRESS_PREFIX} bytes=$MODEL_BYTES total=$MODEL_BYTES"
"""


def claim_name(namespace: str, cache: str) -> str:
    """The PersistentVolumeClaim of ``namespace/cache`` on every cluster (Modelplane's name)."""
    return child_name("modelcache", namespace, cache)


def source_digest(cache: ModelCache) -> str:
    """Changes exactly when the weights to stage change (repo or revision): a new digest means
    a new hydration Job and a re-hydration of every cluster."""
    hf = cache.spec.hugging_face
    source = f"{hf.repo}@{hf.revision or ''}" if hf is not None else cache.spec.source.value
    return short_hash(source, 10)


def job_name(namespace: str, cache: str, digest: str) -> str:
    return child_name(claim_name(namespace, cache), "hydrate", digest)


def auth_secret_name(namespace: str, cache: str) -> str:
    return f"{claim_name(namespace, cache)}-auth"


def cache_bytes(cache: ModelCache) -> int:
    hf = cache.spec.hugging_face
    return (hf.size_gib if hf is not None else 1) << 30


def cache_labels(cache: ModelCache, cluster: str) -> dict[str, str]:
    labels = {
        LABEL_MODEL_CACHE: cache.name,
        LABEL_NAMESPACE: cache.namespace,
        LABEL_CLUSTER: cluster,
        LABEL_MANAGED_BY: MANAGED_BY,
    }
    return {key: labels[key] for key in sorted(labels)}


def render_claim(
    cache: ModelCache, *, cluster: str, namespace: str, storage_class: str | None
) -> dict[str, Any]:
    """The volume; ``storage_class`` None leaves the choice to the cluster's default class."""
    hf = cache.spec.hugging_face
    size = hf.size_gib if hf is not None else 1
    spec: dict[str, Any] = {
        "accessModes": [cache.spec.access_mode.value],
        "resources": {"requests": {"storage": f"{size}Gi"}},
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim_name(cache.namespace, cache.name),
            "namespace": namespace,
            "labels": cache_labels(cache, cluster),
        },
        "spec": spec,
    }


def render_auth_secret(cache: ModelCache, *, cluster: str, namespace: str) -> dict[str, Any]:
    """The Secret's metadata only: the worker adds the token right before applying it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": auth_secret_name(cache.namespace, cache.name),
            "namespace": namespace,
            "labels": cache_labels(cache, cluster),
        },
        "type": "Opaque",
    }


def render_job(
    cache: ModelCache, *, cluster: str, namespace: str, with_token: bool
) -> dict[str, Any]:
    """The hydration Job. It fails on the first error (``backoffLimit: 0``): the ModelCache
    workflow retries with its own back-off, so every attempt is visible per cluster."""
    hf = cache.spec.hugging_face
    digest = source_digest(cache)
    env: list[dict[str, Any]] = [
        {"name": "MODEL_REPO", "value": hf.repo if hf is not None else ""},
        {"name": "MODEL_BYTES", "value": str(cache_bytes(cache))},
        {"name": "SOURCE_DIGEST", "value": digest},
        {"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"},
    ]
    if hf is not None and hf.revision:
        env.append({"name": "MODEL_REVISION", "value": hf.revision})
    if with_token:
        secret = auth_secret_name(cache.namespace, cache.name)
        env.append(
            {
                "name": TOKEN_ENV,
                "valueFrom": {"secretKeyRef": {"name": secret, "key": TOKEN_ENV}},
            }
        )
    labels = cache_labels(cache, cluster)
    claim = claim_name(cache.namespace, cache.name)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(cache.namespace, cache.name, digest),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "download",
                            "image": DOWNLOADER_IMAGE,
                            "command": ["/bin/sh", "-c", DOWNLOAD_SCRIPT],
                            "env": env,
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                            "volumeMounts": [{"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH}],
                        }
                    ],
                    "volumes": [
                        {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
                    ],
                },
            },
        },
    }


def parse_progress(log: str) -> tuple[int, int] | None:
    """(bytes done, total) from the downloader's last progress line in ``log``, if any."""
    for line in reversed(log.splitlines()):
        if not line.startswith(PROGRESS_PREFIX):
            continue
        fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
        try:
            return int(fields["bytes"]), int(fields["total"])
        except (KeyError, ValueError):
            continue
    return None


def last_error(log: str) -> str:
    """The downloader's last line that is not a progress line (its error, when it failed)."""
    for line in reversed(log.splitlines()):
        text = line.strip()
        if text and not text.startswith(PROGRESS_PREFIX):
            return text[:300]
    return ""
