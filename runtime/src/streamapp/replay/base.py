"""How the replay runs each node type: the family tables of ``streamapp.replay.<family>`` (ADR 0005).

A node type is either *in task*: its records go through the runtime's own processor inside the replay task
(``streamapp.replay.tasks``; parity by construction), or *unsupported*: ``ReplayPlan.check`` refuses a topology
that has it, naming the node, before any Spark job starts. A family module may later move a node type to a
Spark-native operator where that gives identical results; the table is where that choice is written down.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from streamapp.topology import FAMILIES, NodeBase

__all__ = ["FamilyTranslations", "Translation"]


@dataclass(frozen=True)
class Translation:
    """How the replay runs one node type: ``how`` is ``"in_task"`` or ``"unsupported"`` (then ``reason`` says why)."""

    node_type: str
    how: Literal["in_task", "unsupported"]
    reason: str = ""


class FamilyTranslations(Mapping[str, Translation]):
    """The translations of one node family, by node type; node classes of another family are an error."""

    def __init__(self, family: str) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown node family '{family}'; families: {', '.join(FAMILIES)}")
        self.family = family
        self._table: dict[str, Translation] = {}

    def in_task(self, *node_classes: type[NodeBase]) -> FamilyTranslations:
        """These node types run through the runtime's processors inside the replay task."""
        for cls in node_classes:
            self._register(Translation(self._type_of(cls), "in_task"))
        return self

    def unsupported(self, node_class: type[NodeBase], reason: str) -> FamilyTranslations:
        """The replay refuses this node type, for ``reason`` (shown in the error and docs/replay.md)."""
        self._register(Translation(self._type_of(node_class), "unsupported", reason))
        return self

    def _type_of(self, cls: type[NodeBase]) -> str:
        if cls.type_name is None or cls.family != self.family:
            raise TypeError(f"{cls.__name__} is not a node type of family '{self.family}'")
        return cls.type_name

    def _register(self, translation: Translation) -> None:
        if translation.node_type in self._table:
            raise TypeError(f"node type '{translation.node_type}' has two replay translations")
        self._table[translation.node_type] = translation

    def __getitem__(self, node_type: str) -> Translation:
        return self._table[node_type]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)
