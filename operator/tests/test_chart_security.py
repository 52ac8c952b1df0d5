"""The chart installs the operator safely by default: its pod passes the ``restricted`` Pod Security Standard, its
RBAC grants exactly what the operator does (in the watched namespaces only, when there is a list), it may change
nothing in the system namespaces even with cluster-wide rights, and it exposes its metrics (ServiceMonitor on
request).

Rendering uses the real helm of the local stack (``operator_helm``). The tests marked ``e2e`` ask the local API
server (``hack/stack/up.sh``): a server-side dry-run of the operator's pod in a namespace enforcing
``restricted``; the rules the API server's RBAC gives the chart's ServiceAccount (``SelfSubjectRulesReview`` and
``kubectl auth can-i --as``); the ValidatingAdmissionPolicy denying a write in ``kube-system``. Each uses its own
namespaces and release name and removes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_helm import CHART, ROOT, helm_binary, render

NAMESPACE = "streamapp-system"
#: (apiGroup, resource, verb) the operator needs in every namespace it serves; see the chart README's RBAC.
APP_RIGHTS = {
    # kopf lists, watches and patches what it serves and patches status; the operator reads StreamApps by name, and a
    # handover creates the new version's StreamApp and deletes the old one
    *{("streamapp.io", "streamapps", v) for v in ("get", "list", "watch", "patch", "create", "delete")},
    ("streamapp.io", "streamapps/status", "patch"),
    # a handover with outputs TakeOver stops the old version (spec.replicas 0 through /scale) and scales it back
    ("streamapp.io", "streamapps/scale", "patch"),
    ("streamapp.io", "streamapps/finalizers", "update"),
    # children: read by name, server-side applied (create, patch); the garbage collector deletes the ConfigMap and
    # Service; the operator deletes a StatefulSet (cleanupPolicy Delete) and a budget there must not be
    *{("", r, v) for r in ("configmaps", "services") for v in ("get", "create", "patch")},
    *{("apps", "statefulsets", v) for v in ("get", "create", "patch", "delete")},
    *{("policy", "poddisruptionbudgets", v) for v in ("get", "list", "create", "patch", "delete")},
    ("", "pods", "list"),
    # state volumes of scaled-away pods: marked, then deleted after spec.state.retainAfterScaleDown; the claims the
    # StatefulSet would mount are read first (one someone else owns is named, never mounted: ForeignObject)
    *{("", "persistentvolumeclaims", v) for v in ("get", "list", "patch", "delete")},
    ("", "secrets", "get"),
    *{("", "events", v) for v in ("list", "create")},
    # StreamReplays: their status, their Job (and ConfigMap, above), the pod's log, the Job's ServiceAccount
    *{("streamapp.io", "streamreplays", v) for v in ("get", "list", "watch", "patch")},
    ("streamapp.io", "streamreplays/status", "patch"),
    ("streamapp.io", "streamreplays/finalizers", "update"),
    *{("batch", "jobs", v) for v in ("get", "create", "patch", "delete")},
    ("", "pods/log", "get"),
    *{("", "serviceaccounts", v) for v in ("get", "create", "patch")},
}
#: Cluster-scoped reads of kopf: CRDs always; namespaces only when it serves a list of them.
CRD_READS = {("apiextensions.k8s.io", "customresourcedefinitions", v) for v in ("get", "list", "watch")}
NAMESPACE_READS = {("", "namespaces", v) for v in ("get", "list", "watch")}


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def _docs(helm: Path, *sets: str, release: str = "streamapp-operator", namespace: str = NAMESPACE) -> list[dict]:
    return render(helm, release, namespace, *sets)


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


def _pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(docs, "Deployment")["spec"]["template"]["spec"]


def _rights(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


# --- pod security (rendered) ------------------------------------------------------------------------------------


def test_operator_pod_is_non_root_without_privileges_and_with_runtime_default_seccomp(helm: Path) -> None:
    spec = _pod_spec(_docs(helm))
    (container,) = spec["containers"]
    assert spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")


def test_read_only_root_file_system_has_a_writable_tmp(helm: Path) -> None:
    spec = _pod_spec(_docs(helm))
    assert spec["containers"][0]["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert spec["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]


def test_operator_container_requests_resources_and_has_a_memory_limit(helm: Path) -> None:
    resources = _pod_spec(_docs(helm))["containers"][0]["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert "memory" in resources["limits"]


# --- RBAC (rendered) --------------------------------------------------------------------------------------------


def test_cluster_wide_install_grants_exactly_the_operators_rights(helm: Path) -> None:
    docs = _docs(helm)
    roles = {d["metadata"]["name"]: _rights(d["rules"]) for d in docs if d["kind"] == "ClusterRole"}
    assert roles == {"streamapp-operator-apps": APP_RIGHTS, "streamapp-operator-cluster": CRD_READS}
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    # kopf serves every namespace through cluster-wide watches: it never lists namespaces then.
    assert "--all-namespaces" in _pod_spec(docs)["containers"][0]["command"]


def test_namespaced_install_grants_the_operators_rights_only_in_the_watched_namespaces(helm: Path) -> None:
    docs = _docs(helm, "watchNamespaces={team-a,team-b}")
    cluster_roles = {d["metadata"]["name"]: _rights(d["rules"]) for d in docs if d["kind"] == "ClusterRole"}
    assert cluster_roles == {"streamapp-operator-cluster": CRD_READS | NAMESPACE_READS}
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRoleBinding"] == ["streamapp-operator-cluster"]
    roles = {d["metadata"]["namespace"]: _rights(d["rules"]) for d in docs if d["kind"] == "Role"}
    assert roles == {"team-a": APP_RIGHTS, "team-b": APP_RIGHTS}
    # Their RoleBindings and the --namespace flags: test_chart.py (watch namespaces bind the app rights ...).


def test_standalone_operator_needs_no_leases(helm: Path) -> None:
    """kopf runs --standalone (no peering): nothing of coordination.k8s.io or kopf's peering resources."""
    docs = _docs(helm) + _docs(helm, "watchNamespaces={a}")
    assert "--standalone" in _pod_spec(_docs(helm))["containers"][0]["command"]
    groups = {g for d in docs if d["kind"] in ("ClusterRole", "Role") for g, _, _ in _rights(d["rules"])}
    assert groups == {"", "apps", "batch", "policy", "streamapp.io", "apiextensions.k8s.io"}


