"""Modelplane parity of the API surface: the corpus under tests/corpus/modelplane (documents written
from Modelplane's published schemas and docs) loads unchanged, covers every kind, source and
provider, and each invalid document is rejected at the field its `# expect:` header names."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest

from modelfleet.api.caches import ModelCache
from modelfleet.api.classes import InferenceClass, Provider
from modelfleet.api.clusters import ClusterSource, InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.infrastructure import CLOUD_CLUSTER_KINDS, AKSClusterResource, ServingStack
from modelfleet.api.kinds import KINDS, parse_resource
from modelfleet.api.loading import load_paths
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.meta import Resource
from modelfleet.api.modelplane_gateway import ModelplaneInferenceGateway
from modelfleet.api.services import InferenceGateway
from modelfleet.api.support import not_acted_upon

CORPUS = Path(__file__).parent.parent / "corpus" / "modelplane"
VALID = CORPUS / "valid"
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))

# modelfleet's own kinds, which Modelplane does not have.
MODELFLEET_ONLY = {"ModelAutoscaler"}
NOT_IN_CORPUS = MODELFLEET_ONLY


@functools.cache
def _load_valid() -> tuple[Resource, ...]:
    result = load_paths([str(VALID)])
    assert result.errors == [], "\n".join(str(e) for e in result.errors)
    return tuple(result.resources)


def _valid() -> list[Resource]:
    """The valid corpus, loaded once (tests only read it)."""
    return list(_load_valid())


def test_every_valid_modelplane_document_loads_unchanged() -> None:
    resources = _valid()
    assert len(resources) >= 35
    assert {r.api_version for r in resources} == {
        "modelplane.ai/v1alpha1",
        "infrastructure.modelplane.ai/v1alpha1",
    }


def test_the_corpus_covers_every_kind_source_and_provider() -> None:
    resources = _valid()
    kinds = Counter(r.KIND for r in resources)
    assert set(KINDS) - NOT_IN_CORPUS <= set(kinds), set(KINDS) - set(kinds)
    sources = {r.spec.cluster.source for r in resources if isinstance(r, InferenceCluster)}
    assert sources == set(ClusterSource)
    providers = {
        r.spec.provisioning.provider
        for r in resources
        if isinstance(r, InferenceClass) and r.spec.provisioning is not None
    }
    assert providers == set(Provider)


def test_gke_clusters_need_no_project_and_keep_the_credentials_type() -> None:
    clusters = {r.name: r for r in _valid() if isinstance(r, InferenceCluster)}
    gke = clusters["gke-us-central"].spec.cluster.gke
    assert gke is not None
    assert gke.project is None
    assert gke.credentials.type.value == "ClusterProviderConfig"
    custom = clusters["gke-custom-creds"].spec.cluster.gke
    assert custom is not None
    assert (custom.credentials.type.value, custom.credentials.name) == (
        "ProviderConfig",
        "gcp-research",
    )


def test_existing_identity_and_cache_refs_are_kept() -> None:
    clusters = {r.name: r for r in _valid() if isinstance(r, InferenceCluster)}
    existing = clusters["byo-gke"].spec.cluster.existing
    assert existing is not None
    assert existing.secret_ref is not None
    assert (existing.secret_ref.name, existing.secret_ref.key) == ("byo-gke", "config")
    assert existing.identity_secret_ref is not None
    assert (existing.identity_secret_ref.key, existing.identity_secret_ref.type.value) == (
        "private_key",
        "GoogleApplicationCredentials",
    )
    assert existing.cache is not None
    assert existing.cache.storage_class_name == "filestore-rwx"
    eks = clusters["byo-eks"].spec.cluster.existing
    assert eks is not None
    assert eks.identity_secret_ref is not None
    assert eks.identity_secret_ref.type.value == "AWSWebIdentityCredentials"


def test_a_modelplane_replica_takes_its_identity_from_labels() -> None:
    (replica,) = [r for r in _valid() if isinstance(r, ModelReplica)]
    assert (replica.spec.deployment, replica.spec.index) == ("qwen-small", 0)
    assert replica.spec.cluster_name == "byo-h100"
    # The spec wins over labels when both are present.
    doc = replica.to_wire()
    doc["spec"]["index"] = 3
    assert isinstance(parsed := parse_resource(doc), ModelReplica)
    assert parsed.spec.index == 3


def test_a_modelfleet_replica_label_identity_also_loads() -> None:
    (replica,) = [r for r in _valid() if isinstance(r, ModelReplica)]
    doc = replica.to_wire()
    del doc["spec"]["deployment"], doc["spec"]["index"]
    doc["metadata"]["labels"] = {
        "modelfleet.dev/deployment": "other",
        "modelfleet.dev/replica-index": "2",
    }
    parsed = parse_resource(doc)
    assert isinstance(parsed, ModelReplica)
    assert (parsed.spec.deployment, parsed.spec.index) == ("other", 2)


def test_cache_sizes_and_defaults_follow_modelplane() -> None:
    caches = {r.name: r for r in _valid() if isinstance(r, ModelCache)}
    coder = caches["qwen3-coder"].spec
    assert coder.hugging_face is not None
    assert coder.hugging_face.size_gib == 1100
    assert coder.hugging_face.auth_secret is not None
    assert coder.hugging_face.auth_secret.key == "HF_TOKEN"
    assert caches["kimi-k2"].spec.hugging_face is not None
    kimi_auth = caches["kimi-k2"].spec.hugging_face.auth_secret
    assert kimi_auth is not None
    assert kimi_auth.key == "token"
    # The wire form keeps Modelplane's spelling, so a round trip is lossless.
    assert caches["qwen3-coder"].to_wire()["spec"]["huggingFace"]["sizeGiB"] == 1100


def test_the_aks_cluster_kind_keeps_its_pools_infiniband_fabric() -> None:
    (aks,) = [r for r in _valid() if isinstance(r, AKSClusterResource)]
    pools = {p.name: p for p in aks.spec.node_pools}
    fabric = pools["gpua100"].fabric
    assert fabric is not None
    assert (fabric.type.value, fabric.infiniband and fabric.infiniband.fabric) == (
        "InfiniBand",
        "ib-1",
    )
    assert pools["gpua10"].fabric is None


def test_serving_stack_defaults_match_modelplane() -> None:
    stacks = {r.name: r for r in _valid() if isinstance(r, ServingStack)}
    gke = stacks["gke-us-central-serving-stack"].spec
    assert gke.gateway.class_name == "envoy"
    assert [(li.name, li.port) for li in gke.gateway.listeners] == [("http", 80)]
    assert gke.versions.nvidia_dra_driver == "0.4.0"


def test_what_is_not_acted_upon_is_reported_never_silent() -> None:
    reasons = {r.ref: not_acted_upon(r) for r in _valid()}
    for ref, reason in reasons.items():
        kind = ref.split()[0]
        if kind in {"ServingStack"} | {k.KIND for k in CLOUD_CLUSTER_KINDS}:
            assert str(reason).startswith("NotActedUpon: "), ref
        if kind == "ModelCache":
            # Staged by the ModelCache workflow: acted upon.
            assert reason is None, ref
    assert str(reasons["InferenceGateway default"]).startswith("NotActedUpon: ")
    assert "spec.cluster" in str(reasons["InferenceGateway default"])
    # AKS is provisioned; what its InfiniBand pool needs beyond the VM size is said.
    aks = str(reasons["InferenceCluster aks-westeurope"])
    assert aks.startswith("NotActedUpon: fabric InfiniBand of node pool(s) gpua100:"), aks
    assert "network operator" in aks
    assert "ProvisioningNotSupported" in str(reasons["InferenceCluster vultr-ewr"])
    assert "ProvisioningNotSupported" in str(reasons["InferenceCluster nebius-eu-north"])
    assert reasons["InferenceClass aks-a10"] is None
    assert "ProvisioningNotSupported" in str(reasons["InferenceClass nebius-h100"])
    # What modelfleet runs carries no such note.
    assert reasons["InferenceCluster byo-h100"] is None
    assert reasons["InferenceCluster gke-us-central"] is None
    assert reasons["InferenceClass gke-l4"] is None
    assert reasons["ModelDeployment ml-team/qwen-small"] is None


def test_deployments_are_identical_under_either_api_group() -> None:
    for resource in _valid():
        if not isinstance(resource, ModelDeployment):
            continue
        doc = resource.to_wire()
        doc["apiVersion"] = "modelfleet.dev/v1alpha1"
        again = parse_resource(doc)
        assert again.model_dump(exclude={"api_version"}) == resource.model_dump(
            exclude={"api_version"}
        )


def _expectation(path: Path) -> tuple[str, str]:
    header = path.read_text().splitlines()[0]
    assert header.startswith("# expect: "), path
    field, reason = header.removeprefix("# expect: ").split(" | ", 1)
    return field, reason


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_modelplane_document_is_rejected_at_its_field(path: Path) -> None:
    field, reason = _expectation(path)
    result = load_paths([str(path)])
    assert result.documents == []
    found = [(e.field, e.reason) for e in result.errors]
    assert any(f == field and reason in r for f, r in found), found
    # Every error is located in the file, with a line.
    assert all(e.source == str(path) and e.line for e in result.errors)


def test_the_invalid_corpus_is_not_trivially_small() -> None:
    assert len(INVALID) >= 20
    kinds = {p.read_text().split("kind: ", 1)[1].split()[0] for p in INVALID}
    assert {"InferenceCluster", "InferenceClass", "ModelCache", "ServingStack"} <= kinds


def test_an_infrastructure_kind_rejects_the_user_facing_group_by_name() -> None:
    with pytest.raises(InvalidResourceError) as info:
        parse_resource(
            {
                "apiVersion": "modelfleet.dev/v1alpha1",
                "kind": "ServingStack",
                "metadata": {"name": "s", "namespace": "x"},
                "spec": {"secrets": []},
            }
        )
    (error,) = info.value.errors
    assert error.field == "apiVersion"
    assert "infrastructure.modelfleet.dev/v1alpha1" in error.reason


def test_both_inference_gateway_shapes_load() -> None:
    (traefik,) = [r for r in _valid() if r.KIND == "InferenceGateway"]
    assert isinstance(traefik, ModelplaneInferenceGateway)
    assert traefik.spec.traefik is not None
    assert traefik.spec.traefik.metallb is not None
    ours = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"cluster": "l4-dev"},
        }
    )
    assert isinstance(ours, InferenceGateway)
    assert not_acted_upon(ours) is None
