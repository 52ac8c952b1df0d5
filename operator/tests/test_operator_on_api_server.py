"""The whole operator (``kopf run`` of this working tree) against the local API server and Kafka broker:
the CRD installs, a StreamApp gets its internal topics, ConfigMap, Service and StatefulSet with owner
references, its status and printer columns are written, /scale works, an invalid topology or a missing source
topic ends in Degraded with the reason in the message, and deleting the StreamApp removes its children. The
PodDisruptionBudget follows spec.disruptionBudget and the replicas (the real disruption controller counts the
StatefulSet's pods through its selector), and the CRD rejects budgets that are invalid with a clear message.

The operator runs with the rights the Helm chart grants (its ServiceAccount's token, the chart's RBAC rendered
with ``watchNamespaces`` = the test namespace), so the test also proves that RBAC sufficient.

Needs ``hack/stack/up.sh`` (Kafka + Kubernetes). An operator installed by the chart is scaled to zero for the
duration, so that the operator under test is the only one serving the test namespace.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from operator_fakes import FLIGHTS_TOPOLOGY
from operator_helm import helm_binary, render

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ENV_FILE = ROOT / ".cache" / "run" / "env"
CRD = ROOT / "crds" / "streamapp.io_streamapps.yaml"
T = TypeVar("T")
#: Changelog records the pod of the Restoring test restores: enough for several seconds of restore.
RESTORE_RECORDS = 1_500_000


def _stack_env() -> dict[str, str]:
    env = dict(os.environ)
    for line in ENV_FILE.read_text().splitlines():
        line = line.strip().removeprefix("export ")
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = os.path.expandvars(value.strip().strip('"'))
    env["PATH"] = f"{env['STACK_BIN']}:{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"
    cache = (ROOT / ".cache" / "run").resolve()  # a worktree's .cache (or .cache/run) may be a link to the main tree's
    assert Path(env["KUBECONFIG"]).resolve().is_relative_to(cache), "refusing a kubeconfig outside .cache/run"
    return env


class Kube:
    """kubectl against the local API server."""

    def __init__(self, env: dict[str, str], namespace: str) -> None:
        self.env, self.namespace = env, namespace

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        done = subprocess.run(
            ["kubectl", *args], env=self.env, input=stdin, capture_output=True, text=True, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.run("get", kind, name, "-n", self.namespace, "-o", "json", "--ignore-not-found")
        return json.loads(out) if out.strip() else None

    def absent(self, kind: str, name: str) -> bool:
        return self.get(kind, name) is None

    def apply(self, manifest: dict[str, Any]) -> None:
        self.run("apply", "-n", self.namespace, "-f", "-", stdin=yaml.safe_dump(manifest))

    def rejection(self, manifest: dict[str, Any]) -> str:
        """The API server's error for a server-side dry-run create of ``manifest`` ("" when accepted)."""
        done = subprocess.run(
            ["kubectl", "create", "--dry-run=server", "-n", self.namespace, "-f", "-"],
            env=self.env, input=yaml.safe_dump(manifest), capture_output=True, text=True, check=False,
        )  # fmt: skip
        return done.stderr if done.returncode != 0 else ""


