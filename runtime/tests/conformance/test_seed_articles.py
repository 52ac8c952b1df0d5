"""The seed articles' examples (/work/shared/seeds/, Chinese), run on both engines.

1. KStream vs KTable (002 "KTable vs. KStream", 001): one topic holds five records for three keys; summing
   the values per key over the KStream gives ``<Jack,4>,<Lily,7>,<Mike,4>``, over the KTable (latest value per
   key) ``<Mike,4>,<Jack,3>,<Lily,5>`` — in that order: the order of each key's last update in the topic. The
   article's figure is not in the text; the five records ``Jack 1, Lily 2, Mike 4, Jack 3, Lily 5`` are the
   only ones that give both results with each key's last update in that order (Jack 4 = 1 + 3, Lily
   7 = 2 + 5, Mike's single record comes before Jack's and Lily's last ones).
2. The tumbling-window late record (002 "窗口", 001): a 5-second tumbling window counts records at 1 s, 3 s
   and 5 s, ``<1-5,3>``; a record at 2 s arriving a second later turns it into ``<1-5,4>`` while the window is
   kept (Kafka Streams: within the grace period) and is dropped once it is not. Kafka's time windows are
   half-open ``[start, end)`` and aligned to the epoch, so the article's window "1-5" is ``[0 s, 5 s)`` and its
   third record is at 4 s here (5 s opens the next window); "a second later" is a record at 6 s moving stream
   time past the window's end before the late record at 2 s arrives.
3. Orders x users x items (002 "Kafka Stream 应用示例"): orders (3 partitions, keyed by user, event time =
   the order's ``ts`` field) left-join users (3 partitions) for the buyer's address, keep orders whose user is
   known, re-partition by item through a 6-partition topic (the article's ``through(...,
   "orderuser-repartition-by-item")``), left-join items (6 partitions) for where the item is made, keep
   orders of items made in the buyer's region, and count per hour how many users bought such an item.
"""

from __future__ import annotations

from typing import Any

from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows
from streamapp.windowed import Windowed

from conformance import seed_functions as fn
from conformance.harness import Engine, final_values

HOUR = 3_600_000


def last_updates_in_order(records: list[tuple[Any, Any, int]]) -> list[tuple[Any, Any]]:
    """Each key's last value, ordered by when that last update came (a compacted topic's order)."""
    final = final_values(records)
    order: list[Any] = []
    for key, _, _ in records:
        if key in order:
            order.remove(key)
        order.append(key)
    return [(key, final[key]) for key in order if key in final]


# -- 1. KStream vs KTable ---------------------------------------------------------------------------

CLICKS = [
    ("clicks", "Jack", 1, 1_000),
    ("clicks", "Lily", 2, 2_000),
    ("clicks", "Mike", 4, 3_000),
    ("clicks", "Jack", 3, 4_000),
    ("clicks", "Lily", 5, 5_000),
]


def stream_sum() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde="string", value_serde="long", name="clicks-stream")
        .group_by_key()
        .reduce(fn.add, store="stream-sums-store", name="stream-sum")
        .to_stream(name="stream-sums-changes")
        .to("stream-sums", name="stream-sums-out")
    )
    return builder


def table_sum() -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.table("clicks", key_serde="string", value_serde="long", store="clicks-table-store", name="clicks-table")
        .group_by(fn.same_key_and_value, name="table-by-key")
        .reduce(fn.add, fn.subtract, store="table-sums-store", name="table-sum")
        .to_stream(name="table-sums-changes")
        .to("table-sums", name="table-sums-out")
    )
    return builder


def test_kstream_sum_adds_every_record_of_a_key(engine: Engine) -> None:
    out = engine.run(stream_sum(), CLICKS, ["stream-sums"], compare=True)

    assert out["stream-sums"] == [
        ("Jack", 1, 1_000),
        ("Lily", 2, 2_000),
        ("Mike", 4, 3_000),
        ("Jack", 4, 4_000),
        ("Lily", 7, 5_000),
    ]
    assert final_values(out["stream-sums"]) == {"Jack": 4, "Lily": 7, "Mike": 4}


def test_ktable_sum_replaces_each_keys_value_with_its_latest(engine: Engine) -> None:
    out = engine.run(table_sum(), CLICKS, ["table-sums"], compare=True)

    # one update per record: a row replaced under the same key goes through the repartition topic as one
    # (new, old) change and the reducer subtracts the old value and adds the new one (Kafka's KIP-904)
    assert out["table-sums"] == [
        ("Jack", 1, 1_000),
        ("Lily", 2, 2_000),
        ("Mike", 4, 3_000),
        ("Jack", 3, 4_000),
        ("Lily", 5, 5_000),
    ]
    assert last_updates_in_order(out["table-sums"]) == [("Mike", 4), ("Jack", 3), ("Lily", 5)]


# -- 2. the tumbling-window late record ------------------------------------------------------------

SECOND = 1_000


def windowed_counts(grace_ms: int) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("readings", key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(5 * SECOND, grace_ms))
        .count(store="counts-per-window-store", name="count-per-window")
        .to_stream(name="window-changes")
        .to("counts-per-window", name="window-counts-out")
    )
    return builder


READINGS = [
    ("readings", "sensor", {"n": 1}, 1 * SECOND),
    ("readings", "sensor", {"n": 2}, 3 * SECOND),
    ("readings", "sensor", {"n": 3}, 4 * SECOND),
    ("readings", "sensor", {"n": 4}, 6 * SECOND),  # "1 second later": stream time passes the window's end
    ("readings", "sensor", {"n": 5}, 2 * SECOND),  # the late record, inside the closed window's range
]


