"""A topology change that breaks state is refused, naming the change; a compatible one rolls (issue 11).

On the real stack: a counting app (store ``counts``) runs. Renaming the store would lose its state (stores and
changelogs are matched by name across versions), so with the default ``upgradePolicy: refuse`` the operator
keeps the running topology: ``UpgradeCompatible=False`` (reason ``IncompatibleTopologyChange``) names the store,
the ConfigMap still holds the running topology and the pod is not replaced. Adding a second sink instead is
compatible: the new topology is applied and ``UpgradeCompatible`` turns True.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e import cluster, operations

pytestmark = pytest.mark.e2e


@pytest.fixture
def namespace(operator_installed: None) -> Iterator[str]:
    name = cluster.create_namespace("upgrade")
    yield name
    cluster.delete_namespace(name)


def _patch_topology(name: str, namespace: str, topology: dict[str, Any]) -> None:
    cluster.kubectl("patch", "streamapp", name, "-n", namespace, "--type=merge",
                    "-p", json.dumps({"spec": {"topology": topology}}))  # fmt: skip


def _running_stores(name: str, namespace: str) -> list[str]:
    config_map = cluster.get_json("configmap", f"{name}-config", namespace)
    return [s["name"] for s in yaml.safe_load(config_map["data"]["topology.yaml"]).get("stores") or []]


def test_a_renamed_store_is_refused_naming_it_and_an_added_sink_rolls(namespace: str) -> None:
    name = f"upgrade-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({f"{name}-in": 2, f"{name}-out": 2, f"{name}-copy": 2})
    try:
        app = operations.counting_app(name, 1)
        cluster.apply(app, namespace)
        operations.wait_settled(namespace, name, 1)
        pod_uid = cluster.get_json("pod", f"{name}-0", namespace)["metadata"]["uid"]

        renamed = copy.deepcopy(app["spec"]["topology"])
        renamed["stores"][0]["name"] = "tallies"
        renamed["nodes"][1]["store"] = "tallies"
        _patch_topology(name, namespace, renamed)
        refused = cluster.wait_condition(name, namespace, "UpgradeCompatible", "False", "IncompatibleTopologyChange")
        assert "counts" in refused["message"], refused["message"]
        assert _running_stores(name, namespace) == ["counts"]
        assert cluster.get_json("pod", f"{name}-0", namespace)["metadata"]["uid"] == pod_uid

        added = copy.deepcopy(app["spec"]["topology"])
        added["nodes"].append({"name": "copy", "type": "sink", "input": "changes", "topic": f"{name}-copy",
                               "keySerde": "string", "valueSerde": "long"})  # fmt: skip
        _patch_topology(name, namespace, added)
        cluster.wait_condition(name, namespace, "UpgradeCompatible", "True")
        config_map = cluster.get_json("configmap", f"{name}-config", namespace)
        assert f"{name}-copy" in config_map["data"]["topology.yaml"]
        assert _running_stores(name, namespace) == ["counts"]
        assert cluster.degraded_message(name, namespace) is None
    finally:
        cluster.delete_topics(name)
