"""Pending claims get a pre-bound local PersistentVolume whose folder is stable per claim name."""

from __future__ import annotations

from pathlib import Path

from e2e.nodeagent.storage import PROVISIONER, storage_class, volume_for, wants_volume


def claim(**spec: object) -> dict:
    return {
        "metadata": {"name": "state-web-0", "namespace": "demo", "uid": "u-9"},
        "spec": {"resources": {"requests": {"storage": "2Gi"}}, **spec},
        "status": {"phase": "Pending"},
    }


def test_volume_is_pre_bound_with_claim_class_modes_and_size() -> None:
    pv = volume_for(claim(storageClassName="local", accessModes=["ReadWriteOnce"]), Path("/v"), "node-a")
    spec = pv["spec"]
    assert pv["metadata"]["name"] == "pvc-u-9"
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "demo",
        "name": "state-web-0",
        "uid": "u-9",
    }
    assert (spec["storageClassName"], spec["accessModes"], spec["capacity"]) == (
        "local",
        ["ReadWriteOnce"],
        {"storage": "2Gi"},
    )
    assert spec["hostPath"]["path"] == "/v/demo/state-web-0"  # by name: a re-created claim finds its data
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"


def test_only_pending_unbound_claims_want_a_volume() -> None:
    assert wants_volume(claim())
    assert not wants_volume(claim(volumeName="pv-1"))
    bound = claim()
    bound["status"]["phase"] = "Bound"
    assert not wants_volume(bound)


def test_default_storage_class_is_served_by_the_agent() -> None:
    sc = storage_class()
    assert sc["provisioner"] == PROVISIONER and sc["volumeBindingMode"] == "Immediate"
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
