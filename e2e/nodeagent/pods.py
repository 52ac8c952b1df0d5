"""One pod on the node: a worker thread that runs its containers and reports its status.

Lifecycle: allocate the pod IP and write volumes -> run init containers one by one -> run the main
containers (restarts per restartPolicy, probes) -> on ``deletionTimestamp``: SIGTERM every container's
process group, wait ``deletionGracePeriodSeconds``, SIGKILL, report the final status and delete the
pod object with grace period 0 (as the kubelet does). Status is patched whenever it changes (ignoring
timestamps) and at least every ``STATUS_RESYNC`` seconds.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.nodeagent import launch
from e2e.nodeagent.containers import ContainerRunner, Prepared
from e2e.nodeagent.envvars import EnvResolutionError, PodFacts, container_argv, resolve_env
from e2e.nodeagent.ipam import PodIPAllocator
from e2e.nodeagent.kube import ApiException, Kube, Obj
from e2e.nodeagent.status import PodView, pod_status, rfc3339, without_times
from e2e.nodeagent.volumes import SERVICE_ACCOUNT_DIR, Mount, VolumeBuilder, VolumeNotReady, plan_mounts

log = logging.getLogger(__name__)

TICK = 0.3  # seconds between two passes of the worker loop
STATUS_RESYNC = 60.0
ERROR_PAUSE = 2.0
VOLUME_REFRESH = 15.0
EVENT_MIN_INTERVAL = 10.0
COMPONENT = "nodeagent"


@dataclass
class NodeContext:
    """What every pod worker shares: API access, node identity, folders, runtime mode, IP pool."""

    kube: Kube
    node_name: str
    host_ip: str
    run_dir: Path
    runtime: launch.Runtime
    ipam: PodIPAllocator
    ca_crt: bytes
    api_host: str = "127.0.0.1"
    api_port: int = 6443

    def pod_dir(self, namespace: str, name: str) -> Path:
        return self.run_dir / "pods" / namespace / name


def pod_key(pod: Obj) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


def hosts_file(pod_ip: str, hostname: str, subdomain: str, namespace: str) -> str:
    """``/etc/hosts`` of a pod: localhost plus the pod's own names on its IP (the kubelet writes the same)."""
    names = [hostname]
    if subdomain:
        names.insert(0, f"{hostname}.{subdomain}.{namespace}.svc.cluster.local")
    return f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n{pod_ip}\t{' '.join(names)}\n"


