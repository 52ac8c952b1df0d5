"""The pure parts of ``streamapp topics``: which topics ``create`` makes, which serdes ``tail`` decodes a topic
with, and the one line it prints per record."""

from __future__ import annotations

import pytest
from streamapp.commands.topics import record_line, topic_serdes, topics_to_create
from streamapp.kafka.admin import TopicSpec
from streamapp.kafka.types import ConsumerRecord
from streamapp.serdes import serde_for
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.windowed import Windowed

DESCRIPTION = TopologyDescription.from_dict(
    {
        "nodes": [
            {"name": "in", "type": "source", "topics": ["loop", "raw"], "keySerde": "string", "valueSerde": "json"},
            {
                "name": "users",
                "type": "global_table",
                "topic": "users",
                "store": "users-store",
                "keySerde": "long",
                "valueSerde": "string",
            },
            {"name": "out", "type": "sink", "input": "in", "topic": "loop", "keySerde": "string", "valueSerde": "long"},
        ],
        "stores": [{"name": "users-store", "type": "key_value", "keySerde": "long", "valueSerde": "string"}],
    }
)


def test_tail_takes_the_sink_serdes_then_the_source_or_global_table_ones() -> None:
    assert topic_serdes(DESCRIPTION, "loop") == ("string", "long")  # written by the sink, read by the source
    assert topic_serdes(DESCRIPTION, "raw") == ("string", "json")
    assert topic_serdes(DESCRIPTION, "users") == ("long", "string")
    with pytest.raises(TopologyError, match="topic nope is not a source or sink topic of the topology; its topics: "):
        topic_serdes(DESCRIPTION, "nope")


def test_create_makes_only_the_missing_topics_with_the_settings_asked_for() -> None:
    assert topics_to_create(["a", "b", "c"], {"b": 4}, 3, -1) == [
        TopicSpec("a", 3, {"retention.ms": "-1"}),
        TopicSpec("c", 3, {"retention.ms": "-1"}),
    ]
    assert topics_to_create(["a"], {}, 1, None) == [TopicSpec("a", 1, {})]


def test_a_record_line_shows_json_windowed_keys_nulls_and_raw_bytes() -> None:
    windowed = serde_for("windowed:string:60000")
    record = ConsumerRecord("t", 2, 7, windowed.serialize(Windowed("a b", 0, 60_000)), None, 1_000)

    assert record_line(record, windowed, serde_for("json")) == (
        'key=["a b"@0/60000] value=null timestamp=1000 partition=2 offset=7'
    )
    raw = ConsumerRecord("t", 0, 0, b"\x00k", b'{"x": [1, "y"]}', 5)
    assert record_line(raw, serde_for("bytes"), serde_for("json")) == (
        'key=b\'\\x00k\' value={"x": [1, "y"]} timestamp=5 partition=0 offset=0'
    )
