"""A stream thread with the record cache on (KIP-63): a hot key's count leaves the task once per commit, and the
flush happens before the input offsets (or, under exactly-once, the transaction) are committed."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import CHANGELOG, OUTPUT, ThreadHarness, latest_counts, new_cluster, produce_events
from kafka_fakes import FakeCluster
from streamapp.processing.stream_thread import StreamThread

HOT = [(2 * i, "red") for i in range(50)]  # 50 even events, all of one color: one hot key


def cached_thread(
    cluster: FakeCluster, tmp_path: Path, cache_bytes: int = 1 << 20
) -> tuple[ThreadHarness, StreamThread]:
    harness = ThreadHarness(
        cluster, tmp_path, **{"commit.interval.ms": 3_600_000, "statestore.cache.max.bytes": cache_bytes}
    )
    thread = harness.start()
    harness.assign_all()
    harness.run(10)
    thread.commit()  # the repartition records reach the broker: the count sub-topology reads them next
    return harness, thread


def test_a_hot_key_gives_one_update_and_one_changelog_record_per_commit(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, HOT)
    harness, thread = cached_thread(cluster, tmp_path)

    harness.run(10)
    assert cluster.records(OUTPUT) == []  # counted, but waiting in the cache
    thread.commit()

    assert [record.timestamp for record in cluster.records(OUTPUT)] == [1_049]
    assert latest_counts(cluster) == {"red": 50}
    assert latest_counts(cluster, CHANGELOG) == {"red": 50}
    assert len(cluster.records(CHANGELOG)) == 1


def test_the_cache_is_flushed_before_the_input_offsets_are_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = new_cluster()
    produce_events(cluster, HOT)
    harness, thread = cached_thread(cluster, tmp_path)
    harness.run(10)
    seen_at_commit: list[int] = []
    commit = harness.consumer.commit

    def recording_commit(*args: object, **kwargs: object) -> object:
        seen_at_commit.append(len(cluster.records(OUTPUT)))
        return commit(*args, **kwargs)

    monkeypatch.setattr(harness.consumer, "commit", recording_commit)

    thread.commit()

    assert seen_at_commit == [1]


def test_a_full_cache_evicts_and_forwards_before_the_commit(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, [(2 * i, color) for i in range(10) for color in ("red", "blue", "green")])
    harness, thread = cached_thread(cluster, tmp_path, cache_bytes=1)  # every put evicts

    harness.run(10)
    thread.commit()

    assert len(cluster.records(OUTPUT)) == 30  # one update per record, as with the cache off
    assert latest_counts(cluster) == {"red": 10, "blue": 10, "green": 10}


def test_a_cached_count_restored_from_its_changelog_continues_from_the_committed_total(tmp_path: Path) -> None:
    cluster = new_cluster()
    produce_events(cluster, HOT)
    harness, thread = cached_thread(cluster, tmp_path / "first")
    harness.run(10)
    thread.commit()
    thread.tasks.close_all(clean=True)

    produce_events(cluster, HOT[:10])
    again, thread = cached_thread(cluster, tmp_path / "second")  # empty state dir: a full restore
    again.run(10)
    thread.commit()

    assert latest_counts(cluster) == {"red": 60}
    assert again.restore_consumer.records_read == 1  # the one changelog record the first commit wrote
