"""The conformance harness compares the final contents of every store a task keeps, not only the outputs: each
store's changelog read to its end (what a restore rebuilds the store from), raw bytes and timestamps. No broker:
the comparison itself, on hand-made contents."""

from __future__ import annotations

import pytest
from conformance.harness import assert_same_stores, store_changelogs, store_contents
from conformance.join_functions import pair, user_of
from streamapp import StreamsBuilder


def test_a_store_ends_with_each_keys_last_changelog_value_and_a_tombstone_removes_the_key() -> None:
    records = [(0, b"a", b"1", 10), (0, b"b", b"1", 11), (0, b"a", b"2", 12), (0, b"b", None, 13), (1, b"a", b"9", 14)]

    assert store_contents(records) == {(0, b"a"): (b"2", 12), (1, b"a"): (b"9", 14)}


def test_stores_that_end_differently_fail_the_comparison_naming_the_store_and_the_key() -> None:
    driver = {"{application_id}-counts-changelog": {(0, b"UA"): (b"2", 5_000)}}
    same = {"{application_id}-counts-changelog": {(0, b"UA"): (b"2", 5_000)}}
    later = {"{application_id}-counts-changelog": {(0, b"UA"): (b"2", 6_000)}}

    assert_same_stores(driver, same, "broker")
    with pytest.raises(AssertionError, match=r"counts-changelog', partition 0 key b'UA'.*5000.*6000"):
        assert_same_stores(driver, later, "broker")
    with pytest.raises(AssertionError, match="spark with None"):
        assert_same_stores(driver, {}, "spark")


def test_every_store_a_task_keeps_is_compared_but_not_a_global_store() -> None:
    builder = StreamsBuilder()
    users = builder.global_table("users", store="users-store", key_serde="string", value_serde="json", name="users")
    (
        builder.stream("orders", key_serde="string", value_serde="json", name="orders")
        .join(users, user_of, pair, name="enrich")
        .group_by_key(key_serde="string", value_serde="json")
        .count(store="counts", name="count")
    )

    assert store_changelogs(builder.build()) == ["{application_id}-counts-changelog"]
