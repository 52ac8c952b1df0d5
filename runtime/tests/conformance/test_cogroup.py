"""Cogroup (KIP-150) on the three engines: several grouped streams folded into one aggregate per key, in one store.

Kafka's ``CogroupedKStreamImpl`` / ``CogroupedStreamAggregateBuilder``: one ``KStreamAggregate`` per grouped stream,
each with its own aggregator over the shared store and initializer, and a ``KTablePassThrough`` that is the table.
"""

from __future__ import annotations

from streamapp import KTable, StreamsBuilder
from streamapp.dsl.windows import SessionWindows, TimeWindows
from streamapp.windowed import Windowed

from conformance import cogroup_functions as fn
from conformance.harness import Engine, final_values

SECOND = 1_000
KAFKA_DEFAULT_CACHE = {"statestore.cache.max.bytes": 10 * 1024 * 1024}
"""Kafka's default record cache: on the broker a key's updates merge between commits (Kafka's
``CachingKeyValueStore`` under the cogroup's store); the driver commits after every record. Final tables agree."""


def written(table: KTable, topic: str) -> None:
    """``table``'s updates written to ``topic``."""
    table.to_stream(name=f"{topic}-changes").to(topic, name=f"{topic}-out")


def activity_per_user() -> StreamsBuilder:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde="string", value_serde="string", name="clicks").group_by_key()
    purchases = builder.stream("purchases", key_serde="string", value_serde="json", name="purchases").group_by_key()
    cogrouped = clicks.cogroup(fn.count_click).cogroup(purchases, fn.add_spent)
    written(cogrouped.aggregate(fn.no_activity, name="activity", store="activity-store"), "activity")
    return builder


def test_cogroup_folds_each_grouped_streams_records_with_its_own_aggregator_into_one_table(engine: Engine) -> None:
    """Kafka's ``CogroupedKStreamImpl.aggregate``: each record is folded by its own stream's aggregator
    (``KStreamAggregate``) into the key's one aggregate, from the initializer for a new key; every update is forwarded
    through the ``KTablePassThrough`` at ``max(record, aggregate)`` timestamp; a null value is dropped."""
    inputs = [
        ("clicks", "alice", "home", 1 * SECOND),
        ("purchases", "alice", {"amount": 5}, 2 * SECOND),
        ("clicks", "bob", "cart", 3 * SECOND),
        ("purchases", "bob", None, 3500),  # null value: dropped, as KStreamAggregate drops it
        ("purchases", "alice", {"amount": 7}, 4 * SECOND),
        ("clicks", "alice", "pay", 5 * SECOND),
    ]
    out = engine.run(activity_per_user(), inputs, ["activity"], one_at_a_time=True, compare=True)
    assert out["activity"] == [
        ("alice", {"clicks": 1, "spent": 0}, 1 * SECOND),
        ("alice", {"clicks": 1, "spent": 5}, 2 * SECOND),
        ("bob", {"clicks": 1, "spent": 0}, 3 * SECOND),
        ("alice", {"clicks": 1, "spent": 12}, 4 * SECOND),
        ("alice", {"clicks": 2, "spent": 12}, 5 * SECOND),
    ]


def test_cogroup_repartitions_a_rekeyed_grouped_stream_behind_the_default_record_cache(engine: Engine) -> None:
    """Kafka's ``CogroupedStreamAggregateBuilder.processRepartitions``: a grouped stream whose key changed is
    repartitioned through its grouping's topic (``orders-by-user-repartition``) before its ``KStreamAggregate``; with
    Kafka's default record cache the broker forwards a key's updates when the cache flushes, and the final table is
    the per-record run's."""
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde="string", value_serde="json", name="orders").group_by(
        fn.user_of, name="orders-by-user", key_serde="string"
    )
    refunds = builder.stream("refunds", key_serde="string", value_serde="json", name="refunds").group_by_key()
    written(
        orders.cogroup(fn.add_amount)
        .cogroup(refunds, fn.subtract_amount)
        .aggregate(fn.zero, value_serde="long", name="balance"),
        "balances",
    )
    inputs = [
        ("orders", "o1", {"user": "alice", "amount": 10}, 1 * SECOND),
        ("orders", "o2", {"user": "bob", "amount": 4}, 2 * SECOND),
        ("refunds", "alice", {"amount": 3}, 3 * SECOND),
        ("orders", "o3", {"user": "alice", "amount": 6}, 4 * SECOND),
        ("refunds", "carol", {"amount": 1}, 5 * SECOND),
    ]
    out = engine.run(
        builder,
        inputs,
        ["balances", "{application_id}-orders-by-user-repartition"],
        KAFKA_DEFAULT_CACHE,
        one_at_a_time=True,
        compare="final",
    )
    assert final_values(out["balances"]) == {"alice": 13, "bob": 4, "carol": -1}
    assert sorted(key for key, _, _ in out["{application_id}-orders-by-user-repartition"]) == ["alice", "alice", "bob"]


