"""TaskId: ``<subtopology>_<partition>``, Kafka Streams' ``org.apache.kafka.streams.processor.TaskId``."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TaskId"]


class TaskId(NamedTuple):
    """``<subtopology>_<partition>``, Kafka Streams' TaskId: the sub-topology applied to one partition of its inputs."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """The TaskId of ``"<subtopology>_<partition>"``; raises ValueError when a part is not an integer."""
        subtopology, _, partition = text.partition("_")
        return cls(int(subtopology), int(partition))
