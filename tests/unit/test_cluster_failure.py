"""What a failed provisioning says: stockout and quota are distinct reasons with distinct advice,
each says how to retry, and no exception or class name reaches the reason."""

from __future__ import annotations

import pytest

from modelfleet.cluster.failure import failure_reason
from modelfleet.contracts.cloud_payloads import CloudErrorReason, error_type, is_stockout

GCE_STOCKOUT = (
    "operation op-1 failed: ZONE_RESOURCE_POOL_EXHAUSTED: The zone does not have enough "
    "resources available to fulfill the request. Try a different zone, or try again later."
)


def test_a_stockout_says_wait_or_move_not_ask_for_quota() -> None:
    text = failure_reason(
        "gke-central", "create node pool gpu-h100", "CloudStockout", GCE_STOCKOUT, []
    )
    assert text.startswith("ProvisioningFailed at create node pool gpu-h100: Stockout: ")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in text
    assert "a quota increase will not help" in text
    assert "another zone" in text
    assert "`modelfleet rollout restart cluster/gke-central`" in text
    assert "Error" not in text
    assert "CloudStockout" not in text


def test_a_quota_says_ask_for_more() -> None:
    text = failure_reason(
        "eks-east", "create node group gpu-h200", "CloudQuotaExceeded", "VcpuLimitExceeded", []
    )
    assert text.startswith("ProvisioningFailed at create node group gpu-h200: QuotaExceeded: ")
    assert "request a quota increase" in text
    assert "stockout" not in text
    assert "rollout restart cluster/eks-east" in text


def test_an_incomplete_cleanup_and_an_unknown_type_are_said() -> None:
    text = failure_reason("c", "create cluster c", None, "boom", ["delete cluster c: gone"])
    assert text.startswith("ProvisioningFailed at create cluster c: Failed: boom; ")
    assert text.endswith("; cleanup incomplete: delete cluster c: gone")


@pytest.mark.parametrize(
    ("text", "stockout"),
    [
        (GCE_STOCKOUT, True),
        ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: no a3-highgpu-8g in us-central1-a", True),
        ("Could not launch On-Demand Instances. InsufficientInstanceCapacity - no p5", True),
        ("Insufficient capacity; try again later", True),
        ('Insufficient regional quota to satisfy request: resource "NVIDIA_H100_GPUS"', False),
        ("VcpuLimitExceeded - You have requested more vCPU capacity than your limit", False),
    ],
)
def test_stockouts_are_told_from_quotas_by_the_clouds_words(text: str, stockout: bool) -> None:
    assert is_stockout(text) is stockout


def test_a_stockout_has_its_own_permanent_error_type() -> None:
    assert error_type(CloudErrorReason.STOCKOUT) == "CloudStockout"