def window(start_s: int) -> Windowed:
    return Windowed("sensor", start_s * SECOND, (start_s + 5) * SECOND)


def test_late_record_within_grace_updates_the_window_count(engine: Engine) -> None:
    out = engine.run(windowed_counts(grace_ms=2 * SECOND), READINGS, ["counts-per-window"], compare=True)

    assert out["counts-per-window"] == [
        (window(0), 1, 1 * SECOND),
        (window(0), 2, 3 * SECOND),
        (window(0), 3, 4 * SECOND),  # <1-5,3>
        (window(5), 1, 6 * SECOND),
        (window(0), 4, 4 * SECOND),  # <1-5,4>: the result is a table, updated in place
    ]


def test_late_record_after_grace_is_dropped(engine: Engine) -> None:
    out = engine.run(windowed_counts(grace_ms=1 * SECOND), READINGS, ["counts-per-window"], compare=True)

    assert out["counts-per-window"] == [
        (window(0), 1, 1 * SECOND),
        (window(0), 2, 3 * SECOND),
        (window(0), 3, 4 * SECOND),
        (window(5), 1, 6 * SECOND),
    ]
    assert final_values(out["counts-per-window"])[window(0)] == 3


# -- 3. orders x users x items ----------------------------------------------------------------------


def same_region_buyers_per_hour() -> StreamsBuilder:
    builder = StreamsBuilder()
    users = builder.table("users", key_serde="string", value_serde="json", store="users-store", name="users")
    items = builder.table("items", key_serde="string", value_serde="json", store="items-store", name="items")
    (
        builder.stream(
            "orders",
            key_serde="string",
            value_serde="json",
            name="orders",
            timestamp_extractor={"type": "field", "field": "ts"},  # the article's OrderTimestampExtractor
        )
        .left_join(users, fn.order_with_user, name="order-user")
        .filter(fn.has_user_address, name="known-users")
        .select_key(fn.item_name, name="by-item")
        .repartition(partitions=6, name="orderuser-repartition-by-item")
        .left_join(items, fn.order_with_item, name="order-user-item")
        .filter(fn.bought_in_own_region, name="same-region")
        .group_by(fn.everyone, name="all-buyers", key_serde="string")
        .windowed_by(TimeWindows.of_size_with_no_grace(HOUR))
        .aggregate(fn.no_users, fn.add_user, store="buyers-per-hour-store", name="buyers-per-hour", value_serde="json")
        .map_values(fn.how_many, name="buyer-count", value_serde="long")
        .to_stream(name="buyer-count-changes")
        .to("same-region-buyers-per-hour", name="buyer-count-out")
    )
    return builder


T0 = 1_700_000_000_000 // HOUR * HOUR  # an hour boundary
USERS = [
    ("users", "Jack", {"gender": "male", "address": "Beijing", "age": 30}, T0 + 1),
    ("users", "Lily", {"gender": "female", "address": "Shanghai", "age": 25}, T0 + 2),
    ("users", "Mike", {"gender": "male", "address": "Beijing", "age": 41}, T0 + 3),
]
ITEMS = [
    ("items", "Duck", {"price": 88.0, "category": "food", "address": "Beijing"}, T0 + 4),
    ("items", "Tea", {"price": 30.0, "category": "drink", "address": "Hangzhou"}, T0 + 5),
    ("items", "Dumplings", {"price": 25.0, "category": "food", "address": "Shanghai"}, T0 + 6),
]


def order(user: str, item: str, minute: int, quantity: int = 1) -> tuple[str, str, dict[str, Any], int]:
    """An order placed ``minute`` minutes after T0, produced (record timestamp) hours later, in hour 5: only
    the timestamp extractor puts it into the right hourly window."""
    ts = T0 + minute * 60_000
    return ("orders", user, {"user": user, "item": item, "ts": ts, "quantity": quantity}, T0 + 5 * HOUR + minute)


ORDERS = [
    order("Jack", "Duck", 10),  # Beijing buys Beijing: counts (hour 0: Jack)
    order("Lily", "Duck", 12),  # Shanghai buys Beijing: no
    order("Lily", "Dumplings", 20),  # Shanghai buys Shanghai: counts (hour 0: Jack, Lily)
    order("Jack", "Duck", 30),  # Jack again: still 2 users in hour 0
    order("Mike", "Tea", 40),  # Beijing buys Hangzhou: no
    order("Nobody", "Duck", 45),  # unknown user: dropped by the filter
    order("Mike", "Duck", 70),  # hour 1: Mike
    order("Jack", "Unknown", 80),  # unknown item: no
]


def test_hourly_count_of_users_buying_items_made_in_their_region(engine: Engine) -> None:
    out = engine.run(
        same_region_buyers_per_hour(),
        USERS + ITEMS + ORDERS,
        ["same-region-buyers-per-hour"],
        partitions={"orders": 3, "users": 3, "items": 6},
        one_at_a_time=True,  # the tables must hold users and items before the orders arrive
        compare=True,
    )

    def hour(h: int) -> Windowed:
        return Windowed("same-region-buyers", T0 + h * HOUR, T0 + (h + 1) * HOUR)

    def at(minute: int) -> int:  # an update carries the latest event time of its window
        return T0 + minute * 60_000

    assert out["same-region-buyers-per-hour"] == [
        (hour(0), 1, at(10)),  # Jack (Beijing) buys Duck (Beijing)
        (hour(0), 2, at(20)),  # Lily (Shanghai) buys Dumplings (Shanghai)
        (hour(0), 2, at(30)),  # Jack again: still two users
        (hour(1), 1, at(70)),  # Mike (Beijing) buys Duck (Beijing)
    ]
    assert final_values(out["same-region-buyers-per-hour"]) == {hour(0): 2, hour(1): 1}
