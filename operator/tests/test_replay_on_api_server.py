"""StreamReplay on the local API server: the CRD's admission rules and defaults, and the replay controller's
writes through the operator's seam (``k8s.KubernetesCluster``) with the rights the Helm chart grants
(its ServiceAccount's token, the chart's RBAC rendered with ``watchNamespaces`` = the test namespace) in a
namespace that enforces the ``restricted`` Pod Security Standard: the Job, its ConfigMap and ServiceAccount
are admitted and stored, the new version's StreamApp is created and deleted, the replay's status is patched.

Needs ``hack/stack/up.sh`` (the Kubernetes control plane); no operator runs, no pod starts (the Job's pod is
admitted by the API server; the node agent may start it, which this test does not wait for).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import config
from operator_fakes import flights_spec
from streamapp_operator.k8s import KubernetesCluster
from streamapp_operator.kinds import Owner
from streamapp_operator.streamreplays import app_code, handover, job_manifests, job_reports
from streamapp_operator.streamreplays.resources import StreamReplaySpec
from test_operator_on_api_server import Kube, chart_kubeconfig, env, kube  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
REPLAY_CRD = ROOT / "crds" / "streamapp.io_streamreplays.yaml"


def replay(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamReplay",
        "metadata": {"name": name},
        "spec": {"appRef": {"name": "flights"}, **spec},
    }


@pytest.fixture(scope="module")
def replays(kube: Kube) -> Kube:  # noqa: F811
    """The test namespace with the StreamReplay CRD and Pod Security ``restricted`` enforced."""
    kube.run("apply", "--server-side", "--force-conflicts", "--field-manager=operator-install", "-f", str(REPLAY_CRD))
    kube.run("wait", "--for=condition=Established", "crd/streamreplays.streamapp.io", "--timeout=60s")
    kube.run("label", "namespace", kube.namespace, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
    return kube


@pytest.fixture(scope="module")
def seam(replays: Kube, chart_kubeconfig: Path) -> Iterator[KubernetesCluster]:  # noqa: F811
    """The operator's seam, authenticated as the chart's ServiceAccount."""
    yield KubernetesCluster(config.new_client_from_config(str(chart_kubeconfig)))


def test_the_crd_fills_the_defaults(replays: Kube) -> None:
    replays.apply(replay("defaults"))
    spec = replays.get("streamreplay", "defaults")["spec"]  # type: ignore[index]
    assert spec["from"] == {"earliest": True} and spec["to"] == {"now": True} and spec["mode"] == "backfill"
    assert spec["spark"]["mode"] == "local" and spec["spark"]["driver"] == {"cores": 1, "memory": "1g"}
    assert spec["handover"] == {"oldVersion": "Delete", "maxLag": 0}  # no outputs default: see HandoverSpec
    assert StreamReplaySpec.parse(spec).spark.executor.instances == 2


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"from": {"earliest": True, "timestamp": "2013-01-01T00:00:00Z"}}, "set exactly one of earliest, offsets"),
        ({"to": {}}, "set exactly one of now, offsets, timestamp"),
        ({"to": {"timestamp": "yesterday"}}, "spec.to.timestamp"),
        ({"mode": "handover"}, "handover needs a topology"),
        (
            {"mode": "handover", "topology": flights_spec()["topology"], "handover": {"name": "flights"}},
            "handover.name must differ from appRef.name",
        ),
        ({"mode": "rewind"}, 'Unsupported value: "rewind"'),
        ({"spark": {"driver": {"memory": "1GB"}}}, "spec.spark.driver.memory"),
        ({"spark": {"executor": {"instances": 0}}}, "spec.spark.executor.instances"),
        ({"spark": {"mode": "kubernetes"}}, "spark.mode kubernetes needs spark.serviceAccountName"),
        ({"image": "apps/a:1", "handover": {"image": "apps/a:2"}}, "spec.image and handover.image differ"),
        ({"handover": {"replicas": -1}}, "spec.handover.replicas"),
        ({"handover": {"outputs": "TakeOver"}}, "handover.outputs TakeOver needs mode handover and to: {now: true}"),
        (
            {
                "mode": "handover",
                "topology": flights_spec()["topology"],
                "to": {"timestamp": "2013-06-01T00:00:00Z"},
                "handover": {"outputs": "TakeOver"},
            },
            "handover.outputs TakeOver needs mode handover and to: {now: true}",
        ),
    ],
)
def test_the_crd_rejects_an_invalid_replay_with_a_clear_message(
    replays: Kube, spec: dict[str, Any], message: str
) -> None:
    assert message in replays.rejection(replay("invalid", **spec))


def test_a_replays_spec_is_immutable(replays: Kube) -> None:
    replays.apply(replay("immutable"))
    changed = replay("immutable", mode="backfill", to={"timestamp": "2013-06-01T00:00:00Z"})
    done = replays.run("apply", "-n", replays.namespace, "-f", "-", stdin=yaml.safe_dump(changed), check=False)
    assert done == "" and replays.get("streamreplay", "immutable")["spec"]["to"] == {"now": True}  # type: ignore[index]


def test_the_controllers_writes_pass_rbac_and_restricted_pod_security(replays: Kube, seam: KubernetesCluster) -> None:
    replays.apply(replay("writes"))
    stored = replays.get("streamreplay", "writes")
    assert stored is not None
    owner = Owner("StreamReplay", "writes", replays.namespace, stored["metadata"]["uid"])
    spec = StreamReplaySpec.parse(stored["spec"])
    plan = {"replayId": "writes-1", "bootstrapServers": "127.0.0.1:9092", "from": {}, "to": {}}
    code = app_code.CodeImage("localhost/streamapp:dev", "Never")  # the init container and the pod failure policy
    manifests = job_manifests.job_manifests(
        owner, spec, plan, job_manifests.JobImages("localhost/streamapp-replay:dev", code)
    )
    for manifest in manifests:
        seam.apply(manifest, dry_run=True)  # admission: restricted Pod Security, schema
    for manifest in manifests:
        assert seam.apply(manifest)["metadata"]["uid"]
    job = seam.get("Job", replays.namespace, job_manifests.job_name("writes"))
    assert job is not None and job_reports.job_state(job).phase in ("Running", "Succeeded", "Failed")
    assert job["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == sorted(app_code.REFUSALS)
    assert job["spec"]["template"]["spec"]["initContainers"][0]["image"] == "localhost/streamapp:dev"
    assert job["metadata"]["ownerReferences"][0]["uid"] == owner.uid
    seam.patch_replay_status(replays.namespace, "writes", {"phase": "Running", "progress": "spark job starting"})
    assert replays.get("streamreplay", "writes")["status"]["phase"] == "Running"  # type: ignore[index]

    app = {"metadata": {"name": "flights", "namespace": replays.namespace}, "spec": flights_spec()}
    new = seam.apply(
        handover.new_version(
            app,
            handover.NewVersion("flights-v2", "flights-v2", flights_spec()["topology"], "apps/flights:2", 3),
            "writes",
            "uid-w",
        )
    )
    stored_new = seam.get("StreamApp", replays.namespace, "flights-v2")["spec"]  # type: ignore[index]
    assert (stored_new["applicationId"], stored_new["image"], stored_new["replicas"]) == (
        "flights-v2",
        "apps/flights:2",
        3,
    )
    seam.scale_streamapp(replays.namespace, "flights-v2", 0)  # TakeOver's stop: /scale, with the chart's rights
    scaled = seam.get("StreamApp", replays.namespace, "flights-v2")
    assert scaled is not None and scaled["spec"]["replicas"] == 0 and scaled["spec"]["image"] == "apps/flights:2"
    assert seam.read_pod_log(replays.namespace, "no-such-pod") == ""
    seam.delete("StreamApp", replays.namespace, "flights-v2", new["metadata"]["uid"])
    gone = seam.get("StreamApp", replays.namespace, "flights-v2")
    assert gone is None or gone["metadata"].get("deletionTimestamp")  # an installed operator's finalizer may hold it
    seam.delete("Job", replays.namespace, job["metadata"]["name"], job["metadata"]["uid"])  # its pod goes with it
