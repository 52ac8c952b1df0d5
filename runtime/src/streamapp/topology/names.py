"""Legal names for nodes, stores and topics.

Node and store names end up in Kafka topic names (``<applicationId>-<name>-repartition``,
``<applicationId>-<store>-changelog``) and in state folder names, so they are restricted to Kafka's
legal topic characters (``[a-zA-Z0-9._-]``, Kafka's ``Topic.validate``).
"""

from __future__ import annotations

import re

from streamapp.topology.errors import TopologyError

LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 200
"""Kafka's topic limit is 249 characters; 200 leaves room for the application id and the suffix."""


def check_name(kind: str, name: str) -> None:
    """Raise TopologyError unless ``name`` is a legal node, store or topic name.

    ``kind`` is the word used in the message ("node", "store", "topic").
    """
    if not name:
        raise TopologyError(f"{kind} name must not be empty")
    if not LEGAL_NAME.match(name):
        raise TopologyError(f"{kind} '{name}': name may only contain ASCII letters, digits, '.', '_' and '-'")
    if len(name) > MAX_NAME_LENGTH:
        raise TopologyError(f"{kind} '{name}': name is longer than {MAX_NAME_LENGTH} characters")
