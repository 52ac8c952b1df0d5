"""Exactly-once under crashes, on the real broker: stream-thread worker processes are SIGKILLed at random
points while input is produced, several times, and the committed output is checked record by record.

The application counts events per colour and 1-second tumbling event-time window (the time comes from a field
of the value: ``timestampExtractor``) through a repartition topic: two sub-topologies, a RocksDB window store
with a changelog, 2 stream threads, 4 partitions. Every (colour, window)'s output is the sequence of its count
updates, so:

- under ``exactly_once_v2`` the ``read_committed`` output of each (colour, window) must be exactly
  ``1, 2, ..., N``: a duplicate (a record counted twice, or an update emitted twice) or a gap (a lost record)
  shows up as a sequence that differs, and the final value must equal the expected count;
- under ``at_least_once`` nothing may be lost: every value ``1..N`` appears and the final value is at least N;
- under ``exactly_once_v2`` with Kafka's default record cache (10 MiB: a window's updates merge per commit, and
  each commit flushes the cache inside its transaction) the committed updates of each (colour, window) only grow
  and end at exactly N: a cached count of an aborted transaction that survived the kill, or was counted again,
  would overshoot or go back. Under both exactly-once runs the window store's changelog also ends at N per
  window (what a restore rebuilds the store from).

The kill points are random (seeded; the seed is printed and in every assertion message; set ``EOS_KILL_SEED``
to replay one). Group protocol ``classic`` with static membership: a killed worker's replacement takes its
partitions back at once (docs/adr/0001-assignment.md), so five kills fit in about a minute and a half.
"""

from __future__ import annotations

