"""The record cache never changes what is counted, on the real broker, while tasks move between stream threads and
instances (issue 22): Kafka Streams' guarantee that caching only merges updates, so at-least-once may duplicate and
never lose, and exactly-once stays exact.

The topology is the issue's: ``table(carriers)``; ``stream(flights) -> filter -> select_key(carrier) -> join(carriers)``
(the DSL repartitions the stream side first) ``-> group_by(airline name) -> count -> to_stream -> to(out)``, with
Kafka's default record cache (10 MiB) in front of the carriers table and the count, 2 stream threads, 4 partitions.
While the input flows, a second ``streamapp run`` instance (2 threads) joins the group and leaves it, so tasks are
revoked, moved and re-created on both instances.

The input comes in waves: each wave adds new carriers to the table, and a second later flights of every carrier
known so far. A stream-table join must see a table update as soon as its task processed it, whether or not the
cache has flushed it yet (Kafka's ``KStreamKTableJoinProcessor`` reads the table through its ``KTableValueGetter``,
which reads the cached store): a join that waits for the flush drops the flights of a new carrier that arrive
before the next commit (the shortfall of issue 22). Every count is then checked in the output and in the count
store's changelog (what a restore rebuilds the store from): exact under ``exactly_once_v2``, never lower under
``at_least_once``.
"""

from __future__ import annotations

import signal
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from streamapp_harness import KafkaTestClient, StreamAppInstance, unique

pytestmark = pytest.mark.integration

PARTITIONS = 4
WAVES = 8
CARRIERS_PER_WAVE = 4
FLIGHTS_PER_WAVE = 400
AIRLINES = 5
TABLE_TO_STREAM_S = 1.0
"""Between a wave's carriers and its flights: the join task has fetched and processed the carriers by then (it
waits for a partition whose fetched lag is positive), so only the cache can hide them from the join."""
COMMIT_INTERVAL_MS = 3000
"""Longer than ``TABLE_TO_STREAM_S``: most waves' flights reach the join before its task commits again."""
SECOND_JOINS_AT_WAVE, SECOND_LEAVES_AT_WAVE = 2, 5


def carried_flights_topology(carriers: str, flights: str, output: str) -> dict[str, Any]:
    """The issue's topology (what ``StreamsBuilder`` builds for it: a ``table``, a repartitioned stream-table join,
    a stream ``group_by`` and a ``count`` into ``flights-per-airline``)."""
    functions = "integration_functions"
    return {
        "nodes": [
            {"name": "carriers", "type": "table", "topics": [carriers], "keySerde": "string", "valueSerde": "json",
             "store": "carriers-store"},
            {"name": "flights", "type": "source", "topics": [flights], "keySerde": "string", "valueSerde": "json"},
            {"name": "kept", "type": "filter", "input": "flights", "predicate": f"{functions}:not_multiple_of_three"},
            {"name": "by-carrier", "type": "select_key", "input": "kept", "mapper": f"{functions}:carrier"},
            {"name": "with-airline-left", "type": "repartition", "input": "by-carrier", "keySerde": "string",
             "valueSerde": "json", "dropNullKeys": True},
            {"name": "with-airline", "type": "stream_table_join", "inputs": ["with-airline-left", "carriers"],
             "joiner": f"{functions}:with_airline", "join": "inner", "store": "with-airline-store"},
            {"name": "per-airline-key", "type": "select_key", "input": "with-airline",
             "mapper": f"{functions}:airline"},
            {"name": "per-airline", "type": "repartition", "input": "per-airline-key", "keySerde": "string",
             "valueSerde": "json", "dropNullKeys": True},
            {"name": "count", "type": "count", "input": "per-airline", "store": "flights-per-airline"},
            {"name": "changes", "type": "to_stream", "input": "count"},
            {"name": "out", "type": "sink", "input": "changes", "topic": output, "keySerde": "string",
             "valueSerde": "long"},
        ],
        "stores": [
            {"name": "carriers-store", "type": "key_value", "keySerde": "string", "valueSerde": "json"},
            {"name": "with-airline-store", "type": "key_value", "keySerde": "string", "valueSerde": "json"},
            {"name": "flights-per-airline", "type": "key_value", "keySerde": "string", "valueSerde": "long"},
        ],
    }  # fmt: skip


def _carrier(index: int) -> str:
    return f"C{index:02d}"


def _airline(carrier_index: int) -> str:
    return f"airline-{carrier_index % AIRLINES}"


def _produce_waves(
    kafka: KafkaTestClient, carriers: str, flights: str, second: StreamAppInstance
) -> tuple[dict[str, int], list[str]]:
    """Produce the waves (starting and stopping ``second`` on the way); returns the expected count per airline and
    what happened when (for assertion messages)."""
    expected: dict[str, int] = {}
    events: list[str] = []
    started = time.monotonic()
    n = 0
    for wave in range(WAVES):
        if wave == SECOND_JOINS_AT_WAVE:
            second.start().wait_ready()  # in the group with tasks: it leaves with a revocation, not a timeout
            events.append(f"{time.monotonic() - started:.1f}s second instance ready")
        if wave == SECOND_LEAVES_AT_WAVE:
            assert second.process is not None
            second.process.send_signal(signal.SIGTERM)  # leaves the group (clean shutdown) while the input flows
            events.append(f"{time.monotonic() - started:.1f}s second instance stopping")
        known = range((wave + 1) * CARRIERS_PER_WAVE)
        new = known[wave * CARRIERS_PER_WAVE :]
        kafka.produce(carriers, [(_carrier(i), {"name": _airline(i)}) for i in new])
        time.sleep(TABLE_TO_STREAM_S)
        batch = []
        for _ in range(FLIGHTS_PER_WAVE):
            index = known[n % len(known)]
            batch.append((f"k{n}", {"n": n, "carrier": _carrier(index)}))
            if n % 3 != 0:
                expected[_airline(index)] = expected.get(_airline(index), 0) + 1
            n += 1
        kafka.produce(flights, batch)
    events.append(f"{time.monotonic() - started:.1f}s input produced")
    return expected, events


