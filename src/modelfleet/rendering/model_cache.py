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

Other sources (``source: URI``) use the same Job shape, marker and progress lines (``du -sk`` of
the volume against the declared size every few seconds, so progress is bytes for every tool), a
pinned tool per scheme, and the auth Secret mounted as the file that tool reads:

* ``s3://bucket/prefix``: ``python:3.12.8-slim``, ``pip install awscli==1.35.0``, then
  ``aws s3 sync s3://bucket/prefix /mnt/models --only-show-errors``; credentials: the Secret's
  value is an AWS shared credentials file at ``AWS_SHARED_CREDENTIALS_FILE`` (without one, the
  pod's own identity, e.g. IRSA or instance profile, is used).
* ``gs://bucket/prefix``: ``python:3.12.8-slim``, ``pip install google-cloud-storage==2.18.2``,
  then a short script that downloads every object under the prefix (skipping complete files);
  credentials: a service-account JSON key at ``GOOGLE_APPLICATION_CREDENTIALS`` (without one, an
  anonymous client for public buckets).
* ``oci://registry/repo:tag``: ``ghcr.io/oras-project/oras:v1.2.0`` (alpine-based, has ``sh``),
  ``oras pull registry/repo:tag -o /mnt/models``; credentials: a Docker ``config.json`` passed
  with ``--registry-config``.

Pure: no I/O, no clock; equal inputs render equal manifests.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.caches import ModelCache, UriScheme, UriSource
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


# Pinned tools of the other sources (see the module docstring).
AWSCLI_VERSION = "1.35.0"
GCS_VERSION = "2.18.2"
ORAS_IMAGE = "ghcr.io/oras-project/oras:v1.2.0"
# Where the auth Secret's value is mounted as a file for those tools.
AUTH_DIR = "/var/run/modelfleet/auth"
AUTH_FILE = f"{AUTH_DIR}/credentials"
AUTH_VOLUME = "auth"

GCS_SCRIPT = """import os, sys
from google.cloud import storage
bucket, _, prefix = sys.argv[1].removeprefix("gs://").partition("/")
creds = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
client = storage.Client() if creds else storage.Client.create_anonymous_client()
for blob in client.list_blobs(bucket, prefix=prefix):
    rel = blob.name[len(prefix):].lstrip("/")
    if not rel or blob.name.endswith("/"):
        continue
    dest = os.path.join(sys.argv[2], rel)
    if os.path.exists(dest) and os.path.getsize(dest) == blob.size:
        continue
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    blob.download_to_filename(dest + ".part")
    os.replace(dest + ".part", dest)
"""

# Per scheme: (image, the install step, the download step); $MODEL_URI is the source.
_TOOLS: dict[UriScheme, tuple[str, str, str]] = {
    UriScheme.S3: (
        DOWNLOADER_IMAGE,
        f'pip install --quiet --no-cache-dir "awscli=={AWSCLI_VERSION}"',
        f'aws s3 sync "$MODEL_URI" {CACHE_MOUNT_PATH} --only-show-errors',
    ),
    UriScheme.GCS: (
        DOWNLOADER_IMAGE,
        f'pip install --quiet --no-cache-dir "google-cloud-storage=={GCS_VERSION}"',
        f'python -c "$GCS_SCRIPT" "$MODEL_URI" {CACHE_MOUNT_PATH}',
    ),
    UriScheme.OCI: (
        ORAS_IMAGE,
        "true",
        f'if [ -f "{AUTH_FILE}" ]; then set -- --registry-config "{AUTH_FILE}"; fi\n'
        f'oras pull "$@" "${{MODEL_URI#oci://}}" -o {CACHE_MOUNT_PATH}',
    ),
}
# The variable each tool reads its credentials file from (oras takes a flag instead).
_AUTH_ENV = {
    UriScheme.S3: "AWS_SHARED_CREDENTIALS_FILE",
    UriScheme.GCS: "GOOGLE_APPLICATION_CREDENTIALS",
}


def uri_script(scheme: UriScheme) -> str:
    """The shell script of a ``source: URI`` download: as the Hugging Face one, with the tool of
    ``scheme`` (progress from ``du -sk``, which every image's ``du`` supports)."""
    _, install, fetch = _TOOLS[scheme]
    return f"""set -eu
marker="{CACHE_MOUNT_PATH}/{MARKER_PREFIX}$SOURCE_DIGEST"
if [ -f "$marker" ]; then
  echo "{PROGRESS_PREFIX} bytes=$MODEL_BYTES total=$MODEL_BYTES"
  echo "already hydrated ($MODEL_URI)"
  exit 0
fi
{install}
( while sleep {PROGRESS_EVERY_SECONDS}; do
    kib=$(du -sk {CACHE_MOUNT_PATH} | cut -f1)
    echo "{PROGRESS_PREFIX} bytes=$((kib * 1024)) total=$MODEL_BYTES"
  done ) &
reporter=$!
{fetch}
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
    art = cache.spec.artifact
    if isinstance(art, UriSource):
        source = art.uri
    elif art is not None:
        source = f"{art.repo}@{art.revision or ''}"
    else:
        source = cache.spec.source.value
    return short_hash(source, 10)


def job_name(namespace: str, cache: str, digest: str) -> str:
    return child_name(claim_name(namespace, cache), "hydrate", digest)


def auth_secret_name(namespace: str, cache: str) -> str:
    return f"{claim_name(namespace, cache)}-auth"


def cache_bytes(cache: ModelCache) -> int:
    return cache_gib(cache) << 30


def cache_gib(cache: ModelCache) -> int:
    art = cache.spec.artifact
    return art.size_gib if art is not None else 1


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
    size = cache_gib(cache)
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
    art = cache.spec.artifact
    if isinstance(art, UriSource):
        return _render_uri_job(
            cache, art, cluster=cluster, namespace=namespace, with_token=with_token
        )
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
    mounts = [{"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH}]
    volumes = [
        {
            "name": CACHE_VOLUME,
            "persistentVolumeClaim": {"claimName": claim_name(cache.namespace, cache.name)},
        }
    ]
    return _job(
        cache,
        cluster=cluster,
        namespace=namespace,
        image=DOWNLOADER_IMAGE,
        script=DOWNLOAD_SCRIPT,
        env=env,
        mounts=mounts,
        volumes=volumes,
    )


def _render_uri_job(
    cache: ModelCache, source: UriSource, *, cluster: str, namespace: str, with_token: bool
) -> dict[str, Any]:
    """The Job of a ``source: URI`` cache: the scheme's pinned tool, the token as a file."""
    scheme = source.scheme
    image, _, _ = _TOOLS[scheme]
    digest = source_digest(cache)
    env: list[dict[str, Any]] = [
        # MODEL_REPO names the source in the simulated fleet's messages, as for Hugging Face.
        {"name": "MODEL_REPO", "value": source.uri},
        {"name": "MODEL_URI", "value": source.uri},
        {"name": "MODEL_BYTES", "value": str(cache_bytes(cache))},
        {"name": "SOURCE_DIGEST", "value": digest},
    ]
    if scheme is UriScheme.GCS:
        env.append({"name": "GCS_SCRIPT", "value": GCS_SCRIPT})
    mounts: list[dict[str, Any]] = [{"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH}]
    volumes: list[dict[str, Any]] = [
        {
            "name": CACHE_VOLUME,
            "persistentVolumeClaim": {"claimName": claim_name(cache.namespace, cache.name)},
        }
    ]
    if with_token:
        # The worker writes the value under TOKEN_ENV; the tool reads it as a file.
        secret = auth_secret_name(cache.namespace, cache.name)
        volumes.append(
            {
                "name": AUTH_VOLUME,
                "secret": {
                    "secretName": secret,
                    "items": [{"key": TOKEN_ENV, "path": "credentials"}],
                    "defaultMode": 0o400,
                },
            }
        )
        mounts.append({"name": AUTH_VOLUME, "mountPath": AUTH_DIR, "readOnly": True})
        if scheme in _AUTH_ENV:
            env.append({"name": _AUTH_ENV[scheme], "value": AUTH_FILE})
    return _job(
        cache,
        cluster=cluster,
        namespace=namespace,
        image=image,
        script=uri_script(scheme),
        env=env,
        mounts=mounts,
        volumes=volumes,
    )


def _job(
    cache: ModelCache,
    *,
    cluster: str,
    namespace: str,
    image: str,
    script: str,
    env: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
) -> dict[str, Any]:
    """The Job around one download container, the same for every source."""
    labels = cache_labels(cache, cluster)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(cache.namespace, cache.name, source_digest(cache)),
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
                            "image": image,
                            "command": ["/bin/sh", "-c", script],
                            "env": env,
                            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
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
