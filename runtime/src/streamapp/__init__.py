"""StreamApp runtime: Kafka-Streams-style applications in Python.

The public API is ``__all__``; every other module is internal.
"""

from streamapp.dsl import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError

# runtime-processing adds here: KafkaStreams (streamapp.app), StreamsConfig (streamapp.config).

__all__ = [
    "StreamsBuilder",
    "TopologyDescription",
    "TopologyError",
]
