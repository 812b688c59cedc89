"""The worker's log output: one line per record, as text or JSON, with structured fields.

Fields come from two places: the activity context (set by ``worker.interceptor`` for the
duration of an activity: cluster, replica, activity, attempt, workflow id, ...) and a record's
own ``extra={"fields": {...}}``. A filter on the handler attaches the activity context to every
record emitted while the activity runs, whichever logger emitted it (an adapter, the SDK), so
activity code itself needs no logging boilerplate.

May touch: the root logger's handlers (only the one this module installs) and the stream it
writes to. Never formats call arguments: what reaches a log line is the fields named here and
the message, so a manifest (and any Secret in it) cannot be logged by this path.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import IO, Any

from temporalio.exceptions import FailureError

# The fields of the activity being run on this task (contextvars follow the SDK into the
# thread pool of synchronous activities).
activity_fields: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "modelfleet_activity_fields", default=None
)

FIELDS_ATTR = "fields"
_HANDLER_MARK = "_modelfleet_handler"


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


# The SDK's own activity log lines (temporalio.activity.logger) carry their context here.
_SDK_EXTRA = "temporal_activity"
_SDK_FIELDS = {
    "activity_type": "activity",
    "attempt": "attempt",
    "workflow_id": "workflow_id",
    "workflow_type": "workflow_type",
    "activity_id": "activity_id",
}


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of a record: the SDK's activity details if it logged them, then
    the record's own (which the filter below fills from the activity context)."""
    fields: dict[str, Any] = {}
    sdk = getattr(record, _SDK_EXTRA, None)
    if isinstance(sdk, Mapping):
        fields.update({ours: sdk[theirs] for theirs, ours in _SDK_FIELDS.items() if theirs in sdk})
    own = getattr(record, FIELDS_ATTR, None)
    if isinstance(own, Mapping):
        fields.update(own)
    return fields


class ActivityContextFilter(logging.Filter):
    """Merges the current activity's fields into each record (the record's own win)."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = activity_fields.get()
        if context:
            own = getattr(record, FIELDS_ATTR, None)
            setattr(record, FIELDS_ATTR, {**context, **(own if isinstance(own, Mapping) else {})})
        return True


# The SDK's own line for an activity that raised: ours ("activity failed: ...", from the
# interceptor) already says it in one line with the activity's fields.
_SDK_ACTIVITY_FAILED = "Completing activity as failed"
DEBUG_ENV = "MODELFLEET_DEBUG"


def _expected(exc: BaseException | None) -> bool:
    """A failure raised on purpose (an activity's or Temporal's own error: a stockout, a
    readiness deadline, a retryable API error) or a cancellation: not a bug, so no stack."""
    return isinstance(exc, FailureError | asyncio.CancelledError)


class ExpectedFailureFilter(logging.Filter):
    """For people at a terminal: an expected failure is one line, its stack only with
    ``MODELFLEET_DEBUG=1``; the SDK's repeat of an activity failure is dropped (the
    interceptor's line says it). Once ``stopping`` (Ctrl-C), only errors pass, each one line,
    so a stop under load is quiet. A bug (any other exception) keeps its traceback."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = False

    def filter(self, record: logging.LogRecord) -> bool:
        if os.environ.get(DEBUG_ENV) == "1":
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if self.stopping:
            if record.levelno < logging.ERROR:
                return False
        elif not _expected(exc):
            return True
        if record.getMessage() == _SDK_ACTIVITY_FAILED and _expected(exc):
            return False
        if exc is not None:
            reason = (exc.message if isinstance(exc, FailureError) else str(exc)) or "cancelled"
            record.msg = f"{record.getMessage()}: {' '.join(reason.split())}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


# Credential material as SDKs print it at DEBUG (botocore's signed request headers, STS and
# TokenRequest response bodies, presigned URLs, OAuth tokens): the value after each of these is
# replaced, whatever logger wrote the line.
_SECRET_VALUES = re.compile(
    r"""(?ix)
    (?P<key>
        authorization | x-amz-security-token | x-amz-signature | x-amz-credential
        | signature | credential | aws_session_token | aws_secret_access_key
        | secretaccesskey | sessiontoken | access_?token | refresh_?token | id_?token
        | client_?secret | private_?key(?:_id)? | password | token
    )
    (?P<sep> ['"]?\s*[:=]\s*b?['"]? | ['"]?>\s* )
    (?P<value> (?:(?:bearer|basic|aws4-hmac-sha256)\s+)? [^\s'"<>&,;})\]]+ )
    """
)
# Values recognisable on their own: AWS access key IDs, EKS tokens, Google OAuth tokens, JWTs.
_SECRET_SHAPES = re.compile(
    r"\b(?:(?:AKIA|ASIA)[0-9A-Z]{12,}|k8s-aws-v1\.[\w-]+|ya29\.[\w.-]+"
    r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]+)"
)
# Loggers that print what signing is made of (canonical requests, strings to sign): dropped.
_SIGNING_LOGGERS = ("botocore.auth",)
REDACTED = "[REDACTED]"


def redact(text: str) -> str:
    """``text`` with every credential value recognised replaced by ``[REDACTED]``."""
    text = _SECRET_VALUES.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}", text)
    return _SECRET_SHAPES.sub(REDACTED, text)


class CredentialFilter(logging.Filter):
    """No credential reaches a log line at any level: the message (arguments included) and any
    traceback are redacted, and what signers log is dropped. On the handler, so it sees the
    SDKs' records (botocore, google-auth, the Kubernetes client, urllib3) as well as ours."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(_SIGNING_LOGGERS):
            return False
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...``: for people reading a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = record_fields(record)
        if not fields:
            return line
        pairs = " ".join(f"{k}={_text_value(v)}" for k, v in fields.items() if v is not None)
        head, newline, rest = line.partition("\n")  # keep a traceback below the fields
        return f"{head} {pairs}{newline}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the fields, and the exception
    (type and message, plus the traceback) when there is one: for log pipelines."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            if value is not None and key not in entry:
                entry[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            entry["error_type"] = type(exc).__name__
            entry["error"] = redact(str(exc))
            entry["traceback"] = record.exc_text or self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _text_value(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text


def quiet_stop(handler: logging.Handler) -> None:
    """From now on (a stop was asked for), ``handler`` prints only errors, one line each."""
    for f in handler.filters:
        if isinstance(f, ExpectedFailureFilter):
            f.stopping = True


def configure_logging(
    fmt: LogFormat = LogFormat.TEXT,
    level: str | int = logging.INFO,
    stream: IO[str] | None = None,
) -> logging.Handler:
    """Install the worker's handler on the root logger (replacing one installed before by this
    function, leaving others alone) and return it."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt is LogFormat.JSON else TextFormatter())
    handler.addFilter(ActivityContextFilter())
    handler.addFilter(CredentialFilter())
    if fmt is LogFormat.TEXT:  # JSON lines keep every traceback: they are for log pipelines
        handler.addFilter(ExpectedFailureFilter())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # The SDK's DEBUG lines print raw payloads (activity results, workflow activations), which
    # may hold manifests: the SDK stays at INFO whatever the worker's level.
    logging.getLogger("temporalio").setLevel(max(root.level, logging.INFO))
    # google-api-core cuts the "google" loggers off from the root logger on its first client
    # unless they are already configured (a level set): they would then bypass this handler and
    # its redaction (warnings going to Python's last-resort stderr handler, unredacted).
    google = logging.getLogger("google")
    google.setLevel(root.level)
    google.propagate = True
    return handler
