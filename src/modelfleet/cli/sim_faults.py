"""``modelfleet sim faults``: change the faults of a running simulated fleet (``sim up``'s or
``modelfleet dev``'s), found through the state file it writes (``<state dir>/sim.json``).

``sim faults CLUSTER`` PATCHes one simulated cluster's API-level and workload faults through
the emulator's admin endpoint; ``sim faults --cloud gke|eks|aks`` adds a cloud error to the
simulated cloud's (cli/sim_cloud_faults.py maps the options to the fault). Development tooling:
it talks only to the emulators' loopback admin endpoints, with the standard library, and holds
no credentials.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from modelfleet.cli.errors import UsageError
from modelfleet.cli.output import EXIT_FAILED, EXIT_OK, console, err_console
from modelfleet.cli.sim_cloud_faults import (
    Cloud,
    CloudError,
    CloudStep,
    When,
    admin_url,
    fault_body,
)


class PullErrorKind(StrEnum):
    """Why an image cannot be pulled (the simulator's ``ImageFault.pull_error``)."""

    NOT_FOUND = "not-found"
    UNAUTHORIZED = "unauthorized"
    RATE_LIMITED = "rate-limited"
    TIMEOUT = "timeout"


STATE_FILE = "sim.json"
DEFAULT_STATE_DIR = Path(".modelfleet/sim")
# Where `sim faults` looks without --state-dir: `sim up`'s default, then `modelfleet dev`'s fleet.
DEFAULT_STATE_DIRS = (DEFAULT_STATE_DIR, Path(".modelfleet/dev/sim"))
_ADMIN_TIMEOUT = 10.0


def _find_state_dir(state_dir: Path | None) -> Path:
    if state_dir is not None:
        return state_dir
    for candidate in DEFAULT_STATE_DIRS:
        if (candidate / STATE_FILE).is_file():
            return candidate
    err_console.print(
        "[red]error[/]: no simulated fleet is running (no "
        + " or ".join(str(d / STATE_FILE) for d in DEFAULT_STATE_DIRS)
        + "); start one with `modelfleet sim up` or `modelfleet dev`, or pass --state-dir"
    )
    raise typer.Exit(EXIT_FAILED)


def _read_state(state_dir: Path) -> dict[str, Any]:
    path = state_dir / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        err_console.print(
            f"[red]error[/]: no simulated fleet is running ({path} not found); "
            "start one with `modelfleet sim up`"
        )
        raise typer.Exit(EXIT_FAILED) from None
    except ValueError:
        err_console.print(f"[red]error[/]: {path} is not a valid state file")
        raise typer.Exit(EXIT_FAILED) from None
    if not isinstance(data, dict) or not isinstance(data.get("base_url"), str):
        err_console.print(f"[red]error[/]: {path} is not a valid state file")
        raise typer.Exit(EXIT_FAILED)
    return data


def image_fault_change(
    image: str | None,
    error_rate: float | None,
    crash_after: float | None,
    reject_args: list[str] | None,
    *,
    pull_error: str | None = None,
    heal: bool = False,
    ttft_factor: float | None = None,
    tpot_factor: float | None = None,
) -> dict[str, Any] | None:
    """The ``image_faults`` merge patch the ``--image*`` options ask for (None: none given);
    the image's fault replaces any it had, ``heal`` removes it."""
    given = (
        error_rate is not None
        or crash_after is not None
        or reject_args is not None
        or ttft_factor is not None
        or pull_error is not None
        or tpot_factor is not None
    )
    if image is None:
        if given or heal:
            raise UsageError("--image-* options need --image GLOB (the image to make misbehave)")
        return None
    if heal:
        if given:
            raise UsageError("--image-heal removes the image's fault: give no other --image-*")
        return {image: None}
    if not given:
        raise UsageError(
            "--image needs --image-error-rate, --image-crash-after, --image-reject-args, "
            "--image-slower, --image-slower-decode, --image-pull-error or --image-heal"
        )
    fault: dict[str, Any] = {
        "error_rate_5xx": error_rate or 0.0,
        "crash_after_seconds": crash_after,
        "reject_args": list(reject_args or []),
        "pull_error": pull_error,
    }
    if ttft_factor is not None:
        fault["ttft_factor"] = ttft_factor
    if tpot_factor is not None:
        fault["tpot_factor"] = tpot_factor
    return {image: fault}


def _admin(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    result = _admin_any(method, url, body)
    return result if isinstance(result, dict) else {}


def _admin_any(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    """One request to an emulator's loopback admin endpoint; its JSON answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=_ADMIN_TIMEOUT) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError):
            answer = json.loads(detail)
            if isinstance(answer, dict):
                detail = str(answer.get("message") or answer.get("error") or detail)
        err_console.print(f"[red]error[/]: the emulator refused: {exc.code} {detail}")
        raise typer.Exit(EXIT_FAILED) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        err_console.print(
            f"[red]error[/]: cannot reach the simulated fleet at {url} ({reason}); "
            "is `modelfleet sim up` (or `modelfleet dev`) still running?"
        )
        raise typer.Exit(EXIT_FAILED) from None


def faults(
    cluster: Annotated[
        str | None,
        typer.Argument(
            help="The simulated cluster to change (or --cloud for a cloud's).", show_default=False
        ),
    ] = None,
    error_rate: Annotated[
        float | None,
        typer.Option("--error-rate", min=0.0, max=1.0, help="Share of requests answered 500."),
    ] = None,
    throttle_rate: Annotated[
        float | None,
        typer.Option(
            "--throttle-rate",
            min=0.0,
            max=1.0,
            help="Share of requests answered 429 with Retry-After.",
        ),
    ] = None,
    retry_after: Annotated[
        int | None, typer.Option("--retry-after", min=0, help="Retry-After seconds on 429s.")
    ] = None,
    latency_ms: Annotated[
        float | None, typer.Option("--latency-ms", min=0.0, help="Added latency per request.")
    ] = None,
    dark: Annotated[
        bool | None,
        typer.Option("--dark/--no-dark", help="Stop (or resume) answering any request."),
    ] = None,
    never_ready: Annotated[
        list[str] | None,
        typer.Option(
            "--never-ready",
            help="Workload name glob (or namespace/name) whose pods never become ready "
            "(ImagePullBackOff). Repeatable; replaces the current list.",
        ),
    ] = None,
    crash_after_ready: Annotated[
        float | None,
        typer.Option(
            "--crash-after-ready",
            min=0.0,
            help="Pods crash (CrashLoopBackOff) this many seconds after becoming ready.",
        ),
    ] = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Clear every fault before applying the options.")
    ] = False,
    deny_access: Annotated[
        list[str] | None,
        typer.Option(
            "--deny-access",
            help='"VERB RESOURCE" glob that access reviews (kubectl auth can-i) deny, e.g. '
            '"delete pods". Repeatable; replaces the current list.',
        ),
    ] = None,
    download_bandwidth: Annotated[
        float | None,
        typer.Option(
            "--download-mib-per-second",
            min=0.001,
            help="Bandwidth of model-weight downloads (ModelCache hydration Jobs), MiB/s.",
        ),
    ] = None,
    fail_downloads: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-downloads",
            help="Job name glob whose download pods fail half-way (see --download-error). "
            "Repeatable; replaces the current list.",
        ),
    ] = None,
    download_error: Annotated[
        str | None,
        typer.Option("--download-error", help="How failing downloads fail: auth or network."),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image",
            help="Image reference glob (e.g. 'vllm/vllm-openai:*-bad') the --image-* options "
            "make misbehave in every engine started from it.",
        ),
    ] = None,
    image_error_rate: Annotated[
        float | None,
        typer.Option(
            "--image-error-rate",
            min=0.0,
            max=1.0,
            help="With --image: share of its completions answered 500.",
        ),
    ] = None,
    image_slower: Annotated[
        float | None,
        typer.Option(
            "--image-slower",
            min=1.0,
            max=10_000.0,
            help="With --image: its engines' time to first token is this many times longer.",
        ),
    ] = None,
    image_slower_decode: Annotated[
        float | None,
        typer.Option(
            "--image-slower-decode",
            min=1.0,
            max=10_000.0,
            help="With --image: the time between its engines' output tokens is this many "
            "times longer.",
        ),
    ] = None,
    image_crash_after: Annotated[
        float | None,
        typer.Option(
            "--image-crash-after",
            min=0.0,
            help="With --image: its engines crash this many seconds after each start "
            "(minutes: a slow crasher).",
        ),
    ] = None,
    image_reject_args: Annotated[
        list[str] | None,
        typer.Option(
            "--image-reject-args",
            help="With --image: flag glob (e.g. '--enable-*', or '*') its engines do not "
            "recognise: they exit at start with argparse's error. Repeatable.",
        ),
    ] = None,
    image_pull_error: Annotated[
        PullErrorKind | None,
        typer.Option(
            "--image-pull-error",
            help="With --image: the image cannot be pulled (ErrImagePull/ImagePullBackOff): "
            "not-found or unauthorized never heal, rate-limited (429) or timeout do.",
        ),
    ] = None,
    image_heal: Annotated[
        bool,
        typer.Option("--image-heal", help="With --image: remove that image's fault."),
    ] = False,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            "--state-dir",
            help="The fleet's state directory (default: .modelfleet/sim, then "
            "modelfleet dev's .modelfleet/dev/sim).",
        ),
    ] = None,
    cloud: Annotated[
        Cloud | None,
        typer.Option("--cloud", help="Change the simulated cloud's faults instead (gke, eks)."),
    ] = None,
    fail: Annotated[
        CloudError | None,
        typer.Option(
            "--fail", help="With --cloud: the error the next matching cloud call ends in."
        ),
    ] = None,
    on: Annotated[
        CloudStep, typer.Option("--on", help="With --cloud: the step that fails.")
    ] = CloudStep.CREATE_POOL,
    target: Annotated[
        str | None,
        typer.Option("--target", help="With --cloud: only for this pool (or cluster) name."),
    ] = None,
    times: Annotated[
        int, typer.Option("--times", min=1, help="With --cloud: how many calls fail.")
    ] = 1,
    when: Annotated[
        When | None,
        typer.Option(
            "--when",
            help="With --cloud: fail the API call, or the operation it starts (default: "
            "operation for quota and stockout, call otherwise).",
        ),
    ] = None,
    stockout_zone: Annotated[
        str | None,
        typer.Option(
            "--stockout-zone",
            help="With --cloud: the zone has no capacity (every pool created there stocks "
            "out) until --reset.",
        ),
    ] = None,
    machine: Annotated[
        str | None,
        typer.Option(
            "--machine", help="With --stockout-zone: only this machine type runs out there."
        ),
    ] = None,
) -> None:
    """Change (or, with no options, show) the faults of one simulated cluster, or with
    ``--cloud`` make the simulated GKE or EKS fail (quota, stockout, bad machine type...)."""
    kube_options = (
        error_rate,
        throttle_rate,
        retry_after,
        latency_ms,
        dark,
        never_ready,
        crash_after_ready,
        deny_access,
        download_bandwidth,
        fail_downloads,
        download_error,
        image,
    )
    # The command line is checked before anything is read or asked.
    if cloud is not None and (cluster is not None or any(o is not None for o in kube_options)):
        raise UsageError("--cloud changes a cloud's faults: give no CLUSTER and no cluster options")
    if cloud is None and (fail is not None or stockout_zone is not None):
        raise UsageError("--fail and --stockout-zone are cloud errors: add --cloud gke|eks|aks")
    if machine is not None and stockout_zone is None:
        raise UsageError("--machine names what runs out in a --stockout-zone: add that zone")
    if cloud is None and cluster is None:
        raise UsageError("name the simulated CLUSTER to change, or pass --cloud gke|eks|aks")
    image_change = image_fault_change(
        image,
        image_error_rate,
        image_crash_after,
        image_reject_args,
        pull_error=image_pull_error.value if image_pull_error else None,
        heal=image_heal,
        ttft_factor=image_slower,
        tpot_factor=image_slower_decode,
    )
    found = _find_state_dir(state_dir)
    state = _read_state(found)
    if cloud is not None:
        if stockout_zone is not None or reset:
            zones = _cloud_stockouts(
                state, str(found / STATE_FILE), cloud, stockout_zone, machine, reset
            )
        if fail is not None or stockout_zone is None:
            _cloud_faults(
                state, str(found / STATE_FILE), cloud, fail, on, target, times, when, reset
            )
        else:
            console.print_json(json.dumps({"stockouts": zones}))
        raise typer.Exit(EXIT_OK)
    url = f"{state['base_url']}/_admin/clusters/{cluster}/faults"
    changes: dict[str, Any] = {}
    if error_rate is not None:
        changes["error_rate_500"] = error_rate
    if throttle_rate is not None:
        changes["error_rate_429"] = throttle_rate
    if retry_after is not None:
        changes["retry_after_seconds"] = retry_after
    if latency_ms is not None:
        changes["latency_seconds"] = latency_ms / 1000.0
    if dark is not None:
        changes["dark"] = dark
    if never_ready is not None:
        changes["never_ready"] = list(never_ready)
    if crash_after_ready is not None:
        changes["crash_after_ready_seconds"] = crash_after_ready
    if deny_access is not None:
        changes["deny_access"] = list(deny_access)
    if download_bandwidth is not None:
        changes["download_mib_per_second"] = download_bandwidth
    if fail_downloads is not None:
        changes["fail_downloads"] = list(fail_downloads)
    if download_error is not None:
        changes["download_error"] = download_error
    if image_change is not None:
        changes["image_faults"] = image_change
    if reset:
        config = _admin("PUT", url, changes)
    elif changes:
        config = _admin("PATCH", url, changes)
    else:
        config = _admin("GET", url)
    console.print_json(json.dumps(config))
    raise typer.Exit(EXIT_OK)


def _cloud_faults(
    state: dict[str, Any],
    state_path: str,
    cloud: Cloud,
    fail: CloudError | None,
    on: CloudStep,
    target: str | None,
    times: int,
    when: When | None,
    reset: bool,
) -> None:
    """Clear (``reset``), add (``fail``) or show the simulated cloud's pending faults."""
    url = admin_url(state, cloud, state_path)
    pending: Any = None
    if reset:
        pending = _admin_any("DELETE", url)
    if fail is not None:
        pending = _admin_any("POST", url, fault_body(cloud, fail, on, target, times, when))
    if pending is None:
        pending = _admin_any("GET", url)
    console.print_json(json.dumps(pending))


def _cloud_stockouts(
    state: dict[str, Any],
    state_path: str,
    cloud: Cloud,
    zone: str | None,
    machine: str | None,
    reset: bool,
) -> Any:
    """Clear (``reset``) the simulated cloud's stockouts, then stock out ``zone`` (of
    ``machine`` only, when given); the stocked-out zones."""
    url = admin_url(state, cloud, state_path).removesuffix("/faults") + "/stockouts"
    current: Any = None
    if reset:
        current = _admin_any("DELETE", url)
    if zone is not None:
        body: dict[str, Any] = {"zone": zone}
        if machine is not None:
            body["machine"] = machine
        current = _admin_any("POST", url, body)
    if current is None:
        current = _admin_any("GET", url)
    return current
