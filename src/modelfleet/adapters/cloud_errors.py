"""The cloud adapters' error taxonomy: every SDK failure becomes a :class:`CloudError` with a
reason (quota, permission, throttled, ...) that says whether retrying can help. Messages are the
cloud's own text, which names resources, never credentials.
"""

from __future__ import annotations

from modelfleet.contracts.cloud_payloads import RETRYABLE_REASONS, CloudErrorReason


class CloudError(Exception):
    def __init__(self, reason: CloudErrorReason, message: str) -> None:
        super().__init__(f"{reason.value}: {message}")
        self.reason = reason
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.reason in RETRYABLE_REASONS