import os
import random
import signal
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from streamapp_harness import (
    KafkaTestClient,
    StreamAppInstance,
    expected_windowed_color_counts,
    timed_color_events,
    unique,
    wait_for,
    windowed_count_by_color_topology,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
KILLS = 5
EVENTS = 12_000
BATCH = 100
BATCH_PAUSE_S = 0.4
"""About 45 s of input: the kills happen while it is produced."""


class _InputProducer(threading.Thread):
    """Produces ``color_events(0, EVENTS)`` in batches, paced, from a background thread."""

    def __init__(self, kafka: KafkaTestClient, topic: str) -> None:
        super().__init__(daemon=True, name="input-producer")
        self.kafka, self.topic = kafka, topic
        self.events = timed_color_events(0, EVENTS)
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for start in range(0, len(self.events), BATCH):
                self.kafka.produce(self.topic, self.events[start : start + BATCH])
                self.produced = start + BATCH
                time.sleep(BATCH_PAUSE_S)
        except BaseException as exc:  # surfaced by the test
            self.error = exc


@dataclass(frozen=True)
class _KilledRun:
    """What ``_run_with_kills`` ran: the application id, its output topic, the expected count per output key and
    the measurements (seed, kills, duration) every assertion message carries."""

    app: str
    output: str
    expected: dict[bytes, int]
    measured: dict[str, Any]


def _run_with_kills(
    kafka: KafkaTestClient,
    workdir: Path,
    instances: list[StreamAppInstance],
    guarantee: str,
    seed: int,
    record_cache: bool = False,
) -> _KilledRun:
    """Start the app, produce the input while killing workers, wait for the final counts. Without
    ``record_cache`` every update of a window is checked, so the cache (which merges a window's updates per
    commit, Kafka's CachingWindowStore) is off: one output per counted record; with it, Kafka's default size."""
    rng = random.Random(seed)
    app = unique(f"eos-kill-{guarantee[:3]}{'-cache' if record_cache else ''}")
    source, output = unique("events"), unique("counts")
    kafka.create_topics({source: PARTITIONS, output: PARTITIONS})
    config: dict[str, Any] = {
        "application.id": app,
        "bootstrap.servers": kafka.bootstrap,
        "num.stream.threads": 2,
        "processing.guarantee": guarantee,
        "group.protocol": "classic",
        "state.dir": str(workdir / "state"),
    }
    if not record_cache:
        config["statestore.cache.max.bytes"] = 0
    topology = windowed_count_by_color_topology([source], output)
    instance = StreamAppInstance(workdir, topology, config, instance_id=f"{app}-0")
    instances.append(instance.start())
    instance.wait_ready()
    producer = _InputProducer(kafka, source)
    started = time.monotonic()
    producer.start()
    kills: list[tuple[float, int, int]] = []
    for _ in range(KILLS):
        time.sleep(rng.uniform(1.0, 6.0))
        instance.wait_ready(180)
        workers = instance.status()["workers"]
        victim = workers[rng.randrange(len(workers))]
        restarts = int(victim["restarts"])
        os.kill(int(victim["pid"]), signal.SIGKILL)
        kills.append((round(time.monotonic() - started, 1), int(victim["thread"]), producer.produced))
        wait_for(
            lambda v=victim, r=restarts: instance.status()["workers"][int(v["thread"])]["restarts"] > r,
            60,
            f"the supervisor to restart worker {victim['thread']} (seed {seed})",
        )
    producer.join(300)
    assert producer.error is None, f"producing the input failed: {producer.error!r}"
    assert not producer.is_alive()
    expected = expected_windowed_color_counts(producer.events)
    exact = guarantee == "exactly_once_v2"

    def caught_up() -> bool:
        latest = _latest(kafka, output)
        if exact:
            return latest == expected
        return set(latest) == set(expected) and all(latest[k] >= n for k, n in expected.items())

    wait_for(
        caught_up,
        240,
        f"the final counts in {output} (seed {seed}, kills {kills}, log {instance.log_file})",
        2.0,
    )
    measured = {"seed": seed, "kills": kills, "seconds": round(time.monotonic() - started, 1)}
    instance.wait_ready(120)
    assert instance.stop() == 0
    return _KilledRun(app, output, expected, measured)


def _latest(kafka: KafkaTestClient, topic: str) -> dict[bytes, int]:
    return {key: values[-1] for key, values in _updates_per_key(kafka, topic).items()}


def _updates_per_key(kafka: KafkaTestClient, topic: str) -> dict[bytes, list[int]]:
    """The committed output values of each key (colour + window start), in offset order (a key lives in one
    partition)."""
    updates: dict[bytes, list[int]] = {}
    for _, _, key, value in sorted(kafka.read_committed(topic)):
        assert key is not None and value is not None
        updates.setdefault(key, []).append(struct.unpack(">q", value)[0])
    return updates


def _assert_changelog_exact(kafka: KafkaTestClient, run: _KilledRun) -> None:
    """The committed changelog of the window store ends at the expected count of every window: its key is the
    output key (colour + window start) and a 4-byte seqnum, its value ends with the count (Kafka's layout)."""
    latest: dict[bytes, int] = {}
    for _, _, key, value in sorted(kafka.read_committed(f"{run.app}-window-counts-changelog")):
        assert key is not None and value is not None
        latest[key[:-4]] = struct.unpack(">q", value[-8:])[0]
    wrong = {_describe(key): (latest.get(key), n) for key, n in run.expected.items() if latest.get(key) != n}
    assert not wrong and set(latest) == set(run.expected), f"changelog (got, expected): {wrong}; {run.measured}"


def _describe(key: bytes) -> str:
    return f"{key[:-8].decode()}@{struct.unpack('>q', key[-8:])[0]}"


def _seed() -> int:
    seed = int(os.environ.get("EOS_KILL_SEED", str(time.time_ns() % 1_000_000)))
    print(f"EOS kill test seed: {seed}")
    return seed


def test_exactly_once_output_has_every_update_exactly_once_after_repeated_sigkills(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    run = _run_with_kills(kafka, workdir, instances, "exactly_once_v2", _seed())
    updates = _updates_per_key(kafka, run.output)
    assert set(updates) == set(run.expected), run.measured
    for key, count in sorted(run.expected.items()):
        sequence = updates[key]
        assert sequence == list(range(1, count + 1)), (
            f"window {_describe(key)}: {len(sequence)} committed updates for {count} records; first divergence at "
            f"index {next((i for i, v in enumerate(sequence) if v != i + 1), len(sequence))}; {run.measured}"
        )
    _assert_changelog_exact(kafka, run)
    print(f"EOS kill test: {run.measured}, {sum(run.expected.values())} committed updates, all exact")


def test_exactly_once_cached_counts_are_exact_after_repeated_sigkills_with_the_default_record_cache(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    """The same kills with Kafka's default record cache: each commit flushes the cached windows inside its
    transaction, so a kill loses the cache with the open transaction and the restarted worker counts again from
    the committed offsets and changelog. Every window's committed updates grow strictly to exactly its count."""
    run = _run_with_kills(kafka, workdir, instances, "exactly_once_v2", _seed(), record_cache=True)
    updates = _updates_per_key(kafka, run.output)
    assert set(updates) == set(run.expected), run.measured
    for key, count in sorted(run.expected.items()):
        sequence = updates[key]
        assert sequence == sorted(set(sequence)) and sequence[-1] == count, (
            f"window {_describe(key)}: committed updates {sequence} for {count} records (a repeated, decreasing or "
            f"overshooting value is a count of an aborted transaction kept or counted twice); {run.measured}"
        )
    committed, counted = sum(len(sequence) for sequence in updates.values()), sum(run.expected.values())
    assert committed < counted / 2, f"{committed} committed updates for {counted} records: the cache did not merge"
    _assert_changelog_exact(kafka, run)
    print(f"EOS kill test with the record cache: {run.measured}, {committed} committed updates for {counted} records")


def test_at_least_once_output_loses_nothing_after_repeated_sigkills(
    kafka: KafkaTestClient, workdir: Path, instances: list[StreamAppInstance]
) -> None:
    run = _run_with_kills(kafka, workdir, instances, "at_least_once", _seed())
    updates = _updates_per_key(kafka, run.output)
    duplicates = 0
    for key, count in sorted(run.expected.items()):
        values = updates[key]
        assert set(range(1, count + 1)) <= set(values), f"window {_describe(key)}: an update is missing; {run.measured}"
        assert values[-1] >= count, run.measured
        duplicates += len(values) - len(set(values))
    print(f"ALOS kill test: {run.measured}, {duplicates} repeated updates (allowed under at-least-once)")
