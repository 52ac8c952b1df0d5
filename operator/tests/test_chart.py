"""The Helm chart lints, renders least-privilege RBAC for the namespaces it watches, runs the operator
standalone with a liveness endpoint, and ships exactly the generated CRD.

Runs the real helm binary built by ``hack/stack/build-helm.sh`` (cached in ``.cache/helm-v<version>``;
built on first use).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_helm import CHART, ROOT, helm_binary, render
from streamapp_operator import crdgen

NAMESPACE = "streamapp-system"


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def _run(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, check=False)


def _render(helm: Path, *sets: str) -> list[dict[str, Any]]:
    return render(helm, "streamapp-operator", NAMESPACE, *sets)


def _kinds(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


def _deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    return deployment


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _deployment(docs)["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.parametrize("sets", [(), ("watchNamespaces={team-a,team-b}",), ("rbac.create=false",)], ids=str)
def test_chart_lints(helm: Path, sets: tuple[str, ...]) -> None:
    args = ["lint", str(CHART), "--strict"]
    for value in sets:
        args += ["--set", value]
    done = _run(helm, *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_values_schema_rejects_an_unknown_pull_policy(helm: Path) -> None:
    done = _run(helm, "template", str(CHART), "--set", "image.pullPolicy=Sometimes")
    assert done.returncode != 0
    assert "pullPolicy" in done.stderr


def test_default_install_watches_all_namespaces_with_cluster_wide_rights(helm: Path) -> None:
    docs = _render(helm)
    assert _kinds(docs) == [
        ("ClusterRole", "streamapp-operator-apps"),
        ("ClusterRole", "streamapp-operator-cluster"),
        ("ClusterRoleBinding", "streamapp-operator-apps"),
        ("ClusterRoleBinding", "streamapp-operator-cluster"),
        ("Deployment", "streamapp-operator"),
        ("Service", "streamapp-operator-metrics"),
        ("ServiceAccount", "streamapp-operator"),
        ("ValidatingAdmissionPolicy", "streamapp-operator-protected-namespaces"),
        ("ValidatingAdmissionPolicyBinding", "streamapp-operator-protected-namespaces"),
    ]
    command = _container(docs)["command"]
    assert command[:5] == ["kopf", "run", "--standalone", "-m", "streamapp_operator.main"]
    assert "--all-namespaces" in command
    assert not any(arg.startswith("--namespace") for arg in command)


def test_watch_namespaces_bind_the_app_rights_only_in_those_namespaces(helm: Path) -> None:
    docs = _render(helm, "watchNamespaces={team-a,team-b}")
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "streamapp-operator-apps",
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "streamapp-operator", "namespace": NAMESPACE}]
    cluster_bindings = [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert cluster_bindings == ["streamapp-operator-cluster"]
    command = _container(docs)["command"]
    assert [a for a in command if a.startswith("--namespace")] == ["--namespace=team-a", "--namespace=team-b"]
    assert "--all-namespaces" not in command


def test_rbac_is_least_privilege(helm: Path) -> None:
    docs = _render(helm)
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    granted = {
        (group, resource, verb)
        for rules in roles.values()
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert not any("*" in entry for entry in granted)
    assert not any(verb in ("deletecollection", "escalate", "bind", "impersonate") for *_, verb in granted)
    # Secrets are only read (Kafka credentials); the exact rights: test_chart_security.
    assert {v for g, r, v in granted if r == "secrets"} == {"get"}
    cluster_scoped = {(g, r, v) for rule in roles["streamapp-operator-cluster"] for g in rule["apiGroups"]
                      for r in rule["resources"] for v in rule["verbs"]}  # fmt: skip
    assert {v for *_, v in cluster_scoped} <= {"get", "list", "watch"}
    assert {v for g, r, v in granted if r == "pods"} == {"list"}


def test_rbac_create_false_renders_no_rbac(helm: Path) -> None:
    kinds = {kind for kind, _ in _kinds(_render(helm, "rbac.create=false"))}
    assert not kinds & {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert {"Deployment", "ServiceAccount"} <= kinds


def test_existing_service_account_is_used_when_not_created(helm: Path) -> None:
    docs = _render(helm, "serviceAccount.create=false", "serviceAccount.name=ops")
    assert "ServiceAccount" not in {kind for kind, _ in _kinds(docs)}
    assert _deployment(docs)["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"][0]["name"] == "ops"


def test_deployment_runs_one_operator_with_a_liveness_probe_on_kopfs_endpoint(helm: Path) -> None:
    docs = _render(helm, "image.tag=dev", "image.pullPolicy=Never")
    deployment = _deployment(docs)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    container = _container(docs)
    assert container["image"] == "localhost/streamapp:dev"
    assert container["imagePullPolicy"] == "Never"
    assert "--liveness=http://$(POD_IP):8080/healthz" in container["command"]
    assert container["env"][0] == {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["ports"][0] == {"name": "health", "containerPort": 8080, "protocol": "TCP"}


def test_image_tag_defaults_to_the_app_version(helm: Path) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert _container(_render(helm))["image"] == f"localhost/streamapp:{app_version}"


def test_each_template_renders_one_kind_of_resource(helm: Path) -> None:
    monitoring = ("monitoring.grafanaDashboard.enabled=true", "monitoring.prometheusRule.enabled=true")
    rendered = render(
        helm,
        "streamapp-operator",
        NAMESPACE,
        "metrics.serviceMonitor.enabled=true",
        *monitoring,
        "monitoring.podMonitor.enabled=true",
        api_versions=("monitoring.coreos.com/v1/PrometheusRule", "monitoring.coreos.com/v1/PodMonitor"),
    ) + _render(helm, "watchNamespaces={a,b}", "replayDriver.create=true")
    for template in sorted((CHART / "templates").glob("*.yaml")):
        kinds = {d["kind"] for d in rendered if d["_source"] == template.name}
        assert len(kinds) == 1, f"{template.name} renders {kinds}"


def test_chart_crds_are_the_generated_crds() -> None:
    chart_crds = sorted(p.name for p in (CHART / "crds").iterdir())
    source_crds = sorted(p.name for p in (ROOT / "crds").iterdir())
    assert chart_crds == source_crds == sorted([crdgen.CRD_FILE, crdgen.REPLAY_CRD_FILE])
    for name, text in (
        (crdgen.CRD_FILE, crdgen.render()),
        (crdgen.REPLAY_CRD_FILE, crdgen.render(crdgen.build_replay_crd())),
    ):
        assert (CHART / "crds" / name).read_text() == (ROOT / "crds" / name).read_text() == text
