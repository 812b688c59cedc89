"""kubectl against the simulated fleet: the `kubectl` on PATH (the build machines ship one) drives
get / describe / apply / wait / logs / events / explain / create / auth can-i against the
quickstart fleet over real HTTP, as a user would. Without kubectl the suite fails (never skips).

The fleet runs on its own loop in a thread; every kubectl call is a subprocess with its own
timeout, and waits are kubectl's own (`wait`, `rollout status`), never sleeps.
"""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from kubectl_support import (
    CLUSTER,
    KUBECTL_TIMEOUT,
    QUICKSTART,
    Kubectl,
    kubectl_binary,
    quickstart_fleet,
)
from typer.testing import CliRunner

from modelfleet.cli.main import app
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

WEB = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: IMAGE
          ports: [{containerPort: 8000}]
          readinessProbe: {httpGet: {path: /health, port: 8000}}
"""

LWS = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: engine
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
          - name: vllm
            image: vllm/vllm-openai:v0.11.0
            args: [serve, Qwen/Qwen3-8B]
"""

STUCK_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: stuck
spec:
  nodeSelector: {sim.modelfleet.dev/pool: no-such-pool}
  containers: [{name: app, image: busybox:1.36}]
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopThread[SimulatedFleet]]:
    with quickstart_fleet(tmp_path_factory.mktemp("kubectl-fleet")) as running:
        yield running


