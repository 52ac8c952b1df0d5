"""A task that moves to another instance resumes ``EmitStrategy.on_window_close()`` (KIP-825) where its committed
final results stopped: the close time of the last emission travels in the committed offsets' metadata (Kafka's
``ProcessorMetadata`` in ``TopicPartitionMetadata``), so under ``exactly_once_v2`` no window is emitted twice.

A real ``StreamThread`` counts readings in tumbling windows of 10 s with 5 s grace, emitting on window close, over
the in-memory transactional Kafka of ``streamapp.testing`` with RocksDB stores. A first thread (its own state dir)
closes window ``[0, 10 s)`` with a reading at 17 s and commits; a second thread, with an empty state dir (the task
moved: its store is restored from the changelog), processes a reading at 18 s and one at 31 s. The store alone
cannot tell that ``[0, 10 s)`` was emitted: its stream time (largest window start, 10 s) minus grace is before that
window's end, which is why a commit without the metadata (an older runtime's) emits it again.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness import in_memory_thread
from streamapp import EmitStrategy, StreamsBuilder
from streamapp.config import StreamsConfig
from streamapp.dsl.windowed import SessionWindowedKStream
from streamapp.dsl.windows import TimeWindows
from streamapp.kafka.types import TopicPartition
from streamapp.processing.commit_metadata import decode_emitted
from streamapp.processing.stream_thread import StreamThread
from streamapp.testing.cluster import InMemoryCluster, InMemoryProducer
from streamapp.topology import TopologyDescription

APP = "final-results-app"
SECOND = 1000
READINGS, FINALS, STORE = "readings", "window-counts", "counts-store"


def description() -> TopologyDescription:
    builder = StreamsBuilder()
    windowed = (
        builder.stream(READINGS, key_serde="string", value_serde="json", name="readings")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10 * SECOND, 5 * SECOND))
    )
    assert not isinstance(windowed, SessionWindowedKStream)
    counts = windowed.emit_strategy(EmitStrategy.on_window_close()).count(name="counts", store=STORE)
    counts.to_stream(name="count-changes").to(FINALS, name="window-counts-out")
    return TopologyDescription.from_dict(builder.build().to_dict())


def eos_thread(cluster: InMemoryCluster, state_dir: Path, index: int) -> StreamThread:
    """A started ``exactly_once_v2`` thread of the application that commits only when told."""
    config = StreamsConfig.from_mapping(
        {
            "application.id": APP,
            "bootstrap.servers": "in-memory:9092",
            "state.dir": str(state_dir),
            "processing.guarantee": "exactly_once_v2",
            "commit.interval.ms": 3_600_000,
        }
    )
    return in_memory_thread(cluster, config, description(), lambda: InMemoryProducer(cluster, f"{APP}-{index}"))


def read(cluster: InMemoryCluster, thread: StreamThread, *seconds: int) -> None:
    """Produce a reading of ``sensor`` at each of ``seconds``, process them and commit."""
    for at in seconds:
        cluster.append(READINGS, 0, b"sensor", json.dumps({"at": at}).encode(), timestamp=at * SECOND)
    for _ in range(10):
        thread.run_once()
    thread.commit()


def emissions(cluster: InMemoryCluster) -> list[bytes]:
    """The committed final results' windowed keys (key and window start), in order."""
    return [record.key for record in cluster.records(FINALS) if record.key is not None]


def moved_task_emissions(tmp_path: Path, *, drop_metadata: bool) -> tuple[list[bytes], str]:
    """Run the scenario of the module docstring; ``drop_metadata`` commits the first thread's offsets without
    metadata, as an older runtime did. Returns the emissions and the metadata the first thread committed."""
    cluster = InMemoryCluster()
    for topic in (READINGS, FINALS):
        cluster.create_topic(topic, 1)
    first = eos_thread(cluster, tmp_path / "first", 0)
    read(cluster, first, 1, 17)
    first.close(clean=True)
    committed = cluster.committed_metadata[TopicPartition(READINGS, 0)]
    if drop_metadata:
        cluster.committed_metadata.clear()
    second = eos_thread(cluster, tmp_path / "second", 1)
    read(cluster, second, 18, 31)
    second.close(clean=True)
    return emissions(cluster), committed


def test_a_moved_task_resumes_final_results_from_the_committed_close_time_and_emits_no_window_twice(
    tmp_path: Path,
) -> None:
    emitted, committed = moved_task_emissions(tmp_path, drop_metadata=False)

    assert decode_emitted(committed) == {STORE: 12 * SECOND}  # 17 s - 5 s grace: window [0, 10 s) emitted
    assert len(emitted) == 2, emitted  # [0, 10 s) by the first thread, [10 s, 20 s) by the second
    assert len(set(emitted)) == len(emitted)


def test_without_commit_metadata_a_moved_task_falls_back_to_its_store_and_emits_the_last_window_again(
    tmp_path: Path,
) -> None:
    emitted, _ = moved_task_emissions(tmp_path, drop_metadata=True)

    assert len(emitted) == 3, emitted
    assert emitted[0] == emitted[1]  # [0, 10 s) again: the documented bound of the fallback
