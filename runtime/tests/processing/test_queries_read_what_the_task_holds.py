"""A stream thread's answers to interactive queries (``streamapp.processing.queries.answer``) from real tasks of
the TopologyTestDriver (RocksDB stores, the record cache on): a running active task is read through its record
cache; a restoring task's and a standby's answers are labelled; partitions the thread does not hold are left out."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamapp import StreamsBuilder
from streamapp.dsl.windows import TimeWindows
from streamapp.processing.queries import LocalQuery, answer
from streamapp.processing.standby import StandbyTask
from streamapp.processing.task import StreamTask, TaskState
from streamapp.query.requests import KeyQuery, RangeQuery, WindowKeyQuery, WindowRangeQuery
from streamapp.testing import TopologyTestDriver


def counts() -> StreamsBuilder:
    builder = StreamsBuilder()
    events = builder.stream("events", key_serde="string", value_serde="string", name="events")
    events.group_by_key().count(name="count", store="counts")
    events.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 100)).count(name="windowed", store="wins")
    return builder


@pytest.fixture
def driver() -> Iterator[TopologyTestDriver]:
    with TopologyTestDriver(counts(), partitions={"events": 1}) as driver:
        events = driver.create_input_topic("events")
        for key, ts in [("a", 1), ("b", 2), ("a", 3), ("c", 12), ("a", 15)]:
            events.pipe_input(key, "x", timestamp_ms=ts)
        yield driver


def _task(driver: TopologyTestDriver) -> StreamTask:
    (task,) = driver.tasks()
    return task


def _ask(driver: TopologyTestDriver, store: str, query: object, standbys: dict | None = None) -> list:
    task = _task(driver)
    request = LocalQuery(store, task.id.subtopology, query, (0, 1))  # type: ignore[arg-type]
    return answer(request, driver.description, {task.id: task}, standbys or {})


def test_a_running_task_answers_key_and_range_queries_as_active_with_its_input_position(
    driver: TopologyTestDriver,
) -> None:
    (key,) = _ask(driver, "counts", KeyQuery("a"))
    assert (key.partition, key.source, key.result, key.stale) == (0, "active", 3, False)
    assert key.position == {"events": {0: 4}}, "the offset of the last input record processed"
    (everything,) = _ask(driver, "counts", RangeQuery())
    assert everything.result == [["a", 3], ["b", 1], ["c", 1]]
    (bounded,) = _ask(driver, "counts", RangeQuery("b", "c"))
    assert bounded.result == [["b", 1], ["c", 1]]
    (missing,) = _ask(driver, "counts", KeyQuery("zz"))
    assert missing.result is None and missing.ok


def test_an_active_task_is_read_through_its_record_cache(driver: TopologyTestDriver) -> None:
    """Kafka's IQ reads the caching layer: a write waiting in the cache (not committed) is in the answer."""
    store = _task(driver).read_store("counts")
    assert store.cached
    store.put("a", 99)
    store.put("d", 7)
    assert _task(driver).stores["counts"].inner.get(b"d") is None, "the write waits in the cache"
    (key,) = _ask(driver, "counts", KeyQuery("a"))
    assert key.result == 99
    (everything,) = _ask(driver, "counts", RangeQuery())
    assert everything.result == [["a", 99], ["b", 1], ["c", 1], ["d", 7]]


def test_window_queries_return_each_window_with_its_start_and_end(driver: TopologyTestDriver) -> None:
    (one_key,) = _ask(driver, "wins", WindowKeyQuery("a", 0, 100))
    assert one_key.result == [["a", 0, 10, 2], ["a", 10, 20, 1]]
    (early,) = _ask(driver, "wins", WindowRangeQuery(0, 5))
    assert sorted(early.result) == [["a", 0, 10, 2], ["b", 0, 10, 1]]
    (of_key,) = _ask(driver, "wins", WindowRangeQuery(key="c"))
    assert of_key.result == [["c", 10, 20, 1]]


def test_a_restoring_task_answers_labelled_stale_with_its_changelog_position(driver: TopologyTestDriver) -> None:
    task = _task(driver)
    task.state = TaskState.RESTORING
    (key,) = _ask(driver, "counts", KeyQuery("a"))
    assert (key.source, key.stale, key.result) == ("restoring", True, 3)
    changelog = task.stores["counts"].changelog
    assert key.position == {changelog.topic: {changelog.partition: task.stores["counts"].changelog_offset()}}
    (windows,) = _ask(driver, "wins", WindowKeyQuery("a", 0, 100))
    assert (windows.source, windows.result) == ("restoring", [["a", 0, 10, 2], ["a", 10, 20, 1]])


def test_a_standby_answers_labelled_stale_and_unheld_partitions_are_left_out(driver: TopologyTestDriver) -> None:
    task = _task(driver)
    standby = StandbyTask(task.state_manager)
    request = LocalQuery("counts", task.id.subtopology, KeyQuery("b"), (0, 3))
    (only,) = answer(request, driver.description, {}, {task.id: standby})
    assert (only.partition, only.source, only.stale, only.result) == (0, "standby", True, 1)
    assert answer(request, driver.description, {}, {}) == []
