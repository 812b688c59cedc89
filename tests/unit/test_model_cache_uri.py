"""ModelCaches from a URI (``source: URI``): s3://, gs:// and oci:// sources validate with a
clear error at ``spec.uri.uri``, and each renders a hydration Job with its pinned tool, the auth
Secret mounted as the file that tool reads, and the same progress lines and marker as the Hugging
Face downloader (golden files under tests/golden/render/model-cache/)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from render_helpers import _GoldenDumper, assert_golden

from modelfleet.api.caches import ModelCache, UriScheme
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.rendering.model_cache import (
    AUTH_FILE,
    ORAS_IMAGE,
    PROGRESS_PREFIX,
    job_name,
    render_claim,
    render_job,
    source_digest,
    uri_script,
)


def _doc(uri: str, *, auth: bool = False, size: int = 40) -> dict[str, Any]:
    block: dict[str, Any] = {"uri": uri, "sizeGiB": size}
    if auth:
        block["authSecret"] = {"name": "store-creds"}
    return {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "weights", "namespace": "ml-team"},
        "spec": {"source": "URI", "uri": block},
    }


def _cache(uri: str, *, auth: bool = False) -> ModelCache:
    cache = parse_resource(_doc(uri, auth=auth))
    assert isinstance(cache, ModelCache)
    return cache


@pytest.mark.parametrize(
    ("uri", "scheme"),
    [
        ("s3://models-bucket/qwen3/8b", UriScheme.S3),
        ("s3://models-bucket", UriScheme.S3),
        ("gs://my_models.example.com/qwen3-8b/", UriScheme.GCS),
        ("oci://ghcr.io/acme/models/qwen3-8b:v1", UriScheme.OCI),
        ("oci://registry.local:5000/qwen@sha256:" + "a" * 64, UriScheme.OCI),
    ],
)
def test_s3_gcs_and_oci_uris_validate(uri: str, scheme: UriScheme) -> None:
    cache = _cache(uri)
    assert cache.spec.uri is not None
    assert cache.spec.uri.scheme is scheme
    assert cache.spec.artifact is cache.spec.uri


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("https://example.com/model", "unsupported URI"),
        ("s3:/bucket/x", "unsupported URI"),
        ("hf://Qwen/Qwen3-8B", "expected one of s3://, gs://, oci://"),
        ("s3://Bad_Bucket/x", "invalid bucket 'Bad_Bucket'"),
        ("gs:///prefix", "invalid bucket ''"),
        ("s3://bucket/$(reboot)", "shell characters"),
        ("s3://bucket/a b", "no spaces"),
        ("oci://ghcr.io/acme/model", "expected oci://registry/repository:tag"),
        ("oci://ghcr.io:tag", "invalid OCI reference"),
    ],
)
def test_a_bad_uri_is_rejected_at_its_field_with_the_reason(uri: str, reason: str) -> None:
    with pytest.raises(InvalidResourceError) as info:
        parse_resource(_doc(uri))
    found = {(e.field, e.reason) for e in info.value.errors}
    assert any(f == "spec.uri.uri" and reason in r for f, r in found), found


def test_source_uri_requires_the_uri_block() -> None:
    doc = _doc("s3://bkt/x")
    del doc["spec"]["uri"]
    with pytest.raises(InvalidResourceError) as info:
        parse_resource(doc)
    assert ("spec.uri", "required when source is URI") in {
        (e.field, e.reason) for e in info.value.errors
    }


@pytest.mark.parametrize(
    "uri",
    ["s3://models-bucket/qwen3/8b", "gs://models-bucket/qwen3/8b", "oci://ghcr.io/acme/qwen:v1"],
)
def test_each_scheme_renders_its_pinned_job(uri: str) -> None:
    cache = _cache(uri, auth=True)
    job = render_job(cache, cluster="a", namespace="mf-ml-team", with_token=True)
    scheme = UriScheme(uri.split("://")[0])
    assert_golden(
        f"model-cache/{scheme.name.lower()}-job",
        yaml.dump(job, Dumper=_GoldenDumper, sort_keys=False, width=100),
    )


def test_uri_jobs_mount_the_secret_as_the_tools_file_and_report_progress() -> None:
    for uri, variable in [
        ("s3://bkt/p", "AWS_SHARED_CREDENTIALS_FILE"),
        ("gs://bkt/p", "GOOGLE_APPLICATION_CREDENTIALS"),
    ]:
        job = render_job(_cache(uri, auth=True), cluster="a", namespace="n", with_token=True)
        pod = job["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env[variable] == AUTH_FILE
        assert env["MODEL_URI"] == uri
        assert env["MODEL_BYTES"] == str(40 << 30)
        secret = next(v for v in pod["volumes"] if "secret" in v)["secret"]
        assert secret["items"] == [{"key": "HF_TOKEN", "path": "credentials"}]
        # Without a Secret: no volume and no variable (the pod's own identity, or anonymous).
        bare = render_job(_cache(uri), cluster="a", namespace="n", with_token=False)
        bare_pod = bare["spec"]["template"]["spec"]
        assert [v["name"] for v in bare_pod["volumes"]] == ["model-cache"]
        assert variable not in {e["name"] for e in bare_pod["containers"][0]["env"]}
    oci = render_job(
        _cache("oci://r.io/a/b:1", auth=True), cluster="a", namespace="n", with_token=True
    )
    assert oci["spec"]["template"]["spec"]["containers"][0]["image"] == ORAS_IMAGE
    for scheme in UriScheme:
        script = uri_script(scheme)
        assert f"{PROGRESS_PREFIX} bytes=$((kib * 1024)) total=$MODEL_BYTES" in script
        assert '"$marker"' in script


def test_a_changed_uri_is_a_new_digest_and_job_and_the_claim_has_the_size() -> None:
    a, b = _cache("s3://bkt/qwen/v1"), _cache("s3://bkt/qwen/v2")
    assert source_digest(a) != source_digest(b)
    assert job_name("ml-team", "weights", source_digest(a)) != job_name(
        "ml-team", "weights", source_digest(b)
    )
    claim = render_claim(a, cluster="a", namespace="n", storage_class=None)
    assert claim["spec"]["resources"]["requests"]["storage"] == "40Gi"
