"""StreamApp runtime: Kafka-Streams-style applications in Python.

The public API is ``__all__``; every other module is internal.
"""

from typing import TYPE_CHECKING, Any

from streamapp.config import StreamsConfig
from streamapp.dsl import KGroupedStream, KGroupedTable, KStream, KTable, StreamsBuilder
from streamapp.processor import Processor, ProcessorContext, PunctuationType, Record
from streamapp.topology import TopologyDescription, TopologyError

if TYPE_CHECKING:
    from streamapp.app import KafkaStreams

__all__ = [
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KafkaStreams",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "StreamsBuilder",
    "StreamsConfig",
    "TopologyDescription",
    "TopologyError",
]


def __getattr__(name: str) -> Any:
    # KafkaStreams pulls in confluent-kafka and RocksDB; import it only when asked for, so that readers of
    # topology descriptions (the operator, ``streamapp topology ...``) do not load the processing runtime.
    if name == "KafkaStreams":
        from streamapp.app import KafkaStreams

        return KafkaStreams
    raise AttributeError(f"module 'streamapp' has no attribute '{name}'")
