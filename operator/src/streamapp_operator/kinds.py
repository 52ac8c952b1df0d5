"""What the operator's Kinds share: the API group, the spec models' base, owner references and pod security.

Both Kinds (``streamapps``, ``streamreplays``) are ``streamapp.io/v1alpha1`` custom resources whose children
carry a controller owner reference (Kubernetes garbage collection deletes them with their owner) and whose
pods run under the ``restricted`` Pod Security Standard. Pure: nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

GROUP = "streamapp.io"

VERSION = "v1alpha1"

API_VERSION = f"{GROUP}/{VERSION}"
#: The Kinds of the group and their plurals (the resource names of the API paths and of kopf's handlers).
PLURALS = {"StreamApp": "streamapps", "StreamReplay": "streamreplays"}
#: The uid of the StreamReplay that created a new version (on the StreamApp its handover creates): a name can be
#: reused, a uid not.
REPLAY_UID_ANNOTATION = f"{GROUP}/replay-uid"


class SpecModel(BaseModel):
    """Base: camelCase on the wire, snake_case in Python, unknown fields rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


@dataclass(frozen=True)
class Owner:
    """The object (a StreamApp or a StreamReplay, ``kind``) that owns the children: their owner reference and
    naming root."""

    kind: str
    name: str
    namespace: str
    uid: str

    def reference(self) -> dict[str, Any]:
        """ownerReference with ``controller: true``: garbage collection deletes children with their owner."""
        return {
            "apiVersion": API_VERSION,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether ``uid`` is among the object's ownerReferences: the only objects the operator applies over or
    deletes."""
    return any(ref.get("uid") == uid for ref in obj.get("metadata", {}).get("ownerReferences") or [])


#: The user id the pods run as (non-root, as the ``restricted`` Pod Security Standard requires).
RUN_AS_USER = 10001

#: The container's securityContext: what the ``restricted`` Pod Security Standard requires, plus a
#: read-only root file system (the state volume and an emptyDir ``/tmp`` are the only writable paths).
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": RUN_AS_USER,
    "runAsGroup": RUN_AS_USER,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
