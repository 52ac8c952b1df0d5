"""Volumes are written where containers expect them and mounted at their mountPaths."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from e2e.nodeagent.envvars import EnvResolutionError, PodFacts
from e2e.nodeagent.volumes import (
    SERVICE_ACCOUNT_DIR,
    Mount,
    VolumeBuilder,
    VolumeNotReady,
    plan_mounts,
    projection_files,
    write_files,
)

POD = PodFacts(
    name="web-0",
    namespace="demo",
    uid="u-1",
    node_name="n",
    pod_ip="127.0.100.9",
    host_ip="127.0.0.1",
    service_account="runner",
    labels={},
    annotations={},
)
CONFIG_MAPS = {"app-config": {"data": {"topology.yaml": "nodes: []\n", "streams.yaml": "a: 1\n"}}}
SECRETS = {"tls": {"data": {"key.pem": base64.b64encode(b"KEY").decode()}}}


def test_mounts_resolve_sub_paths_and_put_parents_first(tmp_path: Path) -> None:
    dirs = {"state": tmp_path / "pv", "config": tmp_path / "cfg"}
    container = {
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/streamapp/conf/topology.yaml", "subPath": "topology.yaml"},
            {"name": "state", "mountPath": "/var/lib/streamapp/", "subPathExpr": "$(POD_NAME)"},
            {"name": "config", "mountPath": "/etc/streamapp", "readOnly": True},
        ]
    }
    mounts = plan_mounts(container, dirs, {"POD_NAME": "web-0"})
    assert mounts == [
        Mount(tmp_path / "cfg", "/etc/streamapp", True),
        Mount(tmp_path / "pv" / "web-0", "/var/lib/streamapp", False),
        Mount(tmp_path / "cfg" / "topology.yaml", "/etc/streamapp/conf/topology.yaml", False),
    ]


def test_service_account_folder_is_mounted_only_when_no_volume_covers_it(tmp_path: Path) -> None:
    sa = tmp_path / "sa"
    assert plan_mounts({}, {}, {}, sa) == [Mount(sa, SERVICE_ACCOUNT_DIR, True)]
    own = {"volumeMounts": [{"name": "token", "mountPath": SERVICE_ACCOUNT_DIR}]}
    assert plan_mounts(own, {"token": tmp_path / "t"}, {}, sa) == [Mount(tmp_path / "t", SERVICE_ACCOUNT_DIR, False)]


@pytest.mark.parametrize("sub", ["../escape", "/abs"])
def test_sub_path_cannot_leave_the_volume(tmp_path: Path, sub: str) -> None:
    with pytest.raises(EnvResolutionError, match="invalid subPath"):
        plan_mounts({"volumeMounts": [{"name": "v", "mountPath": "/x", "subPath": sub}]}, {"v": tmp_path}, {})


def test_mount_of_unknown_volume_is_an_error() -> None:
    with pytest.raises(EnvResolutionError, match="no volume named 'ghost'"):
        plan_mounts({"volumeMounts": [{"name": "ghost", "mountPath": "/x"}]}, {}, {})


def test_items_select_and_rename_keys_with_modes() -> None:
    source = {"name": "app-config", "items": [{"key": "topology.yaml", "path": "conf/t.yaml", "mode": 0o600}]}
    files = projection_files(source, CONFIG_MAPS["app-config"], False, 0o644)
    assert files == {"conf/t.yaml": (b"nodes: []\n", 0o600)}


def test_missing_object_is_not_ready_unless_optional() -> None:
    with pytest.raises(VolumeNotReady, match="configMap 'absent' not found"):
        projection_files({"name": "absent"}, None, False, 0o644)
    assert projection_files({"name": "absent", "optional": True}, None, False, 0o644) == {}


def test_write_files_replaces_content_and_drops_removed_keys(tmp_path: Path) -> None:
    write_files(tmp_path, {"a": (b"1", 0o644), "b": (b"2", 0o600)})
    write_files(tmp_path, {"a": (b"changed", 0o644)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]
    assert (tmp_path / "a").read_bytes() == b"changed"


def builder(tmp_path: Path, tokens: list[tuple[str | None, int]]) -> VolumeBuilder:
    def token(audience: str | None, seconds: int) -> str:
        tokens.append((audience, seconds))
        return "jwt-for-web-0"

    return VolumeBuilder(
        tmp_path / "pod",
        POD,
        CONFIG_MAPS.get,
        SECRETS.get,
        token,
        claims=lambda claim: tmp_path / "pv" / claim if claim == "state-web-0" else None,
        ca_crt=b"CA",
    )


def test_builder_writes_every_volume_kind(tmp_path: Path) -> None:
    tokens: list[tuple[str | None, int]] = []
    dirs = builder(tmp_path, tokens).build(
        [
            {"name": "config", "configMap": {"name": "app-config"}},
            {"name": "tls", "secret": {"secretName": "tls", "defaultMode": 0o400}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "state", "persistentVolumeClaim": {"claimName": "state-web-0"}},
            {"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            {
                "name": "kube-api-access",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {
                            "downwardAPI": {
                                "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                            }
                        },
                    ]
                },
            },
        ]
    )
    assert (dirs["config"] / "topology.yaml").read_text() == "nodes: []\n"
    assert (dirs["tls"] / "key.pem").read_bytes() == b"KEY"
    assert (dirs["tls"] / "key.pem").stat().st_mode & 0o777 == 0o400
    assert dirs["scratch"].is_dir() and dirs["scratch"].stat().st_mode & 0o777 == 0o777
    assert dirs["state"] == tmp_path / "pv" / "state-web-0" and dirs["state"].is_dir()
    assert (dirs["info"] / "name").read_text() == "web-0"
    api = dirs["kube-api-access"]
    # kube-root-ca.crt is not published yet here: the cluster CA file stands in for it
    assert {p.name: p.read_text() for p in api.iterdir()} == {
        "token": "jwt-for-web-0",
        "ca.crt": "CA",
        "namespace": "demo",
    }
    assert tokens == [(None, 3607)]


def test_unbound_claim_keeps_the_pod_waiting(tmp_path: Path) -> None:
    with pytest.raises(VolumeNotReady, match="'state-web-1' is not bound"):
        builder(tmp_path, []).build([{"name": "s", "persistentVolumeClaim": {"claimName": "state-web-1"}}])


def test_reset_empties_volumes_of_an_earlier_pod_with_the_same_name(tmp_path: Path) -> None:
    b = builder(tmp_path, [])
    scratch = b.build([{"name": "scratch", "emptyDir": {}}])["scratch"]
    (scratch / "leftover").write_text("x")
    VolumeBuilder.reset_folder(tmp_path / "pod")
    assert not (b.build([{"name": "scratch", "emptyDir": {}}])["scratch"] / "leftover").exists()


def test_rebuild_refreshes_config_files_but_reuses_the_token(tmp_path: Path) -> None:
    tokens: list[tuple[str | None, int]] = []
    b = builder(tmp_path, tokens)
    volumes = [
        {"name": "config", "configMap": {"name": "app-config"}},
        {"name": "api", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
    ]
    dirs = b.build(volumes)
    CONFIG_MAPS["app-config"]["data"]["streams.yaml"] = "a: 2\n"
    try:
        b.build(volumes)
    finally:
        CONFIG_MAPS["app-config"]["data"]["streams.yaml"] = "a: 1\n"
    assert (dirs["config"] / "streams.yaml").read_text() == "a: 2\n"
    assert len(tokens) == 1