def wait_for(probe: Callable[[], T | None], what: str, timeout: float = 60.0) -> T:
    """Poll ``probe`` until it returns a truthy value; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    env = _stack_env()
    subprocess.run(["kubectl", "get", "--raw", "/readyz"], env=env, check=True, capture_output=True)
    return env


@pytest.fixture(scope="module")
def kube(env: dict[str, str]) -> Iterator[Kube]:
    namespace = f"operator-test-{uuid.uuid4().hex[:6]}"
    kube = Kube(env, namespace)
    kube.run("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    kube.run("wait", "--for=condition=Established", "crd/streamapps.streamapp.io", "--timeout=60s")
    kube.run("create", "namespace", namespace)
    yield kube
    kube.run("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def kafka(env: dict[str, str]) -> Iterator[tuple[AdminClient, str]]:
    admin = AdminClient({"bootstrap.servers": env["KAFKA_BOOTSTRAP"]})
    prefix = f"operator-test-{uuid.uuid4().hex[:6]}"
    yield admin, prefix
    topics = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    if topics:
        for future in admin.delete_topics(topics, operation_timeout=10).values():
            future.result()


@pytest.fixture(scope="module")
def chart_kubeconfig(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig with a token of the chart's ServiceAccount, bound by the chart's RBAC to the test namespace."""
    release = f"optest-{uuid.uuid4().hex[:6]}"
    rendered = render(helm_binary(), release, kube.namespace, f"watchNamespaces={{{kube.namespace}}}")
    docs = [{k: v for k, v in d.items() if k != "_source"} for d in rendered if d["kind"] != "Deployment"]
    manifest = yaml.safe_dump_all(docs)
    kube.run("apply", "-f", "-", stdin=manifest)
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    token = kube.run("create", "token", account, "-n", kube.namespace, "--duration=2h").strip()
    admin = json.loads(kube.run("config", "view", "--raw", "--minify", "--flatten", "-o", "json"))
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "local", "user": account}}],
        "current-context": account,
    }
    path = tmp_path_factory.mktemp("rbac") / "operator.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield path
    kube.run("delete", "--ignore-not-found", "-f", "-", stdin=manifest, check=False)