@pytest.fixture(scope="module")
def kubectl(fleet: LoopThread[SimulatedFleet], tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(
        kubectl_binary(), fleet.target.kubeconfig(CLUSTER), tmp_path_factory.mktemp("home")
    )


def _rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


def test_get_nodes_wide_shows_server_side_columns(kubectl: Kubectl) -> None:
    rows = _rows(kubectl.out("get", "nodes", "-o", "wide"))
    header = rows[0]
    assert header[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert "INTERNAL-IP" in header
    assert "CONTAINER-RUNTIME" in header
    ip_col = header.index("INTERNAL-IP")
    assert len(rows) > 1
    for row in rows[1:]:
        assert row[1] == "Ready"
        assert row[ip_col].count(".") == 3, row


def test_apply_wait_rs_pods_describe_logs_and_events(kubectl: Kubectl) -> None:
    applied = kubectl.out("apply", "-f", "-", stdin=WEB.replace("IMAGE", "vllm/vllm-openai:v1"))
    assert applied.strip() == "deployment.apps/web created"
    kubectl.out("wait", "--for=condition=Available", "deployment/web", "--timeout=30s")

    deploy = _rows(kubectl.out("get", "deployments", "web"))
    assert deploy[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert deploy[1][:4] == ["web", "2/2", "2", "2"]

    rs = _rows(kubectl.out("get", "rs", "-l", "app=web"))
    assert rs[0][:4] == ["NAME", "DESIRED", "CURRENT", "READY"]
    assert len(rs) == 2
    assert rs[1][1:4] == ["2", "2", "2"]
    rs_name = rs[1][0]
    owner = kubectl.out("get", "rs", rs_name, "-o", "jsonpath={.metadata.ownerReferences[0].kind}")
    assert owner == "Deployment"

    pods = _rows(kubectl.out("get", "pods", "-l", "app=web", "-o", "wide"))
    assert pods[0][:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert len(pods) == 3
    for pod in pods[1:]:
        assert pod[0].startswith(f"{rs_name}-")
        assert pod[1:4] == ["1/1", "Running", "0"]
        assert pod[6] != "<none>"
    pod_name = pods[1][0]

    described = kubectl.out("describe", "pod", pod_name)
    events = described.split("Events:", 1)[1]
    for reason in ("Scheduled", "Pulling", "Pulled", "Started"):
        assert reason in events, described
    assert "default-scheduler" in events

    described_deploy = kubectl.out("describe", "deployment", "web")
    assert f"NewReplicaSet:   {rs_name}" in described_deploy
    assert "ScalingReplicaSet" in described_deploy

    logs = kubectl.out("logs", pod_name)
    assert "Starting vLLM API server on http://" in logs
    tail = kubectl.out("logs", "deployment/web", "--tail=1")
    assert tail.strip().splitlines() == ["INFO Application startup complete."]

    field = f"involvedObject.name={pod_name}"
    events_table = _rows(kubectl.out("get", "events", "--field-selector", field))
    assert events_table[0][:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert {"Scheduled", "Started"} <= {row[2] for row in events_table[1:]}
    new_api = kubectl.out("get", "events.v1.events.k8s.io", "-o", "name")
    assert new_api.strip()

    # A changed template rolls through a new ReplicaSet; the old one is scaled to zero.
    changed = WEB.replace("IMAGE", "vllm/vllm-openai:v2")
    assert kubectl.out("apply", "-f", "-", stdin=changed).strip() == (
        "deployment.apps/web configured"
    )
    kubectl.out("rollout", "status", "deployment/web", "--timeout=30s")
    sets = {row[0]: row[1] for row in _rows(kubectl.out("get", "rs", "-l", "app=web"))[1:]}
    assert len(sets) == 2
    assert sets[rs_name] == "0"
    assert sorted(sets.values()) == ["0", "2"]

    # Undo goes back to the first ReplicaSet (same template hash), which becomes revision 3.
    kubectl.out("rollout", "undo", "deployment/web")
    kubectl.out("rollout", "status", "deployment/web", "--timeout=30s")
    sets = {row[0]: row[1] for row in _rows(kubectl.out("get", "rs", "-l", "app=web"))[1:]}
    assert len(sets) == 2
    assert sets[rs_name] == "2"
    history = _rows(kubectl.out("rollout", "history", "deployment/web"))
    assert [row[0] for row in history[2:]] == ["2", "3"]


def test_api_defaults_fill_rendered_fields(kubectl: Kubectl) -> None:
    kubectl.out("apply", "-f", "-", stdin=WEB.replace("IMAGE", "vllm/vllm-openai:v1"))
    strategy = kubectl.out(
        "get", "deployment", "web", "-o", "jsonpath={.spec.strategy.rollingUpdate.maxSurge}"
    )
    assert strategy == "25%"
    probe = kubectl.out(
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].readinessProbe.failureThreshold}"
        " {.spec.template.spec.terminationGracePeriodSeconds}"
        " {.spec.template.spec.containers[0].imagePullPolicy}",
    )
    assert probe.split() == ["3", "30", "IfNotPresent"]


def test_failed_scheduling_is_an_event(kubectl: Kubectl) -> None:
    kubectl.out("apply", "-f", "-", stdin=STUCK_POD)
    kubectl.out("wait", "--for=condition=PodScheduled=false", "pod/stuck", "--timeout=30s")
    pods = _rows(kubectl.out("get", "pod", "stuck"))
    assert pods[1][1:3] == ["0/1", "Pending"]
    described = kubectl.out("describe", "pod", "stuck")
    assert "FailedScheduling" in described
    assert "didn't match Pod's node affinity/selector" in described
    kubectl.out("delete", "pod", "stuck", "--wait=false")


def test_leaderworkerset_apply_and_columns(kubectl: Kubectl) -> None:
    assert kubectl.out("apply", "-f", "-", stdin=LWS).strip() == (
        "leaderworkerset.leaderworkerset.x-k8s.io/engine created"
    )
    rows = _rows(kubectl.out("get", "lws", "engine"))
    assert rows[0][:3] == ["NAME", "READY", "SIZE"]
    assert rows[1][0] == "engine"
    assert rows[1][2] == "2"
    # A second apply of a CRD kind goes as a merge patch (strategic merge is built-in only).
    again = kubectl.out("apply", "-f", "-", stdin=LWS.replace("replicas: 1", "replicas: 2"))
    assert again.strip().endswith("configured")
    replicas = kubectl.out("get", "lws", "engine", "-o", "jsonpath={.spec.replicas}")
    assert replicas == "2"


def test_explain_uses_the_openapi_documents(kubectl: Kubectl) -> None:
    strategy = kubectl.out("explain", "deployment.spec.strategy")
    assert "KIND:       Deployment" in strategy
    assert "rollingUpdate" in strategy
    probe = kubectl.out("explain", "pods.spec.containers.readinessProbe")
    assert "failureThreshold" in probe
    lws = kubectl.out("explain", "leaderworkersets.spec.leaderWorkerTemplate")
    assert "workerTemplate" in lws
    assert "size" in lws
    pool = kubectl.out("explain", "inferencepools.spec")
    assert "targetPorts" in pool
    assert "endpointPickerRef" in pool


def test_create_sends_protobuf_and_works(kubectl: Kubectl) -> None:
    assert kubectl.out("create", "namespace", "made").strip() == "namespace/made created"
    created = kubectl.out(
        "create", "deployment", "made", "-n", "made", "--image=nginx:1.27", "--replicas=3"
    )
    assert created.strip() == "deployment.apps/made created"
    kubectl.out("create", "configmap", "cfg", "-n", "made", "--from-literal=key=value")
    assert kubectl.out("get", "cm", "cfg", "-n", "made", "-o", "jsonpath={.data.key}") == "value"
    kubectl.out("wait", "-n", "made", "--for=condition=Available", "deploy/made", "--timeout=30s")
    image = kubectl.out(
        "get",
        "deploy",
        "made",
        "-n",
        "made",
        "-o",
        "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
    )
    assert image.split() == ["3", "nginx:1.27"]
    kubectl.out("create", "service", "clusterip", "made", "-n", "made", "--tcp=80:8080")
    svc = _rows(kubectl.out("get", "svc", "made", "-n", "made"))
    assert svc[0][:5] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)"]
    assert svc[1][1] == "ClusterIP"
    assert svc[1][2].startswith("10.96.")
    assert svc[1][4] == "80/TCP"
    kubectl.out("create", "role", "reader", "-n", "made", "--verb=get", "--resource=pods")
    kubectl.out("create", "rolebinding", "reader", "-n", "made", "--role=reader", "--user=ann")
    rules = kubectl.out("get", "role", "reader", "-n", "made", "-o", "jsonpath={.rules[0].verbs}")
    assert json.loads(rules) == ["get"]
    all_kinds = kubectl.out("get", "all", "-n", "made", "-o", "name").split()
    assert "deployment.apps/made" in all_kinds
    assert "service/made" in all_kinds
    assert sum(name.startswith("replicaset.apps/made-") for name in all_kinds) == 1
    assert sum(name.startswith("pod/made-") for name in all_kinds) == 3


def test_auth_can_i_allows_unless_a_fault_denies(
    kubectl: Kubectl, fleet: LoopThread[SimulatedFleet]
) -> None:
    assert kubectl.run("auth", "can-i", "delete", "pods").stdout.strip() == "yes"
    fleet.call(fleet.target.update_faults, CLUSTER, {"deny_access": ["delete pods"]})
    try:
        denied = kubectl.run("auth", "can-i", "delete", "pods", check=False)
        assert denied.returncode == 1
        assert denied.stdout.strip().startswith("no")
        assert "'delete pods'" in denied.stdout  # the reason names the denying rule
        assert kubectl.run("auth", "can-i", "get", "pods").stdout.strip() == "yes"
    finally:
        fleet.call(fleet.target.update_faults, CLUSTER, {"deny_access": []})


def test_strict_field_validation_refuses_unknown_fields(kubectl: Kubectl) -> None:
    typo = WEB.replace("replicas: 2", "replicass: 2").replace("name: web\n", "name: typo\n", 1)
    refused = kubectl.run("apply", "-f", "-", stdin=typo, check=False)
    assert refused.returncode == 1
    assert 'strict decoding error: unknown field "spec.replicass"' in refused.stderr
    assert kubectl.run("get", "deployment", "typo", check=False).returncode == 1
    warned = kubectl.run("apply", "--validate=warn", "-f", "-", stdin=typo)
    assert 'Warning: unknown field "spec.replicass"' in warned.stderr
    assert (
        'unknown field \\"spec.replicass\\"' in warned.stderr or "spec.replicass" in warned.stderr
    )


def test_rendered_manifests_apply_plain_then_unchanged(kubectl: Kubectl) -> None:
    rendered = CliRunner().invoke(app, ["render", "-f", str(QUICKSTART)])
    assert rendered.exit_code == 0, rendered.output
    first = kubectl.out("apply", "-f", "-", stdin=rendered.stdout)
    kinds = {line.split("/", 1)[0] for line in first.splitlines()}
    assert {
        "deployment.apps",
        "inferencepool.inference.networking.k8s.io",
        "httproute.gateway.networking.k8s.io",
        "resourceclaimtemplate.resource.k8s.io",
    } <= kinds
    second = kubectl.out("apply", "-f", "-", stdin=rendered.stdout)
    # Server defaults (strategy, probe thresholds, port protocols) must not make a re-apply
    # look like a change: lists merge by their keys, as against a real server.
    changed = [
        line
        for line in second.splitlines()
        if not line.endswith("unchanged") and not line.startswith("namespace/")
    ]
    assert changed == []


def test_watch_frames_are_tables(kubectl: Kubectl, fleet: LoopThread[SimulatedFleet]) -> None:
    kubectl.out("create", "configmap", "watched", "--from-literal=a=1")
    rv = kubectl.out("get", "configmap", "watched", "-o", "jsonpath={.metadata.resourceVersion}")
    kubectl.out("label", "configmap", "watched", "seen=yes")
    url = f"{fleet.target.server.cluster_url(CLUSTER)}/api/v1/namespaces/default/configmaps"
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    params = {
        "watch": "1",
        "resourceVersion": rv,
        "fieldSelector": "metadata.name=watched",
        "timeoutSeconds": "5",
    }
    request = urllib.request.Request(
        f"{url}?{urllib.parse.urlencode(params)}", headers={"Accept": accept}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        line = response.readline()
    frame = json.loads(line)
    assert frame["type"] == "MODIFIED"
    assert frame["object"]["kind"] == "Table"
    assert frame["object"]["rows"][0]["cells"][0] == "watched"
    assert frame["object"]["rows"][0]["object"]["metadata"]["labels"] == {"seen": "yes"}


def test_crash_loop_shows_in_get_describe_and_logs(
    kubectl: Kubectl, fleet: LoopThread[SimulatedFleet]
) -> None:
    fleet.call(
        fleet.target.update_faults,
        CLUSTER,
        {"crash_after_ready_seconds": 0.1, "crash_after_ready": ["crashy"]},
    )
    try:
        manifest = WEB.replace("name: web\n", "name: crashy\n", 1).replace(
            "app: web", "app: crashy"
        )
        kubectl.out("apply", "-f", "-", stdin=manifest.replace("IMAGE", "vllm/vllm-openai:v1"))
        kubectl.out(
            "wait",
            "--for=jsonpath={.status.containerStatuses[0].restartCount}=1",
            "pod",
            "-l",
            "app=crashy",
            "--timeout=30s",
        )
        pods = _rows(kubectl.out("get", "pods", "-l", "app=crashy"))
        assert len(pods) == 3
        for pod in pods[1:]:
            assert pod[1:3] == ["0/1", "CrashLoopBackOff"]
            assert pod[3] == "1"
            assert pod[4].startswith("(")  # "1 (3s ago)": when it last restarted
            assert pod[5] == "ago)"
        name = pods[1][0]
        described = kubectl.out("describe", "pod", name)
        assert "Back-off restarting failed container web" in described
        assert "Readiness probe failed" in described
        assert "engine core died unexpectedly" in kubectl.out("logs", name)
        previous = kubectl.out("logs", name, "--previous")
        assert "Application startup complete." in previous
        assert "engine core died unexpectedly" in previous
    finally:
        fleet.call(
            fleet.target.update_faults,
            CLUSTER,
            {"crash_after_ready_seconds": None, "crash_after_ready": ["*"]},
        )
        kubectl.run("delete", "deployment", "crashy", "--wait=false", check=False)


def test_logs_follow_streams_until_the_pod_goes(kubectl: Kubectl) -> None:
    kubectl.out("run", "follow", "--image=vllm/vllm-openai:v1", "--restart=Never")
    kubectl.out("wait", "--for=condition=Ready", "pod/follow", "--timeout=30s")
    with subprocess.Popen(
        [kubectl.binary, "logs", "-f", "follow"],
        stdout=subprocess.PIPE,
        text=True,
        env=kubectl.env,
    ) as follower:
        assert follower.stdout is not None
        first = follower.stdout.readline()
        assert first.startswith("INFO vLLM API server version")
        kubectl.out("delete", "pod", "follow", "--wait=false")
        rest = follower.stdout.read()  # ends when the server closes the stream
        assert follower.wait(timeout=KUBECTL_TIMEOUT) == 0
    assert rest.strip().endswith("INFO Application startup complete.")


def test_engine_requests_show_in_logs(kubectl: Kubectl, fleet: LoopThread[SimulatedFleet]) -> None:
    manifest = WEB.replace("name: web\n", "name: chat\n", 1).replace("app: web", "app: chat")
    manifest = manifest.replace(
        "ports: [{containerPort: 8000}]",
        "ports: [{containerPort: 8000}]\n          args: [serve, Qwen/Qwen3-8B]",
    )
    kubectl.out("apply", "-f", "-", stdin=manifest.replace("IMAGE", "vllm/vllm-openai:v1"))
    kubectl.out("wait", "--for=condition=Available", "deployment/chat", "--timeout=30s")
    pod = kubectl.out("get", "pods", "-l", "app=chat", "-o", "jsonpath={.items[0].metadata.name}")
    plane = fleet.target.serving(CLUSTER)

    # The serving plane binds a Ready pod's port on its own Pod event: settle covers that.
    fleet.run(fleet.target.settle(30), timeout=35)
    url = fleet.call(lambda: plane.engine_url("default", pod))
    assert url is not None
    body = json.dumps({"model": "Qwen/Qwen3-8B", "prompt": "hello", "max_tokens": 3}).encode()
    request = urllib.request.Request(
        f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    logs = kubectl.out("logs", pod).splitlines()
    assert "INFO Application startup complete." in logs
    assert logs[-1] == (
        "INFO Finished request 1 for Qwen/Qwen3-8B: prompt_tokens=1 generation_tokens=3"
    )


# The templates `modelfleet get -o jsonpath=...` and `-o custom-columns=...` are given; the real
# kubectl prints each over the same document, and modelfleet's printers must print it alike.
JSONPATH_TEMPLATES = [
    "{.items[*].metadata.name}",
    '{range .items[*]}{.metadata.name}{"\\t"}{.status.capacity}{"\\n"}{end}',
    "{.items[0].metadata.labels}",
    '{.items[*].status.conditions[?(@.type=="Ready")].status}',
    "{.items[0].metadata.labels.kubernetes\\.io/hostname}",
    "{.items[*]['metadata.name', 'spec.podCIDR']}",
    "{..kubeletVersion}",
    "{.items[-1:].metadata.name} {.items[0].spec.unschedulable}{.nothing}",
    "{.items[0].status.addresses}",
    "nodes: {.kind} {.items[0].metadata.creationTimestamp}",
]
CUSTOM_COLUMNS = [
    "NAME:.metadata.name,IP:.status.addresses[0].address,LABELS:.metadata.labels",
    "N:metadata.name,ALLOC:{.status.allocatable},NONE:.spec.nothing,T:.spec.taints[*].key",
    "CONDITIONS:.status.conditions[*].type,V:.status.nodeInfo.kubeletVersion",
]


def test_jsonpath_and_custom_columns_print_as_kubectls(kubectl: Kubectl) -> None:
    from modelfleet.cli import custom_columns, jsonpath

    document = json.loads(kubectl.out("get", "nodes", "-o", "json"))
    assert len(document["items"]) > 1
    for template in JSONPATH_TEMPLATES:
        theirs = kubectl.out("get", "nodes", "-o", f"jsonpath={template}")
        # The same nodes: kubectl's second read is compared with the first read's names.
        assert jsonpath.execute(jsonpath.parse(template), document) == theirs, template
    for spec in CUSTOM_COLUMNS:
        theirs = kubectl.out("get", "nodes", "-o", f"custom-columns={spec}")
        columns = custom_columns.parse_columns(spec)
        rows = [[c.header for c in columns]]
        rows += [custom_columns.column_cells(columns, item) for item in document["items"]]
        assert custom_columns.tabulate(rows) == theirs, spec


def test_sort_by_orders_as_kubectls(kubectl: Kubectl) -> None:
    from modelfleet.cli import custom_columns, jsonpath
    from modelfleet.cli.errors import CliError
    from modelfleet.cli.get import sort_items
    from modelfleet.cli.manifests import Fetched

    document = json.loads(kubectl.out("get", "nodes", "-o", "json"))
    items = [Fetched("Node", i["metadata"]["name"], "", i) for i in document["items"]]
    by_name = {f"node/{i.name}": i.manifest for i in items}
    for field in (".metadata.name", "{.status.capacity.cpu}", ".spec.taints[0].key"):
        theirs = kubectl.out("get", "nodes", "--sort-by", field, "-o", "name").split()
        ours = [f"node/{i.name}" for i in sort_items(list(reversed(items)), field)]
        assert sorted(ours) == sorted(theirs)
        # kubectl's sort is not stable: equal values may come in either order.
        path = custom_columns.relaxed(field)
        assert [jsonpath.find(path, by_name[n], by_name[n]) for n in ours] == [
            jsonpath.find(path, by_name[n], by_name[n]) for n in theirs
        ], field
    theirs = kubectl.run("get", "nodes", "--sort-by", ".nothing", "-o", "name", check=False)
    assert theirs.returncode == 1
    assert "couldn't find any field with path" in theirs.stderr
    with pytest.raises(CliError, match="couldn't find any field with path"):
        sort_items(items, ".nothing")


GPU_POD = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-l4}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, count: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: exec-settings}
data: {MODE: fast}
---
apiVersion: v1
kind: Pod
metadata: {name: gpu-shell}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-l4}]
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
    - name: app
      image: vllm/vllm-openai:v1
      args: [serve, Qwen/Qwen3-8B]
      ports: [{containerPort: 8000}]
      readinessProbe: {httpGet: {path: /health, port: 8000}}
      env:
        - {name: GREETING, value: hello world}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: MODE, valueFrom: {configMapKeyRef: {name: exec-settings, key: MODE}}}
      resources: {claims: [{name: gpu}]}
