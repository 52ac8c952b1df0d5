"""Local persistent volumes: a PersistentVolume per Pending claim, a folder per claim name.

The agent acts as the provisioner of the default StorageClass ``local``
(provisioner ``streamapp.io/nodeagent-local``, volumeBindingMode Immediate). For every Pending PVC
without a volume (any storage class, or none) it creates a ``hostPath`` PersistentVolume ``pvc-<uid>``
pre-bound to the claim (``claimRef``), with the claim's class, access modes and requested size; the
KCM's PV controller then binds the two. The folder is ``<run>/volumes/<namespace>/<claim name>``, so data
outlives pods (StatefulSet claims are kept when pods are deleted). When a claim is deleted the agent
deletes its PV and its folder (the class's reclaim policy Delete); a PV of ours found Released at a
resync (claim deleted while the agent was down) is deleted, its folder kept. PVs carry reclaim policy
Retain so that the PV controller never tries to recycle them itself.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from e2e.nodeagent.kube import ApiException, Kube, Obj

log = logging.getLogger(__name__)

STORAGE_CLASS = "local"
PROVISIONER = "streamapp.io/nodeagent-local"
MANAGED_LABEL = "streamapp.io/nodeagent-volume"


def storage_class() -> Obj:
    """The default StorageClass served by this agent."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }


def claim_folder(volumes_dir: Path, namespace: str, claim: str) -> Path:
    """Host folder of a claim's data."""
    return volumes_dir / namespace / claim


def wants_volume(pvc: Obj) -> bool:
    """A claim that is Pending and not yet bound to a volume (and not being deleted)."""
    return (
        (pvc.get("status") or {}).get("phase", "Pending") == "Pending"
        and not (pvc.get("spec") or {}).get("volumeName")
        and not pvc["metadata"].get("deletionTimestamp")
        and not (pvc.get("spec") or {}).get("dataSource")
    )


def volume_for(pvc: Obj, volumes_dir: Path, node_name: str) -> Obj:
    """The PersistentVolume that satisfies ``pvc``: hostPath folder, same class/modes, size = request."""
    meta, spec = pvc["metadata"], pvc.get("spec") or {}
    request = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    folder = claim_folder(volumes_dir, meta["namespace"], meta["name"])
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "labels": {MANAGED_LABEL: "true"},
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": request},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": spec.get("volumeMode", "Filesystem"),
            "storageClassName": spec.get("storageClassName") or "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": str(folder), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]},
                            ]
                        }
                    ]
                }
            },
        },
    }


class Provisioner(threading.Thread):
    """Watches PVCs; creates PVs for Pending ones, deletes Released PVs this agent created."""

    def __init__(self, kube: Kube, volumes_dir: Path, node_name: str) -> None:
        super().__init__(name="provisioner", daemon=True)
        self.kube = kube
        self.volumes_dir = volumes_dir
        self.node_name = node_name
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.resync()
                listed = self.kube.list_pvcs()
                for event in self.kube.watch_pvcs(listed["metadata"]["resourceVersion"]):
                    if self._stop_event.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.provision(event["object"])
                    elif event["type"] == "DELETED":
                        self.reclaim(event["object"])
                    elif event["type"] == "ERROR":
                        break
            except Exception as exc:
                log.warning("PVC watch interrupted: %s", exc)
                self._stop_event.wait(2)

    def resync(self) -> None:
        """Provision every Pending claim; delete Released volumes of ours."""
        for pvc in self.kube.list_pvcs().get("items", []):
            self.provision(pvc)
        for pv in self.kube.list_pvs(f"{MANAGED_LABEL}=true").get("items", []):
            if (pv.get("status") or {}).get("phase") == "Released":
                log.info("Deleted released persistentvolume %s", pv["metadata"]["name"])
                self.kube.delete_pv(pv["metadata"]["name"])

    def reclaim(self, pvc: Obj) -> None:
        """A claim was deleted: delete its PV (if ours) and its data folder (reclaim policy Delete).

        Only called from DELETED watch events, which arrive in order, so a claim re-created with the
        same name is provisioned (folder made anew) after this removal, never before.
        """
        meta = pvc["metadata"]
        pv = self.kube.get_pv(f"pvc-{meta['uid']}")
        if pv is None or MANAGED_LABEL not in (pv["metadata"].get("labels") or {}):
            return
        self.kube.delete_pv(pv["metadata"]["name"])
        shutil.rmtree(claim_folder(self.volumes_dir, meta["namespace"], meta["name"]), ignore_errors=True)
        log.info(
            "Deleted persistentvolume %s and the data of %s/%s", pv["metadata"]["name"], meta["namespace"], meta["name"]
        )

    def provision(self, pvc: Obj) -> None:
        """Create the PV for one claim if it still needs one (idempotent)."""
        if not wants_volume(pvc):
            return
        pv = volume_for(pvc, self.volumes_dir, self.node_name)
        folder = Path(pv["spec"]["hostPath"]["path"])
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)  # any container user may write its state, as with local-path provisioners
        try:
            if not self.kube.create_pv(pv):
                return
        except ApiException as exc:
            log.warning(
                "Failed to create persistentvolume for %s/%s: %s",
                pvc["metadata"]["namespace"],
                pvc["metadata"]["name"],
                exc.reason,
            )
            return
        log.info(
            "Provisioned persistentvolume %s for %s/%s",
            pv["metadata"]["name"],
            pvc["metadata"]["namespace"],
            pvc["metadata"]["name"],
        )
