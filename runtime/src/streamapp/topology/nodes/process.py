"""The ``process`` family: the Processor API node (Kafka's ``KStream.process``), user code with stores.

==============  ============================================  ==============================================
type            parameters                                    semantics (Kafka Streams class)
==============  ============================================  ==============================================
process         input, processor ``module:Class``, stores     a ``streamapp.processor.Processor`` per task
                                                              (KStream.process)
process_values  input, processor ``module:Class``, stores     a ``streamapp.processor.FixedKeyProcessor`` per
                                                              task: keys never change (KStream.processValues,
                                                              KIP-820)
==============  ============================================  ==============================================
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from streamapp.topology.nodes.base import FunctionRef, NodeBase

__all__ = ["ProcessNode", "ProcessValuesNode"]


class ProcessNode(NodeBase):
    """A Processor API node: an instance of ``processor`` (a ``streamapp.processor.Processor`` subclass,
    ``"module:Class"``) per task, with access to the state stores named in ``stores`` (Kafka's
    ``KStream.process``). It may forward any key, so its output counts as re-keyed."""

    type: Literal["process"] = "process"
    input: str
    processor: FunctionRef
    stores_: list[str] = Field(default_factory=list, alias="stores")
    changes_key: ClassVar[bool] = True

    def stores(self) -> list[str]:
        return list(self.stores_)


class ProcessValuesNode(ProcessNode):
    """A Processor API node whose processor keeps keys: an instance of ``processor`` (a
    ``streamapp.processor.FixedKeyProcessor`` subclass, ``"module:Class"``) per task, with the state stores named in
    ``stores`` (Kafka's ``KStream.processValues``, KIP-820). It forwards ``FixedKeyRecord`` objects only, so its
    output keeps its input's partitioning: no repartition follows it."""

    type: Literal["process_values"] = "process_values"  # type: ignore[assignment]
    changes_key: ClassVar[bool] = False
