"""StreamApp runtime: Kafka-Streams-style applications in Python.

The public API is ``__all__``; every other module is internal.
"""

from typing import TYPE_CHECKING, Any

from streamapp.config import StreamsConfig
from streamapp.dsl import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError

if TYPE_CHECKING:
    from streamapp.app import KafkaStreams

__all__ = [
    "KafkaStreams",
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