class PodWorker(threading.Thread):
    """Runs one pod (identified by UID) until it is deleted, removed, or the agent stops."""

    def __init__(self, ctx: NodeContext, pod: Obj) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.ctx = ctx
        self.uid: str = meta["uid"]
        self.namespace: str = meta["namespace"]
        self.pod_name: str = meta["name"]
        self._pod = pod
        self._lock = threading.Lock()
        self._gone = threading.Event()
        self._shutdown = threading.Event()
        self.dir = ctx.pod_dir(self.namespace, self.pod_name)
        spec = pod["spec"]
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        previous = {c["name"]: c for c in (pod.get("status") or {}).get("containerStatuses") or []}
        previous.update({c["name"]: c for c in (pod.get("status") or {}).get("initContainerStatuses") or []})
        self.init_runners = [self._runner(c, previous) for c in spec.get("initContainers") or []]
        self.runners = [self._runner(c, previous) for c in spec.get("containers") or []]
        conditions = (pod.get("status") or {}).get("conditions") or []
        self.initialized = not self.init_runners or any(
            c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions
        )
        self.init_failed = False
        self.pod_ip = ""
        self.start_time = (pod.get("status") or {}).get("startTime") or rfc3339()
        self.volume_dirs: dict[str, Path] | None = None
        self._volume_builder: VolumeBuilder | None = None
        self._volumes_at = time.monotonic()
        self.sa_dir: Path | None = None
        self.image_config: dict[str, launch.ImageConfig] = {}
        self._reported: Obj = {}
        self._reported_at = 0.0
        self._event_at: dict[str, float] = {}

    def _runner(self, container: Obj, previous: dict[str, Obj]) -> ContainerRunner:
        before = previous.get(container["name"], {})
        ran = "running" in (before.get("state") or {}) or "terminated" in (before.get("state") or {})
        count = int(before.get("restartCount", 0)) + (1 if ran else 0)
        name = container["name"]
        return ContainerRunner(container, self.dir / f"{name}.log", self.dir / f"{name}.pid", count)

    # --- inputs from the agent -------------------------------------------------------------------
    def update(self, pod: Obj) -> None:
        """Newest version of the pod object (from the watch)."""
        with self._lock:
            self._pod = pod

    def pod(self) -> Obj:
        with self._lock:
            return self._pod

    def removed(self) -> None:
        """The pod object is gone from the API: kill at once, report nothing."""
        self._gone.set()

    def shutdown(self) -> None:
        """The agent stops: stop the containers, leave the API object as it is."""
        self._shutdown.set()

    # --- main loop -------------------------------------------------------------------------------
    def run(self) -> None:
        """Loop until the pod is deleted/removed or the agent stops.

        A failing pass (API server restarting, a bug) is logged and retried after ERROR_PAUSE seconds:
        the containers keep running and the pod is never abandoned half-way.
        """
        ready = False
        try:
            while not (self._gone.is_set() or self._shutdown.is_set()):
                try:
                    if not ready:
                        self._setup()
                        ready = True
                    if self.pod()["metadata"].get("deletionTimestamp"):
                        self._terminate(self._grace_period())
                        self._report(force=True)
                        self.ctx.kube.delete_pod_now(self.namespace, self.pod_name, self.uid)
                        log.info("Deleted pod %s/%s", self.namespace, self.pod_name)
                        return
                    self._step(time.monotonic())
                except Exception:
                    log.exception("Pod worker %s/%s failed a pass, retrying", self.namespace, self.pod_name)
                    time.sleep(ERROR_PAUSE)
                time.sleep(TICK)
            self._terminate(0.0 if self._gone.is_set() else 3.0)
        finally:
            self._cleanup()

    def _setup(self) -> None:
        pod = self.pod()
        self.dir.mkdir(parents=True, exist_ok=True)
        uid_file = self.dir / "uid"
        if not uid_file.exists() or uid_file.read_text() != self.uid:
            VolumeBuilder.reset_folder(self.dir)  # a new pod with an old name: emptyDirs start empty
            uid_file.write_text(self.uid)
        if pod["spec"].get("hostNetwork"):
            self.pod_ip = self.ctx.host_ip
        else:
            old_ip = (pod.get("status") or {}).get("podIP", "")
            if not (old_ip and self.ctx.ipam.claim(self.uid, old_ip)):
                self.pod_ip = self.ctx.ipam.allocate(self.uid)
            else:
                self.pod_ip = old_ip
        hostname = pod["spec"].get("hostname") or self.pod_name
        (self.dir / "hosts").write_text(
            hosts_file(self.pod_ip, hostname, pod["spec"].get("subdomain", ""), self.namespace)
        )

    def _step(self, now: float) -> None:
        """One pass: volumes, init containers, main containers, probes, status."""
        if self.volume_dirs is None and not self._ensure_volumes():
            self._report()
            return
        self._refresh_volumes(now)
        if not self.initialized and not self.init_failed:
            self._step_init(now)
        if self.initialized:
            for runner in self.runners:
                self._drive(runner, now, self.restart_policy)
                for message in runner.run_probes(self.pod_ip, now, self._exec_prefix):
                    self._event(f"probe-{runner.name}", "Warning", "Unhealthy", message)
        self._report()

    def _step_init(self, now: float) -> None:
        """Run the first unfinished init container; all done (exit 0) -> initialized."""
        policy = self._init_policy
        for runner in self.init_runners:
            done = runner.termination is not None and runner.termination.exit_code == 0 and not runner.running
            if done:
                continue
            self._drive(runner, now, policy)
            if runner.termination is not None and not runner.running and not runner.restart_wanted(policy):
                self.init_failed = runner.termination.exit_code != 0
            return
        self.initialized = True
        for runner in self.init_runners:
            runner.probes = {}

    def _drive(self, runner: ContainerRunner, now: float, policy: str) -> None:
        """Notice exits and (re)start the container when restartPolicy and backoff allow."""
        if runner.poll(now) and runner.restart_wanted(policy):
            self._event(
                f"backoff-{runner.name}", "Warning", "BackOff", f"Back-off restarting failed container {runner.name}"
            )
        if not runner.start_due(policy, now):
            return
        try:
            prepared = self._prepare(runner.spec)
        except (EnvResolutionError, VolumeNotReady, RuntimeError, ApiException) as exc:
            reason = "CreateContainerConfigError" if isinstance(exc, EnvResolutionError) else "ContainerCreating"
            runner.wait_failed(reason, str(exc))
            runner.next_start = now + 2.0
            return
        runner.start(prepared, now)
        self._event(f"started-{runner.name}", "Normal", "Started", f"Started container {runner.name}")

    # --- preparing a run -------------------------------------------------------------------------
    def _facts(self) -> PodFacts:
        meta, spec = self.pod()["metadata"], self.pod()["spec"]
        return PodFacts(
            name=self.pod_name,
            namespace=self.namespace,
            uid=self.uid,
            node_name=self.ctx.node_name,
            pod_ip=self.pod_ip,
            host_ip=self.ctx.host_ip,
            service_account=spec.get("serviceAccountName", "default"),
            labels=meta.get("labels") or {},
            annotations=meta.get("annotations") or {},
        )

    def _builder(self) -> VolumeBuilder:
        """The pod's VolumeBuilder (made once, after the pod IP is known: downward API files use it)."""
        if self._volume_builder is None:
            self._volume_builder = self._make_builder()
        return self._volume_builder

    def _make_builder(self) -> VolumeBuilder:
        kube, ns = self.ctx.kube, self.namespace
        service_account = self.pod()["spec"].get("serviceAccountName") or "default"

        def claim_dir(claim: str) -> Path | None:
            pvc = kube.get_pvc(ns, claim)
            volume = (pvc or {}).get("spec", {}).get("volumeName")
            if not pvc or (pvc.get("status") or {}).get("phase") != "Bound" or not volume:
                return None
            pv = kube.get_pv(volume) or {}
            path = (pv.get("spec", {}).get("hostPath") or pv.get("spec", {}).get("local") or {}).get("path")
            return Path(path) if path else None

        return VolumeBuilder(
            self.dir,
            self._facts(),
            config_maps=lambda name: kube.get_config_map(ns, name),
            secrets=lambda name: kube.get_secret(ns, name),
            token=lambda aud, exp: kube.create_token(ns, service_account, self.pod(), aud, exp),
            claims=claim_dir,
            ca_crt=self.ctx.ca_crt,
        )

    def _ensure_volumes(self) -> bool:
        """Write all volumes once; False (containers stay ContainerCreating) while one is not ready."""
        pod = self.pod()
        try:
            builder = self._builder()
            self.volume_dirs = builder.build(pod["spec"].get("volumes") or [])
            if pod["spec"].get("automountServiceAccountToken", True) and not any(
                vm.get("mountPath", "").rstrip("/") == SERVICE_ACCOUNT_DIR
                for c in pod["spec"].get("containers", [])
                for vm in c.get("volumeMounts") or []
            ):
                self.sa_dir = builder.service_account_files()
            return True
        except (VolumeNotReady, ApiException, OSError) as exc:
            for runner in self.init_runners + self.runners:
                runner.wait_failed("ContainerCreating", str(exc))
            self.volume_dirs = None
            return False

    def _refresh_volumes(self, now: float) -> None:
        """Rewrite configMap/secret/projected files every VOLUME_REFRESH seconds (as the kubelet syncs them).

        Updates show through directory mounts, not through ``subPath`` mounts (as in Kubernetes).
        """
        if now - self._volumes_at < VOLUME_REFRESH:
            return
        self._volumes_at = now
        try:
            self._builder().build(self.pod()["spec"].get("volumes") or [])
        except (VolumeNotReady, ApiException, OSError) as exc:
            log.debug("Kept old volume files of pod %s/%s: %s", self.namespace, self.pod_name, exc)

    def _prepare(self, container: Obj) -> Prepared:
        """Resolve env, argv and mounts of one container run (raises to keep it waiting)."""
        kube, ns, runtime = self.ctx.kube, self.namespace, self.ctx.runtime
        image = str(container.get("image", ""))
        key = f"{ns}_{self.pod_name}_{container['name']}"
        if key not in self.image_config:
            self.image_config[key] = runtime.image_config(image, key)
        image_config = self.image_config[key]
        base = {
            **runtime.base_env(image_config),
            "HOSTNAME": self.pod()["spec"].get("hostname") or self.pod_name,
            "KUBERNETES_SERVICE_HOST": self.ctx.api_host,
            "KUBERNETES_SERVICE_PORT": str(self.ctx.api_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.ctx.api_port),
        }
        env = resolve_env(
            container,
            self._facts(),
            config_maps=lambda name: kube.get_config_map(ns, name),
            secrets=lambda name: kube.get_secret(ns, name),
            base=base,
        )
        argv = container_argv(container, env, image_config.entrypoint, image_config.cmd)
        if not argv:
            raise EnvResolutionError(f"container {container['name']!r} has no command (venv mode needs one)")
        mounts = plan_mounts(container, self.volume_dirs or {}, env, self.sa_dir)
        if not self.pod()["spec"].get("hostNetwork"):
            mounts.append(Mount(self.dir / "hosts", "/etc/hosts", False))
        spec = launch.LaunchSpec(
            key=key,
            image=image,
            argv=argv,
            env=env,
            mounts=mounts,
            working_dir=container.get("workingDir") or image_config.working_dir,
            hostname=self.pod()["spec"].get("hostname") or self.pod_name,
            run_as=self._run_as(container),
        )
        spawn_argv, spawn_env = runtime.command(spec)
        return Prepared(spawn_argv, spawn_env, env)

    def _run_as(self, container: Obj) -> str:
        """``uid[:gid]`` from the container's (or pod's) securityContext; "" for the image default."""
        ctx = {**(self.pod()["spec"].get("securityContext") or {}), **(container.get("securityContext") or {})}
        if ctx.get("runAsUser") is None:
            return ""
        return f"{ctx['runAsUser']}" + (f":{ctx['runAsGroup']}" if ctx.get("runAsGroup") is not None else "")

    @staticmethod
    def _exec_prefix(pid: int) -> list[str]:
        """nsenter into the container's mount/UTS namespaces and root (chroot in image mode)."""
        target = launch.namespace_target(pid)
        return ["/usr/bin/nsenter", "-t", str(target), "-m", "-u", "-r", "-w", "--"]

    # --- stopping --------------------------------------------------------------------------------
    def _grace_period(self) -> float:
        meta, spec = self.pod()["metadata"], self.pod()["spec"]
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        return float(grace)

    def _terminate(self, grace: float) -> None:
        """SIGTERM every running container, wait up to ``grace`` seconds, then SIGKILL the rest."""
        runners = [r for r in self.init_runners + self.runners if r.running]
        if runners:
            log.info("Stopping pod %s/%s (grace %.0fs)", self.namespace, self.pod_name, grace)
        for runner in runners:
            self._event(f"kill-{runner.name}", "Normal", "Killing", f"Stopping container {runner.name}")
            runner.signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
        deadline = time.monotonic() + grace
        while any(r.running for r in runners) and time.monotonic() < deadline:
            for runner in runners:
                runner.poll(time.monotonic())
            time.sleep(0.1)
        for runner in runners:
            runner.signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(r.running for r in runners) and time.monotonic() < deadline:
            for runner in runners:
                runner.poll(time.monotonic())
            time.sleep(0.05)
        for runner in runners:
            runner.next_start = float("inf")  # never again

    def _cleanup(self) -> None:
        for runner in self.init_runners + self.runners:
            runner.pid_path.unlink(missing_ok=True)
        for key in self.image_config:
            self.ctx.runtime.remove(key)
        if not self._shutdown.is_set():
            self.ctx.ipam.release(self.uid)

    # --- reporting -------------------------------------------------------------------------------
    def _report(self, force: bool = False) -> None:
        """Patch pods/status when it changed (or on resync); a vanished pod ends the worker."""
        if self._gone.is_set():
            return
        now_mono = time.monotonic()
        view = PodView(
            restart_policy=self.restart_policy,
            pod_ip=self.pod_ip,
            host_ip=self.ctx.host_ip,
            start_time=self.start_time,
            initialized=self.initialized,
            init_failed=self.init_failed,
            init_containers=[r.snapshot(self._init_policy, now_mono) for r in self.init_runners],
            containers=[r.snapshot(self.restart_policy, now_mono) for r in self.runners],
            previous_conditions=(self.pod().get("status") or {}).get("conditions") or [],
        )
        status = pod_status(view, rfc3339())
        comparable = without_times(status)
        if not force and comparable == self._reported and now_mono - self._reported_at < STATUS_RESYNC:
            return
        try:
            self.ctx.kube.patch_pod_status(self.namespace, self.pod_name, status)
        except ApiException as exc:
            if exc.status == 404:
                self._gone.set()
                return
            log.warning("Failed to patch status of pod %s/%s: %s", self.namespace, self.pod_name, exc.reason)
            return
        if comparable.get("phase") != self._reported.get("phase"):
            log.info("Pod %s/%s is %s", self.namespace, self.pod_name, status["phase"])
        self._reported, self._reported_at = comparable, now_mono

    def _event(self, key: str, event_type: str, reason: str, message: str) -> None:
        """Emit a pod Event, at most one per ``key`` every EVENT_MIN_INTERVAL seconds."""
        now = time.monotonic()
        if now - self._event_at.get(key, -EVENT_MIN_INTERVAL) < EVENT_MIN_INTERVAL:
            return
        self._event_at[key] = now
        self.ctx.kube.emit_event(self.pod(), "Pod", event_type, reason, message, COMPONENT)

    @property
    def _init_policy(self) -> str:
        """Init containers are retried until they succeed, unless the pod's policy is Never."""
        return "Never" if self.restart_policy == "Never" else "OnFailure"

    @property
    def terminal(self) -> bool:
        return self._reported.get("phase") in ("Succeeded", "Failed")

    def describe(self) -> dict[str, Any]:
        """Small summary for logs/debugging."""
        return {
            "pod": f"{self.namespace}/{self.pod_name}",
            "uid": self.uid,
            "ip": self.pod_ip,
            "phase": self._reported.get("phase"),
        }
