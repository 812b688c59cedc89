"""Credentials never enter Temporal (architecture 3): with a bearer token and a client key planted
in one cluster's kubeconfig on the worker, a rollout onto that cluster (with API errors on the
way, so failure messages are recorded too) leaves neither anywhere in any workflow history of
the namespace, in the server's storage, or in the worker's output. With ``MODELFLEET_PAYLOAD_KEY``
every payload in history is encrypted, and the rollout still works.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml
from crash_env import CrashEnv, all_ready, crash_env
from integration_support import deployment
from temporalio.api.common.v1 import Payload

from modelfleet.api.kinds import parse_resource
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import service_id
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.sim.simulated_fleet import SimulatedFleet
from modelfleet.worker.codec import ENCODING, EncryptionCodec

SECRET_CLUSTER = "l4-dev"
PLANTED_TOKEN = "mfplanted-token-5f0c2e8b9d4a47c1a3e6"
PLANTED_KEY_BODY = "MFPLANTEDKEYaGVsbG8tdGhpcy1pcy1ub3QtYS1yZWFsLWtleQ"
PLANTED_KEY_PEM = f"-----BEGIN PRIVATE KEY-----\n{PLANTED_KEY_BODY}\n-----END PRIVATE KEY-----\n"
PLANTED_CERT_PEM = (
    "-----BEGIN CERTIFICATE-----\nMFPLANTEDCERTbm90LWEtY2VydA\n-----END CERTIFICATE-----\n"
)
IMAGE = "vllm/vllm-openai:v0.23.0"
PLANTED_API_KEY = "sk-mfplanted-api-key-3c9d1e7a5b"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def plant_credentials(fleet: SimulatedFleet) -> None:
    """Give one cluster's kubeconfig a bearer token and client certificate/key data (the
    emulator ignores authentication, so the rollout must still work)."""
    path = fleet.kubeconfig(SECRET_CLUSTER)
    doc = yaml.safe_load(path.read_text())
    for user in doc["users"]:
        user["user"] = {
            "token": PLANTED_TOKEN,
            "client-certificate-data": b64(PLANTED_CERT_PEM),
            "client-key-data": b64(PLANTED_KEY_PEM),
        }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def plant_api_key(fleet: SimulatedFleet) -> None:
    """Give the worker the API key of a protected ModelService (a secrets file)."""
    plant_credentials(fleet)
    secrets = fleet.kubeconfig_dir / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "svc-keys").write_text(f"{PLANTED_API_KEY}\n")


def planted_values() -> dict[str, bytes]:
    return {
        "service API key": PLANTED_API_KEY.encode(),
        "bearer token": PLANTED_TOKEN.encode(),
        "client key": PLANTED_KEY_BODY.encode(),
        "client key data": b64(PLANTED_KEY_PEM).encode(),
        "client certificate data": b64(PLANTED_CERT_PEM).encode(),
    }


async def every_history(env: CrashEnv) -> dict[str, dict[str, Any]]:
    """Every run of every workflow in the namespace, as history JSON, keyed by id/run."""
    histories: dict[str, dict[str, Any]] = {}
    async for execution in env.temporal.list_workflows():
        handle = env.temporal.get_workflow_handle(execution.id, run_id=execution.run_id)
        history = await handle.fetch_history()
        histories[f"{execution.id}/{execution.run_id}"] = json.loads(history.to_json())
    return histories


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def payloads(node: Any) -> Iterator[dict[str, Any]]:
    """Every Payload in a history: members of a ``payloads`` list (inputs, results, signal,
    update and heartbeat details). Version markers (``workflow.patched``) are left out: the
    SDK core writes them with the patch ID alone, outside the data converter."""
    if isinstance(node, dict):
        if node.get("markerName") == "core_patch":
            return
        for key, value in node.items():
            if key == "payloads" and isinstance(value, list):
                yield from value
            else:
                yield from payloads(value)
    elif isinstance(node, list):
        for value in node:
            yield from payloads(value)


def to_payload(doc: dict[str, Any]) -> Payload:
    return Payload(
        metadata={k: base64.b64decode(v) for k, v in doc["metadata"].items()},
        data=base64.b64decode(doc.get("data", "")),
    )


def haystack(history: dict[str, Any]) -> bytes:
    """The raw history JSON plus every base64 value in it decoded (payload data, metadata),
    so a secret inside a payload is found as well as one in a failure message."""
    parts = [json.dumps(history).encode()]
    for text in strings(history):
        try:
            parts.append(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError):
            continue
    return b"\n".join(parts)


def server_storage(env: CrashEnv) -> bytes:
    """Every byte the dev server persisted (SQLite database, WAL) and logged."""
    directory = env.state_dir / "temporal"
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


def assert_absent(values: dict[str, bytes], where: str, blob: bytes) -> None:
    for what, value in values.items():
        leaked = value in blob  # not asserted directly: pytest would print the whole blob
        assert not leaked, f"the planted {what} appears in {where}"


async def protected_service(env: CrashEnv, ns: str) -> None:
    for doc in (
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"cluster": SECRET_CLUSTER},
        },
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": "svc", "namespace": ns},
            "spec": {
                "endpoints": [{"selector": {"matchLabels": {"modelfleet.dev/deployment": "m"}}}],
                "auth": {"apiKeysSecretRef": {"name": "svc-keys"}},
            },
        },
    ):
        await apply_resource(env.temporal, parse_resource(doc))
    handle = env.temporal.get_workflow_handle(service_id(ns, "svc"))
    deadline = time.monotonic() + 60
    while True:
        status: ServiceStatus = await handle.query(ServiceWorkflow.status)
        if status.phase == "Ready" and status.address:
            break
        assert time.monotonic() < deadline, f"service never Ready: {status}"
        await asyncio.sleep(0.2)
    url = f"{status.address}/v1/models"
    async with httpx.AsyncClient() as client:
        assert (await client.get(url)).status_code == 401
        ok = await client.get(url, headers={"Authorization": f"Bearer {PLANTED_API_KEY}"})
        assert ok.status_code == 200


async def test_planted_credentials_never_reach_histories_storage_or_logs(tmp_path: Path) -> None:
    async with crash_env(tmp_path, startup_seconds=0.5, before_worker=plant_api_key) as env:
        # Applying the HTTPRoute on the credentialed cluster fails with 500 half the time and is
        # retried, so that cluster's failure messages are recorded in history as well.
        env.fleet.update_faults(
            SECRET_CLUSTER,
            {"error_rate_500": 0.5, "verbs": ["apply"], "resources": ["httproutes.*"], "seed": 7},
        )
        ns = "secrets"
        await apply_resource(env.temporal, deployment("m", ns, replicas=2))
        final = await env.wait_status(ns, "m", all_ready(2), 90, "Ready")
        assert SECRET_CLUSTER in {r.cluster for r in final.replicas}
        # A ModelService protected by the planted API key, used with and without it.
        await protected_service(env, ns)

        histories = await every_history(env)
        kinds = {
            h["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"]
            for h in histories.values()
        }
        assert kinds == {
            "Fleet",
            "InferenceCluster",
            "ModelDeployment",
            "ModelReplica",
            "EndpointDirectory",
            "ModelService",
            "RolloutSlots",
        }
        planted = planted_values()
        for key, history in histories.items():
            assert_absent(planted, f"the history of {key}", haystack(history))
        # The scan sees payload contents and failure messages: it finds what is meant to be there.
        everything = b"".join(haystack(h) for h in histories.values())
        assert IMAGE.encode() in everything
        assert SECRET_CLUSTER.encode() in everything
        assert b"500 InternalError" in everything, "no API failure of the cluster was recorded"

        await env.stop_worker()
        await env.stop_server()
        storage = server_storage(env)
        assert IMAGE.encode() in storage, "the storage scan must see plain payloads"
        assert_absent(planted, "the Temporal server's storage or log", storage)
        output = env.worker_output()
        assert b"worker polling task queue" in output
        assert_absent(planted, "the worker's output", output)


async def test_payload_key_encrypts_every_payload_and_the_rollout_still_works(
    tmp_path: Path,
) -> None:
    key_bytes = os.urandom(32)
    key = base64.b64encode(key_bytes).decode()
    async with crash_env(tmp_path, startup_seconds=0.5, payload_key=key) as env:
        ns = "sealed"
        await apply_resource(env.temporal, deployment("m", ns, replicas=1))
        await env.wait_status(ns, "m", all_ready(1), 90, "Ready with encrypted payloads")

        histories = await every_history(env)
        found = [p for h in histories.values() for p in payloads(h)]
        assert len(found) > 50
        encodings = {base64.b64decode(p["metadata"]["encoding"]) for p in found}
        assert encodings == {ENCODING}
        codec = EncryptionCodec(key_bytes)
        plain = await codec.decode([to_payload(p) for p in found])
        # Decrypted, the payloads hold the rollout; encrypted, nothing of it shows.
        assert any(IMAGE.encode() in p.data for p in plain)
        secrets = {"payload key": key.encode(), "raw payload key": key_bytes}
        for name, history in histories.items():
            blob = haystack(history)
            assert IMAGE.encode() not in blob, f"plain payload content in {name}"
            assert_absent(secrets, f"the history of {name}", blob)

        await env.stop_worker()
        await env.stop_server()
        storage = server_storage(env)
        assert IMAGE.encode() not in storage
        assert_absent(secrets, "the Temporal server's storage or log", storage)
        output = env.worker_output()
        assert b"worker polling task queue" in output
        assert_absent(secrets, "the worker's output", output)
