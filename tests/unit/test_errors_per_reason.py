"""Errors per reason (issue 21 item 4): every failure an adapter raises is a class per reason
(``adapters.errors`` categories) inside the retry split it always had; ``activities.errors`` is
the one place that turns them, and the activities' own outcomes, into Temporal failures whose
types come from ``contracts.error_types``; activities catch a reason, not a status."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any

import pytest
import urllib3.exceptions
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.testing import ActivityEnvironment

from modelfleet.activities import errors as activity_errors
from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.adapters.cloud_errors import (
    CloudConflictError,
    CloudError,
    CloudForbiddenError,
    CloudInvalidError,
    CloudNotFoundError,
    CloudThrottledError,
    CloudUnavailableError,
)
from modelfleet.adapters.errors import (
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    MisconfiguredError,
    NotFoundError,
    ThrottledError,
    UnavailableError,
)
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.adapters.kube_errors import (
    KubeApplyContentionError,
    KubeConflictError,
    KubeError,
    KubeForbiddenError,
    KubeGoneError,
    KubeInvalidError,
    KubeMisconfiguredError,
    KubeNamespaceTerminatingError,
    KubeNotFoundError,
    KubeThrottledError,
    KubeUnavailableError,
    KubeUnknownKindError,
    PermanentKubeError,
    RetryableKubeError,
    error_from_response,
    error_from_transport,
)
from modelfleet.contracts import error_types
from modelfleet.contracts.cloud_payloads import CloudErrorReason, error_type
from modelfleet.contracts.kube_payloads import DeleteRequest, ObjectRef, ReplicaSweepRequest

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl"


# -- statuses and transport failures: their class, reason and retry split ---------------------


@pytest.mark.parametrize(
    ("status", "cls", "category", "reason", "retryable"),
    [
        (400, KubeInvalidError, InvalidError, "BadRequest", False),
        (401, KubeForbiddenError, ForbiddenError, "Unauthorized", False),
        (403, KubeForbiddenError, ForbiddenError, "Forbidden", False),
        (404, KubeNotFoundError, NotFoundError, "NotFound", False),
        (405, KubeInvalidError, InvalidError, "MethodNotAllowed", False),
        (408, KubeUnavailableError, UnavailableError, "Timeout", True),
        (409, KubeConflictError, ConflictError, "Conflict", False),
        (410, KubeGoneError, GoneError, "Gone", True),
        (415, KubeInvalidError, InvalidError, "UnsupportedMediaType", False),
        (422, KubeInvalidError, InvalidError, "Invalid", False),
        (429, KubeThrottledError, ThrottledError, "TooManyRequests", True),
        (500, KubeUnavailableError, UnavailableError, "InternalError", True),
        (501, KubeInvalidError, InvalidError, "HTTP501", False),
        (502, KubeUnavailableError, UnavailableError, "HTTP502", True),
        (503, KubeUnavailableError, UnavailableError, "ServiceUnavailable", True),
        (504, KubeUnavailableError, UnavailableError, "Timeout", True),
        (418, KubeInvalidError, InvalidError, "HTTP418", False),
    ],
)
def test_each_status_maps_to_its_class_and_reason(
    status: int, cls: type[KubeError], category: type[Exception], reason: str, retryable: bool
) -> None:
    err = error_from_response(operation="get Pod ns/p", status=status, body=None, headers=None)
    assert type(err) is cls
    assert isinstance(err, category)
    assert isinstance(err, RetryableKubeError if retryable else PermanentKubeError)
    assert (err.status, err.reason, err.retryable) == (status, reason, retryable)
    assert str(err) == f"get Pod ns/p: {status} {reason}"


def test_the_status_body_names_the_reason_and_the_message_is_unchanged() -> None:
    body = '{"kind":"Status","reason":"AlreadyExists","message":"pods \\"p\\" already exists"}'
    err = error_from_response(operation="create Pod ns/p", status=409, body=body, headers={})
    assert isinstance(err, KubeConflictError)
    assert err.reason == "AlreadyExists"
    assert str(err) == 'create Pod ns/p: 409 AlreadyExists: pods "p" already exists'


def test_a_conflict_on_forced_apply_is_retryable_contention() -> None:
    err = error_from_response(operation="a", status=409, body=None, headers={}, apply=True)
    assert type(err) is KubeApplyContentionError
    assert isinstance(err, ConflictError)
    assert isinstance(err, RetryableKubeError)


def test_a_terminating_namespace_is_a_retryable_forbidden() -> None:
    body = (
        '{"kind":"Status","reason":"Forbidden","message":"namespace is being terminated",'
        '"details":{"causes":[{"reason":"NamespaceTerminating"}]}}'
    )
    err = error_from_response(operation="a", status=403, body=body, headers={})
    assert type(err) is KubeNamespaceTerminatingError
    assert isinstance(err, ForbiddenError)
    assert err.retryable


def test_throttling_keeps_its_retry_after_and_a_forbidden_stays_redacted() -> None:
    throttled = error_from_response(
        operation="list Pod", status=429, body=None, headers={"Retry-After": "7"}
    )
    assert isinstance(throttled, KubeThrottledError)
    assert throttled.retry_after == 7.0
    assert str(throttled) == "list Pod: 429 TooManyRequests (retry after 7s)"
    body = '{"kind":"Status","reason":"Forbidden","message":"Authorization: Bearer ' + TOKEN + '"}'
    forbidden = error_from_response(operation="get x", status=403, body=body, headers={})
    assert isinstance(forbidden, KubeForbiddenError)
    assert TOKEN not in str(forbidden)
    assert "<redacted>" in str(forbidden)


@pytest.mark.parametrize(
    ("exc", "cls", "reason"),
    [
        (urllib3.exceptions.SSLError("bad cert"), KubeMisconfiguredError, "TLSError"),
        (
            urllib3.exceptions.MaxRetryError(None, "/", urllib3.exceptions.SSLError("x")),  # type: ignore[arg-type]
            KubeMisconfiguredError,
            "TLSError",
        ),
        (ConnectionRefusedError(), KubeUnavailableError, "ConnectionError"),
        (TimeoutError(), KubeUnavailableError, "Timeout"),
        (urllib3.exceptions.ReadTimeoutError(None, "/", "t"), KubeUnavailableError, "Timeout"),  # type: ignore[arg-type]
        (urllib3.exceptions.ProtocolError("reset"), KubeUnavailableError, "ConnectionError"),
    ],
)
def test_each_transport_failure_maps_to_its_class(
    exc: BaseException, cls: type[KubeError], reason: str
) -> None:
    err = error_from_transport("get version on https://k", exc)
    assert type(err) is cls
    assert err.reason == reason
    assert err.status is None
    assert err.retryable is (cls is KubeUnavailableError)
    assert isinstance(err, UnavailableError if err.retryable else MisconfiguredError)


def test_an_unknown_kind_is_both_not_found_and_invalid() -> None:
    err = KubeUnknownKindError("k does not serve X", status=404, reason="UnknownKind")
    assert isinstance(err, KubeNotFoundError)
    assert isinstance(err, InvalidError)
    assert isinstance(err, PermanentKubeError)


def test_per_reason_classes_survive_pickling() -> None:
    err = error_from_response(operation="op", status=410, body=None, headers={})
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is KubeGoneError
    assert (back.status, back.reason, str(back)) == (410, "Gone", "op: 410 Gone")
    cloud = pickle.loads(pickle.dumps(CloudError(CloudErrorReason.NOT_FOUND, "cluster c")))
    assert type(cloud) is CloudNotFoundError
    assert (cloud.reason, cloud.message, str(cloud)) == (
        CloudErrorReason.NOT_FOUND,
        "cluster c",
        "NotFound: cluster c",
    )


@pytest.mark.parametrize(
    ("reason", "cls", "category"),
    [
        (CloudErrorReason.NOT_FOUND, CloudNotFoundError, NotFoundError),
        (CloudErrorReason.ALREADY_EXISTS, CloudConflictError, ConflictError),
        (CloudErrorReason.PERMISSION_DENIED, CloudForbiddenError, ForbiddenError),
        (CloudErrorReason.UNAUTHENTICATED, CloudForbiddenError, ForbiddenError),
        (CloudErrorReason.INVALID_ARGUMENT, CloudInvalidError, InvalidError),
        (CloudErrorReason.THROTTLED, CloudThrottledError, ThrottledError),
        (CloudErrorReason.UNAVAILABLE, CloudUnavailableError, UnavailableError),
        (CloudErrorReason.QUOTA_EXCEEDED, CloudError, None),
        (CloudErrorReason.OPERATION_RUNNING, CloudError, None),
        (CloudErrorReason.RESOURCE_IN_USE, CloudError, None),
        (CloudErrorReason.OPERATION_FAILED, CloudError, None),
    ],
)
def test_cloud_reasons_map_onto_the_same_tree(
    reason: CloudErrorReason, cls: type[CloudError], category: type[Exception] | None
) -> None:
    err = CloudError(reason, "what the cloud said")
    assert type(err) is cls
    if category is not None:
        assert isinstance(err, category)
    assert str(err) == f"{reason.value}: what the cloud said"
    assert err.retryable is (
        reason
        in {
            CloudErrorReason.THROTTLED,
            CloudErrorReason.UNAVAILABLE,
            CloudErrorReason.OPERATION_RUNNING,
            CloudErrorReason.RESOURCE_IN_USE,
        }
    )


# -- the one mapping to Temporal ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("err", "type_", "non_retryable", "delay"),
    [
        (
            error_from_response(operation="o", status=404, body=None, headers=None),
            "PermanentKubeError",
            True,
            None,
        ),
        (
            error_from_response(operation="o", status=429, body=None, headers={"Retry-After": "3"}),
            "RetryableKubeError",
            False,
            timedelta(seconds=3),
        ),
        (
            error_from_response(operation="o", status=503, body=None, headers={"retry-after": "0"}),
            "RetryableKubeError",
            False,
            None,
        ),
        (error_from_transport("o", TimeoutError()), "RetryableKubeError", False, None),
        (
            KubeUnknownKindError("no CRD", status=404, reason="UnknownKind"),
            "PermanentKubeError",
            True,
            None,
        ),
    ],
)
def test_kube_errors_map_to_the_retry_split(
    err: KubeError, type_: str, non_retryable: bool, delay: timedelta | None
) -> None:
    app = activity_errors.to_temporal(err)
    assert (app.type, app.non_retryable, app.next_retry_delay) == (type_, non_retryable, delay)
    assert app.category is ApplicationErrorCategory.UNSPECIFIED
    assert app.message == str(err)
    assert not app.details


@pytest.mark.parametrize("reason", list(CloudErrorReason))
def test_cloud_errors_map_to_their_cloud_type(reason: CloudErrorReason) -> None:
    err = CloudError(reason, "quota 'GPUS' exceeded")
    app = activity_errors.to_temporal(err)
    assert app.type == error_type(reason) == f"Cloud{reason.value}"
    assert app.non_retryable is not err.retryable
    assert (app.message, app.details) == ("quota 'GPUS' exceeded", (reason.value,))
    assert app.next_retry_delay is None
    assert app.category is ApplicationErrorCategory.UNSPECIFIED


def test_activity_outcomes_have_their_types() -> None:
    cases: list[tuple[ApplicationError, str, bool, ApplicationErrorCategory]] = [
        (
            activity_errors.missing_credentials("no kubeconfig"),
            "MissingCredentials",
            True,
            ApplicationErrorCategory.UNSPECIFIED,
        ),
        (
            activity_errors.missing_secret("no secret"),
            "MissingSecret",
            True,
            ApplicationErrorCategory.UNSPECIFIED,
        ),
        (
            activity_errors.stack_source_unavailable("503"),
            "StackSourceUnavailable",
            False,
            ApplicationErrorCategory.UNSPECIFIED,
        ),
        (
            activity_errors.readiness_deadline_exceeded("0/1 pods ready"),
            "ReadinessDeadlineExceeded",
            True,
            ApplicationErrorCategory.UNSPECIFIED,
        ),
        (
            activity_errors.not_ready_yet("0/1 pods ready"),
            "NotReadyYet",
            False,
            ApplicationErrorCategory.BENIGN,
        ),
    ]
    for app, type_, non_retryable, category in cases:
        assert (app.type, app.non_retryable, app.category) == (type_, non_retryable, category)
    assert activity_errors.readiness_deadline_exceeded("r").message == (
        "not ready by the progress deadline: r"
    )
    assert activity_errors.not_ready_yet("r").message == "not ready yet: r"


def test_the_contract_holds_every_type_value_once() -> None:
    values = [v for k, v in vars(error_types).items() if k.isupper()]
    assert len(values) == len(set(values))
    assert {error_type(r) for r in CloudErrorReason} <= set(values)
    assert {"PermanentKubeError", "RetryableKubeError", "ReadinessDeadlineExceeded"} <= set(values)


# -- activities catch the reason, not the status -----------------------------------------------


class _FakeCluster:
    """Serves Deployments only; ``list`` of any other kind fails as the adapter would."""

    def __init__(self, unserved: KubeError) -> None:
        self.unserved = unserved
        self.deleted: list[str] = []

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: dict[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        if kind != "Deployment":
            raise self.unserved
        return [
            {"metadata": {"name": "w", "namespace": "ns", "labels": {**(labels or {})}}},
        ]

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        # The adapter answers an absent object (a 404 on delete) with False, never an error.
        if name == "gone":
            return False
        self.deleted.append(name)
        return True


class _Activities(KubeActivities):
    def __init__(self, fake: _FakeCluster) -> None:
        super().__init__(KubeconfigStore.__new__(KubeconfigStore))
        self.fake = fake

    def _cluster(self, name: str, ref: Any = None) -> KubeCluster:
        return self.fake  # type: ignore[return-value]


def _unknown_kind() -> KubeError:
    return KubeUnknownKindError("k does not serve Widget", status=404, reason="UnknownKind")


def test_a_kind_not_served_is_skipped_through_its_class() -> None:
    acts = _Activities(_FakeCluster(_unknown_kind()))
    kinds = [("apps/v1", "Deployment"), ("example.com/v1", "Widget")]
    env = ActivityEnvironment()
    swept = env.run(
        acts.sweep_replicas,
        ReplicaSweepRequest(cluster="c", kinds=kinds, replicas=[("ns", "r")]),
    )
    assert swept == 1
    # A not-found with no status at all is still a not-found.
    acts = _Activities(_FakeCluster(KubeNotFoundError("gone", reason="NotFound")))
    assert env.run(acts.replicas_found, ReplicaSweepRequest(cluster="c", kinds=kinds)) == []


def test_a_404_status_on_another_class_is_not_taken_for_absence() -> None:
    # The status no longer decides: only the class says "not found".
    odd = PermanentKubeError("list Widget: 404 but not a not-found", status=404, reason="Odd")
    acts = _Activities(_FakeCluster(odd))
    with pytest.raises(ApplicationError) as caught:
        ActivityEnvironment().run(
            acts.replicas_found,
            ReplicaSweepRequest(cluster="c", kinds=[("example.com/v1", "Widget")]),
        )
    assert (caught.value.type, caught.value.non_retryable) == ("PermanentKubeError", True)
    assert caught.value.message == "list Widget: 404 but not a not-found"


def test_deleting_an_absent_object_counts_it_absent() -> None:
    fake = _FakeCluster(_unknown_kind())
    acts = _Activities(fake)
    objects = [
        ObjectRef(api_version="apps/v1", kind="Deployment", name="w", namespace="ns"),
        ObjectRef(api_version="v1", kind="Service", name="gone", namespace="ns"),
    ]
    result = ActivityEnvironment().run(acts.delete, DeleteRequest(cluster="c", objects=objects))
    assert (result.deleted, result.absent, result.swept) == (1, 1, 0)
    assert fake.deleted == ["w"]
