"""Pod volumes: write configMap/secret/projected/downwardAPI files, and plan the bind mounts.

``plan_mounts`` and ``projection_files`` are pure; ``VolumeBuilder`` writes under the pod's folder
``<run>/pods/<ns>/<pod>/volumes/<volume>/`` and resolves PVCs to their PersistentVolume folder. A
container then sees each volume at its ``mountPath`` through a bind mount in its own mount namespace.
"""

from __future__ import annotations

import base64
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.nodeagent.envvars import EnvResolutionError, ObjectLookup, PodFacts, expand

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REUSE = 600.0  # seconds a service-account token is reused before a new TokenRequest

TokenSource = Callable[[str | None, int], str]
"""(audience or None for the API server's default, expirationSeconds) -> a service-account JWT."""
ClaimResolver = Callable[[str], Path | None]
"""(claimName) -> host folder of the bound PersistentVolume, or None while the claim is unbound."""


class VolumeNotReady(Exception):
    """A volume cannot be set up yet (unbound claim, missing ConfigMap...); retried later."""


@dataclass(frozen=True)
class Mount:
    """One bind mount: host ``source`` (folder or file) appears at ``target`` inside the container."""

    source: Path
    target: str
    read_only: bool


FileSet = dict[str, tuple[bytes, int]]
"""Relative path inside a volume -> (content, file mode such as 0o644)."""


def _object_bytes(obj: dict[str, Any], is_secret: bool) -> dict[str, bytes]:
    """Key -> raw bytes of a ConfigMap or Secret."""
    out: dict[str, bytes] = {}
    if is_secret:
        out.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
        out.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
    else:
        out.update({k: v.encode() for k, v in (obj.get("data") or {}).items()})
        out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out


def projection_files(source: dict[str, Any], obj: dict[str, Any] | None, is_secret: bool, default_mode: int) -> FileSet:
    """Files of a configMap/secret volume (or projected source): all keys, or only ``items`` renamed.

    ``obj`` None means the object is missing: empty when ``optional``, else VolumeNotReady.
    """
    if obj is None:
        if source.get("optional"):
            return {}
        kind = "secret" if is_secret else "configMap"
        name = source.get("secretName") or source.get("name")
        raise VolumeNotReady(f"{kind} {name!r} not found")
    data = _object_bytes(obj, is_secret)
    items = source.get("items")
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    files: FileSet = {}
    for item in items:
        if item["key"] not in data:
            if source.get("optional"):
                continue
            raise VolumeNotReady(f"key {item['key']!r} not found")
        files[item["path"]] = (data[item["key"]], int(item.get("mode", default_mode)))
    return files


def downward_files(items: list[dict[str, Any]], pod: PodFacts, default_mode: int) -> FileSet:
    """Files of a downwardAPI volume/projection (fieldRef items only)."""
    files: FileSet = {}
    for item in items:
        if "fieldRef" not in item:
            raise VolumeNotReady(f"downwardAPI item {item.get('path')!r}: only fieldRef is supported")
        value = pod.field(item["fieldRef"]["fieldPath"])
        files[item["path"]] = (value.encode(), int(item.get("mode", default_mode)))
    return files


def plan_mounts(
    container: dict[str, Any],
    volume_dirs: Mapping[str, Path],
    env: Mapping[str, str],
    service_account_dir: Path | None = None,
) -> list[Mount]:
    """The container's bind mounts, parents before children (sorted by target depth).

    ``volume_dirs`` maps volume name -> host folder. ``subPath``/``subPathExpr`` select a child of it
    (``subPathExpr`` is expanded with ``env``). ``service_account_dir`` is mounted at the standard
    token path when no volumeMount already covers it (the ServiceAccount admission plugin normally adds
    that volume itself). Raises EnvResolutionError for a mount of an unknown volume.
    """
    mounts: list[Mount] = []
    for vm in container.get("volumeMounts") or []:
        if vm["name"] not in volume_dirs:
            raise EnvResolutionError(f"volumeMount {vm['mountPath']!r}: no volume named {vm['name']!r}")
        source = volume_dirs[vm["name"]]
        sub = vm.get("subPath") or (expand(vm["subPathExpr"], env) if vm.get("subPathExpr") else "")
        if sub:
            if sub.startswith("/") or ".." in Path(sub).parts:
                raise EnvResolutionError(f"volumeMount {vm['mountPath']!r}: invalid subPath {sub!r}")
            source = source / sub
        mounts.append(Mount(source, vm["mountPath"].rstrip("/") or "/", bool(vm.get("readOnly", False))))
    if service_account_dir is not None and not any(m.target == SERVICE_ACCOUNT_DIR for m in mounts):
        mounts.append(Mount(service_account_dir, SERVICE_ACCOUNT_DIR, True))
    return sorted(mounts, key=lambda m: m.target.count("/"))


