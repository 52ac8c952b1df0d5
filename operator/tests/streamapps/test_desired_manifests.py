"""The desired children follow the runtime process contract and roll pods on every config change."""

from __future__ import annotations

from typing import Any

import yaml
from operator_fakes import flights_spec
from streamapp.config import StreamsConfig
from streamapp_operator.kinds import Owner
from streamapp_operator.streamapps import desired
from streamapp_operator.streamapps.resources import StreamAppSpec

OWNER = Owner("StreamApp", name="flights-per-carrier", namespace="apps", uid="uid-1")


def _stateful_set(**overrides: Any) -> dict[str, Any]:
    return desired.stateful_set(OWNER, StreamAppSpec.parse(flights_spec(**overrides)), "abc")


def _container(sts: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = sts["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def test_every_child_is_owned_by_the_streamapp_so_deletion_cascades() -> None:
    spec = StreamAppSpec.parse(flights_spec())
    children = [
        desired.config_map(OWNER, "nodes: []\n", desired.streams_config(spec, "app")),
        desired.service(OWNER),
        desired.stateful_set(OWNER, spec, "abc"),
        desired.disruption_budget(OWNER, spec).manifest,
    ]
    for child in children:
        assert child is not None
        assert child["metadata"]["namespace"] == "apps"
        assert child["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "streamapp.io/v1alpha1",
                "kind": "StreamApp",
                "name": "flights-per-carrier",
                "uid": "uid-1",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]


def test_container_runs_the_runtime_with_the_mounted_topology_and_config() -> None:
    container = _container(_stateful_set())
    assert container["command"] == [
        "streamapp",
        "run",
        "--topology",
        "/etc/streamapp/topology.yaml",
        "--config",
        "/etc/streamapp/streams.yaml",
    ]
    assert container["image"] == "localhost/streamapp:dev"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"state": "/var/lib/streamapp", "config": "/etc/streamapp", "tmp": "/tmp"}


def test_pod_identity_and_bind_address_come_from_the_downward_api() -> None:
    fields = [e for e in _container(_stateful_set())["env"] if "valueFrom" in e]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in fields}
    assert env == {"STREAMAPP_INSTANCE_ID": "metadata.name", "STREAMAPP_HTTP_HOST": "status.podIP"}


def test_each_pod_advertises_its_own_ip_and_http_port_for_interactive_queries() -> None:
    env = _container(_stateful_set())["env"]
    names = [e["name"] for e in env]
    server = next(e for e in env if e["name"] == "STREAMAPP_APPLICATION_SERVER")
    assert server == {"name": "STREAMAPP_APPLICATION_SERVER", "value": "$(STREAMAPP_HTTP_HOST):8080"}
    # Kubernetes expands $(VAR) only from variables defined earlier in the list
    assert names.index("STREAMAPP_HTTP_HOST") < names.index("STREAMAPP_APPLICATION_SERVER")


def test_readiness_and_liveness_probe_the_runtime_http_port() -> None:
    container = _container(_stateful_set())
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8080}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080}
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_each_pod_gets_its_own_state_volume_of_the_requested_size() -> None:
    sts = _stateful_set(state={"size": "5Gi", "storageClassName": "fast"})
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["spec"]["resources"] == {"requests": {"storage": "5Gi"}}
    assert claim["spec"]["storageClassName"] == "fast"
    assert "storageClassName" not in _stateful_set()["spec"]["volumeClaimTemplates"][0]["spec"]


