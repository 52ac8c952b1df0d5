"""KStream node types beyond the walking skeleton's set: merge, and the record-at-a-time operators.

Parameters are camelCase in documents; function references are ``"module:qualname"`` strings. Each class
names the Kafka Streams processor whose behaviour it follows.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from streamapp.topology.node_base import NodeBase

__all__ = ["MergeNode"]


class MergeNode(NodeBase):
    """Forwards the records of every input stream unchanged (Kafka's ``KStream.merge``, ``KStreamPassThrough``).

    ``inputs`` lists at least two streams, in order. No ordering across inputs is guaranteed beyond each
    input's own order. The merged stream counts as re-keyed when any input is (a grouping repartitions).
    A sub-topology with a merge must have co-partitioned sources (all its source topics have one partition
    count): every task reads partition ``p`` of each of them.
    """

    type: Literal["merge"] = "merge"
    inputs_: list[str] = Field(alias="inputs", min_length=2)

    def inputs(self) -> list[str]:
        return list(self.inputs_)
