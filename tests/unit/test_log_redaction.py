"""No credential reaches a log line (issue 29 item 7): the worker's log handler redacts what the
SDKs print at DEBUG (botocore's signed headers, STS and TokenRequest bodies, presigned URLs,
OAuth tokens, JWTs), in messages, their arguments and tracebacks, and drops the signer's own
lines; ordinary lines pass unchanged."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator

import pytest

from modelfleet.worker.logs import LogFormat, configure_logging, redact

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
SIGNATURE = "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
EKS_TOKEN = "k8s-aws-v1.aHR0cHM6Ly9zdHMudXMtZWFzdC0yLmFtYXpvbmF3cy5jb20v"
GOOGLE = "ya29.a0AfH6SMBexampleGoogleToken"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLWJ5dGVz"
SECRETS = (AWS_KEY, AWS_SECRET, SESSION, SIGNATURE, EKS_TOKEN, GOOGLE, JWT)

LINES = [
    # botocore.endpoint at DEBUG
    "Sending http request: <AWSPreparedRequest stream_output=False, method=POST, "
    "url=https://eks.us-east-2.amazonaws.com/clusters, headers={'X-Amz-Date': b'20261127T1200Z', "
    f"'Authorization': b'AWS4-HMAC-SHA256 Credential={AWS_KEY}/20261127/us-east-2/eks/"
    f"aws4_request, SignedHeaders=host;x-amz-date, Signature={SIGNATURE}', "
    f"'X-Amz-Security-Token': b'{SESSION}'}}>",
    # botocore.parsers: an STS response body
    f"Response body: b'<Credentials><AccessKeyId>{AWS_KEY}</AccessKeyId><SecretAccessKey>"
    f"{AWS_SECRET}</SecretAccessKey><SessionToken>{SESSION}</SessionToken></Credentials>'",
    # a presigned GetCallerIdentity URL (what an EKS token is made of)
    "presigned https://sts.us-east-2.amazonaws.com/?Action=GetCallerIdentity"
    f"&X-Amz-Credential={AWS_KEY}%2F20261127&X-Amz-Security-Token={SESSION}"
    f"&X-Amz-Signature={SIGNATURE}",
    # the Kubernetes client at DEBUG: a TokenRequest response, a kubeconfig user
    f'response body: {{"status": {{"token": "{JWT}", "expirationTimestamp": "2026-11-27"}}}}',
    f"user: {{token: {EKS_TOKEN}}}",
    # google-auth / requests
    f"headers={{'Authorization': 'Bearer {GOOGLE}'}}",
    f'{{"access_token": "{GOOGLE}", "expires_in": 3599}}',
]


@pytest.mark.parametrize("line", LINES)
def test_every_credential_in_an_sdk_debug_line_is_redacted(line: str) -> None:
    cleaned = redact(line)
    assert "[REDACTED]" in cleaned
    for secret in SECRETS:
        assert secret not in cleaned, cleaned


@pytest.mark.parametrize(
    "line",
    [
        "activity completed cluster=l4-dev replica=qwen3-8b-0 attempt=1",
        "max_tokens=512 tokenizer=Qwen/Qwen3-8B phase=Ready",
        "Making request: POST https://eks.us-east-2.amazonaws.com/clusters/eks-east/node-groups",
    ],
)
def test_ordinary_lines_pass_unchanged(line: str) -> None:
    assert redact(line) == line


@contextlib.contextmanager
def _worker_log(fmt: LogFormat) -> Iterator[io.StringIO]:
    """What the worker's log handler prints at DEBUG while the block runs."""
    root = logging.getLogger()
    level = root.level
    buffer = io.StringIO()
    handler = configure_logging(fmt, logging.DEBUG, stream=buffer)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def worker_log() -> Iterator[io.StringIO]:
    with _worker_log(LogFormat.TEXT) as buffer:
        yield buffer


def test_the_worker_handler_redacts_arguments_and_tracebacks(worker_log: io.StringIO) -> None:
    logging.getLogger("botocore.endpoint").debug("Sending http request: %s", LINES[0])
    try:
        raise RuntimeError(f"refused: Authorization: Bearer {GOOGLE}")
    except RuntimeError:
        logging.getLogger("google.auth.transport").exception("token refresh failed")
    logging.getLogger("modelfleet.adapters.eks").debug("minted %s", EKS_TOKEN)
    printed = worker_log.getvalue()
    assert "Sending http request" in printed
    assert "token refresh failed" in printed
    assert "Traceback" in printed  # a bug keeps its traceback, redacted
    for secret in SECRETS:
        assert secret not in printed, printed


def test_google_loggers_reach_the_handler_after_a_google_client_cut_them_off() -> None:
    """google-api-core sets the "google" logger not to propagate on its first client unless it
    is configured already; configuring the worker's logging must win either way."""
    from google.api_core import client_logging

    client_logging.setup_logging()  # what a GKE client does on creation
    with _worker_log(LogFormat.TEXT) as buffer:
        client_logging.setup_logging()  # and again after: configured loggers are left alone
        logging.getLogger("google.auth.transport.requests").warning("Bearer %s", GOOGLE)
    printed = buffer.getvalue()
    assert "google.auth.transport.requests" in printed
    assert GOOGLE not in printed


def test_the_signers_own_lines_are_dropped(worker_log: io.StringIO) -> None:
    logging.getLogger("botocore.auth").debug("CanonicalRequest:\nPOST\n/clusters\nhost:eks")
    logging.getLogger("botocore.auth").debug("StringToSign:\nAWS4-HMAC-SHA256\n20261127")
    logging.getLogger("botocore.hooks").debug("Event before-sign.eks: calling handler")
    printed = worker_log.getvalue()
    assert "CanonicalRequest" not in printed
    assert "StringToSign" not in printed
    assert "before-sign.eks" in printed


def test_json_lines_are_redacted_too() -> None:
    with _worker_log(LogFormat.JSON) as buffer:
        try:
            raise ValueError(f"X-Amz-Security-Token={SESSION}")
        except ValueError:
            logging.getLogger("botocore.endpoint").exception("%s", LINES[1])
    printed = buffer.getvalue()
    assert '"traceback"' in printed
    for secret in SECRETS:
        assert secret not in printed, printed
