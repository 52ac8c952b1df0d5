"""The conformance harness compares the final contents of every store a task keeps, not only the outputs: each
store's changelog read to its end (what a restore rebuilds the store from), raw bytes and timestamps. No broker:
the comparison itself, on hand-made contents."""

from __future__ import annotations

import pytest
from conformance.harness import (
    assert_same_stores,
    restored_stores,
    restored_window_contents,
    store_changelogs,
    store_contents,
)
from conformance.join_functions import pair, user_of
from streamapp import StreamsBuilder, TimeWindows


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


def _window_key(key: bytes, start: int) -> bytes:
    return key + start.to_bytes(8, "big") + (0).to_bytes(4, "big")


def test_a_window_the_stores_retention_expired_by_the_end_is_left_out_of_the_restored_contents() -> None:
    """A window store's observed stream time is the largest window start (``streamapp.state.window_store``);
    a window starting before ``observed - retention`` is hidden, so an engine that did not write it ends with the
    same restored store, per partition."""
    contents = {
        (0, _window_key(b"a", 0)): (b"1", 10),
        (0, _window_key(b"a", 5_000)): (b"1", 5_010),
        (0, _window_key(b"b", 9_000)): (b"1", 9_010),
        (1, _window_key(b"a", 0)): (b"1", 20),
    }

    assert restored_window_contents(contents, 4_000) == {
        (0, _window_key(b"a", 5_000)): (b"1", 5_010),
        (0, _window_key(b"b", 9_000)): (b"1", 9_010),
        (1, _window_key(b"a", 0)): (b"1", 20),
    }
    assert restored_window_contents(contents, 9_000) == contents


def test_stores_compared_as_restored_ignore_an_expired_window_but_not_a_live_one() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("clicks", key_serde="string", value_serde="string", name="clicks")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(1_000))
        .count(store="counts", name="count")
    )
    description = builder.build()
    name = store_changelogs(description)[0]
    streaming = {name: {(0, _window_key(b"a", 0)): (b"1", 10), (0, _window_key(b"a", 5_000)): (b"1", 5_010)}}
    replay = {name: {(0, _window_key(b"a", 5_000)): (b"1", 5_010)}}
    wrong = {name: {(0, _window_key(b"a", 5_000)): (b"2", 5_010)}}

    assert_same_stores(restored_stores(description, streaming), restored_stores(description, replay), "spark")
    with pytest.raises(AssertionError, match="counts-changelog"):
        assert_same_stores(restored_stores(description, streaming), restored_stores(description, wrong), "spark")
    with pytest.raises(AssertionError, match="spark with None"):
        assert_same_stores(streaming, replay, "spark")
