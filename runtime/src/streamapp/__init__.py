"""StreamApp runtime: Kafka-Streams-style applications in Python.

The public API is ``__all__``; every other module is internal.
"""

from streamapp.topology import TopologyDescription, TopologyError

__all__ = [
    "TopologyDescription",
    "TopologyError",
]