def test_protected_namespaces_deny_every_write_of_the_operators_service_account(helm: Path) -> None:
    docs = _docs(helm)
    policy = _one(docs, "ValidatingAdmissionPolicy")
    selector = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert selector == [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "In",
            "values": ["kube-system", "kube-public", "kube-node-lease"],
        }
    ]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["CREATE", "UPDATE", "DELETE"] and rule["resources"] == ["*/*"]
    conditions = [c["expression"] for c in policy["spec"]["matchConditions"]]
    assert 'request.userInfo.username == "system:serviceaccount:streamapp-system:streamapp-operator"' in conditions
    binding = _one(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    kinds = {d["kind"] for d in _docs(helm, "protectedNamespaces=null")}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def test_a_watched_namespace_cannot_be_a_protected_one(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "template", str(CHART), "--set", "watchNamespaces={team-a,kube-system}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "kube-system is in protectedNamespaces" in done.stderr
    _docs(helm, "watchNamespaces={kube-system}", "protectedNamespaces=null")  # renders: nothing is protected


# --- metrics (rendered) -----------------------------------------------------------------------------------------


def test_metrics_port_is_served_through_a_service(helm: Path) -> None:
    docs = _docs(helm)
    container = _pod_spec(docs)["containers"][0]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in container["ports"]
    assert {"name": "STREAMAPP_OPERATOR_METRICS_PORT", "value": "9090"} in container["env"]
    service = _one(docs, "Service")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}]
    assert service["spec"]["selector"] == _one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert "ServiceMonitor" not in {d["kind"] for d in docs}


def test_metrics_disabled_renders_no_port_and_no_service(helm: Path) -> None:
    docs = _docs(helm, "metrics.enabled=false", "metrics.serviceMonitor.enabled=true")
    assert not {"Service", "ServiceMonitor"} & {d["kind"] for d in docs}
    container = _pod_spec(docs)["containers"][0]
    assert [p["name"] for p in container["ports"]] == ["health"]
    assert all(e["name"] != "STREAMAPP_OPERATOR_METRICS_PORT" for e in container["env"])


