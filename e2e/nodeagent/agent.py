"""The node agent: wires registration, heartbeats, the volume provisioner and one worker per pod.

Start-up order: kill container processes left by an earlier agent run (pid files), register the
Node and the default StorageClass, start the heartbeat and provisioner threads and the kubelet log endpoint
(``logserver``, for ``kubectl logs``; only when the stack made the node's serving certificate), then list+watch
the pods bound to the node and hand each (by UID) to a ``PodWorker``. On SIGTERM/SIGINT every worker stops
its containers (the pod objects are left as they are: a restarted agent resumes them, counting a
restart) and the agent exits.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from e2e.nodeagent import launch, logserver, node, storage
from e2e.nodeagent.ipam import PodIPAllocator
from e2e.nodeagent.kube import Kube, Obj
from e2e.nodeagent.pods import NodeContext, PodWorker, pod_key

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class AgentConfig:
    """Agent settings. ``run_dir`` holds ``pods/`` (logs, pid files, volume files) and ``volumes/`` (PVs)."""

    kubeconfig: str
    node_name: str = "streamapp-node-0"
    mode: str = "venv"  # "venv" | "image"
    run_dir: Path = REPO / ".cache" / "run"
    venv: Path = REPO / ".venv"
    host_ip: str = "127.0.0.1"
    ca_file: Path | None = None  # default: <run_dir>/pki/ca.crt
    api_host: str = "127.0.0.1"
    api_port: int = 6443
    kubelet_port: int = logserver.KUBELET_PORT  # the Node's daemonEndpoints.kubeletEndpoint.Port


def make_runtime(config: AgentConfig) -> launch.Runtime:
    if config.mode == "venv":
        return launch.VenvRuntime(config.venv)
    if config.mode == "image":
        return launch.ImageRuntime()
    raise ValueError(f"unknown mode {config.mode!r} (expected 'venv' or 'image')")


class NodeAgent:
    """The kubelet stand-in for one node (see module doc)."""

    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.kube = Kube(config.kubeconfig)
        ca_file = config.ca_file or config.run_dir / "pki" / "ca.crt"
        self.ctx = NodeContext(
            kube=self.kube,
            node_name=config.node_name,
            host_ip=config.host_ip,
            run_dir=config.run_dir,
            runtime=make_runtime(config),
            ipam=PodIPAllocator(),
            ca_crt=ca_file.read_bytes() if ca_file.exists() else b"",
            api_host=config.api_host,
            api_port=config.api_port,
        )
        self.workers: dict[str, PodWorker] = {}
        self.finished: set[str] = set()
        self.stopping = threading.Event()
        self.heartbeat = node.Heartbeat(self.kube, config.node_name, config.host_ip)
        self.provisioner = storage.Provisioner(self.kube, config.run_dir / "volumes", config.node_name)
        self.log_server: logserver.LogServer | None = None

    def run(self) -> None:
        """Run until SIGTERM/SIGINT."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        pods_dir = self.config.run_dir / "pods"
        pods_dir.mkdir(parents=True, exist_ok=True)
        launch.kill_orphans(pods_dir)
        if isinstance(self.ctx.runtime, launch.ImageRuntime):
            self.ctx.runtime.remove_all()
        self.kube.ensure_storage_class(storage.storage_class())
        node.register(self.kube, self.config.node_name, self.config.host_ip)
        self.heartbeat.start()
        self.provisioner.start()
        self._start_log_server(pods_dir)
        threading.Thread(target=self._watch_pods, name="pod-watch", daemon=True).start()
        log.info("Node agent started for node %s (mode %s)", self.config.node_name, self.config.mode)
        self.stopping.wait()
        self._shutdown()

    def _start_log_server(self, pods_dir: Path) -> None:
        """Serve ``/containerLogs`` with the serving certificate ``hack/stack/k8s.sh`` makes for the node
        (``pki/kubelet-<node>.crt``); without it (a stack set up before it existed) ``kubectl logs`` stays
        unavailable and the agent says so."""
        pki = self.config.run_dir / "pki"
        cert, key, ca = (
            pki / f"kubelet-{self.config.node_name}.crt",
            pki / f"kubelet-{self.config.node_name}.key",
            pki / "ca.crt",
        )
        if not (cert.exists() and key.exists() and ca.exists()):
            log.warning(
                "No kubelet serving certificate %s: kubectl logs is unavailable (hack/stack/up.sh k8s makes it)", cert
            )
            return
        try:
            tls = logserver.server_context(cert, key, ca)
            self.log_server = logserver.LogServer(pods_dir, self.config.host_ip, self.config.kubelet_port, tls)
        except OSError as exc:
            log.warning(
                "Cannot serve /containerLogs on port %d: %s (kubectl logs is unavailable)",
                self.config.kubelet_port,
                exc,
            )
            return
        self.log_server.start()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        log.info("Received signal %d, stopping", signum)
        self.stopping.set()

    def _shutdown(self) -> None:
        self.heartbeat.stop()
        self.provisioner.stop()
        if self.log_server is not None:
            self.log_server.stop()
        workers = list(self.workers.values())
        for worker in workers:
            worker.shutdown()
        for worker in workers:
            worker.join(timeout=15)
        log.info("Node agent stopped")

    # --- pods ------------------------------------------------------------------------------------
    def _watch_pods(self) -> None:
        while not self.stopping.is_set():
            try:
                listed = self.kube.list_pods_on(self.config.node_name)
                self._sync(listed.get("items", []))
                for event in self.kube.watch_pods_on(self.config.node_name, listed["metadata"]["resourceVersion"]):
                    if self.stopping.is_set():
                        return
                    if event["type"] == "ERROR":
                        break
                    if event["type"] == "BOOKMARK":
                        continue
                    self._dispatch(event["type"], event["object"])
            except Exception as exc:
                log.warning("Pod watch interrupted: %s", exc)
                self.stopping.wait(1)

    def _sync(self, pods: list[Obj]) -> None:
        """Reconcile workers with a full list: start missing ones, stop those whose pod vanished."""
        present = {p["metadata"]["uid"] for p in pods}
        for uid, worker in list(self.workers.items()):
            if uid not in present:
                worker.removed()
                self.workers.pop(uid)
        for pod in pods:  # claim known IPs first so that resumed pods keep theirs
            ip = (pod.get("status") or {}).get("podIP")
            if ip and pod["metadata"]["uid"] not in self.workers:
                self.ctx.ipam.claim(pod["metadata"]["uid"], ip)
        for pod in pods:
            self._dispatch("ADDED", pod)

    def _dispatch(self, kind: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        self._reap()
        if kind == "DELETED":
            worker = self.workers.pop(uid, None)
            if worker is not None:
                worker.removed()
            return
        if uid in self.workers:
            self.workers[uid].update(pod)
            return
        if uid in self.finished:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            if pod["metadata"].get("deletionTimestamp"):
                self.kube.delete_pod_now(pod["metadata"]["namespace"], pod["metadata"]["name"], uid)
            return
        log.info("Accepted pod %s", pod_key(pod))
        worker = PodWorker(self.ctx, pod)
        self.workers[uid] = worker
        worker.start()

    def _reap(self) -> None:
        """Forget workers whose thread ended (their pod was deleted)."""
        for uid, worker in list(self.workers.items()):
            if not worker.is_alive():
                self.workers.pop(uid)
                self.finished.add(uid)
