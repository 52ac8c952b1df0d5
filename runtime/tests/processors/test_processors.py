"""The runtime meaning of each core node type (coverage of every node type: ``topology/test_node_families``)."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import processors
from streamapp.processors import PROCESSOR_BUILDERS, BuildContext, build_task_processors
from streamapp.processors.aggregate import CountProcessor
from streamapp.processors.base import Change, ProcessorMetrics
from streamapp.processors.stateless import FilterProcessor, MapValuesProcessor, SelectKeyProcessor, ToStreamProcessor
from streamapp.serdes import serde_for
from streamapp.state.memory import InMemoryKeyValueStore
from streamapp.state.stores import TypedKeyValueStore
from streamapp.topology import TopologyDescription, TopologyError


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, Any, int]] = []

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.records.append((key, value, timestamp))


def test_filter_forwards_only_records_matching_the_predicate() -> None:
    out = Collect()
    p = FilterProcessor(lambda k, v: v > 1, [out])
    for v in (1, 2, 3):
        p.process("k", v, 7)
    assert out.records == [("k", 2, 7), ("k", 3, 7)]


def test_map_values_keeps_the_key() -> None:
    out = Collect()
    MapValuesProcessor(lambda v: v * 10, [out]).process("k", 2, 1)
    assert out.records == [("k", 20, 1)]


def test_select_key_keeps_the_value() -> None:
    out = Collect()
    SelectKeyProcessor(lambda k, v: v["c"], [out]).process("old", {"c": "UA"}, 1)
    assert out.records == [("UA", {"c": "UA"}, 1)]


def test_count_emits_the_change_of_the_count_per_key_and_skips_null_keys_and_values() -> None:
    out = Collect()
    metrics = ProcessorMetrics()
    store = TypedKeyValueStore(InMemoryStoreView(), serde_for("string"), serde_for("long"))
    p = CountProcessor(store, [out], metrics)
    for key, value in [("a", 1), ("b", 1), ("a", 1), (None, 1), ("a", None)]:
        p.process(key, value, 5)
    assert out.records == [("a", Change(1, None), 5), ("b", Change(1, None), 5), ("a", Change(2, 1), 5)]
    assert store.get("a") == 2
    assert metrics.dropped_records == 2


class InMemoryStoreView:
    """A writable bytes store (the changelogging layer is not under test here)."""

    name = "s"

    def __init__(self) -> None:
        self._inner = InMemoryKeyValueStore("s")

    def get(self, key: bytes) -> bytes | None:
        return self._inner.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._inner.write({key: value}, None)


TOPOLOGY = TopologyDescription.from_dict(
    {
        "nodes": [
            {"name": "in", "type": "source", "topics": ["in"], "keySerde": "string", "valueSerde": "json"},
            {"name": "up", "type": "map_values", "input": "in", "mapper": "builtins:str"},
            {"name": "re", "type": "repartition", "input": "up", "keySerde": "string", "valueSerde": "string"},
            {
                "name": "out",
                "type": "sink",
                "input": "re",
                "topic": "out",
                "keySerde": "string",
                "valueSerde": "string",
            },
        ]
    }
)


def no_store(name: str) -> TypedKeyValueStore:
    raise KeyError(name)


def context(sent: list[tuple[str, bytes | None, bytes | None, int]], sources: set[str]) -> BuildContext:
    return BuildContext(
        application_id="app",
        partition=0,
        source_nodes=sources,
        functions=TOPOLOGY.resolve_functions(),
        topic_of=lambda node: TOPOLOGY.repartition_topic("app", node),
        store=no_store,
        send=lambda topic, key, value, ts: sent.append((topic, key, value, ts)),
    )


def test_repartition_is_the_sink_of_the_upstream_subtopology() -> None:
    upstream, _ = TOPOLOGY.subtopologies()
    sent: list[tuple[str, bytes | None, bytes | None, int]] = []
    sources = build_task_processors(TOPOLOGY, upstream, context(sent, processors.source_node_names(TOPOLOGY, upstream)))
    assert list(sources) == ["in"]
    sources["in"].process(b"k", b"42", 9)
    assert sent == [("app-re-repartition", b"k", b"42", 9)]


def test_repartition_is_the_source_of_the_downstream_subtopology() -> None:
    _, downstream = TOPOLOGY.subtopologies()
    sent: list[tuple[str, bytes | None, bytes | None, int]] = []
    names = processors.source_node_names(TOPOLOGY, downstream)
    assert names == {"re"}
    sources = build_task_processors(TOPOLOGY, downstream, context(sent, names))
    assert list(sources) == ["app-re-repartition"]
    sources["app-re-repartition"].process(b"k", b"v", 3)
    assert sent == [("out", b"k", b"v", 3)]


def test_a_node_type_without_runtime_processor_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(PROCESSOR_BUILDERS, "map_values")
    upstream, _ = TOPOLOGY.subtopologies()
    with pytest.raises(TopologyError, match="node 'up': the runtime has no processor for type 'map_values'"):
        build_task_processors(TOPOLOGY, upstream, context([], processors.source_node_names(TOPOLOGY, upstream)))


def test_to_stream_forwards_the_new_value_of_each_change_and_a_tombstone_for_a_delete() -> None:
    out = Collect()
    p = ToStreamProcessor([out])
    p.process("a", Change(2, 1), 4)
    p.process("a", Change(None, 2), 5)
    assert out.records == [("a", 2, 4), ("a", None, 5)]


MERGE = TopologyDescription.from_dict(
    {
        "nodes": [
            {"name": "a", "type": "source", "topics": ["a"], "keySerde": "string", "valueSerde": "string"},
            {"name": "b", "type": "source", "topics": ["b"], "keySerde": "string", "valueSerde": "string"},
            {"name": "both", "type": "merge", "inputs": ["a", "b"]},
            {
                "name": "out",
                "type": "sink",
                "input": "both",
                "topic": "out",
                "keySerde": "string",
                "valueSerde": "string",
            },
        ]
    }
)


def test_merge_forwards_the_records_of_every_input_once() -> None:
    (sub,) = MERGE.subtopologies()
    sent: list[tuple[str, bytes | None, bytes | None, int]] = []
    ctx = BuildContext(
        application_id="app",
        partition=0,
        source_nodes=processors.source_node_names(MERGE, sub),
        functions={},
        topic_of=lambda node: node,
        store=no_store,
        send=lambda topic, key, value, ts: sent.append((topic, key, value, ts)),
    )
    sources = build_task_processors(MERGE, sub, ctx)
    sources["a"].process(b"k1", b"x", 1)
    sources["b"].process(b"k2", b"y", 2)
    assert sent == [("out", b"k1", b"x", 1), ("out", b"k2", b"y", 2)]