def test_stateful_set_scales_with_spec_replicas_and_selects_only_its_pods() -> None:
    sts = _stateful_set(replicas=3)
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == "flights-per-carrier"
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    selector = sts["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "streamapp", "app.kubernetes.io/instance": "flights-per-carrier"}
    assert selector.items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    assert desired.selector("flights-per-carrier") == (
        "app.kubernetes.io/name=streamapp,app.kubernetes.io/instance=flights-per-carrier"
    )


def test_config_volume_mounts_the_apps_config_map_and_tmp_is_an_empty_dir() -> None:
    volumes = _stateful_set()["spec"]["template"]["spec"]["volumes"]
    assert volumes == [
        {"name": "config", "configMap": {"name": "flights-per-carrier-config"}},
        {"name": "tmp", "emptyDir": {}},
    ]


def test_resources_pass_through_and_requests_default_where_not_set() -> None:
    assert _container(_stateful_set())["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"}}
    container = _container(_stateful_set(resources={"requests": {"cpu": "500m", "memory": 268435456}}))
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": 268435456}}
    limited = _container(_stateful_set(resources={"limits": {"memory": "128Mi"}}))
    # A limit without a request makes the request equal to it: no default request above the limit.
    assert limited["resources"] == {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m"}}


def test_pods_meet_the_restricted_pod_security_standard() -> None:
    pod = _stateful_set()["spec"]["template"]["spec"]
    container = pod["containers"][0]
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["fsGroup"] == 10001  # the state volume is writable by the pod's user
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/var/lib/streamapp", "/tmp"}


def test_cleanup_policy_decides_whether_the_state_volumes_go_with_the_stateful_set() -> None:
    assert _stateful_set()["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain", "whenScaled": "Retain"
    }  # fmt: skip
    deleting = _stateful_set(cleanupPolicy="Delete")["spec"]["persistentVolumeClaimRetentionPolicy"]
    assert deleting == {"whenDeleted": "Delete", "whenScaled": "Retain"}


def test_sasl_credentials_reach_the_pods_from_the_secret_never_through_the_config_map() -> None:
    kafka = {
        "bootstrapServers": "kafka:9093",
        "authentication": {
            "mechanism": "SCRAM-SHA-512",
            "username": "app",
            "passwordSecret": {"name": "kafka-user", "key": "password"},
        },
        "tls": {"caSecret": {"name": "kafka-ca", "key": "ca.crt"}},
    }
    spec = StreamAppSpec.parse(flights_spec(kafka=kafka))
    sts = desired.stateful_set(OWNER, spec, "0" * 16)
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "STREAMAPP_KAFKA_SASL_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "kafka-user", "key": "password"}}} in container["env"]  # fmt: skip
    assert {"name": "STREAMAPP_KAFKA_SASL_USERNAME", "value": "app"} in container["env"]
    assert not any("password" in part for part in container["command"])
    config = desired.streams_config(spec, "app")
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert config["ssl.ca.location"] == "/etc/streamapp/kafka-ca/ca.crt"
    assert not any("password" in key or "username" in key for key in config)
    # The runtime's own config model accepts what the operator writes.
    assert StreamsConfig.from_mapping(config).to_mapping()["producer.security.protocol"] == "SASL_SSL"
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["kafka-ca"]["secret"] == {"secretName": "kafka-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}


def test_headless_service_names_the_pods() -> None:
    service = desired.service(OWNER)
    assert service["metadata"]["name"] == "flights-per-carrier"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == desired.selector_labels("flights-per-carrier")
    assert service["spec"]["ports"][0]["port"] == 8080


def test_streams_config_carries_the_spec_fields_under_kafka_streams_names() -> None:
    spec = StreamAppSpec.parse(flights_spec(processingGuarantee="exactly_once_v2"))
    config = desired.streams_config(spec, "flights-per-carrier")
    assert config == {
        "application.id": "flights-per-carrier",
        "bootstrap.servers": "127.0.0.1:9092",
        "num.stream.threads": 2,
        "processing.guarantee": "exactly_once_v2",
        "state.dir": "/var/lib/streamapp",
        "http.port": 8080,
        "commit.interval.ms": "1000",
    }
    config_map = desired.config_map(OWNER, "nodes: []\n", config)
    assert config_map["metadata"]["name"] == "flights-per-carrier-config"
    assert yaml.safe_load(config_map["data"]["streams.yaml"]) == config
    assert config_map["data"]["topology.yaml"] == "nodes: []\n"


def test_config_hash_changes_with_topology_or_config_so_pods_roll() -> None:
    spec = StreamAppSpec.parse(flights_spec())
    base = desired.config_map(OWNER, "a\n", desired.streams_config(spec, "app"))
    other_topology = desired.config_map(OWNER, "b\n", desired.streams_config(spec, "app"))
    other_config = desired.config_map(OWNER, "a\n", desired.streams_config(spec, "app2"))
    same = desired.config_map(OWNER, "a\n", desired.streams_config(spec, "app"))
    assert desired.config_hash(base) == desired.config_hash(same)
    assert len({desired.config_hash(m) for m in (base, other_topology, other_config)}) == 3
    sts = desired.stateful_set(OWNER, spec, desired.config_hash(base))
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"streamapp.io/config-hash": desired.config_hash(base)}


def test_a_change_of_the_pod_template_is_known_to_roll_pods_before_it_is_applied() -> None:
    current = _stateful_set()
    assert not desired.rolls_pods(None, current)
    assert not desired.rolls_pods(current, _stateful_set())
    assert not desired.rolls_pods(current, _stateful_set(replicas=5))  # scaling keeps running pods
    assert desired.rolls_pods(current, _stateful_set(image="localhost/streamapp:2"))
    assert desired.rolls_pods(current, desired.stateful_set(OWNER, StreamAppSpec.parse(flights_spec()), "other"))
