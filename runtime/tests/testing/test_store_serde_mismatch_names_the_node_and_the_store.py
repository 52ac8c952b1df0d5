"""A value an aggregation's store serde does not fit fails the record with an error naming the aggregation's node
and its store (as a sink names itself and its topic), with the record cache off and on: Kafka's ``StateSerdes``
``ClassCastException`` message, plus where it happened."""

from __future__ import annotations

from typing import Any

import pytest
from streamapp import SessionWindows, SlidingWindows, StreamsBuilder, TimeWindows
from streamapp.processing.errors import ProcessingError
from streamapp.processors.base import StoreSerializationError
from streamapp.testing import TopologyTestDriver

CACHE = {"off": {"statestore.cache.max.bytes": 0}, "on": {}}


def empty_set() -> dict[str, int]:
    return {}


def add_word(key: Any, value: str, words: dict[str, int]) -> dict[str, int]:
    return {**words, value: words.get(value, 0) + 1}


def remove_word(key: Any, value: str, words: dict[str, int]) -> dict[str, int]:
    return {word: n for word, n in words.items() if word != value}


def concat(aggregate: str, value: str) -> str:
    return aggregate + value


def word_of(key: Any, value: str) -> tuple[str, str]:
    return key, value


def failure(builder: StreamsBuilder, config: dict[str, Any], source: str) -> StoreSerializationError:
    """The cause of the ProcessingError the first record fails with."""
    with TopologyTestDriver(builder, config) as driver, pytest.raises(ProcessingError) as failed:
        driver.create_input_topic(source).pipe_input("k", "a", 1_000)
    cause = failed.value.__cause__
    assert isinstance(cause, StoreSerializationError), repr(cause)
    return cause


@pytest.mark.parametrize("cache", CACHE)
def test_a_stream_aggregate_whose_store_serde_does_not_fit_its_aggregate_names_the_node_and_the_store(
    cache: str,
) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("words", key_serde="string", value_serde="string", name="words")
        .group_by_key()
        .aggregate(empty_set, add_word, value_serde="long", name="word-sets", store="word-sets-store")
        .to_stream(name="changes")
        .to("word-sets", name="out", value_serde="json")
    )

    error = failure(builder, CACHE[cache], "words")

    assert "node 'word-sets'" in str(error)
    assert "store 'word-sets-store'" in str(error)
    assert "(dict): long serde expects int, got dict" in str(error)
    assert "value_serde=" in str(error)  # where to put the right serde


@pytest.mark.parametrize("cache", CACHE)
def test_a_grouped_table_aggregate_whose_store_serde_does_not_fit_names_the_node_and_the_store(cache: str) -> None:
    builder = StreamsBuilder()
    (
        builder.table("words", key_serde="string", value_serde="string", name="words")
        .group_by(word_of, name="by-key")
        .aggregate(empty_set, add_word, remove_word, value_serde="double", name="table-sets", store="table-sets-store")
        .to_stream(name="changes")
        .to("table-sets", name="out", value_serde="json")
    )

    error = failure(builder, CACHE[cache], "words")

    assert "node 'table-sets'" in str(error)
    assert "store 'table-sets-store'" in str(error)


def test_a_reduce_whose_store_serde_does_not_fit_its_values_names_the_node_and_the_store() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("words", key_serde="string", value_serde="string", name="words")
        .group_by_key(value_serde="long")  # the reduce's store takes the grouped stream's value serde
        .reduce(concat, name="concat", store="concat-store")
        .to_stream(name="changes")
        .to("concat", name="out", value_serde="string")
    )

    error = failure(builder, CACHE["off"], "words")

    assert "node 'concat'" in str(error)
    assert "store 'concat-store'" in str(error)
    assert "(str): long serde expects int, got str" in str(error)


def merge_sets(key: Any, left: dict[str, int], right: dict[str, int]) -> dict[str, int]:
    return {**left, **right}