def write_files(folder: Path, files: FileSet) -> None:
    """Make ``folder`` hold exactly ``files`` (each replaced atomically by rename; others removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = {folder / rel for rel in files}
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() and path not in wanted and not path.name.startswith(".tmp-"):
            path.unlink()
    for rel, (content, mode) in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() and target.read_bytes() == content:
            os.chmod(target, mode)
            continue
        tmp = target.with_name(f".tmp-{target.name}")
        tmp.write_bytes(content)
        os.chmod(tmp, mode)
        os.replace(tmp, target)


class VolumeBuilder:
    """Materializes one pod's volumes under ``pod_dir/volumes`` and returns name -> host folder.

    Lookups are injected: ``config_maps``/``secrets`` read objects of the pod's namespace, ``token``
    issues service-account tokens for this pod, ``claims`` resolves PVC names to PV folders.
    """

    def __init__(
        self,
        pod_dir: Path,
        pod: PodFacts,
        config_maps: ObjectLookup,
        secrets: ObjectLookup,
        token: TokenSource,
        claims: ClaimResolver,
        ca_crt: bytes,
    ) -> None:
        self.root = pod_dir / "volumes"
        self.pod = pod
        self.config_maps = config_maps
        self.secrets = secrets
        self.token = token
        self.claims = claims
        self.ca_crt = ca_crt
        self._tokens: dict[tuple[str | None, int], tuple[str, float]] = {}

    @staticmethod
    def reset_folder(pod_dir: Path) -> None:
        """Forget all volumes of an earlier pod with the same name (emptyDir must start empty)."""
        shutil.rmtree(pod_dir / "volumes", ignore_errors=True)

    def _token(self, audience: str | None, expiration: int) -> str:
        """A service-account token, reused while younger than half its lifetime (at most TOKEN_REUSE s)."""
        now = time.monotonic()
        cached = self._tokens.get((audience, expiration))
        if cached is not None and now - cached[1] < min(TOKEN_REUSE, expiration / 2):
            return cached[0]
        jwt = self.token(audience, expiration)
        self._tokens[(audience, expiration)] = (jwt, now)
        return jwt

    def build(self, volumes: list[dict[str, Any]]) -> dict[str, Path]:
        """Write every volume's files (idempotent; refreshes content). Raises VolumeNotReady."""
        dirs: dict[str, Path] = {}
        for volume in volumes:
            dirs[volume["name"]] = self._build_one(volume)
        return dirs

    def service_account_files(self) -> Path:
        """The default token folder (token, ca.crt, namespace) for pods without the projected volume."""
        folder = self.root / "_serviceaccount"
        write_files(
            folder,
            {
                "token": (self._token(None, 3607).encode(), 0o644),
                "ca.crt": (self.ca_crt, 0o644),
                "namespace": (self.pod.namespace.encode(), 0o644),
            },
        )
        return folder

    def _build_one(self, volume: dict[str, Any]) -> Path:
        name = volume["name"]
        folder = self.root / name
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            path = self.claims(claim)
            if path is None:
                raise VolumeNotReady(f"persistentvolumeclaim {claim!r} is not bound")
            path.mkdir(parents=True, exist_ok=True)
            return path
        if "hostPath" in volume:
            path = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type") in ("DirectoryOrCreate", None, ""):
                path.mkdir(parents=True, exist_ok=True)
            return path
        if "emptyDir" in volume:
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o777)
            return folder
        write_files(folder, self._files(volume))
        return folder

    def _files(self, volume: dict[str, Any]) -> FileSet:
        if "configMap" in volume:
            src = volume["configMap"]
            mode = int(src.get("defaultMode", 0o644))
            return projection_files(src, self._config_map(src.get("name", "")), False, mode)
        if "secret" in volume:
            src = volume["secret"]
            mode = int(src.get("defaultMode", 0o644))
            return projection_files(src, self.secrets(src.get("secretName", "")), True, mode)
        if "downwardAPI" in volume:
            src = volume["downwardAPI"]
            return downward_files(src.get("items") or [], self.pod, int(src.get("defaultMode", 0o644)))
        if "projected" in volume:
            return self._projected(volume["projected"])
        kinds = sorted(k for k in volume if k != "name")
        raise VolumeNotReady(f"volume {volume['name']!r}: unsupported volume type {kinds}")

    def _projected(self, projected: dict[str, Any]) -> FileSet:
        mode = int(projected.get("defaultMode", 0o644))
        files: FileSet = {}
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                jwt = self._token(sat.get("audience"), int(sat.get("expirationSeconds", 3607)))
                files[sat["path"]] = (jwt.encode(), mode)
            elif "configMap" in source:
                src = source["configMap"]
                files.update(projection_files(src, self._config_map(src.get("name", "")), False, mode))
            elif "secret" in source:
                src = source["secret"]
                files.update(projection_files(src, self.secrets(src.get("name", "")), True, mode))
            elif "downwardAPI" in source:
                files.update(downward_files(source["downwardAPI"].get("items") or [], self.pod, mode))
            else:
                raise VolumeNotReady(f"unsupported projected source {sorted(source)}")
        return files

    def _config_map(self, name: str) -> dict[str, Any] | None:
        """ConfigMap lookup; ``kube-root-ca.crt`` falls back to the cluster CA file before KCM publishes it."""
        obj = self.config_maps(name)
        if obj is None and name == "kube-root-ca.crt":
            return {"data": {"ca.crt": self.ca_crt.decode()}}
        return obj
