"""StreamApp runtime: Kafka-Streams-style applications in Python.

The public API is ``__all__``; every other module is internal.
"""

from typing import TYPE_CHECKING, Any

from streamapp.config import StreamsConfig
from streamapp.dsl import KGroupedStream, KGroupedTable, KStream, KTable, StreamsBuilder
from streamapp.dsl.cogrouped import CogroupedKStream
from streamapp.dsl.windows import EmitStrategy, JoinWindows, SessionWindows, SlidingWindows, Suppressed, TimeWindows
from streamapp.processor import Processor, ProcessorContext, PunctuationType, Record
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.windowed import Windowed

if TYPE_CHECKING:
    from streamapp.app import KafkaStreams

__all__ = [
    "CogroupedKStream",
    "EmitStrategy",
    "JoinWindows",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KafkaStreams",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "SessionWindows",
    "SlidingWindows",
    "StreamsBuilder",
    "StreamsConfig",
    "Suppressed",
    "TimeWindows",
    "TopologyDescription",
    "TopologyError",
    "Windowed",
]


def __getattr__(name: str) -> Any:
    # KafkaStreams pulls in confluent-kafka and RocksDB; import it only when asked for, so that readers of
    # topology descriptions (the operator, ``streamapp topology ...``) do not load the processing runtime.
    if name == "KafkaStreams":
        from streamapp.app import KafkaStreams

        return KafkaStreams
    raise AttributeError(f"module 'streamapp' has no attribute '{name}'")
