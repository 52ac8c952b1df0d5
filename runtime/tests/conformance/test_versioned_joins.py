"""Stream-table joins against versioned tables (KIP-889 / KIP-914) and their grace period (KIP-923) on the three
engines. Expected results follow Kafka Streams' ``KStreamKTableJoinProcessor`` reading a ``RocksDBVersionedStore``
as of each stream record's timestamp. Inputs are fed one at a time, in the order listed; the orders start with a
record stamped after every table update, so the replay's merge of the two topics by timestamp (docs/replay.md)
processes the records in that order too."""

from __future__ import annotations

from streamapp import StreamsBuilder

from conformance.harness import Engine
from conformance.join_functions import pair

S, J = "string", "json"


def orders_with_rates(join: str, history_retention_ms: int, grace_ms: int | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, name="rates", history_retention_ms=history_retention_ms)
    orders = builder.stream("orders", key_serde=S, value_serde=J, name="orders")
    method = orders.join if join == "inner" else orders.left_join
    method(rates, pair, name="priced", grace_ms=grace_ms).to("priced-orders", name="out")
    return builder


def test_an_out_of_order_table_update_joins_the_stream_records_of_its_time(engine: Engine) -> None:
    """Kafka's ``KTableSource`` puts an out-of-order update into the ``RocksDBVersionedStore`` (KIP-914) and
    ``KStreamKTableJoinProcessor`` reads ``get(key, record.timestamp())``: an order stamped between two versions
    joins the one valid then, even when it arrived after the newer version."""
    inputs = [
        ("rates", "eur", {"r": 1}, 1_000),
        ("rates", "eur", {"r": 3}, 3_000),
        ("rates", "eur", {"r": 2}, 2_000),  # out of order, within the history retention
        ("orders", "eur", {"o": 0}, 3_100),
        ("orders", "eur", {"o": 1}, 2_500),  # arrives after r3 and r2, stamped between them
        ("orders", "eur", {"o": 2}, 3_500),
        ("orders", "eur", {"o": 3}, 500),  # before the first version: no value as of then
    ]
    out = engine.run(orders_with_rates("inner", 60_000), inputs, ["priced-orders"], one_at_a_time=True)
    assert out["priced-orders"] == [
        ("eur", [{"o": 0}, {"r": 3}], 3_100),
        ("eur", [{"o": 1}, {"r": 2}], 2_500),
        ("eur", [{"o": 2}, {"r": 3}], 3_500),
    ]


def test_a_late_table_update_within_the_grace_period_still_joins(engine: Engine) -> None:
    """KIP-923 (``Joined.withGracePeriod``, Kafka's ``RocksDBTimeOrderedKeyValueBuffer`` in
    ``KStreamKTableJoinProcessor``): a stream record waits until stream time passes its timestamp plus the grace,
    so a table update stamped before it but arriving after it is joined; a record already older than stream time
    minus the grace joins at once."""
    inputs = [
        ("rates", "eur", {"r": 1}, 1_000),
        ("orders", "eur", {"o": 1}, 2_000),  # buffered: stream time 2000, grace 1000
        ("rates", "eur", {"r": 2}, 1_500),  # late update, valid as of 2000
        ("orders", "usd", {"o": 2}, 3_500),  # stream time 3500: evicts o1 (2000 <= 2500); o2 waits
        ("orders", "eur", {"o": 3}, 1_200),  # older than 3500 - 1000: joined at once, as of 1200
    ]
    out = engine.run(orders_with_rates("left", 60_000, grace_ms=1_000), inputs, ["priced-orders"], one_at_a_time=True)
    assert out["priced-orders"] == [("eur", [{"o": 1}, {"r": 2}], 2_000), ("eur", [{"o": 3}, {"r": 1}], 1_200)]


