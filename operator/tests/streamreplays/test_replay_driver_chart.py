"""The chart's opt-in rights for the Spark driver of StreamReplays with ``spark.mode: kubernetes``
(``replayDriver``): off by default, then a ServiceAccount, a Role and a RoleBinding per listed namespace that
allow what Spark's Kubernetes backend does with executors from a client-mode driver (pods and their ConfigMap;
no Services: the driver has none) and nothing else, never cluster-wide nor in a protected namespace.

Renders with the real helm binary (``operator_helm``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from operator_helm import CHART, helm_binary, render
from streamapp_operator.kinds import Owner
from streamapp_operator.streamreplays import job_manifests
from streamapp_operator.streamreplays.resources import StreamReplaySpec

NAMESPACE = "streamapp-system"
DRIVER_KINDS = {"ServiceAccount", "Role", "RoleBinding"}


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def _driver(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["_source"].startswith("replay-driver-")]


def test_no_spark_driver_rights_unless_asked_for(helm: Path) -> None:
    assert _driver(render(helm, "streamapp-operator", NAMESPACE)) == []
    assert _driver(render(helm, "streamapp-operator", NAMESPACE, "watchNamespaces={team-a}")) == []


def test_the_spark_driver_may_manage_executor_pods_and_configmaps_in_its_namespaces_only(helm: Path) -> None:
    docs = _driver(render(helm, "streamapp-operator", NAMESPACE, "replayDriver.create=true",
                          "replayDriver.namespaces={team-a,team-b}"))  # fmt: skip
    assert sorted((d["kind"], d["metadata"]["namespace"]) for d in docs) == sorted(
        (kind, ns) for kind in DRIVER_KINDS for ns in ("team-a", "team-b")
    )
    assert {d["metadata"]["name"] for d in docs} == {"streamapp-replay-driver"}
    for role in (d for d in docs if d["kind"] == "Role"):
        granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
                   for v in rule["verbs"]}  # fmt: skip
        assert {r for _, r, _ in granted} == {"pods", "configmaps"} and {g for g, _, _ in granted} == {""}
        assert {v for *_, v in granted} == {"create", "get", "list", "watch", "delete", "deletecollection"}
    for binding in (d for d in docs if d["kind"] == "RoleBinding"):
        namespace = binding["metadata"]["namespace"]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": "streamapp-replay-driver"}  # fmt: skip
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "streamapp-replay-driver", "namespace": namespace}
        ]
    (account, *_) = (d for d in docs if d["kind"] == "ServiceAccount")
    assert account["automountServiceAccountToken"] is False  # the driver pod asks for its token, executors do not


def test_the_driver_namespaces_default_to_the_watched_namespaces(helm: Path) -> None:
    docs = _driver(render(helm, "streamapp-operator", NAMESPACE, "replayDriver.create=true",
                          "watchNamespaces={team-a}", "replayDriver.name=spark"))  # fmt: skip
    assert sorted((d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]) for d in docs) == [
        ("Role", "team-a", "spark"), ("RoleBinding", "team-a", "spark"), ("ServiceAccount", "team-a", "spark")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (("replayDriver.create=true",), "set replayDriver.namespaces (or watchNamespaces)"),
        (
            ("replayDriver.create=true", "replayDriver.namespaces={kube-system}"),
            "kube-system is in protectedNamespaces",
        ),
    ],
    ids=["no-namespace", "protected"],
)
def test_the_spark_driver_is_never_granted_rights_cluster_wide_or_in_a_protected_namespace(
    helm: Path, sets: tuple[str, ...], message: str
) -> None:
    args = [str(helm), "template", "streamapp-operator", str(CHART), "--namespace", NAMESPACE]
    for value in sets:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode != 0 and message in done.stderr


def _team_a_driver(helm: Path) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The chart's driver rights in team-a, and the ConfigMap and Job of a kubernetes-mode replay run as them."""
    docs = _driver(render(helm, "streamapp-operator", NAMESPACE, "replayDriver.create=true",
                          "replayDriver.namespaces={team-a}"))  # fmt: skip
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    spark = {"mode": "kubernetes", "serviceAccountName": account}
    spec = StreamReplaySpec.parse({"appRef": {"name": "flights"}, "spark": spark})
    plan = {"replayId": "r-1", "bootstrapServers": "kafka:9092", "from": {}, "to": {}}
    config_map, job = job_manifests.job_manifests(
        Owner("StreamReplay", "r", "team-a", "uid"), spec, plan, job_manifests.JobImages("img:1")
    )
    return docs, config_map, job


def test_a_kubernetes_mode_replay_naming_the_charts_account_runs_its_driver_as_it(helm: Path) -> None:
    docs, _, job = _team_a_driver(helm)
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account and pod["automountServiceAccountToken"] is True


def test_the_driver_is_told_not_to_clean_up_services_or_claims_its_role_does_not_grant(helm: Path) -> None:
    """A client-mode driver has no Service (spark-submit makes one in cluster mode only) and no claim, but Spark's
    stop() deletes its app's Services and PersistentVolumeClaims unless told not to."""
    docs, config_map, _ = _team_a_driver(helm)
    role = next(d for d in docs if d["kind"] == "Role")
    granted = {resource for rule in role["rules"] for resource in rule["resources"]}
    defaults = dict(line.split(" ", 1) for line in config_map["data"]["spark-defaults.conf"].splitlines())
    assert "services" not in granted and defaults["spark.kubernetes.driver.service.deleteOnTermination"] == "false"
    assert "persistentvolumeclaims" not in granted
    assert defaults["spark.kubernetes.driver.ownPersistentVolumeClaim"] == "false"


def test_the_chart_lints_with_the_spark_driver_rights(helm: Path) -> None:
    args = ["lint", str(CHART), "--strict", "--set", "replayDriver.create=true", "--set", "watchNamespaces={team-a}"]
    done = subprocess.run([str(helm), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