@pytest.fixture(scope="module")
def operator(kube: Kube, chart_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``kopf run`` of this working tree as the chart's ServiceAccount, scoped to the test namespace; yields its log."""
    installed = _pause_installed_operators(kube)
    log = tmp_path_factory.mktemp("operator") / "kopf.log"
    env = {**kube.env, "KUBECONFIG": str(chart_kubeconfig)}
    with log.open("w") as out:
        command = ["kopf", "run", "--standalone", "-m", "streamapp_operator.main", "--namespace", kube.namespace]
        process = subprocess.Popen(
            [sys.executable, "-m", *command, "--verbose"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        for namespace, name, replicas in installed:
            kube.run("scale", "deployment", name, "-n", namespace, f"--replicas={replicas}", check=False)


def _pause_installed_operators(kube: Kube) -> list[tuple[str, str, int]]:
    selector = "app.kubernetes.io/name=streamapp-operator"
    found = json.loads(kube.run("get", "deployments", "-A", "-l", selector, "-o", "json"))["items"]
    paused = []
    for deployment in found:
        namespace, name = deployment["metadata"]["namespace"], deployment["metadata"]["name"]
        paused.append((namespace, name, deployment["spec"].get("replicas", 1)))
        kube.run("scale", "deployment", name, "-n", namespace, "--replicas=0")
    # Scaling returns at once; an installed operator still terminating would reconcile the test's StreamApps
    # with its own (possibly older) code.
    for namespace, _, _ in paused:
        kube.run("wait", "--for=delete", "pod", "-n", namespace, "-l", selector, "--timeout=90s", check=False)
    return paused


def _streamapp(name: str, source_topic: str, application_id: str, replicas: int = 0) -> dict[str, Any]:
    topology = copy.deepcopy(FLIGHTS_TOPOLOGY)
    topology["nodes"][0]["topics"] = [source_topic]
    return {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": name},
        "spec": {
            "image": "localhost/streamapp:dev",
            "imagePullPolicy": "Never",
            "applicationId": application_id,
            "replicas": replicas,
            "threads": 2,
            "kafka": {"bootstrapServers": "127.0.0.1:9092"},
            "topology": topology,
        },
    }


def _condition(app: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for condition in (app or {}).get("status", {}).get("conditions", []):
        if condition["type"] == kind:
            return dict(condition)
    return {}


def _log_tail(log: Path) -> str:
    return "\n".join(log.read_text().splitlines()[-40:])


def test_operator_reconciles_a_streamapp_on_the_api_server(
    kube: Kube, kafka: tuple[AdminClient, str], operator: Path
) -> None:
    admin, prefix = kafka
    source, app_id = f"{prefix}-flights", f"{prefix}-app"
    for future in admin.create_topics([NewTopic(source, num_partitions=3, replication_factor=1)]).values():
        future.result()
    kube.apply(_streamapp("flights", source, app_id))
    app = kube.get("streamapp", "flights")
    assert app is not None
    assert (app["spec"]["state"]["size"], app["spec"]["processingGuarantee"]) == ("1Gi", "at_least_once")

    app = wait_for(
        lambda: (a := kube.get("streamapp", "flights")) and a.get("status", {}).get("observedGeneration") == 1 and a,
        f"status.observedGeneration of the StreamApp; operator log:\n{_log_tail(operator)}",
    )
    assert _condition(app, "TopologyValid")["status"] == "True", app["status"]
    assert _condition(app, "Degraded")["status"] == "False", app["status"]
    assert _condition(app, "Restoring")["reason"] == "NoRestore", app["status"]
    assert app["status"]["disruptionBudget"] == "none: no replicas"
    assert app["status"]["tasks"] == 6
    assert app["status"]["ready"] == "0/0"
    assert app["status"]["selector"] == "app.kubernetes.io/name=streamapp,app.kubernetes.io/instance=flights"

    uid = app["metadata"]["uid"]
    for kind, name in (("configmap", "flights-config"), ("service", "flights"), ("statefulset", "flights")):
        child = wait_for(functools.partial(kube.get, kind, name), f"{kind} {name}")
        (owner,) = child["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("StreamApp", "flights", uid, True)
    config_map = kube.get("configmap", "flights-config")
    assert config_map is not None
    assert yaml.safe_load(config_map["data"]["streams.yaml"])["application.id"] == app_id
    assert yaml.safe_load(config_map["data"]["topology.yaml"])["nodes"][0]["topics"] == [source]

    topics = admin.list_topics(timeout=10).topics
    assert len(topics[f"{app_id}-per-carrier-repartition"].partitions) == 3
    assert len(topics[f"{app_id}-departures-per-carrier-store-changelog"].partitions) == 3

    table = kube.run("get", "streamapps", "-n", kube.namespace)
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "READY", "THREADS", "TASKS", "LAG", "RESTORE", "AGE"]
    assert row.split()[:5] == ["flights", "0/0", "2", "6", "0"]

    kube.run("scale", "streamapp", "flights", "-n", kube.namespace, "--replicas=1")
    wait_for(
        lambda: (s := kube.get("statefulset", "flights")) and s["spec"]["replicas"] == 1,
        "the StatefulSet to follow `kubectl scale streamapp`",
    )
    scale_json = kube.run("get", "streamapp", "flights", "-n", kube.namespace, "--subresource=scale", "-o", "json")
    scale = json.loads(scale_json)
    assert scale["spec"]["replicas"] == 1
    assert scale["status"]["selector"] == app["status"]["selector"]

    # A config change replaces the running pod: the operator writes its intent to status, then rolls.
    wait_for(lambda: kube.get("pod", "flights-0"), "the StatefulSet controller to create pod flights-0")
    rolled = kube.get("statefulset", "flights")
    assert rolled is not None
    kube.run("patch", "streamapp", "flights", "-n", kube.namespace, "--type=merge",
             "-p", json.dumps({"spec": {"config": {"commit.interval.ms": "500"}}}))  # fmt: skip
    template_hash = "streamapp.io/template-hash"
    wait_for(
        lambda: (
            (s := kube.get("statefulset", "flights"))
            and s["metadata"]["annotations"][template_hash] != rolled["metadata"]["annotations"][template_hash]
        ),
        f"the config change to reach the pod template; operator log:\n{_log_tail(operator)}",
    )
    assert "Traceback" not in operator.read_text(), _log_tail(operator)
    shown = kube.run("get", "streamapp", "flights", "-n", kube.namespace, "-o", "json", "--show-managed-fields")
    managers = json.loads(shown)["metadata"]["managedFields"]
    assert {"manager": "streamapp-operator", "subresource": "status"} in [
        {"manager": m["manager"], "subresource": m.get("subresource")} for m in managers
    ], "the rollout intent was not written to status by the operator"
    # Back to no pods: the rest of the module checks the operator, not the runtime the pods would run.
    kube.run("scale", "streamapp", "flights", "-n", kube.namespace, "--replicas=0")
    wait_for(lambda: (s := kube.get("statefulset", "flights")) and s["spec"]["replicas"] == 0, "scale to zero")


def test_invalid_topology_is_degraded_with_its_message_and_leaves_the_workload(
    kube: Kube, kafka: tuple[AdminClient, str], operator: Path
) -> None:
    app = kube.get("streamapp", "flights")
    assert app is not None, "runs after test_operator_reconciles_a_streamapp_on_the_api_server"
    before = kube.get("statefulset", "flights")
    topology = copy.deepcopy(app["spec"]["topology"])
    topology["nodes"][4]["input"] = "nowhere"
    kube.run("patch", "streamapp", "flights", "-n", kube.namespace, "--type=merge",
             "-p", json.dumps({"spec": {"topology": topology, "threads": 3}}))  # fmt: skip
    generation = app["metadata"]["generation"] + 1
    degraded = wait_for(
        lambda: (a := kube.get("streamapp", "flights")) and a["status"].get("observedGeneration") == generation and a,
        f"the invalid generation to be observed; operator log:\n{_log_tail(operator)}",
    )
    condition = _condition(degraded, "Degraded")
    assert (condition["status"], condition["reason"]) == ("True", "TopologyInvalid")
    assert condition["message"] == "spec.topology: node 'count': input 'nowhere' does not exist"
    assert _condition(degraded, "TopologyValid")["status"] == "False"
    after = kube.get("statefulset", "flights")
    assert before is not None and after is not None
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    events = json.loads(kube.run("get", "events", "-n", kube.namespace, "-o", "json",
                                 "--field-selector", "involvedObject.name=flights,reason=TopologyInvalid"))  # fmt: skip
    assert [e["type"] for e in events["items"]][:1] == ["Warning"]

    topology["nodes"][4]["input"] = "per-carrier"
    kube.run("patch", "streamapp", "flights", "-n", kube.namespace, "--type=merge",
             "-p", json.dumps({"spec": {"topology": topology}}))  # fmt: skip
    wait_for(
        lambda: _condition(kube.get("streamapp", "flights"), "Degraded").get("reason") == "AsExpected",
        "the StreamApp to recover from Degraded",
    )
    config_map = kube.get("configmap", "flights-config")
    assert config_map is not None
    assert yaml.safe_load(config_map["data"]["streams.yaml"])["num.stream.threads"] == 3


def test_missing_source_topic_is_degraded_and_creates_no_workload(
    kube: Kube, kafka: tuple[AdminClient, str], operator: Path
) -> None:
    admin, prefix = kafka
    kube.apply(_streamapp("orphan", f"{prefix}-absent", f"{prefix}-orphan"))
    app = wait_for(
        lambda: (a := kube.get("streamapp", "orphan")) and _condition(a, "Degraded").get("status") == "True" and a,
        f"the StreamApp with a missing source topic to be Degraded; operator log:\n{_log_tail(operator)}",
    )
    assert _condition(app, "Degraded")["message"] == f"source topic '{prefix}-absent' does not exist in Kafka"
    assert _condition(app, "TopologyValid")["status"] == "False"
    assert kube.get("statefulset", "orphan") is None
    assert kube.get("configmap", "orphan-config") is None

    for future in admin.create_topics([NewTopic(f"{prefix}-absent", num_partitions=2, replication_factor=1)]).values():
        future.result()
    # No spec change: the level-based timer notices the topic and finishes the reconcile.
    wait_for(lambda: kube.get("statefulset", "orphan"), "the timer to reconcile once the source topic exists", 45)
    recovered = wait_for(
        lambda: (a := kube.get("streamapp", "orphan")) and _condition(a, "Degraded").get("status") == "False" and a,
        "the StreamApp to recover from Degraded",
    )
    assert _condition(recovered, "TopologyValid")["status"] == "True"
    assert recovered["status"]["tasks"] == 4


def test_deleting_the_streamapp_garbage_collects_its_children(kube: Kube, operator: Path) -> None:
    assert kube.get("configmap", "flights-config") is not None
    kube.run("delete", "streamapp", "flights", "-n", kube.namespace, "--wait=true", "--timeout=60s")
    for kind, name in (("configmap", "flights-config"), ("service", "flights"), ("statefulset", "flights")):
        wait_for(functools.partial(kube.absent, kind, name), f"{kind} {name} to be deleted")


def _owner(child: dict[str, Any]) -> tuple[str, str, str, bool]:
    (owner,) = child["metadata"]["ownerReferences"]
    return owner["kind"], owner["name"], owner["uid"], owner["controller"]


def _merge(kube: Kube, name: str, spec: dict[str, Any]) -> None:
    kube.run("patch", "streamapp", name, "-n", kube.namespace, "--type=merge", "-p", json.dumps({"spec": spec}))


def test_disruption_budget_guards_the_pods_follows_the_spec_and_goes_with_the_streamapp(
    kube: Kube, kafka: tuple[AdminClient, str], operator: Path
) -> None:
    admin, prefix = kafka
    source = f"{prefix}-guarded"
    for future in admin.create_topics([NewTopic(source, num_partitions=2, replication_factor=1)]).values():
        future.result()
    manifest = _streamapp("guarded", source, f"{prefix}-guarded", replicas=2)
    manifest["spec"]["image"] = "localhost/absent:0"  # pods that never start: this test is about their budget
    kube.apply(manifest)
    budget = wait_for(
        lambda: kube.get("poddisruptionbudget", "guarded"),
        f"the PodDisruptionBudget; operator log:\n{_log_tail(operator)}",
    )
    app = kube.get("streamapp", "guarded")
    stateful_set = kube.get("statefulset", "guarded")
    assert app is not None and stateful_set is not None
    assert _owner(budget) == ("StreamApp", "guarded", app["metadata"]["uid"], True)
    assert budget["spec"]["maxUnavailable"] == 1 and "minAvailable" not in budget["spec"]
    assert budget["spec"]["selector"] == stateful_set["spec"]["selector"]
    # The real disruption controller finds both StatefulSet pods through the budget's selector.
    wait_for(
        lambda: (b := kube.get("poddisruptionbudget", "guarded")) and b.get("status", {}).get("expectedPods") == 2,
        "the disruption controller to count the StatefulSet's 2 pods",
    )
    wait_for(
        lambda: (
            (kube.get("streamapp", "guarded") or {}).get("status", {}).get("disruptionBudget") == "maxUnavailable=1"
        ),
        "status.disruptionBudget",
    )

    _merge(kube, "guarded", {"disruptionBudget": {"minAvailable": 1}})
    updated = wait_for(
        lambda: (b := kube.get("poddisruptionbudget", "guarded")) and "minAvailable" in b["spec"] and b,
        f"the budget to switch to minAvailable; operator log:\n{_log_tail(operator)}",
    )
    assert updated["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in updated["spec"], "server-side apply must drop the bound it no longer sets"
    assert updated["metadata"]["uid"] == budget["metadata"]["uid"]

    # minAvailable 1 of 1 pod would block every eviction: the operator removes the budget and warns.
    kube.run("scale", "streamapp", "guarded", "-n", kube.namespace, "--replicas=1")
    wait_for(lambda: kube.absent("poddisruptionbudget", "guarded"), "the blocking budget to be removed")
    events = json.loads(kube.run("get", "events", "-n", kube.namespace, "-o", "json", "--field-selector",
                                 "involvedObject.name=guarded,reason=DisruptionBudgetSkipped"))  # fmt: skip
    assert [e["message"] for e in events["items"]] == [
        "No PodDisruptionBudget: minAvailable 1 with 1 replicas would block every voluntary eviction"
    ]
    kube.run("scale", "streamapp", "guarded", "-n", kube.namespace, "--replicas=2")
    wait_for(lambda: kube.get("poddisruptionbudget", "guarded"), "the budget to come back at 2 replicas")

    _merge(kube, "guarded", {"disruptionBudget": {"enabled": False}})
    wait_for(lambda: kube.absent("poddisruptionbudget", "guarded"), "the disabled budget to be deleted")
    _merge(kube, "guarded", {"disruptionBudget": {"enabled": True}})
    wait_for(lambda: kube.get("poddisruptionbudget", "guarded"), "the re-enabled budget")

    kube.run("delete", "streamapp", "guarded", "-n", kube.namespace, "--wait=true", "--timeout=60s")
    wait_for(lambda: kube.absent("poddisruptionbudget", "guarded"), "the budget to be garbage-collected")
    assert "Traceback" not in operator.read_text(), _log_tail(operator)


def _skipped_events(kube: Kube, name: str) -> list[str]:
    events = json.loads(kube.run("get", "events", "-n", kube.namespace, "-o", "json", "--field-selector",
                                 f"involvedObject.name={name},reason=DisruptionBudgetSkipped"))  # fmt: skip
    return [e["message"] for e in events["items"]]


def _status_budget(kube: Kube, name: str, summary: str, operator: Path) -> None:
    wait_for(
        lambda: (kube.get("streamapp", name) or {}).get("status", {}).get("disruptionBudget") == summary,
        f"status.disruptionBudget {summary!r}; operator log:\n{_log_tail(operator)}",
    )


def _app_beside_a_users_budget(
    kube: Kube, kafka: tuple[AdminClient, str], name: str, budget_name: str, bound: dict[str, Any],
    selector: dict[str, Any],
) -> None:  # fmt: skip
    """The user's PodDisruptionBudget ``budget_name``, then StreamApp ``name`` (1 pod that never starts)."""
    admin, prefix = kafka
    source = f"{prefix}-{name}"
    for future in admin.create_topics([NewTopic(source, num_partitions=1, replication_factor=1)]).values():
        future.result()
    users = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": budget_name},
             "spec": {**bound, "selector": selector}}  # fmt: skip
    kube.apply(users)
    manifest = _streamapp(name, source, f"{prefix}-{name}", replicas=1)
    manifest["spec"]["image"] = "localhost/absent:0"
    kube.apply(manifest)


def test_a_users_budget_of_the_same_name_is_never_taken_over(
    kube: Kube, kafka: tuple[AdminClient, str], operator: Path
) -> None:
    _app_beside_a_users_budget(
        kube, kafka, "clash", "clash", {"minAvailable": 1}, {"matchLabels": {"team": "payments"}}
    )
    summary = "none: PodDisruptionBudget clash exists and is not owned by this StreamApp"
    _status_budget(kube, "clash", summary, operator)
    kube.run("annotate", "streamapp", "clash", "-n", kube.namespace, "test/poke=1")  # one more reconcile
    time.sleep(2)
    kept = kube.get("poddisruptionbudget", "clash")
    assert kept is not None
    assert kept["spec"]["selector"] == {"matchLabels": {"team": "payments"}} and kept["spec"]["minAvailable"] == 1
    assert "maxUnavailable" not in kept["spec"] and not kept["metadata"].get("ownerReferences")
    assert _condition(kube.get("streamapp", "clash"), "Degraded").get("reason") != "ApplyRejected"
    assert _skipped_events(kube, "clash") == [f"No PodDisruptionBudget: {summary.removeprefix('none: ')}"]
    kube.run("delete", "streamapp", "clash", "-n", kube.namespace, "--wait=true", "--timeout=60s")
    assert kube.get("poddisruptionbudget", "clash") is not None, "the user's budget went with the StreamApp"
    assert "Traceback" not in operator.read_text(), _log_tail(operator)


def test_no_second_budget_over_pods_a_users_budget_already_covers(
    kube: Kube, kafka: tuple[AdminClient, str], operator: Path
) -> None:
    """A pod selected by two budgets cannot be evicted at all, so the operator makes none while the user's
    covers the pods, and makes its own once the user's is gone."""
    covers = {"matchLabels": {"app.kubernetes.io/instance": "covered"}}
    _app_beside_a_users_budget(kube, kafka, "covered", "team-budget", {"maxUnavailable": 1}, covers)
    summary = "none: PodDisruptionBudget team-budget already covers the pods"
    _status_budget(kube, "covered", summary, operator)
    assert kube.absent("poddisruptionbudget", "covered")
    assert _skipped_events(kube, "covered") == [
        "No PodDisruptionBudget: PodDisruptionBudget team-budget already covers the pods"
    ]
    kube.run("delete", "poddisruptionbudget", "team-budget", "-n", kube.namespace)
    kube.run("annotate", "streamapp", "covered", "-n", kube.namespace, "test/poke=1")
    wait_for(lambda: kube.get("poddisruptionbudget", "covered"), "our budget once the user's is gone")
    _status_budget(kube, "covered", "maxUnavailable=1", operator)
    kube.run("delete", "streamapp", "covered", "-n", kube.namespace, "--wait=true", "--timeout=60s")


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ({"maxUnavailable": 0}, "spec.disruptionBudget.maxUnavailable in body should be greater than or equal to 1"),
        ({"minAvailable": 0}, "spec.disruptionBudget.minAvailable in body should be greater than or equal to 1"),
        ({"maxUnavailable": 1, "minAvailable": 1}, "set either maxUnavailable or minAvailable, not both"),
        ({"maxUnavailable": "50%"}, "spec.disruptionBudget.maxUnavailable in body must be of type integer"),
    ],
    ids=["max-unavailable-0", "min-available-0", "both-bounds", "percentage"],
)
def test_crd_rejects_an_invalid_disruption_budget_with_a_clear_message(
    kube: Kube, budget: dict[str, Any], message: str
) -> None:
    manifest = _streamapp("rejected", "topic", "app")
    manifest["spec"]["disruptionBudget"] = budget
    assert message in kube.rejection(manifest)
    manifest["spec"]["disruptionBudget"] = {"maxUnavailable": 2}
    assert kube.rejection(manifest) == ""


def _evict(kube: Kube, pod: str, dry_run: bool = False) -> str:
    """Ask the Eviction API (what ``kubectl drain`` does) to evict ``pod``; the API server's error, or ""."""
    eviction: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": kube.namespace},
    }
    if dry_run:
        eviction["deleteOptions"] = {"dryRun": ["All"]}
    done = subprocess.run(
        ["kubectl", "create", "--raw", f"/api/v1/namespaces/{kube.namespace}/pods/{pod}/eviction", "-f", "-"],
        env=kube.env, input=json.dumps(eviction), capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stderr if done.returncode != 0 else ""


def test_a_drain_evicts_one_ready_pod_at_a_time(kube: Kube, kafka: tuple[AdminClient, str], operator: Path) -> None:
    """Two pods of the real runtime, ready: the first eviction is allowed, the second refused by the budget."""
    admin, prefix = kafka
    source, sink = f"{prefix}-drained", f"{prefix}-drained-out"
    topics = [NewTopic(topic, num_partitions=2, replication_factor=1) for topic in (source, sink)]
    for future in admin.create_topics(topics).values():
        future.result()
    manifest = _streamapp("drained", source, f"{prefix}-drained", replicas=2)
    manifest["spec"]["threads"] = 1
    manifest["spec"]["topology"]["nodes"][-1]["topic"] = sink
    kube.apply(manifest)
    wait_for(
        lambda: (b := kube.get("poddisruptionbudget", "drained")) and b.get("status", {}).get("currentHealthy") == 2,
        f"2 ready pods counted by the budget; operator log:\n{_log_tail(operator)}",
        timeout=180,
    )
    app = wait_for(
        lambda: (a := kube.get("streamapp", "drained")) and _condition(a, "Ready").get("status") == "True" and a,
        "the StreamApp to be Ready",
        timeout=60,
    )
    assert (_condition(app, "Restoring")["status"], _condition(app, "Restoring")["reason"]) == ("False", "NoRestore")
    assert _evict(kube, "drained-0") == ""
    refused = _evict(kube, "drained-1")
    assert "Cannot evict pod as it would violate the pod's disruption budget" in refused, refused
    kube.run("delete", "streamapp", "drained", "-n", kube.namespace, "--wait=true", "--timeout=60s")


def test_restoring_condition_reports_a_pod_restoring_its_store_from_the_changelog(
    kube: Kube, kafka: tuple[AdminClient, str], env: dict[str, str], operator: Path
) -> None:
    """A real pod of the runtime restores a changelog of RESTORE_RECORDS records before it is ready; the
    operator reads its /status and says so (``Restoring=True`` with the records left), then clears it."""
    admin, prefix = kafka
    app_id = f"{prefix}-restored"
    source, sink, changelog = (
        f"{prefix}-restored-in",
        f"{prefix}-restored-out",
        f"{app_id}-departures-per-carrier-store-changelog",
    )
    topics = [NewTopic(t, num_partitions=1, replication_factor=1) for t in (source, sink)]
    topics.append(NewTopic(changelog, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"}))
    for future in admin.create_topics(topics).values():
        future.result()
    producer = Producer({"bootstrap.servers": env["KAFKA_BOOTSTRAP"], "linger.ms": 50, "batch.num.messages": 10000})
    value = (1).to_bytes(8, "big")
    for i in range(RESTORE_RECORDS):
        while True:
            try:
                producer.produce(changelog, value, f"k{i}".encode())
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0

    manifest = _streamapp("restored", source, app_id, replicas=1)
    manifest["spec"]["threads"] = 1
    manifest["spec"]["topology"]["nodes"][-1]["topic"] = sink
    kube.apply(manifest)
    seen: dict[str, Any] = {}

    def restoring() -> dict[str, Any] | None:
        # Annotating the StreamApp makes kopf reconcile now instead of at the next 10 s timer tick.
        kube.run("annotate", "--overwrite", "streamapp", "restored", "-n", kube.namespace, f"test/poke={time.time()}")
        app = kube.get("streamapp", "restored")
        condition = _condition(app, "Restoring")
        if condition.get("status") == "True" and app:
            seen.update(condition=condition, remaining=app["status"].get("restoreRemaining"))
            seen.setdefault("progress", []).append(app["status"].get("restore"))
            return condition
        time.sleep(1.0)
        return None

    wait_for(restoring, f"Restoring=True; operator log:\n{_log_tail(operator)}", timeout=120)
    # A drain must not hang on the one pod while it is not ready (restoring, or crash-looping): the budget's
    # unhealthyPodEvictionPolicy AlwaysAllow lets it go (with IfHealthyBudget: "would violate the budget").
    wait_for(
        lambda: (b := kube.get("poddisruptionbudget", "restored")) and b.get("status", {}).get("expectedPods") == 1,
        "the disruption controller to count the restoring pod",
    )
    assert _evict(kube, "restored-0", dry_run=True) == ""
    still = kube.get("poddisruptionbudget", "restored")
    assert still is not None and still["status"]["currentHealthy"] == 0, "the pod was ready: no proof"
    assert seen["condition"]["reason"] == "RestoringState"
    assert seen["condition"]["message"].startswith("pod restored-0 restores tasks 1_0 ("), seen["condition"]
    assert 0 < seen["remaining"] <= RESTORE_RECORDS
    progress = [p for p in seen["progress"] if p]
    assert progress and progress[-1][0]["stores"] == ["departures-per-carrier-store"], seen["progress"]
    assert progress[-1][0]["restored"] + progress[-1][0]["remaining"] <= RESTORE_RECORDS + 1
    done = wait_for(
        lambda: (a := kube.get("streamapp", "restored")) and _condition(a, "Ready").get("status") == "True" and a,
        "the pod to finish restoring and be ready",
        timeout=240,
    )
    assert (_condition(done, "Restoring")["status"], done["status"]["restoreRemaining"]) == ("False", 0)
    events = json.loads(kube.run("get", "events", "-n", kube.namespace, "-o", "json",
                                 "--field-selector", "involvedObject.name=restored"))  # fmt: skip
    reasons = [e["reason"] for e in events["items"]]
    assert "RestoreStarted" in reasons and "RestoreFinished" in reasons, reasons
    kube.run("delete", "streamapp", "restored", "-n", kube.namespace, "--wait=true", "--timeout=60s")
