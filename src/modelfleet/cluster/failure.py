"""What a failed provisioning says: the step, the cloud's reason in one word, the cloud's own
words, and what to do about it (a stockout waits or moves, a quota is raised, a permission is
granted), ending with how to retry. No exception or class names: a person reads it.

Pure: the workflow calls :func:`failure_reason` with what the failed activity reported.
"""

from __future__ import annotations

from modelfleet.contracts.cloud_payloads import CloudErrorReason, reason_of

# The condition reason and the prefix of the cluster's reason while provisioning has failed.
PROVISIONING_FAILED = "ProvisioningFailed"


def retry_hint(cluster: str) -> str:
    return f"retry with `modelfleet rollout restart cluster/{cluster}` or apply it again"


def _advice(reason: CloudErrorReason | None, cluster: str) -> str:
    retry = retry_hint(cluster)
    if reason is CloudErrorReason.STOCKOUT:
        return (
            "the zone has no free capacity of this machine type right now (a stockout, not a "
            f"quota: a quota increase will not help); {retry} later, or choose another zone, "
            "region or machine type"
        )
    if reason is CloudErrorReason.QUOTA_EXCEEDED:
        return (
            "the project's quota does not cover this pool; request a quota increase, then " + retry
        )
    if reason in (CloudErrorReason.PERMISSION_DENIED, CloudErrorReason.UNAUTHENTICATED):
        return f"the worker's cloud credentials may not do this; grant it, then {retry}"
    if reason is CloudErrorReason.INVALID_ARGUMENT:
        return "the cloud rejects the request as sent; correct the cluster's spec and apply it"
    return retry


def failure_reason(
    cluster: str,
    step: str,
    error_type: str | None,
    message: str,
    cleanup: list[str] | None = None,
    stocked_out: list[str] | None = None,
) -> str:
    """``ProvisioningFailed at <step>: <Reason>: <cloud's words>; <advice>``; after a pool's
    fallbacks, which attempts were stocked out first."""
    reason = reason_of(error_type)
    word = reason.value if reason is not None else "Failed"
    text = f"{PROVISIONING_FAILED} at {step}: {word}: {message.rstrip('. ')}; "
    tried = [s for s in stocked_out or [] if s != step]
    if reason is CloudErrorReason.STOCKOUT and stocked_out:
        text += (
            f"every alternative was stocked out ({len(stocked_out)} tried: "
            f"{'; '.join(stocked_out)}); "
        )
    elif tried:
        text += f"after stockouts at: {'; '.join(tried)}; "
    text += _advice(reason, cluster)
    if cleanup:
        text += f"; cleanup incomplete: {'; '.join(cleanup)}"
    return text