def _changelog_counts(kafka: KafkaTestClient, topic: str) -> dict[str, int]:
    """The last count per airline in the count store's changelog (plain longs: what a restore applies)."""
    latest: dict[str, int] = {}
    for _, _, key, value in sorted(kafka.read_committed(topic)):
        assert key is not None
        if value is not None:
            latest[key.decode()] = struct.unpack(">q", value[-8:])[0]
    return latest


def _unconsumed(kafka: KafkaTestClient, app: str, topics: list[str], exact: bool) -> dict[str, tuple[int, int]]:
    """The partitions of ``topics`` whose end the group ``app`` has not committed yet, with the committed and the end
    offset (under exactly-once the end of an internal topic may lie a few transaction markers past the last
    record: there the last record is read with a ``read_committed`` consumer)."""
    group = ConsumerGroupTopicPartitions(app)
    (future,) = kafka.admin.list_consumer_group_offsets([group]).values()
    committed = {(tp.topic, tp.partition): tp.offset for tp in future.result(10).topic_partitions}
    behind: dict[str, tuple[int, int]] = {}
    for topic in topics:
        ends = kafka.end_offsets(topic)
        if exact and topic.startswith(app):
            ends = _last_record_ends(kafka, topic, ends)
        for partition, end in ends.items():
            offset = committed.get((topic, partition), -1)
            if end > 0 and offset < end:
                behind[f"{topic}-{partition}"] = (offset, end)
    return behind


def _last_record_ends(kafka: KafkaTestClient, topic: str, ends: dict[int, int]) -> dict[int, int]:
    """Per partition, the offset after its last committed record (0 when it has none)."""
    last: dict[int, int] = dict.fromkeys(ends, 0)
    for partition, offset, _, _ in kafka.read_committed(topic):
        last[partition] = max(last[partition], offset + 1)
    return last


def _wait_until_counted(
    kafka: KafkaTestClient, app: str, topics: list[str], exact: bool, timeout_s: float = 120
) -> None:
    """Wait until the group has committed all of its input and internal topics (all counts final)."""
    deadline = time.monotonic() + timeout_s
    while behind := _unconsumed(kafka, app, topics, exact):
        assert time.monotonic() < deadline, f"the group {app} did not commit the end of {behind} in {timeout_s} s"
        time.sleep(1.0)


def _shortfall(counts: dict[str, int], expected: dict[str, int]) -> dict[str, int]:
    return {k: n - counts.get(k, 0) for k, n in sorted(expected.items()) if counts.get(k, 0) < n}


def _run(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance], guarantee: str
) -> tuple[dict[str, int], dict[str, int], dict[str, int], str]:
    """Run the waves through two instances; returns the expected counts, the final output and changelog counts and
    a description of the run."""
    app = unique(f"cache-moves-{guarantee[:3]}")
    carriers, flights, output = unique("carriers"), unique("flights"), unique("per-airline")
    kafka.create_topics({carriers: PARTITIONS, flights: PARTITIONS, output: PARTITIONS})
    topology = carried_flights_topology(carriers, flights, output)
    config: dict[str, Any] = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.stream.threads": 2,
        "processing.guarantee": guarantee,
        "commit.interval.ms": COMMIT_INTERVAL_MS,
    }
    first = StreamAppInstance(workdir / "first", topology, {**config, "state.dir": str(workdir / "first-state")})
    second = StreamAppInstance(workdir / "second", topology, {**config, "state.dir": str(workdir / "second-state")})
    instances.extend([first.start(), second])
    first.wait_ready()
    started = time.monotonic()
    expected, events = _produce_waves(kafka, carriers, flights, second)
    exact = guarantee == "exactly_once_v2"
    internal = [f"{app}-with-airline-left-repartition", f"{app}-per-airline-repartition"]
    _wait_until_counted(kafka, app, [carriers, flights, *internal], exact)
    counts = kafka.latest_longs(output)
    events.append(f"{time.monotonic() - started:.1f}s counted")
    assert second.stop() == 0, second.log_tail()
    first.assert_running()
    assert first.stop() == 0, first.log_tail()
    changelog = _changelog_counts(kafka, f"{app}-flights-per-airline-changelog")
    described = f"{guarantee}, {sum(expected.values())} flights counted; {'; '.join(events)}; logs {workdir}"
    return expected, counts, changelog, described


def test_at_least_once_counts_never_fall_short_with_the_default_cache_while_instances_join_and_leave(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    expected, counts, changelog, run = _run(kafka, workdir, instances, "at_least_once")
    assert not _shortfall(counts, expected), f"output short by {_shortfall(counts, expected)}; {run}"
    assert not _shortfall(changelog, expected), f"changelog short by {_shortfall(changelog, expected)}; {run}"
    assert set(counts) == set(changelog) == set(expected), run


def test_exactly_once_counts_are_exact_with_the_default_cache_while_instances_join_and_leave(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    expected, counts, changelog, run = _run(kafka, workdir, instances, "exactly_once_v2")
    assert counts == expected, f"output short by {_shortfall(counts, expected)}; got {counts}; {run}"
    assert changelog == expected, f"changelog short by {_shortfall(changelog, expected)}; got {changelog}; {run}"
