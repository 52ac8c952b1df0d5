"""Container environment: resolve ``env``/``envFrom`` and expand ``$(VAR)`` references as the kubelet does.

Pure functions. Lookups of ConfigMaps and Secrets are passed in as callables so that tests need no API
server. Expansion follows the kubelet's forked ``expansion.Expand``: ``$(NAME)`` is replaced by the
variable's value when it is defined, kept verbatim otherwise; ``$$`` is an escaped ``$``; an unclosed
``$(`` is kept as is.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ObjectLookup = Callable[[str], dict[str, Any] | None]
"""(name) -> the ConfigMap/Secret object as a dict, or None when it does not exist."""


class EnvResolutionError(Exception):
    """A required ConfigMap/Secret (or key) is missing; the kubelet reports CreateContainerConfigError."""


@dataclass(frozen=True)
class PodFacts:
    """The downward-API facts of a pod that ``fieldRef`` may read."""

    name: str
    namespace: str
    uid: str
    node_name: str
    pod_ip: str
    host_ip: str
    service_account: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    def field(self, path: str) -> str:
        """Value of a downward-API field path such as ``metadata.name`` or ``metadata.labels['app']``."""
        simple = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "metadata.uid": self.uid,
            "spec.nodeName": self.node_name,
            "spec.serviceAccountName": self.service_account,
            "status.podIP": self.pod_ip,
            "status.podIPs": self.pod_ip,
            "status.hostIP": self.host_ip,
            "status.hostIPs": self.host_ip,
        }
        if path in simple:
            return simple[path]
        for prefix, source in (("metadata.labels", self.labels), ("metadata.annotations", self.annotations)):
            if path.startswith(prefix + "['") and path.endswith("']"):
                return source.get(path[len(prefix) + 2 : -2], "")
        raise EnvResolutionError(f"unsupported fieldRef fieldPath {path!r}")


def expand(text: str, variables: Mapping[str, str]) -> str:
    """Expand ``$(NAME)`` references in ``text`` with ``variables`` (kubelet semantics, see module doc)."""
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            advance = 1
            if nxt == "$":
                out.append("$")
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close == -1:
                    out.append("$(")
                else:
                    name = text[cursor + 2 : close]
                    out.append(variables.get(name, f"$({name})"))
                    advance = close - cursor
            else:
                out.append("$" + nxt)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def _object_data(obj: dict[str, Any], is_secret: bool) -> dict[str, str]:
    """Key -> text value of a ConfigMap (data + binaryData) or Secret (base64 data + stringData)."""
    data: dict[str, str] = {}
    if is_secret:
        for key, b64 in (obj.get("data") or {}).items():
            data[key] = base64.b64decode(b64).decode("utf-8", errors="replace")
        data.update(obj.get("stringData") or {})
    else:
        data.update(obj.get("data") or {})
        for key, b64 in (obj.get("binaryData") or {}).items():
            data[key] = base64.b64decode(b64).decode("utf-8", errors="replace")
    return data


def _key_ref(ref: dict[str, Any], lookup: ObjectLookup, kind: str) -> str | None:
    """Value of a configMapKeyRef/secretKeyRef; None when optional and missing."""
    obj = lookup(ref.get("name", ""))
    optional = bool(ref.get("optional", False))
    if obj is None:
        if optional:
            return None
        raise EnvResolutionError(f"{kind} {ref.get('name')!r} not found")
    data = _object_data(obj, is_secret=(kind == "secret"))
    if ref["key"] not in data:
        if optional:
            return None
        raise EnvResolutionError(f"key {ref['key']!r} not found in {kind} {ref.get('name')!r}")
    return data[ref["key"]]


def _resource_field(ref: dict[str, Any], container: dict[str, Any]) -> str:
    """Value of a resourceFieldRef (limits/requests); "0" when unset. Divisor is ignored (kept simple)."""
    resource = str(ref.get("resource", ""))
    section, _, name = resource.partition(".")
    value = ((container.get("resources") or {}).get(section) or {}).get(name)
    return str(value) if value is not None else "0"


def resolve_env(
    container: dict[str, Any],
    pod: PodFacts,
    config_maps: ObjectLookup,
    secrets: ObjectLookup,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of one container: ``base`` < ``envFrom`` < ``env`` (later wins), values expanded.

    ``base`` holds agent-provided variables (PATH, KUBERNETES_SERVICE_HOST, ...). Each ``env`` value may
    reference variables defined before it (and ``base``), as in Kubernetes.
    Raises EnvResolutionError for a missing non-optional ConfigMap/Secret/key.
    """
    env: dict[str, str] = dict(base or {})
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, lookup in (("configMap", config_maps), ("secret", secrets)):
            ref = source.get(f"{kind}Ref")
            if ref is None:
                continue
            obj = lookup(ref.get("name", ""))
            if obj is None:
                if ref.get("optional"):
                    continue
                raise EnvResolutionError(f"{kind} {ref.get('name')!r} not found")
            for key, value in _object_data(obj, is_secret=(kind == "secret")).items():
                env[prefix + key] = value
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(var.get("value", ""), env)
            continue
        source = var["valueFrom"]
        resolved: str | None
        if "fieldRef" in source:
            resolved = pod.field(source["fieldRef"]["fieldPath"])
        elif "configMapKeyRef" in source:
            resolved = _key_ref(source["configMapKeyRef"], config_maps, "configMap")
        elif "secretKeyRef" in source:
            resolved = _key_ref(source["secretKeyRef"], secrets, "secret")
        elif "resourceFieldRef" in source:
            resolved = _resource_field(source["resourceFieldRef"], container)
        else:
            raise EnvResolutionError(f"env {name!r}: unsupported valueFrom {sorted(source)}")
        if resolved is not None:
            env[name] = resolved
    return env


def container_argv(
    container: dict[str, Any],
    env: Mapping[str, str],
    image_entrypoint: Sequence[str] = (),
    image_cmd: Sequence[str] = (),
) -> list[str]:
    """The process argv: ``command`` + ``args`` expanded with ``env``; image defaults fill what is unset.

    As in Kubernetes: a set ``command`` replaces the image ENTRYPOINT and drops its CMD; ``args`` alone
    replaces only the CMD. The image defaults are empty in venv mode (no image is read there).
    """
    command = [expand(c, env) for c in container.get("command") or []]
    args = [expand(a, env) for a in container.get("args") or []]
    if command:
        return command + args
    return list(image_entrypoint) + (args if args else list(image_cmd))
