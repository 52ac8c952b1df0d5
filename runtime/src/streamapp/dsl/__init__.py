"""The Kafka-Streams-style DSL: StreamsBuilder and the KStream / KGroupedStream / KTable handles."""

from streamapp.dsl.branched import BranchedKStream
from streamapp.dsl.builder import StreamsBuilder
from streamapp.dsl.grouped import KGroupedTable
from streamapp.dsl.joins import GlobalKTable
from streamapp.dsl.streams import KGroupedStream, KStream, KTable

__all__ = ["BranchedKStream", "GlobalKTable", "KGroupedStream", "KGroupedTable", "KStream", "KTable", "StreamsBuilder"]