def clicks_and_purchases_windowed(windows: TimeWindows | SessionWindows) -> StreamsBuilder:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks", key_serde="string", value_serde="string", name="clicks").group_by_key()
    purchases = builder.stream("purchases", key_serde="string", value_serde="json", name="purchases").group_by_key()
    windowed = clicks.cogroup(fn.count_click).cogroup(purchases, fn.add_spent).windowed_by(windows)
    merger = fn.merge_activity if isinstance(windows, SessionWindows) else None
    written(windowed.aggregate(fn.no_activity, merger, name="sessions"), "activity")
    return builder


def test_a_time_windowed_cogroup_keeps_a_stream_time_per_grouped_stream(engine: Engine) -> None:
    """Kafka's ``TimeWindowedCogroupedKStreamImpl``: one ``KStreamWindowAggregate`` per grouped stream over the shared
    window store, each with its own ``observedStreamTime``: a purchase at 7 s still updates ``[0 s, 10 s)`` after a
    click at 12 s (the purchases' stream time is 3 s), a click at 8 s is late for the clicks' (12 s, no grace)."""
    inputs = [
        ("clicks", "alice", "a", 1 * SECOND),
        ("purchases", "alice", {"amount": 5}, 3 * SECOND),
        ("clicks", "alice", "b", 12 * SECOND),
        ("purchases", "alice", {"amount": 2}, 7 * SECOND),
        ("clicks", "alice", "c", 8 * SECOND),  # late for the clicks' aggregation: dropped
    ]
    topology = clicks_and_purchases_windowed(TimeWindows.of_size_with_no_grace(10 * SECOND))
    out = engine.run(topology, inputs, ["activity"], one_at_a_time=True, compare=True)
    first, second = Windowed("alice", 0, 10 * SECOND), Windowed("alice", 10 * SECOND, 20 * SECOND)
    assert out["activity"] == [
        (first, {"clicks": 1, "spent": 0}, 1 * SECOND),
        (first, {"clicks": 1, "spent": 5}, 3 * SECOND),
        (second, {"clicks": 1, "spent": 0}, 12 * SECOND),
        (first, {"clicks": 1, "spent": 7}, 7 * SECOND),
    ]


def test_a_session_windowed_cogroup_merges_sessions_across_grouped_streams(engine: Engine) -> None:
    """Kafka's ``SessionWindowedCogroupedKStreamImpl``: one ``KStreamSessionWindowAggregate`` per grouped stream over
    the shared session store and merger; a record of either stream merges the sessions it bridges, whoever made them,
    replaced sessions forwarded as tombstones."""
    inputs = [
        ("clicks", "alice", "a", 1 * SECOND),
        ("purchases", "alice", {"amount": 5}, 3 * SECOND),
        ("purchases", "alice", {"amount": 2}, 12 * SECOND),
        ("clicks", "alice", "b", 14 * SECOND),
        ("clicks", "alice", "c", 8 * SECOND),  # bridges [1 s, 3 s] and [12 s, 14 s] (gap 5 s)
    ]
    topology = clicks_and_purchases_windowed(SessionWindows.of_inactivity_gap_and_grace(5 * SECOND, 30 * SECOND))
    out = engine.run(topology, inputs, ["activity"], one_at_a_time=True, compare=True)
    assert out["activity"] == [
        (Windowed("alice", 1 * SECOND, 1 * SECOND), {"clicks": 1, "spent": 0}, 1 * SECOND),
        (Windowed("alice", 1 * SECOND, 1 * SECOND), None, 1 * SECOND),
        (Windowed("alice", 1 * SECOND, 3 * SECOND), {"clicks": 1, "spent": 5}, 3 * SECOND),
        (Windowed("alice", 12 * SECOND, 12 * SECOND), {"clicks": 0, "spent": 2}, 12 * SECOND),
        (Windowed("alice", 12 * SECOND, 12 * SECOND), None, 12 * SECOND),
        (Windowed("alice", 12 * SECOND, 14 * SECOND), {"clicks": 1, "spent": 2}, 14 * SECOND),
        (Windowed("alice", 1 * SECOND, 3 * SECOND), None, 3 * SECOND),
        (Windowed("alice", 12 * SECOND, 14 * SECOND), None, 14 * SECOND),
        (Windowed("alice", 1 * SECOND, 14 * SECOND), {"clicks": 3, "spent": 7}, 14 * SECOND),
    ]