def test_stream_records_older_than_the_history_retention_see_only_the_latest_version(engine: Engine) -> None:
    """``RocksDBVersionedStore.get(key, asOf)`` with ``asOf < observedStreamTime - historyRetention`` answers only
    from the latest version (which never expires); a table update older than that is not put and not forwarded
    (``PUT_RETURN_CODE_NOT_PUT`` in ``KTableSource``)."""
    inputs = [
        ("rates", "eur", {"r": 1}, 1_000),
        ("rates", "eur", {"r": 2}, 5_000),  # table stream time 5000, retention 1000: history before 4000 expired
        ("rates", "eur", {"r": 0}, 3_000),  # older than 5000 - 1000: not put, not forwarded
        ("orders", "eur", {"o": 0}, 5_100),
        ("orders", "eur", {"o": 1}, 2_000),  # expired and older than the latest version: no value
        ("orders", "eur", {"o": 2}, 4_500),  # within the retention: r1, valid 1000..5000
        ("orders", "eur", {"o": 3}, 6_000),
        ("orders", "eur", {"o": 4}, 4_600),
    ]
    out = engine.run(orders_with_rates("left", 1_000), inputs, ["priced-orders"], one_at_a_time=True)
    assert out["priced-orders"] == [
        ("eur", [{"o": 0}, {"r": 2}], 5_100),
        ("eur", [{"o": 1}, None], 2_000),
        ("eur", [{"o": 2}, {"r": 1}], 4_500),
        ("eur", [{"o": 3}, {"r": 2}], 6_000),
        ("eur", [{"o": 4}, {"r": 1}], 4_600),
    ]


def test_a_tombstone_version_leaves_the_key_without_a_value_until_its_next_version(engine: Engine) -> None:
    """A null table value is a tombstone version of the ``RocksDBVersionedStore``: ``get(key, asOf)`` inside it
    returns null, so an inner join drops and a left join nulls the stream records of that time (Kafka's
    ``KStreamKTableJoinProcessor``)."""
    inputs = [
        ("rates", "eur", {"r": 1}, 1_000),
        ("rates", "eur", None, 2_000),
        ("rates", "eur", {"r": 3}, 3_000),
        ("orders", "eur", {"o": 1}, 1_500),
        ("orders", "eur", {"o": 2}, 2_500),
        ("orders", "eur", {"o": 3}, 3_500),
    ]
    out = engine.run(orders_with_rates("left", 60_000), inputs, ["priced-orders"], one_at_a_time=True)
    assert out["priced-orders"] == [
        ("eur", [{"o": 1}, {"r": 1}], 1_500),
        ("eur", [{"o": 2}, None], 2_500),
        ("eur", [{"o": 3}, {"r": 3}], 3_500),
    ]


def test_a_versioned_table_forwards_out_of_order_updates_and_not_expired_ones(engine: Engine) -> None:
    """Kafka's ``KTableSource`` over a versioned store forwards every update it puts, an out-of-order one too (with
    ``isLatest`` false), and nothing for an update older than the history retention (``PUT_RETURN_CODE_NOT_PUT``);
    ``toStream`` passes them on as they come."""
    builder = StreamsBuilder()
    rates = builder.table("rates", key_serde=S, value_serde=J, name="rates", history_retention_ms=1_000)
    rates.to_stream(name="changes").to("rate-changes", name="out")
    inputs = [
        ("rates", "eur", {"r": 1}, 1_000),
        ("rates", "eur", {"r": 3}, 3_000),
        ("rates", "eur", {"r": 2}, 2_000),
        ("rates", "eur", {"r": 0}, 1_999),  # older than 3000 - 1000
        ("rates", "eur", None, 4_000),
    ]
    out = engine.run(builder, inputs, ["rate-changes"], one_at_a_time=True)
    assert out["rate-changes"] == [
        ("eur", {"r": 1}, 1_000),
        ("eur", {"r": 3}, 3_000),
        ("eur", {"r": 2}, 2_000),
        ("eur", None, 4_000),
    ]
