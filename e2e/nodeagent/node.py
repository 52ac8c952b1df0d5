"""The Node object and its heartbeats: registration, Lease renewals, Ready condition updates.

The node lifecycle controller (kube-controller-manager) taints a node ``unreachable`` when neither its
Lease in ``kube-node-lease`` is renewed nor its status heartbeats arrive within the node monitor grace
period (40-50 s). ``Heartbeat`` renews the Lease and the conditions every ``interval`` seconds.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from e2e.nodeagent.kube import Kube, Obj
from e2e.nodeagent.status import rfc3339

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
KUBELET_VERSION = "v1.33.13"
CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}


def node_conditions(now: str, ready_since: str) -> list[Obj]:
    """Ready=True and the three pressure conditions False; ``ready_since`` is Ready's transition time."""

    def cond(kind: str, status: str, reason: str, message: str, since: str) -> Obj:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastHeartbeatTime": now,
            "lastTransitionTime": since,
        }

    return [
        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "node agent has sufficient memory", ready_since),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "node agent has no disk pressure", ready_since),
        cond("PIDPressure", "False", "KubeletHasSufficientPID", "node agent has sufficient PID available", ready_since),
        cond("Ready", "True", "KubeletReady", "node agent is posting ready status", ready_since),
    ]


def node_status(node_name: str, host_ip: str, now: str, ready_since: str) -> Obj:
    """The Node's ``status``: capacity == allocatable, conditions, addresses, node info."""
    return {
        "capacity": dict(CAPACITY),
        "allocatable": dict(CAPACITY),
        "conditions": node_conditions(now, ready_since),
        "addresses": [{"type": "InternalIP", "address": host_ip}, {"type": "Hostname", "address": node_name}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": node_name,
            "systemUUID": node_name,
            "bootID": node_name,
            "kernelVersion": "",
            "osImage": "streamapp node agent",
            "containerRuntimeVersion": "nodeagent://1",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION,
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


def node_object(node_name: str, host_ip: str, now: str) -> Obj:
    """A new Node (no taints, schedulable) with its status."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node_name,
            "labels": {
                "kubernetes.io/hostname": node_name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "streamapp.io/nodeagent": "true",
            },
        },
        "spec": {},
        "status": node_status(node_name, host_ip, now, now),
    }


def register(kube: Kube, node_name: str, host_ip: str) -> None:
    """Create the Node, or make an existing one schedulable, untainted and Ready again."""
    now = rfc3339()
    if kube.get_node(node_name) is None and kube.create_node(node_object(node_name, host_ip, now)):
        log.info("Registered node %s", node_name)
    kube.patch_node(node_name, {"spec": {"unschedulable": None, "taints": None}})
    kube.patch_node_status(node_name, node_status(node_name, host_ip, now, now))


class Heartbeat(threading.Thread):
    """Renews the node Lease and the Ready condition every ``interval`` seconds until ``stop``."""

    def __init__(self, kube: Kube, node_name: str, host_ip: str, interval: float = 10.0) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.kube = kube
        self.node_name = node_name
        self.host_ip = host_ip
        self.interval = interval
        self.ready_since = rfc3339()
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.beat()
            except Exception as exc:  # keep beating through API hiccups
                log.warning("Failed to renew node heartbeat: %s", exc)
            self._stop_event.wait(self.interval)

    def beat(self) -> None:
        """One renewal of the Lease and of the node status heartbeat times."""
        if self.kube.get_node(self.node_name) is None:  # e.g. the control plane was reset
            log.info("Node %s is missing, registering again", self.node_name)
            register(self.kube, self.node_name, self.host_ip)
        now_micro = _micro_time()
        lease = self.kube.get_lease(LEASE_NAMESPACE, self.node_name)
        if lease is None:
            self.kube.create_lease(LEASE_NAMESPACE, self._lease_body(now_micro))
        else:
            self.kube.patch_lease(
                LEASE_NAMESPACE,
                self.node_name,
                {
                    "spec": {
                        "holderIdentity": self.node_name,
                        "renewTime": now_micro,
                        "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                    }
                },
            )
        now = rfc3339()
        self.kube.patch_node_status(self.node_name, {"conditions": node_conditions(now, self.ready_since)})

    def _lease_body(self, now_micro: str) -> Obj:
        owner: dict[str, Any] = {}
        node = self.kube.get_node(self.node_name)
        if node is not None:
            owner = {
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": node["metadata"]["uid"]}
                ]
            }
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.node_name, "namespace": LEASE_NAMESPACE, **owner},
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                "renewTime": now_micro,
            },
        }


def _micro_time() -> str:
    """RFC 3339 with microseconds (a Lease's renewTime is a MicroTime)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
