"""The Kafka-Streams-style DSL: StreamsBuilder and the KStream / KGroupedStream / KTable handles."""

from streamapp.dsl.builder import StreamsBuilder
from streamapp.dsl.joins import GlobalKTable
from streamapp.dsl.streams import KGroupedStream, KStream, KTable

__all__ = ["GlobalKTable", "KGroupedStream", "KStream", "KTable", "StreamsBuilder"]