"""


def test_raw_paths_are_served_at_the_cluster_root(kubectl: Kubectl) -> None:
    # `get --raw` drops the kubeconfig server's path: each cluster has its own root.
    for path in ("/readyz", "/livez", "/healthz"):
        assert kubectl.out("get", "--raw", path) == "ok", path
    swagger = json.loads(kubectl.out("get", "--raw", "/openapi/v2"))
    assert swagger["swagger"] == "2.0"
    assert "io.k8s.api.core.v1.Pod" in swagger["definitions"]
    version = json.loads(kubectl.out("get", "--raw", "/version"))
    server = json.loads(kubectl.out("version", "-o", "json"))["serverVersion"]
    assert version["gitVersion"] == server["gitVersion"]
    missing = kubectl.run("get", "--raw", "/nothing/here", check=False)
    assert missing.returncode == 1
    assert "NotFound" in missing.stderr


def test_exec_runs_emulated_commands_from_the_pods_state(kubectl: Kubectl) -> None:
    kubectl.out("apply", "-f", "-", stdin=GPU_POD)
    kubectl.out("wait", "--for=condition=Ready", "pod/gpu-shell", "--timeout=30s")

    assert kubectl.out("exec", "gpu-shell", "--", "echo", "hi") == "hi\n"
    assert kubectl.out("exec", "gpu-shell", "--", "hostname") == "gpu-shell\n"
    assert kubectl.out("exec", "gpu-shell", "--", "cat", "/etc/hostname") == "gpu-shell\n"
    printed = kubectl.out("exec", "gpu-shell", "--", "printenv", "GREETING", "POD_NAME", "MODE")
    assert printed == "hello world\ngpu-shell\nfast\n"
    env = dict(
        line.split("=", 1) for line in kubectl.out("exec", "gpu-shell", "--", "env").splitlines()
    )
    assert env["HOSTNAME"] == "gpu-shell"
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["KUBERNETES_PORT"] == f"tcp://{env['KUBERNETES_SERVICE_HOST']}:443"
    shell = kubectl.out("exec", "gpu-shell", "--", "sh", "-c", 'echo "$GREETING" from $HOSTNAME')
    assert shell == "hello world from gpu-shell\n"
    piped = kubectl.out("exec", "-i", "gpu-shell", "--", "cat", stdin="line one\nline two\n")
    assert piped == "line one\nline two\n"

    # nvidia-smi lists the device the scheduler allocated to the pod's claim, as published.
    pod = json.loads(kubectl.out("get", "pod", "gpu-shell", "-o", "json"))
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claim = json.loads(kubectl.out("get", "resourceclaim", claim_name, "-o", "json"))
    [result] = claim["status"]["allocation"]["devices"]["results"]
    slices = json.loads(kubectl.out("get", "resourceslices", "-o", "json"))["items"]
    [device] = [
        d
        for s in slices
        if s["spec"]["pool"]["name"] == result["pool"]
        for d in s["spec"]["devices"]
        if d["name"] == result["device"]
    ]
    attrs = device["attributes"]
    listed = kubectl.out("exec", "gpu-shell", "--", "nvidia-smi", "-L")
    assert listed == f"GPU 0: {attrs['productName']['string']} (UUID: {attrs['uuid']['string']})\n"

    # curl inside the pod reaches its own simulated engine.
    models = json.loads(
        kubectl.out("exec", "gpu-shell", "--", "curl", "-s", "http://localhost:8000/v1/models")
    )
    assert [m["id"] for m in models["data"]] == ["Qwen/Qwen3-8B"]
    refused = kubectl.run(
        "exec", "gpu-shell", "--", "curl", "-sS", "http://localhost:9999/", check=False
    )
    assert refused.returncode == 7
    assert "curl: (7) Failed to connect to localhost port 9999" in refused.stderr
    kubectl.run("delete", "pod", "gpu-shell", "--wait=false", check=False)


def test_exec_exit_codes_and_errors_read_as_a_real_clusters(kubectl: Kubectl) -> None:
    kubectl.out("run", "shell", "--image=busybox:1.36", "--restart=Never")
    kubectl.out("wait", "--for=condition=Ready", "pod/shell", "--timeout=30s")

    failed = kubectl.run("exec", "shell", "--", "false", check=False)
    assert (failed.returncode, failed.stdout) == (1, "")
    assert failed.stderr.strip() == "command terminated with exit code 1"
    three = kubectl.run("exec", "shell", "--", "sh", "-c", "echo before; exit 3", check=False)
    assert (three.returncode, three.stdout) == (3, "before\n")
    assert "command terminated with exit code 3" in three.stderr

    # A binary the image lacks: containerd cannot start it, as kubectl shows on a real cluster.
    missing = kubectl.run("exec", "shell", "--", "ps", "aux", check=False)
    assert missing.returncode == 1
    assert missing.stderr.startswith(
        "error: Internal error occurred: Internal error occurred: error executing command in "
        "container: failed to exec in container: failed to start exec "
    )
    assert missing.stderr.rstrip().endswith(
        'exec: "ps": executable file not found in $PATH: unknown'
    )
    # Through a shell it is the shell's "not found", status 127.
    in_shell = kubectl.run("exec", "shell", "--", "sh", "-c", "ps aux", check=False)
    assert in_shell.returncode == 127
    assert "sh: 1: ps: not found" in in_shell.stderr

    wrong = kubectl.run("exec", "shell", "-c", "sidecar", "--", "true", check=False)
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == (
        "Error from server (BadRequest): container sidecar is not valid for pod shell"
    )
    kubectl.out("apply", "-f", "-", stdin=STUCK_POD.replace("name: stuck", "name: unbound"))
    unbound = kubectl.run("exec", "unbound", "--", "true", check=False)
    assert unbound.returncode == 1
    assert "pod unbound does not have a host assigned" in unbound.stderr
    absent = kubectl.run("exec", "absent", "--", "true", check=False)
    assert absent.returncode == 1
    assert 'pods "absent" not found' in absent.stderr
    for name in ("shell", "unbound"):
        kubectl.run("delete", "pod", name, "--wait=false", check=False)
