"""Versioned tables and the grace period of stream-table joins in the topology description (KIP-889/914/923):
document round trip, text description, changelog config, and the checks that refuse what Kafka refuses or what is
not implemented."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import StreamsBuilder
from streamapp.topology import TopologyDescription, TopologyError
from streamapp.topology.internal_topics import changelog_topic_config
from streamapp.topology.render import describe

S, J = "string", "json"
JOINER = "conformance.join_functions:pair"


def versioned_join(grace_ms: int | None = 500) -> TopologyDescription:
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, name="rates", history_retention_ms=60_000)
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    orders.join(rates, JOINER, name="priced", grace_ms=grace_ms).to("out", name="out")
    return builder.build()


def document(**join: Any) -> dict[str, Any]:
    return {
        "nodes": [
            {"name": "rates", "type": "table", "topics": ["rates"], "keySerde": S, "valueSerde": J, "store": "rs"},
            {"name": "orders", "type": "source", "topics": ["orders"], "keySerde": S, "valueSerde": J},
            {
                "name": "priced",
                "type": "stream_table_join",
                "inputs": ["orders", "rates"],
                "joiner": JOINER,
                "store": "js",
                **join,
            },
        ],
        "stores": [
            {"name": "rs", "type": "versioned", "keySerde": S, "valueSerde": J, "historyRetentionMs": 1_000},
            {"name": "js", "type": "versioned", "keySerde": S, "valueSerde": J, "historyRetentionMs": 1_000},
            *([{"name": "buf", "type": "key_value", "keySerde": S, "valueSerde": J}] if "bufferStore" in join else []),
        ],
    }


def test_a_versioned_table_and_a_grace_join_round_trip_through_yaml() -> None:
    description = versioned_join()
    again = TopologyDescription.from_yaml(description.to_yaml())
    assert again == description
    assert again.store("rates-store").type == "versioned"
    assert again.store("rates-store").history_retention_ms == 60_000
    assert again.store("priced-store").history_retention_ms == 60_000
    join = again.node("priced")
    assert (join.grace_ms, join.buffer_store) == (500, "priced-Buffer")  # type: ignore[attr-defined]


def test_the_text_description_names_the_versioned_stores_and_their_history() -> None:
    text = describe(versioned_join(), "app")
    assert "rates-store (versioned, history 60000 ms, string -> json)" in text
    assert "priced-Buffer (key_value, string -> json)" in text


def test_a_versioned_changelog_keeps_versions_for_the_history_retention_plus_a_day() -> None:
    """Kafka's ``VersionedChangelogTopicConfig``: compacted, ``min.compaction.lag.ms`` = history retention + 1 day."""
    spec = versioned_join().store("rates-store")
    assert changelog_topic_config(spec) == {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": str(60_000 + 86_400_000),
    }


def test_a_grace_period_on_a_table_that_is_not_versioned_is_refused_with_kafkas_message() -> None:
    """Kafka's ``KStreamImpl.doStreamTableJoin``: ``KTable must be versioned to use a grace period ...``."""
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, name="rates")
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    with pytest.raises(TopologyError, match="KTable must be versioned to use a grace period in a stream table join"):
        orders.join(rates, JOINER, name="priced", grace_ms=100)
    doc = document(graceMs=100, bufferStore="buf")
    doc["stores"][0] = {"name": "rs", "type": "key_value", "keySerde": S, "valueSerde": J}
    doc["stores"][1] = {"name": "js", "type": "key_value", "keySerde": S, "valueSerde": J}
    with pytest.raises(TopologyError, match="KTable must be versioned"):
        TopologyDescription.from_dict(doc)


def test_a_grace_period_without_its_buffer_store_is_refused() -> None:
    doc = document(graceMs=100, bufferStore="buf")
    del doc["nodes"][2]["bufferStore"]
    doc["stores"].pop()
    with pytest.raises(TopologyError, match="graceMs and bufferStore go together"):
        TopologyDescription.from_dict(doc)


def test_the_join_copy_of_a_versioned_table_must_be_versioned_with_the_same_history() -> None:
    doc = document()
    doc["stores"][1] = {"name": "js", "type": "key_value", "keySerde": S, "valueSerde": J}
    with pytest.raises(TopologyError, match="store 'js' must be a versioned store, not key_value"):
        TopologyDescription.from_dict(doc)
    doc = document()
    doc["stores"][1]["historyRetentionMs"] = 2_000
    with pytest.raises(TopologyError, match="keeps 2000 ms of history but the table's store 'rs' keeps 1000 ms"):
        TopologyDescription.from_dict(doc)


def test_a_versioned_table_feeding_a_table_operation_is_refused_not_run_with_latest_value_semantics() -> None:
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, name="rates", history_retention_ms=1_000)
    rates.filter("conformance.join_functions:pair", name="some").to_stream(name="changes").to("out", name="out")
    with pytest.raises(TopologyError, match="filter node 'some' reads versioned table 'rates'"):
        builder.build()


def test_history_retention_belongs_to_versioned_stores_only() -> None:
    doc = document(graceMs=100, bufferStore="buf")
    doc["stores"][2]["historyRetentionMs"] = 5
    with pytest.raises(TopologyError, match="historyRetentionMs"):
        TopologyDescription.from_dict(doc)


def test_an_upgrade_may_change_history_retention_but_not_make_a_table_versioned() -> None:
    """A versioned store's history retention only bounds reads (Kafka's ``RocksDBVersionedStore``), so changing it
    keeps the state; turning a key-value store into a versioned one changes its format."""
    from streamapp.topology.compatibility import compare

    running = TopologyDescription.from_dict(document())
    longer = document()
    for store in longer["stores"]:
        store["historyRetentionMs"] = 5_000
    report = compare(running, TopologyDescription.from_dict(longer))
    assert report.compatible
    assert {(f.kind, f.name) for f in report.findings} == {
        ("store_retention_changed", "rs"),
        ("store_retention_changed", "js"),
    }
    plain = document()
    for store in plain["stores"]:
        store["type"] = "key_value"
        del store["historyRetentionMs"]
    assert not compare(TopologyDescription.from_dict(plain), running).compatible