def test_service_monitor_scrapes_the_metrics_service_when_enabled(helm: Path) -> None:
    docs = _docs(
        helm,
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.interval=15s",
        "metrics.serviceMonitor.labels.release=prometheus",
    )
    monitor, service = _one(docs, "ServiceMonitor"), _one(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s"}]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def test_values_schema_rejects_a_malformed_scrape_interval(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "template", str(CHART), "--set", "metrics.serviceMonitor.interval=often"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "interval" in done.stderr


def test_chart_with_the_new_values_lints(helm: Path) -> None:
    sets = ["metrics.serviceMonitor.enabled=true", "watchNamespaces={a}", "protectedNamespaces=null"]
    done = subprocess.run(
        [str(helm), "lint", str(CHART), "--strict", *[a for s in sets for a in ("--set", s)]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- on the local API server --------------------------------------------------------------------------------------


class Kubectl:
    """kubectl against the local API server of ``hack/stack/up.sh`` (refuses any other kubeconfig)."""

    def __init__(self) -> None:
        env_file = ROOT / ".cache" / "run" / "env"
        if not env_file.exists():
            pytest.skip("the local stack is not up (hack/stack/up.sh)")
        env = dict(os.environ)
        for line in env_file.read_text().splitlines():
            line = line.strip().removeprefix("export ")
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                env[key] = os.path.expandvars(value.strip().strip('"'))
        env["PATH"] = f"{env['STACK_BIN']}:{os.environ.get('PATH', '')}"
        cache = (ROOT / ".cache" / "run").resolve()  # a worktree's .cache/run may link to the main tree's
        assert Path(env["KUBECONFIG"]).resolve().is_relative_to(cache), "refusing a kubeconfig outside .cache/run"
        self.env = env

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr}")
        return done

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.run("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def delete(self, docs: list[dict[str, Any]]) -> None:
        self.run("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=yaml.safe_dump_all(docs), check=False)

    def rights(self, user: str, namespace: str) -> set[tuple[str, str, str]]:
        """What RBAC lets ``user`` do in ``namespace`` (a SelfSubjectRulesReview made as that user)."""
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": namespace},
        }
        # --validate=false: kubectl's schema check would list CRDs, which ``user`` may not
        done = self.run("create", "--validate=false", f"--as={user}", "-o", "json", "-f", "-", stdin=json.dumps(review))
        status = json.loads(done.stdout)["status"]
        assert not status.get("incomplete"), status
        return _rights(status["resourceRules"])

    def can_i(self, user: str, verb: str, resource: str, namespace: str) -> bool:
        done = self.run("auth", "can-i", verb, resource, "-n", namespace, f"--as={user}", check=False)
        return done.stdout.strip() == "yes"


@pytest.fixture(scope="module")
def kubectl() -> Kubectl:
    return Kubectl()


@pytest.fixture
def namespaces(kubectl: Kubectl) -> Iterator[list[str]]:
    """Two fresh namespaces (the operator's and a watched one), deleted afterwards."""
    suffix = uuid.uuid4().hex[:6]
    names = [f"chartsec-op-{suffix}", f"chartsec-team-{suffix}"]
    for name in names:
        kubectl.run("create", "namespace", name)
    yield names
    for name in names:
        kubectl.run("delete", "namespace", name, "--wait=false", check=False)


def _installed(kubectl: Kubectl, helm: Path, namespace: str, *sets: str) -> tuple[list[dict[str, Any]], str]:
    """The chart's objects except the Deployment, applied under a fresh release name; and the operator's user."""
    release = f"chartsec-{uuid.uuid4().hex[:6]}"
    docs = [{k: v for k, v in d.items() if k != "_source"} for d in render(helm, release, namespace, *sets)]
    objects = [d for d in docs if d["kind"] != "Deployment"]
    kubectl.apply(objects)
    account = _one(docs, "ServiceAccount")["metadata"]["name"]
    return objects, f"system:serviceaccount:{namespace}:{account}"


def _builtin_rights(kubectl: Kubectl, namespace: str) -> set[tuple[str, str, str]]:
    """What every authenticated user may do (self reviews), to tell the chart's rights from the built-in ones."""
    return kubectl.rights("system:serviceaccount:default:chartsec-nobody", namespace)


@pytest.mark.e2e
def test_operator_pod_is_admitted_in_a_namespace_enforcing_restricted(
    kubectl: Kubectl, helm: Path, namespaces: list[str]
) -> None:
    namespace = namespaces[0]
    kubectl.run(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )

    docs = render(helm, "chartsec", namespace)
    kubectl.apply([{k: v for k, v in _one(docs, "ServiceAccount").items() if k != "_source"}])

    def dry_run_pod(*sets: str) -> subprocess.CompletedProcess[str]:
        template = _one(render(helm, "chartsec", namespace, *sets), "Deployment")["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**template["metadata"], "name": "chartsec-operator"},
            "spec": template["spec"],
        }
        return kubectl.run("create", "--dry-run=server", "-n", namespace, "-f", "-", stdin=json.dumps(pod), check=False)

    admitted = dry_run_pod()
    assert admitted.returncode == 0, admitted.stderr
    assert "would violate" not in admitted.stderr
    # The namespace really enforces: without the pod's security context the same pod is refused.
    refused = dry_run_pod("podSecurityContext=null")
    assert refused.returncode != 0 and 'violates PodSecurity "restricted:latest"' in refused.stderr


@pytest.mark.e2e
def test_namespaced_install_can_touch_only_the_watched_namespace(
    kubectl: Kubectl, helm: Path, namespaces: list[str]
) -> None:
    home, team = namespaces
    objects, user = _installed(kubectl, helm, home, f"watchNamespaces={{{team}}}")
    try:
        builtin = _builtin_rights(kubectl, team)
        assert kubectl.rights(user, team) - builtin == APP_RIGHTS | CRD_READS | NAMESPACE_READS
        assert kubectl.rights(user, "kube-system") - builtin == CRD_READS | NAMESPACE_READS
        assert kubectl.can_i(user, "create", "statefulsets", team)
        for namespace in ("kube-system", home, "default"):
            assert not kubectl.can_i(user, "create", "statefulsets", namespace)
            assert not kubectl.can_i(user, "get", "secrets", namespace)
    finally:
        kubectl.delete(objects)


@pytest.mark.e2e
def test_cluster_wide_install_is_denied_every_write_in_kube_system(
    kubectl: Kubectl, helm: Path, namespaces: list[str]
) -> None:
    home, team = namespaces
    objects, user = _installed(kubectl, helm, home)
    try:
        builtin = _builtin_rights(kubectl, team)
        assert kubectl.rights(user, team) - builtin == APP_RIGHTS | CRD_READS
        # RBAC alone cannot leave kube-system out of a ClusterRoleBinding ...
        assert kubectl.can_i(user, "create", "statefulsets", "kube-system")
        # ... the ValidatingAdmissionPolicy does. A policy takes effect within seconds of its creation.
        deadline = time.monotonic() + 30
        while True:
            denied = _dry_run_stateful_set(kubectl, user, "kube-system")
            if denied.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert denied.returncode != 0
        assert "the StreamApp operator may not change statefulsets in the protected namespace kube-system" in (
            denied.stderr
        )
        allowed = _dry_run_stateful_set(kubectl, user, team)
        assert allowed.returncode == 0, allowed.stderr
    finally:
        kubectl.delete(objects)


def _dry_run_stateful_set(kubectl: Kubectl, user: str, namespace: str) -> subprocess.CompletedProcess[str]:
    stateful_set = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "chartsec-probe"},
        "spec": {
            "serviceName": "chartsec-probe",
            "selector": {"matchLabels": {"app": "chartsec-probe"}},
            "template": {
                "metadata": {"labels": {"app": "chartsec-probe"}},
                "spec": {"containers": [{"name": "probe", "image": "localhost/streamapp:dev"}]},
            },
        },
    }
    return kubectl.run(
        "create",
        "--dry-run=server",
        f"--as={user}",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps(stateful_set),
        check=False,
    )