WINDOWS = {
    "time": TimeWindows.of_size_with_no_grace(5_000),
    "sliding": SlidingWindows.of_time_difference_with_no_grace(5_000),
    "session": SessionWindows.of_inactivity_gap_with_no_grace(5_000),
}


def long_windowed_aggregate(builder: StreamsBuilder, windows: str, functions: tuple[Any, ...], name: str) -> None:
    """``words`` aggregated in ``windows`` into the store ``<name>-store`` with ``value_serde="long"``, then sent
    to the topic ``name`` as JSON. ``functions``: the initializer, the aggregator and the session merger."""
    grouped = builder.stream("words", key_serde="string", value_serde="string", name="words").group_by_key()
    by = grouped.windowed_by(WINDOWS[windows])
    aggregate_functions = functions if windows == "session" else functions[:2]
    aggregated = by.aggregate(*aggregate_functions, value_serde="long", name=name, store=f"{name}-store")
    aggregated.to_stream(name="changes").to(name, name="out", value_serde="json")


@pytest.mark.parametrize("cache", CACHE)
@pytest.mark.parametrize("windows", WINDOWS)
def test_a_windowed_aggregate_whose_store_serde_does_not_fit_names_the_node_and_the_store(
    windows: str, cache: str
) -> None:
    builder = StreamsBuilder()
    long_windowed_aggregate(builder, windows, (empty_set, add_word, merge_sets), "windowed-sets")

    error = failure(builder, CACHE[cache], "words")

    assert "node 'windowed-sets'" in str(error)
    assert "store 'windowed-sets-store'" in str(error)
    assert "long serde expects int, got dict" in str(error)


# With the record cache on, a number or a string is serialized only when the cache flushes its entry: at the
# commit after the record (outside it: the error is raised as is, not as the record's ProcessingError) or on an
# eviction (inside the record that evicted). The cached store names itself and the node that writes it.


def empty_string() -> str:
    return ""


def append_word(key: Any, value: str, words: str) -> str:
    return words + value


def merge_strings(key: Any, left: str, right: str) -> str:
    return left + right


def flush_failure(builder: StreamsBuilder, source: str) -> StoreSerializationError:
    """The error the commit after the first record fails with (the record cache on, its default size)."""
    with TopologyTestDriver(builder, CACHE["on"]) as driver, pytest.raises(StoreSerializationError) as failed:
        driver.create_input_topic(source).pipe_input("k", "a", 1_000)
    return failed.value


@pytest.mark.parametrize("flush", ["commit", "eviction"])
def test_a_cached_reduce_whose_store_serde_does_not_fit_a_string_names_the_node_and_the_store_at_the_flush(
    flush: str,
) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("words", key_serde="string", value_serde="string", name="words")
        .group_by_key(value_serde="long")
        .reduce(concat, name="concat", store="concat-store")
        .to_stream(name="changes")
        .to("concat", name="out", value_serde="string")
    )

    if flush == "commit":
        error = flush_failure(builder, "words")
    else:  # a 1-byte cache: every put evicts, inside the record, which fails with it
        error = failure(builder, {"statestore.cache.max.bytes": 1}, "words")

    assert "node 'concat'" in str(error)
    assert "store 'concat-store'" in str(error)
    assert "key 'k'" in str(error)
    assert "(str): long serde expects int, got str" in str(error)
    assert "record cache flushed" in str(error)


@pytest.mark.parametrize("windows", WINDOWS)
def test_a_cached_windowed_aggregate_whose_store_serde_does_not_fit_a_string_names_the_node_and_the_store(
    windows: str,
) -> None:
    builder = StreamsBuilder()
    long_windowed_aggregate(builder, windows, (empty_string, append_word, merge_strings), "windowed-words")

    error = flush_failure(builder, "words")

    assert "node 'windowed-words'" in str(error)
    assert "store 'windowed-words-store'" in str(error)
    assert "key 'k'" in str(error)
    assert "(str): long serde expects int, got str" in str(error)
